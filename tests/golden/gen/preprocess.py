"""References for attn's eval preprocessing (tests/data/preprocess_test.cpp).

eval_transform: the PNG bytes the C++ test wrote are opened by PIL and converted to RGB, then run through
torchvision 0.14's own transforms on the PIL image, as torchvision's weights and timm's
transforms_imagenet_eval compose them:
    Resize(resize, interpolation)   (an int: the shorter side; [resize, resize] when args["squash"])
    CenterCrop(crop), ToTensor(), Normalize(mean, std)
imagenet_names: torchvision's ImageNet class names (the weights' meta), "\n"-joined, as u8 bytes.
"""
import io

import numpy as np
import torch
import torchvision.transforms as T
from PIL import Image
from torchvision.models._meta import _IMAGENET_CATEGORIES

_FILTERS = {"nearest": T.InterpolationMode.NEAREST, "bilinear": T.InterpolationMode.BILINEAR,
            "bicubic": T.InterpolationMode.BICUBIC}


def eval_transform(inp, args):
    data = bytes(inp["png"].numpy().astype(np.uint8))
    im = Image.open(io.BytesIO(data)).convert("RGB")
    size = [args["resize"], args["resize"]] if args.get("squash") else args["resize"]
    tf = T.Compose([T.Resize(size, interpolation=_FILTERS[args["interpolation"]]), T.CenterCrop(args["crop"]),
                    T.ToTensor(), T.Normalize(args["mean"], args["std"])])
    return {"out": tf(im)}


def imagenet_names(inp, args):
    data = "\n".join(_IMAGENET_CATEGORIES).encode("utf-8")
    return {"names": torch.frombuffer(bytearray(data), dtype=torch.uint8).clone()}
