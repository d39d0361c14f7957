#!/usr/bin/env bash
# Runs every speed benchmark (each measures attn and its PyTorch peer in the same run, same threads) with
# the commands docs/results.md shows, collects their JSON summary lines in
# build/bench/results-<date>.jsonl, and hands that file to bench/results_table.py, which writes the run's
# records to bench/results/<date>-<host>.jsonl and regenerates docs/results.md (commit both). Usage:
#   bash bench/run_all.sh [build-dir]        (default build/test; builds the bench targets first)
# The file holds, in order: a host record (CPU model and flags from /proc/cpuinfo), then for each
# benchmark a {"kind": "command"} record and the lines it printed (bench/results_table.py documents the
# schema). Takes about an hour on 2 cores; use a quiet machine.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build/test}
[[ -f "$build/CMakeCache.txt" ]] || cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" --target attn_cli fma_peak_bench linear_bench kernels_bench attention_bench conv_bench mlp_train_bench \
  encoder_block_bench vit_train_bench transformer_decode_bench rnn_bench translate_train_bench
out="build/bench/results-$(date -u +%Y%m%d-%H%M).jsonl"
mkdir -p build/bench
python3 bench/results_table.py --host-record >"$out"
command_record() { python3 -c 'import json, sys; print(json.dumps({"kind": "command", "command": sys.argv[1]}))' "$1" >>"$out"; }
# The host may give the VM's vCPUs less than a core each at times: probe the FMA ceiling before and
# after; a 2-thread figure well under twice the 1-thread one means the run did not have both cores and
# its ratios are not comparable.
probe() {
  "$build/bench/fma_peak_bench" --threads 2 | tee -a "build/bench/fma_peak.txt" | head -1
  tail -n 1 "build/bench/fma_peak.txt" | grep '^{' >> "$out" || true
}
echo "== FMA ceiling probe (before)"
probe
# kernels_bench and rnn_bench print tables only (no JSON summary line): their output stays in build/bench/.
benches=(
  "linear_bench --threads 2 --reps 100"
  "kernels_bench --threads 2"
  "attention_bench --threads 2 --reps 5 --rounds 3"
  "conv_bench --threads 2"
  "mlp_train_bench --threads 2"
  "encoder_block_bench --threads 2"
  "vit_train_bench --threads 2 --model vit_fmnist_small --steps 10 --infer-reps 5 --rounds 9"
  "vit_train_bench --threads 2 --model vit_fmnist --steps 8 --infer-reps 4 --rounds 5"
  "transformer_decode_bench --threads 2 --reps 3"
  "rnn_bench --threads 2"
)
for line in "${benches[@]}"; do
  read -r b args <<<"$line"
  [[ -x "$build/bench/$b" ]] || continue
  echo "== $b $args"
  command_record "$build/bench/$b $args"
  # shellcheck disable=SC2086
  "$build/bench/$b" $args | tee "build/bench/$b.txt"
  tail -n 1 "build/bench/$b.txt" | grep '^{' >> "$out" || true
done
for dtype in f32 bf16; do
  echo "== ViT / DeiT inference, $dtype (attn bench vs torchvision)"
  rm -f "build/bench/vit_infer_$dtype/vit_infer.jsonl"
  # bf16 stops (exit 0, nothing written) on a CPU without a bf16 matmul.
  WORK="build/bench/vit_infer_$dtype" bash bench/vit_infer.sh "$build" --iters 10 --dtype "$dtype"
  if [[ -s "build/bench/vit_infer_$dtype/vit_infer.jsonl" ]]; then
    flag=""
    [[ $dtype = bf16 ]] && flag=" --dtype bf16"
    command_record "bash bench/vit_infer.sh $build --iters 10$flag"
    cat "build/bench/vit_infer_$dtype/vit_infer.jsonl" >> "$out"
  fi
done
echo "== translation training (attn vs torch.nn.Transformer on the same batches)"
command_record "bash bench/translate.sh $build custom --minutes 3 --limit-test 100"
bash bench/translate.sh "$build" custom --minutes 3 --limit-test 100 --work build/bench/translate
tail -n 1 build/bench/translate/bench.log | grep '^{' >> "$out" || true
echo "== FMA ceiling probe (after)"
probe
echo "summary lines: $out"
python3 bench/results_table.py --add "$out"
