#!/usr/bin/env bash
# Inference at the GEMM limit, f32 and bf16, side by side at T threads in R alternating rounds (each round runs
# every side once per case; odd rounds in one side order, even rounds in the reverse):
#   - attn's overhead: `attn bench`'s model time over the time of exactly its own GEMMs run alone on oneDNN
#     (gemm_time_ms: same shapes, count, dtypes and packed weights, measured in the same run); targets
#     DeiT-Ti <= 1.25, DeiT-S, BERT-base and Swin-T <= 1.15, ViT-B/16 <= 1.10, f32 and bf16, batch 1 and 8;
#   - attn f32 against ONNX Runtime f32 (bench/peers/*_infer.py --peer onnxruntime: torch.onnx.export of the
#     same model, graph optimizations all, T intra-op threads): >= 1.3x;
#   - attn bf16 against PyTorch bf16 (the peers' --dtype bf16: autocast of the f32 model or the model cast to
#     bf16, the faster; torch 1.13's autocast cannot run torchvision's Swin, which then runs cast): >= 1.5x.
# Cases: DeiT-Ti, DeiT-S, ViT-B/16, Swin-T (224 x 224) and BERT-base (BertModel, sequence 128), batch 1 and 8;
# random weights. attn runs at its default setting (the attn command's PASSIVE re-run with a short spin),
# PyTorch with OMP_WAIT_POLICY=PASSIVE and without, the better median of each round counting; ONNX Runtime has
# its own thread pool. bf16 runs only where oneDNN has a native bf16 matmul (AVX512-BF16 or AMX); elsewhere the
# bf16 columns say "not measurable here". The table gives per case the median of the rounds' medians with
# their spread (min-max), and the ratios of those medians.
#
#   bash bench/gemm_limit.sh [BUILD_DIR] [--iters N] [--rounds R] [--threads T] [--models M,M] [--batches 1,8]
#                            [--quick]
#
# BUILD_DIR defaults to build (it needs BUILD_DIR/attn). --rounds defaults to 5. --models and --batches narrow
# the cases (registry names: deit_tiny_patch16_224, deit_small_patch16_224, vit_base_patch16_224, swin_t,
# bert-base-uncased). --quick: DeiT-Ti batch 1, 1 round, 3 iterations (plumbing check).
# Writes one JSON line per case and round to $WORK/gemm_limit.jsonl (WORK defaults to a temp dir), the sides'
# stderr to $WORK/peers.log, and prints a table. $WORK/gemm_limit.raw.jsonl holds the same lines after a host
# record and a command record, as `python3 bench/results_table.py --add` reads them.
set -euo pipefail
shopt -s inherit_errexit
root=$(cd "$(dirname "$0")/.." && pwd)
script=gemm_limit.sh
source "$root/bench/sides.sh"
command="bash bench/gemm_limit.sh${*:+ $*}"
build=${1:-build}
[[ $# -gt 0 ]] && shift
iters="" rounds="" threads=2 quick=0
models="deit_tiny_patch16_224,deit_small_patch16_224,vit_base_patch16_224,swin_t,bert-base-uncased"
batches="1,8"
while [[ $# -gt 0 ]]; do
  case $1 in
    --iters) iters=$(count "$1" "${2-}"); shift 2 ;;
    --rounds) rounds=$(count "$1" "${2-}"); shift 2 ;;
    --threads) threads=$(count "$1" "${2-}"); shift 2 ;;
    --models) models=${2-}; shift 2 ;;
    --batches) batches=${2-}; shift 2 ;;
    --quick) quick=1; shift ;;
    *) echo "gemm_limit.sh: unknown argument '$1' (expected --iters N, --rounds R, --threads T, --models M,M," \
            "--batches B,B, --quick)" >&2; exit 2 ;;
  esac
