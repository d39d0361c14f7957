#!/usr/bin/env bash
# Swin inference targets, side by side in one run at T threads: `attn bench` (torchvision's swin_t layout,
# random weights, 224 x 224) against PyTorch (bench/peers/swin_infer.py: torchvision's swin_t, the faster of
# eager and torch.jit.trace + freeze) and ONNX Runtime (the same module exported with torch.onnx.export,
# graph optimizations all):
#   - f32 batch 1: >= 2x PyTorch, >= 1.2x ONNX Runtime; f32 batch 8: >= 1.5x PyTorch, >= 1.0x ONNX Runtime;
#   - memory at batch 1 and 8: attn's steady-state peak RSS <= 1.3 x weights + 100 MB;
#   - each side's fraction of the CPU's GEMM ceiling (attn bench measures the ceiling in the same run: a
#     square oneDNN matmul; the peers' fraction is their GFLOP/s, from attn's MAC count, over that ceiling).
# --dtype bf16: attn's bf16 Linear weights against PyTorch's bf16 autocast (>= 1.8x), batch 1 and 8, on a CPU
# with a bf16 matmul (otherwise the script says so and stops). attn and PyTorch run with
# OMP_WAIT_POLICY=PASSIVE and without; the better median of each counts.
#
#   bash bench/swin_infer.sh [BUILD_DIR] [--iters N] [--threads T] [--dtype f32|bf16] [--model M] [--quick]
#
# --model: another torchvision Swin (swin_s, swin_b, swin_v2_t, ...). --quick: batch 1 only, 3 iterations
# (plumbing check). Writes one JSON line per case to $WORK/swin_infer.jsonl (WORK defaults to a temp dir)
# and prints a table.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-build}
[[ $# -gt 0 ]] && shift
iters=20 threads=2 dtype=f32 quick=0 model=swin_t
while [[ $# -gt 0 ]]; do
  case $1 in
    --iters) iters=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --dtype) dtype=$2; shift 2 ;;
    --model) model=$2; shift 2 ;;
    --quick) quick=1; shift ;;
    *) echo "swin_infer.sh: unknown argument '$1' (expected --iters N, --threads T, --dtype f32|bf16, --model M," \
            "--quick)" >&2
       exit 2 ;;
  esac
