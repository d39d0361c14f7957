// IDX files (the MNIST / Fashion-MNIST container), plain or gzip-compressed.
//
//   Tensor images = attn::data::read_idx("/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz");
//   // images: (10000, 28, 28) u8
//   Tensor t = attn::data::parse_idx(bytes.data(), bytes.size(), "<buffer>");
//
// Format: two zero bytes, a type code, the number of dimensions n, then n big-endian u32 sizes,
// then the elements, big-endian, row-major. Type codes and the dtype they load as:
//   0x08 u8 -> u8     0x09 i8 -> i32     0x0B i16 -> i32
//   0x0C i32 -> i32   0x0D f32 -> f32    0x0E f64 -> f64
// (attn has no i8/i16 dtype; they are widened exactly.) A buffer that starts with the gzip magic
// (1f 8b) is inflated first (multi-member streams are accepted, the CRC is checked).
//
// The data must be exactly as long as the header says. Every malformed input throws attn::Error
// "IDX file <what>: <problem>" (bad magic, unknown type code, truncated header, sizes overflow,
// "truncated data: expected N bytes of data, found M", trailing data, gzip corrupt); the parser
// never reads out of bounds and never inflates more than the header asks for (plus one byte).
// Before inflating a gzip file's data, the size its header claims is checked against what the
// compressed bytes can inflate to (deflate's 1032:1 at most) and against the inflated-size ceiling
// (data::max_inflated_bytes(), attn/data/limits.h: 1 GiB unless raised, ATTN_MAX_INFLATED_BYTES);
// the error names the limit and how to raise it. A plain file is as large as its data already.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "attn/core/tensor.h"

namespace attn::data {

// Reads an IDX file (gzip-compressed or plain, told apart by the content, not the name).
Tensor read_idx(const std::string& path);

// Parses IDX bytes in memory (gzip-compressed or plain). `what` names the source in errors.
Tensor parse_idx(const uint8_t* data, size_t size, const std::string& what = "<buffer>");

// Encodes a tensor as uncompressed IDX: u8 -> 0x08, i32 -> 0x0C, f32 -> 0x0D, f64 -> 0x0E.
// Other dtypes (i64, bf16) and tensors of more than 255 dimensions or sizes >= 2^32 throw.
std::string serialize_idx(const Tensor& t);

}  // namespace attn::data
