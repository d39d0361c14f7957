#!/usr/bin/env bash
# The ViT / DeiT inference targets, side by side in one run: `attn bench` against its PyTorch peer
# (bench/peers/vit_infer.py, torchvision's VisionTransformer with the same config and random
# weights) at 2 threads, f32, for ViT-B/16 batch 1 and 8, DeiT-Ti and DeiT-S batch 1. Both sides run
# with OMP_WAIT_POLICY=PASSIVE and without; the better median of each is compared (the table says
# which setting won). Also checks the memory target: steady-state RSS <= 1.3 x weights + 100 MB
# (the peak RSS of the timed passes, counted afresh after loading; the load peak is printed beside it).
# --dtype bf16: both sides in bf16 (attn --dtype bf16; the peer casts the model and input to bf16),
# against the bf16 targets (batch 1 >= 1.8x, batch 8 >= 1.5x). bf16 needs a CPU with a native bf16
# GEMM (AVX512-BF16 or AMX): on a CPU without one, attn runs its emulated path and PyTorch 1.13 a
# single-threaded fallback (ViT-B/16 batch 1: 26 s per image on an AVX2 Zen 3), so the script says so
# and stops unless --force is given.
#
#   bash bench/vit_infer.sh [BUILD_DIR] [--iters N] [--threads T] [--dtype f32|bf16] [--quick] [--force]
#
# BUILD_DIR defaults to build (it needs BUILD_DIR/attn). --quick runs DeiT-Ti only (plumbing check).
# Writes one JSON line per run to $WORK/vit_infer.jsonl (WORK defaults to a temp dir) and prints a table.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-build}
[[ $# -gt 0 ]] && shift
iters=20
threads=2
dtype=f32
quick=0
force=0
while [[ $# -gt 0 ]]; do
  case $1 in
    --force) force=1; shift ;;
    --iters) iters=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --dtype) dtype=$2; shift 2 ;;
    --quick) quick=1; shift ;;
    *) echo "vit_infer.sh: unknown argument '$1' (expected --iters N, --threads T, --dtype f32|bf16, --quick, --force)" >&2; exit 2 ;;
  esac
done
[[ "$build" = /* ]] || build="$root/$build"
attn="$build/attn"
[[ -x "$attn" ]] || { echo "vit_infer.sh: expected the attn binary at $attn (build it first)" >&2; exit 2; }
work=${WORK:-$(mktemp -d)}
mkdir -p "$work"
out="$work/vit_infer.jsonl"
: >"$out"

# model batch target
cases=("vit_base_patch16_224 1 1.45" "vit_base_patch16_224 8 1.2" "deit_tiny_patch16_224 1 2.0"
       "deit_small_patch16_224 1 2.0")
case $dtype in
  f32) ;;
  bf16) cases=("vit_base_patch16_224 1 1.8" "vit_base_patch16_224 8 1.5" "deit_tiny_patch16_224 1 1.8"
               "deit_small_patch16_224 1 1.8") ;;
  *) echo "vit_infer.sh: --dtype expects f32 or bf16, got '$dtype'" >&2; exit 2 ;;
esac
[[ $quick = 1 ]] && cases=("${cases[2]}")

if [[ $dtype = bf16 && $force = 0 ]]; then
  path=$(ATTN_NO_REEXEC=1 "$attn" bench --model deit_tiny_patch16_224 --iters 1 --warmup 0 --gemm-seconds 0 \
           --dtype bf16 --threads "$threads" --json | tail -1 |
         /usr/bin/python3 -c 'import json, sys; print(json.load(sys.stdin)["gemm_path"])')
  if [[ $path = emulated* ]]; then
    echo "vit_infer.sh: this CPU has no bf16 matmul (attn's bf16 GEMM path: $path), so neither side runs" \
         "bf16 natively and the bf16 targets cannot be measured here; --force runs them anyway (PyTorch takes" \
         "~26 s per ViT-B/16 image on such a CPU)" >&2
    exit 0
  fi
fi

for c in "${cases[@]}"; do
  read -r model batch target <<<"$c"
  for policy in PASSIVE default; do
    envs=(env -u OMP_WAIT_POLICY ATTN_NO_REEXEC=1)
    [[ $policy = PASSIVE ]] && envs=(env OMP_WAIT_POLICY=PASSIVE ATTN_NO_REEXEC=1)
    echo "== $model batch $batch, $dtype, $policy: attn" >&2
    a=$("${envs[@]}" "$attn" bench --model "$model" --batch "$batch" --threads "$threads" --iters "$iters" \
          --dtype "$dtype" --json | tail -1)
    echo "== $model batch $batch, $dtype, $policy: torch" >&2
    t=$("${envs[@]}" /usr/bin/python3 "$root/bench/peers/vit_infer.py" --model "$model" --batch "$batch" \
          --threads "$threads" --iters "$iters" --dtype "$dtype" | tail -1)
    printf '{"model":"%s","batch":%s,"target":%s,"policy":"%s","attn":%s,"torch":%s}\n' \
      "$model" "$batch" "$target" "$policy" "$a" "$t" >>"$out"
  done
done

/usr/bin/python3 - "$out" "$threads" "$dtype" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
threads, dtype = sys.argv[2], sys.argv[3]
print(f"\nViT inference, {dtype}, {threads} threads, median latency (best of PASSIVE / default per side)")
print(f"{'model':24} {'batch':>5} {'attn ms':>9} {'(set)':>8} {'torch ms':>9} {'(set)':>8} {'ratio':>6} {'target':>7}  state   "
      f"{'peak MB':>7} {'weights':>8} {'limit':>7}  memory  {'load peak':>9}")
keys = []
for r in rows:
    k = (r["model"], r["batch"])
    if k not in keys: keys.append(k)
for k in keys:
    rs = [r for r in rows if (r["model"], r["batch"]) == k]
    a = min(rs, key=lambda r: r["attn"]["latency_ms"]["median"])
    t = min(rs, key=lambda r: r["torch"]["latency_ms"]["median"])
    am, tm = a["attn"]["latency_ms"]["median"], t["torch"]["latency_ms"]["median"]
    ratio = tm / am
    target = rs[0]["target"]
    # Steady state: the peak resident set of the timed passes (attn bench restarts VmHWM after
    # loading; the target); the load peak (with random weights it includes their f32
    # initialisation) is reported beside it.
    rss = a["attn"]["peak_rss_steady_mb"]
    peak = a["attn"]["peak_rss_load_mb"]
    w = a["attn"]["weights_mb"]
    limit = 1.3 * w + 100
    print(f"{k[0]:24} {k[1]:>5} {am:9.1f} {a['policy']:>8} {tm:9.1f} {t['policy']:>8} {ratio:5.2f}x {target:>6}x  "
          f"{'met' if ratio >= target else 'NOT met':7} {rss:7.0f} {w:8.0f} {limit:7.0f}  {'met' if rss <= limit else 'NOT met':7} "
          f"{peak:9.0f}")
print(f"\nraw runs: {sys.argv[1]}")
EOF
