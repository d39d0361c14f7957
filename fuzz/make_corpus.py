#!/usr/bin/env python3
"""Writes the seed corpora under fuzz/corpus/<target>/: small valid and invalid inputs.

    python3 fuzz/make_corpus.py        # rewrites the seed files (deterministic output)

Standard library only. The seeds are committed; rerun this after changing it.
"""
import gzip
import json
import math
import os
import struct
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))


def write(target, name, data):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


# ---- IDX ----

def idx(code, dims, payload):
    return bytes([0, 0, code, len(dims)]) + b"".join(struct.pack(">I", d) for d in dims) + payload


def gz(data):
    return gzip.compress(data, mtime=0)


def idx_seeds():
    u8_3d = idx(0x08, [2, 3, 4], bytes(range(24)))
    seeds = {
        "u8_1d": idx(0x08, [5], b"\x00\x01\x7f\x80\xff"),
        "u8_3d": u8_3d,
        "i8": idx(0x09, [4], struct.pack(">4b", -128, -1, 0, 127)),
        "i16": idx(0x0B, [3], struct.pack(">3h", -32768, 1, 32767)),
        "i32": idx(0x0C, [2, 2], struct.pack(">4i", -2**31, -1, 0, 2**31 - 1)),
        "f32": idx(0x0D, [4], struct.pack(">4f", 1.5, math.inf, -0.0, math.nan)),
        "f64": idx(0x0E, [2, 1], struct.pack(">2d", -2.25, 1e300)),
        "scalar": idx(0x08, [], b"\x2a"),
        "empty": idx(0x08, [0, 5], b""),
        "gz_u8_3d": gz(u8_3d),
        "gz_f32": gz(idx(0x0D, [2], struct.pack(">2f", 0.5, -3.0))),
        "gz_two_members": gz(u8_3d[:10]) + gz(u8_3d[10:]),
        "bad_magic": b"\x01\x00\x08\x01\x00\x00\x00\x01\x00",
        "bad_type": idx(0x0A, [1], b"\x00"),
        "truncated_header": idx(0x08, [1, 2, 3], b"")[:9],
        "truncated_data": idx(0x08, [2, 3], b"abcde"),
        "trailing_data": idx(0x08, [2, 3], b"abcdefg"),
        "overflow": idx(0x0E, [0xFFFFFFFF] * 3, b""),
        "empty_huge_dims": idx(0x0B, [0, 0x4E0001, 0x54000030, 0x600000FF], b""),  # found by idx_fuzz
        "gz_truncated": gz(u8_3d)[:-5],
        "gz_garbage": gz(u8_3d) + b"xyz",
    }
    for name, data in seeds.items():
        write("idx_fuzz", name, data)


# ---- safetensors ----

def safetensors(entries, metadata=None, raw_header=None):
    """entries: list of (name, dtype, shape, bytes); offsets assigned in order."""
    header, blobs, off = {}, [], 0
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, dtype, shape, data in entries:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + len(data)]}
        blobs.append(data)
        off += len(data)
    h = (raw_header if raw_header is not None else json.dumps(header)).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    return struct.pack("<Q", len(h)) + h + b"".join(blobs)


