// The uniform draws a generator is about to make, for references that must make attn's random
// choices (torchvision's transforms fed the same numbers).
//
//   Tensor draws = test::upcoming_draws(g);   // f64 (64), g itself untouched
//   auto ref = test::torch_ref("data.random_hflip", {{"img", img}, {"draws", draws}}, {{"p", 0.5}});
#pragma once
#include <vector>

#include "attn/core/rng.h"
#include "attn/core/tensor.h"

namespace attn::test {

// The next n uniforms g would produce, without advancing g.
inline Tensor upcoming_draws(const Generator& g, int n = 64) {
  Generator copy = g;
  std::vector<double> u(static_cast<size_t>(n));
  for (auto& x : u) x = copy.uniform();
  return Tensor::from_vector<double>(u, {n});
}

}  // namespace attn::test
