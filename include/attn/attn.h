// attn: the whole public API in one include.
#pragma once
#include "attn/core/dtype.h"
#include "attn/core/error.h"
#include "attn/core/isa.h"
#include "attn/core/parallel.h"
#include "attn/core/rng.h"
#include "attn/core/tensor.h"
#include "attn/autograd/grad_mode.h"
#include "attn/autograd/node.h"
#include "attn/ops/elementwise.h"
#include "attn/ops/matmul.h"
#include "attn/ops/reduce.h"
#include "attn/io/safetensors.h"
#if __has_include("attn/all_ext.h")
#include "attn/all_ext.h"
#endif
