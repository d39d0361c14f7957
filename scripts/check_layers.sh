#!/usr/bin/env bash
# Lists the #includes that go against the library's layers, and exits 1 if there is any.
#
#   scripts/check_layers.sh                  # src/{core,autograd,backend,ops,nn,optim}; "ok" when clean
#   scripts/check_layers.sh --with-headers   # also include/attn/{core,autograd,ops,nn,optim}
#
# Layers, bottom up; a file may include headers of its own layer and of the layers below:
#   0  core + autograd  src/core, src/autograd, include/attn/core, include/attn/autograd
#   1  kernels          src/backend                  (on core only: not autograd)
#   2  ops              src/ops, include/attn/ops
#   3  nn               src/nn, include/attn/nn
#   4  optim            src/optim, include/attn/optim
# Every other attn/ folder (models, train, io, data, text) is above these. Kernels are private to
# ops: nn and optim reach them through ops calls, never by including src/backend.
# The one documented exception: the autograd engine accumulates gradients with attn::add
# (src/autograd/engine.cpp includes attn/ops/elementwise.h).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

folders=(src/core src/autograd src/backend src/ops src/nn src/optim)
if [[ ${1:-} == --with-headers ]]; then
  folders+=(include/attn/core include/attn/autograd include/attn/ops include/attn/nn include/attn/optim)
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
    backend) RANK=1 ;;
    ops) RANK=2 ;;
    nn) RANK=3 ;;
    optim) RANK=4 ;;
    *) RANK=9 ;;
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
    elif [[ $from == backend && $to == autograd ]]; then
      why="backend -> autograd: kernels are on core only"
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
