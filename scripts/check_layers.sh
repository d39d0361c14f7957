#!/usr/bin/env bash
# Lists the #includes that go against the library's layers, and exits 1 if there is any.
#
#   scripts/check_layers.sh                  # every folder of src/ and cli/; "ok" when clean
#   scripts/check_layers.sh --with-headers   # also include/attn/
#
# Layers, bottom up; a file may include headers of its own layer and of the layers below:
#   0  core + autograd  src/core, src/autograd, include/attn/core, include/attn/autograd
#   1  io, data + text, kernels (src/backend): each on core only; io and data + text are file formats
#      and data, kernels are private to ops (nn and optim reach them through ops calls); dist
#      (the communicator and the gradient all-reduce of data-parallel training) on core + autograd
#   2  ops              src/ops, include/attn/ops
#   3  nn               src/nn, include/attn/nn
#   4  optim            src/optim, include/attn/optim
#   5  models           src/models (incl. pretrained), include/attn/models
#   6  infer + viz      src/infer, src/viz (viz may use infer)
#   7  train            src/train (trainer, tasks, distillation, EMA, training checkpoints)
#   8  experiment       src/experiment (the notes' claims as experiments on the trainer)
#   9  cli              cli/
# The one documented exception: the autograd engine accumulates gradients with attn::add
# (src/autograd/engine.cpp includes attn/ops/elementwise.h).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

folders=(src cli)
if [[ ${1:-} == --with-headers ]]; then
  folders+=(include/attn)
elif [[ -n ${1:-} ]]; then
  echo "usage: scripts/check_layers.sh [--with-headers]" >&2
  exit 2
fi

# "file include" pairs allowed although they go up (see above).
exceptions=("src/autograd/engine.cpp attn/ops/elementwise.h")

# The helpers below set a variable instead of printing (no subshell per include).
rank() {   # -> RANK
  case "$1" in
    core | autograd) RANK=0 ;;
    backend | io | data | text | dist) RANK=1 ;;
    ops) RANK=2 ;;
    nn) RANK=3 ;;
    optim) RANK=4 ;;
    models) RANK=5 ;;
    infer | viz) RANK=6 ;;
    train) RANK=7 ;;
    experiment) RANK=8 ;;
    cli) RANK=9 ;;
    *) RANK=10 ;;
  esac
}

# dir + relative include -> RESOLVED, a checkout-relative path with ".." and "." resolved.
resolve() {
  local -a parts=() out=()
  IFS=/ read -ra parts <<<"$1/$2"
  local p
  for p in "${parts[@]}"; do
    case "$p" in
      "" | .) ;;
      ..) ((${#out[@]})) && unset 'out[${#out[@]}-1]' ;;
      *) out+=("$p") ;;
    esac
  done
  local IFS=/
  RESOLVED="${out[*]}"
}

# -> LAYER, the layer folder of a checkout-relative path (src/X/... or include/attn/X/...), else "?".
layer_of() {
  local p
  case "$1" in
    cli/* | include/attn/attn.h) LAYER=cli ;;   # attn.h, every header at once: for the tool and users
    src/*/*) p=${1#src/}; LAYER=${p%%/*} ;;
    include/attn/*/*) p=${1#include/attn/}; LAYER=${p%%/*} ;;
    *) LAYER="?" ;;
  esac
}

bad=0
while IFS= read -r file; do
  layer_of "$file"; from=$LAYER
  rank "$from"; from_rank=$RANK
  while IFS=: read -r line text; do
    inc=${text#*\"}
    inc=${inc%%\"*}
    if [[ $inc == attn/* ]]; then
      target=include/$inc
    else
      resolve "${file%/*}" "$inc"; target=$RESOLVED
    fi
    layer_of "$target"; to=$LAYER
    rank "$to"; to_rank=$RANK
    why=""
    if [[ $to == "?" ]]; then
      why="outside the layered folders"
    elif ((to_rank > from_rank)); then
      why="upward: $from -> $to"
    elif [[ $to == backend && $from != backend && $from != ops ]]; then
      why="$from -> backend: only ops includes kernels"
    elif [[ ($from == backend || $from == io || $from == data || $from == text) && $to != core && $to != "$from" &&
            !($from == data && $to == text) && !($from == text && $to == data) ]]; then
      why="$from -> $to: $from is on core only"
    elif [[ $from == infer && $to == viz ]]; then
      why="infer -> viz: viz may use infer, not the other way"
    fi
    if [[ -n $why ]]; then
      for e in "${exceptions[@]}"; do
        [[ "$file $inc" == "$e" ]] && why=""
      done
    fi
    if [[ -n $why ]]; then
      echo "$file:$line: #include \"$inc\": $why"
      bad=1
    fi
  done < <(grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$file" || true)
done < <(find "${folders[@]}" -type f \( -name '*.h' -o -name '*.cpp' \) | sort)

if ((bad)); then
  echo "check_layers: includes against the layers above (see scripts/check_layers.sh for the rules)" >&2
  exit 1
fi
echo "ok"
