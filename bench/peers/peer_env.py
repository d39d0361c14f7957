"""Imported by every PyTorch peer in bench/peers/ before torch: puts PyTorch's BLAS at its best on this CPU.

Debian's torch 1.13.1 runs its fp32 GEMMs on OpenBLAS 0.3.21, whose kernel choice depends on the CPU
and on OPENBLAS_CORETYPE. These machines' environment sets OPENBLAS_CORETYPE=Haswell (found on 2026-12-01;
not set by anything in this repository), and OpenBLAS 0.3.21 would pick the same AVX2 kernels by itself
on AMD's AVX-512 cores (Zen 4, Zen 5), which it does not know. On the Zen 5 host of 2026-12-01 F.linear
at (197 x 768) . (768 x 3072) ran at 155 GFLOP/s with them and at 282 GFLOP/s with
OPENBLAS_CORETYPE=SkylakeX (the AVX-512 kernels). A peer at its best setting is the fair comparison, so
on an AMD CPU with AVX-512 the peers use SkylakeX whatever the inherited value; ATTN_PEER_OPENBLAS_CORETYPE
chooses another (e.g. Haswell, to measure the peer as the environment leaves it). Intel CPUs with
AVX-512 are detected by OpenBLAS itself; there only ATTN_PEER_OPENBLAS_CORETYPE changes anything.
"""
import os


def _cpu():
    vendor, flags = "", set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("vendor_id") and not vendor:
                    vendor = line.split(":", 1)[1].strip()
                elif line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    break
    except OSError:
        pass
    return vendor, flags


_override = os.environ.get("ATTN_PEER_OPENBLAS_CORETYPE")
if _override:
    os.environ["OPENBLAS_CORETYPE"] = _override
else:
    _vendor, _flags = _cpu()
    if _vendor == "AuthenticAMD" and "avx512f" in _flags:
        os.environ["OPENBLAS_CORETYPE"] = "SkylakeX"

OPENBLAS_CORETYPE = os.environ.get("OPENBLAS_CORETYPE", "(OpenBLAS's own choice)")
