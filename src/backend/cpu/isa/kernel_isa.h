// Internal: the ISA of a kernel source that CMake compiles once per ISA (the sources of this folder,
// each built three times: -DATTN_KERNEL_ISA=scalar, avx2 or avx512 with that ISA's flags; see
// CMakeLists.txt). Include it first: it defines ATTN_KERNEL_TU (the dispatch headers then declare
// only) and `Vec`, the ISA's vector type, in namespace attn::kernels::ATTN_KERNEL_ISA, where the
// source defines its kernels for the dispatch tables (vec_dispatch.h, attention_fused.h):
//
//   #include "kernel_isa.h"
//   #include "../vec_dispatch.h"
//   #include "../vec_kernels.h"
//   namespace attn::kernels::ATTN_KERNEL_ISA {
//   void gelu_fwd(...) { RowOps<Vec>::gelu_fwd(...); }
//   }
//
// Everything the vector headers and kernel templates define has internal linkage, so the three
// objects of a source share nothing at link time.
#pragma once
#define ATTN_KERNEL_TU

// 1, 2, 3 by the name (an unknown name is an undefined identifier, 0 in #if: the error below).
#define ATTN_KERNEL_ISA_ID_scalar 1
#define ATTN_KERNEL_ISA_ID_avx2 2
#define ATTN_KERNEL_ISA_ID_avx512 3
#define ATTN_KERNEL_ISA_CAT_(a, b) a##b
#define ATTN_KERNEL_ISA_CAT(a, b) ATTN_KERNEL_ISA_CAT_(a, b)
#define ATTN_KERNEL_ISA_ID ATTN_KERNEL_ISA_CAT(ATTN_KERNEL_ISA_ID_, ATTN_KERNEL_ISA)

#if !defined(ATTN_KERNEL_ISA)
#error "compiled once per ISA by CMake: needs -DATTN_KERNEL_ISA=scalar|avx2|avx512"
#elif ATTN_KERNEL_ISA_ID == 1
#include "../vec_scalar.h"
namespace attn::kernels::scalar { using Vec = VecScalar; }
#elif ATTN_KERNEL_ISA_ID == 2
#if !defined(__AVX2__) || !defined(__FMA__) || !defined(__F16C__)
#error "ATTN_KERNEL_ISA=avx2 needs -mavx2 -mfma -mf16c"
#endif
#include "../vec_avx2.h"
namespace attn::kernels::avx2 { using Vec = VecAvx2; }
#elif ATTN_KERNEL_ISA_ID == 3
#if !defined(__AVX512F__) || !defined(__AVX512BW__) || !defined(__AVX512VL__) || !defined(__AVX512DQ__)
#error "ATTN_KERNEL_ISA=avx512 needs -mavx512f -mavx512bw -mavx512vl -mavx512dq (and the avx2 flags)"
#endif
#include "../vec_avx512.h"
namespace attn::kernels::avx512 { using Vec = VecAvx512; }
#else
#error "ATTN_KERNEL_ISA must be scalar, avx2 or avx512"
#endif
