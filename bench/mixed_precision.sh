#!/usr/bin/env bash
# bf16 mixed precision against f32 on accuracy: the same training run (model, data, recipe, steps,
# seed) with `attn train --precision f32` and `--precision bf16`, seeds 0 and 1, for the Fashion-MNIST
# ViT, the Bible Transformer (English -> Spanish) and bert-mini pre-training. Runs of minutes each at
# the default sizes (longer with the sizes raised), so a benchmark, not a test. Needs a CPU with a native bf16
# matmul (AVX512-BF16 or AMX): elsewhere `--precision bf16` is refused and the script says so.
#
#   bash bench/mixed_precision.sh BUILD [vit|translate|bert|all] [--seeds "0 1"] [--work DIR]
#
# Targets: the bf16 mean within 0.5 points of the f32 mean (ViT test accuracy), within 1 BLEU
# (Transformer test BLEU, greedy, first 500 test pairs) and within 1 point (bert-mini validation
# masked-LM accuracy). Each run writes WORK/TASK-PRECISION-sSEED (default WORK: runs/mixed-precision)
# with metrics.json, log.jsonl and curve.svg; a run whose metrics.json is there is skipped, so the
# script continues where it stopped. The sizes (steps) are set below; the environment overrides them:
#   VIT_MODEL (vit_fmnist_small), VIT_EPOCHS (2), MT_STEPS (400), BERT_STEPS (400).
# At the end it prints a table and one JSON line per task (bench "mixed_precision") for
# bench/results_table.py; ATTN_HOST names the host.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:?usage: bash bench/mixed_precision.sh BUILD [vit|translate|bert|all] [--seeds "0 1"] [--work DIR]}
[[ "$build" = /* ]] || build="$root/$build"
shift
what=all
if [[ $# -gt 0 && $1 != --* ]]; then what=$1; shift; fi
seeds="0 1" work="$root/runs/mixed-precision"
while [[ $# -gt 0 ]]; do
  case $1 in
    --seeds) seeds=$2; shift 2 ;;
    --work) work=$2; shift 2 ;;
    *) echo "mixed_precision.sh: unknown argument '$1' (expected --seeds \"S ...\" or --work DIR)" >&2; exit 2 ;;
  esac
done
case $what in vit|translate|bert|all) ;; *) echo "mixed_precision.sh: expected vit, translate, bert or all, got '$what'" >&2; exit 2 ;; esac
attn="$build/attn"
[[ -x "$attn" ]] || { echo "mixed_precision.sh: no attn binary at $attn (build first)" >&2; exit 1; }
export OMP_WAIT_POLICY=PASSIVE
mkdir -p "$work"
vit_model=${VIT_MODEL:-vit_fmnist_small} vit_epochs=${VIT_EPOCHS:-2}
mt_steps=${MT_STEPS:-400} bert_steps=${BERT_STEPS:-400}

# run TASK PRECISION SEED ARGS...: one training run into WORK/TASK-PRECISION-sSEED, unless done.
run() {
  local task=$1 prec=$2 seed=$3
  shift 3
  local out="$work/$task-$prec-s$seed"
  if [[ -f "$out/metrics.json" ]]; then
    echo "[mixed_precision] $task $prec seed $seed: done before ($out)"
    return
  fi
  local resume=()
  [[ -f "$out/checkpoint.safetensors" ]] && resume=(--resume)
  echo "[mixed_precision] $task $prec seed $seed -> $out"
  "$attn" train "$@" --precision "$prec" --seed "$seed" --threads 2 --out "$out" "${resume[@]}"
}

# Task by task (each task's pairs complete before the next starts), seed by seed, f32 then bf16.
for task in vit bert translate; do
  [[ $what == "$task" || $what == all ]] || continue
  for seed in $seeds; do
    for prec in f32 bf16; do
      case $task in
        vit) run vit "$prec" "$seed" --model "$vit_model" --epochs "$vit_epochs" --augment ;;
        translate)
          run translate "$prec" "$seed" --model transformer --data bible-en-es \
            --model-config '{"d_model": 256, "nhead": 4, "layers": 3, "d_ff": 1024}' --max-steps "$mt_steps" \
            --warmup-steps 200 --beam 1 --limit-test 500 --eval-sentences 100 ;;
        bert)
          run bert "$prec" "$seed" --model bert-mini --task pretrain --data bible+wordnet --max-steps "$bert_steps" \
            --warmup-steps 40 --limit-eval 2000 ;;
      esac
    done
  done
done

# The table and the records: per task, each precision's runs, mean, and the bf16 - f32 difference.
/usr/bin/python3 - "$work" "$what" "$seeds" <<'EOF'
import json, os, socket, statistics, sys, time
work, what, seeds = sys.argv[1], sys.argv[2], sys.argv[3].split()
tasks = [("vit", "test_accuracy", 100.0, "test accuracy, %", 0.5),
         ("translate", "test_bleu", 1.0, "test BLEU (greedy)", 1.0),
         ("bert", "val_mlm_accuracy", 100.0, "validation masked-LM accuracy, %", 1.0)]
host = os.environ.get("ATTN_HOST") or socket.gethostname()
for task, key, scale, label, tol in tasks:
    if what not in (task, "all"):
        continue
    vals, secs = {}, {}
    for prec in ("f32", "bf16"):
        for s in seeds:
            p = os.path.join(work, f"{task}-{prec}-s{s}", "metrics.json")
            if os.path.exists(p):
                m = json.load(open(p))
                vals.setdefault(prec, []).append(m[key] * scale)
                secs.setdefault(prec, []).append(m.get("seconds", float("nan")))
    if len(vals.get("f32", [])) != len(seeds) or len(vals.get("bf16", [])) != len(seeds):
        print(f"{task}: not every run finished ({vals})")
        continue
    f, b = statistics.mean(vals["f32"]), statistics.mean(vals["bf16"])
    ok = abs(b - f) <= tol + 1e-9
    print(f"{task}: {label}  f32 {' '.join(f'{v:.2f}' for v in vals['f32'])} (mean {f:.2f}, "
          f"{statistics.mean(secs['f32']):.0f} s)  bf16 {' '.join(f'{v:.2f}' for v in vals['bf16'])} "
          f"(mean {b:.2f}, {statistics.mean(secs['bf16']):.0f} s)  difference {b - f:+.2f}: "
          f"target within {tol:g}: {'met' if ok else 'not met'}")
    print(json.dumps({"bench": "mixed_precision", "task": task, "metric": label, "seeds": [int(s) for s in seeds],
                      "f32": vals["f32"], "bf16": vals["bf16"], "f32_mean": f, "bf16_mean": b, "tolerance": tol,
                      "f32_seconds": secs["f32"], "bf16_seconds": secs["bf16"], "host": host,
                      "date": time.strftime("%Y-%m-%d")}))
EOF
