// Decoding (models/decode.h): cached greedy == uncached greedy on a Transformer, beam 1 == greedy,
// batched beam search == one sentence at a time, beam search with length penalty == an independent
// Python beam search over the same weights (tests/golden/gen/decode.py), beam search beating greedy
// on a hand-built toy model, and a small Transformer learning the copy task to 100% exact match.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>

#include "attn/attn.h"
#include "attn/models/decode.h"
#include "attn/models/transformer.h"
#include "attn/ops/loss.h"
#include "attn/ops/softmax.h"
#include "attn/optim/adam.h"
#include "attn/optim/schedule.h"
#include "errors.h"
#include "torch_ref.h"

using namespace attn;
using test::error_of;
using models::bos_id;
using models::eos_id;

namespace {

Tensor pad_mask(const std::vector<int64_t>& lens, int64_t L) {
  std::vector<uint8_t> m;
  for (int64_t len : lens)
    for (int64_t i = 0; i < L; ++i) m.push_back(i >= len ? 1 : 0);
  return Tensor::from_vector(m, {int64_t(lens.size()), L});
}

// A small Transformer with its default (random) initialisation, except that the output rows of
// pad, unk and bos are zero (a random model otherwise tends to repeat bos for ever): rows then end
// at eos at different steps.
std::shared_ptr<models::TransformerSeq2Seq> random_model(uint64_t seed) {
  Generator g(seed);
  auto m = std::make_shared<models::TransformerSeq2Seq>(
      models::TransformerSeq2SeqConfig::from_json({{"vocab_size", 15}, {"d_model", 16}, {"nhead", 2}, {"layers", 2},
                                                   {"d_ff", 32}, {"max_length", 30}, {"tie_output", false}}),
      g);
  NoGradGuard ng;
  m->output_proj->weight.slice(0, 0, 3).zero_();
  m->eval();
  return m;
}

struct Batch {
  Tensor src, src_pad;
};

Batch random_src(int64_t B, int64_t S, uint64_t seed) {
  Generator g(seed);
  std::vector<int64_t> lens;
  for (int64_t b = 0; b < B; ++b) lens.push_back(S - (b * 3) % S / 2);
  Tensor pad = pad_mask(lens, S);
  Tensor src = masked_fill(rand({B, S}, g) * 11.0 + 4.0, pad, 0.0).to(DType::i64);
  return {src, pad};
}

TEST(Decode, CachedGreedyEqualsUncached) {
  auto m = random_model(1);
  const Batch x = random_src(6, 7, 2);
  const auto a = models::greedy_decode(*m, x.src, x.src_pad, 25, /*with_attention=*/true);
  const auto b = models::greedy_decode_uncached(*m, x.src, x.src_pad, 25);
  int64_t ended = 0;
  for (size_t r = 0; r < a.tokens.size(); ++r) {
    EXPECT_EQ(a.tokens[r], b.tokens[r]) << "row " << r;
    EXPECT_NEAR(a.scores[r], b.scores[r], 1e-4) << "row " << r;
    ended += int64_t(a.tokens[r].size()) < 25;
    // One attention row per generated token (eos included), each a distribution over the source.
    const int64_t steps = std::min<int64_t>(int64_t(a.tokens[r].size()) + 1, 25);
    ASSERT_EQ(a.attention[r].shape(), Shape({steps, 7}));
    EXPECT_TENSOR_NEAR(sum(a.attention[r], {1}), Tensor::ones({steps}), 1e-5, 0);
  }
  std::printf("[ rows ] %lld of %zu rows ended at eos\n", (long long)ended, a.tokens.size());
  EXPECT_GT(ended, 0) << "no row reached eos: the test does not exercise row dropping";
}

TEST(Decode, BeamOneEqualsGreedy) {
  auto m = random_model(3);
  const Batch x = random_src(5, 6, 4);
  const auto g = models::greedy_decode(*m, x.src, x.src_pad, 20);
  const auto b = models::beam_search(*m, x.src, x.src_pad, {.beam = 1, .length_penalty = 0.0, .max_len = 20});
  for (size_t r = 0; r < g.tokens.size(); ++r) {
    EXPECT_EQ(b.tokens[r], g.tokens[r]) << "row " << r;
    EXPECT_NEAR(b.scores[r], g.scores[r], 1e-4) << "row " << r;
  }
}

TEST(Decode, BatchedBeamEqualsOneSentenceAtATime) {
  auto m = random_model(5);
  const Batch x = random_src(4, 6, 6);
  const models::BeamSearchOptions o{.beam = 3, .length_penalty = 0.6, .max_len = 20, .with_attention = true};
  const auto all = models::beam_search(*m, x.src, x.src_pad, o);
  for (int64_t r = 0; r < 4; ++r) {
    const auto one = models::beam_search(*m, x.src.slice(0, r, r + 1), x.src_pad.slice(0, r, r + 1), o);
    EXPECT_EQ(all.tokens[size_t(r)], one.tokens[0]) << "row " << r;
    EXPECT_NEAR(all.scores[size_t(r)], one.scores[0], 1e-5) << "row " << r;
    EXPECT_TENSOR_NEAR(all.attention[size_t(r)], one.attention[0], 1e-5, 1e-5) << "row " << r;
  }
}

// Decoding needs only the Seq2SeqModel contract: the registry's models, the RNN one included.
TEST(Decode, RegistryModelsCachedEqualsUncached) {
  const Batch x = random_src(4, 6, 9);
  for (const auto& [name, cfg] : std::vector<std::pair<std::string, nlohmann::json>>{
           {"transformer", {{"vocab_size", 15}, {"d_model", 16}, {"nhead", 2}, {"layers", 1}, {"d_ff", 32}}},
           {"rnn-attention", {{"vocab_size", 15}, {"emb_dim", 16}, {"hidden", 16}, {"layers", 1}}}}) {
    auto m = models::create_seq2seq(name, cfg);
    m->eval();
    const auto a = models::greedy_decode(*m, x.src, x.src_pad, 12);
    const auto b = models::greedy_decode_uncached(*m, x.src, x.src_pad, 12);
    EXPECT_EQ(a.tokens, b.tokens) << name;
    const models::BeamSearchOptions o{.beam = 3, .length_penalty = 0.6, .max_len = 12};
    const auto all = models::beam_search(*m, x.src, x.src_pad, o);
    for (int64_t r = 0; r < 4; ++r) {
      const auto one = models::beam_search(*m, x.src.slice(0, r, r + 1), x.src_pad.slice(0, r, r + 1), o);
      EXPECT_EQ(all.tokens[size_t(r)], one.tokens[0]) << name << " row " << r;
    }
  }
}

// Against an independent beam search (tests/golden/gen/decode.py): the same weights in
// torch.nn.Transformer, each sentence decoded alone on its whole prefix every step, the search
// written from decode.h's description. Beam 1..5, length penalty 0..3; max_len 12 so that some
// searches end at eos, some by the early stop and some at the cap.
TEST(Decode, BeamSearchEqualsAnIndependentPythonBeamSearch) {
  auto m = random_model(11);
  const Batch x = random_src(4, 6, 12);
  const int64_t max_len = 12;
  const std::vector<int64_t> beams = {1, 2, 3, 4, 5};
  const std::vector<double> alphas = {0.0, 0.6, 1.0, 2.0, 3.0};
  test::Tensors in = {{"src", x.src}, {"src_pad", x.src_pad}};
  for (const auto& [name, p] : m->named_parameters()) in["p." + name] = p;
  const auto ref = test::torch_ref("decode.beam_search", in,
                                   {{"d_model", 16}, {"nhead", 2}, {"layers", 2}, {"d_ff", 32}, {"max_len", max_len},
                                    {"beams", beams}, {"alphas", alphas}});
  {  // The two models agree before any search: the first step's log-probabilities.
    NoGradGuard ng;
    auto st = m->start(x.src, x.src_pad);
    const Tensor lp0 = log_softmax(m->step(*st, Tensor::full({4}, double(bos_id), DType::i64)), -1);
    EXPECT_TENSOR_NEAR(lp0, ref.at("logp0"), 1e-5, 1e-5);
  }
  int64_t at_cap = 0, before_cap = 0, differ_from_greedy = 0;
  const auto greedy = models::greedy_decode(*m, x.src, x.src_pad, max_len);
  for (int64_t K : beams)
    for (size_t i = 0; i < alphas.size(); ++i) {
      const auto r = models::beam_search(*m, x.src, x.src_pad, {.beam = K, .length_penalty = alphas[i], .max_len = max_len});
      const std::string key = std::to_string(K) + "." + std::to_string(i);
      const Tensor toks = ref.at("tokens." + key), scores = ref.at("scores." + key);
      for (int64_t b = 0; b < 4; ++b) {
        std::vector<int64_t> want;
        for (int64_t t = 0; t < max_len && toks.at({b, t}) >= 0; ++t) want.push_back(int64_t(toks.at({b, t})));
        EXPECT_EQ(r.tokens[size_t(b)], want) << "beam " << K << ", alpha " << alphas[i] << ", row " << b;
        EXPECT_NEAR(r.scores[size_t(b)], scores.at({b}), 1e-4) << "beam " << K << ", alpha " << alphas[i] << ", row " << b;
        (int64_t(want.size()) == max_len ? at_cap : before_cap) += 1;
        differ_from_greedy += want != greedy.tokens[size_t(b)];
      }
    }
  std::printf("  %lld results ended before the cap, %lld at it; %lld differ from greedy\n", (long long)before_cap,
              (long long)at_cap, (long long)differ_from_greedy);
  // The comparison covers both endings and searches that find more than greedy does.
  EXPECT_GT(before_cap, 0);
  EXPECT_GT(at_cap, 0);
  EXPECT_GT(differ_from_greedy, 0);
}

// ------------------------------------------------------------------ toy model

// Next-token distributions fixed by the prefix (ids: A = 4, B = 5, 6..9 fillers):
//   after bos: A .5, B .4, each filler .025;  after A: each filler .25;  after B: eos .9, fillers .025;
//   anything else: eos .96, fillers .01.
// Greedy takes A (.5) then a filler (.25) then eos (.96): p = .12. The best sentence is B eos: p = .36.
class ToyState : public models::DecodeState {
 public:
  std::vector<std::vector<int64_t>> prefix;   // per row, without bos
  int64_t t = 0;
  void select(const Tensor& rows) override {
    std::vector<std::vector<int64_t>> p;
    for (int64_t r : rows.to_vector<int64_t>()) p.push_back(prefix[size_t(r)]);
    prefix = std::move(p);
  }
  int64_t batch() const override { return int64_t(prefix.size()); }
  int64_t steps() const override { return t; }
};

class ToyModel : public models::Seq2SeqModel {
 public:
  static constexpr int64_t V = 10;
  static std::vector<float> dist(const std::vector<int64_t>& prefix) {
    std::vector<float> p(V, 1e-9f);
    auto fill = [&](float f) { for (int64_t v = 6; v < 10; ++v) p[size_t(v)] = f; };
    if (prefix.empty()) { p[4] = .5f; p[5] = .4f; fill(.025f); }
    else if (prefix == std::vector<int64_t>{4}) fill(.25f);
    else if (prefix == std::vector<int64_t>{5}) { p[eos_id] = .9f; fill(.025f); }
    else { p[eos_id] = .96f; fill(.01f); }
    for (float& x : p) x = std::log(x);
    return p;
  }
  Tensor forward(const Tensor& src, const Tensor& src_pad, const Tensor& tgt_in) override {
    const int64_t B = tgt_in.size(0), T = tgt_in.size(1);
    const auto ids = tgt_in.to_vector<int64_t>();
    std::vector<float> out;
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < T; ++t) {
        const auto d = dist(std::vector<int64_t>(ids.begin() + b * T + 1, ids.begin() + b * T + t + 1));
        out.insert(out.end(), d.begin(), d.end());
      }
    return Tensor::from_vector(out, {B, T, V});
  }
  std::unique_ptr<models::DecodeState> start(const Tensor& src, const Tensor& src_pad) override {
    auto s = std::make_unique<ToyState>();
    s->prefix.resize(size_t(src.size(0)));
    return s;
  }
  Tensor step(models::DecodeState& state, const Tensor& tokens, Tensor* attention) override {
    auto& s = static_cast<ToyState&>(state);
    const auto tok = tokens.to_vector<int64_t>();
    std::vector<float> out;
    for (size_t r = 0; r < tok.size(); ++r) {
      if (tok[r] != bos_id) s.prefix[r].push_back(tok[r]);
      const auto d = dist(s.prefix[r]);
      out.insert(out.end(), d.begin(), d.end());
    }
    ++s.t;
    if (attention) *attention = Tensor::full({int64_t(tok.size()), 1}, 1.0);
    return Tensor::from_vector(out, {int64_t(tok.size()), V});
  }
  int64_t vocab_size() const override { return V; }
  int64_t max_length() const override { return 8; }
  nlohmann::json config() const override { return {{"model", "toy"}}; }
};

