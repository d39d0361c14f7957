"""PyTorch references for the Swin Transformer (tests/models/swin_test.cpp): torchvision 0.14's
SwinTransformer (V1 and V2) with SEEDED RANDOM weights, every parameter drawn (Linear / conv weights
trunc_normal .02, heads included; biases and LayerNorm affine perturbed by N(0, .05); the relative
position bias tables N(0, .5) so the bias matters; V2's logit_scale log 10 + N(0, .3) with head 0
above the clamp at log 100).

- weights: the model's state dict as safetensors bytes ("file"), written by tools/pth_to_safetensors.py.
- predict_reference: images through torchvision's eval transform of the weights and the model.
- parity: the same model (rebuilt from the seed) on images "x" with labels "y": eval-mode logits
  ("logits"), then one train-mode step (dropout and stochastic depth 0) of cross-entropy; attn's
  gradients come in as "g.<name>" and the comparison is done here so that the ~28M reference
  gradients need not be cached: per parameter (in named_parameters order, "names" joined by newlines)
  "gmax_abs_diff" = max |attn - torch| and "gmax_ref" = max |torch|, and "gmissing" = the count of
  parameters whose attn gradient was not sent.

args: seed; model ("swin_t", ..., or "custom" with patch, embed, depths, heads, window, num_classes,
v2).
"""
import math
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision
from torchvision.models import swin_transformer as st

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "tools"))
import pth_to_safetensors  # noqa: E402


def _bytes(data):
    return torch.frombuffer(bytearray(data), dtype=torch.uint8).clone()


def _build(args):
    torch.manual_seed(args["seed"])
    name = args["model"]
    if name != "custom":
        model = getattr(torchvision.models, name)()
    else:
        v2 = args.get("v2", False)
        model = st.SwinTransformer(
            patch_size=[args["patch"], args["patch"]], embed_dim=args["embed"], depths=args["depths"],
            num_heads=args["heads"], window_size=[args["window"], args["window"]], stochastic_depth_prob=0.0,
            num_classes=args["num_classes"],
            block=st.SwinTransformerBlockV2 if v2 else None,
            downsample_layer=st.PatchMergingV2 if v2 else st.PatchMerging)
    for m in model.modules():   # deterministic training step
        if isinstance(m, torchvision.ops.StochasticDepth):
            m.p = 0.0
    with torch.no_grad():
        for n, p in model.named_parameters():
            if n.endswith("relative_position_bias_table"):
                p.normal_(0.0, 0.5)
            elif n.endswith("logit_scale"):
                p.copy_(math.log(10.0) + 0.3 * torch.randn_like(p))
                p[0] = math.log(100.0) + 0.5   # clamped: no gradient
            elif p.dim() == 1:
                p.add_(torch.randn_like(p) * 0.05)
            else:
                nn.init.trunc_normal_(p, std=0.02)
    return model


def weights(inp, args):
    model = _build(args)
    return {"file": _bytes(pth_to_safetensors.serialize(model.state_dict()))}


def parity(inp, args):
    model = _build(args)
    model.eval()
    with torch.no_grad():
        logits = model(inp["x"])
    model.train()
    loss = F.cross_entropy(model(inp["x"]), inp["y"])
    loss.backward()
    names, diff, ref = [], [], []
    missing = 0
    for n, p in model.named_parameters():
        names.append(n)
        g = p.grad if p.grad is not None else torch.zeros_like(p)
        ref.append(g.abs().max().item())
        mine = inp.get("g." + n)
        if mine is None:
            missing += 1
            diff.append(float("inf"))
        else:
            diff.append((mine.to(torch.float64) - g.to(torch.float64)).abs().max().item())
    return {"logits": logits, "train_logits_loss": loss.detach().reshape(1),
            "names": _bytes("\n".join(names).encode()),
            "gmax_abs_diff": torch.tensor(diff, dtype=torch.float64),
            "gmax_ref": torch.tensor(ref, dtype=torch.float64),
            "gmissing": torch.tensor([missing], dtype=torch.int64)}


