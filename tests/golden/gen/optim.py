"""PyTorch references for attn::optim: torch.optim updates, clip_grad_norm_, LR schedules."""
import math

import torch


def _make(name, groups, kw):
    if name == "sgd":
        return torch.optim.SGD(groups, lr=kw["lr"], momentum=kw["momentum"], dampening=kw["dampening"],
                               nesterov=bool(kw["nesterov"]), weight_decay=kw["weight_decay"])
    cls = {"adam": torch.optim.Adam, "adamw": torch.optim.AdamW}[name]
    return cls(groups, lr=kw["lr"], betas=(kw["beta1"], kw["beta2"]), eps=kw["eps"],
               weight_decay=kw["weight_decay"], amsgrad=bool(kw["amsgrad"]))


def _groups(params, spec):
    out = []
    for g in spec:
        d = {k: v for k, v in g.items() if k != "params"}
        d["params"] = [params[i] for i in g["params"]]
        out.append(d)
    return out


def run(inp, args):
    """`steps` updates of params p.<i> with given grads g.<i>[step] (skipped where listed)."""
    n, steps = args["n"], args["steps"]
    params = [inp[f"p.{i}"].clone().requires_grad_(True) for i in range(n)]
    opt = _make(args["opt"], _groups(params, args["groups"]), args["kw"])
    skip = {(s, i) for s, i in args.get("skip", [])}
    for s in range(steps):
        for i, p in enumerate(params):
            p.grad = None if (s, i) in skip else inp[f"g.{i}"][s].clone()
        opt.step()
    out = {f"p.{i}": p.detach() for i, p in enumerate(params)}
    for i, p in enumerate(params):
        for k, v in opt.state[p].items():
            if torch.is_tensor(v):
                out[f"s.{i}.{k}"] = v.detach().to(torch.float64) if k == "step" else v.detach()
    return out


def linreg(inp, args):
    """`steps` of optimizer on mean((x w^T + b - y)^2), grads by autograd."""
    w = inp["w"].clone().requires_grad_(True)
    b = inp["b"].clone().requires_grad_(True)
    x, y = inp["x"], inp["y"]
    opt = _make(args["opt"], [{"params": [w, b]}], args["kw"])
    losses = []
    for _ in range(args["steps"]):
        opt.zero_grad()
        loss = ((x @ w.t() + b - y) ** 2).mean()
        loss.backward()
        losses.append(loss.detach())
        opt.step()
    return {"w": w.detach(), "b": b.detach(), "losses": torch.stack(losses)}


def clip(inp, args):
    params = []
    for i in range(args["n"]):
        p = torch.zeros(inp[f"g.{i}"].shape, dtype=inp[f"g.{i}"].dtype, requires_grad=True)
        if not args.get(f"nograd.{i}", False):
            p.grad = inp[f"g.{i}"].clone()
        params.append(p)
    norm_type = float("inf") if args["norm_type"] == "inf" else float(args["norm_type"])
    total = torch.nn.utils.clip_grad_norm_(params, args["max_norm"], norm_type=norm_type)
    out = {"total": total.to(torch.float64).reshape(())}
    for i, p in enumerate(params):
        if p.grad is not None:
            out[f"g.{i}"] = p.grad
    return out


def _timm_cosine(t, a):
    """timm's CosineLRScheduler._get_lr for one cycle (cycle_mul = 1, cycle_decay = 1, k_decay = 1)."""
    base, warm, init, lr_min, total = a["base_lr"], a["warmup_steps"], a["warmup_lr_init"], a["min_lr"], a["total_steps"]
    if t < warm:
        return init + t * ((base - init) / warm)
    if a["warmup_prefix"]:
        t = t - warm
        total = total - warm
    i = t // total
    t_curr = t - total * i
    if i < 1:
        return lr_min + 0.5 * (base - lr_min) * (1 + math.cos(math.pi * t_curr / total))
    return lr_min


def _inv_sqrt(t, a):
    if t == 0:
        return 0.0
    return a["scale"] * a["d_model"] ** -0.5 * min(t ** -0.5, t * a["warmup_steps"] ** -1.5)


def schedule(inp, args):
    """lr for steps 0..n-1 as torch's schedulers report them (LambdaLR over the formula, or StepLR)."""
    p = torch.zeros(1, requires_grad=True)
    kind = args["kind"]
    base = args.get("base_lr", 1.0)
    opt = torch.optim.SGD([p], lr=base)
    if kind == "step":
        sched = torch.optim.lr_scheduler.StepLR(opt, step_size=args["step_size"], gamma=args["gamma"])
    elif kind == "cosine":
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda t: _timm_cosine(t, args) / base)
    else:
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda t: _inv_sqrt(t, args) / base)
    lrs = []
    for _ in range(args["n"]):
        lrs.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    return {"lr": torch.tensor(lrs, dtype=torch.float64)}
