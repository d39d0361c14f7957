"""An independent reference for attn's beam search (models/decode.h), over the same model.

beam_search(inputs, args): rebuilds attn's TransformerSeq2Seq in plain torch (token embedding times
sqrt(d_model) plus the paper's sinusoids, torch.nn.Transformer with attn's weights, the output
projection without bias), and runs beam search on each source sentence alone, calling the model on
the whole prefix every step (no cache, no batching), for every beam size in args["beams"] and every
length penalty in args["alphas"].

Beam search as decode.h states it (fairseq / Hugging Face): each step extends every live
hypothesis by every token and ranks the 2K best by their sum of log-probabilities (ties: earlier
hypothesis, then lower token); an eos among the first K ranks finishes its hypothesis with score
sum / lp(len), lp(len) = ((5 + len) / 6)^alpha, len counting the eos; up to K others continue. A
sentence is done when K hypotheses have finished and the best live sum / lp(max_len) cannot beat
the K-th best finished score, or after max_len tokens, when the live ones finish as they are
(len = their tokens). The answer: the best finished hypothesis.

Inputs: "p.<name>" the model's parameters under attn's names (src_embed.weight, tgt_embed.weight,
transformer.*, output_proj.weight), "src" (B, S) i64, "src_pad" (B, S) u8.
Args: d_model, nhead, layers, d_ff, max_len, beams, alphas.
Returns, for beam K and the i-th alpha: "tokens.K.i" (B, max_len) i64 padded with -1, "scores.K.i"
(B) f64; and "logp0" (B, V), the first step's log-probabilities (a check on the model itself).
"""
import math

import torch
import torch.nn as nn

BOS, EOS = 2, 3


def _sinusoids(n, d):
    pe = torch.zeros(n, d, dtype=torch.float64)
    for pos in range(n):
        for k in range(d):
            angle = pos / (10000.0 ** ((k // 2 * 2) / d))
            pe[pos, k] = math.sin(angle) if k % 2 == 0 else math.cos(angle)
    return pe.to(torch.float32)


class _Seq2Seq:
    def __init__(self, inp, args):
        self.d = args["d_model"]
        self.tf = nn.Transformer(d_model=self.d, nhead=args["nhead"], num_encoder_layers=args["layers"],
                                 num_decoder_layers=args["layers"], dim_feedforward=args["d_ff"], dropout=0.0,
                                 batch_first=True)
        self.tf.load_state_dict({k[len("p.transformer."):]: v for k, v in inp.items()
                                 if k.startswith("p.transformer.")}, strict=True)
        self.tf.eval()
        self.src_embed = inp["p.src_embed.weight"]
        self.tgt_embed = inp.get("p.tgt_embed.weight", self.src_embed)   # shared embeddings: listed once
        self.out = inp["p.output_proj.weight"]
        self.pe = _sinusoids(64, self.d)

    def _embed(self, table, ids):
        return table[ids] * math.sqrt(self.d) + self.pe[: ids.shape[1]]

    def log_probs(self, src, prefixes):
        """Next-token log-probabilities (N, V) f32 after each prefix (all of one length) of one sentence,
        src (1, S) without padding."""
        n = len(prefixes)
        tgt = torch.tensor([[BOS] + list(p) for p in prefixes], dtype=torch.int64)
        T = tgt.shape[1]
        causal = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
        with torch.no_grad():
            y = self.tf(self._embed(self.src_embed, src.expand(n, -1)), self._embed(self.tgt_embed, tgt),
                        tgt_mask=causal)
            return torch.log_softmax(y[:, -1] @ self.out.t(), -1)


def _lp(length, alpha):
    return ((5.0 + length) / 6.0) ** alpha


def _beam(next_logp, V, K, alpha, max_len):
    live = [((), 0.0)]   # (tokens, sum of log-probabilities), best first
    fin = []             # (score, tokens)
    for t in range(max_len):
        rows = next_logp([toks for toks, _ in live])
        cands = []
        for k, (toks, s) in enumerate(live):
            row = rows[k]
            for v in range(V):
                cands.append((s + float(row[v]), k, v))
        cands.sort(key=lambda c: (-c[0], c[1], c[2]))
        nxt = []
        for r, (s, k, v) in enumerate(cands[: 2 * K]):
            toks = live[k][0]
            if v == EOS:
                if r < K:
                    fin.append((s / _lp(len(toks) + 1, alpha), toks))
            elif len(nxt) < K:
                nxt.append((toks + (v,), s))
        fin.sort(key=lambda f: -f[0])
        last = t + 1 == max_len
        done = last or not nxt
        if not done and len(fin) >= K:
            done = fin[K - 1][0] >= nxt[0][1] / _lp(max_len, alpha)
        if done:
            if last:
                fin += [(s / _lp(len(toks), alpha), toks) for toks, s in nxt]
                fin.sort(key=lambda f: -f[0])
            break
        live = nxt
    return fin[0]


def beam_search(inp, args):
    torch.manual_seed(0)
    m = _Seq2Seq(inp, args)
    # Each sentence without its padding (attn masks it; here it is simply not there).
    sents = [row[~pad][None] for row, pad in zip(inp["src"], inp["src_pad"].bool())]
    B = len(sents)
    V = m.out.shape[0]
    max_len = args["max_len"]
    out = {"logp0": torch.cat([m.log_probs(s, [()]) for s in sents])}
    for b in range(B):
        memo = {}

        def next_logp(prefixes, b=b, memo=memo):
            todo = [p for p in prefixes if p not in memo]
            if todo:
                for p, row in zip(todo, m.log_probs(sents[b], todo)):
                    memo[p] = row.tolist()
            return [memo[p] for p in prefixes]

        for K in args["beams"]:
            for i, alpha in enumerate(args["alphas"]):
                key = f"{K}.{i}"
                if b == 0:
                    out["tokens." + key] = torch.full((B, max_len), -1, dtype=torch.int64)
                    out["scores." + key] = torch.zeros(B, dtype=torch.float64)
                score, toks = _beam(next_logp, V, K, alpha, max_len)
                out["tokens." + key][b, : len(toks)] = torch.tensor(toks, dtype=torch.int64)
                out["scores." + key][b] = score
    return out
