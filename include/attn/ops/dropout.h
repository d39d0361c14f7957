// Dropout, counter-based: element i of x (row-major) is kept iff
// philox_uniform(seed, offset, i) >= p, where (seed, offset) = (g.seed(), g.reserve_batch(numel)):
// g.reserve(numel) in one process; in a data-parallel one, this process's part of the combined
// batch's counters (Generator::set_batch_shard), so an example draws what it would in one process.
// Kept elements are scaled by 1/(1-p). The mask depends only on the generator state, never on the
// thread count, and backward reuses it (it keeps (seed, offset), not the mask).
//
//   attn::Generator g(0);
//   Tensor y = attn::dropout(x, 0.1, /*training=*/true, g);
//   Tensor z = attn::dropout(x, 0.1, model_training);        // the default generator
//
// Identity (x itself) when !training or p == 0; p == 1 gives x * 0 (zeros for finite x). As
// PyTorch, the output is x * (keep ? 1/(1-p) : 0), so a dropped NaN or inf gives NaN.
#pragma once
#include "attn/core/rng.h"
#include "attn/core/tensor.h"

namespace attn {

Tensor dropout(const Tensor& x, double p, bool training, Generator& g);
Tensor dropout(const Tensor& x, double p, bool training);   // default_generator()

// dropout(relu(x), p, training, g) in one pass: the same values bit for bit and the same draws from
// g, half the memory traffic; its backward reads only the output (dx = y > 0 ? dy / (1 - p) : 0)
// instead of regenerating the mask. relu(x) when !training or p == 0. The Transformer's ReLU
// feed-forward block uses it.
Tensor relu_dropout(const Tensor& x, double p, bool training, Generator& g);

}  // namespace attn
