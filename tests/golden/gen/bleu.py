"""An independent BLEU (sacreBLEU 2.x defaults: tokenize 13a, exp smoothing) written from the
definition, for tests/text/bleu_test.cpp. sacrebleu itself is not installed; this uses Python's `re`
with the mteval-v13a patterns and collections.Counter, so it shares no code with the C++ scanner.

corpus(inputs, args): args = {"hyps": [str], "refs": [[str] per stream]}; returns
  "corpus":    f64 (16,)   [score, bp, sys_len, ref_len, counts(4), totals(4), precisions(4)]
  "sentences": f64 (N, 16) sentence BLEU (effective order) of each hypothesis
  "ntok":      f64 (N,)    number of 13a tokens of each hypothesis
"""
import math
import re
from collections import Counter

import torch

_SYMBOLS = re.compile(r"([\{-\~\[-\` -\&\(-\+\:-\@\/])")
_PERIOD_COMMA_AFTER = re.compile(r"([^0-9])([\.,])")
_PERIOD_COMMA_BEFORE = re.compile(r"([\.,])([^0-9])")
_DASH_AFTER_DIGIT = re.compile(r"([0-9])(-)")


def tokenize_13a(line):
    line = line.replace("<skipped>", "").replace("-\n", "").replace("\n", " ")
    for a, b in (("&quot;", '"'), ("&amp;", "&"), ("&lt;", "<"), ("&gt;", ">")):
        line = line.replace(a, b)
    line = f" {line} "
    line = _SYMBOLS.sub(r" \1 ", line)
    line = _PERIOD_COMMA_AFTER.sub(r"\1 \2 ", line)
    line = _PERIOD_COMMA_BEFORE.sub(r" \1 \2", line)
    line = _DASH_AFTER_DIGIT.sub(r"\1 \2 ", line)
    return line.split()


def _ngrams(toks):
    return Counter(tuple(toks[i:i + n]) for n in range(1, 5) for i in range(len(toks) - n + 1))


def _segment(hyp, refs):
    refs = [r for r in refs if r]
    assert refs, "segment without reference"
    best = Counter()
    ref_lens = []
    for r in refs:
        toks = tokenize_13a(r.rstrip())
        ref_lens.append(len(toks))
        best = best | _ngrams(toks)          # Counter union = element-wise max
    h = tokenize_13a(hyp.rstrip())
    # closest reference length, the shorter on ties
    ref_len = min(ref_lens, key=lambda x: (abs(x - len(h)), x))
    counts, totals = [0] * 4, [0] * 4
    for g, c in _ngrams(h).items():
        totals[len(g) - 1] += c
        counts[len(g) - 1] += min(c, best.get(g, 0))
    return len(h), ref_len, counts, totals


def _score(sys_len, ref_len, counts, totals, effective):
    bp = 1.0 if sys_len >= ref_len else (math.exp(1 - ref_len / sys_len) if sys_len else 0.0)
    prec = [0.0] * 4
    if sum(counts) == 0:
        return 0.0, bp, prec
    halvings, order = 0, 4
    for n in range(4):
        if totals[n] == 0:
            if effective:
                order = n
            break
        if counts[n]:
            prec[n] = 100.0 * counts[n] / totals[n]
        else:
            halvings += 1
            prec[n] = 100.0 / (2 ** halvings * totals[n])
    if any(p == 0 for p in prec[:order]):
        return 0.0, bp, prec
    return bp * math.exp(sum(math.log(p) for p in prec[:order]) / order), bp, prec


def _vec(sys_len, ref_len, counts, totals, effective):
    s, bp, prec = _score(sys_len, ref_len, counts, totals, effective)
    return [s, bp, sys_len, ref_len] + counts + totals + prec


def corpus(inp, args):
    hyps, streams = args["hyps"], args["refs"]
    segs = [_segment(h, [s[i] for s in streams]) for i, h in enumerate(hyps)]
    sys_len = sum(s[0] for s in segs)
    ref_len = sum(s[1] for s in segs)
    counts = [sum(s[2][n] for s in segs) for n in range(4)]
    totals = [sum(s[3][n] for s in segs) for n in range(4)]
    out = {"corpus": torch.tensor(_vec(sys_len, ref_len, counts, totals, False), dtype=torch.float64)}
    out["sentences"] = torch.tensor([_vec(*s, True) for s in segs], dtype=torch.float64)
    out["ntok"] = torch.tensor([float(len(tokenize_13a(h))) for h in hyps], dtype=torch.float64)
    return out

