#!/usr/bin/env bash
# A short BERT pre-training run: bert-mini (4 layers, 256 hidden, 4 heads) on the KJV and WordNet's
# glosses (`attn train --task pretrain --data bible+wordnet`, instances as Google's
# create_pretraining_data.py makes them, dynamic masking), for MINUTES of training, then the validation
# masked-LM and next-sentence accuracies (held-out documents) and a few fill-mask guesses of the checkpoint.
#
#   bash bench/bert_pretrain.sh [BUILD_DIR] [--minutes 15] [--threads T] [--batch 32] [--limit-eval 2000] [--out DIR]
#
# Needs bert-base-uncased's vocab.txt (scripts/fetch_bert_vocab.sh), sword-text-kjv and wordnet-base.
# The lr schedule is laid out over the steps MINUTES allows at the rate of a first timed step, so the
# linear decay reaches 0 near the end. Prints the final numbers and writes one JSON line (bench
# "bert_pretrain") to OUT/result.jsonl; the log, curve.svg and checkpoint stay in OUT.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-build}
[[ $# -gt 0 ]] && shift
minutes=15 threads=2 batch=32 limit_eval=2000 out=""
while [[ $# -gt 0 ]]; do
  case $1 in
    --minutes) minutes=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --batch) batch=$2; shift 2 ;;
    --limit-eval) limit_eval=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    *) echo "bert_pretrain.sh: unknown argument '$1' (expected --minutes M, --threads T, --batch B, --limit-eval N, --out DIR)" >&2
       exit 2 ;;
  esac
done
[[ "$build" = /* ]] || build="$root/$build"
attn="$build/attn"
[[ -x "$attn" ]] || { echo "bert_pretrain.sh: expected the attn binary at $attn (build it first)" >&2; exit 2; }
out=${out:-$(mktemp -d)/bert-mini-pretrain}
mkdir -p "$out"

# Steps per minute, from a 3-step run (data loading not counted: the trainer's own rate).
probe="$out/probe"
rm -rf "$probe"
"$attn" train --model bert-mini --task pretrain --data bible+wordnet --batch "$batch" --threads "$threads" \
  --max-steps 3 --eval-every 3 --limit-eval "$batch" --out "$probe" >/dev/null 2>&1
rate=$(python3 -c 'import json,sys; r=[json.loads(l) for l in open(sys.argv[1])][-1]; print(r["sequences_per_second"])' \
  "$probe/log.jsonl")
steps=$(python3 -c "import sys; print(max(20, int(float(sys.argv[1]) * 60 * float(sys.argv[2]) / float(sys.argv[3]))))" \
  "$rate" "$minutes" "$batch")
rm -rf "$probe"
evals=$(( steps / 5 > 0 ? steps / 5 : 1 ))
echo "== bert-mini pre-training on bible+wordnet: ~$steps steps of $batch sequences ($rate seq/s measured), $minutes min"
"$attn" train --model bert-mini --task pretrain --data bible+wordnet --batch "$batch" --threads "$threads" \
  --max-steps "$steps" --max-minutes "$minutes" --eval-every "$evals" --limit-eval "$limit_eval" --warmup-steps $(( steps / 20 + 1 )) \
  --out "$out"
echo "== fill-mask with the checkpoint"
for text in "In the beginning God created the [MASK] and the earth." "And God said, Let there be [MASK]." \
            "a [MASK] is a domestic animal kept as a pet."; do
  "$attn" fill-mask "$out/checkpoint.safetensors" "$text" --topk 3
done
python3 - "$out" "$minutes" <<'PY'
import json, sys
out, minutes = sys.argv[1], float(sys.argv[2])
m = json.load(open(f"{out}/metrics.json"))
r = {"bench": "bert_pretrain", "model": "bert-mini", "data": "bible+wordnet", "minutes": minutes,
     "val_mlm_accuracy": m["val_mlm_accuracy"], "val_nsp_accuracy": m["val_nsp_accuracy"],
     "val_mlm_loss": m["val_mlm_loss"], "val_nsp_loss": m["val_nsp_loss"],
     "sequences_per_second": m["sequences_per_second"], "train_seconds": m["train_seconds"]}
print(f"validation MLM accuracy {100 * r['val_mlm_accuracy']:.2f}%, NSP accuracy {100 * r['val_nsp_accuracy']:.2f}% "
      f"after {r['train_seconds'] / 60:.1f} min ({r['sequences_per_second']:.1f} sequences/s)")
with open(f"{out}/result.jsonl", "a") as f:
    f.write(json.dumps(r) + "\n")
print(json.dumps(r))
PY