done
if [[ $quick = 1 ]]; then iters=${iters:-3} rounds=${rounds:-1} models=deit_tiny_patch16_224 batches=1
else iters=${iters:-10} rounds=${rounds:-5}; fi
[[ "$build" = /* ]] || build="$root/$build"
attn="$build/attn"
[[ -x "$attn" ]] || { echo "gemm_limit.sh: expected the attn binary at $attn (build it first)" >&2; exit 2; }
work=${WORK:-$(mktemp -d)}
mkdir -p "$work"
out="$work/gemm_limit.jsonl"
log="$work/peers.log"
: >"$out"
: >"$log"
bert_config='{"architecture": "BertModel"}'
host=$(/usr/bin/python3 "$root/bench/results_table.py" --host-record)

cases=()
IFS=, read -r -a model_list <<<"$models"
IFS=, read -r -a batch_list <<<"$batches"
for m in "${model_list[@]}"; do
  case $m in
    deit_tiny_patch16_224 | deit_small_patch16_224 | vit_base_patch16_224 | swin_t | bert-base-uncased) ;;
    *) echo "gemm_limit.sh: --models: '$m' is not one of deit_tiny_patch16_224, deit_small_patch16_224," \
            "vit_base_patch16_224, swin_t, bert-base-uncased" >&2; exit 2 ;;
  esac
  for b in "${batch_list[@]}"; do cases+=("$m $(count --batches "$b")"); done
done

# bf16 only where oneDNN has a native bf16 matmul: elsewhere attn emulates it and PyTorch 1.13 falls back to
# single-threaded kernels (seconds a pass), and neither is what the bf16 targets are about.
path=$("$attn" bench --model deit_tiny_patch16_224 --iters 1 --warmup 0 --gemm-seconds 0 --dtype bf16 \
         --threads "$threads" --json 2>>"$log" | tail -1 |
       /usr/bin/python3 -c 'import json, sys; print(json.load(sys.stdin)["gemm_path"])')
bf16=1
if [[ $path = emulated* ]]; then
  bf16=0
  echo "gemm_limit.sh: this CPU has no native bf16 matmul (attn's bf16 GEMM: $path): the bf16 columns are" \
       "not measurable here" >&2
fi

attn_run() {  # attn_run MODEL BATCH DTYPE: attn bench at the attn command's default setting
  local extra=() j
  [[ $1 = bert-* ]] && extra=(--model-config "$bert_config" --seq-len 128)
  j=$("$attn" bench --model "$1" "${extra[@]}" --batch "$2" --threads "$threads" --iters "$iters" --dtype "$3" \
        --gemm-seconds 1 --json 2>>"$log" | tail -1) || true
  json_ok "attn bench --model $1 --dtype $3" "$j"
  echo "$j"
}
peer_cmd() {  # peer_cmd MODEL BATCH: sets pcmd to the peer script's command line for this case
  case $1 in
    bert-*) pcmd=(/usr/bin/python3 "$root/bench/peers/bert_infer.py" --model "$1" --batch "$2" --seq-len 128) ;;
    swin_*) pcmd=(/usr/bin/python3 "$root/bench/peers/swin_infer.py" --model "$1" --batch "$2") ;;
    *) pcmd=(/usr/bin/python3 "$root/bench/peers/vit_infer.py" --model "$1" --batch "$2") ;;
  esac
  pcmd+=(--threads "$threads" --iters "$iters")
}
ort_run() {  # ort_run MODEL BATCH
  local j
  peer_cmd "$1" "$2"
  j=$("${pcmd[@]}" --peer onnxruntime --dtype f32 2>>"$log" | tail -1) || true
  json_ok "ONNX Runtime ($1)" "$j"
  echo "$j"
}
torch_run() {  # torch_run MODEL BATCH
  peer_cmd "$1" "$2"
  both_policies "PyTorch bf16 ($1)" "${pcmd[@]}" --peer pytorch --dtype bf16
}

sides=(attn_f32 ort)
((bf16)) && sides=(attn_f32 attn_bf16 ort torch_bf16)
for ((r = 1; r <= rounds; ++r)); do
  order=("${sides[@]}")
  if ((r % 2 == 0)); then
    order=()
    for ((i = ${#sides[@]} - 1; i >= 0; --i)); do order+=("${sides[i]}"); done
  fi
  for c in "${cases[@]}"; do
    read -r model batch <<<"$c"
    declare -A got=([attn_bf16]=null [torch_bf16]=null)
    for side in "${order[@]}"; do
      echo "== round $r/$rounds, $model batch $batch: $side" >&2
      case $side in
        attn_f32) got[$side]=$(attn_run "$model" "$batch" f32) ;;
        attn_bf16) got[$side]=$(attn_run "$model" "$batch" bf16) ;;
        ort) got[$side]=$(ort_run "$model" "$batch") ;;
        torch_bf16) got[$side]=$(torch_run "$model" "$batch") ;;
      esac
    done
    seq=null
    [[ $model = bert-* ]] && seq=128
    printf '{"bench":"gemm_limit","round":%s,"rounds":%s,"model":"%s","batch":%s,"seq_len":%s,"threads":%s,"bf16_native":%s,"attn_f32":%s,"attn_bf16":%s,"ort":%s,"torch_bf16":%s}\n' \
      "$r" "$rounds" "$model" "$batch" "$seq" "$threads" "$( ((bf16)) && echo true || echo false)" \
      "${got[attn_f32]}" "${got[attn_bf16]}" "${got[ort]}" "${got[torch_bf16]}" >>"$out"
    unset got
  done
done

/usr/bin/python3 "$root/bench/gemm_limit_table.py" "$out" "$threads"
{ echo "$host"
  /usr/bin/python3 -c 'import json, sys; print(json.dumps({"kind": "command", "command": sys.argv[1]}))' "$command"
  cat "$out"; } >"$work/gemm_limit.raw.jsonl"
echo "records for docs/results.md: python3 bench/results_table.py --add $work/gemm_limit.raw.jsonl"
