"""PyTorch references for elementwise ops, reductions and matmul (forward and backward).

scalar_left: s - x (rsub) or s / x (rdiv) for the number args["s"]; eq: torch.eq of "a" and "b"
(broadcast, u8 out); sum_to: x.sum_to_size(args["shape"]), the reduction that undoes broadcasting.
"""
import torch
import torch.nn.functional as F

_UNARY = {
    "neg": torch.neg, "exp": torch.exp, "log": torch.log, "sqrt": torch.sqrt, "rsqrt": torch.rsqrt,
    "abs": torch.abs, "tanh": torch.tanh, "sigmoid": torch.sigmoid, "relu": torch.relu,
    "gelu": lambda x: F.gelu(x), "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
}

_BINARY = {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div,
           "maximum": torch.maximum, "minimum": torch.minimum}


def _grads(out, leaves, g):
    out.backward(g)
    return {f"d{k}": v.grad for k, v in leaves.items()}


def unary(inp, args):
    x = inp["x"].clone().requires_grad_(True)
    y = _UNARY[args["op"]](x)
    res = {"out": y.detach()}
    res.update(_grads(y, {"x": x}, inp["g"]))
    return res


def binary(inp, args):
    a = inp["a"].clone().requires_grad_(True)
    b = inp["b"].clone().requires_grad_(True)
    y = _BINARY[args["op"]](a, b)
    res = {"out": y.detach()}
    res.update(_grads(y, {"a": a, "b": b}, inp["g"]))
    return res


def reduce(inp, args):
    x = inp["x"].clone().requires_grad_(True)
    op, dims, keep = args["op"], args["dims"], args["keepdim"]
    if op == "sum":
        y = x.sum(dim=dims, keepdim=keep)
    elif op == "mean":
        y = x.mean(dim=dims, keepdim=keep)
    elif op == "var":
        y = x.var(dim=dims, unbiased=bool(args.get("unbiased", True)), keepdim=keep)
    elif op == "max":
        y, idx = x.max(dim=dims[0], keepdim=keep)
    res = {"out": y.detach()}
    res.update(_grads(y, {"x": x}, inp["g"]))
    return res


def matmul(inp, args):
    a = inp["a"].clone().requires_grad_(True)
    b = inp["b"].clone().requires_grad_(True)
    if args.get("transpose_b"):
        y = a @ b.transpose(-1, -2)
    else:
        y = a @ b
    res = {"out": y.detach()}
    res.update(_grads(y, {"a": a, "b": b}, inp["g"]))
    return res


def linear(inp, args):
    x = inp["x"].clone().requires_grad_(True)
    w = inp["w"].clone().requires_grad_(True)
    b = inp["b"].clone().requires_grad_(True)
    y = F.linear(x, w, b)
    res = {"out": y.detach()}
    res.update(_grads(y, {"x": x, "w": w, "b": b}, inp["g"]))
    return res


def scalar_left(inp, args):
    x = inp["x"].clone().requires_grad_(True)
    y = args["s"] - x if args["op"] == "rsub" else args["s"] / x
    res = {"out": y.detach()}
    res.update(_grads(y, {"x": x}, inp["g"]))
    return res


def eq(inp, args):
    return {"out": torch.eq(inp["a"], inp["b"]).to(torch.uint8)}


def sum_to(inp, args):
    x = inp["x"].clone().requires_grad_(True)
    y = x.sum_to_size(args["shape"])
    res = {"out": y.detach()}
    res.update(_grads(y, {"x": x}, inp["g"]))
    return res
