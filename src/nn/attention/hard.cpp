// Hard attention (argmax / sampled one-hot choice) with the straight-through estimator.
#include "attn/nn/attention/hard.h"

#include <vector>

#include "attn/autograd/node.h"

namespace attn::nn {

namespace {
struct StraightThroughNode : autograd::Node {
  const char* name() const override { return "straight_through"; }
  std::vector<Tensor> backward(const Tensor& dout) override { return {Tensor(), dout}; }
};
}  // namespace

Tensor straight_through(const Tensor& hard, const Tensor& soft) {
  ATTN_CHECK(hard.defined() && soft.defined() && hard.shape() == soft.shape() && hard.dtype() == soft.dtype(),
             "straight_through: expected hard and soft of one shape and dtype, got ",
             hard.defined() ? hard.shape() : Shape{}, " and ", soft.defined() ? soft.shape() : Shape{});
  Tensor out = hard.detach();   // a new handle on hard's values, without history
  if (autograd::needs_grad({hard, soft})) {
    autograd::attach(out, std::make_shared<StraightThroughNode>(), {hard, soft});
  }
  return out;
}

HardAttention::HardAttention(const HardAttentionOptions& o, Generator& g) : opt_(o) {
  score = register_module("score", std::make_shared<ScoreAttention>(o.score, g));
}

HardAttentionResult HardAttention::forward(const Tensor& s, const Tensor& h, const Tensor& key_padding_mask,
                                           const Tensor& values) const {
  const ScoreOptions& so = score->options();
  detail::check_attention_inputs("HardAttention", s, h, key_padding_mask, values, so.query_dim,
                                 so.kind == ScoreKind::location ? -1 : so.key_dim);
  const int64_t B = s.size(0), S = h.size(1);
  const Tensor probs = masked_softmax(score->score(s, h), key_padding_mask);   // (B, S)
  const std::vector<double> p = probs.detach().to_vector<double>();
  Generator& gen = opt_.generator ? *opt_.generator : default_generator();
  Tensor index = Tensor::empty({B}, DType::i64);
  Tensor onehot = Tensor::zeros({B, S}, probs.dtype());
  int64_t* pi = index.data<int64_t>();
  for (int64_t b = 0; b < B; ++b) {
    const double* row = p.data() + b * S;
    double total = 0;
    for (int64_t j = 0; j < S; ++j) total += row[j];
    int64_t choice = -1;
    if (total > 0) {
      if (is_training()) {
        // Inverse CDF: the first j whose cumulative mass exceeds u * total (skipping zero-mass keys).
        const double u = gen.uniform() * total;
        double c = 0;
        for (int64_t j = 0; j < S; ++j) {
          if (row[j] <= 0) continue;
          choice = j;
          c += row[j];
          if (c > u) break;
        }
      } else {
        choice = 0;
        for (int64_t j = 1; j < S; ++j)
          if (row[j] > row[choice]) choice = j;
      }
    }
    pi[b] = choice;
    if (choice >= 0) {
      if (onehot.dtype() == DType::f32) onehot.data<float>()[b * S + choice] = 1.f;
      else onehot.data<double>()[b * S + choice] = 1.0;
    }
  }
  const Tensor w = straight_through(onehot, probs);
  return {detail::weighted_sum(w, values.defined() ? values : h), w, probs, index};
}

}  // namespace attn::nn
