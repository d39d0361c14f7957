"""PyTorch peer of bench/vit_train_bench.cpp --model swin_fmnist: the Fashion-MNIST Swin (attn's
swin_fmnist, src/models/swin.cpp: patch 2, window 7, C 48, depths 2 / 6, heads 3 / 6, MLP ratio 4,
drop-path 0.1 linear over the blocks, one input channel, 10 classes) built from torchvision 0.14's
SwinTransformer, whose layout attn's Swin follows name for name; the training step (batch 128, AdamW,
label smoothing 0.1) timed as train_step.py times it."""
import peer_env  # noqa: F401  (before torch: OpenBLAS's kernels for this CPU, see peer_env.py)
import torch
import torch.nn as nn
from torchvision.models.swin_transformer import SwinTransformer

import train_step

MODELS = {"swin_fmnist": dict(embed_dim=48, depths=[2, 6], num_heads=[3, 6])}


def swin(embed_dim, depths, num_heads):
    m = SwinTransformer(patch_size=[2, 2], embed_dim=embed_dim, depths=depths, num_heads=num_heads,
                        window_size=[7, 7], stochastic_depth_prob=0.1, num_classes=10)
    m.features[0][0] = nn.Conv2d(1, embed_dim, kernel_size=2, stride=2)   # one channel (torchvision's is RGB)
    return m


def main():
    a = train_step.parse_args(MODELS, "swin_fmnist")
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    train_step.run(swin(**MODELS[a.model]), a)


if __name__ == "__main__":
    main()
