"""PyTorch references for loading foreign ViT / DeiT weights (tests/io/name_maps_test.cpp).

Each model is built in torch with SEEDED RANDOM weights (Linear weights and the heads trunc_normal
std .02 like the body, biases / LayerNorm affine perturbed so a wrong mapping shows), written with
tools/pth_to_safetensors.py (the file's bytes come back as a U8 tensor "file", so the disk cache
holds it), and run on the given images "x":

- torchvision_vit: torchvision's VisionTransformer with a small config (torchvision layout).
- deit: a DeiT (timm's VisionTransformerDistilled, or the plain ViT when distilled=False) in timm's
  layout; layout="hf" re-keys the same weights into transformers' ViT / DeiT layout (separate
  query / key / value) and also returns its config.json bytes ("config").
- bicubic: F.interpolate(mode='bicubic', align_corners=False, antialias=args.get('antialias')); pos_embed:
  the class tokens kept apart, the grid resized the same way (DeiT's plain bicubic, or timm's
  resample_abs_pos_embed with antialias=True).
- tool: a {'model': ...} checkpoint with bf16 / f16 / int / bool tensors and a tied alias, saved with
  torch.save and converted by the tool's main(); returns the file and the tensors it should hold.
"""
import contextlib
import json
import os
import sys
import tempfile

import torch
import torch.nn as nn
import torch.nn.functional as F
from torchvision.models.vision_transformer import VisionTransformer

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "tools"))
import pth_to_safetensors  # noqa: E402


def _bytes(data):
    return torch.frombuffer(bytearray(data), dtype=torch.uint8).clone()


def _randomize(model):
    """Every Linear / conv weight trunc_normal(.02) (heads like the body), every 1-d parameter
    (biases, LayerNorm affine) perturbed, tokens and position embeddings trunc_normal(.02)."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 1:
                p.add_(torch.randn_like(p) * 0.05)
            else:
                nn.init.trunc_normal_(p, std=0.02)


# ---- torchvision ----

def torchvision_vit(inp, args):
    torch.manual_seed(args["seed"])
    model = VisionTransformer(image_size=args["image_size"], patch_size=args["patch_size"],
                              num_layers=args["num_layers"], num_heads=args["num_heads"],
                              hidden_dim=args["hidden_dim"], mlp_dim=args["mlp_dim"],
                              num_classes=args["num_classes"],
                              representation_size=args.get("representation_size"))
    _randomize(model)
    model.eval()
    data = pth_to_safetensors.serialize(model.state_dict())
    with torch.no_grad():
        logits = model(inp["x"])
    return {"file": _bytes(data), "logits": logits}


# ---- DeiT / ViT in timm's layout ----

from timm_layers import Attention as _Attention, Block as _Block, Mlp as _Mlp, PatchEmbed as _PatchEmbed  # noqa: F401


class _Vit(nn.Module):
    def __init__(self, a):
        super().__init__()
        dim, n = a["dim"], (a["image_size"] // a["patch_size"]) ** 2
        self.distilled = a["distilled"]
        prefix = 2 if self.distilled else 1
        self.patch_embed = _PatchEmbed(a["in_channels"], dim, a["patch_size"])
        self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))
        if self.distilled:
            self.dist_token = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos_embed = nn.Parameter(torch.zeros(1, n + prefix, dim))
        self.blocks = nn.ModuleList([_Block(dim, a["heads"], a["mlp_dim"], a["eps"]) for _ in range(a["depth"])])
        self.norm = nn.LayerNorm(dim, eps=a["eps"])
        self.head = nn.Linear(dim, a["num_classes"])
        if self.distilled:
            self.head_dist = nn.Linear(dim, a["num_classes"])

    def forward(self, x):
        x = self.patch_embed.proj(x).flatten(2).transpose(1, 2)
        B = x.shape[0]
        toks = [self.cls_token.expand(B, -1, -1)]
        if self.distilled:
            toks.append(self.dist_token.expand(B, -1, -1))
        x = torch.cat(toks + [x], dim=1) + self.pos_embed
        for b in self.blocks:
            x = b(x)
        x = self.norm(x)
        if self.distilled:
            return (self.head(x[:, 0]) + self.head_dist(x[:, 1])) / 2   # timm / HF at inference
        return self.head(x[:, 0])


def _to_hf(sd, depth, distilled):
    """timm names -> transformers' ViTForImageClassification / DeiTForImageClassificationWithTeacher."""
    pre = "deit." if distilled else "vit."
    out = {pre + "embeddings.cls_token": sd["cls_token"]}
    if distilled:
        out[pre + "embeddings.distillation_token"] = sd["dist_token"]
    out[pre + "embeddings.position_embeddings"] = sd["pos_embed"]
    for w in ("weight", "bias"):
        out[f"{pre}embeddings.patch_embeddings.projection.{w}"] = sd[f"patch_embed.proj.{w}"]
    for i in range(depth):
        a, b = f"blocks.{i}.", f"{pre}encoder.layer.{i}."
        for w in ("weight", "bias"):
            q, k, v = sd[f"{a}attn.qkv.{w}"].chunk(3, dim=0)
            out[f"{b}attention.attention.query.{w}"] = q.clone()
            out[f"{b}attention.attention.key.{w}"] = k.clone()
            out[f"{b}attention.attention.value.{w}"] = v.clone()
            out[f"{b}attention.output.dense.{w}"] = sd[f"{a}attn.proj.{w}"]
            out[f"{b}intermediate.dense.{w}"] = sd[f"{a}mlp.fc1.{w}"]
            out[f"{b}output.dense.{w}"] = sd[f"{a}mlp.fc2.{w}"]
            out[f"{b}layernorm_before.{w}"] = sd[f"{a}norm1.{w}"]
            out[f"{b}layernorm_after.{w}"] = sd[f"{a}norm2.{w}"]
    for w in ("weight", "bias"):
        out[f"{pre}layernorm.{w}"] = sd[f"norm.{w}"]
        if distilled:
            out[f"cls_classifier.{w}"] = sd[f"head.{w}"]
            out[f"distillation_classifier.{w}"] = sd[f"head_dist.{w}"]
        else:
            out[f"classifier.{w}"] = sd[f"head.{w}"]
    return out


