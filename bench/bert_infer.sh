#!/usr/bin/env bash
# BERT inference targets, side by side in one run at T threads: `attn bench` (BertModel: last hidden state
# and pooler) against PyTorch (bench/peers/bert_infer.py: the faster of the Hugging Face layout tree and
# torch.nn.TransformerEncoder's inference fast path) and ONNX Runtime (the Hugging Face tree exported with
# torch.onnx.export, graph optimizations all), bert-base-uncased, random weights and token ids:
#   - batch 1 and batch 8 at sequence 128: >= 1.5x / 1.3x PyTorch, >= 1.0x ONNX Runtime;
#   - mixed lengths: one batch of 8 sequences of lengths 16, 32, ..., 128 (attention mask; attn does not pad
#     them to the longest) takes no longer than the sum of attn's eight batch-1 times at those lengths, and
#     is >= 1.5x ONNX Runtime on the same batch padded to 128;
#   - memory at batch 1: attn's steady-state peak RSS <= 1.3 x weights + 100 MB.
# --dtype bf16: attn's bf16 Linear weights against PyTorch's bf16 autocast (>= 1.5x), batch 1 and 8, on a CPU
# with a bf16 matmul (otherwise the script says so and stops). attn runs with OMP_WAIT_POLICY=PASSIVE and
# without; the better median counts.
#
#   bash bench/bert_infer.sh [BUILD_DIR] [--iters N] [--threads T] [--dtype f32|bf16] [--quick]
#
# --quick: bert-mini, fewer iterations (plumbing check). Writes one JSON line per case to
# $WORK/bert_infer.jsonl (WORK defaults to a temp dir) and prints a table.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-build}
[[ $# -gt 0 ]] && shift
iters=20 threads=2 dtype=f32 quick=0
while [[ $# -gt 0 ]]; do
  case $1 in
    --iters) iters=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --dtype) dtype=$2; shift 2 ;;
    --quick) quick=1; shift ;;
    *) echo "bert_infer.sh: unknown argument '$1' (expected --iters N, --threads T, --dtype f32|bf16, --quick)" >&2
       exit 2 ;;
  esac
