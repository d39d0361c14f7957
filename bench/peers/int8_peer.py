"""PyTorch's dynamic int8 inference as a benchmark peer (bench/peers/vit_infer.py and bert_infer.py,
--dtype int8): torch.quantization.quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8) of the f32
model, under one of PyTorch's quantized engines.

    from int8_peer import engines, quantize, weight_report, run_engines
    report = run_engines(f32_model, engines("best"), timer)    # timer(quantized model) -> latency dict

Debian's torch 1.13 has the engines onednn and qnnpack (no fbgemm); --qengine best times each one and
reports the faster, with every engine's median. The engine is set when the model is quantized (the packed
weights are the engine's) and while it runs.

quantize_dynamic swaps exactly the modules whose type is torch.nn.Linear: a subclass such as
nn.MultiheadAttention's out_proj (NonDynamicallyQuantizableLinear) stays f32, and so does
nn.MultiheadAttention's in_proj_weight, a bare parameter. weight_report() counts what was quantized and
what was left f32, so a comparison with a model whose every Linear is int8 can say how much of the
peer's matmul weight ran in int8.
"""
import torch
from torch import nn

try:
    from torch.ao.nn.quantized.dynamic import Linear as DynamicQuantizedLinear
except ImportError:   # torch < 1.13
    from torch.nn.quantized.dynamic import Linear as DynamicQuantizedLinear

ENGINES = ("onednn", "qnnpack")


def engines(choice):
    """The engines --qengine CHOICE times: one, or for "best" every one of ENGINES this torch has."""
    supported = torch.backends.quantized.supported_engines
    if choice == "best":
        found = [e for e in ENGINES if e in supported]
        if not found:
            raise SystemExit(f"int8 peer: this torch has none of the quantized engines {', '.join(ENGINES)} "
                             f"(supported: {', '.join(supported)})")
        return found
    if choice not in supported:
        raise SystemExit(f"int8 peer: --qengine {choice} is not supported by this torch "
                         f"(supported: {', '.join(e for e in supported if e != 'none')})")
    return [choice]


def quantize(model, engine):
    """A dynamically quantized copy of model (its nn.Linear modules int8, per-tensor weights) for engine."""
    torch.backends.quantized.engine = engine
    return torch.quantization.quantize_dynamic(model, {nn.Linear}, dtype=torch.qint8, inplace=False)


def weight_report(q):
    """What quantize_dynamic left in the quantized model q: layer counts and bytes (MB = 1e6 bytes).

    int8: the quantized Linear weights (one byte a weight); linear_f32: matmul weights left f32 (Linears
    of a subclass, nn.MultiheadAttention's packed or separate q / k / v projections); other_f32: every other
    parameter and buffer (embeddings, convolutions, norms, all biases, tokens)."""
    n_q, n_f, int8_numel, linear_f32, other = 0, 0, 0, 0, 0
    matmul_params = set()
    for m in q.modules():
        if isinstance(m, DynamicQuantizedLinear):
            n_q += 1
            int8_numel += m.weight().numel()
            b = m.bias()
            if b is not None:
                other += b.numel() * b.element_size()
        elif isinstance(m, nn.Linear):
            n_f += 1
            matmul_params.add(id(m.weight))
        elif isinstance(m, nn.MultiheadAttention):
            for name in ("in_proj_weight", "q_proj_weight", "k_proj_weight", "v_proj_weight"):
                p = getattr(m, name, None)
                if p is not None:
                    matmul_params.add(id(p))
    seen = set()
    for t in list(q.parameters()) + list(q.buffers()):
        if id(t) in seen:
            continue
        seen.add(id(t))
        if id(t) in matmul_params:
            linear_f32 += t.numel() * t.element_size()
        else:
            other += t.numel() * t.element_size()
    linear_f32_numel = linear_f32 // 4
    return {"linear_layers_int8": n_q, "linear_layers_f32": n_f,
            "weights_mb": {"int8": int8_numel / 1e6, "linear_f32": linear_f32 / 1e6, "other_f32": other / 1e6,
                           "total": (int8_numel + linear_f32 + other) / 1e6,
                           "int8_as_f32": 4 * int8_numel / 1e6},
            "int8_share_of_linear_weights": int8_numel / max(1, int8_numel + linear_f32_numel)}


def max_abs_diff(a, b):
    """Largest |a - b| over (tuples of) tensors, and the largest |b|."""
    a = a if isinstance(a, (tuple, list)) else (a,)
    b = b if isinstance(b, (tuple, list)) else (b,)
    d = max(float((x.float() - y.float()).abs().max()) for x, y in zip(a, b))
    return d, max(float(y.float().abs().max()) for y in b)


def run_engines(model, names, timer, reference=None):
    """Quantizes model under each engine in names and times it with timer(quantized) -> {"median": ms, ...};
    reference(quantized) -> (max |int8 - f32|, max |f32|) is recorded for the engine that wins. Returns the
    peer's JSON fields: the faster engine's latency, which engine ran, every engine's median and the
    quantized model's weight report."""
    results, models = {}, {}
    for name in names:
        q = quantize(model, name)
        results[name] = timer(q)
        models[name] = q
    best = min(results, key=lambda k: results[k]["median"])
    torch.backends.quantized.engine = best
    r = {"latency_ms": results[best], "qengine": best,
         "qengine_median_ms": {k: v["median"] for k, v in results.items()},
         "quantization": "torch.quantization.quantize_dynamic({nn.Linear}, qint8)",
         "quantized": weight_report(models[best])}
    if reference is not None:
        d, peak = reference(models[best])
        r.update({"max_abs_diff_vs_f32": d, "max_abs_f32": peak})
    return r
