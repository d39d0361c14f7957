// Recurrent layers equal to torch.nn.GRU / LSTM / GRUCell / LSTMCell (PyTorch 1.13): same options,
// parameter names, gate order and initialisation.
//
//   nn::GRU gru({.input_size = 256, .hidden_size = 256, .num_layers = 2, .bidirectional = true});
//   auto [y, h_n, c_n] = gru.forward(x);               // x (T, B, 256) -> y (T, B, 512), h_n (4, B, 256)
//   auto r = gru.forward(x, h0, Tensor(), lengths);    // lengths (B) i64: as pack_padded_sequence
//   nn::LSTM lstm({.input_size = 32, .hidden_size = 64, .batch_first = true});
//   auto [y2, h, c] = lstm.forward(x2);                // x2 (B, T, 32) -> y2 (B, T, 64), h, c (1, B, 64)
//   nn::GRUCell cell(32, 64);  Tensor h1 = cell.forward(x_t, h0);   // (B, 32), (B, 64) -> (B, 64)
//
// Glossary: T steps, B batch, I input_size, H hidden_size, L num_layers, D directions (1 or 2).
// Gates (PyTorch's order, rows of the stacked weights):
//   GRU  r, z, n:  r = σ(W_ir x + b_ir + W_hr h + b_hr), z likewise,
//                  n = tanh(W_in x + b_in + r ⊙ (W_hn h + b_hn)),  h' = (1 - z) ⊙ n + z ⊙ h
//   LSTM i, f, g, o: c' = f ⊙ c + i ⊙ g (g = tanh, the rest σ),  h' = o ⊙ tanh(c')
// Parameters per layer l and direction (suffix "_reverse" for the backward one), registered in
// PyTorch's order: weight_ih_l{l} (G·H, I or D·H), weight_hh_l{l} (G·H, H), bias_ih_l{l} (G·H),
// bias_hh_l{l} (G·H), G = 3 (GRU) or 4 (LSTM); cells: weight_ih, weight_hh, bias_ih, bias_hh.
// Init: every parameter ~ U(-1/sqrt(H), 1/sqrt(H)).
//
// Lengths (B) i64, each in [1, T]: the result equals PyTorch's pack_padded_sequence(x, lengths,
// enforce_sorted=False) -> RNN -> pad_packed_sequence(total_length=T): outputs past a row's length
// are 0, h_n/c_n hold the state at the row's last valid step, and the reverse direction starts at
// the row's last valid step (from h0). `dropout` applies to the outputs of every layer but the last,
// in training mode only (as torch). Everything is differentiable through autograd; the input
// projections of all steps are one GEMM per layer and direction, each step adds h @ W_hhᵀ.
#pragma once
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "attn/core/rng.h"
#include "attn/nn/module.h"

namespace attn::nn {

struct RnnOptions {
  int64_t input_size = 0;    // I
  int64_t hidden_size = 0;   // H
  int64_t num_layers = 1;    // L
  bool bias = true;
  bool batch_first = false;  // x and output (B, T, ·) instead of (T, B, ·); h0/h_n are not affected
  double dropout = 0.0;      // between layers, training only
  bool bidirectional = false;
  DType dtype = DType::f32;
};

struct RnnOutput {
  Tensor output;   // (T, B, D·H) ((B, T, D·H) when batch_first): the last layer, directions concatenated
  Tensor h_n;      // (L·D, B, H), index l·D + d
  Tensor c_n;      // LSTM only: (L·D, B, H)
};

enum class RnnMode { gru, lstm };

// The stacked, multi-layer recurrent layer; GRU and LSTM fix the mode.
class RnnBase : public Module {
 public:
  RnnBase(RnnMode mode, const RnnOptions& o, Generator& g, Generator* dropout_gen);
  void reset_parameters(Generator& g);
  const RnnOptions& options() const { return opt_; }
  RnnMode mode() const { return mode_; }
  // Either mode: x (T, B, I) or (B, T, I); h0, c0 (L·D, B, H) or undefined (zeros; c0 LSTM only);
  // lengths (B) i64 or undefined. GRU::forward / LSTM::forward call this.
  RnnOutput run(const Tensor& x, const Tensor& h0, const Tensor& c0, const Tensor& lengths) const;

