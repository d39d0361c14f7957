#!/usr/bin/python3
"""Convert a PyTorch checkpoint (.pth / .pt / .bin) to safetensors, with Debian's python3-torch only.

    /usr/bin/python3 tools/pth_to_safetensors.py deit_tiny.pth deit_tiny.safetensors
    attn convert deit_tiny.safetensors --model deit_tiny_distilled_patch16_224 --out deit_tiny_attn.safetensors

- torch.load(..., map_location="cpu", weights_only=True): no pickled code runs.
- {'model': ...} / {'state_dict': ...} wrappers (DeiT, Lightning) are unwrapped; entries that are not
  tensors (epoch counters, args) are skipped with a note on stderr.
- dtypes kept exactly: F32, F64, BF16, F16, I64, I32, I16, I8, U8, BOOL.
- Tensors that alias one another (same storage, offset, shape and strides: tied weights) are written
  ONCE, under the first key; every dropped key is recorded in __metadata__["aliases"] as a JSON object
  {"dropped key": "kept key"} (attn's io::with_aliases restores them). Tensors that only overlap
  (different views of one storage) are written as separate contiguous copies.
- The format is written directly: 8-byte little-endian header length, the JSON header padded with
  spaces to a multiple of 8, then the raw little-endian data with contiguous offsets.
"""
import argparse
import json
import struct
import sys

import torch

_DTYPES = {torch.float32: "F32", torch.float64: "F64", torch.bfloat16: "BF16", torch.float16: "F16",
           torch.int64: "I64", torch.int32: "I32", torch.int16: "I16", torch.int8: "I8", torch.uint8: "U8",
           torch.bool: "BOOL"}


def unwrap(obj):
    """The state dict inside a checkpoint: {'model': sd} / {'state_dict': sd} unwrapped (repeatedly)."""
    while isinstance(obj, dict):
        for key in ("model", "state_dict"):
            if key in obj and isinstance(obj[key], dict):
                obj = obj[key]
                break
        else:
            return obj
    raise ValueError(f"expected a dict of tensors, got {type(obj).__name__}")


def _raw(t):
    t = t.detach().cpu().contiguous()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().tobytes()
    if t.dtype == torch.bool:
        return t.to(torch.uint8).numpy().tobytes()
    return t.numpy().tobytes()


def serialize(state_dict, metadata=None):
    """bytes of a safetensors file holding state_dict (tensors only), aliases de-duplicated."""
    if sys.byteorder != "little":
        raise RuntimeError("pth_to_safetensors: a big-endian host is not supported")
    meta = {str(k): str(v) for k, v in (metadata or {}).items()}
    meta.setdefault("format", "pt")
    seen = {}      # (storage ptr, offset, shape, stride, dtype) -> kept key
    aliases = {}
    header, blobs, off = {}, [], 0
    for name, t in state_dict.items():
        if not isinstance(t, torch.Tensor):
            print(f"pth_to_safetensors: skipping '{name}' (a {type(t).__name__}, not a tensor)", file=sys.stderr)
            continue
        if t.dtype not in _DTYPES:
            raise ValueError(f"pth_to_safetensors: '{name}' has unsupported dtype {t.dtype}")
        storage = t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage()
        ident = (storage.data_ptr(), t.storage_offset(), tuple(t.shape), tuple(t.stride()), t.dtype)
        if t.numel() > 0 and ident in seen:
            aliases[name] = seen[ident]
            continue
        seen[ident] = name
        raw = _raw(t)
        header[name] = {"dtype": _DTYPES[t.dtype], "shape": list(t.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    if aliases:
        meta["aliases"] = json.dumps(aliases, sort_keys=True)
    header = {"__metadata__": meta, **header}
    h = json.dumps(header, separators=(",", ":")).encode("utf-8")
    h += b" " * ((8 - len(h) % 8) % 8)
    return struct.pack("<Q", len(h)) + h + b"".join(blobs)


def save(state_dict, path, metadata=None):
    data = serialize(state_dict, metadata)
    with open(path, "wb") as f:
        f.write(data)
    return data


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("input", help="a PyTorch checkpoint (.pth, .pt, .bin)")
    p.add_argument("output", help="the safetensors file to write")
    args = p.parse_args(argv)
    obj = torch.load(args.input, map_location="cpu", weights_only=True)
    sd = unwrap(obj)
    data = save(sd, args.output, {"source": args.input})
    n = sum(1 for v in sd.values() if isinstance(v, torch.Tensor))
    print(f"{args.input} -> {args.output}: {n} tensors, {len(data)} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
