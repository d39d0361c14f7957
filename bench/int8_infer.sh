#!/usr/bin/env bash
# int8 inference targets, side by side at T threads in R alternating rounds (each round runs every side once
# per case; odd rounds in one side order, even rounds in the reverse): `attn bench --dtype int8` against
#   - attn f32 (the same `attn bench` invocation with --dtype f32): >= 1.5x;
#   - ONNX Runtime f32 (bench/peers/*_infer.py --peer onnxruntime; ONNX Runtime's int8 quantizer is not
#     installable here, so its f32 is the peer): >= 1.5x;
#   - PyTorch's dynamic int8 (bench/peers/*_infer.py --dtype int8: quantize_dynamic of the f32 model's
#     nn.Linear modules, qint8): >= 2x. Its quantized engine is chosen per case before the rounds by a short
#     probe of each engine (--qengine best, 3 iterations, OMP_WAIT_POLICY=PASSIVE: qnnpack can take seconds a
#     pass on x86) and the faster runs every round; torchvision's attention keeps its projections f32 under quantize_dynamic, and the
#     table says how much of the Linear weight the peer ran in int8;
#   - weight memory: attn int8's weights_mb <= 0.3 x attn f32's.
# Cases: ViT-B/16 and DeiT-S batch 1 and 8 (224 x 224), BERT-base (BertModel, sequence 128) batch 1 and 8;
# random weights. attn and PyTorch run with OMP_WAIT_POLICY=PASSIVE and without, the better median of each
# round counts; ONNX Runtime runs once a round (its own thread pool). The table gives per case the median of
# the rounds' medians with their spread (min-max), and the ratios of those medians.
#
#   bash bench/int8_infer.sh [BUILD_DIR] [--iters N] [--rounds R] [--threads T] [--quick]
#
# BUILD_DIR defaults to build (it needs BUILD_DIR/attn). --rounds defaults to 5 (the targets are read over
# at least 5). --quick: DeiT-Ti and bert-mini batch 1, 1 round, 3 iterations (plumbing check).
# ATTN_INT8_DTYPE=f32 runs attn's int8 column with --dtype f32 instead, to check this script's plumbing on an
# attn without --dtype int8; its figures are not an int8 measurement and the table and the JSON lines say so.
# Writes one JSON line per case and round to $WORK/int8_infer.jsonl (WORK defaults to a temp dir), the
# sides' stderr to $WORK/peers.log, and prints a table. $WORK/int8_infer.raw.jsonl holds the same lines after
# a host record and a command record, as `python3 bench/results_table.py --add` reads them.
set -euo pipefail
shopt -s inherit_errexit
root=$(cd "$(dirname "$0")/.." && pwd)
script=int8_infer.sh
source "$root/bench/sides.sh"
command="bash bench/int8_infer.sh${*:+ $*}"
build=${1:-build}
[[ $# -gt 0 ]] && shift
iters="" rounds="" threads=2 quick=0
while [[ $# -gt 0 ]]; do
  case $1 in
    --iters) iters=$(count "$1" "${2-}"); shift 2 ;;
    --rounds) rounds=$(count "$1" "${2-}"); shift 2 ;;
    --threads) threads=$(count "$1" "${2-}"); shift 2 ;;
    --quick) quick=1; shift ;;
    *) echo "int8_infer.sh: unknown argument '$1' (expected --iters N, --rounds R, --threads T, --quick)" >&2; exit 2 ;;
  esac
done
if [[ $quick = 1 ]]; then iters=${iters:-3} rounds=${rounds:-1}; else iters=${iters:-20} rounds=${rounds:-5}; fi
int8_dtype=${ATTN_INT8_DTYPE:-int8}
[[ $int8_dtype = int8 || $int8_dtype = f32 ]] ||
  { echo "int8_infer.sh: ATTN_INT8_DTYPE expects int8 or f32 (f32: a plumbing check), got '$int8_dtype'" >&2; exit 2; }
