"""Swin V2 as timm (>= 0.9, swin_transformer_v2.py) and transformers (modeling_swinv2.py) write it, with
their module and parameter names, for tests/models/swin_v2_layouts_test.cpp (neither package is
installed here: these trees are written from their sources, quirks included):

timm: SwinTransformerV2 - patch_embed.{proj, norm} (NHWC), layers.i = SwinTransformerV2Stage with the
  merging at its START (layers.i.downsample, i >= 1: reduction, then norm), blocks.j =
  SwinTransformerV2Block {attn.{qkv (no bias), q_bias, v_bias (the key's bias a zero buffer),
  logit_scale, cpb_mlp.{0, 2}, proj}, norm1, mlp.{fc1, fc2}, norm2} (post-norm), norm, head.fc.
  Each block's window and shift come from its stage's map at the size it is built for
  (_calc_window_shift: window min(map, window), no shift where map <= window); relative_coords_table
  divided by pretrained_window_size - 1 when that is set; relative_coords_table,
  relative_position_index and attn_mask are non-persistent buffers. strict_img_size (default): the
  input must be the built size, the shift mask static; otherwise (dynamic_mask) roll, pad, mask built
  for the padded map.
transformers: Swinv2ForImageClassification - swinv2.embeddings.{patch_embeddings.projection (the image
  padded to whole patches), norm}, swinv2.encoder.layers.i.{blocks.j = Swinv2Layer, downsample (at the
  END of stage i)}, swinv2.layernorm, classifier. Swinv2Layer: window and shift fixed when built from
  config.image_size (as timm's), pad then roll, the shift mask built for the padded map and ADDED TWICE
  by Swinv2SelfAttention (so -200); attention.self.{query, key (bias=False), value, logit_scale,
  continuous_position_bias_mlp}, attention.output.dense, layernorm_before (after the attention),
  intermediate.dense, output.dense, layernorm_after.

Weights: seeded, every parameter drawn (Linear / conv weights trunc_normal .02, the classifier's N(0, .5)
so that the logits are of order 1; LayerNorm weights
1 + N(0, .1), biases N(0, .05); logit_scale log 10 + N(0, .3) with head 0 above the clamp at log 100;
the position-bias MLP N(0, 1) / N(0, .5) / N(0, .1) so that its bias varies over the window).

args: seed, patch, embed, depths, heads, window, num_classes, image_size, pretrained (per stage, 0:
none); timm: run_size [H, W] (the size the reference is built for; default image_size), dynamic
(strict_img_size False); hf: store_buffers (write relative_coords_table and relative_position_index
as transformers < 4.3x did).
"""
import json
import math
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "tools"))
import pth_to_safetensors  # noqa: E402


def _bytes(data):
    return torch.frombuffer(bytearray(data), dtype=torch.uint8).clone()


def _coords_table(wh, ww, pretrained):
    """(1, 2wh-1, 2ww-1, 2) log-spaced offsets, as both write it (transformers skips the division for a
    window of 1; timm would divide by zero)."""
    h = torch.arange(-(wh - 1), wh, dtype=torch.float32)
    w = torch.arange(-(ww - 1), ww, dtype=torch.float32)
    t = torch.stack(torch.meshgrid(h, w, indexing="ij")).permute(1, 2, 0).contiguous().unsqueeze(0)
    if pretrained[0] > 0:
        t[:, :, :, 0] /= pretrained[0] - 1
        t[:, :, :, 1] /= pretrained[1] - 1
    elif wh > 1:
        t[:, :, :, 0] /= wh - 1
        t[:, :, :, 1] /= ww - 1
    t *= 8
    return torch.sign(t) * torch.log2(torch.abs(t) + 1.0) / math.log2(8)


def _position_index(wh, ww):
    coords = torch.stack(torch.meshgrid(torch.arange(wh), torch.arange(ww), indexing="ij")).flatten(1)
    rel = (coords[:, :, None] - coords[:, None, :]).permute(1, 2, 0).contiguous()
    rel[:, :, 0] += wh - 1
    rel[:, :, 1] += ww - 1
    rel[:, :, 0] *= 2 * ww - 1
    return rel.sum(-1)


