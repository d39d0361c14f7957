"""llm.c-style training parity references: the same model and weights as the C++ side, 10 AdamW steps.

Inputs: "p.<name>" initial parameters, "x" batch input, "y" labels. Returns "logits1", "losses" (10),
"g.<name>" gradients at step 1 and "p10.<name>" parameters after step 10.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Mlp(nn.Module):
    def __init__(self, sizes):
        super().__init__()
        self.fc1 = nn.Linear(sizes[0], sizes[1])
        self.fc2 = nn.Linear(sizes[1], sizes[2])
        self.head = nn.Linear(sizes[2], sizes[3])

    def forward(self, x):
        x = x.flatten(1)
        return self.head(F.relu(self.fc2(F.relu(self.fc1(x)))))


from timm_layers import Block as _TimmBlock  # noqa: E402  (the same blocks the ViT references use)


def Block(dim, heads):
    return _TimmBlock(dim, heads, 4 * dim, eps=1e-6)


class Encoder(nn.Module):
    def __init__(self, vocab, T, dim, heads, depth, classes):
        super().__init__()
        self.tok_embed = nn.Embedding(vocab, dim)
        self.pos_embed = nn.Parameter(torch.zeros(1, T, dim))
        self.blocks = nn.ModuleList([Block(dim, heads) for _ in range(depth)])
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.head = nn.Linear(dim, classes)

    def forward(self, x):
        h = self.tok_embed(x) + self.pos_embed
        for b in self.blocks:
            h = b(h)
        return self.head(self.norm(h).mean(dim=1))


def _train(model, inp, args):
    sd = {k[2:]: v for k, v in inp.items() if k.startswith("p.")}
    model.load_state_dict(sd, strict=True)
    wd = args["weight_decay"]
    no_decay_names = ("cls_token", "dist_token", "pos_embed", "position_embedding", "relative_position_bias_table")
    decay, no_decay = [], []
    for n, p in model.named_parameters():
        (no_decay if p.ndim <= 1 or any(s in n for s in no_decay_names) else decay).append(p)
    opt = torch.optim.AdamW([{"params": no_decay, "weight_decay": 0.0}, {"params": decay, "weight_decay": wd}],
                            lr=args["lr"])
    out, losses = {}, []
    for step in range(args["steps"]):
        logits = model(inp["x"])
        loss = F.cross_entropy(logits, inp["y"], label_smoothing=args["label_smoothing"])
        opt.zero_grad()
        loss.backward()
        if step == 0:
            out["logits1"] = logits.detach()
            for n, p in model.named_parameters():
                out["g." + n] = p.grad.detach().clone()
        opt.step()
        losses.append(loss.item())
    out["losses"] = torch.tensor(losses, dtype=torch.float64)
    for n, p in model.named_parameters():
        out["p10." + n] = p.detach()
    return out


def mlp(inp, args):
    return _train(Mlp(args["sizes"]), inp, args)


def encoder(inp, args):
    m = Encoder(args["vocab"], args["T"], args["dim"], args["heads"], args["depth"], args["classes"])
    return _train(m, inp, args)
