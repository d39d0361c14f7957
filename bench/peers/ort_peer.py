"""ONNX Runtime as a benchmark peer: export a PyTorch module with torch.onnx.export, time it with
ONNX Runtime's CPU execution provider (bench/peers/ort/run.mjs: graph optimizations "all", sequential
execution, the given intra-op threads) and check that ONNX Runtime computes what the module computes.

    from ort_peer import time_onnxruntime
    result = time_onnxruntime(model, {"input_ids": ids, "attention_mask": mask}, ["logits"],
                              threads=2, iters=20)

The result is run.mjs's JSON line (latency median / p90 / min in ms, RSS) plus "max_abs_diff": the
largest |ONNX Runtime - PyTorch| over the outputs, and "max_abs": the largest |PyTorch output|, so a
caller can reject an export that computes something else. The npm package is installed on first use
(bench/peers/ort_setup.sh).
"""
import json
import os
import subprocess
import tempfile

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
_NP_DTYPES = {torch.float32: ("float32", np.float32), torch.int64: ("int64", np.int64),
              torch.int32: ("int32", np.int32)}


def _write_tensors(directory, tensors):
    spec = []
    for name, t in tensors.items():
        if t.dtype not in _NP_DTYPES:
            raise ValueError(f"ort_peer: input '{name}' has dtype {t.dtype}; expected float32, int64 or int32")
        dtype, np_dtype = _NP_DTYPES[t.dtype]
        file = f"{name}.bin"
        t.detach().contiguous().numpy().astype(np_dtype).tofile(os.path.join(directory, file))
        spec.append({"name": name, "dtype": dtype, "dims": list(t.shape), "file": file})
    path = os.path.join(directory, "inputs.json")
    with open(path, "w") as f:
        json.dump(spec, f)
    return path


def _read_outputs(directory):
    with open(os.path.join(directory, "outputs.json")) as f:
        spec = json.load(f)
    types = {"float32": np.float32, "int64": np.int64, "int32": np.int32}
    return {s["name"]: np.fromfile(os.path.join(directory, s["file"]), dtype=types[s["dtype"]])
            .reshape(s["dims"]) for s in spec}


def export_onnx(model, inputs, output_names, path, dynamic_axes=None, opset=14):
    """torch.onnx.export of model(**inputs) in eval mode; inputs is an ordered dict name -> tensor. Traced with
    gradients enabled: under no_grad, torch 1.13's nn.MultiheadAttention may take its inference fast path
    (aten::_native_multi_head_attention), which has no ONNX export (it did for ViT-B/16)."""
    model.eval()
    with torch.enable_grad():
        torch.onnx.export(model, tuple(inputs.values()), path, input_names=list(inputs), output_names=output_names,
                          dynamic_axes=dynamic_axes, opset_version=opset, do_constant_folding=True)


def time_onnxruntime(model, inputs, output_names, threads=2, iters=20, warmup=3, workdir=None, dynamic_axes=None):
    subprocess.run(["bash", os.path.join(HERE, "ort_setup.sh")], check=True)
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        onnx_path = os.path.join(tmp, "model.onnx")
        export_onnx(model, inputs, output_names, onnx_path, dynamic_axes)
        spec = _write_tensors(tmp, inputs)
        out_dir = os.path.join(tmp, "outputs")
        run = subprocess.run(["node", os.path.join(HERE, "ort", "run.mjs"), "--model", onnx_path, "--inputs", spec,
                              "--threads", str(threads), "--iters", str(iters), "--warmup", str(warmup),
                              "--outputs", out_dir], check=True, capture_output=True, text=True)
        result = json.loads(run.stdout.strip().splitlines()[-1])
        got = _read_outputs(out_dir)
    with torch.no_grad():
        want = model(*inputs.values())
    if isinstance(want, torch.Tensor):
        want = (want,)
    diff, peak = 0.0, 0.0
    for name, w in zip(output_names, want):
        w = w.float().numpy()
        diff = max(diff, float(np.max(np.abs(got[name].astype(np.float32) - w))))
        peak = max(peak, float(np.max(np.abs(w))))
    result.update({"max_abs_diff": diff, "max_abs": peak})
    return result
