"""PyTorch references for bf16 mixed precision: torch.autocast("cpu", dtype=torch.bfloat16) around a
linear layer and a batched matmul, forward and backward (results and gradients returned as f32)."""
import torch
import torch.nn.functional as F


def _leaf(inp, name):
    t = inp.get(name)
    return None if t is None else t.clone().requires_grad_(True)


def linear(inp, args):
    x, w, b = _leaf(inp, "x"), _leaf(inp, "w"), _leaf(inp, "b")
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = F.linear(x, w, b)
    y.backward(inp["g"].to(y.dtype))
    out = {"out": y.detach().float(), "out_dtype": torch.tensor([1 if y.dtype == torch.bfloat16 else 0])}
    for k, v in {"x": x, "w": w, "b": b}.items():
        if v is not None:
            out["d" + k] = v.grad.float()
    return out


def matmul(inp, args):
    a, b = _leaf(inp, "a"), _leaf(inp, "b")
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = torch.matmul(a, b)
    y.backward(inp["g"].to(y.dtype))
    return {"out": y.detach().float(), "da": a.grad.float(), "db": b.grad.float()}
