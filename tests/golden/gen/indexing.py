"""PyTorch references for indexing, masking and combining ops (forward and backward).

Index tensors arrive as i64/i32, masks as u8 (converted to bool here). Gradients flow from the
incoming gradient(s) g / g0, g1, ... of the outputs.
"""
import torch
import torch.nn.functional as F


def _leaf(t):
    return t.clone().requires_grad_(True)


def embedding(inp, args):
    w = _leaf(inp["w"])
    y = F.embedding(inp["idx"].long(), w)
    y.backward(inp["g"])
    return {"out": y.detach(), "dw": w.grad}


def index_select(inp, args):
    x = _leaf(inp["x"])
    y = torch.index_select(x, args["dim"], inp["idx"].long())
    y.backward(inp["g"])
    return {"out": y.detach(), "dx": x.grad}


def gather(inp, args):
    x = _leaf(inp["x"])
    y = torch.gather(x, args["dim"], inp["idx"].long())
    y.backward(inp["g"])
    return {"out": y.detach(), "dx": x.grad}


def masked_fill(inp, args):
    x = _leaf(inp["x"])
    y = x.masked_fill(inp["mask"].bool(), float(args["value"]))
    y.backward(inp["g"])
    return {"out": y.detach(), "dx": x.grad}


def where(inp, args):
    a, b = _leaf(inp["a"]), _leaf(inp["b"])
    y = torch.where(inp["cond"].bool(), a, b)
    y.backward(inp["g"])
    return {"out": y.detach(), "da": a.grad, "db": b.grad}


def _list(inp, n):
    return [_leaf(inp[f"x{i}"]) for i in range(n)]


def _join(fn, inp, args):
    """fn (torch.cat or torch.stack) of x0 .. x{n-1} along dim: out, and dx{i} of each input a gradient reaches."""
    xs = _list(inp, args["n"])
    y = fn(xs, args["dim"])
    y.backward(inp["g"])
    res = {"out": y.detach()}
    for i, x in enumerate(xs):
        if x.grad is not None:
            res[f"dx{i}"] = x.grad
    return res


def concat(inp, args):
    return _join(torch.cat, inp, args)


def stack(inp, args):
    return _join(torch.stack, inp, args)


def _pieces(inp, x, pieces):
    """Backward of all pieces together: sum_i <piece_i, g_i>."""
    total = sum((p * inp[f"g{i}"]).sum() for i, p in enumerate(pieces))
    total.backward()
    res = {f"out{i}": p.detach().contiguous() for i, p in enumerate(pieces)}
    res["dx"] = x.grad
    return res


def split(inp, args):
    x = _leaf(inp["x"])
    size = args["sizes"] if "sizes" in args else args["split_size"]
    return _pieces(inp, x, torch.split(x, size, args["dim"]))


def split_count(inp, args):
    x = inp["x"]
    size = args["sizes"] if "sizes" in args else args["split_size"]
    return {"n": torch.tensor(len(torch.split(x, size, args["dim"])))}


def chunk(inp, args):
    x = _leaf(inp["x"])
    return _pieces(inp, x, torch.chunk(x, args["chunks"], args["dim"]))


def chunk_count(inp, args):
    return {"n": torch.tensor(len(torch.chunk(inp["x"], args["chunks"], args["dim"])))}