def predict_reference(inp, args):
    """n seeded images (PNG / JPEG, as folder_eval's) through torchvision's own eval transform of the
    model's weights (e.g. Swin_T_Weights.IMAGENET1K_V1.transforms(): resize 232 bicubic, crop 224) and the
    seeded model of `args`: the images' bytes ("img_k", "jpeg" flags) and the logits (n, classes) f64."""
    import io
    import numpy as np
    from PIL import Image
    from folder_eval import _image
    model = _build(args)
    model.eval()
    tf = getattr(torchvision.models, args["weights_enum"]).IMAGENET1K_V1.transforms()
    rng = np.random.default_rng(args["seed"])
    out, xs, exts = {}, [], []
    for k in range(args["n"]):
        data, ext = _image(rng, k)
        out["img_%d" % k] = _bytes(data)
        exts.append(1 if ext == "jpg" else 0)
        xs.append(tf(Image.open(io.BytesIO(data)).convert("RGB")))
    with torch.no_grad():
        out["logits"] = model(torch.stack(xs)).double()
    out["jpeg"] = torch.tensor(exts)
    return out


def window_module(inp, args):
    """torchvision's ShiftedWindowAttention (or V2) in f64 with seeded random parameters (the bias table
    N(0, .5); V2: logit_scale with head 0 above the clamp) on x (B, H, W, C): its state dict ("s.<key>",
    buffers included), y, and the gradients of sum(y * g) for x ("dx") and every parameter ("g.<name>")."""
    torch.manual_seed(args["seed"])
    w, s = args["window"], args["shift"]
    cls = st.ShiftedWindowAttentionV2 if args["v2"] else st.ShiftedWindowAttention
    m = cls(args["dim"], [w, w], [s, s], args["heads"]).double()
    with torch.no_grad():
        for n, p in m.named_parameters():
            if n == "relative_position_bias_table":
                p.normal_(0.0, 0.5)
            elif n == "logit_scale":
                p.copy_(math.log(10.0) + 0.3 * torch.randn_like(p))
                p[0] = math.log(100.0) + 0.5
            elif p.dim() == 1:
                p.normal_(0.0, 0.1)
            else:
                p.normal_(0.0, 0.2)
    x = inp["x"].double().requires_grad_(True)
    y = m(x)
    (y * inp["g"].double()).sum().backward()
    out = {"y": y.detach(), "dx": x.grad}
    for k, v in m.state_dict().items():
        out["s." + k] = v
    for n, p in m.named_parameters():
        out["g." + n] = p.grad
    return out


