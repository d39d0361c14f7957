"""PyTorch peer of bench/vit_train_bench.cpp: the vit_fmnist training step (batch 128, AdamW, label
smoothing 0.1, drop-path 0.1 linear in depth) and inference at batch 256, timm's architecture; the
timing is train_step.py's."""
import peer_env  # noqa: F401  (before torch: OpenBLAS's kernels for this CPU, see peer_env.py)
import torch
import torch.nn as nn

import train_step


class DropPath(nn.Module):
    def __init__(self, p):
        super().__init__()
        self.p = p

    def forward(self, x):
        if self.p == 0.0 or not self.training:
            return x
        keep = 1.0 - self.p
        mask = x.new_empty((x.shape[0],) + (1,) * (x.ndim - 1)).bernoulli_(keep)
        return x * mask / keep


class Attention(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        B, N, C = x.shape
        q, k, v = self.qkv(x).reshape(B, N, 3, self.heads, C // self.heads).permute(2, 0, 3, 1, 4).unbind(0)
        att = ((q @ k.transpose(-2, -1)) * (C // self.heads) ** -0.5).softmax(dim=-1)
        return self.proj((att @ v).transpose(1, 2).reshape(B, N, C))


class Block(nn.Module):
    def __init__(self, dim, heads, hidden, dp):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=1e-6)
        self.attn = Attention(dim, heads)
        self.drop_path = DropPath(dp)
        self.norm2 = nn.LayerNorm(dim, eps=1e-6)
        self.mlp = nn.Sequential(nn.Linear(dim, hidden), nn.GELU(), nn.Linear(hidden, dim))

    def forward(self, x):
        x = x + self.drop_path(self.attn(self.norm1(x)))
        return x + self.drop_path(self.mlp(self.norm2(x)))


class ViT(nn.Module):
    def __init__(self, image=28, patch=4, in_ch=1, classes=10, dim=192, depth=6, heads=3, mlp=768, drop_path=0.1):
        super().__init__()
        n = (image // patch) ** 2
        self.proj = nn.Conv2d(in_ch, dim, patch, patch)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos_embed = nn.Parameter(torch.randn(1, n + 1, dim) * 0.02)
        self.blocks = nn.ModuleList([Block(dim, heads, mlp, drop_path * i / (depth - 1)) for i in range(depth)])
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.head = nn.Linear(dim, classes)
        # timm's ViT init, as attn's models/vit: Linear weights N(0, .02) truncated to [-2, 2], biases
        # zero; pos_embed the same; cls_token N(0, 1e-6); the patch conv and LayerNorms keep PyTorch's.
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.trunc_normal_(m.weight, std=0.02)
                nn.init.zeros_(m.bias)
        nn.init.trunc_normal_(self.pos_embed, std=0.02)
        nn.init.normal_(self.cls_token, std=1e-6)

    def forward(self, x):
        x = self.proj(x).flatten(2).transpose(1, 2)
        x = torch.cat((self.cls_token.expand(x.shape[0], -1, -1), x), dim=1) + self.pos_embed
        for b in self.blocks:
            x = b(x)
        return self.head(self.norm(x)[:, 0])


# attn's Fashion-MNIST ViTs (src/models/vit_variants.cpp): patch 4, depth 6, drop-path 0.1, and these sizes.
MODELS = {"vit_fmnist": dict(dim=192, heads=3, mlp=768), "vit_fmnist_small": dict(dim=128, heads=4, mlp=256)}


def main():
    a = train_step.parse_args(MODELS, "vit_fmnist")
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    train_step.run(ViT(**MODELS[a.model]), a)


if __name__ == "__main__":
    main()
