"""PyTorch references for the image models (tests/models/*_test.cpp).

- torchvision_vit: torchvision 0.14's VisionTransformer with attn's weights (timm names mapped to
  torchvision's), its logits and every parameter's gradient of sum(logits * g).
- deit: a DeiT with a distillation token written from timm's VisionTransformerDistilled (dist token
  after the class token, pos embed of N + 2, head_dist on token 1, eval output the mean of the heads).
- torchvision_param_counts: parameter totals of torchvision's vit_b_16 / vit_b_32 / vit_l_16 / vit_h_14
  and resnet18 / resnet34 (built without running the weight init: only shapes matter).
- variant_shapes: every parameter's shape (under timm's names) and the total of timm-named ViT / DeiT
  variants: ViT-S/16 and DeiT-Ti/16 as torchvision's VisionTransformer (timm's plain ViT has the
  same parameters), distilled DeiTs as the DeiT class below; built without the weight init.
- resnet: torchvision's ResNet (or a 3-stage CIFAR-stem one from torchvision's BasicBlock) with attn's
  state dict; logits, gradients and the updated BatchNorm running statistics.

Inputs: "p.<name>" the model's state dict under attn's (timm / torchvision) names, "x" images,
"g" (and "g2") the output cotangents.
"""
import contextlib
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision
from torchvision.models.resnet import BasicBlock, ResNet
from torchvision.models.vision_transformer import VisionTransformer


def _params(inp):
    return {k[2:]: v for k, v in inp.items() if k.startswith("p.")}


# ---- ViT: timm names -> torchvision names ----

def _vit_name_map(depth):
    m = {"patch_embed.proj.weight": "conv_proj.weight", "patch_embed.proj.bias": "conv_proj.bias",
         "cls_token": "class_token", "pos_embed": "encoder.pos_embedding",
         "norm.weight": "encoder.ln.weight", "norm.bias": "encoder.ln.bias",
         "head.weight": "heads.head.weight", "head.bias": "heads.head.bias"}
    for i in range(depth):
        a, b = f"blocks.{i}.", f"encoder.layers.encoder_layer_{i}."
        for ours, theirs in [("norm1", "ln_1"), ("norm2", "ln_2"), ("attn.proj", "self_attention.out_proj"),
                             ("mlp.fc1", "mlp.0"), ("mlp.fc2", "mlp.3")]:
            for w in ("weight", "bias"):
                m[f"{a}{ours}.{w}"] = f"{b}{theirs}.{w}"
        m[f"{a}attn.qkv.weight"] = f"{b}self_attention.in_proj_weight"   # packed q, k, v rows as timm's qkv
        m[f"{a}attn.qkv.bias"] = f"{b}self_attention.in_proj_bias"
    return m


def torchvision_vit(inp, args):
    torch.manual_seed(0)
    depth = args["num_layers"]
    model = VisionTransformer(image_size=args["image_size"], patch_size=args["patch_size"], num_layers=depth,
                              num_heads=args["num_heads"], hidden_dim=args["hidden_dim"], mlp_dim=args["mlp_dim"],
                              num_classes=args["num_classes"])
    if args.get("in_channels", 3) != 3:   # torchvision's conv_proj is fixed at 3 input channels
        model.conv_proj = nn.Conv2d(args["in_channels"], args["hidden_dim"], kernel_size=args["patch_size"],
                                    stride=args["patch_size"])
    names = _vit_name_map(depth)
    p = _params(inp)
    assert set(p) == set(names), sorted(set(p) ^ set(names))
    model.load_state_dict({names[k]: v for k, v in p.items()}, strict=True)
    model.eval()
    x = inp["x"].clone().requires_grad_(True)
    logits = model(x)
    (logits * inp["g"]).sum().backward()
    tv = dict(model.named_parameters())
    out = {"logits": logits.detach(), "dx": x.grad}
    for ours, theirs in names.items():
        out["g." + ours] = tv[theirs].grad
    return out


# ---- DeiT (timm's VisionTransformerDistilled) ----

from timm_layers import Attention as _Attention, Block as _Block, Mlp as _Mlp, PatchEmbed as _PatchEmbed  # noqa: F401