TEST(Decode, BeamBeatsGreedyOnToyModel) {
  ToyModel m;
  const Tensor src = Tensor::full({2, 1}, 4.0, DType::i64);
  const auto g = models::greedy_decode(m, src, Tensor(), 0);
  EXPECT_EQ(g.tokens[0], (std::vector<int64_t>{4, 6}));
  EXPECT_NEAR(g.scores[0], std::log(.5 * .25 * .96), 1e-5);
  const auto u = models::greedy_decode_uncached(m, src, Tensor(), 0);
  EXPECT_EQ(u.tokens, g.tokens);
  for (double alpha : {0.0, 0.6, 1.0}) {
    const auto b = models::beam_search(m, src, Tensor(), {.beam = 2, .length_penalty = alpha});
    for (int r = 0; r < 2; ++r) {
      EXPECT_EQ(b.tokens[size_t(r)], (std::vector<int64_t>{5})) << "alpha " << alpha;
      // B eos: two tokens counted by the length penalty.
      EXPECT_NEAR(b.scores[size_t(r)], std::log(.36) / std::pow(7.0 / 6.0, alpha), 1e-5) << "alpha " << alpha;
    }
  }
  const auto b1 = models::beam_search(m, src, Tensor(), {.beam = 1, .length_penalty = 0.0});
  EXPECT_EQ(b1.tokens, g.tokens);
}

