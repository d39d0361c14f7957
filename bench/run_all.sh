#!/usr/bin/env bash
# Runs every benchmark (each measures attn and its PyTorch peer in the same run, same threads) and
# collects their JSON summary lines in build/bench/results-<date>.jsonl. Usage:
#   bash bench/run_all.sh [build-dir]        (default build/test; builds the bench targets first)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build/test}
[[ -f "$build/CMakeCache.txt" ]] || cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" --target attn_cli fma_peak_bench linear_bench kernels_bench attention_bench conv_bench mlp_train_bench \
  encoder_block_bench vit_train_bench transformer_decode_bench rnn_bench translate_train_bench
out="build/bench/results-$(date +%Y%m%d-%H%M).jsonl"
mkdir -p build/bench
# The host may give the VM's vCPUs less than a core each at times (docs/results.md): probe the FMA
# ceiling before and after; a 2-thread figure well under twice the 1-thread one means the run did
# not have both cores and its ratios are not comparable.
probe() {
  "$build/bench/fma_peak_bench" --threads 2 | tee -a "build/bench/fma_peak.txt" | head -1
  tail -n 1 "build/bench/fma_peak.txt" | grep '^{' >> "$out" || true
}
echo "== FMA ceiling probe (before)"
probe
for b in linear_bench kernels_bench attention_bench conv_bench mlp_train_bench encoder_block_bench \
         vit_train_bench transformer_decode_bench rnn_bench; do
  [[ -x "$build/bench/$b" ]] || continue
  echo "== $b"
  "$build/bench/$b" --threads 2 | tee "build/bench/$b.txt"
  tail -n 1 "build/bench/$b.txt" | grep '^{' >> "$out" || true
done
echo "== ViT / DeiT inference (attn bench vs torchvision, issue 5)"
bash bench/vit_infer.sh "$build" --iters 10
echo "== translation training (attn vs torch.nn.Transformer on the same batches)"
bash bench/translate.sh "$build" quick
echo "== FMA ceiling probe (after)"
probe
echo "summary lines: $out"