[[ "$build" = /* ]] || build="$root/$build"
attn="$build/attn"
[[ -x "$attn" ]] || { echo "int8_infer.sh: expected the attn binary at $attn (build it first)" >&2; exit 2; }
work=${WORK:-$(mktemp -d)}
mkdir -p "$work"
out="$work/int8_infer.jsonl"
log="$work/peers.log"
: >"$out"
: >"$log"
bert_config='{"architecture": "BertModel"}'
host=$(/usr/bin/python3 "$root/bench/results_table.py" --host-record)

# model batch (a BERT model runs at sequence 128)
cases=("vit_base_patch16_224 1" "vit_base_patch16_224 8" "deit_small_patch16_224 1" "deit_small_patch16_224 8"
       "bert-base-uncased 1" "bert-base-uncased 8")
[[ $quick = 1 ]] && cases=("deit_tiny_patch16_224 1" "bert-mini 1")

if [[ $int8_dtype = int8 ]]; then
  if ! j=$(ATTN_NO_REEXEC=1 "$attn" bench --model deit_tiny_patch16_224 --iters 1 --warmup 0 --gemm-seconds 0 \
             --threads "$threads" --dtype int8 --json 2>"$log" | tail -1); then
    echo "int8_infer.sh: this attn cannot run 'attn bench --dtype int8' (it said: $(tail -1 "$log")), so there is" \
         "nothing to measure; build an attn with int8 inference. ATTN_INT8_DTYPE=f32 runs this script with f32 in" \
         "attn's int8 place, as a check of the script's plumbing only." >&2
    exit 1
  fi
  /usr/bin/python3 -c 'import json, sys
j = json.loads(sys.argv[1])
d, w = j.get("dtype"), j.get("weights_mb")
if d != "int8" or w is None:
    sys.exit(f"int8_infer.sh: attn bench --dtype int8 --json reported dtype {d!r} and weights_mb {w!r}; this "
             "script needs dtype int8 and weights_mb")' "$j"
else
  echo "int8_infer.sh: ATTN_INT8_DTYPE=$int8_dtype: attn's int8 column runs --dtype $int8_dtype (plumbing check," \
       "not an int8 measurement)" >&2
fi

is_bert() { [[ $1 = bert-* ]]; }
attn_run() {  # attn_run MODEL BATCH DTYPE
  local extra=()
  is_bert "$1" && extra=(--model-config "$bert_config" --seq-len 128)
  both_policies "attn bench --dtype $3" "$attn" bench --model "$1" "${extra[@]}" --batch "$2" --threads "$threads" \
    --iters "$iters" --dtype "$3" --json
}
peer_cmd() {  # peer_cmd MODEL BATCH: sets pcmd to the peer script's command line for this case
  if is_bert "$1"; then
    pcmd=(/usr/bin/python3 "$root/bench/peers/bert_infer.py" --model "$1" --batch "$2" --seq-len 128 --threads "$threads")
  else
    pcmd=(/usr/bin/python3 "$root/bench/peers/vit_infer.py" --model "$1" --batch "$2" --threads "$threads")
  fi
}
ort_run() {  # ort_run MODEL BATCH
  local j
  peer_cmd "$1" "$2"
  j=$("${pcmd[@]}" --iters "$iters" --peer onnxruntime --dtype f32 2>>"$log" | tail -1) || true
  json_ok "ONNX Runtime ($1)" "$j"
  echo "$j"
}
torch_run() {  # torch_run MODEL BATCH ENGINE
  peer_cmd "$1" "$2"
  both_policies "PyTorch int8 ($1)" "${pcmd[@]}" --iters "$iters" --peer pytorch --dtype int8 --qengine "$3"
}

# The PyTorch peer's engine for each case: a short probe of every engine (both medians kept in the lines).
declare -A engine probe
for c in "${cases[@]}"; do
  read -r model batch <<<"$c"
  echo "== $model batch $batch: PyTorch int8 engine probe" >&2
  peer_cmd "$model" "$batch"
  j=$(env OMP_WAIT_POLICY=PASSIVE "${pcmd[@]}" --iters 3 --warmup 1 --peer pytorch --dtype int8 --qengine best \
        2>>"$log" | tail -1) || true
  json_ok "PyTorch int8 engine probe ($model)" "$j"
  probe[$c]=$(/usr/bin/python3 -c 'import json, sys; print(json.dumps(json.loads(sys.argv[1])["qengine_median_ms"]))' "$j")
  engine[$c]=$(/usr/bin/python3 -c 'import json, sys; print(json.loads(sys.argv[1])["qengine"])' "$j")
done

sides=(attn_int8 attn_f32 ort torch_int8)
for ((r = 1; r <= rounds; ++r)); do
  order=("${sides[@]}")
  ((r % 2 == 0)) && order=(torch_int8 ort attn_f32 attn_int8)
  for c in "${cases[@]}"; do
    read -r model batch <<<"$c"
    declare -A got=()
    for side in "${order[@]}"; do
      echo "== round $r/$rounds, $model batch $batch: $side" >&2
      case $side in
        attn_int8) got[$side]=$(attn_run "$model" "$batch" "$int8_dtype") ;;
        attn_f32) got[$side]=$(attn_run "$model" "$batch" f32) ;;
        ort) got[$side]=$(ort_run "$model" "$batch") ;;
        torch_int8) got[$side]=$(torch_run "$model" "$batch" "${engine[$c]}") ;;
      esac
    done
    seq=null
    is_bert "$model" && seq=128
    printf '{"bench":"int8_infer","round":%s,"rounds":%s,"model":"%s","batch":%s,"seq_len":%s,"threads":%s,"attn_int8_dtype":"%s","qengine_probe_ms":%s,"attn_int8":%s,"attn_f32":%s,"ort":%s,"torch_int8":%s}\n' \
      "$r" "$rounds" "$model" "$batch" "$seq" "$threads" "$int8_dtype" "${probe[$c]}" "${got[attn_int8]}" \
      "${got[attn_f32]}" "${got[ort]}" "${got[torch_int8]}" >>"$out"
    unset got
  done
done

/usr/bin/python3 - "$out" "$threads" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
threads = sys.argv[2]
labels = {"vit_base_patch16_224": "ViT-B/16", "deit_small_patch16_224": "DeiT-S", "deit_tiny_patch16_224": "DeiT-Ti",
          "bert-base-uncased": "BERT-base"}
sides = [("attn_int8", "attn int8"), ("attn_f32", "attn f32"), ("ort", "ORT f32"), ("torch_int8", "PyTorch int8")]
plumbing = any(r["attn_int8_dtype"] != "int8" for r in rows)
keys = []
for r in rows:
    if (r["model"], r["batch"]) not in keys:
        keys.append((r["model"], r["batch"]))
rounds = max(r["round"] for r in rows)
print(f"\nint8 inference, {threads} threads, {rounds} round(s): median of the rounds' medians, ms (min-max over rounds)")
if plumbing:
    print(f"PLUMBING CHECK: attn's int8 column ran --dtype {rows[0]['attn_int8_dtype']}; no figure here is an int8 "
          f"measurement")
if rounds < 5:
    print("fewer than 5 rounds: a plumbing check, not a reading of the targets")
def case(k):
    m, b = k
    return f"{labels.get(m, m)}, batch {b}" + (", seq 128" if m.startswith("bert") else "")
def stats(rs, side):
    v = [r[side]["latency_ms"]["median"] for r in rs]
    return statistics.median(v), min(v), max(v)
print(f"{'case':30}" + "".join(f" {n:>22}" for _, n in sides) + "  engine (probe ms)")
summary = {}
for k in keys:
    rs = [r for r in rows if (r["model"], r["batch"]) == k]
    s = {side: stats(rs, side) for side, _ in sides}
    summary[k] = (rs, s)
    probe = ", ".join(f"{e} {v:.0f}" for e, v in rs[0]["qengine_probe_ms"].items())
    print(f"{case(k):30}" + "".join(f" {f'{m:.1f} ({lo:.1f}-{hi:.1f})':>22}" for m, lo, hi in s.values())
          + f"  {rs[0]['torch_int8']['qengine']} ({probe})")
print(f"\nattn int8 faster than each peer (peer median / attn int8 median), and weights")
print(f"{'case':30} {'vs attn f32':>11} {'(>=1.5x)':>9} {'vs ORT f32':>11} {'(>=1.5x)':>9} {'vs PyTorch int8':>15} "
      f"{'(>=2x)':>9} {'weights MB int8 / f32':>22} {'(<=0.3x)':>9}")
def st(ok):
    return "met" if ok else "NOT met"
for k, (rs, s) in summary.items():
    a = s["attn_int8"][0]
    q = {side: s[side][0] / a for side in ("attn_f32", "ort", "torch_int8")}
    wi, wf = rs[0]["attn_int8"]["weights_mb"], rs[0]["attn_f32"]["weights_mb"]
    print(f"{case(k):30} {q['attn_f32']:10.2f}x {st(q['attn_f32'] >= 1.5):>9} {q['ort']:10.2f}x {st(q['ort'] >= 1.5):>9} "
          f"{q['torch_int8']:14.2f}x {st(q['torch_int8'] >= 2):>9} {f'{wi:.1f} / {wf:.1f} = {wi / wf:.2f}x':>22} "
          f"{st(wi / wf <= 0.3):>9}")
print("\nPyTorch int8 (quantize_dynamic of nn.Linear): what ran in int8")
for k, (rs, _) in summary.items():
    t = rs[0]["torch_int8"]
    qz = t["quantized"]
    impl = f"; {t['impl']} tree" if "impl" in t else ""
    print(f"  {case(k):30} {qz['linear_layers_int8']} Linear layers int8, {qz['linear_layers_f32']} left f32; "
          f"{100 * qz['int8_share_of_linear_weights']:.0f}% of the Linear weights int8 "
          f"({qz['weights_mb']['int8']:.1f} MB int8, {qz['weights_mb']['linear_f32']:.1f} MB Linear f32, "
          f"{qz['weights_mb']['other_f32']:.1f} MB other f32){impl}")
print(f"\nraw runs: {sys.argv[1]}")
PY
{ echo "$host"
  /usr/bin/python3 -c 'import json, sys; print(json.dumps({"kind": "command", "command": sys.argv[1]}))' "$command"
  cat "$out"; } >"$work/int8_infer.raw.jsonl"
if [[ $int8_dtype = int8 ]]; then
  echo "records for docs/results.md: python3 bench/results_table.py --add $work/int8_infer.raw.jsonl"
fi
