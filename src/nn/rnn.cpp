// nn::GRU / LSTM / GRUCell / LSTMCell: torch.nn's recurrent layers on attn's ops. Per layer and
// direction, the input projections of all T steps are one GEMM (x W_ihᵀ + b_ih) recorded by autograd
// as usual; the recurrence over the steps is one autograd node (RecurrenceNode) whose backward is
// backpropagation through time written with ops, ending in one GEMM for dW_hh. The cells compose
// plain ops (one step, nothing to fuse). Variable lengths follow torch's packed sequences by
// masking: a padded step leaves the state as it was (so the reverse direction starts from h0 at each
// row's last valid step) and outputs zero.
#include "attn/nn/rnn.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "attn/autograd/grad_mode.h"
#include "attn/autograd/node.h"
#include "attn/nn/init.h"
#include "attn/ops/combine.h"
#include "attn/ops/dropout.h"
#include "attn/ops/elementwise.h"
#include "attn/ops/indexing.h"
#include "attn/ops/matmul.h"
#include "attn/ops/reduce.h"

namespace attn::nn {

namespace {

// One step's gate arithmetic given the two projections (biases included), for the cells:
// GRU gi, gh (B, 3H), h (B, H) -> h';  LSTM gates = gi + gh (B, 4H), c (B, H) -> {h', c'}.
Tensor gru_update(const Tensor& gi, const Tensor& gh, const Tensor& h) {
  const int64_t H = h.size(-1);
  const Tensor rz = sigmoid(gi.narrow(1, 0, 2 * H) + gh.narrow(1, 0, 2 * H));   // (B, 2H): r, z
  const Tensor r = rz.narrow(1, 0, H), z = rz.narrow(1, H, H);
  const Tensor n = tanh(gi.narrow(1, 2 * H, H) + r * gh.narrow(1, 2 * H, H));
  return n + z * (h - n);   // (1 - z) n + z h
}

std::pair<Tensor, Tensor> lstm_update(const Tensor& gates, const Tensor& c) {
  const int64_t H = c.size(-1);
  const Tensor ifg = sigmoid(gates.narrow(1, 0, 2 * H));   // i, f
  const Tensor g = tanh(gates.narrow(1, 2 * H, H));
  const Tensor o = sigmoid(gates.narrow(1, 3 * H, H));
  const Tensor c2 = ifg.narrow(1, H, H) * c + ifg.narrow(1, 0, H) * g;
  return {o * tanh(c2), c2};
}

const char* mode_name(RnnMode m) { return m == RnnMode::gru ? "GRU" : "LSTM"; }
int64_t gates(RnnMode m) { return m == RnnMode::gru ? 3 : 4; }

void init_uniform(const std::vector<Tensor*>& ps, int64_t hidden, Generator& g) {
  const double k = 1.0 / std::sqrt(double(hidden));
  for (Tensor* p : ps)
    if (p->defined()) init::uniform_(*p, g, -k, k);
}

void check_state(const char* op, const char* name, const Tensor& s, const Shape& want, DType dt) {
  if (!s.defined()) return;
  ATTN_CHECK(s.shape() == want, op, ": expected ", name, " of shape ", want, ", got ", s.shape());
  ATTN_CHECK(s.dtype() == dt, op, ": expected ", name, " of dtype ", dtype_name(dt), ", got ", dtype_name(s.dtype()));
}

}  // namespace

// ---------------------------------------------------------------- one layer, one direction

namespace {

// The recurrence of one layer and direction over all steps as ONE autograd node (why: with one
// node per op, every step's select() of the input projections would scatter a full (T, B, G·H)
// zero tensor in backward, O(T²), and W_hh would get T separate gradient GEMMs).
// Inputs: xp (T, B, G·H) or (B, T, G·H) (time along tdim; x W_ihᵀ + b_ih), h0, c0 (B, H),
// w_hh (G·H, H), b_hh (G·H) (undefined: none). Output Y (T + 1 (+1 LSTM), B, H): rows 0..T-1 the
// outputs (0 past a row's length), row T the final h, row T + 1 the final c.
// Saved per step: the previous state and the gate activations; backward runs the steps in reverse
// with ops, writes each step's gate gradients into one (T, B, G·H) buffer and computes dW_hh and
// db_hh from it with one GEMM and one reduction.
struct RecurrenceNode : autograd::Node {
  RnnMode mode = RnnMode::gru;
  bool reverse = false;
  int64_t tdim = 0, T = 0, H = 0, min_len = 0;
  Shape xp_shape;
  Tensor pad;                          // (T, B, 1) u8 or undefined
  Tensor w_hh;
  bool has_b_hh = false;
  Tensor hprev;                        // (T, B, H): the state entering step t
  std::vector<Tensor> a, b, c, d, e;   // GRU: r, z, n, W_hn h + b_hn; LSTM: i, f, g, o, c_prev
  std::vector<Tensor> tc;              // LSTM: tanh(c_t)
  const char* name() const override { return "rnn_recurrence"; }
  void release() override {
    w_hh = hprev = pad = Tensor();
    a.clear(), b.clear(), c.clear(), d.clear(), e.clear(), tc.clear();
  }

