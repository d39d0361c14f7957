// Element types. f32 is the compute type; f64 runs in the reference path (gradient checks);
// bf16 is storage + conversion (bf16 compute comes with inference); integers index and label.
#pragma once
#include <cstdint>
#include <cstring>
#include <string>

namespace attn {

enum class DType : uint8_t { f32, f64, bf16, i32, i64, u8, i8 };

size_t dtype_size(DType t);
const char* dtype_name(DType t);   // "f32", "f64", ...
bool is_floating(DType t);

// bfloat16: the upper 16 bits of an IEEE f32; conversion rounds to nearest even, NaN stays NaN.
struct bf16 {
  uint16_t bits = 0;
  static bf16 from_float(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    // Branch-free (a select, not a jump), so that conversion loops vectorise.
    const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    const uint32_t quiet_nan = (u >> 16) | 0x40u;
    bf16 r;
    r.bits = uint16_t((u & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded);
    return r;
  }
  float to_float() const {
    uint32_t u = uint32_t(bits) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
};

template <class T> struct dtype_of;
template <> struct dtype_of<float> { static constexpr DType value = DType::f32; };
template <> struct dtype_of<double> { static constexpr DType value = DType::f64; };
template <> struct dtype_of<bf16> { static constexpr DType value = DType::bf16; };
template <> struct dtype_of<int32_t> { static constexpr DType value = DType::i32; };
template <> struct dtype_of<int64_t> { static constexpr DType value = DType::i64; };
template <> struct dtype_of<uint8_t> { static constexpr DType value = DType::u8; };
template <> struct dtype_of<int8_t> { static constexpr DType value = DType::i8; };

}  // namespace attn

// Runs the body with T bound to the C++ type of a floating compute dtype (f32 or f64).
#define ATTN_DISPATCH_FLOAT(dt, opname, ...)                                              \
  [&] {                                                                                   \
    switch (dt) {                                                                         \
      case ::attn::DType::f32: { using T = float; return __VA_ARGS__(); }                 \
      case ::attn::DType::f64: { using T = double; return __VA_ARGS__(); }                \
      default: ::attn::fail(opname, ": expected a f32 or f64 tensor, got ",               \
                            ::attn::dtype_name(dt));                                      \
    }                                                                                     \
  }()

// Any dtype with arithmetic (everything but bf16).
#define ATTN_DISPATCH_ALL(dt, opname, ...)                                                \
  [&] {                                                                                   \
    switch (dt) {                                                                         \
      case ::attn::DType::f32: { using T = float; return __VA_ARGS__(); }                 \
      case ::attn::DType::f64: { using T = double; return __VA_ARGS__(); }                \
      case ::attn::DType::i32: { using T = int32_t; return __VA_ARGS__(); }               \
      case ::attn::DType::i64: { using T = int64_t; return __VA_ARGS__(); }               \
      case ::attn::DType::u8: { using T = uint8_t; return __VA_ARGS__(); }                \
      case ::attn::DType::i8: { using T = int8_t; return __VA_ARGS__(); }                 \
      default: ::attn::fail(opname, ": dtype ", ::attn::dtype_name(dt),                   \
                            " is not supported here (convert with .to())");               \
    }                                                                                     \
  }()