TEST(Decode, BadArgumentsSayWhat) {
  ToyModel m;
  EXPECT_EQ(error_of([&] { models::beam_search(m, Tensor::zeros({2, 3}, DType::i64), Tensor(), {.beam = 0}); }),
            "beam_search: expected beam >= 1, got 0");
  EXPECT_THROW(models::greedy_decode(m, Tensor::zeros({2, 3}), Tensor(), 5), Error);   // f32 ids
}

// ------------------------------------------------------------------ the copy task

// Random sequences of 6..10 symbols from ids 4..23 (20 symbols); the target is the source.
struct CopyBatch {
  Tensor src, src_pad, tgt_in, tgt_out;
  std::vector<std::vector<int64_t>> seqs;
};

CopyBatch copy_batch(int64_t B, Generator& g) {
  const int64_t L = 10;
  const auto u = rand({B, L + 1}, g).to_vector<float>();
  std::vector<int64_t> src, tin, tout;
  std::vector<uint8_t> pad;
  CopyBatch cb;
  for (int64_t b = 0; b < B; ++b) {
    const int64_t len = 6 + int64_t(u[size_t(b * (L + 1))] * 5);
    std::vector<int64_t> s;
    for (int64_t i = 0; i < len; ++i) s.push_back(4 + int64_t(u[size_t(b * (L + 1) + 1 + i)] * 20));
    for (int64_t i = 0; i < L; ++i) {
      src.push_back(i < len ? s[size_t(i)] : models::pad_id);
      pad.push_back(i < len ? 0 : 1);
    }
    for (int64_t i = 0; i <= L; ++i) {
      tin.push_back(i == 0 ? bos_id : i <= len ? s[size_t(i - 1)] : models::pad_id);
      tout.push_back(i < len ? s[size_t(i)] : i == len ? eos_id : models::pad_id);
    }
    cb.seqs.push_back(s);
  }
  cb.src = Tensor::from_vector(src, {B, L});
  cb.src_pad = Tensor::from_vector(pad, {B, L});
  cb.tgt_in = Tensor::from_vector(tin, {B, L + 1});
  cb.tgt_out = Tensor::from_vector(tout, {B, L + 1});
  return cb;
}

