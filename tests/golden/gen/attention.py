"""PyTorch references for scaled dot-product attention (torch 1.13 has no
F.scaled_dot_product_attention): softmax(q kᵀ · scale + mask) v by hand, with autograd.

attn gives zeros (and zero gradients) for a query row whose keys are all masked, where PyTorch
gives NaN; these references special-case exactly those rows the same way (the row's scores are
replaced by zeros before the softmax and its weights zeroed after), nothing else.
"""
import math

import torch


def _leaf(inp, name):
    t = inp.get(name)
    return None if t is None else t.clone().requires_grad_(True)


def sdpa(inp, args):
    """inputs: q (B,NH,Tq,HS), k, v, g (grad of out), optional mask (u8: 1 = may not attend;
    float: additive), optional gw (grad of the weights). args: scale (null: 1/sqrt(HS)), causal,
    align ("top_left" | "bottom_right"), mask_grad (differentiate an additive mask)."""
    q, k, v = _leaf(inp, "q"), _leaf(inp, "k"), _leaf(inp, "v")
    mask = inp.get("mask")
    mleaf = None
    if mask is not None and mask.dtype != torch.uint8 and args.get("mask_grad"):
        mleaf = mask.clone().requires_grad_(True)
        mask = mleaf
    Tq, Tk, HS = q.shape[-2], k.shape[-2], q.shape[-1]
    scale = args.get("scale")
    if scale is None:
        scale = 1.0 / math.sqrt(HS)
    s = (q @ k.transpose(-2, -1)) * scale
    if mask is not None:
        if mask.dtype == torch.uint8:
            s = s.masked_fill(mask.bool(), float("-inf"))
        else:
            s = s + mask
    if args.get("causal"):
        shift = Tk - Tq if args.get("align") == "bottom_right" else 0
        i = torch.arange(Tq).unsqueeze(1)
        j = torch.arange(Tk).unsqueeze(0)
        s = s.masked_fill(j > i + shift, float("-inf"))
    dead = (s == float("-inf")).all(-1, keepdim=True)
    s = s.masked_fill(dead, 0.0)
    w = torch.softmax(s, -1).masked_fill(dead, 0.0)
    out = w @ v
    loss = (out * inp["g"]).sum()
    if "gw" in inp:
        loss = loss + (w * inp["gw"]).sum()
    loss.backward()
    res = {"out": out.detach(), "weights": w.detach(), "dq": q.grad, "dk": k.grad, "dv": v.grad}
    if mleaf is not None:
        res["dmask"] = mleaf.grad
    return res