class DeiT(nn.Module):
    def __init__(self, image_size, patch_size, in_channels, num_classes, dim, depth, heads, mlp_ratio):
        super().__init__()
        n = (image_size // patch_size) ** 2
        self.patch_embed = _PatchEmbed(in_channels, dim, patch_size)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))
        self.dist_token = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos_embed = nn.Parameter(torch.zeros(1, n + 2, dim))
        self.blocks = nn.ModuleList([_Block(dim, heads, int(dim * mlp_ratio)) for _ in range(depth)])
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.head = nn.Linear(dim, num_classes)
        self.head_dist = nn.Linear(dim, num_classes)

    def forward(self, x):
        x = self.patch_embed.proj(x).flatten(2).transpose(1, 2)
        B = x.shape[0]
        x = torch.cat((self.cls_token.expand(B, -1, -1), self.dist_token.expand(B, -1, -1), x), dim=1)
        x = x + self.pos_embed
        for b in self.blocks:
            x = b(x)
        x = self.norm(x)
        return self.head(x[:, 0]), self.head_dist(x[:, 1])


def deit(inp, args):
    model = DeiT(args["image_size"], args["patch_size"], args["in_channels"], args["num_classes"], args["dim"],
                 args["depth"], args["heads"], args["mlp_ratio"])
    model.load_state_dict(_params(inp), strict=True)
    x = inp["x"].clone().requires_grad_(True)
    cls, dist = model(x)
    ((cls * inp["g"]).sum() + (dist * inp["g2"]).sum()).backward()
    out = {"cls": cls.detach(), "dist": dist.detach(), "out": ((cls + dist) / 2).detach(),
           "softmax_sum": (cls.softmax(-1) + dist.softmax(-1)).detach(), "dx": x.grad}
    for k, v in model.named_parameters():
        out["g." + k] = v.grad
    return out


# ---- parameter counts ----

@contextlib.contextmanager
def _no_init():
    """Weight init as no-ops (the counts need only the shapes; vit_h_14 has 632M parameters)."""
    import torch.nn.init as init
    import torch.nn.modules.activation as act
    saved = {}
    targets = [(init, n) for n in dir(init) if n.endswith("_") and not n.startswith("_")]
    targets += [(act, n) for n in ("xavier_uniform_", "constant_", "xavier_normal_") if hasattr(act, n)]
    for mod, n in targets:
        saved[(mod, n)] = getattr(mod, n)
        setattr(mod, n, lambda t, *a, **k: t)
    try:
        yield
    finally:
        for (mod, n), f in saved.items():
            setattr(mod, n, f)


def torchvision_param_counts(inp, args):
    counts = []
    with _no_init():
        for name in args["models"]:
            m = getattr(torchvision.models, name)()
            counts.append(sum(p.numel() for p in m.parameters()))
            del m
    return {"counts": torch.tensor(counts, dtype=torch.int64)}


def variant_shapes(inp, args):
    """args["variants"]: [{"name", "dim", "depth", "heads", "distilled"}], 224 x 224, patch 16, 1000 classes."""
    out = {}
    with _no_init():
        for v in args["variants"]:
            if v["distilled"]:
                m = DeiT(224, 16, 3, 1000, v["dim"], v["depth"], v["heads"], 4.0)
                shapes = {k: list(p.shape) for k, p in m.named_parameters()}
            else:
                m = VisionTransformer(image_size=224, patch_size=16, num_layers=v["depth"], num_heads=v["heads"],
                                      hidden_dim=v["dim"], mlp_dim=4 * v["dim"], num_classes=1000)
                theirs = {k: list(p.shape) for k, p in m.named_parameters()}
                names = _vit_name_map(v["depth"])
                assert set(names.values()) == set(theirs), sorted(set(names.values()) ^ set(theirs))
                shapes = {ours: theirs[t] for ours, t in names.items()}
            for k, shape in shapes.items():
                out[f"shape.{v['name']}.{k}"] = torch.tensor(shape, dtype=torch.int64)
            out[f"total.{v['name']}"] = torch.tensor(sum(p.numel() for p in m.parameters()), dtype=torch.int64)
            del m
    return out


# ---- ResNet ----

