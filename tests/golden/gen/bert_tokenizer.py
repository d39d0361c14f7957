"""BERT's WordPiece tokenizer as Hugging Face's slow Python BertTokenizer (transformers 4.x) behaves,
written here from its algorithm with Python's own unicodedata and str (transformers is not installed),
for tests/text/bert_tokenizer_test.cpp. It shares no code with the C++ tokenizer: categories,
normalization and lower-casing come from Python 3.11 itself.

encode(inputs, args):
  args "vocab": [tokens] or "vocab_path" (+ "vocab_md5", which only keys the cache);
       "do_lower_case" (default true), "strip_accents" (null / bool), "tokenize_chinese_chars" (true);
       "texts": [str] or "pairs": [[str, str]]; "max_length" (default 512), "truncation" (false),
       "padding" ("none" | "longest" | "max_length"), "clean_up" (true)
  returns "ids", "token_type_ids", "attention_mask" i64 (total,) back to back, "lens" i64 (N,);
          "decoded" u8 and "decoded_lens" i64 (N,): decode(ids) as UTF-8; "decoded_skip" / "decoded_skip_lens":
          decode(ids, skip_special_tokens=True); "truncated" i64 (N,) tokens removed by truncation;
          "too_long" i64 (N,): 1 where truncation is off and the text is over max_length (ids then empty)
"""
import unicodedata

import torch

CJK_RANGES = ((0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F), (0x2B740, 0x2B81F),
              (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F))
SPECIALS = ["[UNK]", "[SEP]", "[PAD]", "[CLS]", "[MASK]"]   # all_special_tokens, in its order
MAX_WORD = 100


def is_ws(ch):
    return ch in (" ", "\t", "\n", "\r") or unicodedata.category(ch) == "Zs"


def is_ctrl(ch):
    return ch not in ("\t", "\n", "\r") and unicodedata.category(ch)[0] == "C"


def is_punct(ch):
    o = ord(ch)
    ascii_punct = 33 <= o <= 47 or 58 <= o <= 64 or 91 <= o <= 96 or 123 <= o <= 126
    return ascii_punct or unicodedata.category(ch)[0] == "P"


def is_cjk(ch):
    return any(a <= ord(ch) <= b for a, b in CJK_RANGES)


class Reference:
    def __init__(self, vocab, lower, strip, chinese):
        self.vocab = {}
        for i, t in enumerate(vocab):
            self.vocab[t] = i
        self.inv = list(vocab)
        self.lower = lower
        self.strip = lower if strip is None else strip
        self.chinese = chinese

    def _pre_lower(self, text):
        # per character, special tokens kept, "\n" untouched ("." of a regex does not match it)
        out, i = [], 0
        while i < len(text):
            sp = next((s for s in SPECIALS if text.startswith(s, i)), None)
            if sp:
                out.append(sp)
                i += len(sp)
            else:
                out.append(text[i] if text[i] == "\n" else text[i].lower())
                i += 1
        return "".join(out)

    def _cut_specials(self, text):
        parts, cur, i = [], [], 0
        while i < len(text):
            hits = [s for s in SPECIALS if text.startswith(s, i)]
            if hits:
                best = max(hits, key=len)
                parts.append(("text", "".join(cur)))
                cur = []
                parts.append(("special", best))
                i += len(best)
            else:
                cur.append(text[i])
                i += 1
        parts.append(("text", "".join(cur)))
        return [p for p in parts if p[1]]

    def _basic(self, text):
        chars = []
        for ch in text:
            if ord(ch) in (0, 0xFFFD) or is_ctrl(ch):
                continue
            if is_ws(ch):
                chars.append(" ")
            elif self.chinese and is_cjk(ch):
                chars.append(" " + ch + " ")
            else:
                chars.append(ch)
        text = unicodedata.normalize("NFC", "".join(chars))
        words = []
        for w in text.split():
            if w in SPECIALS:
                words.append(w)
                continue
            if self.lower:
                w = w.lower()
            if self.strip:
                w = "".join(c for c in unicodedata.normalize("NFD", w) if unicodedata.category(c) != "Mn")
            cur = ""
            for ch in w:
                if is_punct(ch):
                    if cur:
                        words.append(cur)
                    words.append(ch)
                    cur = ""
                else:
                    cur += ch
            if cur:
                words.append(cur)
        return " ".join(words).split()

    def _wordpiece(self, word):
        if len(word) > MAX_WORD:
            return ["[UNK]"]
        pieces, start = [], 0
        while start < len(word):
            found = None
            for end in range(len(word), start, -1):
                cand = ("##" if start else "") + word[start:end]
                if cand in self.vocab:
                    found = (cand, end)
                    break
            if found is None:
                return ["[UNK]"]
            pieces.append(found[0])
            start = found[1]
        return pieces

    def tokenize(self, text):
        if self.lower:
            text = self._pre_lower(text)
        tokens = []
        for kind, part in self._cut_specials(text):
            if kind == "special":
                tokens.append(part)
            else:
                for w in self._basic(part):
                    tokens.extend(self._wordpiece(w))
        return tokens

    def ids(self, text):
        return [self.vocab.get(t, self.vocab["[UNK]"]) for t in self.tokenize(text)]

    def decode(self, ids, skip, clean_up):
        special_ids = {self.vocab[s] for s in SPECIALS}
        toks = [self.inv[i] for i in ids if not (skip and i in special_ids)]
        s = " ".join(toks).replace(" ##", "").strip()
        if clean_up:
            for a, b in ((" .", "."), (" ?", "?"), (" !", "!"), (" ,", ","), (" ' ", "'"), (" n't", "n't"),
                         (" 'm", "'m"), (" 's", "'s"), (" 've", "'ve"), (" 're", "'re")):
                s = s.replace(a, b)
        return s


