#!/usr/bin/env bash
# Fine-tunes bert-mini on each WordNet task for a short fixed budget and prints the test metrics: from
# scratch, and, given a pre-trained checkpoint (any BERT: attn's pre-training output, or transformers'
# weights with config.json beside them), from it too.
#   - wordnet-lexname (a gloss -> its lexicographer file, 45 classes): accuracy, macro-F1
#   - wordnet-pairs (gloss + lemma -> does the gloss define it): accuracy
#   - wordnet-supersense (example sentences, BIO tags of the lemma's lexicographer file): span F1
#
#   bash bench/bert_finetune.sh [BUILD_DIR] [--init CKPT] [--minutes M | --steps N] [--threads T] [--out DIR]
#                               [--model NAME] [--quick]
#
# --minutes: each run's training budget (default 10; the final test evaluation comes after it).
# --steps: a budget in optimizer steps instead (the same work for every run, whatever else the machine
# does; the linear decay of the learning rate then reaches 0 at the last step).
# With --init, a last line compares the two starts per task (bench "bert_pretraining_effect", also
# appended to OUT/result.jsonl).
# --quick: 20 steps per run, 200 test examples (plumbing check). Needs wordnet-base and
# bert-base-uncased's vocab.txt (scripts/fetch_bert_vocab.sh). Prints one line per run and writes each
# run's directory (checkpoint, log, curve, metrics.json) under OUT (default: a temp dir).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-build}
[[ $# -gt 0 && $1 != --* ]] && shift
init="" minutes=10 steps=0 threads=2 out="" model=bert-mini quick=0
while [[ $# -gt 0 ]]; do
  case $1 in
    --init) init=$2; shift 2 ;;
    --minutes) minutes=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --model) model=$2; shift 2 ;;
    --quick) quick=1; shift ;;
    *) echo "bert_finetune.sh: unknown argument '$1' (expected --init CKPT, --minutes M, --steps N, --threads T, --out DIR," \
            "--model NAME, --quick)" >&2; exit 2 ;;
  esac
done
attn="$build/attn"
[[ -x $attn ]] || { echo "bert_finetune.sh: no attn binary at $attn (build the attn_cli target)" >&2; exit 2; }
[[ -n $init && ! -f $init ]] && { echo "bert_finetune.sh: --init '$init' does not exist" >&2; exit 2; }
out=${out:-$(mktemp -d /tmp/bert_finetune.XXXXXX)}
mkdir -p "$out"
budget=(--max-minutes "$minutes" --eval-every 500)
[[ $steps -gt 0 ]] && budget=(--max-steps "$steps" --eval-every $(( steps / 4 > 0 ? steps / 4 : 1 )))
[[ $quick = 1 ]] && budget=(--max-steps 20 --eval-every 20 --limit-eval 200)

run() {   # task data start(scratch|pretrained)
  local task=$1 data=$2 start=$3 dir="$out/$2-$3"
  local from=(--model "$model")
  [[ $start = pretrained ]] && from+=(--init "$init")   # (--model names transformers' weights' config)
  "$attn" train --task "$task" --data "$data" "${from[@]}" "${budget[@]}" --threads "$threads" --out "$dir" \
    --seed 0 >"$dir.log" 2>&1 || { echo "  $data ($start): failed, see $dir.log" >&2; tail -3 "$dir.log" >&2; return 1; }
  python3 - "$dir/metrics.json" "$data" "$start" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
line = f"{sys.argv[2]:<20} {sys.argv[3]:<11} steps {m['steps']:>6}  {m['seconds']:7.1f} s  " \
       f"test accuracy {100 * m['test_accuracy']:6.2f}%  macro-F1 {m['test_macro_f1']:.4f}"
if "test_span_f1" in m:
    line += f"  span F1 {m['test_span_f1']:.4f} (P {m['test_span_precision']:.4f}, R {m['test_span_recall']:.4f})"
print(line, flush=True)
PY
}

echo "bert_finetune: $model, $threads threads, budget ${budget[*]}; runs in $out"
starts=(scratch)
[[ -n $init ]] && starts+=(pretrained)
for start in "${starts[@]}"; do
  run classify wordnet-lexname "$start"
  run classify wordnet-pairs "$start"
  run tag wordnet-supersense "$start"
done

[[ -z $init ]] && exit 0
python3 - "$out" "$model" "$init" "${budget[*]}" <<'PY'
import json, sys
out, model, init, budget = sys.argv[1:5]
def load(data, start):
    return json.load(open(f"{out}/{data}-{start}/metrics.json"))
r = {"bench": "bert_pretraining_effect", "model": model, "init": init, "budget": budget, "tasks": {}}
for data, keys in [("wordnet-lexname", ["test_accuracy", "test_macro_f1"]), ("wordnet-pairs", ["test_accuracy"]),
                   ("wordnet-supersense", ["test_span_f1"])]:
    s, p = load(data, "scratch"), load(data, "pretrained")
    r["tasks"][data] = {"steps": [s["steps"], p["steps"]], "seconds": [s["seconds"], p["seconds"]],
                        **{k: {"scratch": s[k], "pretrained": p[k]} for k in keys}}
    for k in keys:
        print(f"{data:<20} {k:<15} scratch {100 * s[k]:6.2f}  pre-trained {100 * p[k]:6.2f}  "
              f"difference {100 * (p[k] - s[k]):+6.2f} points")
with open(f"{out}/result.jsonl", "a") as f:
    f.write(json.dumps(r) + "\n")
print(json.dumps(r))
PY