def safetensors_seeds():
    f32 = struct.pack("<4f", 1.0, -2.0, math.inf, math.nan)
    seeds = {
        "all_dtypes": safetensors([
            ("a_f32", "F32", [2, 2], f32),
            ("b_f64", "F64", [1], struct.pack("<d", 3.5)),
            ("c_bf16", "BF16", [2], b"\x80\x3f\x00\xc0"),
            ("d_f16", "F16", [3], struct.pack("<3H", 0x3C00, 0x7C00, 0x0001)),
            ("e_i32", "I32", [2], struct.pack("<2i", -1, 7)),
            ("f_i64", "I64", [1, 1], struct.pack("<q", -2**63)),
            ("g_u8", "U8", [3], b"\x00\x7f\xff"),
            ("h_bool", "BOOL", [2], b"\x00\x01"),
        ], metadata={"format": "pt", "config": "{\"dim\": 4}"}),
        "empty_header": safetensors([]),
        "metadata_only": safetensors([], metadata={"k": "v"}),
        "scalar": safetensors([("s", "F32", [], struct.pack("<f", 0.25))]),
        "zero_size": safetensors([("z", "F32", [0, 3], b""), ("y", "I64", [2], struct.pack("<2q", 1, 2))]),
        "bad_json": safetensors([], raw_header="{\"a\": "),
        "not_object": safetensors([], raw_header="[1, 2]"),
        "bad_dtype": safetensors([("x", "Q8", [1], b"\x00")]),
        "negative_shape": safetensors([], raw_header=json.dumps(
            {"x": {"dtype": "U8", "shape": [-1], "data_offsets": [0, 1]}})) + b"\x00",
        "gap": safetensors([], raw_header=json.dumps(
            {"x": {"dtype": "U8", "shape": [1], "data_offsets": [1, 2]}})) + b"\x00\x00",
        "overlap": safetensors([], raw_header=json.dumps(
            {"x": {"dtype": "U8", "shape": [2], "data_offsets": [0, 2]},
             "y": {"dtype": "U8", "shape": [2], "data_offsets": [1, 3]}})) + b"\x00\x00\x00",
        "size_mismatch": safetensors([("x", "F32", [3], f32)]),
        "header_too_long": struct.pack("<Q", 1 << 40) + b"{}      ",
        "short": b"\x02\x00\x00",
    }
    for name, data in seeds.items():
        write("safetensors_fuzz", name, data)


# ---- files that claim more than they hold (the ceilings of attn/data/limits.h) ----

def png_chunk(kind, data):
    crc = zlib.crc32(kind + data) & 0xFFFFFFFF
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)


def png(w, h, color, depth, idat, extra=b""):
    return (b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, depth, color, 0, 0, 0)) +
            extra + png_chunk(b"IDAT", idat) + png_chunk(b"IEND", b""))


def jpeg_claiming(w, h):
    """The checked-in 'tiny' JPEG seed with its frame header's size set to w x h."""
    with open(os.path.join(HERE, "corpus", "jpeg_fuzz", "tiny"), "rb") as f:
        j = bytearray(f.read())
    sof = next(i for i in range(2, len(j) - 9) if j[i] == 0xFF and j[i + 1] in (0xC0, 0xC1, 0xC2))
    j[sof + 5:sof + 9] = struct.pack(">HH", h, w)
    return bytes(j)


def sword(bzs, bzv, bzz):
    return struct.pack("<HH", len(bzs), len(bzv)) + bzs + bzv + bzz


def hostile_seeds():
    one_row = zlib.compress(b"\x00\x00\x00\x00")   # filter byte + one RGB pixel
    write("png_fuzz", "claims_60000x60000", png(60000, 60000, 2, 8, one_row))
    write("png_fuzz", "claims_8192x8192", png(8192, 8192, 6, 8, one_row))
    ztxt = png_chunk(b"zTXt", b"k\x00\x00" + zlib.compress(b"a" * 65536))
    write("png_fuzz", "ztxt_chunks", png(1, 1, 0, 8, zlib.compress(b"\x00\x4d"), ztxt * 3))
    write("jpeg_fuzz", "claims_60000x60000", jpeg_claiming(60000, 60000))
    write("jpeg_fuzz", "claims_8192x8192", jpeg_claiming(8192, 8192))
    write("idx_fuzz", "gz_claims_2p40", gz(idx(0x08, [1 << 20, 1 << 20], b"")))
    write("idx_fuzz", "gz_bomb_claims_2p40", gz(idx(0x08, [1 << 20, 1 << 20], bytes(1 << 16))))
    block = zlib.compress(b"In the beginning")
    bzs = struct.pack("<III", 0, len(block), 1 << 31)   # claims 2 GiB from a few bytes
    bzv = struct.pack("<IIH", 0, 0, 0) + struct.pack("<IIH", 0, 0, 16)
    write("sword_fuzz", "block_claims_2gib", sword(bzs, bzv, block))


if __name__ == "__main__":
    idx_seeds()
    safetensors_seeds()
    hostile_seeds()