class CifarResNet(nn.Module):
    """torchvision's ResNet layout with a 3x3 stride-1 stem, no max-pool and any number of stages."""

    def __init__(self, in_channels, stem, widths, blocks, num_classes):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, stem, kernel_size=3, stride=1, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(stem)
        self.relu = nn.ReLU(inplace=True)
        ch = stem
        for i, (w, n) in enumerate(zip(widths, blocks)):
            stride = 1 if i == 0 else 2
            layers = []
            for b in range(n):
                s = stride if b == 0 else 1
                down = None
                if s != 1 or ch != w:
                    down = nn.Sequential(nn.Conv2d(ch, w, kernel_size=1, stride=s, bias=False), nn.BatchNorm2d(w))
                layers.append(BasicBlock(ch, w, s, down))
                ch = w
            setattr(self, f"layer{i + 1}", nn.Sequential(*layers))
        self.nstages = len(widths)
        self.fc = nn.Linear(ch, num_classes)

    def forward(self, x):
        x = self.relu(self.bn1(self.conv1(x)))
        for i in range(self.nstages):
            x = getattr(self, f"layer{i + 1}")(x)
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def resnet(inp, args):
    if args["stem"] == "imagenet":
        model = getattr(torchvision.models, args["torchvision"])(num_classes=args["num_classes"])
        if args["in_channels"] != 3:
            model.conv1 = nn.Conv2d(args["in_channels"], 64, kernel_size=7, stride=2, padding=3, bias=False)
    else:
        model = CifarResNet(args["in_channels"], args["stem_channels"], args["widths"], args["blocks"],
                            args["num_classes"])
    if args.get("double"):
        model.double()
    model.load_state_dict(_params(inp), strict=True)
    model.train(bool(args["training"]))
    x = inp["x"].clone().requires_grad_(True)
    logits = model(x)
    (logits * inp["g"]).sum().backward()
    out = {"logits": logits.detach(), "dx": x.grad}
    for k, v in model.named_parameters():
        out["g." + k] = v.grad
    for k, v in model.named_buffers():
        out["b." + k] = v
    return out


# ---- a ViT block with the norm ablations ----

class _NormBlock(nn.Module):
    """timm's ViT block (GELU MLP, packed qkv) with LayerNorm or BatchNorm (BatchNorm1d over the channels,
    the (B, T) tokens its batch) and pre-norm (timm) or post-norm (x = norm(x + f(x)))."""

    def __init__(self, dim, heads, hidden, norm, norm_first):
        super().__init__()
        make = (lambda: nn.LayerNorm(dim, eps=1e-6)) if norm == "layer" else (lambda: nn.BatchNorm1d(dim))
        self.norm1, self.norm2 = make(), make()
        self.heads, self.norm_kind, self.norm_first = heads, norm, norm_first
        self.attn = nn.Module()
        self.attn.qkv = nn.Linear(dim, 3 * dim)
        self.attn.proj = nn.Linear(dim, dim)
        self.mlp = nn.Module()
        self.mlp.fc1 = nn.Linear(dim, hidden)
        self.mlp.fc2 = nn.Linear(hidden, dim)

    def _norm(self, n, x):
        return n(x) if self.norm_kind == "layer" else n(x.transpose(1, 2)).transpose(1, 2)

    def _attn(self, x):
        B, T, C = x.shape
        hs = C // self.heads
        q, k, v = self.attn.qkv(x).reshape(B, T, 3, self.heads, hs).permute(2, 0, 3, 1, 4).unbind(0)
        a = ((q * hs ** -0.5) @ k.transpose(-2, -1)).softmax(-1)
        return self.attn.proj((a @ v).transpose(1, 2).reshape(B, T, C))

    def _mlp(self, x):
        return self.mlp.fc2(F.gelu(self.mlp.fc1(x)))

    def forward(self, x):
        if self.norm_first:
            x = x + self._attn(self._norm(self.norm1, x))
            return x + self._mlp(self._norm(self.norm2, x))
        x = self._norm(self.norm1, x + self._attn(x))
        return self._norm(self.norm2, x + self._mlp(x))


def norm_block(inp, args):
    """_NormBlock in training mode with attn's parameters: output, input and parameter gradients of
    sum(out * g), and (BatchNorm) the running statistics after the step."""
    x0 = inp["x"]
    dim = x0.shape[-1]
    m = _NormBlock(dim, args["heads"], args["hidden"], args["norm"], bool(args["norm_first"])).to(x0.dtype)
    state = m.state_dict()
    for k, v in _params(inp).items():
        state[k].copy_(v)
    m.train()
    x = x0.clone().requires_grad_(True)
    out = m(x)
    (out * inp["g"]).sum().backward()
    res = {"out": out.detach(), "dx": x.grad}
    res.update({"d." + k: p.grad for k, p in m.named_parameters()})
    if args["norm"] == "batch":
        for n in ("norm1", "norm2"):
            res[n + ".running_mean"] = getattr(m, n).running_mean
            res[n + ".running_var"] = getattr(m, n).running_var
    return res
