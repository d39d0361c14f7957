// Greedy and beam-search decoding over the Seq2SeqModel contract (see models/decode.h).
// Glossary: B sentences, K beam, S source length, V vocabulary.
#include "attn/models/decode.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

#include "attn/autograd/grad_mode.h"
#include "attn/ops/indexing.h"
#include "attn/ops/softmax.h"

namespace attn::models {

namespace {

constexpr double neg_inf = -std::numeric_limits<double>::infinity();

int64_t resolve_max_len(const Seq2SeqModel& model, int64_t max_len, const char* op) {
  ATTN_CHECK(max_len >= 0, op, ": expected max_len >= 0 (0: the model's max_length), got ", max_len);
  const int64_t cap = model.max_length();
  return max_len == 0 ? cap : std::min(max_len, cap);
}

void check_inputs(const Tensor& src, const Tensor& src_pad, const char* op) {
  ATTN_CHECK(src.defined() && src.dim() == 2 && src.dtype() == DType::i64, op,
             ": expected src of shape (B, S) and dtype i64, got ", src.defined() ? src.shape() : Shape{});
  if (src_pad.defined())
    ATTN_CHECK(src_pad.dtype() == DType::u8 && src_pad.shape() == src.shape(), op, ": expected src_pad u8 of shape ",
               src.shape(), ", got ", dtype_name(src_pad.dtype()), " ", src_pad.shape());
}

Tensor ids(const std::vector<int64_t>& v) { return Tensor::from_vector(v, {int64_t(v.size())}); }

// Log-probabilities of (N, V) logits as one host vector, row-major.
std::vector<float> log_probs(const Tensor& logits) { return log_softmax(logits, -1).to_vector<float>(); }

int64_t argmax_row(const float* p, int64_t V) {
  int64_t best = 0;
  for (int64_t v = 1; v < V; ++v)
    if (p[v] > p[best]) best = v;   // first maximum, as torch.argmax
  return best;
}

Tensor attention_tensor(const std::vector<float>& rows, int64_t S) {
  return Tensor::from_vector(rows, {int64_t(rows.size()) / std::max<int64_t>(S, 1), S});
}

// The greedy loop shared by the cached and the uncached decoders. step(active, res, att) gives the
// (N, V) logits of the rows `active` (original indices) whose tokens so far are in res.tokens;
// keep(positions) is told which of them are still running after a step drops some.
using StepFn = std::function<Tensor(const std::vector<int64_t>&, const DecodeResult&, Tensor*)>;
using KeepFn = std::function<void(const std::vector<int64_t>&)>;

DecodeResult greedy_loop(int64_t B, int64_t S, int64_t max_len, bool with_attention, const StepFn& step,
                         const KeepFn& keep_rows) {
  DecodeResult res;
  res.tokens.resize(static_cast<size_t>(B));
  res.scores.assign(size_t(B), 0.0);
  std::vector<std::vector<float>> att(static_cast<size_t>(B));
  std::vector<int64_t> active(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b) active[size_t(b)] = b;
  for (int64_t t = 0; t < max_len && !active.empty(); ++t) {
    Tensor a;
    const Tensor logits = step(active, res, with_attention ? &a : nullptr);
    const int64_t n = int64_t(active.size()), V = logits.size(1);
    const std::vector<float> lp = log_probs(logits);
    const std::vector<float> av = with_attention ? a.to_vector<float>() : std::vector<float>();
    std::vector<int64_t> keep;   // positions in `active` still running
    for (int64_t i = 0; i < n; ++i) {
      const int64_t r = active[size_t(i)];
      const float* p = lp.data() + i * V;
      const int64_t tok = argmax_row(p, V);
      res.scores[size_t(r)] += p[tok];
      if (with_attention) att[size_t(r)].insert(att[size_t(r)].end(), av.begin() + i * S, av.begin() + (i + 1) * S);
      if (tok == eos_id) continue;
      res.tokens[size_t(r)].push_back(tok);
      keep.push_back(i);
    }
    if (int64_t(keep.size()) < n) {
      std::vector<int64_t> still;
      for (int64_t i : keep) still.push_back(active[size_t(i)]);
      active = std::move(still);
      if (!active.empty()) keep_rows(keep);
    }
  }
  if (with_attention)
    for (int64_t b = 0; b < B; ++b) res.attention.push_back(attention_tensor(att[size_t(b)], S));
  return res;
}

}  // namespace

DecodeResult greedy_decode(Seq2SeqModel& model, const Tensor& src, const Tensor& src_pad, int64_t max_len,
                           bool with_attention) {
  NoGradGuard ng;
  check_inputs(src, src_pad, "greedy_decode");
  max_len = resolve_max_len(model, max_len, "greedy_decode");
  std::unique_ptr<DecodeState> st = model.start(src, src_pad);
  auto step = [&](const std::vector<int64_t>& active, const DecodeResult& res, Tensor* a) {
    std::vector<int64_t> last;   // each row's latest token, bos before any
    for (int64_t r : active) last.push_back(res.tokens[size_t(r)].empty() ? bos_id : res.tokens[size_t(r)].back());
    return model.step(*st, ids(last), a);
  };
  return greedy_loop(src.size(0), src.size(1), max_len, with_attention, step,
                     [&](const std::vector<int64_t>& keep) { st->select(ids(keep)); });
}

DecodeResult greedy_decode_uncached(Seq2SeqModel& model, const Tensor& src, const Tensor& src_pad, int64_t max_len) {
  NoGradGuard ng;
  check_inputs(src, src_pad, "greedy_decode_uncached");
  max_len = resolve_max_len(model, max_len, "greedy_decode_uncached");
  auto step = [&](const std::vector<int64_t>& active, const DecodeResult& res, Tensor*) {
    const Tensor rows = ids(active);
    const size_t t = res.tokens[size_t(active[0])].size();   // every active row has t tokens
    std::vector<int64_t> prefix;
    for (int64_t r : active) {
      prefix.push_back(bos_id);
      prefix.insert(prefix.end(), res.tokens[size_t(r)].begin(), res.tokens[size_t(r)].end());
    }
    const Tensor tgt_in = Tensor::from_vector(prefix, {int64_t(active.size()), int64_t(t + 1)});
    const Tensor logits = model.forward(index_select(src, 0, rows),
                                        src_pad.defined() ? index_select(src_pad, 0, rows) : Tensor(), tgt_in);
    return logits.select(1, int64_t(t)).contiguous();
  };
  return greedy_loop(src.size(0), src.size(1), max_len, false, step, [](const std::vector<int64_t>&) {});
}

// ------------------------------------------------------------------ beam search

namespace {

struct Hyp {
  std::vector<int64_t> tokens;   // without bos / eos
  double sum = 0;                // sum of log-probabilities
  std::vector<float> att;        // (len, S) rows when asked
};

struct Finished {
  double score;
  Hyp hyp;
};

double length_penalty(double len, double alpha) { return std::pow((5.0 + len) / 6.0, alpha); }

}  // namespace

namespace {

struct Cand {
  double sum;
  int64_t k, v;
};

// Every extension of the live hypotheses (log-probabilities `lp`, K rows of V), the best 2K first
// (ties: lower hypothesis, then lower token): how many are ranked.
size_t rank_candidates(const std::vector<Hyp>& hyps, const float* lp, int64_t V, std::vector<Cand>& cands) {
  const auto K = int64_t(hyps.size());
  cands.clear();
  for (int64_t k = 0; k < K; ++k) {
    const double base = hyps[size_t(k)].sum;
    if (base == neg_inf) continue;
    const float* p = lp + k * V;
    for (int64_t v = 0; v < V; ++v) cands.push_back({base + p[v], k, v});
  }
  const size_t top = std::min(cands.size(), size_t(2 * K));
  std::partial_sort(cands.begin(), cands.begin() + top, cands.end(), [](const Cand& x, const Cand& y) {
    return x.sum > y.sum || (x.sum == y.sum && (x.k < y.k || (x.k == y.k && x.v < y.v)));
  });
  return top;
}

// The best finished hypothesis of each sentence (each list sorted best first).
DecodeResult best_of_finished(const std::vector<std::vector<Finished>>& fin, int64_t S, bool with_attention) {
  DecodeResult res;
  for (size_t b = 0; b < fin.size(); ++b) {
    const auto& f = fin[b];
    ATTN_CHECK(!f.empty(), "beam_search: no hypothesis finished for row ", b);
    res.tokens.push_back(f.front().hyp.tokens);
    res.scores.push_back(f.front().score);
    if (with_attention) res.attention.push_back(attention_tensor(f.front().hyp.att, S));
  }
  return res;
}

}  // namespace

DecodeResult beam_search(Seq2SeqModel& model, const Tensor& src, const Tensor& src_pad, const BeamSearchOptions& o) {
  NoGradGuard ng;
  check_inputs(src, src_pad, "beam_search");
  ATTN_CHECK(o.beam >= 1, "beam_search: expected beam >= 1, got ", o.beam);
  ATTN_CHECK(o.length_penalty >= 0, "beam_search: expected length_penalty (alpha) >= 0, got ", o.length_penalty);
  const int64_t max_len = resolve_max_len(model, o.max_len, "beam_search");
  const int64_t B = src.size(0), S = src.size(1), K = o.beam, V = model.vocab_size();
  const double alpha = o.length_penalty;
  std::unique_ptr<DecodeState> st = model.start(src, src_pad);
  {
    std::vector<int64_t> rows;   // K copies of each sentence, hypotheses of sentence b at b·K .. b·K + K-1
    for (int64_t b = 0; b < B; ++b)
      for (int64_t k = 0; k < K; ++k) rows.push_back(b);
    st->select(ids(rows));
  }
  // live[b][k]: hypothesis k of sentence b; at the start only hypothesis 0 is real.
  std::vector<std::vector<Hyp>> live(static_cast<size_t>(B), std::vector<Hyp>(static_cast<size_t>(K)));
  for (auto& l : live)
    for (size_t k = 1; k < l.size(); ++k) l[k].sum = neg_inf;
  std::vector<std::vector<Finished>> fin(static_cast<size_t>(B));
  std::vector<int64_t> active(static_cast<size_t>(B));   // sentences still running, in state order
  for (int64_t b = 0; b < B; ++b) active[size_t(b)] = b;

  for (int64_t t = 0; t < max_len && !active.empty(); ++t) {
    std::vector<int64_t> last;
    for (int64_t b : active)
      for (const Hyp& h : live[size_t(b)]) last.push_back(h.tokens.empty() ? bos_id : h.tokens.back());
    Tensor a;
    const Tensor logits = model.step(*st, ids(last), o.with_attention ? &a : nullptr);
    ATTN_CHECK(logits.size(1) == V, "beam_search: the model returned logits of shape ", logits.shape(),
               ", expected (", last.size(), ", ", V, ")");
    const std::vector<float> lp = log_probs(logits);
    const std::vector<float> av = o.with_attention ? a.to_vector<float>() : std::vector<float>();
    const bool final_step = t + 1 == max_len;
    std::vector<int64_t> still, parents;   // sentences continuing, and their new hypotheses' state rows
    std::vector<Cand> cands;
    for (size_t i = 0; i < active.size(); ++i) {
      const int64_t b = active[i];
      auto& hyps = live[size_t(b)];
      const size_t top = rank_candidates(hyps, lp.data() + int64_t(i) * K * V, V, cands);
      std::vector<Hyp> next;
      std::vector<int64_t> next_parent;
      auto extend = [&](const Cand& c, bool with_token) {
        const Hyp& h = hyps[size_t(c.k)];
        Hyp n;
        n.tokens = h.tokens;
        if (with_token) n.tokens.push_back(c.v);
        n.sum = c.sum;
        if (o.with_attention) {
          n.att = h.att;
          const auto row = av.begin() + (int64_t(i) * K + c.k) * S;
          n.att.insert(n.att.end(), row, row + S);
        }
        return n;
      };
      for (size_t r = 0; r < top; ++r) {
        const Cand& c = cands[r];
        if (c.v == eos_id) {
          if (int64_t(r) < K) {
            Hyp h = extend(c, false);
            fin[size_t(b)].push_back({c.sum / length_penalty(double(h.tokens.size() + 1), alpha), std::move(h)});
          }
        } else if (int64_t(next.size()) < K) {
          next.push_back(extend(c, true));
          next_parent.push_back(int64_t(i) * K + c.k);
        }
        if (int64_t(next.size()) == K && int64_t(r) >= K - 1) break;
      }
      auto& f = fin[size_t(b)];
      std::sort(f.begin(), f.end(), [](const Finished& x, const Finished& y) { return x.score > y.score; });
      bool done = final_step || next.empty();
      if (!done && int64_t(f.size()) >= K) {
        const double best_possible = next.front().sum / length_penalty(double(max_len), alpha);
        done = f[size_t(K - 1)].score >= best_possible;
      }
      if (done) {
        if (final_step)
          for (Hyp& h : next) {
            const double sc = h.sum / length_penalty(double(h.tokens.size()), alpha);
            f.push_back({sc, std::move(h)});
          }
        std::stable_sort(f.begin(), f.end(), [](const Finished& x, const Finished& y) { return x.score > y.score; });
        continue;
      }
      while (int64_t(next.size()) < K) {   // fewer than K continuations: pad with dead copies
        Hyp dead = next.front();
        dead.sum = neg_inf;
        next.push_back(std::move(dead));
        next_parent.push_back(next_parent.front());
      }
      hyps = std::move(next);
      still.push_back(b);
      parents.insert(parents.end(), next_parent.begin(), next_parent.end());
    }
    active = std::move(still);
    if (!active.empty()) st->select(ids(parents));
  }

  return best_of_finished(fin, S, o.with_attention);
}

}  // namespace attn::models
