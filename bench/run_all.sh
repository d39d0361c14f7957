#!/usr/bin/env bash
# Runs every speed benchmark (each measures attn and its PyTorch peer in the same run, same threads) with
# the commands docs/results.md shows, collects their JSON summary lines in
# build/bench/results-<date>.jsonl, and hands that file to bench/results_table.py, which writes the run's
# records to bench/results/<date>-<host>.jsonl and regenerates docs/results.md (commit both). Usage:
#   bash bench/run_all.sh [BUILD_DIR] [--quick] [--raw FILE] [--no-add]
# BUILD_DIR defaults to build/test; the bench targets are built first. --quick: fewer repetitions
# (about 10 minutes instead of an hour; for comparing builds, not for the page); --raw FILE: where the
# raw lines go; --no-add: leave bench/results and docs/results.md alone.
# The file holds, in order: a host record (CPU model and flags from /proc/cpuinfo), then for each
# benchmark a {"kind": "command"} record and the lines it printed (bench/results_table.py documents the
# schema). Use a quiet machine.
set -euo pipefail
cd "$(dirname "$0")/.."
build=build/test
quick=0
add=1
out="build/bench/results-$(date -u +%Y%m%d-%H%M).jsonl"
while [[ $# -gt 0 ]]; do
  case $1 in
    --quick) quick=1; shift ;;
    --raw) out=$2; shift 2 ;;
    --no-add) add=0; shift ;;
    -*) echo "run_all.sh: unknown option '$1' (expected --quick, --raw FILE, --no-add)" >&2; exit 2 ;;
    *) build=$1; shift ;;
  esac
done
[[ -f "$build/CMakeCache.txt" ]] || cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" --target attn_cli fma_peak_bench linear_bench kernels_bench attention_bench conv_bench mlp_train_bench \
  encoder_block_bench vit_train_bench transformer_decode_bench rnn_bench translate_train_bench bert_train_bench bert_finetune_bench >/dev/null
log="$(dirname "$out")/$(basename "$out" .jsonl)"
mkdir -p "$log"
python3 bench/results_table.py --host-record >"$out"
command_record() { python3 -c 'import json, sys; print(json.dumps({"kind": "command", "command": sys.argv[1]}))' "$1" >>"$out"; }
# The host may give the VM's vCPUs less than a core each at times: probe the FMA ceiling before and
# after; a 2-thread figure well under twice the 1-thread one means the run did not have both cores and
# its ratios are not comparable.
probe() {
  "$build/bench/fma_peak_bench" --threads 2 | tee -a "$log/fma_peak.txt" | head -1
  tail -n 1 "$log/fma_peak.txt" | grep '^{' >> "$out" || true
}
echo "== FMA ceiling probe (before)"
probe
if [[ $quick = 1 ]]; then
  benches=(
    "linear_bench --threads 2 --reps 30"
    "kernels_bench --threads 2 --reps 15"
    "attention_bench --threads 2 --reps 3 --rounds 1"
    "conv_bench --threads 2"
    "mlp_train_bench --threads 2"
    "encoder_block_bench --threads 2"
    "vit_train_bench --threads 2 --model vit_fmnist_small --steps 5 --infer-reps 3 --rounds 2"
    "vit_train_bench --threads 2 --model swin_fmnist --steps 5 --infer-reps 0 --rounds 2"
    "bert_finetune_bench --threads 2 --steps 2 --rounds 1"
    "bert_train_bench --threads 2 --steps 3 --rounds 1"
    "transformer_decode_bench --threads 2 --reps 1"
    "rnn_bench --threads 2"
  )
  infer_iters=5
  translate_args=(--minutes 1 --limit-test 50)
else
  benches=(
    "linear_bench --threads 2 --reps 100"
    "kernels_bench --threads 2"
    "attention_bench --threads 2 --reps 5 --rounds 3"
    "conv_bench --threads 2"
    "mlp_train_bench --threads 2"
    "encoder_block_bench --threads 2"
    "vit_train_bench --threads 2 --model vit_fmnist_small --steps 10 --infer-reps 5 --rounds 9"
    "vit_train_bench --threads 2 --model vit_fmnist --steps 8 --infer-reps 4 --rounds 5"
    "vit_train_bench --threads 2 --model swin_fmnist --steps 8 --infer-reps 0 --rounds 5"
    "bert_finetune_bench --threads 2 --steps 4 --rounds 3"
    "bert_train_bench --threads 2 --steps 5 --rounds 3"
    "transformer_decode_bench --threads 2 --reps 3"
    "rnn_bench --threads 2"
  )
  infer_iters=10
  translate_args=(--minutes 3 --limit-test 100)
fi
for line in "${benches[@]}"; do
  read -r b args <<<"$line"
  [[ -x "$build/bench/$b" ]] || continue
  echo "== $b $args"
  command_record "$build/bench/$b $args"
  # shellcheck disable=SC2086
  "$build/bench/$b" $args | tee "$log/$b.txt"
  tail -n 1 "$log/$b.txt" | grep '^{' >> "$out" || true
done
infer_runs() {  # infer_runs NAME TITLE: bench/NAME.sh at f32 and bf16, its lines appended to the summary
  local name=$1 title=$2 dtype flag
  for dtype in f32 bf16; do
    echo "== $title, $dtype"
    rm -f "$log/${name}_$dtype/$name.jsonl"
    # bf16 stops (exit 0, nothing written) on a CPU without a bf16 matmul.
    WORK="$log/${name}_$dtype" bash "bench/$name.sh" "$build" --iters $infer_iters --dtype "$dtype"
    if [[ -s "$log/${name}_$dtype/$name.jsonl" ]]; then
      flag=""
      [[ $dtype = bf16 ]] && flag=" --dtype bf16"
      command_record "bash bench/$name.sh $build --iters $infer_iters$flag"
      cat "$log/${name}_$dtype/$name.jsonl" >> "$out"
    fi
  done
}
infer_runs vit_infer "ViT / DeiT inference (attn bench vs torchvision)"
infer_runs bert_infer "BERT inference (attn bench vs PyTorch and ONNX Runtime)"
infer_runs swin_infer "Swin inference (attn bench vs torchvision swin_t in PyTorch and ONNX Runtime)"
echo "== translation training (attn vs torch.nn.Transformer on the same batches)"
command_record "bash bench/translate.sh $build custom ${translate_args[*]}"
bash bench/translate.sh "$build" custom "${translate_args[@]}" --work "$log/translate"
tail -n 1 "$log/translate/bench.log" | grep '^{' >> "$out" || true
echo "== FMA ceiling probe (after)"
probe
echo "summary lines: $out"
[[ $add = 1 ]] && python3 bench/results_table.py --add "$out"
exit 0
