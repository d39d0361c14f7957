#!/usr/bin/env bash
# Installs the ONNX Runtime peer (npm package onnxruntime-node, pinned in bench/peers/ort/package.json
# and package-lock.json) into bench/peers/ort/node_modules. --ignore-scripts: the package's install
# script downloads GPU libraries; the CPU library for Linux x64 ships in the package itself.
set -euo pipefail
dir=$(cd "$(dirname "$0")/ort" && pwd)
if [[ -f "$dir/node_modules/onnxruntime-node/package.json" ]]; then
  exit 0
fi
command -v npm >/dev/null || { echo "ort_setup.sh: npm not found (Node.js 20 + npm are needed for the ONNX Runtime peer)" >&2; exit 2; }
echo "ort_setup.sh: installing onnxruntime-node into $dir/node_modules" >&2
npm ci --prefix "$dir" --ignore-scripts --no-audit --no-fund >&2
