"""PyTorch references for attn's recurrent layers (nn/rnn.h) and the RNN encoder-decoder with
attention (models/rnn_seq2seq.h).

Inputs: the test's tensors, parameters under "p.<name>" (copied by name into torch modules),
upstream gradients under "g.<output>". Outputs: the forward results, "d.<param>" and "dx"/"dh0"/"dc0".
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence


def _load(module, inp):
    sd = {k[2:]: v for k, v in inp.items() if k.startswith("p.")}
    module.load_state_dict(sd, strict=True)


def _leaf(inp, name):
    return inp[name].clone().requires_grad_(True) if name in inp else None


def _grads(res, module, leaves):
    for k, p in module.named_parameters():
        if p.grad is not None:
            res["d." + k] = p.grad
    for k, v in leaves.items():
        if v is not None and v.grad is not None:
            res[k] = v.grad
    return res


def rnn(inp, args):
    """nn.GRU / nn.LSTM with optional h0 (c0) and lengths (packed as enforce_sorted=False)."""
    cls = nn.GRU if args["mode"] == "gru" else nn.LSTM
    m = cls(args["input_size"], args["hidden_size"], num_layers=args["num_layers"], bias=args["bias"],
            batch_first=args["batch_first"], bidirectional=args["bidirectional"]).to(inp["x"].dtype)
    _load(m, inp)
    x, h0, c0 = _leaf(inp, "x"), _leaf(inp, "h0"), _leaf(inp, "c0")
    state = None
    if h0 is not None:
        state = h0 if args["mode"] == "gru" else (h0, c0)
    T = x.shape[1 if args["batch_first"] else 0]
    if "lengths" in inp:
        packed = pack_padded_sequence(x, inp["lengths"], batch_first=args["batch_first"], enforce_sorted=False)
        out, st = m(packed, state)
        out, _ = pad_packed_sequence(out, batch_first=args["batch_first"], total_length=T)
    else:
        out, st = m(x, state)
    h_n, c_n = (st, None) if args["mode"] == "gru" else st
    loss = (out * inp["g.out"]).sum() + (h_n * inp["g.h_n"]).sum()
    res = {"out": out.detach(), "h_n": h_n.detach()}
    if c_n is not None:
        loss = loss + (c_n * inp["g.c_n"]).sum()
        res["c_n"] = c_n.detach()
    loss.backward()
    return _grads(res, m, {"dx": x, "dh0": h0, "dc0": c0})


def cell(inp, args):
    """nn.GRUCell / nn.LSTMCell for one step."""
    cls = nn.GRUCell if args["mode"] == "gru" else nn.LSTMCell
    m = cls(args["input_size"], args["hidden_size"], bias=args["bias"]).to(inp["x"].dtype)
    _load(m, inp)
    x, h, c = _leaf(inp, "x"), _leaf(inp, "h"), _leaf(inp, "c")
    if args["mode"] == "gru":
        h2 = m(x, h)
        loss = (h2 * inp["g.h"]).sum()
        res = {"h": h2.detach()}
    else:
        h2, c2 = m(x, (h, c))
        loss = (h2 * inp["g.h"]).sum() + (c2 * inp["g.c"]).sum()
        res = {"h": h2.detach(), "c": c2.detach()}
    loss.backward()
    return _grads(res, m, {"dx": x, "dh": h, "dc": c})


# ---------------------------------------------------------------- RnnSeq2Seq (Luong / Bahdanau)


class _Seq2Seq(nn.Module):
    """models/rnn_seq2seq.h written with torch modules (global attention, eval mode)."""

    def __init__(self, a):
        super().__init__()
        V, E, H, L = a["vocab_size"], a["emb_dim"], a["hidden"], a["layers"]
        self.a, self.lstm = a, a["cell"] == "lstm"
        self.D = 2 if a["bidirectional"] else 1
        cls = nn.LSTM if self.lstm else nn.GRU
        self.src_embed = nn.Embedding(V, E)
        self.tgt_embed = self.src_embed if a["share_embeddings"] else nn.Embedding(V, E)
        self.encoder = cls(E, H // self.D, L, batch_first=True, bidirectional=a["bidirectional"])
        self.bridge_h = nn.Linear(H, H)
        if self.lstm:
            self.bridge_c = nn.Linear(H, H)
        self.decoder = cls(E + H, H, L)
        self.attn = nn.Module()
        if a["score"] == "general":
            self.attn.W_a = nn.Linear(H, H, bias=False)
        elif a["score"] == "concat":
            self.attn.W_a = nn.Linear(H, H, bias=False)
            self.attn.U_a = nn.Linear(H, H, bias=False)
            self.attn.v_a = nn.Linear(H, 1, bias=False)
        elif a["score"] == "cosine":   # NTM content addressing: beta = 1 + softplus(w s + b)
            self.attn_beta = nn.Linear(H, 1)
        self.W_c = nn.Linear(2 * H, H, bias=False)
        self.output_proj = nn.Linear(H, V)

    def attend(self, s, mem, pad):
        kind = self.a["score"]
        if kind == "dot":
            e = (mem * s[:, None, :]).sum(-1)
        elif kind == "general":   # sᵀ W_a h
            e = (self.attn.W_a(mem) * s[:, None, :]).sum(-1)
        elif kind == "cosine":    # beta cos(s, h), norms clamped at 1e-8
            beta = 1 + F.softplus(self.attn_beta(s)).squeeze(-1)
            sn = s / s.norm(dim=-1, keepdim=True).clamp_min(1e-8)
            hn = mem / mem.norm(dim=-1, keepdim=True).clamp_min(1e-8)
            e = beta[:, None] * (hn * sn[:, None, :]).sum(-1)
        else:                     # v_aᵀ tanh(W_a s + U_a h)
            e = self.attn.v_a(torch.tanh(self.attn.W_a(s)[:, None, :] + self.attn.U_a(mem))).squeeze(-1)
        w = torch.softmax(e.masked_fill(pad, float("-inf")), -1)
        return (w[:, :, None] * mem).sum(1), w

    def forward(self, src, pad, tgt_in):
        B, S = src.shape
        H, L = self.a["hidden"], self.a["layers"]
        lengths = (~pad).sum(1)
        packed = pack_padded_sequence(self.src_embed(src), lengths, batch_first=True, enforce_sorted=False)
        out, st = self.encoder(packed)
        mem, _ = pad_packed_sequence(out, batch_first=True, total_length=S)

        def layers(s):   # (L·D, B, H/D) -> (L, B, H)
            return s.view(L, 2, B, H // 2).permute(0, 2, 1, 3).reshape(L, B, H) if self.D == 2 else s

        if self.lstm:
            state = (torch.tanh(self.bridge_h(layers(st[0]))), torch.tanh(self.bridge_c(layers(st[1]))))
        else:
            state = torch.tanh(self.bridge_h(layers(st)))
        feed = torch.zeros(B, H, dtype=mem.dtype)
        emb = self.tgt_embed(tgt_in)
        logits, weights = [], []
        for t in range(tgt_in.shape[1]):
            top = (state[0] if self.lstm else state)[-1]
            if self.a["attention"] == "bahdanau":
                ctx, w = self.attend(top, mem, pad)
                x = torch.cat([emb[:, t], ctx], -1)
            else:
                x = torch.cat([emb[:, t], feed], -1)
            y, state = self.decoder(x[None], state)
            s = y[0]
            if self.a["attention"] == "luong":
                ctx, w = self.attend(s, mem, pad)
            feed = torch.tanh(self.W_c(torch.cat([ctx, s], -1)))
            logits.append(self.output_proj(feed))
            weights.append(w)
        return torch.stack(logits, 1), torch.stack(weights, 1)


def seq2seq(inp, args):
    """Logits, attention weights and parameter gradients of sum(logits * g) (eval mode)."""
    m = _Seq2Seq(args).to(torch.float32)
    sd = {k[2:]: v for k, v in inp.items() if k.startswith("p.")}
    if args["share_embeddings"]:
        sd["tgt_embed.weight"] = sd["src_embed.weight"]
    m.load_state_dict(sd, strict=True)
    m.eval()
    logits, w = m(inp["src"], inp["src_pad"].bool(), inp["tgt_in"])
    (logits * inp["g"]).sum().backward()
    res = {"logits": logits.detach(), "weights": w.detach()}
    for k, p in m.named_parameters():
        if p.grad is not None:
            res["d." + k] = p.grad
    return res
