"""PyTorch references for attn's Transformer (models/transformer.h): torch.nn.Transformer itself.

transformer(inputs, args): builds nn.Transformer(batch_first=True) with args' sizes, loads every
parameter from inputs "p.<name>" (torch's own names), runs it on "src" (B, S, E) and "tgt" (B, T, E)
with the optional u8 padding masks "src_kpm" (B, S), "tgt_kpm" (B, T), "mem_kpm" (B, S) and, with
args["causal"], the (T, T) causal mask. With "g" in inputs it runs in train mode (dropout must be 0)
and returns the gradients of sum(out * g) as "grad.src", "grad.tgt" and "grad.p.<name>"; otherwise
eval mode under no_grad (1.13's encoder fast path then zeroes padded encoder outputs, which the
memory padding mask hides).

With args["batch_norm"], every LayerNorm (the layers' norm1..3 and both final norms) is replaced by a
BatchNorm1d over the tokens (B, L, E) -> (B·L, E), padding included, eps layer_norm_eps: attn's
norm ablation. Its buffers come from "p.<name>.running_mean" etc. when given; the outputs then add
"buf.<name>" (the running statistics after the call). Eval mode then runs with grad enabled on the
inputs, which keeps torch's encoder fast path (written for LayerNorm) out.
"""
import torch
import torch.nn as nn


class TokenBatchNorm(nn.Module):
    """BatchNorm1d over the channels of (B, L, E) tokens."""

    def __init__(self, dim, eps):
        super().__init__()
        self.bn = nn.BatchNorm1d(dim, eps=eps)
        self.eps = eps

    @property
    def weight(self):   # read (never used) by the encoder's fast-path checks
        return self.bn.weight

    @property
    def bias(self):
        return self.bn.bias

    def forward(self, x):
        return self.bn(x.reshape(-1, x.shape[-1])).reshape(x.shape)


def use_batch_norm(m, eps):
    for mod in list(m.modules()):
        for name, child in list(mod.named_children()):
            if isinstance(child, nn.LayerNorm):
                setattr(mod, name, TokenBatchNorm(child.normalized_shape[0], eps))


def transformer(inp, args):
    torch.manual_seed(0)
    m = nn.Transformer(d_model=args["d_model"], nhead=args["nhead"], num_encoder_layers=args["num_encoder_layers"],
                       num_decoder_layers=args["num_decoder_layers"], dim_feedforward=args["dim_feedforward"],
                       dropout=0.0, activation=args["activation"], layer_norm_eps=args.get("layer_norm_eps", 1e-5),
                       batch_first=True, norm_first=args["norm_first"])
    bn = args.get("batch_norm", False)
    if bn:
        use_batch_norm(m, args.get("layer_norm_eps", 1e-5))
    # attn's "norm1.weight" is the BatchNorm's "norm1.bn.weight" here
    key = (lambda k: k.replace("norm.", "norm.bn.").replace("norm1.", "norm1.bn.").replace("norm2.", "norm2.bn.")
           .replace("norm3.", "norm3.bn.")) if bn else (lambda k: k)
    sd = {key(k[2:]): v for k, v in inp.items() if k.startswith("p.")}
    m.load_state_dict(sd, strict=True)

    def buffers(res):
        if bn:
            for n, b in m.named_buffers():
                res["buf." + n.replace(".bn.", ".")] = b.detach().clone()
        return res

    masks = {}
    for key, name in (("src_kpm", "src_key_padding_mask"), ("tgt_kpm", "tgt_key_padding_mask"),
                      ("mem_kpm", "memory_key_padding_mask")):
        if key in inp:
            masks[name] = inp[key].bool()
    T = inp["tgt"].shape[1]
    if args.get("causal", False):
        masks["tgt_mask"] = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
    if "g" not in inp:
        m.eval()
        if bn:
            return buffers({"out": m(inp["src"].clone().requires_grad_(True), inp["tgt"], **masks).detach()})
        with torch.no_grad():
            return {"out": m(inp["src"], inp["tgt"], **masks)}
    m.train()
    src = inp["src"].clone().requires_grad_(True)
    tgt = inp["tgt"].clone().requires_grad_(True)
    out = m(src, tgt, **masks)
    (out * inp["g"]).sum().backward()
    res = {"out": out.detach(), "grad.src": src.grad, "grad.tgt": tgt.grad}
    for n, p in m.named_parameters():
        res["grad.p." + n.replace(".bn.", ".")] = p.grad
    return buffers(res)
