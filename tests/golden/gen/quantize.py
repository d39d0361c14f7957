"""PyTorch references for int8 inference: per-channel weight and per-token activation quantization with
torch.quantize_per_channel, and the linear layer over the codes (exact integer sums, in float64)."""
import torch


def _scales(t, qmax):
    s = t.abs().amax(dim=1) / qmax
    return torch.where(s > 0, s, torch.ones_like(s))


def linear_int8(inp, args):
    x, w = inp["x"], inp["w"]
    qmax = int(args["qmax"])
    n, m = w.shape[0], x.shape[0]
    sw = _scales(w, 127.0)
    qw = torch.quantize_per_channel(w, sw.double(), torch.zeros(n, dtype=torch.long), 0, torch.qint8).int_repr()
    sx = _scales(x, float(qmax))
    zx = torch.full((m,), qmax + 1, dtype=torch.long)
    qx = torch.quantize_per_channel(x, sx.double(), zx, 0, torch.quint8).int_repr().long() - (qmax + 1)
    acc = qx.double() @ qw.double().t()   # integers below 2^53: exact
    y = acc * (sx.double()[:, None] * sw.double()[None, :])
    if "b" in inp:
        y = y + inp["b"].double()
    return {"qw": qw.float(), "sw": sw, "qx": qx.float(), "sx": sx, "y": y.float(), "acc": acc}
