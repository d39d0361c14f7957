#!/usr/bin/env bash
# Scoring foreign weights on an ImageNet-style folder, side by side in one run: `attn eval --weights W
# --model NAME --data DIR` against its PyTorch peer (bench/peers/folder_eval.py: torchvision's
# ImageFolder, eval transform, DataLoader and VisionTransformer, as timm's validate.py runs it), the
# same seeded random weights in torchvision's layout, the same JPEGs (500 x 375, Imagenette's ten
# WordNet-ID folders), 2 threads, f32. The whole loop is timed on both sides: decoding, resizing,
# cropping, normalising and the forward. attn runs with OMP_WAIT_POLICY=PASSIVE and without; the peer
# also with DataLoader workers 0 and 2; the best of each side is compared, in alternating rounds.
# The two losses must agree (the same work): the script fails when they differ by more than 1e-4.
#
#   bash bench/folder_eval.sh [BUILD_DIR] [--images N] [--model NAME] [--batch B] [--rounds R]
#
# No target; a figure for docs/results.md.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-build}
[[ $# -gt 0 ]] && shift
images=256
model=deit_small_patch16_224
batch=32
rounds=2
while [[ $# -gt 0 ]]; do
  case $1 in
    --images) images=$2; shift 2 ;;
    --model) model=$2; shift 2 ;;
    --batch) batch=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    *) echo "folder_eval.sh: unknown argument '$1' (expected --images N, --model NAME, --batch B, --rounds R)" >&2
       exit 2 ;;
  esac
done
[[ "$build" = /* ]] || build="$root/$build"
attn="$build/attn"
[[ -x "$attn" ]] || { echo "folder_eval.sh: expected the attn binary at $attn (build it first)" >&2; exit 2; }
work=${WORK:-$(mktemp -d)}
mkdir -p "$work"
data="$work/data-$model-$images"
peer="$root/bench/peers/folder_eval.py"
[[ -f "$data/weights.safetensors" ]] || /usr/bin/python3 "$peer" make "$data" --images "$images" --model "$model"
out="$work/folder_eval.jsonl"
: >"$out"
for r in $(seq "$rounds"); do
  for policy in PASSIVE default; do
    envs=(env -u OMP_WAIT_POLICY ATTN_NO_REEXEC=1)
    [[ $policy = PASSIVE ]] && envs=(env OMP_WAIT_POLICY=PASSIVE ATTN_NO_REEXEC=1)
    echo "== round $r, $policy: attn" >&2
    "${envs[@]}" "$attn" eval --weights "$data/weights.safetensors" --model "$model" --format torchvision \
      --data "$data" --batch "$batch" --threads 2 --json 2>/dev/null |
      /usr/bin/python3 -c "import json,sys; j=json.loads(sys.stdin.readline()); j.pop('per_class'); \
j.update(side='attn', omp_wait_policy='$policy', round=$r, images_per_second=j['images']/j['seconds']); print(json.dumps(j))" \
      >>"$out"
    for workers in 0 2; do
      echo "== round $r, $policy: torch, $workers DataLoader workers" >&2
      "${envs[@]}" /usr/bin/python3 "$peer" run "$data" --model "$model" --batch "$batch" --threads 2 \
        --workers "$workers" | sed "s/}\$/, \"round\": $r}/" >>"$out"
    done
  done
done
/usr/bin/python3 - "$out" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
a = [r for r in rows if r["side"] == "attn"]
t = [r for r in rows if r["side"] == "torch"]
ba = min(a, key=lambda r: r["seconds"])
bt = min(t, key=lambda r: r["seconds"])
print("model %s, %d images, batch %d, 2 threads, f32" % (bt["model"], bt["images"], bt["batch"]))
print("  attn    %7.2f s  %6.1f img/s  (best of %d; OMP_WAIT_POLICY=%s)" % (ba["seconds"], ba["images_per_second"], len(a), ba["omp_wait_policy"]))
print("  PyTorch %7.2f s  %6.1f img/s  (best of %d; OMP_WAIT_POLICY=%s, %d DataLoader workers)" % (bt["seconds"], bt["images_per_second"], len(t), bt["omp_wait_policy"], bt["workers"]))
print("  attn / PyTorch images/s = %.2fx" % (ba["images_per_second"] / bt["images_per_second"]))
print("  loss: attn %.6f, PyTorch %.6f; top-1 %.4f / %.4f; top-5 %.4f / %.4f" % (ba["loss"], bt["loss"], ba["top1"], bt["top1"], ba["top5"], bt["top5"]))
if abs(ba["loss"] - bt["loss"]) > 1e-4 * max(1.0, abs(bt["loss"])) or ba["images"] != bt["images"]:
    sys.exit("folder_eval.sh: the two sides did not do the same work (loss or image count differ)")
PY
