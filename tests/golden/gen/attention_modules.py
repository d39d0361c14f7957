"""PyTorch references for attn's attention modules and positional encodings.

Each function takes the test's tensors (inputs, parameters under "p.<name>", upstream gradients
under "g*") and returns outputs and gradients. The classic family, timm's Attention, MAE's
get_2d_sincos_pos_embed and Swin's relative_position_index are written here from their
definitions; nn.MultiheadAttention is torch's own.
"""
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


def _params(inp):
    return {k[2:]: v.clone().requires_grad_(True) for k, v in inp.items() if k.startswith("p.")}


def _leaf(inp, name):
    return inp[name].clone().requires_grad_(True) if name in inp else None


def _finish(outs, grads_of, leaves):
    """Backward of sum(out * g) over the listed outputs; returns outputs and every leaf's grad."""
    loss = 0
    for name, g in grads_of:
        loss = loss + (outs[name] * g).sum()
    loss.backward()
    res = {k: v.detach() for k, v in outs.items()}
    for k, v in leaves.items():
        if v is not None and v.grad is not None:
            res[k] = v.grad
    return res


# ---------------------------------------------------------------- the classic family


def _linear(P, name, x):
    y = x @ P[name + ".weight"].t()
    if name + ".bias" in P:
        y = y + P[name + ".bias"]
    return y


def _score(kind, s, h, P, args):
    S = h.shape[1]
    if kind == "dot":
        return (h * s[:, None, :]).sum(-1)
    if kind == "general":          # sᵀ (W_a h + b)
        return (_linear(P, "W_a", h) * s[:, None, :]).sum(-1)
    if kind == "concat":           # v_aᵀ tanh(W_a s + U_a h)
        t = torch.tanh(_linear(P, "W_a", s)[:, None, :] + _linear(P, "U_a", h))
        return _linear(P, "v_a", t).squeeze(-1)
    if kind == "cosine":
        k = _linear(P, "W_a", s) if "W_a.weight" in P else s
        cos = F.cosine_similarity(k[:, None, :], h, dim=-1, eps=args.get("eps", 1e-8))
        return cos * args.get("beta", 1.0)
    if kind == "location":
        return _linear(P, "W_a", s)[:, :S]
    raise ValueError(kind)


def _masked_softmax(e, mask):
    """Softmax over the last dim; masked positions 0; rows with every position masked all 0."""
    if mask is None:
        return torch.softmax(e, -1)
    full = mask.all(-1, keepdim=True)
    a = torch.softmax(e.masked_fill(mask & ~full, float("-inf")), -1)
    return a.masked_fill(mask, 0.0)


def _mask(inp, name="mask"):
    return inp[name].bool() if name in inp else None


def score(inp, args):
    P = _params(inp)
    s, h, v = _leaf(inp, "s"), _leaf(inp, "h"), _leaf(inp, "v")
    e = _score(args["kind"], s, h, P, args)
    a = _masked_softmax(e, _mask(inp))
    ctx = torch.bmm(a[:, None, :], v if v is not None else h).squeeze(1)
    leaves = {"ds": s, "dh": h, "dv": v}
    leaves.update({"d." + k: p for k, p in P.items()})
    return _finish({"context": ctx, "weights": a, "scores": e}, [("context", inp["gc"]), ("weights", inp["gw"])],
                   leaves)


def local(inp, args):
    P = _params(inp)
    s, h = _leaf(inp, "s"), _leaf(inp, "h")
    B, S = h.shape[0], h.shape[1]
    D = float(args["window"])
    e = _score(args["kind"], s, h, P, args)
    j = torch.arange(S, dtype=h.dtype)[None, :]
    if args["mode"] == "monotonic":
        p = torch.full((B, 1), float(args["t"]), dtype=h.dtype)
    else:                          # p_t = S sigmoid(v_pᵀ tanh(W_p s))
        p = S * torch.sigmoid(torch.tanh(s @ P["W_p.weight"].t()) @ P["v_p.weight"].t())   # (B, 1)
    outside = (j - p.detach()).abs() > D
    mask = _mask(inp)
    mask = outside if mask is None else (outside | mask)
    a = _masked_softmax(e, mask)
    if args["mode"] == "predictive":
        sigma = D / 2
        a = a * torch.exp(-((j - p) ** 2) / (2 * sigma * sigma))
    ctx = torch.bmm(a[:, None, :], h).squeeze(1)
    leaves = {"ds": s, "dh": h}
    leaves.update({"d." + k: q for k, q in P.items()})
    return _finish({"context": ctx, "weights": a, "p": p.squeeze(1)},
                   [("context", inp["gc"]), ("weights", inp["gw"])], leaves)


