#!/usr/bin/env python3
"""Which kernel paths the unit tests ran, from the records the test binaries wrote.

    python3 scripts/isa_coverage.py build/test/isa-coverage

Every test binary writes <dir>/<binary>.txt when it ends (tests/support/isa_record.cpp): a line
"ran <path>" for each kernel path it ran (attn::kernel_paths_run()) and "available <path>" for each one
this CPU has (attn::kernel_path_available()). The paths: attn's own kernels (scalar, avx2, avx512:
attn::Isa) and oneDNN's native bf16 matmul on AVX512-BF16 or AMX. Prints one line per path: ran (by how
many binaries), available but not run, or not available on this CPU (so a run on this machine says
nothing about it). Exits 1 only when there is no record at all.
"""
import os
import sys

PATHS = ["scalar", "avx2", "avx512", "avx512_bf16", "amx"]
LABELS = {"scalar": "scalar", "avx2": "AVX2", "avx512": "AVX-512", "avx512_bf16": "AVX512-BF16 (oneDNN bf16 matmul)",
          "amx": "AMX (oneDNN bf16 matmul)"}


def read_records(folder):
    ran = {p: [] for p in PATHS}
    available = set()
    names = sorted(f for f in os.listdir(folder) if f.endswith(".txt")) if os.path.isdir(folder) else []
    for name in names:
        with open(os.path.join(folder, name)) as f:
            for line in f:
                parts = line.split()
                if len(parts) != 2 or parts[1] not in PATHS:
                    continue
                if parts[0] == "ran":
                    ran[parts[1]].append(name[:-4])
                elif parts[0] == "available":
                    available.add(parts[1])
    return names, ran, available


def main():
    folder = sys.argv[1] if len(sys.argv) > 1 else "build/test/isa-coverage"
    names, ran, available = read_records(folder)
    if not names:
        print(f"ISA coverage: no records in {folder} (did the tests run?)")
        return 1
    print(f"== ISA coverage: kernel paths the tests ran ({len(names)} test binaries recorded, {folder})")
    for p in PATHS:
        if ran[p]:
            state = f"ran in {len(ran[p])} test binaries"
        elif p in available:
            state = "available on this CPU, but NOT run by any test"
        else:
            state = "NOT available on this CPU: not tested here"
        print(f"  {LABELS[p]:34s} {state}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
