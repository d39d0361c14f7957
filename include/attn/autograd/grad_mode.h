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

}  // namespace attn
