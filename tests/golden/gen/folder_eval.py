"""References for scoring a classifier on a folder of labelled images (tests/train/folder_eval_test.cpp).

reference: a small torchvision VisionTransformer with 1,000 classes and seeded random weights
(pretrained._randomize, written in torchvision's layout), and n seeded images encoded as PNG or JPEG
(RGB, grayscale and RGBA, sizes 30-70), returned as bytes "img_K". Each is decoded by PIL,
converted to RGB and run through torchvision's own eval transforms
    Resize(resize, bilinear|bicubic), CenterCrop(crop), ToTensor(), Normalize(mean, std)
and the model. Its label ("labels") is chosen so that the scores are not all zero: image K with
K % 3 == 0 gets the model's top-1 class (when the top-2 margin is clear), K % 3 == 1 its third
class (in the top 5, not the top 1), otherwise a random class. "top1" / "top5" count the images
whose label is the argmax / among torch.topk(5), "loss" is F.cross_entropy's mean in f64 — what
timm's validate.py accumulates.
"""
import io

import numpy as np
import torch
import torch.nn.functional as F
import torchvision.transforms as T
from PIL import Image
from torchvision.models.vision_transformer import VisionTransformer

import pretrained

_FILTERS = {"bilinear": T.InterpolationMode.BILINEAR, "bicubic": T.InterpolationMode.BICUBIC}


def _image(rng, k):
    h, w = int(rng.integers(30, 71)), int(rng.integers(30, 71))
    mode = ["RGB", "L", "RGBA"][k % 3] if k % 4 else "RGB"
    ch = {"RGB": 3, "L": 1, "RGBA": 4}[mode]
    # smooth-ish content (a gradient plus noise) so resizing matters
    yy, xx = np.mgrid[0:h, 0:w]
    base = (xx * int(rng.integers(1, 5)) + yy * int(rng.integers(1, 5))) % 256
    px = np.clip(base[..., None] + rng.integers(-40, 41, size=(h, w, ch)), 0, 255).astype(np.uint8)
    im = Image.fromarray(px[..., 0] if ch == 1 else px, mode)
    buf = io.BytesIO()
    if k % 2 == 0 and mode != "RGBA":
        im.save(buf, format="JPEG", quality=90)
        ext = "jpg"
    else:
        im.save(buf, format="PNG")
        ext = "png"
    return buf.getvalue(), ext


def reference(inp, args):
    torch.manual_seed(args["seed"])
    model = VisionTransformer(image_size=args["crop"], patch_size=8, num_layers=2, num_heads=2, hidden_dim=32,
                              mlp_dim=64, num_classes=1000)
    pretrained._randomize(model)
    model.eval()
    tf = T.Compose([T.Resize(args["resize"], interpolation=_FILTERS[args["interpolation"]]),
                    T.CenterCrop(args["crop"]), T.ToTensor(), T.Normalize(args["mean"], args["std"])])
    rng = np.random.default_rng(args["seed"])
    out, xs, exts = {}, [], []
    for k in range(args["n"]):
        data, ext = _image(rng, k)
        out["img_%d" % k] = pretrained._bytes(data)
        exts.append(1 if ext == "jpg" else 0)
        xs.append(tf(Image.open(io.BytesIO(data)).convert("RGB")))
    with torch.no_grad():
        logits = model(torch.stack(xs)).double()
    labels = []
    for k in range(args["n"]):
        order = torch.argsort(logits[k], descending=True)
        s = logits[k][order]
        if k % 3 == 0 and s[0] - s[1] > 1e-3:
            labels.append(int(order[0]))
        elif k % 3 == 1 and s[1] - s[2] > 1e-3 and s[2] - s[3] > 1e-3:
            labels.append(int(order[2]))
        else:
            labels.append(int(rng.integers(0, 1000)))
    y = torch.tensor(labels)
    top5 = logits.topk(5, dim=1).indices
    out["file"] = pretrained._bytes(pretrained.pth_to_safetensors.serialize(model.state_dict()))
    out["labels"] = y
    out["jpeg"] = torch.tensor(exts)
    out["top1"] = torch.tensor([int((top5[:, 0] == y).sum())])
    out["top5"] = torch.tensor([int((top5 == y[:, None]).any(1).sum())])
    out["loss"] = F.cross_entropy(logits, y).reshape(1)
    out["logits"] = logits
    return out
