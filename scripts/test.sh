#!/usr/bin/env bash
# The whole test suite: install test packages, build (Release), run every unit test; build the
# examples against the installed package; then ONE clang-14 sanitizer build (ASan + UBSan, plus
# libFuzzer coverage hooks) of the library, the `attn` command and the tests, that runs the same unit
# tests and the CLI tests (long convergence tests left out) and the fuzzers for a bounded time. Each
# stage prints its wall time; docs/ci.md has the measurements.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install_deps.sh --test
jobs=$(nproc)
export ATTN_REF_CACHE="$PWD/build/ref-cache"
mkdir -p "$ATTN_REF_CACHE"

stage_start=$SECONDS
times_file=$(mktemp)
stage_done() {  # wall time of the stage just finished, and the CPU time used so far
  # `times` must run in this shell (in a $(...) subshell its children's times are zero).
  times >"$times_file"
  echo "-- $1: $((SECONDS - stage_start)) s wall (children's user/sys so far: $(tail -1 "$times_file"))"
  stage_start=$SECONDS
}

echo "== layers: no #include goes against the library's layers (scripts/check_layers.sh)"
bash scripts/check_layers.sh --with-headers
echo "== function length: none over 120 lines in src/ and cli/ (scripts/check_function_length.py)"
python3 scripts/check_function_length.py

echo "== [1/3] release build + unit tests"
# The library is -O3 (Release); the test sources -O1 (glue around library calls; same results).
cmake -S . -B build/test -G Ninja -DCMAKE_BUILD_TYPE=Release -DATTN_TEST_COMPILE_OPTIONS=-O1 >/dev/null
cmake --build build/test -j "$jobs"
stage_done "release build"
# Two test binaries at a time: the PyTorch reference cache is written atomically (per-process temp
# names, then rename), and most tests are memory-bound or short, so -j2 on 2 cores saves ~1/3.
# Each test binary records the kernel paths it ran (tests/support/isa_record.cpp) under
# build/test/isa-coverage/; the summary says which paths ran and which this CPU lacks.
rm -rf build/test/isa-coverage
ctest --test-dir build/test --output-on-failure -j "$jobs"
python3 scripts/isa_coverage.py build/test/isa-coverage
stage_done "release tests"

echo "== installed package: examples/ built against find_package(attn)"
cmake --install build/test --prefix build/install >/dev/null
cmake -S examples -B build/examples -G Ninja -DCMAKE_PREFIX_PATH="$PWD/build/install" >/dev/null
cmake --build build/examples -j "$jobs"
./build/examples/train_mlp
./build/examples/classify
stage_done "examples"

echo "== [2/3] ASan + UBSan build (clang-14, also the fuzzers' build) + unit and CLI tests (slow tests excluded)"
# -O1 and line tables only: the usual sanitizer settings, and much quicker to compile than -O2 -g.
# lld links the ~120 sanitized executables about 4x faster than GNU ld (1.2 s against 4.6 s each).
CC=clang-14 CXX=clang++-14 cmake -S . -B build/san -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only -DNDEBUG" -DCMAKE_EXE_LINKER_FLAGS=-fuse-ld=lld \
  -DATTN_SANITIZE=ON -DATTN_FUZZ=ON -DATTN_BUILD_BENCH=OFF -DATTN_BUILD_CLI=ON >/dev/null
cmake --build build/san -j "$jobs"
stage_done "sanitizer build"
# oneDNN's JIT and OpenMP runtime hold allocations for the process lifetime: not our leaks. The CLI
# tests (tests/cli/) run the sanitized `attn` binary, which inherits these options.
ATTN_TEST_SLOW=0 ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir build/san --output-on-failure -j "$jobs"
stage_done "sanitizer tests"

echo "== [3/3] fuzzers"
# Every fuzz/*_fuzz.cpp target (13) x 30 s (ATTN_FUZZ_SECONDS overrides), one per core at once,
# from the build above: ~3.5 min on 2 cores; longer campaigns: scripts/fuzz.sh alone.
if [[ -f scripts/fuzz.sh ]]; then
  ATTN_FUZZ_SECONDS=${ATTN_FUZZ_SECONDS:-30} ATTN_FUZZ_BUILD="$PWD/build/san" ATTN_FUZZ_REUSE=1 \
    ATTN_FUZZ_PARALLEL=${ATTN_FUZZ_PARALLEL:-$jobs} bash scripts/fuzz.sh
fi
stage_done "fuzzers"

echo "attn: all test stages passed"
