"""PyTorch references for DeiT's DistillationLoss (facebookresearch/deit losses.py), written out:

    base = CE(cls, y)   (label smoothing for class indices; soft-target CE for probabilities)
    soft:  distill = F.kl_div(F.log_softmax(dist / T, 1), F.log_softmax(teacher / T, 1),
                              reduction='sum', log_target=True) * T * T / dist.numel()
    hard:  distill = F.cross_entropy(dist, teacher.argmax(1))
    total = base * (1 - alpha) + distill * alpha        (none: total = base)

Inputs: "cls", "dist" (student heads), "teacher", "y" (i64 labels or float probabilities).
Returns total, base, distill and the gradients of total w.r.t. both heads.
"""
import torch
import torch.nn.functional as F


def _soft_target_ce(x, target):   # timm's SoftTargetCrossEntropy (the Mixup criterion)
    return torch.sum(-target * F.log_softmax(x, dim=-1), dim=-1).mean()


def loss(inp, args):
    cls = inp["cls"].clone().requires_grad_(True)
    dist = inp["dist"].clone().requires_grad_(True)
    teacher, y = inp["teacher"], inp["y"]
    kind, alpha, tau = args["type"], args["alpha"], args["tau"]
    if y.is_floating_point():
        base = _soft_target_ce(cls, y)
    else:
        base = F.cross_entropy(cls, y, label_smoothing=args["label_smoothing"])
    if kind == "none":
        total, distill = base, torch.zeros(())
    else:
        if kind == "soft":
            T = tau
            distill = F.kl_div(F.log_softmax(dist / T, dim=1), F.log_softmax(teacher / T, dim=1),
                               reduction="sum", log_target=True) * (T * T) / dist.numel()
        else:
            distill = F.cross_entropy(dist, teacher.argmax(dim=1))
        total = base * (1 - alpha) + distill * alpha
    total.backward()
    zeros = torch.zeros_like(dist)
    return {"total": total.detach(), "base": base.detach(), "distill": distill.detach(), "dcls": cls.grad,
            "ddist": dist.grad if dist.grad is not None else zeros}