def window_op(inp, args):
    """The core of torchvision's shifted_window_attention(_v2) on a packed projection, in f64: qkv
    (B nW, N, 3 C), bias (NH, N, N), optional "mask" (nW, N, N) added per window (window w uses
    mask[w % nW]), optional "logit_scale" (NH, 1, 1) (V2: cosine attention, scale exp(min(., log 100)));
    heads args["heads"]. Returns out (B nW, N, C), the weights (B nW, NH, N, N) and the gradients of
    sum(out * g) for qkv, bias and logit_scale."""
    nh = args["heads"]
    qkv = inp["qkv"].double().requires_grad_(True)
    bias = inp["bias"].double().requires_grad_(True)
    bw, n, c3 = qkv.shape
    c = c3 // 3
    t = qkv.reshape(bw, n, 3, nh, c // nh).permute(2, 0, 3, 1, 4)
    q, k, v = t[0], t[1], t[2]
    ls = None
    if "logit_scale" in inp:
        ls = inp["logit_scale"].double().requires_grad_(True)
        a = F.normalize(q, dim=-1) @ F.normalize(k, dim=-1).transpose(-2, -1)
        a = a * torch.clamp(ls, max=math.log(100.0)).exp()
    else:
        a = (q * (c // nh) ** -0.5) @ k.transpose(-2, -1)
    a = a + bias.unsqueeze(0)
    if "mask" in inp:
        m = inp["mask"].double()
        nw = m.shape[0]
        a = (a.view(bw // nw, nw, nh, n, n) + m.unsqueeze(1).unsqueeze(0)).view(bw, nh, n, n)
    p = F.softmax(a, dim=-1)
    out = (p @ v).transpose(1, 2).reshape(bw, n, c)
    (out * inp["g"].double()).sum().backward()
    r = {"out": out.detach(), "weights": p.detach(), "dqkv": qkv.grad, "dbias": bias.grad}
    if ls is not None:
        r["dlogit_scale"] = ls.grad
    return r


def roll(inp, args):
    return {"out": torch.roll(inp["x"], shifts=tuple(args["shifts"]), dims=(1, 2))}


def _foreign_names(key, layout, depth_of_stage):
    """A torchvision Swin key -> the same tensor's key(s) in timm's (>= 0.9) or Hugging Face's layout
    (written from their modules: timm swin_transformer.py, transformers modeling_swin.py)."""
    p = key.split(".")
    old_timm = layout == "timm_old"   # timm < 0.9 / Microsoft's release: merging at the end of stage i
    timm = layout in ("timm", "timm_old")
    if p[0] == "features" and p[1] == "0":
        tail = {"0": "proj", "2": "norm"}[p[2]]
        base = "patch_embed." if timm else "swin.embeddings." + ("patch_embeddings." if tail == "proj" else "")
        return [base + ("projection" if (tail == "proj" and not timm) else tail) + "." + p[-1]]
    if p[0] == "features":
        f = int(p[1])
        if f % 2 == 0:   # merging after stage f / 2 - 1
            stage = f // 2 if (timm and not old_timm) else f // 2 - 1
            return [("layers.%d.downsample." if timm else "swin.encoder.layers.%d.downsample.") % stage
                    + ".".join(p[2:])]
        stage, block, rest = (f - 1) // 2, p[2], ".".join(p[3:])
        prefix = ("layers.%d.blocks.%s." if timm else "swin.encoder.layers.%d.blocks.%s.") % (stage, block)
        if timm:
            rest = rest.replace("mlp.0.", "mlp.fc1.").replace("mlp.3.", "mlp.fc2.")
            return [prefix + rest]
        if rest.startswith("attn.qkv."):
            return [prefix + "attention.self.%s.%s" % (n, p[-1]) for n in ("query", "key", "value")]
        table = {"norm1.": "layernorm_before.", "norm2.": "layernorm_after.", "attn.proj.": "attention.output.dense.",
                 "attn.relative_position_bias_table": "attention.self.relative_position_bias_table",
                 "attn.relative_position_index": "attention.self.relative_position_index",
                 "mlp.0.": "intermediate.dense.", "mlp.3.": "output.dense."}
        for a, b in table.items():
            if rest.startswith(a):
                return [prefix + b + rest[len(a):]]
        raise KeyError(key)
    if p[0] == "norm":
        return ["norm." + p[1]] if timm else ["swin.layernorm." + p[1]]
    if p[0] == "head":
        return ["head.fc." + p[1]] if timm else ["classifier." + p[1]]
    raise KeyError(key)


def foreign_weights(inp, args):
    """The seeded torchvision model of `args` (V1) with its state dict renamed to args["layout"]
    ("timm": timm >= 0.9, relative_position_index and attn_mask not stored; "timm_old": timm < 0.9,
    merging at the end of stage i, relative_position_index (N, N) and a stand-in attn_mask stored; "hf":
    transformers' SwinForImageClassification, q / k / v split, relative_position_index (N, N) stored):
    "file"; for hf also its config.json ("config")."""
    import json
    model = _build(args)
    sd = model.state_dict()
    out = {}
    for k, v in sd.items():
        names = _foreign_names(k, args["layout"], None)
        if k.endswith("relative_position_index"):
            if args["layout"] == "timm":
                continue
            side = int(round(v.numel() ** 0.5))
            v = v.reshape(side, side)
        parts = v.chunk(3, 0) if len(names) == 3 else [v]
        for name, t in zip(names, parts):
            out[name] = t.contiguous().clone()
        if args["layout"] == "timm_old" and k.endswith("relative_position_index") and ".1.attn." in k:
            out[names[0].replace("attn.relative_position_index", "attn_mask")] = torch.zeros(4, side, side)
    res = {"file": _bytes(pth_to_safetensors.serialize(out))}
    if args["layout"] == "hf":
        c = {"model_type": "swin", "image_size": args.get("image_size", 224), "patch_size": args["patch"],
             "num_channels": 3, "embed_dim": args["embed"], "depths": args["depths"], "num_heads": args["heads"],
             "window_size": args["window"], "mlp_ratio": 4.0, "qkv_bias": True, "hidden_act": "gelu",
             "layer_norm_eps": 1e-5, "use_absolute_embeddings": False, "drop_path_rate": 0.1,
             "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0,
             "id2label": {str(i): "class_%d" % i for i in range(args["num_classes"])}}
        res["config"] = _bytes(json.dumps(c).encode())
    return res


def logits(inp, args):
    """Eval-mode logits of the seeded torchvision model of `args` on images "x"."""
    model = _build(args)
    model.eval()
    with torch.no_grad():
        return {"logits": model(inp["x"]).double()}


def resized_window_logits(inp, args):
    """The seeded torchvision model of `args` rebuilt with window args["new_window"], its position-bias
    tables resized as timm's resize_rel_pos_bias_table ((L, NH) -> (1, NH, 2w-1, 2w-1), bicubic,
    align_corners False, back), relative_position_index the new model's: eval logits on "x"."""
    src = _build(args)
    new_args = dict(args, window=args["new_window"])
    model = _build(new_args)
    sd = src.state_dict()
    w = args["new_window"]
    for k, v in list(sd.items()):
        if k.endswith("relative_position_bias_table"):
            s = int(round(v.shape[0] ** 0.5))
            t = v.transpose(1, 0).reshape(1, -1, s, s)
            t = F.interpolate(t, size=(2 * w - 1, 2 * w - 1), mode="bicubic", align_corners=False)
            sd[k] = t.reshape(-1, (2 * w - 1) ** 2).transpose(0, 1)
        elif k.endswith("relative_position_index"):
            sd[k] = model.state_dict()[k]
    model.load_state_dict(sd)
    model.eval()
    with torch.no_grad():
        return {"logits": model(inp["x"]).double()}


def hf_convention_logits(inp, args):
    """transformers' SwinModel input-size rules written on the seeded torchvision model of `args`: the
    image padded (zeros, right / bottom) to multiples of the patch (SwinPatchEmbeddings.maybe_pad);
    a block whose map has min(H, W) <= window runs unshifted (SwinLayer.set_shift_and_window_size;
    a smaller map raises, as transformers' broadcast of the window's bias does); eval logits on "x"."""
    model = _build(args)
    model.eval()
    x, p, w = inp["x"], args["patch"], args["window"]
    h = F.pad(x, (0, (-x.shape[3]) % p, 0, (-x.shape[2]) % p))
    with torch.no_grad():
        for i, layer in enumerate(model.features):
            if i % 2 == 0:
                h = layer(h)
                continue
            for blk in layer:
                side = min(h.shape[1], h.shape[2])
                if side < w:
                    raise ValueError("map smaller than the window")
                saved = blk.attn.shift_size
                if side <= w:
                    blk.attn.shift_size = [0, 0]
                h = blk(h)
                blk.attn.shift_size = saved
        h = model.norm(h).permute(0, 3, 1, 2)
        out = model.head(torch.flatten(model.avgpool(h), 1))
    return {"logits": out.double()}


def stage_outputs(inp, args):
    """torchvision's features[1], [3], ... (each stage's output after its blocks, (B, H, W, C)) of the
    seeded model of `args` on "x", eval mode: "stage_0", "stage_1", ..."""
    model = _build(args)
    model.eval()
    out, h = {}, inp["x"]
    with torch.no_grad():
        for i, layer in enumerate(model.features):
            h = layer(h)
            if i % 2 == 1:
                out["stage_%d" % (i // 2)] = h.clone()
    return out


def stage_macs(inp, args):
    """Multiply-accumulates per part of torchvision's model `args` on one args["size"]^2 image, counted by
    forward hooks: every Conv2d / Linear module (output elements x fan-in) and each window attention
    (whose qkv and proj run as F.linear, unhooked) per token of its padded map: q kᵀ and P v (2 N C)
    plus qkv and proj (fan-in x their outputs); summed per features index: "macs" =
    [features.0, features.1, features.2 + features.3, ..., head] (a merging with the stage it starts)."""
    model = _build(args)
    model.eval()
    counts = {}
    current = ["head"]

    def linear_hook(m, i, o):
        fan_in = m.in_features if isinstance(m, nn.Linear) else m.in_channels * m.kernel_size[0] * m.kernel_size[1]
        counts[current[0]] = counts.get(current[0], 0) + o.numel() * fan_in

    def attn_hook(m, i, o):
        _, h, w, c = i[0].shape
        wh, ww = m.window_size
        hp, wp = -(-h // wh) * wh, -(-w // ww) * ww
        per_token = 2 * wh * ww * c + c * (m.qkv.out_features + m.proj.out_features)
        counts[current[0]] = counts.get(current[0], 0) + hp * wp * per_token

    inside_attn = set()
    for m in model.modules():
        if isinstance(m, (st.ShiftedWindowAttention, st.ShiftedWindowAttentionV2)):
            inside_attn.update(id(x) for x in m.modules() if x is not m)
    for m in model.modules():
        if isinstance(m, (nn.Linear, nn.Conv2d)) and id(m) not in inside_attn:
            m.register_forward_hook(linear_hook)
        if isinstance(m, (st.ShiftedWindowAttention, st.ShiftedWindowAttentionV2)):
            m.register_forward_hook(attn_hook)
    for idx, layer in enumerate(model.features):
        key = "f%d" % ((idx + 1) // 2 + (idx > 0 and idx % 2 == 0))   # 0: embed; 1: stage 1; 2, 3: stage 2; ...
        layer.register_forward_pre_hook(lambda m, i, key=key: current.__setitem__(0, key))
    model.head.register_forward_pre_hook(lambda m, i: current.__setitem__(0, "head"))
    with torch.no_grad():
        model(torch.zeros(1, 3, args["size"], args["size"]))
    n = len(model.features) // 2 + 1
    return {"macs": torch.tensor([counts["f%d" % k] for k in range(n)] + [counts["head"]], dtype=torch.int64)}


def _timm_attn(m, x, shift):
    """timm >= 1.0's SwinTransformerBlock._attn (roll, pad, dynamic mask for the padded size, window
    attention, crop, roll back) on torchvision's V1 ShiftedWindowAttention m's parameters."""
    b, h, w, c = x.shape
    wh, ww = m.window_size
    if shift:
        x = torch.roll(x, shifts=(-shift, -shift), dims=(1, 2))
    x = F.pad(x, (0, 0, 0, (wh - w % wh) % wh, 0, (wh - h % wh) % wh))
    hp, wp = x.shape[1], x.shape[2]
    n, nh = wh * ww, m.num_heads
    win = x.view(b, hp // wh, wh, wp // ww, ww, c).permute(0, 1, 3, 2, 4, 5).reshape(-1, n, c)
    qkv = F.linear(win, m.qkv.weight, m.qkv.bias).reshape(win.shape[0], n, 3, nh, c // nh).permute(2, 0, 3, 1, 4)
    q, k, v = qkv.unbind(0)
    attn = (q * (c // nh) ** -0.5) @ k.transpose(-2, -1)
    bias = m.relative_position_bias_table[m.relative_position_index.view(-1)].view(n, n, -1).permute(2, 0, 1)
    attn = attn + bias.unsqueeze(0)
    if shift:
        img = torch.zeros((1, hp, wp, 1))
        cnt = 0
        for hs in ((0, -wh), (-wh, -shift), (-shift, None)):
            for ws in ((0, -ww), (-ww, -shift), (-shift, None)):
                img[:, hs[0]:hs[1], ws[0]:ws[1], :] = cnt
                cnt += 1
        mw = img.view(1, hp // wh, wh, wp // ww, ww, 1).permute(0, 1, 3, 2, 4, 5).reshape(-1, n)
        mask = mw.unsqueeze(1) - mw.unsqueeze(2)
        mask = mask.masked_fill(mask != 0, -100.0).masked_fill(mask == 0, 0.0)
        nw = mask.shape[0]
        attn = attn.view(-1, nw, nh, n, n) + mask.unsqueeze(1).unsqueeze(0)
        attn = attn.view(-1, nh, n, n)
    out = (attn.softmax(-1) @ v).transpose(1, 2).reshape(-1, n, c)
    out = F.linear(out, m.proj.weight, m.proj.bias)
    out = out.view(b, hp // wh, wp // ww, wh, ww, c).permute(0, 1, 3, 2, 4, 5).reshape(b, hp, wp, c)[:, :h, :w]
    if shift:
        out = torch.roll(out, shifts=(shift, shift), dims=(1, 2))
    return out


def timm_dynamic_logits(inp, args):
    """timm >= 1.0's SwinTransformer built at args["image_size"] with strict_img_size=False (dynamic
    mask) on the seeded torchvision V1 model's weights: patch conv (H, W multiples of the patch),
    blocks whose shift is fixed by their stage's map at image_size (0 where it is no larger than the
    window), _timm_attn, PatchMerging padding odd sides; eval logits on "x"."""
    model = _build(args)
    model.eval()
    x, p, w = inp["x"], args["patch"], args["window"]
    assert x.shape[2] % p == 0 and x.shape[3] % p == 0
    with torch.no_grad():
        h = model.features[0](x)
        for i in range(len(args["depths"])):
            if i > 0:
                h = model.features[2 * i](h)
            built = (args["image_size"] // p) >> i
            for j, blk in enumerate(model.features[2 * i + 1]):
                shift = w // 2 if (j % 2 == 1 and built > w) else 0
                h = h + _timm_attn(blk.attn, blk.norm1(h), shift)
                h = h + blk.mlp(blk.norm2(h))
        h = model.norm(h).permute(0, 3, 1, 2)
        out = model.head(torch.flatten(model.avgpool(h), 1))
    return {"logits": out.double()}