def _truncate(a, b, remove):
    if b is None:
        return a[:len(a) - remove], None
    first = min(abs(len(b) - len(a)), remove)
    second = remove - first
    if len(a) > len(b):
        ra, rb = first + second // 2, second - second // 2
    else:
        ra, rb = second // 2, first + second - second // 2
    return a[:len(a) - ra], b[:len(b) - rb]


def _load_vocab(args):
    if "vocab" in args:
        return args["vocab"]
    with open(args["vocab_path"], "r", encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f.readlines()]


def encode(inp, args):
    ref = Reference(_load_vocab(args), args.get("do_lower_case", True), args.get("strip_accents"),
                    args.get("tokenize_chinese_chars", True))
    cls, sep, pad = ref.vocab["[CLS]"], ref.vocab["[SEP]"], ref.vocab["[PAD]"]
    max_length, truncation = args.get("max_length", 512), args.get("truncation", False)
    items = [(t, None) for t in args["texts"]] if "texts" in args else [tuple(p) for p in args["pairs"]]
    rows, truncated, too_long = [], [], []
    for a_text, b_text in items:
        a = ref.ids(a_text)
        b = ref.ids(b_text) if b_text is not None else None
        total = len(a) + (len(b) + 3 if b is not None else 2)
        cut = 0
        if total > max_length:
            if not truncation:
                rows.append(([], [], []))
                truncated.append(0)
                too_long.append(1)
                continue
            cut = total - max_length
            a, b = _truncate(a, b, cut)
        ids = [cls] + a + [sep] + (b + [sep] if b is not None else [])
        types = [0] * (len(a) + 2) + ([1] * (len(b) + 1) if b is not None else [])
        rows.append((ids, types, [1] * len(ids)))
        truncated.append(cut)
        too_long.append(0)
    padding = args.get("padding", "none")
    target = max(len(r[0]) for r in rows) if padding == "longest" else max_length if padding == "max_length" else 0
    out_ids, out_types, out_mask, lens, dec, dec_lens, skip, skip_lens = [], [], [], [], [], [], [], []
    for ids, types, mask in rows:
        n = max(0, target - len(ids))
        ids, types, mask = ids + [pad] * n, types + [0] * n, mask + [0] * n
        out_ids += ids
        out_types += types
        out_mask += mask
        lens.append(len(ids))
        d = ref.decode(ids, False, args.get("clean_up", True)).encode("utf-8")
        s = ref.decode(ids, True, args.get("clean_up", True)).encode("utf-8")
        dec += list(d)
        dec_lens.append(len(d))
        skip += list(s)
        skip_lens.append(len(s))
    t = lambda v, dt=torch.int64: torch.tensor(v, dtype=dt)
    return {"ids": t(out_ids), "token_type_ids": t(out_types), "attention_mask": t(out_mask), "lens": t(lens),
            "decoded": t(dec, torch.uint8), "decoded_lens": t(dec_lens), "decoded_skip": t(skip, torch.uint8),
            "decoded_skip_lens": t(skip_lens), "truncated": t(truncated), "too_long": t(too_long)}
