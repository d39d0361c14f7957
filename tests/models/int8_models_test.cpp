// int8 inference on whole models, against the same model in f32: seeded ViT-B/16 (timm's init, a random
// batch of images) and BERT-base (bert-base-uncased's config, 128 random tokens, its MLM logits). Every
// Linear int8 (nn::quantize_linear_weights_int8), packed as the inference commands pack them. Per
// output row: the cosine of int8 and f32 logits >= 0.995, and the top-1 class equal wherever the f32
// margin between the first two exceeds twice the row's largest int8 error.
// Full-size models: "Slow" in the names (the sanitizer stage leaves them out).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "attn/attn.h"
#include "attn/autograd/grad_mode.h"
#include "attn/models/bert.h"
#include "attn/nn/linear.h"
#include "attn/ops/quantize.h"

using namespace attn;

namespace {

struct RowStats {
  double min_cos = 1, worst_err = 0;
  int64_t rows = 0, decided = 0, agree_decided = 0, agree_all = 0;
};

// Rows of (R, C) logits: cosine, largest |difference|, and top-1 agreement where the f32 margin is
// larger than twice that error (no rounding of that size can swap the first two there).
RowStats compare_rows(const Tensor& f32, const Tensor& i8) {
  const int64_t C = f32.size(-1);
  const std::vector<float> a = f32.reshape({-1, C}).to_vector<float>(), b = i8.reshape({-1, C}).to_vector<float>();
  RowStats s;
  s.rows = int64_t(a.size()) / C;
  for (int64_t r = 0; r < s.rows; ++r) {
    const float* x = a.data() + r * C;
    const float* y = b.data() + r * C;
    double dot = 0, nx = 0, ny = 0, err = 0;
    for (int64_t c = 0; c < C; ++c) {
      dot += double(x[c]) * y[c], nx += double(x[c]) * x[c], ny += double(y[c]) * y[c];
      err = std::max(err, std::abs(double(x[c]) - y[c]));
    }
    s.min_cos = std::min(s.min_cos, dot / std::sqrt(nx * ny));
    s.worst_err = std::max(s.worst_err, err);
    std::vector<float> sorted(x, x + C);
    std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<float>());
    const bool same = std::max_element(x, x + C) - x == std::max_element(y, y + C) - y;
    s.agree_all += same;
    if (double(sorted[0]) - sorted[1] > 2 * err) ++s.decided, s.agree_decided += same;
  }
  return s;
}

void report(const char* what, const RowStats& s) {
  std::printf("  %s: %lld rows, cosine >= %.5f, largest |int8 - f32| %.4g, top-1 equal in %lld of %lld rows "
              "(%lld of %lld with a margin above 2x the error)\n",
              what, (long long)s.rows, s.min_cos, s.worst_err, (long long)s.agree_all, (long long)s.rows,
              (long long)s.agree_decided, (long long)s.decided);
}

}  // namespace

TEST(Int8Models, VitB16LogitsFollowF32Slow) {
  NoGradGuard ng;
  manual_seed(0);
  auto m = models::create_model("vit_base_patch16_224");
  m->eval();
  Generator g(1);
  const Tensor x = randn({4, 3, 224, 224}, g);
  const Tensor f32 = m->forward(x);
  const int64_t saved = nn::quantize_linear_weights_int8(*m);
  EXPECT_GT(saved, 250'000'000);   // 85M Linear weights: 4 bytes -> 1
  EXPECT_GE(nn::pack_linear_weights(*m), 48);
  const Tensor i8 = m->forward(x);
  const RowStats s = compare_rows(f32, i8);
  report("ViT-B/16", s);
  EXPECT_GE(s.min_cos, 0.995);
  EXPECT_EQ(s.agree_decided, s.decided);
}

TEST(Int8Models, BertBaseMlmLogitsFollowF32Slow) {
  NoGradGuard ng;
  manual_seed(0);
  auto m = std::dynamic_pointer_cast<models::BertPreTrainedModel>(models::create("bert-base-uncased"));
  ASSERT_NE(m, nullptr);
  m->eval();
  Generator g(2);
  models::BertInputs in;
  std::vector<int64_t> ids(128);
  for (int64_t& t : ids) t = 1000 + g.randint(29000);
  in.input_ids = Tensor::from_vector(ids, {1, 128});
  const Tensor f32 = m->forward(in).prediction_logits;
  ASSERT_TRUE(f32.defined());
  nn::quantize_linear_weights_int8(*m);
  nn::pack_linear_weights(*m);
  const Tensor i8 = m->forward(in).prediction_logits;
  const RowStats s = compare_rows(f32, i8);
  report("BERT-base MLM", s);
  EXPECT_GE(s.min_cos, 0.995);
  EXPECT_EQ(s.agree_decided, s.decided);
  EXPECT_GT(s.decided, 0);
}
