// A module's parameters in tests: random values so that each one matters (a zero head or a unit norm
// would hide a mistake in its path), as inputs of a PyTorch reference, and listed with their shapes.
//
//   test::randomize_parameters(vit, 3, [](const std::string& name) { return name == "cls_token" ? 0.5 : 0.1; });
//   auto ref = test::torch_ref("vit.torchvision_vit", test::param_inputs(vit), args);   // "p.<name>" each
//   EXPECT_EQ(test::param_listing(linear), (std::vector<std::string>{"weight[4, 3]", "bias[4]"}));
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "attn/attn.h"
#include "torch_ref.h"

namespace attn::test {

// Each parameter drawn from N(0, std_of(name)), in named_parameters() order from Generator(seed);
// norm weights (a name with "norm" ending in ".weight") 1 + N(0, 0.1) instead.
inline void randomize_parameters(nn::Module& m, uint64_t seed,
                                 const std::function<double(const std::string&)>& std_of) {
  Generator g(seed);
  NoGradGuard ng;
  for (auto& [name, p] : m.named_parameters()) {
    const bool norm_weight = name.find("norm") != std::string::npos && name.ends_with(".weight");
    Tensor r = randn(p.shape(), g) * (norm_weight ? 0.1 : std_of(name));
    p.copy_(norm_weight ? r + 1.0 : r);
  }
}

// Every parameter of m as a reference input "p.<name>" (a detached copy).
inline Tensors param_inputs(const nn::Module& m) {
  Tensors in;
  for (const auto& [n, p] : m.named_parameters()) in["p." + n] = p.detach().clone();
  return in;
}

// "<name>[<shape>]" for each parameter of m, in order.
inline std::vector<std::string> param_listing(const nn::Module& m) {
  std::vector<std::string> out;
  for (const auto& [k, p] : m.named_parameters()) out.push_back(k + shape_str(p.shape()));
  return out;
}

}  // namespace attn::test