def hard(inp, args):
    """Straight-through hard attention on the given choices idx (B): one-hot forward, soft backward."""
    P = _params(inp)
    s, h = _leaf(inp, "s"), _leaf(inp, "h")
    a = _masked_softmax(_score(args["kind"], s, h, P, args), _mask(inp))
    idx = inp["idx"]
    onehot = F.one_hot(idx.clamp(min=0), h.shape[1]).to(h.dtype) * (idx >= 0).to(h.dtype)[:, None]
    w = onehot - a.detach() + a
    ctx = torch.bmm(w[:, None, :], h).squeeze(1)
    leaves = {"ds": s, "dh": h}
    leaves.update({"d." + k: q for k, q in P.items()})
    res = _finish({"context": ctx, "weights": onehot, "probs": a}, [("context", inp["gc"])], leaves)
    res["argmax"] = a.detach().argmax(-1)
    return res


# ---------------------------------------------------------------- multi-head attention


def mha(inp, args):
    """torch.nn.MultiheadAttention (1.13) with the test's weights."""
    q0 = inp["query"]
    E = q0.shape[-1]
    kdim = inp["key"].shape[-1]
    vdim = inp["value"].shape[-1]
    bias = "p.in_proj_bias" in inp
    m = nn.MultiheadAttention(E, args["num_heads"], bias=bias, kdim=kdim, vdim=vdim,
                              batch_first=bool(args["batch_first"])).to(q0.dtype)
    share_qk = bool(args.get("share_qk", False))
    with torch.no_grad():
        if share_qk:           # W_K = W_Q (and b_K = b_Q): symmetric attention
            w = inp["p.qk_proj_weight"]
            if m._qkv_same_embed_dim:
                m.in_proj_weight.copy_(torch.cat([w, w, inp["p.v_proj_weight"]]))
            else:
                m.q_proj_weight.copy_(w)
                m.k_proj_weight.copy_(w)
                m.v_proj_weight.copy_(inp["p.v_proj_weight"])
            if bias:
                b = inp["p.in_proj_bias"]
                m.in_proj_bias.copy_(torch.cat([b[:E], b[:E], b[E:]]))
            m.out_proj.weight.copy_(inp["p.out_proj.weight"])
            if bias:
                m.out_proj.bias.copy_(inp["p.out_proj.bias"])
        else:
            for name, p in m.named_parameters():
                p.copy_(inp["p." + name])
    m.train(bool(args.get("training", False)))
    self_attn = bool(args.get("self", False))
    query = inp["query"].clone().requires_grad_(True)
    key = query if self_attn else inp["key"].clone().requires_grad_(True)
    value = query if self_attn else inp["value"].clone().requires_grad_(True)
    kpm = inp.get("key_padding_mask")
    if kpm is not None and kpm.dtype == torch.uint8:
        kpm = kpm.bool()
    am = inp.get("attn_mask")
    if am is not None and am.dtype == torch.uint8:
        am = am.bool()
    need = bool(args.get("need_weights", True))
    out, w = m(query, key, value, key_padding_mask=kpm, need_weights=need, attn_mask=am,
               average_attn_weights=bool(args.get("average_attn_weights", True)))
    outs = {"out": out}
    gl = [("out", inp["g"])]
    if need:
        outs["weights"] = w
        if "gw" in inp:
            gl.append(("weights", inp["gw"]))
    leaves = {"dquery": query}
    if not self_attn:
        leaves.update({"dkey": key, "dvalue": value})
    res = _finish(outs, gl, leaves)
    grads = {name: p.grad for name, p in m.named_parameters()}
    if share_qk:
        if m._qkv_same_embed_dim:
            gi = grads["in_proj_weight"]
            res["d.qk_proj_weight"] = gi[:E] + gi[E:2 * E]
            res["d.v_proj_weight"] = gi[2 * E:]
        else:
            res["d.qk_proj_weight"] = grads["q_proj_weight"] + grads["k_proj_weight"]
            res["d.v_proj_weight"] = grads["v_proj_weight"]
        if bias:
            gb = grads["in_proj_bias"]
            res["d.in_proj_bias"] = torch.cat([gb[:E] + gb[E:2 * E], gb[2 * E:]])
            res["d.out_proj.bias"] = grads["out_proj.bias"]
        res["d.out_proj.weight"] = grads["out_proj.weight"]
    else:
        res.update({"d." + k: g for k, g in grads.items() if g is not None})
    return res