def _cpb_mlp(heads):
    return nn.Sequential(nn.Linear(2, 512, bias=True), nn.ReLU(inplace=True), nn.Linear(512, heads, bias=False))


def _cosine_scores(q, k, logit_scale, cpb_mlp, table, index, n, heads):
    attn = F.normalize(q, dim=-1) @ F.normalize(k, dim=-1).transpose(-2, -1)
    attn = attn * torch.clamp(logit_scale, max=math.log(1.0 / 0.01)).exp()
    bias = cpb_mlp(table).view(-1, heads)[index.view(-1)].view(n, n, -1).permute(2, 0, 1).contiguous()
    return attn + 16 * torch.sigmoid(bias).unsqueeze(0)


def _partition(x, wh, ww):
    b, h, w, c = x.shape
    return x.view(b, h // wh, wh, w // ww, ww, c).permute(0, 1, 3, 2, 4, 5).reshape(-1, wh, ww, c)


def _reverse(win, wh, ww, h, w):
    c = win.shape[-1]
    return win.view(-1, h // wh, w // ww, wh, ww, c).permute(0, 1, 3, 2, 4, 5).reshape(-1, h, w, c)


def _shift_mask(h, w, wh, ww, sh, sw):
    img = torch.zeros((1, h, w, 1))
    cnt = 0
    for hs in ((0, -wh), (-wh, -sh), (-sh, None)):
        for ws in ((0, -ww), (-ww, -sw), (-sw, None)):
            img[:, hs[0]:hs[1], ws[0]:ws[1], :] = cnt
            cnt += 1
    mw = _partition(img, wh, ww).reshape(-1, wh * ww)
    m = mw.unsqueeze(1) - mw.unsqueeze(2)
    return m.masked_fill(m != 0, -100.0).masked_fill(m == 0, 0.0)


# ---- timm ----

class TimmWindowAttention(nn.Module):
    def __init__(self, dim, window, heads, pretrained):
        super().__init__()
        self.window_size, self.num_heads = window, heads
        self.logit_scale = nn.Parameter(torch.log(10 * torch.ones((heads, 1, 1))))
        self.cpb_mlp = _cpb_mlp(heads)
        self.qkv = nn.Linear(dim, dim * 3, bias=False)
        self.q_bias = nn.Parameter(torch.zeros(dim))
        self.register_buffer("k_bias", torch.zeros(dim), persistent=False)
        self.v_bias = nn.Parameter(torch.zeros(dim))
        self.proj = nn.Linear(dim, dim)
        self.register_buffer("relative_coords_table", _coords_table(*window, pretrained), persistent=False)
        self.register_buffer("relative_position_index", _position_index(*window), persistent=False)

    def forward(self, x, mask=None):
        b, n, c = x.shape
        qkv = F.linear(x, self.qkv.weight, torch.cat((self.q_bias, self.k_bias, self.v_bias)))
        q, k, v = qkv.reshape(b, n, 3, self.num_heads, -1).permute(2, 0, 3, 1, 4).unbind(0)
        attn = _cosine_scores(q, k, self.logit_scale, self.cpb_mlp, self.relative_coords_table,
                              self.relative_position_index, n, self.num_heads)
        if mask is not None:
            nw = mask.shape[0]
            attn = (attn.view(-1, nw, self.num_heads, n, n) + mask.unsqueeze(1).unsqueeze(0)).view(-1, self.num_heads, n, n)
        x = (attn.softmax(-1) @ v).transpose(1, 2).reshape(b, n, c)
        return self.proj(x)


class TimmMlp(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.fc1, self.act, self.fc2 = nn.Linear(dim, hidden), nn.GELU(), nn.Linear(hidden, dim)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


class TimmBlock(nn.Module):
    def __init__(self, dim, resolution, heads, window, shift, dynamic, pretrained):
        super().__init__()
        self.input_resolution, self.dynamic_mask = resolution, dynamic
        self.window_size = tuple(r if r <= w else w for r, w in zip(resolution, window))
        self.shift_size = tuple(0 if r <= w else s for r, w, s in zip(resolution, self.window_size, shift))
        self.attn = TimmWindowAttention(dim, self.window_size, heads, pretrained)
        self.norm1 = nn.LayerNorm(dim)
        self.mlp = TimmMlp(dim, 4 * dim)
        self.norm2 = nn.LayerNorm(dim)
        static = None
        if not dynamic and any(self.shift_size):
            static = _shift_mask(*resolution, *self.window_size, *self.shift_size)
        self.register_buffer("attn_mask", static, persistent=False)

    def _attn(self, x):
        b, h, w, c = x.shape
        (wh, ww), (sh, sw) = self.window_size, self.shift_size
        shifted = any(self.shift_size)
        if shifted:
            x = torch.roll(x, shifts=(-sh, -sw), dims=(1, 2))
        x = F.pad(x, (0, 0, 0, (ww - w % ww) % ww, 0, (wh - h % wh) % wh))
        hp, wp = x.shape[1], x.shape[2]
        win = _partition(x, wh, ww).view(-1, wh * ww, c)
        mask = _shift_mask(hp, wp, wh, ww, sh, sw) if (self.dynamic_mask and shifted) else self.attn_mask
        out = _reverse(self.attn(win, mask).view(-1, wh, ww, c), wh, ww, hp, wp)[:, :h, :w, :].contiguous()
        return torch.roll(out, shifts=(sh, sw), dims=(1, 2)) if shifted else out

    def forward(self, x):
        x = x + self.norm1(self._attn(x))
        return x + self.norm2(self.mlp(x))


class TimmPatchMerging(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.reduction = nn.Linear(4 * dim, 2 * dim, bias=False)
        self.norm = nn.LayerNorm(2 * dim)

    def forward(self, x):
        b, h, w, c = x.shape
        x = F.pad(x, (0, 0, 0, w % 2, 0, h % 2))
        _, h, w, _ = x.shape
        x = x.reshape(b, h // 2, 2, w // 2, 2, c).permute(0, 1, 3, 4, 2, 5).flatten(3)
        return self.norm(self.reduction(x))


class TimmStage(nn.Module):
    def __init__(self, dim, resolution, depth, heads, window, downsample, dynamic, pretrained):
        super().__init__()
        out_dim = 2 * dim if downsample else dim
        res = tuple(r // 2 for r in resolution) if downsample else resolution
        self.downsample = TimmPatchMerging(dim) if downsample else nn.Identity()
        shift = (window // 2, window // 2)
        self.blocks = nn.ModuleList([
            TimmBlock(out_dim, res, heads, (window, window), (0, 0) if i % 2 == 0 else shift, dynamic,
                      (pretrained, pretrained)) for i in range(depth)])

    def forward(self, x):
        x = self.downsample(x)
        for blk in self.blocks:
            x = blk(x)
        return x


class TimmPatchEmbed(nn.Module):
    def __init__(self, img_size, patch, in_chans, dim, strict):
        super().__init__()
        self.img_size, self.patch, self.strict = img_size, patch, strict
        self.proj = nn.Conv2d(in_chans, dim, kernel_size=patch, stride=patch)
        self.norm = nn.LayerNorm(dim)

    def forward(self, x):
        if self.strict:
            assert tuple(x.shape[2:]) == tuple(self.img_size), (x.shape, self.img_size)
        else:
            assert x.shape[2] % self.patch == 0 and x.shape[3] % self.patch == 0
        return self.norm(self.proj(x).permute(0, 2, 3, 1))


class TimmSwinV2(nn.Module):
    def __init__(self, a, img_size, strict=True):
        super().__init__()
        p, dim = a["patch"], a["embed"]
        self.patch_embed = TimmPatchEmbed(img_size, p, 3, dim, strict)
        grid = (img_size[0] // p, img_size[1] // p)
        layers, scale = [], 1
        pre = a.get("pretrained") or [0] * len(a["depths"])
        for i, (d, h) in enumerate(zip(a["depths"], a["heads"])):
            in_dim = dim * 2 ** max(i - 1, 0)
            layers.append(TimmStage(in_dim, (grid[0] // scale, grid[1] // scale), d, h, a["window"], i > 0,
                                    not strict, pre[i]))
            if i > 0:
                scale *= 2
        self.layers = nn.Sequential(*layers)
        nf = dim * 2 ** (len(a["depths"]) - 1)
        self.norm = nn.LayerNorm(nf)
        self.head = nn.Module()
        self.head.fc = nn.Linear(nf, a["num_classes"])

    def forward(self, x):
        x = self.norm(self.layers(self.patch_embed(x)))
        return self.head.fc(x.mean((1, 2)))


# ---- transformers ----

class HfSelfAttention(nn.Module):
    def __init__(self, dim, heads, window, pretrained, store_buffers):
        super().__init__()
        self.num_attention_heads, self.window_size = heads, (window, window)
        self.logit_scale = nn.Parameter(torch.log(10 * torch.ones((heads, 1, 1))))
        self.continuous_position_bias_mlp = _cpb_mlp(heads)
        self.register_buffer("relative_coords_table", _coords_table(window, window, (pretrained, pretrained)),
                             persistent=store_buffers)
        self.register_buffer("relative_position_index", _position_index(window, window), persistent=store_buffers)
        self.query = nn.Linear(dim, dim, bias=True)
        self.key = nn.Linear(dim, dim, bias=False)
        self.value = nn.Linear(dim, dim, bias=True)

    def forward(self, x, mask):
        b, n, c = x.shape
        nh = self.num_attention_heads

        def heads(t):
            return t.view(b, -1, nh, c // nh).transpose(1, 2)
        q, k, v = heads(self.query(x)), heads(self.key(x)), heads(self.value(x))
        scores = _cosine_scores(q, k, self.logit_scale, self.continuous_position_bias_mlp, self.relative_coords_table,
                                self.relative_position_index, n, nh)
        if mask is not None:
            ms = mask.shape[0]
            scores = scores.view(b // ms, ms, nh, n, n) + mask.unsqueeze(1).unsqueeze(0)
            scores = scores + mask.unsqueeze(1).unsqueeze(0)   # transformers adds it twice
            scores = scores.view(-1, nh, n, n)
        out = (scores.softmax(-1) @ v).permute(0, 2, 1, 3).contiguous()
        return out.view(b, n, c)


class HfAttention(nn.Module):
    def __init__(self, dim, heads, window, pretrained, store_buffers):
        super().__init__()
        self.self = HfSelfAttention(dim, heads, window, pretrained, store_buffers)
        self.output = nn.Module()
        self.output.dense = nn.Linear(dim, dim)

    def forward(self, x, mask):
        return self.output.dense(self.self(x, mask))


class HfLayer(nn.Module):
    def __init__(self, dim, resolution, heads, window, shift, pretrained, store_buffers):
        super().__init__()
        ws = [min(r, window) for r in resolution]
        ss = [0 if r <= w else shift for r, w in zip(resolution, ws)]
        self.window_size, self.shift_size = ws[0], ss[0]
        self.attention = HfAttention(dim, heads, self.window_size, pretrained, store_buffers)
        self.layernorm_before = nn.LayerNorm(dim)
        self.intermediate = nn.Module()
        self.intermediate.dense = nn.Linear(dim, 4 * dim)
        self.output = nn.Module()
        self.output.dense = nn.Linear(4 * dim, dim)
        self.layernorm_after = nn.LayerNorm(dim)

    def forward(self, x, dims):
        h, w = dims
        b, _, c = x.shape
        shortcut = x
        ws, s = self.window_size, self.shift_size
        x = F.pad(x.view(b, h, w, c), (0, 0, 0, (ws - w % ws) % ws, 0, (ws - h % ws) % ws))
        hp, wp = x.shape[1], x.shape[2]
        if s > 0:
            x = torch.roll(x, shifts=(-s, -s), dims=(1, 2))
        win = _partition(x, ws, ws).view(-1, ws * ws, c)
        mask = _shift_mask(hp, wp, ws, ws, s, s) if s > 0 else None
        out = _reverse(self.attention(win, mask).view(-1, ws, ws, c), ws, ws, hp, wp)
        if s > 0:
            out = torch.roll(out, shifts=(s, s), dims=(1, 2))
        out = out[:, :h, :w, :].contiguous().view(b, h * w, c)
        x = shortcut + self.layernorm_before(out)
        y = self.output.dense(F.gelu(self.intermediate.dense(x)))
        return x + self.layernorm_after(y)


class HfPatchMerging(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.reduction = nn.Linear(4 * dim, 2 * dim, bias=False)
        self.norm = nn.LayerNorm(2 * dim)

    def forward(self, x, dims):
        h, w = dims
        b, _, c = x.shape
        x = x.view(b, h, w, c)
        if h % 2 == 1 or w % 2 == 1:
            x = F.pad(x, (0, 0, 0, w % 2, 0, h % 2))
        x = torch.cat([x[:, 0::2, 0::2], x[:, 1::2, 0::2], x[:, 0::2, 1::2], x[:, 1::2, 1::2]], -1)
        return self.norm(self.reduction(x.view(b, -1, 4 * c)))


class HfStage(nn.Module):
    def __init__(self, dim, resolution, depth, heads, window, pretrained, last, store_buffers):
        super().__init__()
        self.blocks = nn.ModuleList([
            HfLayer(dim, resolution, heads, window, 0 if i % 2 == 0 else window // 2, pretrained, store_buffers)
            for i in range(depth)])
        self.downsample = None if last else HfPatchMerging(dim)

    def forward(self, x, dims):
        for blk in self.blocks:
            x = blk(x, dims)
        if self.downsample is None:
            return x, dims
        return self.downsample(x, dims), ((dims[0] + 1) // 2, (dims[1] + 1) // 2)


class HfSwinV2(nn.Module):
    """Swinv2ForImageClassification."""

    def __init__(self, a, store_buffers=False):
        super().__init__()
        p, dim, s = a["patch"], a["embed"], a["image_size"]
        self.patch = p
        self.swinv2 = nn.Module()
        emb = self.swinv2.embeddings = nn.Module()
        emb.patch_embeddings = nn.Module()
        emb.patch_embeddings.projection = nn.Conv2d(3, dim, kernel_size=p, stride=p)
        emb.norm = nn.LayerNorm(dim)
        self.swinv2.encoder = nn.Module()
        pre = a.get("pretrained") or [0] * len(a["depths"])
        n = len(a["depths"])
        self.swinv2.encoder.layers = nn.ModuleList([
            HfStage(dim * 2 ** i, ((s // p) // 2 ** i, (s // p) // 2 ** i), a["depths"][i], a["heads"][i],
                    a["window"], pre[i], i == n - 1, store_buffers) for i in range(n)])
        nf = dim * 2 ** (n - 1)
        self.swinv2.layernorm = nn.LayerNorm(nf)
        self.classifier = nn.Linear(nf, a["num_classes"])

    def forward(self, x):
        p = self.patch
        if x.shape[3] % p:
            x = F.pad(x, (0, p - x.shape[3] % p))
        if x.shape[2] % p:
            x = F.pad(x, (0, 0, 0, p - x.shape[2] % p))
        e = self.swinv2.embeddings
        h = e.patch_embeddings.projection(x)
        dims = (h.shape[2], h.shape[3])
        h = e.norm(h.flatten(2).transpose(1, 2))
        for layer in self.swinv2.encoder.layers:
            h, dims = layer(h, dims)
        h = self.swinv2.layernorm(h)
        return self.classifier(h.mean(1))


def hf_config(a):
    return {"model_type": "swinv2", "image_size": a["image_size"], "patch_size": a["patch"], "num_channels": 3,
            "embed_dim": a["embed"], "depths": a["depths"], "num_heads": a["heads"], "window_size": a["window"],
            "pretrained_window_sizes": a.get("pretrained") or [0] * len(a["depths"]), "mlp_ratio": 4.0,
            "qkv_bias": True, "hidden_act": "gelu", "layer_norm_eps": 1e-5, "use_absolute_embeddings": False,
            "drop_path_rate": 0.1, "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0,
            "encoder_stride": 32, "architectures": ["Swinv2ForImageClassification"],
            "id2label": {str(i): "class_%d" % i for i in range(a["num_classes"])},
            "label2id": {"class_%d" % i: i for i in range(a["num_classes"])}}


# ---- weights and references ----

def _randomize(model, seed):
    torch.manual_seed(seed)
    with torch.no_grad():
        for n, p in model.named_parameters():
            if n.endswith("logit_scale"):
                p.copy_(math.log(10.0) + 0.3 * torch.randn_like(p))
                p[0] = math.log(100.0) + 0.5   # clamped: no gradient
            elif ("cpb_mlp" in n or "continuous_position_bias_mlp" in n):
                std = {"0.weight": 1.0, "0.bias": 0.5, "2.weight": 0.1}[n.split("mlp.")[-1]]
                p.normal_(0.0, std)
            elif n in ("head.fc.weight", "classifier.weight"):
                p.normal_(0.0, 0.5)   # logits of order 1
            elif p.dim() == 1 and n.endswith("weight"):
                p.copy_(1.0 + 0.1 * torch.randn_like(p))
            elif p.dim() == 1:
                p.normal_(0.0, 0.05)
            else:
                nn.init.trunc_normal_(p, std=0.02)


def _file(model):
    return _bytes(pth_to_safetensors.serialize({k: v.contiguous() for k, v in model.state_dict().items()}))


def _old_layout(model):
    """The state dict as the original Microsoft release / timm < 0.9 stored it (what timm's
    checkpoint_filter_fn undoes): the merging at the END of stage i (layers.i.downsample, i from 0), the
    classifier "head", relative_coords_table, relative_position_index and attn_mask stored."""
    import re
    out = {}
    for k, v in model.state_dict().items():
        k = re.sub(r"layers\.(\d+)\.downsample", lambda m: "layers.%d.downsample" % (int(m.group(1)) - 1), k)
        out[k.replace("head.fc.", "head.")] = v
    for name, m in model.named_modules():
        if isinstance(m, TimmBlock):
            out[name + ".attn.relative_coords_table"] = m.attn.relative_coords_table
            out[name + ".attn.relative_position_index"] = m.attn.relative_position_index
            if m.attn_mask is not None:
                out[name + ".attn_mask"] = m.attn_mask
    return _bytes(pth_to_safetensors.serialize({k: v.contiguous() for k, v in out.items()}))


def timm_v2(inp, args):
    """The seeded timm tree built at image_size: its state dict ("file"; in the old layout when
    args["old"]); with "x", eval logits of the tree built for args["run_size"] (default image_size;
    strict unless args["dynamic"]) given the same weights."""
    s = args["image_size"]
    dynamic = args.get("dynamic", False)
    model = TimmSwinV2(args, (s, s), strict=not dynamic)
    _randomize(model, args["seed"])
    out = {"file": _old_layout(model) if args.get("old") else _file(model)}
    if "x" in inp:
        run = tuple(args.get("run_size", [s, s])) if not dynamic else (s, s)
        ref = TimmSwinV2(args, run, strict=not dynamic)
        ref.load_state_dict(model.state_dict(), strict=True)
        ref.eval()
        with torch.no_grad():
            out["logits"] = ref(inp["x"]).double()
    return out


def hf_v2(inp, args):
    """The seeded transformers tree: its state dict ("file"; with relative_coords_table and
    relative_position_index when args["store_buffers"]), config.json ("config"); with "x", eval logits."""
    model = HfSwinV2(args, store_buffers=args.get("store_buffers", False))
    _randomize(model, args["seed"])
    out = {"file": _file(model), "config": _bytes(json.dumps(hf_config(args)).encode())}
    if "x" in inp:
        model.eval()
        with torch.no_grad():
            out["logits"] = model(inp["x"]).double()
    return out
