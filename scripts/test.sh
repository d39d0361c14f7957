#!/usr/bin/env bash
# The whole test suite: install test packages, build (Release), run every unit test; then the same unit
# tests under ASan + UBSan (long convergence tests left out); then the fuzzers for a bounded time.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install_deps.sh --test
jobs=$(nproc)
export ATTN_REF_CACHE="$PWD/build/ref-cache"
mkdir -p "$ATTN_REF_CACHE"

echo "== [1/3] release build + unit tests"
cmake -S . -B build/test -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build/test -j "$jobs"
ctest --test-dir build/test --output-on-failure -j 1

echo "== installed package: examples/ built against find_package(attn)"
cmake --install build/test --prefix build/install >/dev/null
cmake -S examples -B build/examples -G Ninja -DCMAKE_PREFIX_PATH="$PWD/build/install" >/dev/null
cmake --build build/examples -j "$jobs"
./build/examples/train_mlp
./build/examples/classify

echo "== [2/3] ASan + UBSan build + unit tests (slow tests excluded)"
cmake -S . -B build/asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DATTN_SANITIZE=ON \
  -DATTN_BUILD_BENCH=OFF -DATTN_BUILD_CLI=OFF >/dev/null
cmake --build build/asan -j "$jobs"
# oneDNN's JIT and OpenMP runtime hold allocations for the process lifetime: not our leaks.
ATTN_TEST_SLOW=0 ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir build/asan --output-on-failure -j 1

echo "== [3/3] fuzzers"
# 7 targets x 30 s (ATTN_FUZZ_SECONDS overrides); longer campaigns: scripts/fuzz.sh alone.
if [[ -f scripts/fuzz.sh ]]; then ATTN_FUZZ_SECONDS=${ATTN_FUZZ_SECONDS:-30} bash scripts/fuzz.sh; fi

# The last ctest summary is the release run's; repeat its totals on one line for CI.
echo "attn: all test stages passed"
