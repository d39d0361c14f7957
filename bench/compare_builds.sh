#!/usr/bin/env bash
# Compares the speed of two builds (e.g. before and after a change) benchmark by benchmark, on this
# machine: runs `bench/run_all.sh --quick` on each build, alternated (A then B, then B then A, ...) for
# --rounds rounds, then prints bench/results_table.py's comparison: for each benchmark and case, each
# build's median ratio against its PyTorch peer over the rounds (with the range), its own median figure,
# and B's change against A. The peers run in both builds' rounds, so the ratio moves only when attn does
# or when the machine's speed drifts; "attn change" is attn's own figure, B against A.
#
#   bash bench/compare_builds.sh BUILD_A BUILD_B [--rounds 3] [--labels before,after] [--full]
#
# A build from another commit: git worktree add ../before COMMIT && cmake -S ../before -B ../before/build
# -G Ninja -DCMAKE_BUILD_TYPE=Release (this script builds the bench targets). --full runs the page's
# commands instead of the quick ones (about an hour per build and round). Raw runs and logs go to
# build/bench/compare-<date>/; the table also to its compare.md. Use a quiet machine.
set -euo pipefail
cd "$(dirname "$0")/.."
[[ $# -ge 2 ]] || { echo "usage: bash bench/compare_builds.sh BUILD_A BUILD_B [--rounds N] [--labels A,B] [--full]" >&2; exit 2; }
a=$1 b=$2
shift 2
rounds=3
labels="A,B"
quick=(--quick)
while [[ $# -gt 0 ]]; do
  case $1 in
    --rounds) rounds=$2; shift 2 ;;
    --labels) labels=$2; shift 2 ;;
    --full) quick=(); shift ;;
    *) echo "compare_builds.sh: unknown argument '$1' (expected --rounds N, --labels A,B, --full)" >&2; exit 2 ;;
  esac
done
IFS=, read -r la lb <<<"$labels"
[[ -n $la && -n $lb && $la != "$lb" ]] || { echo "compare_builds.sh: --labels expects two different names, got '$labels'" >&2; exit 2; }
for d in "$a" "$b"; do
  [[ -f "$d/CMakeCache.txt" ]] || { echo "compare_builds.sh: expected a configured build directory, found no $d/CMakeCache.txt" >&2; exit 2; }
done
dir="build/bench/compare-$(date -u +%Y%m%d-%H%M)"
mkdir -p "$dir"
files_a=() files_b=()
run() {  # label build round
  local f="$dir/$1-r$3.jsonl"
  echo "==== round $3: $1 ($2)"
  bash bench/run_all.sh "$2" "${quick[@]}" --no-add --raw "$f" >"$dir/$1-r$3.log" 2>&1 ||
    { echo "compare_builds.sh: the run failed; see $dir/$1-r$3.log" >&2; exit 1; }
  if [[ $1 = "$la" ]]; then files_a+=("$f"); else files_b+=("$f"); fi
}
start=$(date +%s)
for ((r = 1; r <= rounds; ++r)); do
  if (( r % 2 )); then run "$la" "$a" $r; run "$lb" "$b" $r; else run "$lb" "$b" $r; run "$la" "$a" $r; fi
  echo "     $(( ($(date +%s) - start) / 60 )) min so far"
done
python3 bench/results_table.py --compare "$la" "${files_a[@]}" --compare "$lb" "${files_b[@]}" | tee "$dir/compare.md"