// "Slow": a convergence run (up to 1,500 steps), left out of the sanitizer stage (ATTN_TEST_SLOW=0),
// where it took 137 s of that stage's ~880 CPU-s on a Zen 3 host (2026-12-01); the other Decode tests
// run the same greedy, cached and beam code under ASan + UBSan.
TEST(Decode, TransformerLearnsCopyTaskSlow) {
  // One thread: the matrices are tiny (64 x 11 tokens, d 64), so threads only add synchronisation;
  // on the shared 2-core development machine two OpenMP threads made this 16x slower (196 s vs
  // 12 s, load average 9).
  const int threads = get_num_threads();
  set_num_threads(1);
  struct Restore {
    int n;
    ~Restore() { set_num_threads(n); }
  } restore{threads};
  Generator g(42);
  auto m = std::make_shared<models::TransformerSeq2Seq>(
      models::TransformerSeq2SeqConfig::from_json({{"vocab_size", 24}, {"d_model", 64}, {"nhead", 4}, {"layers", 2},
                                                   {"d_ff", 128}, {"dropout", 0.0}, {"max_length", 16}}),
      g);
  optim::AdamW opt(optim::param_groups_weight_decay(*m, 0.01), {.beta2 = 0.98, .eps = 1e-9, .weight_decay = 0.01});
  optim::InverseSqrt sched({.d_model = 64, .warmup_steps = 60, .scale = 0.2});
  Generator data(7);
  const CopyBatch test = copy_batch(100, data);
  const auto t0 = std::chrono::steady_clock::now();
  double acc = 0, loss_v = 0;
  int64_t step = 0;
  for (; step < 1500; ++step) {
    m->train();
    const CopyBatch b = copy_batch(64, data);
    sched.apply(opt, step + 1);
    const Tensor logits = m->forward(b.src, b.src_pad, b.tgt_in);
    const Tensor loss = cross_entropy(logits.reshape({-1, 24}), b.tgt_out.reshape({-1}),
                                      {.label_smoothing = 0.1, .ignore_index = models::pad_id});
    opt.zero_grad();
    loss.backward();
    opt.step();
    loss_v = loss.item();
    if ((step + 1) % 50 == 0) {
      m->eval();
      const auto r = models::greedy_decode(*m, test.src, test.src_pad, 12);
      int64_t exact = 0;
      for (size_t i = 0; i < r.tokens.size(); ++i) exact += r.tokens[i] == test.seqs[i];
      acc = double(exact) / double(r.tokens.size());
      if (acc == 1.0) break;
    }
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("[ copy ] %lld steps, %.1f s, loss %.3f, greedy exact match %.0f%%\n", (long long)(step + 1), secs,
              loss_v, 100 * acc);
  EXPECT_EQ(acc, 1.0);
  // Beam search agrees on a learnt task.
  const auto bs = models::beam_search(*m, test.src.slice(0, 0, 10), test.src_pad.slice(0, 0, 10), {.beam = 4});
  for (size_t i = 0; i < 10; ++i) EXPECT_EQ(bs.tokens[i], test.seqs[i]) << "row " << i;
}

}  // namespace
