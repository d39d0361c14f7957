#!/usr/bin/env bash
# The accuracy and distillation targets on Fashion-MNIST: long runs (hours), so a benchmark, not a
# test. Run each mode on a quiet machine (nothing else running: 2 threads, OMP_WAIT_POLICY=PASSIVE for
# both attn and PyTorch). Every run writes its own directory under WORK (default runs/fmnist-accuracy)
# with attn's metrics.json / log.jsonl / curve.svg, and the script prints a summary table at the end.
#
#   bash bench/fmnist_accuracy.sh BUILD budget [EPOCHS]   # vit_fmnist_small (BUDGET_MODEL=... for another),
#                                                         # EPOCHS (default 36) sized to fit 2 h; target:
#                                                         # final-epoch test accuracy >= 92%. A run stopped
#                                                         # part-way continues with `... --resume`;
#                                                         # metrics.json's seconds sum the pieces.
#                                                         # BUDGET_MODEL=vit_fmnist with 16 epochs writes
#                                                         # the directory budget-e16;
#                                                         # BUDGET_TAG=NAME appends -NAME to the directory
#   bash bench/fmnist_accuracy.sh BUILD peer              # attn vs PyTorch (bench/peers/vit_fmnist_train.py),
#                                                         # same model + recipe + training images, 10 epochs,
#                                                         # seeds 0 and 1; target: attn's mean within 0.5
#                                                         # points. PEER_MODEL=vit_fmnist_small for the small one
#   bash bench/fmnist_accuracy.sh BUILD teacher [EPOCHS]  # the CNN teacher (resnet_fmnist); target >= 93%
#   bash bench/fmnist_accuracy.sh BUILD distill [EPOCHS]  # deit_fmnist_distilled from the teacher: none /
#                                                         # soft / hard, seeds 0 and 1 (needs `teacher` first).
#                                                         # DISTILL_SIZE=small: vit_fmnist_small and
#                                                         # deit_fmnist_small_distilled (a third of the cost);
#                                                         # DISTILL_KINDS="hard" to skip soft
#   bash bench/fmnist_accuracy.sh BUILD same-budget [MINUTES]   # ViT, Swin and the CNN at one time budget
#                                                         # (default 120 min each, seed 0): vit_fmnist_small,
#                                                         # swin_fmnist and resnet_fmnist (SAME_BUDGET_MODELS=
#                                                         # "..." for others); each run's epochs are what its
#                                                         # measured speed fits in the budget (a 20-step probe
#                                                         # first), so that its cosine schedule ends, and
#                                                         # --max-minutes stops it at the budget regardless.
#                                                         # Prints results_table.py records (fmnist_same_budget;
#                                                         # ATTN_HOST names the host)
#   bash bench/fmnist_accuracy.sh BUILD summary           # the table of everything run so far
#
# Recipe (both sides): AdamW lr 1e-3, wd 0.05, 1 warm-up epoch then cosine, label smoothing 0.1, batch 128,
# random crop (padding 2) + horizontal flip. Extra flags after the mode's arguments go to `attn train`
# (attn-only runs), e.g. `... budget 18 --rand-augment 2 --erase 0.25`.
# A piece that finished earlier (its metrics.json, or the peer's final JSON line, is there) is skipped,
# and an attn piece killed part-way (a checkpoint but no metrics.json) continues with --resume from its
# last checkpoint (each epoch's end), so a mode stopped part-way is continued by running it again;
# delete a run's directory to redo it. A killed PyTorch piece restarts from its first epoch.
# distill reuses peer's attn runs as its no-distillation baseline when they match (10 epochs, no flags).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:?usage: bench/fmnist_accuracy.sh BUILD budget|peer|teacher|distill|same-budget|summary [EPOCHS|MINUTES] [attn train flags]}
mode=${2:?expected a mode: budget | peer | teacher | distill | same-budget | summary}
shift 2
[[ "$build" = /* ]] || build="$root/$build"
attn="$build/attn"
work=${WORK:-$root/runs/fmnist-accuracy}
mkdir -p "$work"
export OMP_WAIT_POLICY=PASSIVE ATTN_NO_REEXEC=1
recipe=(--augment --wd 0.05 --warmup-epochs 1 --label-smoothing 0.1 --batch 128 --threads 2)

need_attn() { [[ -x "$attn" ]] || { echo "fmnist_accuracy.sh: expected the attn binary at $attn" >&2; exit 2; }; }
epochs_arg() { if [[ $# -gt 0 && "$1" =~ ^[0-9]+$ ]]; then echo "$1"; else echo "$2"; fi; }

run_attn() {   # name model epochs seed [flags...]
  local name=$1 model=$2 epochs=$3 seed=$4
  shift 4
  if [[ -f "$work/$name/metrics.json" ]]; then   # finished earlier: keep it (rerun by deleting the directory)
    echo "== attn $name: done already ($work/$name/metrics.json), skipped" >&2; return 0
  fi
  local resume=() tee_flags=()
  if [[ -f "$work/$name/checkpoint.safetensors" ]]; then   # stopped part-way: continue it exactly
    resume=(--resume); tee_flags=(-a)
    echo "== attn $name: resuming from $work/$name/checkpoint.safetensors" >&2
  fi
  echo "== attn $name: $model, $epochs epochs, seed $seed $*" >&2
  "$attn" train --model "$model" --epochs "$epochs" --seed "$seed" --lr "${lr:-1e-3}" "${recipe[@]}" --out "$work/$name" \
    "${resume[@]}" "$@" | tee "${tee_flags[@]}" "$work/$name.txt" | tail -4
}

case $mode in
  budget)
    need_attn
    epochs=$(epochs_arg "${1:-}" 36); [[ "${1:-}" =~ ^[0-9]+$ ]] && shift
    model=${BUDGET_MODEL:-vit_fmnist_small}
    name=budget-$model-e$epochs
    [[ $model = vit_fmnist ]] && name=budget-e$epochs
    name+=${BUDGET_TAG:+-$BUDGET_TAG}   # BUDGET_TAG=gap: a run with other flags gets its own directory
    start=$(date +%s)
    run_attn "$name" "$model" "$epochs" 0 "$@"
    secs=$(/usr/bin/python3 -c "import json,sys; print(round(json.load(open(sys.argv[1]))['seconds']))" \
           "$work/$name/metrics.json" 2>/dev/null || echo "?")
    echo "wall time of this piece: $(( $(date +%s) - start )) s; training time over all pieces: $secs s" \
         "(budget: 7200 s)" | tee -a "$work/$name.txt"
    ;;
  peer)
    need_attn
    # Both sides train on attn's 55,000-image training split (the peer reads its indices).
    [[ -x "$build/bench/fmnist_split" ]] || { echo "fmnist_accuracy.sh: expected $build/bench/fmnist_split (build the benches)" >&2; exit 2; }
    "$build/bench/fmnist_split" "$work/train-split.txt"
    model=${PEER_MODEL:-vit_fmnist}
    tag=peer; [[ $model = vit_fmnist ]] || tag=peer-$model
    for seed in 0 1; do
      run_attn "$tag-attn-s$seed" "$model" 10 "$seed"
      if tail -1 "$work/$tag-torch-s$seed.txt" 2>/dev/null | grep -q '"test_accuracy"'; then
        echo "== torch seed $seed: done already ($work/$tag-torch-s$seed.txt), skipped" >&2; continue
      fi
      echo "== torch seed $seed: $model, 10 epochs" >&2
      /usr/bin/python3 "$root/bench/peers/vit_fmnist_train.py" --model "$model" --train-indices "$work/train-split.txt" \
        --epochs 10 --threads 2 --augment --seed "$seed" | tee "$work/$tag-torch-s$seed.txt" | tail -2
    done
    ;;
  teacher)
    need_attn
    epochs=$(epochs_arg "${1:-}" 15); [[ "${1:-}" =~ ^[0-9]+$ ]] && shift
    lr=2e-3 run_attn teacher resnet_fmnist "$epochs" 0 "$@"
    ;;
  distill)
    need_attn
    [[ -f "$work/teacher/checkpoint.safetensors" ]] || { echo "fmnist_accuracy.sh: run the teacher mode first ($work/teacher/checkpoint.safetensors is missing)" >&2; exit 2; }
    epochs=$(epochs_arg "${1:-}" 10); [[ "${1:-}" =~ ^[0-9]+$ ]] && shift
    case ${DISTILL_SIZE:-base} in
      base) plain=vit_fmnist; student=deit_fmnist_distilled; tag=distill ;;
      small) plain=vit_fmnist_small; student=deit_fmnist_small_distilled; tag=distill-small-e$epochs ;;
      *) echo "fmnist_accuracy.sh: DISTILL_SIZE must be base or small, got '$DISTILL_SIZE'" >&2; exit 2 ;;
    esac
    for seed in 0 1; do
      # The peer mode's attn run is this baseline when the model, epochs (10) and flags are the same.
      peer_run="$work/peer-$plain-attn-s$seed"; [[ $plain = vit_fmnist ]] && peer_run="$work/peer-attn-s$seed"
      if [[ $# -eq 0 && $epochs = 10 && -f "$peer_run/metrics.json" && ! -e "$work/$tag-none-s$seed" ]]; then
        ln -s "$(basename "$peer_run")" "$work/$tag-none-s$seed"
        echo "== attn $tag-none-s$seed: the peer run $peer_run is this baseline (linked)" >&2
      fi
      run_attn "$tag-none-s$seed" "$plain" "$epochs" "$seed" "$@"
      for kind in ${DISTILL_KINDS:-soft hard}; do
        run_attn "$tag-$kind-s$seed" "$student" "$epochs" "$seed" \
          --teacher "$work/teacher/checkpoint.safetensors" --distill "$kind" "$@"
      done
    done
    ;;
  same-budget)
    need_attn
    minutes=$(epochs_arg "${1:-}" 120); [[ "${1:-}" =~ ^[0-9]+$ ]] && shift
    py=/usr/bin/python3
    for model in ${SAME_BUDGET_MODELS:-vit_fmnist_small swin_fmnist resnet_fmnist}; do
      name=same-budget-m$minutes-$model
      model_lr=1e-3; [[ $model = resnet_fmnist ]] && model_lr=2e-3   # the teacher's recipe
      if [[ ! -f "$work/$name/metrics.json" && ! -f "$work/$name/checkpoint.safetensors" ]]; then
        # The probe: 20 steps, its training images per second -> the epochs the budget holds.
        "$attn" train --model "$model" --max-steps 20 --limit-eval 256 --seed 0 "${recipe[@]}" \
          --out "$work/$name-probe" "$@" > "$work/$name-probe.txt" 2>&1
        ips=$($py -c "import json,sys; print(json.load(open(sys.argv[1]))['images_per_second'])" "$work/$name-probe/metrics.json")
        epochs=$($py -c "import sys; print(max(1, int(float(sys.argv[1]) * 60 * float(sys.argv[2]) / 55000 * 0.95)))" "$minutes" "$ips")
        echo "$epochs" > "$work/$name.epochs"
        rm -rf "$work/$name-probe"
        echo "== $model: $ips img/s in the probe: $epochs epochs in $minutes minutes" >&2
      fi
      lr=$model_lr run_attn "$name" "$model" "$(cat "$work/$name.epochs")" 0 --max-minutes "$minutes" "$@"
    done
    $py - "$work" "$minutes" "${ATTN_HOST:-$(hostname)}" ${SAME_BUDGET_MODELS:-vit_fmnist_small swin_fmnist resnet_fmnist} <<'PY'
import datetime, json, os, sys
work, minutes, host, models = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
print(f"\nFashion-MNIST at {minutes} minutes of training each (test accuracy, %), results_table.py records:")
for m in models:
    path = os.path.join(work, f"same-budget-m{minutes}-{m}", "metrics.json")
    if not os.path.exists(path):
        continue
    r = json.load(open(path))
    planned = open(os.path.join(work, f"same-budget-m{minutes}-{m}.epochs")).read().strip()
    print(json.dumps({"kind": "accuracy", "benchmark": "fmnist_same_budget", "case": f"{m}, {minutes} minutes",
                      "host": host, "date": datetime.date.today().isoformat(),
                      "command": f"bash bench/fmnist_accuracy.sh build/test same-budget {minutes}", "unit": "%",
                      "attn": round(100 * r["test_accuracy"], 2),
                      "extra": {"seconds": round(r["seconds"]), "epochs": int(planned), "steps": r["steps"]}}))
PY
    ;;
  summary) ;;
  *) echo "fmnist_accuracy.sh: unknown mode '$mode' (expected budget | peer | teacher | distill | same-budget | summary)" >&2; exit 2 ;;
esac

/usr/bin/python3 - "$work" <<'EOF'
import glob, json, os, sys
work = sys.argv[1]
print(f"\nFashion-MNIST runs in {work} (test accuracy, %)")
for d in sorted(glob.glob(os.path.join(work, "*/metrics.json"))):
    m = json.load(open(d))
    name = os.path.basename(os.path.dirname(d))
    extra = ""
    if "test_accuracy_cls" in m:
        extra = f"  class head {100 * m['test_accuracy_cls']:.2f}, dist head {100 * m['test_accuracy_dist']:.2f}"
    print(f"  attn  {name:22} {100 * m['test_accuracy']:6.2f}   {m['steps']:6} steps  {m['seconds']:7.0f} s  "
          f"{m['images_per_second']:6.0f} img/s{extra}")
for f in sorted(glob.glob(os.path.join(work, "peer-*torch-s*.txt"))):
    lines = [l for l in open(f) if l.startswith("{")]
    if lines:
        m = json.loads(lines[-1])
        print(f"  torch {os.path.basename(f)[:-4]:22} {100 * m['test_accuracy']:6.2f}   "
              f"{m.get('seconds', float('nan')):7.0f} s  {m.get('images_per_second', float('nan')):6.0f} img/s")
EOF