done
[[ "$build" = /* ]] || build="$root/$build"
attn="$build/attn"
[[ -x "$attn" ]] || { echo "bert_infer.sh: expected the attn binary at $attn (build it first)" >&2; exit 2; }
[[ $dtype = f32 || $dtype = bf16 ]] || { echo "bert_infer.sh: --dtype expects f32 or bf16, got '$dtype'" >&2; exit 2; }
model=bert-base-uncased
[[ $quick = 1 ]] && { model=bert-mini; iters=3; }
work=${WORK:-$(mktemp -d)}
mkdir -p "$work"
out="$work/bert_infer.jsonl"
: >"$out"
base='{"architecture": "BertModel"}'
peers="$root/bench/peers/bert_infer.py"
mixed=16,32,48,64,80,96,112,128

attn_run() {  # attn_run ARGS...: the better median of the two wait policies, as one JSON object
  local best="" p j
  for p in PASSIVE default; do
    if [[ $p = PASSIVE ]]; then
      j=$(env OMP_WAIT_POLICY=PASSIVE ATTN_NO_REEXEC=1 "$attn" bench --model "$model" --model-config "$base" \
            --threads "$threads" --iters "$iters" --dtype "$dtype" --json "$@" | tail -1)
    else
      j=$(env -u OMP_WAIT_POLICY ATTN_NO_REEXEC=1 "$attn" bench --model "$model" --model-config "$base" \
            --threads "$threads" --iters "$iters" --dtype "$dtype" --json "$@" | tail -1)
    fi
    best=$(/usr/bin/python3 -c 'import json, sys
a, b, p = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
b["policy"] = p
if a:
    a = json.loads(a)
    b = a if a["latency_ms"]["median"] <= b["latency_ms"]["median"] else b
print(json.dumps(b))' "$best" "$j" "$p")
  done
  echo "$best"
}
peer_run() {  # peer_run pytorch|onnxruntime ARGS...
  local peer=$1; shift
  /usr/bin/python3 "$peers" --model "$model" --threads "$threads" --iters "$iters" --peer "$peer" "$@" 2>/dev/null | tail -1
}

if [[ $dtype = bf16 ]]; then
  path=$(ATTN_NO_REEXEC=1 "$attn" bench --model "$model" --model-config "$base" --seq-len 16 --iters 1 --warmup 0 \
           --gemm-seconds 0 --dtype bf16 --threads "$threads" --json | tail -1 |
         /usr/bin/python3 -c 'import json, sys; print(json.load(sys.stdin)["gemm_path"])')
  if [[ $path = emulated* ]]; then
    echo "bert_infer.sh: this CPU has no bf16 matmul (attn's bf16 GEMM path: $path): the bf16 targets are not" \
         "measurable here" >&2
    exit 0
  fi
fi

for batch in 1 8; do
  echo "== $model batch $batch, sequence 128, $dtype" >&2
  a=$(attn_run --batch "$batch" --seq-len 128)
  t=$(peer_run pytorch --batch "$batch" --seq-len 128 --dtype "$dtype")
  o='null'
  [[ $dtype = f32 ]] && o=$(peer_run onnxruntime --batch "$batch" --seq-len 128)
  printf '{"bench":"bert_infer","case":"batch %s, sequence 128","model":"%s","dtype":"%s","attn":%s,"torch":%s,"ort":%s}\n' \
    "$batch" "$model" "$dtype" "$a" "$t" "$o" >>"$out"
done

if [[ $dtype = f32 ]]; then
  if "$attn" bench --help 2>/dev/null | grep -q -- --lengths; then
    echo "== $model mixed lengths $mixed" >&2
    a=$(attn_run --lengths "$mixed")
    sum=0
    for n in ${mixed//,/ }; do
      one=$(attn_run --batch 1 --seq-len "$n")
      sum=$(/usr/bin/python3 -c 'import json, sys; print(float(sys.argv[1]) + json.loads(sys.argv[2])["latency_ms"]["median"])' "$sum" "$one")
    done
    t=$(peer_run pytorch --lengths "$mixed")
    o=$(peer_run onnxruntime --batch 8 --seq-len 128)
    printf '{"bench":"bert_infer","case":"mixed lengths 16-128, batch 8","model":"%s","dtype":"f32","attn":%s,"attn_batch1_sum_ms":%s,"torch":%s,"ort":%s}\n' \
      "$model" "$a" "$sum" "$t" "$o" >>"$out"
  else
    echo "bert_infer.sh: this attn bench has no --lengths: the mixed-length case is skipped" >&2
  fi
fi

/usr/bin/python3 - "$out" "$threads" "$dtype" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print(f"\nBERT inference ({rows[0]['model'] if rows else '-'}), {sys.argv[3]}, {sys.argv[2]} threads, median latency")
print(f"{'case':34} {'attn ms':>9} {'torch ms':>9} {'(impl)':>8} {'ratio':>6} {'ORT ms':>8} {'ratio':>6} "
      f"{'peak MB':>8} {'limit':>6}")
for r in rows:
    am = r["attn"]["latency_ms"]["median"]
    tm = r["torch"]["latency_ms"]["median"]
    om = r["ort"]["latency_ms"]["median"] if r.get("ort") else float("nan")
    lim = 1.3 * r["attn"]["weights_mb"] + 100
    print(f"{r['case']:34} {am:9.1f} {tm:9.1f} {r['torch']['impl']:>8} {tm / am:5.2f}x {om:8.1f} {om / am:5.2f}x "
          f"{r['attn']['peak_rss_steady_mb']:8.0f} {lim:6.0f}")
    if "attn_batch1_sum_ms" in r:
        print(f"{'':34} sum of attn's batch-1 times at those lengths: {r['attn_batch1_sum_ms']:.1f} ms")
print(f"\nraw runs: {sys.argv[1]}")
PY
