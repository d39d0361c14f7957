"""PyTorch references for losses: F.cross_entropy, F.kl_div, F.mse_loss (forward and backward)."""
import warnings

import torch
import torch.nn.functional as F

# Broadcast targets and reduction='mean' for kl_div are exercised on purpose.
warnings.filterwarnings("ignore", category=UserWarning)


def _leaf(t):
    return t.clone().requires_grad_(True)


def _backward(y, inp):
    if y.dim() == 0:
        y.backward(inp["g"].reshape(()))
    else:
        y.backward(inp["g"])


def cross_entropy(inp, args):
    x = _leaf(inp["x"])
    t = inp["t"]
    y = F.cross_entropy(x, t, ignore_index=args.get("ignore_index", -100), reduction=args["reduction"],
                        label_smoothing=args.get("label_smoothing", 0.0))
    _backward(y, inp)
    return {"out": y.detach(), "dx": x.grad}


def kl_div(inp, args):
    x, t = _leaf(inp["x"]), _leaf(inp["t"])
    y = F.kl_div(x, t, reduction=args["reduction"], log_target=bool(args["log_target"]))
    _backward(y, inp)
    return {"out": y.detach(), "dx": x.grad, "dt": t.grad}


def mse_loss(inp, args):
    x, t = _leaf(inp["x"]), _leaf(inp["t"])
    y = F.mse_loss(x, t, reduction=args["reduction"])
    _backward(y, inp)
    return {"out": y.detach(), "dx": x.grad, "dt": t.grad}