class _TimmAttention(nn.Module):
    """timm's vision_transformer.Attention (qkv packed, F.scaled_dot_product_attention's math), with the
    ablations' options: a head width apart from dim / num_heads (qkv: dim -> 3 NH HD, proj: NH HD -> dim),
    one projection for queries and keys (qkv: dim -> 2 NH HD, rows [qk; v]) and no 1/sqrt(HD) scale."""

    def __init__(self, dim, num_heads, qkv_bias, head_dim=0, share_qk=False, scale=True):
        super().__init__()
        self.num_heads = num_heads
        self.head_dim = head_dim or dim // num_heads
        self.inner = self.num_heads * self.head_dim
        self.share_qk = share_qk
        self.scale = self.head_dim ** -0.5 if scale else 1.0
        self.qkv = nn.Linear(dim, self.inner * (2 if share_qk else 3), bias=qkv_bias)
        self.proj = nn.Linear(self.inner, dim)

    def forward(self, x, mask=None):
        B, N, C = x.shape
        parts = 2 if self.share_qk else 3
        qkv = self.qkv(x).reshape(B, N, parts, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        if self.share_qk:
            q, v = qkv.unbind(0)
            k = q
        else:
            q, k, v = qkv.unbind(0)
        attn = (q * self.scale) @ k.transpose(-2, -1)
        if mask is not None:
            if mask.dtype == torch.uint8 or mask.dtype == torch.bool:
                attn = attn.masked_fill(mask.bool(), float("-inf"))
            else:
                attn = attn + mask
        attn = attn.softmax(dim=-1)
        x = (attn @ v).transpose(1, 2).reshape(B, N, self.inner)
        return self.proj(x), attn


def timm_attention(inp, args):
    x0 = inp["x"]
    m = _TimmAttention(x0.shape[-1], args["num_heads"], "p.qkv.bias" in inp, args.get("head_dim", 0),
                       bool(args.get("share_qk", 0)), not args.get("no_scale", 0)).to(x0.dtype)
    with torch.no_grad():
        for name, p in m.named_parameters():
            p.copy_(inp["p." + name])
    x = x0.clone().requires_grad_(True)
    out, w = m(x, inp.get("mask"))
    res = _finish({"out": out, "weights": w}, [("out", inp["g"])], {"dx": x})
    res.update({"d." + k: p.grad for k, p in m.named_parameters()})
    return res


# ---------------------------------------------------------------- positional encodings


def sinusoidal(inp, args):
    """The Annotated Transformer's PositionalEncoding table, in float64."""
    n, d = args["n"], args["d"]
    pe = torch.zeros(n, d, dtype=torch.float64)
    position = torch.arange(0, n, dtype=torch.float64).unsqueeze(1)
    div_term = torch.exp(torch.arange(0, d, 2, dtype=torch.float64) * -(math.log(10000.0) / d))
    pe[:, 0::2] = torch.sin(position * div_term)
    pe[:, 1::2] = torch.cos(position * div_term)[:, : d // 2]
    return {"pe": pe}


def _get_1d_sincos_pos_embed_from_grid(embed_dim, pos):
    assert embed_dim % 2 == 0
    omega = np.arange(embed_dim // 2, dtype=np.float64)
    omega /= embed_dim / 2.0
    omega = 1.0 / 10000 ** omega
    pos = pos.reshape(-1)
    out = np.einsum("m,d->md", pos, omega)
    return np.concatenate([np.sin(out), np.cos(out)], axis=1)


def _get_2d_sincos_pos_embed_from_grid(embed_dim, grid):
    assert embed_dim % 2 == 0
    emb_h = _get_1d_sincos_pos_embed_from_grid(embed_dim // 2, grid[0])
    emb_w = _get_1d_sincos_pos_embed_from_grid(embed_dim // 2, grid[1])
    return np.concatenate([emb_h, emb_w], axis=1)


def _get_2d_sincos_pos_embed(embed_dim, grid_h_size, grid_w_size, cls_token=False):
    """MAE's get_2d_sincos_pos_embed (util/pos_embed.py), with a (h, w) grid instead of a square."""
    grid_h = np.arange(grid_h_size, dtype=np.float32)
    grid_w = np.arange(grid_w_size, dtype=np.float32)
    grid = np.meshgrid(grid_w, grid_h)  # here w goes first
    grid = np.stack(grid, axis=0)
    grid = grid.reshape([2, 1, grid_h_size, grid_w_size])
    pos_embed = _get_2d_sincos_pos_embed_from_grid(embed_dim, grid)
    if cls_token:
        pos_embed = np.concatenate([np.zeros([1, embed_dim]), pos_embed], axis=0)
    return pos_embed


def sincos_2d(inp, args):
    pe = _get_2d_sincos_pos_embed(args["d"], args["gh"], args["gw"], bool(args["cls_token"]))
    return {"pe": torch.from_numpy(np.ascontiguousarray(pe)).to(torch.float64)}


def swin_index(inp, args):
    """Swin Transformer's WindowAttention.relative_position_index."""
    wh, ww = args["wh"], args["ww"]
    coords_h = torch.arange(wh)
    coords_w = torch.arange(ww)
    coords = torch.stack(torch.meshgrid([coords_h, coords_w], indexing="ij"))  # 2, Wh, Ww
    coords_flatten = torch.flatten(coords, 1)  # 2, Wh*Ww
    relative_coords = coords_flatten[:, :, None] - coords_flatten[:, None, :]  # 2, N, N
    relative_coords = relative_coords.permute(1, 2, 0).contiguous()  # N, N, 2
    relative_coords[:, :, 0] += wh - 1
    relative_coords[:, :, 1] += ww - 1
    relative_coords[:, :, 0] *= 2 * ww - 1
    return {"index": relative_coords.sum(-1)}


def beit_index(inp, args):
    """BEiT's relative_position_index with the class token: the window's index, shifted by one row and
    column, and three more table rows: class token to patches, patches to class token, class to class."""
    wh, ww = args["wh"], args["ww"]
    inner = swin_index(inp, args)["index"]
    num = (2 * wh - 1) * (2 * ww - 1) + 3
    index = torch.zeros((wh * ww + 1, wh * ww + 1), dtype=inner.dtype)
    index[1:, 1:] = inner
    index[0, 0:] = num - 3
    index[0:, 0] = num - 2
    index[0, 0] = num - 1
    return {"index": index}


def swin_bias(inp, args):
    """Swin's bias: table[index].view(N, N, -1).permute(2, 0, 1), with its gradient (BEiT's index with
    args["class_token"])."""
    table = inp["table"].clone().requires_grad_(True)
    index = (beit_index if args.get("class_token", 0) else swin_index)(inp, args)["index"]
    n = index.shape[0]
    bias = table[index.view(-1)].view(n, n, -1).permute(2, 0, 1).contiguous()
    return _finish({"bias": bias}, [("bias", inp["g"])], {"dtable": table})


def rel_bias_1d(inp, args):
    """A learned scalar per offset i - j and head: bias[h, i, j] = table[i - j + L - 1, h]."""
    table = inp["table"].clone().requires_grad_(True)
    L, T = args["max_len"], args["t"]
    i = torch.arange(T)[:, None]
    j = torch.arange(T)[None, :]
    bias = table[i - j + L - 1].permute(2, 0, 1)
    return _finish({"bias": bias}, [("bias", inp["g"])], {"dtable": table})


def rel_embed_1d(inp, args):
    """ViT's 1-d relative attention logits: bias[b, h, i, j] = q[b, h, i] · r[i - j + L - 1]."""
    q = inp["q"].clone().requires_grad_(True)
    r = inp["r"].clone().requires_grad_(True)
    L = args["max_len"]
    T = q.shape[2]
    i = torch.arange(T)[:, None]
    j = torch.arange(T)[None, :]
    R = r[i - j + L - 1]                          # (T, T, HS)
    bias = torch.einsum("bhid,ijd->bhij", q, R)
    return _finish({"bias": bias}, [("bias", inp["g"])], {"dq": q, "dr": r})


def learned_2d(inp, args):
    """ViT's 2-d learned embedding: token (i, j) = [col[j], row[i]] (+ a class-token row first)."""
    col = inp["col"].clone().requires_grad_(True)
    row = inp["row"].clone().requires_grad_(True)
    gh, gw = row.shape[0], col.shape[0]
    e = torch.cat([col[None, :, :].expand(gh, gw, -1), row[:, None, :].expand(gh, gw, -1)], dim=-1)
    e = e.reshape(1, gh * gw, -1)
    leaves = {"dcol": col, "drow": row}
    if "cls" in inp:
        cls = inp["cls"].clone().requires_grad_(True)
        e = torch.cat([cls, e], dim=1)
        leaves["dcls"] = cls
    return _finish({"pe": e}, [("pe", inp["g"])], leaves)
