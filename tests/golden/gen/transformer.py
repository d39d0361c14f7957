"""PyTorch references for attn's Transformer (models/transformer.h): torch.nn.Transformer itself.

transformer(inputs, args): builds nn.Transformer(batch_first=True) with args' sizes, loads every
parameter from inputs "p.<name>" (torch's own names), runs it on "src" (B, S, E) and "tgt" (B, T, E)
with the optional u8 padding masks "src_kpm" (B, S), "tgt_kpm" (B, T), "mem_kpm" (B, S) and, with
args["causal"], the (T, T) causal mask. With "g" in inputs it runs in train mode (dropout must be 0)
and returns the gradients of sum(out * g) as "grad.src", "grad.tgt" and "grad.p.<name>"; otherwise
eval mode under no_grad (1.13's encoder fast path then zeroes padded encoder outputs, which the
memory padding mask hides).
"""
import torch
import torch.nn as nn


def transformer(inp, args):
    torch.manual_seed(0)
    m = nn.Transformer(d_model=args["d_model"], nhead=args["nhead"], num_encoder_layers=args["num_encoder_layers"],
                       num_decoder_layers=args["num_decoder_layers"], dim_feedforward=args["dim_feedforward"],
                       dropout=0.0, activation=args["activation"], layer_norm_eps=args.get("layer_norm_eps", 1e-5),
                       batch_first=True, norm_first=args["norm_first"])
    sd = {k[2:]: v for k, v in inp.items() if k.startswith("p.")}
    m.load_state_dict(sd, strict=True)
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
        with torch.no_grad():
            return {"out": m(inp["src"], inp["tgt"], **masks)}
    m.train()
    src = inp["src"].clone().requires_grad_(True)
    tgt = inp["tgt"].clone().requires_grad_(True)
    out = m(src, tgt, **masks)
    (out * inp["g"]).sum().backward()
    res = {"out": out.detach(), "grad.src": src.grad, "grad.tgt": tgt.grad}
    for n, p in m.named_parameters():
        res["grad.p." + n] = p.grad
    return res
