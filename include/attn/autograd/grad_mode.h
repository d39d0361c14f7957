// Grad mode: whether ops record history.
//
//   { attn::NoGradGuard g;  y = model.forward(x); }   // inference: nothing recorded
#pragma once

namespace attn {

bool grad_enabled();
void set_grad_enabled(bool on);

class NoGradGuard {
 public:
  NoGradGuard() : prev_(grad_enabled()) { set_grad_enabled(false); }
  ~NoGradGuard() { set_grad_enabled(prev_); }
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;
 private:
  bool prev_;
};

// bf16 mixed precision (PyTorch's CPU autocast with bf16, for training): while on, on this thread,
// linear and matmul of f32 operands with plain f32 weights run their GEMMs with both operands rounded
// to bf16 and f32 accumulation, forward and both backward products, on a CPU with a native bf16
// matmul (ops/matmul.h: bf16_gemm_native_available; elsewhere they stay f32). Their results and
// gradients are f32; the weights, their gradients, the optimizer's state, layer norm, softmax, the
// losses and every other op stay f32. Whether a product ran in bf16 is fixed when its forward runs.
//
//   { attn::AutocastBf16Guard mp;  loss = criterion(model.forward(x), y);  loss.backward(); }
bool autocast_bf16();
void set_autocast_bf16(bool on);

class AutocastBf16Guard {
 public:
  explicit AutocastBf16Guard(bool on = true) : prev_(autocast_bf16()) { set_autocast_bf16(on); }
  ~AutocastBf16Guard() { set_autocast_bf16(prev_); }
  AutocastBf16Guard(const AutocastBf16Guard&) = delete;
  AutocastBf16Guard& operator=(const AutocastBf16Guard&) = delete;
 private:
  bool prev_;
};

}  // namespace attn
