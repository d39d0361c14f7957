#!/usr/bin/env bash
# Builds attn's libFuzzer targets with clang-14 (ASan + UBSan) and runs each for a fixed time on a
# copy of its seed corpus and regression inputs (fuzz/corpus/<target>/, fuzz/repro/<target>/). Exits non-zero on any finding (crash, sanitizer report, leak, uncaught
# exception, timeout, out-of-memory); the reproducers are kept and their paths printed.
#
#   scripts/fuzz.sh                               # every target, 60 s each
#   ATTN_FUZZ_SECONDS=600 scripts/fuzz.sh idx_fuzz
#
# Environment: ATTN_FUZZ_SECONDS (default 60), ATTN_FUZZ_BUILD (build dir, default build-fuzz),
# ATTN_FUZZ_OUT (where corpora, logs and reproducers go; default $ATTN_FUZZ_BUILD/runs/<time>),
# ATTN_FUZZ_JOBS (build parallelism, default 2), ATTN_FUZZ_PARALLEL (targets fuzzed at once, one
# core each; default 1), ATTN_FUZZ_REUSE=1 (ATTN_FUZZ_BUILD already holds the built targets, e.g.
# scripts/test.sh's sanitizer build: neither reconfigure nor rebuild it).
# Needs clang-14, libclang-rt-14-dev, libomp-14-dev.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=${ATTN_FUZZ_BUILD:-$root/build-fuzz}
secs=${ATTN_FUZZ_SECONDS:-60}
jobs=${ATTN_FUZZ_JOBS:-2}
parallel=${ATTN_FUZZ_PARALLEL:-1}
out=${ATTN_FUZZ_OUT:-$build/runs/$(date +%Y%m%d-%H%M%S)}

if [ "$#" -gt 0 ]; then
  targets=("$@")
else
  targets=()
  for src in "$root"/fuzz/*_fuzz.cpp; do targets+=("$(basename "$src" .cpp)"); done
fi

for tool in clang-14 clang++-14; do
  command -v "$tool" >/dev/null || { echo "fuzz.sh: $tool not found: apt-get install clang-14 libclang-rt-14-dev libomp-14-dev" >&2; exit 2; }
done

if [ "${ATTN_FUZZ_REUSE:-0}" != 1 ]; then
  CC=clang-14 CXX=clang++-14 cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DATTN_FUZZ=ON -DATTN_BUILD_TESTS=OFF -DATTN_BUILD_BENCH=OFF -DATTN_BUILD_CLI=OFF >/dev/null
  cmake --build "$build" --target "${targets[@]}" -- -j "$jobs"
fi
for t in "${targets[@]}"; do
  [ -x "$build/fuzz/$t" ] || { echo "fuzz.sh: $build/fuzz/$t not built" >&2; exit 2; }
done

# Recoverable UBSan checks must stop the run too; leaks are findings.
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
export OMP_NUM_THREADS=1

# One target: fuzz a copy of its seeds and of its regression inputs (fuzz/repro/<target>/, the
# reproducers of fixed findings: libFuzzer runs every corpus input first, so a regression is a
# finding before any mutation); the exit code goes to $dir/rc.
fuzz_one() {
  local t=$1 dir=$out/$1 rc=0
  mkdir -p "$dir/corpus" "$dir/artifacts"
  if [ -d "$root/fuzz/corpus/$t" ]; then cp -r "$root/fuzz/corpus/$t/." "$dir/corpus/"; fi
  if [ -d "$root/fuzz/repro/$t" ]; then cp -r "$root/fuzz/repro/$t/." "$dir/corpus/"; fi
  local args=("$dir/corpus" -max_total_time="$secs" -rss_limit_mb=2048 -timeout=30 -print_final_stats=1
              -artifact_prefix="$dir/artifacts/")
  if [ -f "$root/fuzz/$t.dict" ]; then args+=(-dict="$root/fuzz/$t.dict"); fi
  "$build/fuzz/$t" "${args[@]}" >"$dir/log" 2>&1 || rc=$?
  echo "$rc" >"$dir/rc"
}

running=0
for t in "${targets[@]}"; do
  echo "== $t: ${secs} s, corpus $out/$t/corpus, log $out/$t/log"
  fuzz_one "$t" &
  running=$((running + 1))
  if [ "$running" -ge "$parallel" ]; then wait -n || true; running=$((running - 1)); fi
done
wait

status=0
for t in "${targets[@]}"; do
  dir=$out/$t
  rc=$(cat "$dir/rc" 2>/dev/null || echo 255)
  if [ "$rc" -eq 0 ]; then
    echo "-- $t:"
    grep -E '^stat::number_of_executed_units|^#[0-9]+[[:space:]]+DONE' "$dir/log" | tail -2 || true
  else
    status=1
    echo "!! $t: FINDING (exit code $rc); log: $dir/log" >&2
    grep -E 'ERROR: |SUMMARY: |runtime error|Test unit written' "$dir/log" | head -20 >&2 || true
    for f in "$dir"/artifacts/*; do
      [ -e "$f" ] && echo "   reproduce: $build/fuzz/$t $f" >&2
    done
  fi
done
exit $status