  std::vector<Tensor> backward(const Tensor& dY) override {
    const bool lstm = mode == RnnMode::lstm;
    const int64_t B = dY.size(1), GH = w_hh.size(0);
    Tensor dxp = Tensor::empty(xp_shape, dY.dtype());
    Tensor dgh_all = Tensor::empty({T, B, GH}, dY.dtype());
    Tensor dh = dY.select(0, T), dc = lstm ? dY.select(0, T + 1) : Tensor();
    for (int64_t s = T - 1; s >= 0; --s) {
      const int64_t t = reverse ? T - 1 - s : s;   // steps in the reverse of the forward order
      const Tensor dht = dh + dY.select(0, t);
      Tensor dgi, dgh, dh_prev, dc_prev;
      if (!lstm) {
        const Tensor &r = a[t], &z = b[t], &n = c[t], &ghn = d[t];
        const Tensor dn = dht - dht * z;
        const Tensor dz = dht * (hprev.select(0, t) - n);
        const Tensor dan = dn - dn * n * n;
        const Tensor dar = dan * ghn * (r - r * r);
        const Tensor daz = dz * (z - z * z);
        dgi = concat({dar, daz, dan}, 1);
        dgh = concat({dar, daz, dan * r}, 1);
        dh_prev = dht * z;
      } else {
        const Tensor &i = a[t], &f = b[t], &g = c[t], &o = d[t], &cp = e[t], &tct = tc[t];
        const Tensor dct = dc + dht * o * (1.0 - tct * tct);
        dgi = concat({dct * g * (i - i * i), dct * cp * (f - f * f), dct * i * (1.0 - g * g),
                      dht * tct * (o - o * o)}, 1);
        dgh = dgi;
        dc_prev = dct * f;
      }
      if (t >= min_len) {   // padded rows: no gate gradient, the carried gradient passes through
        const Tensor p = pad.select(0, t);
        dgi = masked_fill(dgi, p, 0.0);
        dgh = lstm ? dgi : masked_fill(dgh, p, 0.0);
      }
      const Tensor dh_rec = matmul(dgh, w_hh);   // (B, H)
      dh_prev = dh_prev.defined() ? dh_prev + dh_rec : dh_rec;
      if (t >= min_len) {
        const Tensor p = pad.select(0, t);
        dh_prev = where(p, dh, dh_prev);
        if (lstm) dc_prev = where(p, dc, dc_prev);
      }
      dxp.select(tdim, t).copy_(dgi);
      dgh_all.select(0, t).copy_(dgh);
      dh = dh_prev;
      dc = dc_prev;
    }
    const Tensor flat = dgh_all.view({T * B, GH});
    Tensor dw = matmul(flat.t(), hprev.view({T * B, H}));   // (G·H, H)
    Tensor db = has_b_hh ? sum(flat, {0}) : Tensor();
    return {dxp, dh, lstm ? dc : Tensor(), dw, db};
  }
};

// Runs the recurrence (see RecurrenceNode) and returns Y.
Tensor recurrence(RnnMode mode, bool reverse, int64_t tdim, const Tensor& xp, const Tensor& h0, const Tensor& c0,
                  const Tensor& w_hh, const Tensor& b_hh, const Tensor& pad, int64_t min_len) {
  const bool lstm = mode == RnnMode::lstm;
  const int64_t T = xp.size(tdim), B = h0.size(0), H = h0.size(1);
  const bool grad = autograd::needs_grad({xp, h0, c0, w_hh, b_hh});
  auto node = grad ? std::make_shared<RecurrenceNode>() : nullptr;
  Tensor Y = Tensor::empty({T + (lstm ? 2 : 1), B, H}, xp.dtype());
  {
    NoGradGuard ng;
    Tensor hprev = grad ? Tensor::empty({T, B, H}, xp.dtype()) : Tensor();
    if (node) {
      for (auto* v : {&node->a, &node->b, &node->c, &node->d, &node->e, &node->tc}) v->resize(T);
    }
    Tensor h = h0, cc = c0;
    for (int64_t s = 0; s < T; ++s) {
      const int64_t t = reverse ? T - 1 - s : s;
      const Tensor gi = xp.select(tdim, t);                       // (B, G·H)
      const Tensor gh = linear(h, w_hh, b_hh);                    // (B, G·H)
      Tensor h2, c2;
      if (!lstm) {
        const Tensor rz = sigmoid(gi.narrow(1, 0, 2 * H) + gh.narrow(1, 0, 2 * H));
        const Tensor r = rz.narrow(1, 0, H), z = rz.narrow(1, H, H);
        const Tensor ghn = gh.narrow(1, 2 * H, H);
        const Tensor n = tanh(gi.narrow(1, 2 * H, H) + r * ghn);
        h2 = n + z * (h - n);
        if (node) node->a[t] = r, node->b[t] = z, node->c[t] = n, node->d[t] = ghn;
      } else {
        const Tensor g4 = gi + gh;
        const Tensor ifg = sigmoid(g4.narrow(1, 0, 2 * H));
        const Tensor i = ifg.narrow(1, 0, H), f = ifg.narrow(1, H, H);
        const Tensor g = tanh(g4.narrow(1, 2 * H, H)), o = sigmoid(g4.narrow(1, 3 * H, H));
        c2 = f * cc + i * g;
        const Tensor tct = tanh(c2);
        h2 = o * tct;
        if (node) node->a[t] = i, node->b[t] = f, node->c[t] = g, node->d[t] = o, node->e[t] = cc, node->tc[t] = tct;
      }
      if (grad) hprev.select(0, t).copy_(h);
      if (t >= min_len) {   // rows past their length: keep the state, output 0
        const Tensor p = pad.select(0, t);
        Y.select(0, t).copy_(masked_fill(h2, p, 0.0));
        h = where(p, h, h2);
        if (lstm) cc = where(p, cc, c2);
      } else {
        Y.select(0, t).copy_(h2);
        h = h2;
        cc = c2;
      }
    }
    Y.select(0, T).copy_(h);
    if (lstm) Y.select(0, T + 1).copy_(cc);
    if (node) node->hprev = hprev;
  }
  if (node) {
    node->mode = mode;
    node->reverse = reverse;
    node->tdim = tdim;
    node->T = T;
    node->H = H;
    node->min_len = min_len;
    node->xp_shape = xp.shape();
    node->pad = pad;
    node->w_hh = w_hh.detach();
    node->has_b_hh = b_hh.defined();
    autograd::attach(Y, node, {xp, h0, c0, w_hh, b_hh});
  }
  return Y;
}

}  // namespace

// ---------------------------------------------------------------- GRU / LSTM

RnnBase::RnnBase(RnnMode mode, const RnnOptions& o, Generator& g, Generator* dropout_gen)
    : mode_(mode), opt_(o), dropout_gen_(dropout_gen) {
  const char* op = mode_name(mode);
  ATTN_CHECK(o.input_size > 0 && o.hidden_size > 0, op, ": expected positive input_size and hidden_size, got ",
             o.input_size, " and ", o.hidden_size);
  ATTN_CHECK(o.num_layers >= 1, op, ": expected num_layers >= 1, got ", o.num_layers);
  ATTN_CHECK(o.dropout >= 0 && o.dropout <= 1, op, ": expected dropout in [0, 1], got ", o.dropout);
  ATTN_CHECK(is_floating(o.dtype), op, ": expected a f32 or f64 dtype, got ", dtype_name(o.dtype));
  const int64_t D = o.bidirectional ? 2 : 1, H = o.hidden_size, GH = gates(mode) * H;
  for (int64_t l = 0; l < o.num_layers; ++l) {
    for (int64_t d = 0; d < D; ++d) {
      const std::string sfx = "_l" + std::to_string(l) + (d ? "_reverse" : "");
      const int64_t in = l == 0 ? o.input_size : D * H;
      Weights w;
      w.w_ih = &register_parameter("weight_ih" + sfx, Tensor::empty({GH, in}, o.dtype));
      w.w_hh = &register_parameter("weight_hh" + sfx, Tensor::empty({GH, H}, o.dtype));
      w.b_ih = &register_parameter("bias_ih" + sfx, o.bias ? Tensor::empty({GH}, o.dtype) : Tensor());
      w.b_hh = &register_parameter("bias_hh" + sfx, o.bias ? Tensor::empty({GH}, o.dtype) : Tensor());
      weights_.push_back(w);
    }
  }
  reset_parameters(g);
}

void RnnBase::reset_parameters(Generator& g) {
  std::vector<Tensor*> ps;
  for (const Weights& w : weights_) ps.insert(ps.end(), {w.w_ih, w.w_hh, w.b_ih, w.b_hh});
  init_uniform(ps, opt_.hidden_size, g);
}

RnnOutput RnnBase::run(const Tensor& x, const Tensor& h0, const Tensor& c0, const Tensor& lengths) const {
  const char* op = mode_name(mode_);
  const bool lstm = mode_ == RnnMode::lstm;
  const int64_t D = opt_.bidirectional ? 2 : 1, H = opt_.hidden_size, L = opt_.num_layers;
  const int64_t tdim = opt_.batch_first ? 1 : 0;
  ATTN_CHECK(x.defined() && x.dim() == 3 && x.size(2) == opt_.input_size, op, ": expected input of shape ",
             opt_.batch_first ? "(B, T, " : "(T, B, ", opt_.input_size, "), got ",
             x.defined() ? shape_str(x.shape()) : std::string("an undefined tensor"));
  ATTN_CHECK(x.dtype() == opt_.dtype, op, ": expected input of dtype ", dtype_name(opt_.dtype), ", got ",
             dtype_name(x.dtype()));
  const int64_t T = x.size(tdim), B = x.size(1 - tdim);
  ATTN_CHECK(T > 0 && B > 0, op, ": expected a non-empty input, got shape ", x.shape());
  if (lstm)
    ATTN_CHECK(h0.defined() == c0.defined(), op, ": expected h0 and c0 both given or both undefined");
  check_state(op, "h0", h0, {L * D, B, H}, opt_.dtype);
  check_state(op, "c0", c0, {L * D, B, H}, opt_.dtype);

  // Padded steps: pad[t] (B, 1) u8, nonzero where t >= lengths[b]; steps before min_len need no mask.
  int64_t min_len = T;
  Tensor pad;
  if (lengths.defined()) {
    ATTN_CHECK(lengths.dim() == 1 && lengths.size(0) == B && lengths.dtype() == DType::i64, op,
               ": expected lengths of shape [", B, "] and dtype i64, got shape ", lengths.shape(), " dtype ",
               dtype_name(lengths.dtype()));
    const std::vector<int64_t> len = lengths.to_vector<int64_t>();
    pad = Tensor::empty({T, B, 1}, DType::u8);
    uint8_t* p = pad.data<uint8_t>();
    for (int64_t b = 0; b < B; ++b) {
      ATTN_CHECK(len[b] >= 1 && len[b] <= T, op, ": expected every length in [1, ", T, "], got ", len[b],
                 " at row ", b);
      min_len = std::min(min_len, len[b]);
      for (int64_t t = 0; t < T; ++t) p[t * B + b] = t >= len[b];
    }
  }

  Tensor layer_in = x;   // time along tdim
  std::vector<Tensor> h_n, c_n;
  for (int64_t l = 0; l < L; ++l) {
    std::vector<Tensor> dir_out;
    for (int64_t d = 0; d < D; ++d) {
      const Weights& w = weights_[l * D + d];
      const Tensor xp = linear(layer_in, *w.w_ih, *w.b_ih);   // all steps at once: (T, B, G·H) or (B, T, G·H)
      const Tensor h = h0.defined() ? h0.select(0, l * D + d) : Tensor::zeros({B, H}, opt_.dtype);
      Tensor c;
      if (lstm) c = c0.defined() ? c0.select(0, l * D + d) : Tensor::zeros({B, H}, opt_.dtype);
      const Tensor Y = recurrence(mode_, d == 1, tdim, xp, h, c, *w.w_hh, *w.b_hh, pad, min_len);
      h_n.push_back(Y.select(0, T));
      if (lstm) c_n.push_back(Y.select(0, T + 1));
      const Tensor out = Y.narrow(0, 0, T);   // (T, B, H)
      dir_out.push_back(opt_.batch_first ? out.transpose(0, 1) : out);
    }
    layer_in = D == 2 ? concat(dir_out, -1) : dir_out[0].contiguous();
    if (l + 1 < L && opt_.dropout > 0 && is_training())
      layer_in = dropout_gen_ ? dropout(layer_in, opt_.dropout, true, *dropout_gen_)
                              : dropout(layer_in, opt_.dropout, true);
  }
  return {layer_in, stack(h_n, 0), lstm ? stack(c_n, 0) : Tensor()};
}

// ---------------------------------------------------------------- cells

namespace {
const RnnCellOptions& checked_cell(const RnnCellOptions& o, const char* op) {
  ATTN_CHECK(o.input_size > 0 && o.hidden_size > 0, op, ": expected positive input_size and hidden_size, got ",
             o.input_size, " and ", o.hidden_size);
  ATTN_CHECK(is_floating(o.dtype), op, ": expected a f32 or f64 dtype, got ", dtype_name(o.dtype));
  return o;
}

Tensor cell_param(const RnnCellOptions& o, int64_t G, bool matrix, bool input) {
  if (!matrix && !o.bias) return Tensor();
  if (!matrix) return Tensor::empty({G * o.hidden_size}, o.dtype);
  return Tensor::empty({G * o.hidden_size, input ? o.input_size : o.hidden_size}, o.dtype);
}

void check_cell_input(const char* op, const Tensor& x, const RnnCellOptions& o) {
  ATTN_CHECK(x.defined() && x.dim() == 2 && x.size(1) == o.input_size, op, ": expected input of shape (B, ",
             o.input_size, "), got ", x.defined() ? shape_str(x.shape()) : std::string("an undefined tensor"));
  ATTN_CHECK(x.dtype() == o.dtype, op, ": expected input of dtype ", dtype_name(o.dtype), ", got ",
             dtype_name(x.dtype()));
}
}  // namespace

GRUCell::GRUCell(const RnnCellOptions& o, Generator& g)
    : opt_(checked_cell(o, "GRUCell")),
      weight_ih(register_parameter("weight_ih", cell_param(o, 3, true, true))),
      weight_hh(register_parameter("weight_hh", cell_param(o, 3, true, false))),
      bias_ih(register_parameter("bias_ih", cell_param(o, 3, false, true))),
      bias_hh(register_parameter("bias_hh", cell_param(o, 3, false, false))) {
  init_uniform({&weight_ih, &weight_hh, &bias_ih, &bias_hh}, o.hidden_size, g);
}

Tensor GRUCell::forward(const Tensor& x, const Tensor& h) const {
  check_cell_input("GRUCell", x, opt_);
  const int64_t B = x.size(0);
  check_state("GRUCell", "h", h, {B, opt_.hidden_size}, opt_.dtype);
  const Tensor hh = h.defined() ? h : Tensor::zeros({B, opt_.hidden_size}, opt_.dtype);
  return gru_update(linear(x, weight_ih, bias_ih), linear(hh, weight_hh, bias_hh), hh);
}

LSTMCell::LSTMCell(const RnnCellOptions& o, Generator& g)
    : opt_(checked_cell(o, "LSTMCell")),
      weight_ih(register_parameter("weight_ih", cell_param(o, 4, true, true))),
      weight_hh(register_parameter("weight_hh", cell_param(o, 4, true, false))),
      bias_ih(register_parameter("bias_ih", cell_param(o, 4, false, true))),
      bias_hh(register_parameter("bias_hh", cell_param(o, 4, false, false))) {
  init_uniform({&weight_ih, &weight_hh, &bias_ih, &bias_hh}, o.hidden_size, g);
}

std::pair<Tensor, Tensor> LSTMCell::forward(const Tensor& x, const Tensor& h, const Tensor& c) const {
  check_cell_input("LSTMCell", x, opt_);
  const int64_t B = x.size(0);
  ATTN_CHECK(h.defined() == c.defined(), "LSTMCell: expected h and c both given or both undefined");
  check_state("LSTMCell", "h", h, {B, opt_.hidden_size}, opt_.dtype);
  check_state("LSTMCell", "c", c, {B, opt_.hidden_size}, opt_.dtype);
  const Tensor hh = h.defined() ? h : Tensor::zeros({B, opt_.hidden_size}, opt_.dtype);
  const Tensor cc = c.defined() ? c : Tensor::zeros({B, opt_.hidden_size}, opt_.dtype);
  return lstm_update(linear(x, weight_ih, bias_ih) + linear(hh, weight_hh, bias_hh), cc);
}

}  // namespace attn::nn
