#!/usr/bin/env bash
# The main job on its built-in default: install from Debian, build, train and evaluate the default
# model on Fashion-MNIST. Extra arguments go to `attn train` (e.g. --epochs 1).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install_deps.sh
cmake -S . -B build/main -G Ninja -DCMAKE_BUILD_TYPE=Release -DATTN_BUILD_TESTS=OFF -DATTN_BUILD_BENCH=OFF >/dev/null
cmake --build build/main -j "$(nproc)"
exec ./build/main/attn demo "$@"
