"""References for inspecting a ViT (tests/train/inspect_test.cpp).

cosine: F.cosine_similarity of every pair of rows of "emb" (N, D), in f64: (N, N).
attention_distance: the mean attention distance of the ViT paper's figure 7 as the published probing
code computes it, in numpy: the patch-to-patch block of each attention map (prefix tokens dropped, rows
not renormalised), weighted by the pixel distance between the patch centres (patch size x the grid
distance), summed over keys, averaged over the query patches and the images: (L, NH).
"""
import numpy as np
import torch
import torch.nn.functional as F


def cosine(inp, args):
    e = inp["emb"].double()
    return {"out": F.cosine_similarity(e[:, None, :], e[None, :, :], dim=-1)}


def attention_distance(inp, args):
    maps = inp["maps"].double().numpy()
    p, g, patch = args["num_prefix"], args["grid"], args["patch_size"]
    coords = np.array([(i // g, i % g) for i in range(g * g)], dtype=np.float64)
    dist = patch * np.linalg.norm(coords[:, None, :] - coords[None, :, :], axis=-1)
    w = maps[..., p:, p:]
    per_query = (w * dist).sum(-1)            # (L, B, NH, n)
    return {"out": torch.from_numpy(per_query.mean(axis=(1, 3)))}
