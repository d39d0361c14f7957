"""Reference server for attn's C++ tests: one process per test binary.

Reads one JSON request per line on stdin: {"func": "module.fn", "in": path, "out": path,
"args": {...}}; loads the input tensors (safetensors), calls fn(inputs, args) from
tests/golden/gen/module.py, writes the returned dict of tensors (safetensors) and answers
"ok" or "error: ..." on one line.
"""
import importlib
import json
import struct
import sys
import traceback

import numpy as np
import torch

torch.set_num_threads(1)

_NP = {"F32": np.float32, "F64": np.float64, "I32": np.int32, "I64": np.int64, "U8": np.uint8,
       "BOOL": np.bool_}


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    body = data[8 + n:]
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        b, end = e["data_offsets"]
        raw = body[b:end]
        shape = e["shape"]
        if e["dtype"] == "BF16":
            u16 = np.frombuffer(raw, dtype=np.uint16).astype(np.int32) << 16
            t = torch.from_numpy(u16.view(np.float32).copy()).reshape(shape).to(torch.bfloat16)
        else:
            t = torch.from_numpy(np.frombuffer(raw, dtype=_NP[e["dtype"]]).copy()).reshape(shape)
        out[name] = t
    return out


_DT = {torch.float32: "F32", torch.float64: "F64", torch.int32: "I32", torch.int64: "I64",
       torch.uint8: "U8", torch.bool: "U8", torch.bfloat16: "BF16"}


def write_safetensors(path, tensors):
    header, blobs, off = {}, [], 0
    for name, t in tensors.items():
        t = t.detach().contiguous().cpu()
        if t.dtype == torch.bool:
            t = t.to(torch.uint8)
        if t.dtype == torch.bfloat16:
            raw = t.view(torch.int16).numpy().tobytes()
        else:
            raw = t.numpy().tobytes()
        header[name] = {"dtype": _DT[t.dtype], "shape": list(t.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def main():
    sys.path.insert(0, sys.argv[1])
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        try:
            req = json.loads(line)
            mod_name, fn_name = req["func"].split(".", 1)
            mod = importlib.import_module(mod_name)
            out = getattr(mod, fn_name)(read_safetensors(req["in"]), req.get("args", {}))
            write_safetensors(req["out"], out)
            sys.stdout.write("ok\n")
        except Exception:  # report to the C++ side, keep serving
            msg = traceback.format_exc().strip().replace("\n", " | ")
            sys.stdout.write("error: " + msg + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
