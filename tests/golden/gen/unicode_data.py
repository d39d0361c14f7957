"""Python 3.11's character data, for tests/text/unicode_test.cpp: what attn's generated tables
(src/text/unicode_tables.cpp) must reproduce, read here through unicodedata and str directly.

tables(inputs, args): per code point 0..0x10FFFF
  "category" u8 (0x110000,)  index into unicode.h's Category order
  "ccc"      u8 (0x110000,)  unicodedata.combining
  "space"    u8 (0x110000,)  str.isspace
  "<f>_cps" i64 (K,), "<f>_len" i64 (K,), "<f>_flat" i64 (sum of lengths,) for f in lower, nfd, nfc:
             the code points whose chr(cp).lower() / NFD / NFC differs from chr(cp), and the result
strings(inputs, args): inputs "cps" i64 (N,) and "lens" i64 (S,) hold S strings back to back;
  returns "nfd_flat", "nfd_len", "nfc_flat", "nfc_len" (unicodedata.normalize of each string).
"""
import unicodedata

import torch

CATEGORIES = ["Lu", "Ll", "Lt", "Lm", "Lo", "Mn", "Mc", "Me", "Nd", "Nl", "No", "Pc", "Pd", "Ps", "Pe",
              "Pi", "Pf", "Po", "Sm", "Sc", "Sk", "So", "Zs", "Zl", "Zp", "Cc", "Cf", "Cs", "Co", "Cn"]
N = 0x110000


def _sparse(fn):
    cps, lens, flat = [], [], []
    for cp in range(N):
        s = fn(chr(cp))
        if s != chr(cp):
            cps.append(cp)
            lens.append(len(s))
            flat.extend(ord(c) for c in s)
    return cps, lens, flat


def tables(inp, args):
    out = {
        "category": torch.tensor([CATEGORIES.index(unicodedata.category(chr(cp))) for cp in range(N)],
                                 dtype=torch.uint8),
        "ccc": torch.tensor([unicodedata.combining(chr(cp)) for cp in range(N)], dtype=torch.uint8),
        "space": torch.tensor([chr(cp).isspace() for cp in range(N)], dtype=torch.uint8),
    }
    fns = {"lower": str.lower, "nfd": lambda s: unicodedata.normalize("NFD", s),
           "nfc": lambda s: unicodedata.normalize("NFC", s)}
    for name, fn in fns.items():
        cps, lens, flat = _sparse(fn)
        out[name + "_cps"] = torch.tensor(cps, dtype=torch.int64)
        out[name + "_len"] = torch.tensor(lens, dtype=torch.int64)
        out[name + "_flat"] = torch.tensor(flat, dtype=torch.int64)
    return out


def strings(inp, args):
    cps, lens = inp["cps"].tolist(), inp["lens"].tolist()
    out = {}
    for form in ("NFD", "NFC"):
        flat, out_lens, at = [], [], 0
        for n in lens:
            s = unicodedata.normalize(form, "".join(chr(c) for c in cps[at:at + n]))
            at += n
            out_lens.append(len(s))
            flat.extend(ord(c) for c in s)
        out[form.lower() + "_flat"] = torch.tensor(flat, dtype=torch.int64)
        out[form.lower() + "_len"] = torch.tensor(out_lens, dtype=torch.int64)
    return out
