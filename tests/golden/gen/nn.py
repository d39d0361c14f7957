"""PyTorch references for attn::nn modules: torch.nn layers loaded with the test's weights."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def _load(module, inp, prefix=""):
    """Copies inp["p.<name>"] into each parameter <name> of module (all must be present)."""
    with torch.no_grad():
        for name, p in module.named_parameters():
            p.copy_(inp["p." + prefix + name])


def _param_grads(module):
    return {"d." + name: p.grad for name, p in module.named_parameters()}


def _run(module, x, g, x_is_float=True):
    if x_is_float:
        x = x.clone().requires_grad_(True)
    y = module(x)
    y.backward(g)
    res = {"out": y.detach()}
    if x_is_float:
        res["dx"] = x.grad
    res.update(_param_grads(module))
    return res


def linear(inp, args):
    w = inp["p.weight"]
    m = nn.Linear(w.shape[1], w.shape[0], bias=bool(args["bias"])).to(w.dtype)
    _load(m, inp)
    return _run(m, inp["x"], inp["g"])


def layer_norm(inp, args):
    x = inp["x"]
    m = nn.LayerNorm(x.shape[-1], eps=args["eps"], elementwise_affine=bool(args["affine"])).to(x.dtype)
    _load(m, inp)
    return _run(m, x, inp["g"])


def embedding(inp, args):
    w = inp["p.weight"]
    m = nn.Embedding(w.shape[0], w.shape[1]).to(w.dtype)
    _load(m, inp)
    return _run(m, inp["idx"], inp["g"], x_is_float=False)


class _Mlp(nn.Module):
    """timm's Mlp (fc1 -> act -> drop -> norm(Identity) -> fc2 -> drop), without timm."""

    def __init__(self, cin, hidden, cout, act):
        super().__init__()
        self.fc1 = nn.Linear(cin, hidden)
        self.act = {"gelu": nn.GELU(), "gelu_tanh": nn.GELU(approximate="tanh"), "relu": nn.ReLU()}[act]
        self.drop1 = nn.Dropout(0.0)
        self.norm = nn.Identity()
        self.fc2 = nn.Linear(hidden, cout)
        self.drop2 = nn.Dropout(0.0)

    def forward(self, x):
        return self.drop2(self.fc2(self.norm(self.drop1(self.act(self.fc1(x))))))


def mlp(inp, args):
    w1, w2 = inp["p.fc1.weight"], inp["p.fc2.weight"]
    m = _Mlp(w1.shape[1], w1.shape[0], w2.shape[0], args["act"]).to(w1.dtype)
    _load(m, inp)
    return _run(m, inp["x"], inp["g"])


class _Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.norm = nn.LayerNorm(c)
        self.mlp = _Mlp(c, 2 * c, c, "gelu")
        self.register_buffer("scale", torch.ones(c))


class _Net(nn.Module):
    """The structure of NamedModel in tests/nn/module_test.cpp."""

    def __init__(self, c, depth, classes):
        super().__init__()
        self.cls_token = nn.Parameter(torch.zeros(1, 1, c))
        self.blocks = nn.ModuleList([_Block(c) for _ in range(depth)])
        self.head = nn.Linear(c, classes, bias=False)
        self.pos_embed = nn.Parameter(torch.zeros(1, 4, c))
        self.register_buffer("step", torch.zeros((), dtype=torch.int64))


def structure(inp, args):
    """named_parameters and state_dict in torch's order: keys "<kind>.<index:03d>.<name>" (shape only)."""
    net = _Net(args["c"], args["depth"], args["classes"])
    out = {}
    for i, (name, p) in enumerate(net.named_parameters()):
        out[f"param.{i:03d}.{name}"] = torch.zeros(p.shape)
    for i, (name, t) in enumerate(net.state_dict().items()):
        out[f"state.{i:03d}.{name}"] = torch.zeros(t.shape)
    out["num_parameters"] = torch.tensor(sum(p.numel() for p in net.parameters()), dtype=torch.int64)
    return out


def kaiming_bound(inp, args):
    """torch.nn.Linear's default weight/bias bounds for fan_in, from its own init on a large layer."""
    torch.manual_seed(0)
    m = nn.Linear(args["fan_in"], 4096)
    return {"w_absmax": m.weight.detach().abs().max().to(torch.float64),
            "b_absmax": m.bias.detach().abs().max().to(torch.float64),
            "w_std": m.weight.detach().to(torch.float64).std()}