done
[[ "$build" = /* ]] || build="$root/$build"
attn="$build/attn"
[[ -x "$attn" ]] || { echo "swin_infer.sh: expected the attn binary at $attn (build it first)" >&2; exit 2; }
[[ $dtype = f32 || $dtype = bf16 ]] || { echo "swin_infer.sh: --dtype expects f32 or bf16, got '$dtype'" >&2; exit 2; }
batches="1 8"
[[ $quick = 1 ]] && { batches=1; iters=3; }
work=${WORK:-$(mktemp -d)}
mkdir -p "$work"
out="$work/swin_infer.jsonl"
: >"$out"
peers="$root/bench/peers/swin_infer.py"

# better MEDIAN_KEY A B: the JSON object of A and B (either may be empty) with the lower latency median.
better() {
  /usr/bin/python3 -c 'import json, sys
a, b = [json.loads(x) if x else None for x in sys.argv[1:3]]
print(json.dumps(b if a is None or (b is not None and b["latency_ms"]["median"] < a["latency_ms"]["median"]) else a))' \
    "$1" "$2"
}
# both_policies CMD...: CMD's last output line under OMP_WAIT_POLICY=PASSIVE and under the default, the faster,
# with the policy that won as "policy".
both_policies() {
  local best="" j p
  for p in PASSIVE default; do
    if [[ $p = PASSIVE ]]; then j=$(env OMP_WAIT_POLICY=PASSIVE ATTN_NO_REEXEC=1 "$@" | tail -1)
    else j=$(env -u OMP_WAIT_POLICY ATTN_NO_REEXEC=1 "$@" | tail -1); fi
    j=$(/usr/bin/python3 -c 'import json, sys; d = json.loads(sys.argv[1]); d["policy"] = sys.argv[2]; print(json.dumps(d))' \
          "$j" "$p")
    best=$(better "$best" "$j")
  done
  echo "$best"
}
attn_run() {  # attn_run BATCH
  both_policies "$attn" bench --model "$model" --batch "$1" --threads "$threads" --iters "$iters" --dtype "$dtype" --json
}
peer_run() {  # peer_run pytorch|onnxruntime BATCH (ONNX Runtime has its own thread pool: one run)
  local cmd=(/usr/bin/python3 "$peers" --model "$model" --batch "$2" --threads "$threads" --iters "$iters" --peer "$1"
             --dtype "$dtype")
  if [[ $1 = onnxruntime ]]; then "${cmd[@]}" 2>/dev/null | tail -1; else both_policies "${cmd[@]}" 2>/dev/null; fi
}

if [[ $dtype = bf16 ]]; then
  path=$(ATTN_NO_REEXEC=1 "$attn" bench --model "$model" --iters 1 --warmup 0 --gemm-seconds 0 --dtype bf16 \
           --threads "$threads" --json | tail -1 | /usr/bin/python3 -c 'import json, sys; print(json.load(sys.stdin)["gemm_path"])')
  if [[ $path = emulated* ]]; then
    echo "swin_infer.sh: this CPU has no bf16 matmul (attn's bf16 GEMM path: $path): the bf16 targets are not" \
         "measurable here" >&2
    exit 0
  fi
fi

for batch in $batches; do
  echo "== $model batch $batch, $dtype: attn" >&2
  a=$(attn_run "$batch")
  echo "== $model batch $batch, $dtype: PyTorch" >&2
  t=$(peer_run pytorch "$batch")
  o='null'
  if [[ $dtype = f32 ]]; then
    echo "== $model batch $batch, $dtype: ONNX Runtime" >&2
    o=$(peer_run onnxruntime "$batch")
  fi
  printf '{"bench":"swin_infer","case":"batch %s","model":"%s","dtype":"%s","attn":%s,"torch":%s,"ort":%s}\n' \
    "$batch" "$model" "$dtype" "$a" "$t" "$o" >>"$out"
done

/usr/bin/python3 - "$out" "$threads" "$dtype" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print(f"\nSwin inference ({rows[0]['model'] if rows else '-'}), {sys.argv[3]}, {sys.argv[2]} threads, median latency; "
      "GEMM: fraction of the ceiling attn bench measured")
print(f"{'case':9} {'attn ms':>9} {'GEMM':>5} {'torch ms':>9} {'(impl)':>7} {'GEMM':>5} {'ratio':>6} {'ORT ms':>8} "
      f"{'GEMM':>5} {'ratio':>6} {'peak MB':>8} {'limit':>6}")
for r in rows:
    a = r["attn"]
    flop = 2e3 * a["gmacs_per_image"] * a["batch"]   # GFLOP per pass, times 1e3 (latencies in ms)
    frac = lambda ms: flop / ms / a["gemm_ceiling_gflops"]
    am = a["latency_ms"]["median"]
    tm = r["torch"]["latency_ms"]["median"] if r.get("torch") else float("nan")
    om = r["ort"]["latency_ms"]["median"] if r.get("ort") else float("nan")
    lim = 1.3 * a["weights_mb"] + 100
    print(f"{r['case']:9} {am:9.1f} {frac(am):5.2f} {tm:9.1f} {(r.get('torch') or {}).get('impl', '-'):>7} {frac(tm):5.2f} {tm / am:5.2f}x "
          f"{om:8.1f} {frac(om):5.2f} {om / am:5.2f}x {a['peak_rss_steady_mb']:8.0f} {lim:6.0f}")
    if r.get("ort") and r["ort"].get("max_abs_diff", 0) > 1e-3 * max(1.0, r["ort"].get("max_abs", 1.0)):
        print(f"  ONNX Runtime's output differs from PyTorch's by {r['ort']['max_abs_diff']:.3g}")
print(f"\nraw runs: {sys.argv[1]}")
PY
