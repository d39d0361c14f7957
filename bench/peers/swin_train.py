"""PyTorch peer of bench/vit_train_bench.cpp --model swin_fmnist: the Fashion-MNIST Swin (attn's
swin_fmnist, src/models/swin.cpp: patch 2, window 7, C 48, depths 2 / 6, heads 3 / 6, MLP ratio 4,
drop-path 0.1 linear over the blocks, one input channel, 10 classes) built from torchvision 0.14's
SwinTransformer, whose layout attn's Swin follows name for name; the training step (batch 128, AdamW,
label smoothing 0.1) timed as train_step.py times it. --precision bf16: the step's forward and loss under
torch.autocast("cpu", dtype=torch.bfloat16). torch 1.13's CPU layer_norm refuses a bf16 input with f32
weights ("expected scalar type BFloat16 but found Float"), and torchvision's Swin feeds its LayerNorms the
bf16 outputs of the patch convolution and the patch merging's Linear under autocast; so under bf16 every
LayerNorm's input is cast to f32 first (a forward pre-hook); the ViT peer's LayerNorms take f32 residual
sums under autocast and need none.

    /usr/bin/python3 bench/peers/swin_train.py [--threads 2] [--steps 10] [--infer-reps 10]
        [--infer-chunks 0] [--precision f32|bf16]"""
import peer_env  # noqa: F401  (before torch: OpenBLAS's kernels for this CPU, see peer_env.py)
import torch
import torch.nn as nn
from torchvision.models.swin_transformer import SwinTransformer

import train_step

MODELS = {"swin_fmnist": dict(embed_dim=48, depths=[2, 6], num_heads=[3, 6])}


def swin(embed_dim, depths, num_heads, f32_norm_inputs=False):
    m = SwinTransformer(patch_size=[2, 2], embed_dim=embed_dim, depths=depths, num_heads=num_heads,
                        window_size=[7, 7], stochastic_depth_prob=0.1, num_classes=10)
    m.features[0][0] = nn.Conv2d(1, embed_dim, kernel_size=2, stride=2)   # one channel (torchvision's is RGB)
    if f32_norm_inputs:
        for norm in (mod for mod in m.modules() if isinstance(mod, nn.LayerNorm)):
            norm.register_forward_pre_hook(lambda mod, inputs: tuple(t.float() for t in inputs))
    return m


def main():
    a = train_step.parse_args(MODELS, "swin_fmnist")
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    train_step.run(swin(**MODELS[a.model], f32_norm_inputs=a.precision == "bf16"), a)


if __name__ == "__main__":
    main()
