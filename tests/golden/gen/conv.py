"""PyTorch references for conv2d, pooling and batch norm (forward and backward)."""
import torch
import torch.nn.functional as F


def _leaf(t):
    return t.clone().requires_grad_(True)


def _backward(y, g, leaves):
    y.backward(g)
    return {f"d{k}": v.grad for k, v in leaves.items()}


def conv2d(inp, args):
    x, w = _leaf(inp["x"]), _leaf(inp["w"])
    leaves = {"x": x, "w": w}
    b = None
    if "b" in inp:
        b = _leaf(inp["b"])
        leaves["b"] = b
    y = F.conv2d(x, w, b, stride=tuple(args["stride"]), padding=tuple(args["padding"]),
                 dilation=tuple(args["dilation"]), groups=args["groups"])
    res = {"out": y.detach()}
    res.update(_backward(y, inp["g"], leaves))
    return res


def pool(inp, args):
    x = _leaf(inp["x"])
    op = args["op"]
    if op == "max":
        y = F.max_pool2d(x, tuple(args["kernel"]), tuple(args["stride"]), tuple(args["padding"]))
    elif op == "avg":
        y = F.avg_pool2d(x, tuple(args["kernel"]), tuple(args["stride"]), tuple(args["padding"]),
                         count_include_pad=bool(args["count_include_pad"]))
    elif op == "adaptive_avg":
        y = F.adaptive_avg_pool2d(x, tuple(args["output_size"]))
    else:
        raise ValueError(op)
    res = {"out": y.detach()}
    res.update(_backward(y, inp["g"], {"x": x}))
    return res


def batch_norm(inp, args):
    x = _leaf(inp["x"])
    leaves = {"x": x}
    w = b = None
    if "w" in inp:
        w = _leaf(inp["w"])
        leaves["w"] = w
    if "b" in inp:
        b = _leaf(inp["b"])
        leaves["b"] = b
    rm = inp["rm"].clone() if "rm" in inp else None
    rv = inp["rv"].clone() if "rv" in inp else None
    y = F.batch_norm(x, rm, rv, w, b, training=bool(args["training"]), momentum=args["momentum"],
                     eps=args["eps"])
    res = {"out": y.detach()}
    res.update(_backward(y, inp["g"], leaves))
    if rm is not None:
        res["rm"] = rm
        res["rv"] = rv
    return res
