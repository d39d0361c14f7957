"""PyTorch references for softmax, log_softmax, layer_norm, bias + GELU and residual add + layer
norm (forward and backward)."""
import torch
import torch.nn.functional as F


def _leaf(inp, name):
    t = inp.get(name)
    return None if t is None else t.clone().requires_grad_(True)


def _grads(leaves):
    return {f"d{k}": v.grad for k, v in leaves.items() if v is not None and v.grad is not None}


def softmax(inp, args):
    x = _leaf(inp, "x")
    f = F.log_softmax if args.get("log") else F.softmax
    y = f(x, dim=args.get("dim", -1))
    y.backward(inp["g"])
    return {"out": y.detach(), **_grads({"x": x})}


def layer_norm(inp, args):
    x, w, b = _leaf(inp, "x"), _leaf(inp, "w"), _leaf(inp, "b")
    y = F.layer_norm(x, (x.shape[-1],), w, b, args.get("eps", 1e-5))
    y.backward(inp["g"])
    return {"out": y.detach(), **_grads({"x": x, "w": w, "b": b})}


def bias_gelu(inp, args):
    x, b = _leaf(inp, "x"), _leaf(inp, "b")
    y = F.gelu(x + b if b is not None else x, approximate=args.get("approx", "none"))
    y.backward(inp["g"])
    return {"out": y.detach(), **_grads({"x": x, "b": b})}


def add_layer_norm(inp, args):
    x, r, w, b = _leaf(inp, "x"), _leaf(inp, "r"), _leaf(inp, "w"), _leaf(inp, "b")
    s = x + r
    y = F.layer_norm(s, (s.shape[-1],), w, b, args.get("eps", 1e-5))
    ((s * inp["gs"]).sum() + (y * inp["gy"]).sum()).backward()
    return {"s": s.detach(), "out": y.detach(), **_grads({"x": x, "r": r, "w": w, "b": b})}
