// The Transformer against torch.nn.Transformer (1.13, batch_first, same weights): outputs in eval
// mode for post-/pre-norm x relu/gelu with the three padding masks and the causal mask (compared at
// non-padded target positions), gradients of every parameter and input in train mode (dropout 0);
// TransformerSeq2Seq's cached step-by-step logits against its teacher-forced ones; configs.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <set>

#include "attn/attn.h"
#include "attn/models/transformer.h"
#include "attn/ops/indexing.h"
#include "errors.h"
#include "params.h"
#include "torch_ref.h"

using namespace attn;
using test::error_of;

namespace {

// Every parameter random so each one matters: LayerNorm weights 1 + N(0, .1), the rest N(0, .2).
void randomize(nn::Module& m, uint64_t seed) {
  test::randomize_parameters(m, seed, [](const std::string&) { return 0.2; });
}

// (B, L) u8 with row b padded from lens[b] on.
Tensor pad_mask(const std::vector<int64_t>& lens, int64_t L) {
  std::vector<uint8_t> m;
  for (int64_t len : lens)
    for (int64_t i = 0; i < L; ++i) m.push_back(i >= len ? 1 : 0);
  return Tensor::from_vector(m, {int64_t(lens.size()), L});
}

struct Case {
  bool norm_first;
  models::Activation act;
  bool batch_norm = false;   // BatchNorm over the tokens in place of every LayerNorm
};

// A batch-first 2 + 2 layer Transformer without dropout in the case's mode, its weights randomized
// from seed, and the reference's arguments for the same model (causal decoder).
struct TwoByTwo {
  std::unique_ptr<models::Transformer> tf;
  nlohmann::json args;
};
TwoByTwo two_by_two(const Case& c, int64_t E, int64_t nhead, int64_t d_ff, uint64_t seed) {
  TwoByTwo t;
  t.tf = std::make_unique<models::Transformer>(models::TransformerOptions{
      .d_model = E, .nhead = nhead, .num_encoder_layers = 2, .num_decoder_layers = 2, .dim_feedforward = d_ff,
      .dropout = 0.0, .activation = c.act, .batch_first = true, .norm_first = c.norm_first,
      .batch_norm = c.batch_norm});
  randomize(*t.tf, seed);
  if (c.batch_norm) {   // running statistics away from (0, 1), so that eval mode tests them
    NoGradGuard ng;
    Generator g(seed + 1);
    for (auto& [name, b] : t.tf->named_buffers()) {
      if (name.ends_with("running_mean")) b.copy_(randn(b.shape(), g) * 0.2);
      if (name.ends_with("running_var")) b.copy_(rand(b.shape(), g) + 0.5);
    }
  }
  t.args = {{"d_model", E}, {"nhead", nhead}, {"num_encoder_layers", 2}, {"num_decoder_layers", 2},
            {"dim_feedforward", d_ff}, {"activation", models::to_string(c.act)}, {"norm_first", c.norm_first},
            {"causal", true}, {"batch_norm", c.batch_norm}};
  return t;
}

// The reference's inputs: the parameters, the sequences and their key padding masks (the memory's
// is the source's).
test::Tensors ref_inputs(const nn::Module& m, const Tensor& src, const Tensor& tgt, const Tensor& src_kpm,
                         const Tensor& tgt_kpm) {
  test::Tensors in = test::param_inputs(m);
  for (const auto& [n, b] : m.named_buffers()) in["p." + n] = b.detach().clone();   // BatchNorm's statistics
  in["src"] = src;
  in["tgt"] = tgt;
  in["src_kpm"] = src_kpm;
  in["tgt_kpm"] = tgt_kpm;
  in["mem_kpm"] = src_kpm;
  return in;
}

class TransformerVsTorch : public ::testing::TestWithParam<Case> {};

TEST_P(TransformerVsTorch, EvalOutputsWithMasks) {
  const Case c = GetParam();
  const int64_t B = 3, S = 7, T = 6, E = 16;
  const TwoByTwo m = two_by_two(c, E, 4, 24, 11);
  models::Transformer& tf = *m.tf;
  tf.eval();
  Generator g(5);
  const Tensor src = randn({B, S, E}, g), tgt = randn({B, T, E}, g);
  const std::vector<int64_t> src_len = {7, 4, 5}, tgt_len = {6, 3, 5};
  const Tensor src_kpm = pad_mask(src_len, S), tgt_kpm = pad_mask(tgt_len, T);
  auto ref = test::torch_ref("transformer.transformer", ref_inputs(tf, src, tgt, src_kpm, tgt_kpm), m.args);
  Tensor out;
  {
    NoGradGuard ng;
    out = tf.forward(src, tgt, Tensor(), models::Transformer::generate_square_subsequent_mask(T), Tensor(), src_kpm,
                     tgt_kpm, src_kpm);
  }
  double worst = 0;
  for (int64_t b = 0; b < B; ++b) {
    const auto cmp = test::compare(out.select(0, b).slice(0, 0, tgt_len[b]),
                                   ref.at("out").select(0, b).slice(0, 0, tgt_len[b]), 1e-4, 0);
    EXPECT_TRUE(cmp.ok) << "row " << b << ": " << cmp.detail;
    worst = std::max(worst, cmp.max_abs);
  }
  std::printf("[ diff ] norm_first=%d %s: max |attn - torch| = %.3g\n", int(c.norm_first),
              models::to_string(c.act).c_str(), worst);
}

TEST_P(TransformerVsTorch, TrainGradients) {
  const Case c = GetParam();
  const int64_t B = 2, S = 5, T = 4, E = 8;
  const TwoByTwo m = two_by_two(c, E, 2, 12, 21);
  models::Transformer& tf = *m.tf;
  tf.train();
  Generator g(6);
  Tensor src = randn({B, S, E}, g), tgt = randn({B, T, E}, g);
  const Tensor gy = randn({B, T, E}, g);
  const Tensor src_kpm = pad_mask({5, 3}, S), tgt_kpm = pad_mask({4, 3}, T);
  test::Tensors in = ref_inputs(tf, src, tgt, src_kpm, tgt_kpm);
  in["g"] = gy;
  auto ref = test::torch_ref("transformer.transformer", in, m.args);
  src.requires_grad_();
  tgt.requires_grad_();
  Tensor out = tf.forward(src, tgt, Tensor(), models::Transformer::generate_square_subsequent_mask(T), Tensor(),
                          src_kpm, tgt_kpm, src_kpm);
  sum(out * gy).backward();
  EXPECT_TENSOR_NEAR(out, ref.at("out"), 1e-4, 1e-4);
  double worst = 0;
  auto check = [&](const std::string& name, const Tensor& grad) {
    ASSERT_TRUE(grad.defined()) << name;
    const auto cmp = test::compare(grad, ref.at(name), 1e-4, 1e-3);
    EXPECT_TRUE(cmp.ok) << name << ": " << cmp.detail;
    worst = std::max(worst, cmp.max_abs);
  };
  check("grad.src", src.grad());
  check("grad.tgt", tgt.grad());
  for (const auto& [n, p] : tf.named_parameters()) check("grad.p." + n, p.grad());
  for (const auto& [n, b] : tf.named_buffers())   // the running statistics, updated by the batch
    EXPECT_TENSOR_NEAR(b, ref.at("buf." + n), 1e-5, 1e-5) << n;
  std::printf("[ diff ] norm_first=%d %s: max grad |attn - torch| = %.3g over %zu parameters\n", int(c.norm_first),
              models::to_string(c.act).c_str(), worst, tf.named_parameters().size());
}

INSTANTIATE_TEST_SUITE_P(Modes, TransformerVsTorch,
                         ::testing::Values(Case{false, models::Activation::relu}, Case{false, models::Activation::gelu},
                                           Case{true, models::Activation::relu}, Case{true, models::Activation::gelu},
                                           Case{false, models::Activation::relu, true},
                                           Case{true, models::Activation::gelu, true}),
                         [](const auto& info) {
                           return std::string(info.param.norm_first ? "PreNorm" : "PostNorm") +
                                  (info.param.act == models::Activation::gelu ? "Gelu" : "Relu") +
                                  (info.param.batch_norm ? "BatchNorm" : "");
                         });

TEST(Transformer, ParameterNamesAreTorchs) {
  models::Transformer tf({.d_model = 8, .nhead = 2, .num_encoder_layers = 1, .num_decoder_layers = 1,
                          .dim_feedforward = 16});
  std::set<std::string> names;
  for (const auto& [n, p] : tf.state_dict()) names.insert(n);
  for (const char* n : {"encoder.layers.0.self_attn.in_proj_weight", "encoder.layers.0.self_attn.in_proj_bias",
                        "encoder.layers.0.self_attn.out_proj.weight", "encoder.layers.0.linear1.weight",
                        "encoder.layers.0.linear2.bias", "encoder.layers.0.norm1.weight", "encoder.layers.0.norm2.bias",
                        "encoder.norm.weight", "decoder.layers.0.multihead_attn.in_proj_weight",
                        "decoder.layers.0.norm3.weight", "decoder.norm.bias"})
    EXPECT_TRUE(names.count(n)) << n;
  EXPECT_EQ(names.size(), 12u + 2u + 18u + 2u);   // encoder layer, encoder.norm, decoder layer, decoder.norm
}

TEST(Transformer, SequenceFirstEqualsBatchFirst) {
  models::TransformerOptions o{.d_model = 8, .nhead = 2, .num_encoder_layers = 1, .num_decoder_layers = 1,
                               .dim_feedforward = 16, .dropout = 0.0};
  Generator g1(3), g2(3);
  o.batch_first = true;
  models::Transformer a(o, g1);
  o.batch_first = false;
  models::Transformer b(o, g2);
  a.eval();
  b.eval();
  Generator g(4);
  const Tensor src = randn({2, 5, 8}, g), tgt = randn({2, 3, 8}, g);
  NoGradGuard ng;
  const Tensor ya = a.forward(src, tgt), yb = b.forward(src.transpose(0, 1), tgt.transpose(0, 1));
  EXPECT_TENSOR_NEAR(yb.transpose(0, 1), ya, 0, 0);
}

TEST(Transformer, BadInputsSayWhat) {
  models::Transformer tf({.d_model = 8, .nhead = 2, .num_encoder_layers = 1, .num_decoder_layers = 1,
                          .dim_feedforward = 16, .batch_first = true});
  const std::string e = error_of([&] { tf.forward(Tensor::zeros({2, 5, 6}), Tensor::zeros({2, 3, 8})); });
  EXPECT_NE(e.find("Transformer: expected src of shape (B, L, 8)"), std::string::npos) << e;
  EXPECT_THROW(models::Transformer({.d_model = 10, .nhead = 4}), Error);
}

// ------------------------------------------------------------------ sequence to sequence

std::shared_ptr<models::TransformerSeq2Seq> small_model(bool norm_first, bool share, bool tie,
                                                        const std::string& norm = "layer") {
  auto m = models::make_transformer_seq2seq({{"vocab_size", 13}, {"d_model", 16}, {"nhead", 4}, {"layers", 2},
                                             {"d_ff", 32}, {"dropout", 0.1}, {"norm_first", norm_first},
                                             {"share_embeddings", share}, {"tie_output", tie}, {"max_length", 40},
                                             {"norm", norm}});
  randomize(*m, 9);
  m->eval();
  return m;
}

TEST(TransformerSeq2Seq, CachedStepsEqualTeacherForcing) {
  for (const auto& [norm_first, norm] : std::vector<std::pair<bool, std::string>>{
           {false, "layer"}, {true, "layer"}, {false, "batch"}, {true, "batch"}}) {
    auto m = small_model(norm_first, norm_first, !norm_first, norm);
    const int64_t B = 3, S = 6, T = 37;   // T past the initial cache capacity (32): the cache grows
    Generator g(8);
    NoGradGuard ng;
    const Tensor src_pad = pad_mask({6, 3, 4}, S);
    const Tensor src = masked_fill(rand({B, S}, g) * 9.0 + 4.0, src_pad, 0.0).to(DType::i64);
    Tensor tgt = (rand({B, T}, g) * 9.0 + 4.0).to(DType::i64);
    tgt.slice(1, 0, 1).fill_(double(models::bos_id));
    const Tensor full = m->forward(src, src_pad, tgt);   // (B, T, V)
    auto st = m->start(src, src_pad);
    double worst = 0;
    for (int64_t t = 0; t < T; ++t) {
      Tensor att;
      const Tensor step = m->step(*st, tgt.select(1, t).contiguous(), &att);
      const auto cmp = test::compare(step, full.select(1, t), 1e-4, 1e-4);
      EXPECT_TRUE(cmp.ok) << "norm_first " << norm_first << " " << norm << " step " << t << ": " << cmp.detail;
      worst = std::max(worst, cmp.max_abs);
      ASSERT_EQ(att.shape(), Shape({B, S}));
      // Alignment rows sum to 1 and put no weight on padding.
      EXPECT_TENSOR_NEAR(sum(att, {1}), Tensor::ones({B}), 1e-5, 0);
      EXPECT_EQ(att.at({1, 4}), 0.0);
    }
    EXPECT_EQ(st->steps(), T);
    std::printf("[ diff ] norm_first=%d %s: max |cached step - teacher forcing| = %.3g over %lld steps\n",
                int(norm_first), norm.c_str(), worst, (long long)T);
  }
}

// forward_rows (the loss path: only non-padded positions reach the output projection) equals the
// selected rows of forward(), in values and in every parameter's gradient.
TEST(TransformerSeq2Seq, ForwardRowsEqualsSelectedLogits) {
  auto m = small_model(false, true, true);
  m->eval();   // no dropout: both passes see the same network
  const int64_t B = 3, S = 6, T = 7;
  Generator g(11);
  const Tensor src_pad = pad_mask({6, 3, 4}, S);
  const Tensor src = masked_fill(rand({B, S}, g) * 9.0 + 4.0, src_pad, 0.0).to(DType::i64);
  const Tensor tgt = (rand({B, T}, g) * 9.0 + 4.0).to(DType::i64);
  const Tensor rows = Tensor::from_vector<int64_t>({0, 1, 2, 5, 7, 8, 13, 20}, {8});
  const Tensor w = randn({8, m->vocab_size()}, g);
  auto grads = [&](const Tensor& out) {
    m->zero_grad();
    sum(out * w).backward();
    std::vector<Tensor> gs;
    for (const auto& [name, p] : m->named_parameters()) gs.push_back(p.grad().defined() ? p.grad().clone() : Tensor());
    return gs;
  };
  const Tensor full = m->forward(src, src_pad, tgt);
  const Tensor want = index_select(full.reshape({B * T, m->vocab_size()}), 0, rows);
  const auto gw = grads(want);
  const Tensor got = m->forward_rows(src, src_pad, tgt, rows);
  ASSERT_EQ(got.shape(), want.shape());
  EXPECT_TENSOR_NEAR(got, want, 1e-5, 1e-5);
  const auto gg = grads(got);
  ASSERT_EQ(gg.size(), gw.size());
  for (size_t i = 0; i < gg.size(); ++i) {
    ASSERT_EQ(gg[i].defined(), gw[i].defined()) << "parameter " << i;
    if (gg[i].defined()) EXPECT_TENSOR_NEAR(gg[i], gw[i], 1e-5, 1e-5) << "parameter " << i;
  }
}

TEST(TransformerSeq2Seq, SelectReordersRows) {
  auto m = small_model(false, true, true);
  const int64_t S = 5;
  Generator g(12);
  const Tensor src = (rand({2, S}, g) * 9.0 + 4.0).to(DType::i64);
  const Tensor src_pad = pad_mask({5, 2}, S);
  NoGradGuard ng;
  auto a = m->start(src, src_pad);
  const Tensor tok0 = Tensor::full({2}, double(models::bos_id), DType::i64);
  const Tensor tok1 = Tensor::from_vector(std::vector<int64_t>{5, 7}, {2});
  m->step(*a, tok0);
  m->step(*a, tok1);
  // Rows [1, 0, 1] of a, against a fresh state on the rearranged batch.
  const Tensor rows = Tensor::from_vector(std::vector<int64_t>{1, 0, 1}, {3});
  a->select(rows);
  EXPECT_EQ(a->batch(), 3);
  auto b = m->start(index_select(src, 0, rows), index_select(src_pad, 0, rows));
  m->step(*b, Tensor::full({3}, double(models::bos_id), DType::i64));
  m->step(*b, index_select(tok1, 0, rows));
  const Tensor next = Tensor::from_vector(std::vector<int64_t>{8, 9, 10}, {3});
  EXPECT_TENSOR_NEAR(m->step(*a, next), m->step(*b, next), 1e-5, 1e-5);
}

TEST(TransformerSeq2Seq, ConfigRoundTripAndErrors) {
  auto d = models::TransformerSeq2Seq::defaults();
  EXPECT_EQ(d["model"], "transformer");
  EXPECT_EQ(d["encoder_layers"], 6);
  EXPECT_EQ(d["d_model"], 512);
  EXPECT_EQ(d["nhead"], 8);
  EXPECT_EQ(d["d_ff"], 2048);
  EXPECT_DOUBLE_EQ(d["dropout"].get<double>(), 0.1);
  EXPECT_EQ(d["max_length"], 256);
  auto m = small_model(true, false, false);
  auto m2 = models::make_transformer_seq2seq(m->config());
  EXPECT_EQ(m2->config(), m->config());
  EXPECT_EQ(m2->num_parameters(), m->num_parameters());
  EXPECT_NO_THROW(m2->load_state_dict(m->state_dict()));
  // Tied and shared: one embedding matrix.
  auto t = small_model(false, true, true);
  EXPECT_TRUE(t->output_proj->weight.is_same(t->src_embed->weight));
  EXPECT_EQ(t->num_parameters(), m->num_parameters() - 2 * 13 * 16);
  EXPECT_EQ(error_of([&] { models::make_transformer_seq2seq({{"d_modle", 8}}); })
                .rfind("transformer config: unknown key \"d_modle\" (known: model, vocab_size, d_model, ", 0),
            0u);
  EXPECT_EQ(error_of([&] { models::make_transformer_seq2seq({{"activation", "tanh"}}); }),
            "transformer config: key \"activation\": expected one of \"relu\", \"gelu\", \"gelu_tanh\", found the "
            "string \"tanh\"");
}

}  // namespace
