#!/usr/bin/env bash
# Driver of bench/translate_train_bench: attn vs PyTorch translation training on the same
# batches. Usage:
#   bench/translate.sh BUILD_DIR quick        # 30 steps, 50 test sentences: plumbing check (~2 min)
#   bench/translate.sh BUILD_DIR 6min [ARGS]  # attn trains 6 minutes, PyTorch the same steps, beam 4 too
#   bench/translate.sh BUILD_DIR hour [ARGS]  # the 60-minute version
#   bench/translate.sh BUILD_DIR custom ARGS  # any flags of translate_train_bench
#     The hour in two halves (e.g. on two days; the batches depend only on data, vocabulary and seed,
#     and both halves print their FNV-1a hash):
#       bench/translate.sh BUILD_DIR custom --minutes 60 --beam 4 --no-peer --work runs/translate_hour_attn
#       bench/translate.sh BUILD_DIR custom --steps N --peer-only --work runs/translate_hour_peer  # N: the attn half's steps
#   bench/translate.sh BUILD_DIR rnn-hour [ARGS]  # the RNN encoder-decoder with attention for the same
#                                             # hour (RNN_MINUTES=N for another length) (`attn train --model rnn-attention`, same data, split,
#                                             # vocabulary size and token budget; ARGS go to attn train,
#                                             # e.g. --model-config '{"attention": "luong-general"}'):
#                                             # test BLEU with beam 4 and greedy, in
#                                             # runs/translate_rnn_hour/train.log
# Output: the table on stdout (also WORK/bench.log), WORK/results.json, WORK/test_translations.txt;
# WORK is runs/translate_bench_<mode> unless --work is given. Prints the machine load first: numbers taken
# with a load average above the thread count are not comparable.
set -euo pipefail
build=${1:?usage: bench/translate.sh BUILD_DIR quick|6min|hour|custom [ARGS]}
mode=${2:-quick}
shift $(( $# >= 2 ? 2 : $# ))
if [[ "$mode" == rnn-hour ]]; then
  attn="$build/attn"
  [[ -x "$attn" ]] || { echo "translate.sh: $attn not built" >&2; exit 2; }
  work="runs/translate_rnn_hour"
  mkdir -p "$work"
  export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}
  echo "load: $(uptime)" >&2
  # A killed run starts again from its first step (--max-minutes counts one invocation's wall time).
  "$attn" train --model rnn-attention --data bible-en-es --max-minutes "${RNN_MINUTES:-60}" --threads 2 \
    --out "$work" "$@" 2>&1 | tee "$work/train.log" | tail -6
  echo "greedy:" | tee -a "$work/train.log"
  "$attn" eval "$work/checkpoint.safetensors" --beam 1 --threads 2 2>&1 | tee -a "$work/train.log" | tail -2
  exit 0
fi
bin="$build/bench/translate_train_bench"
[[ -x "$bin" ]] || { echo "translate.sh: $bin not built (cmake --build $build --target translate_train_bench)" >&2; exit 2; }
case "$mode" in
  quick) args=(--steps 30 --limit-test 50 --log-every 10) ;;
  6min) args=(--minutes 6 --beam 4) ;;
  hour) args=(--minutes 60 --beam 4) ;;
  custom) args=() ;;
  *) echo "translate.sh: unknown mode '$mode' (quick | 6min | hour | custom | rnn-hour)" >&2; exit 2 ;;
esac
work="runs/translate_bench_$mode"
prev=""
for a in "$@"; do [[ "$prev" == --work ]] && work="$a"; prev="$a"; done
[[ " $* " == *" --work "* ]] || args+=(--work "$work")
mkdir -p "$work"
# The peer runs PyTorch with OMP_WAIT_POLICY=PASSIVE (its best setting); attn gets the same unless the
# caller sets OMP_WAIT_POLICY (libgomp's default spinning loses ~40% on a loaded machine).
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}
echo "load: $(uptime)" >&2
"$bin" "${args[@]}" "$@" 2>&1 | tee "$work/bench.log"