def _hf_config(a):
    return {"architectures": ["DeiTForImageClassificationWithTeacher" if a["distilled"] else
                              "ViTForImageClassification"],
            "model_type": "deit" if a["distilled"] else "vit", "hidden_size": a["dim"],
            "num_hidden_layers": a["depth"], "num_attention_heads": a["heads"], "intermediate_size": a["mlp_dim"],
            "hidden_act": "gelu", "image_size": a["image_size"], "patch_size": a["patch_size"],
            "num_channels": a["in_channels"], "layer_norm_eps": a["eps"], "qkv_bias": True,
            "id2label": {str(i): f"class_{i}" for i in range(a["num_classes"])},
            "label2id": {f"class_{i}": i for i in range(a["num_classes"])}}


def deit(inp, args):
    torch.manual_seed(args["seed"])
    model = _Vit(args)
    _randomize(model)
    model.eval()
    sd = model.state_dict()
    res = {}
    if args["layout"] == "hf":
        sd = _to_hf(sd, args["depth"], args["distilled"])
        res["config"] = _bytes(json.dumps(_hf_config(args), indent=2).encode())
    res["file"] = _bytes(pth_to_safetensors.serialize(sd))
    with torch.no_grad():
        res["logits"] = model(inp["x"])
    return res


# ---- resampling ----

def bicubic(inp, args):
    return {"out": F.interpolate(inp["x"], size=(args["h"], args["w"]), mode="bicubic", align_corners=False,
                                 antialias=bool(args.get("antialias", False)))}


def pos_embed(inp, args):
    pos, prefix = inp["pos"], args["prefix"]
    oh, ow, nh, nw = args["old_h"], args["old_w"], args["new_h"], args["new_w"]
    D = pos.shape[-1]
    grid = pos[:, prefix:].reshape(1, oh, ow, D).permute(0, 3, 1, 2)
    grid = F.interpolate(grid, size=(nh, nw), mode="bicubic", align_corners=False,
                         antialias=bool(args.get("antialias", False)))
    grid = grid.permute(0, 2, 3, 1).reshape(1, nh * nw, D)
    return {"out": torch.cat([pos[:, :prefix], grid], dim=1)}


# ---- the converter tool ----

def tool(inp, args):
    g = torch.Generator().manual_seed(7)
    w = torch.randn(5, 3, generator=g)
    big = torch.randn(4, 6, generator=g)
    sd = {
        "f32": w,
        "bf16": torch.randn(3, 7, generator=g).to(torch.bfloat16),
        "f16": (torch.randn(11, generator=g) * 100).to(torch.float16),
        "f64": torch.randn(2, 2, generator=g, dtype=torch.float64),
        "i64": torch.arange(-3, 6, dtype=torch.int64),
        "mask": torch.tensor([True, False, True]),
        "tied": w,                      # the same tensor under a second name: written once
        "rows": big[1:3],               # a view of a larger storage: written as a copy
        "cols": big[:, 2],              # a strided view: written contiguous
    }
    with tempfile.TemporaryDirectory() as d:
        src, dst = os.path.join(d, "ckpt.pth"), os.path.join(d, "out.safetensors")
        torch.save({"model": sd, "epoch": 3}, src)
        with contextlib.redirect_stdout(sys.stderr):   # stdout is the reference server's channel
            rc = pth_to_safetensors.main([src, dst])
        assert rc == 0
        with open(dst, "rb") as f:
            data = f.read()
    res = {"file": _bytes(data)}
    for k, v in sd.items():
        res["e." + k] = v.to(torch.float64) if v.dtype != torch.bool else v.to(torch.uint8)
    return res


# ---- benchmark (DISABLED_ test): torchvision's full vit_b_16, 86M parameters ----

def _vit_b_16(seed):
    """torchvision's vit_b_16 with seeded random weights: the same seed gives the same weights."""
    import torchvision
    torch.manual_seed(seed)
    model = torchvision.models.vit_b_16()
    _randomize(model)
    return model.eval()


def torchvision_vit_b_16(inp, args):
    """The logits of _vit_b_16(args["seed"]) on x and torch's forward time (cached: its weights file
    comes from torchvision_vit_b_16_file, which builds the same model)."""
    import time
    model = _vit_b_16(args["seed"])
    t0 = time.perf_counter()
    with torch.no_grad():
        logits = model(inp["x"])
    return {"logits": logits, "seconds": torch.tensor([time.perf_counter() - t0], dtype=torch.float64)}


def torchvision_vit_b_16_file(inp, args):
    """Writes _vit_b_16(args["seed"]) to args["path"] with tools/pth_to_safetensors.py (330 MB: not
    returned, so the C++ side runs this through torch_run, never from the cache); returns the time."""
    import time
    model = _vit_b_16(args["seed"])
    t0 = time.perf_counter()
    pth_to_safetensors.save(model.state_dict(), args["path"])
    return {"seconds": torch.tensor([time.perf_counter() - t0], dtype=torch.float64)}