 private:
  RnnMode mode_;
  RnnOptions opt_;
  Generator* dropout_gen_;   // null: default_generator()
  // Per layer·D + direction: weight_ih, weight_hh, bias_ih, bias_hh (biases undefined without bias).
  struct Weights {
    Tensor* w_ih;
    Tensor* w_hh;
    Tensor* b_ih;
    Tensor* b_hh;
  };
  std::vector<Weights> weights_;
};

class GRU : public RnnBase {
 public:
  // dropout_gen: the generator of the between-layer dropout (must outlive the module; null: default).
  explicit GRU(const RnnOptions& o, Generator& g = default_generator(), Generator* dropout_gen = nullptr)
      : RnnBase(RnnMode::gru, o, g, dropout_gen) {}
  // -> {output, h_n, undefined}
  RnnOutput forward(const Tensor& x, const Tensor& h0 = Tensor(), const Tensor& lengths = Tensor()) const {
    return run(x, h0, Tensor(), lengths);
  }
};

class LSTM : public RnnBase {
 public:
  explicit LSTM(const RnnOptions& o, Generator& g = default_generator(), Generator* dropout_gen = nullptr)
      : RnnBase(RnnMode::lstm, o, g, dropout_gen) {}
  // h0 and c0 both given or both undefined (zeros), as torch's (h0, c0) tuple. -> {output, h_n, c_n}
  RnnOutput forward(const Tensor& x, const Tensor& h0 = Tensor(), const Tensor& c0 = Tensor(),
                    const Tensor& lengths = Tensor()) const {
    return run(x, h0, c0, lengths);
  }
};

struct RnnCellOptions {
  int64_t input_size = 0;
  int64_t hidden_size = 0;
  bool bias = true;
  DType dtype = DType::f32;
};

class GRUCell : public Module {
 public:
  explicit GRUCell(const RnnCellOptions& o, Generator& g = default_generator());
  GRUCell(int64_t input_size, int64_t hidden_size, bool bias = true, Generator& g = default_generator())
      : GRUCell(RnnCellOptions{input_size, hidden_size, bias, DType::f32}, g) {}
  // x (B, I), h (B, H) (undefined: zeros) -> h' (B, H)
  Tensor forward(const Tensor& x, const Tensor& h = Tensor()) const;
  const RnnCellOptions& options() const { return opt_; }

 private:
  RnnCellOptions opt_;

 public:
  Tensor& weight_ih;   // (3H, I)
  Tensor& weight_hh;   // (3H, H)
  Tensor& bias_ih;     // (3H)
  Tensor& bias_hh;     // (3H)
};

class LSTMCell : public Module {
 public:
  explicit LSTMCell(const RnnCellOptions& o, Generator& g = default_generator());
  LSTMCell(int64_t input_size, int64_t hidden_size, bool bias = true, Generator& g = default_generator())
      : LSTMCell(RnnCellOptions{input_size, hidden_size, bias, DType::f32}, g) {}
  // x (B, I), h and c (B, H) (both undefined: zeros) -> {h', c'}
  std::pair<Tensor, Tensor> forward(const Tensor& x, const Tensor& h = Tensor(), const Tensor& c = Tensor()) const;
  const RnnCellOptions& options() const { return opt_; }

 private:
  RnnCellOptions opt_;

 public:
  Tensor& weight_ih;   // (4H, I)
  Tensor& weight_hh;   // (4H, H)
  Tensor& bias_ih;     // (4H)
  Tensor& bias_hh;     // (4H)
};

}  // namespace attn::nn
