// Trains a small MLP on synthetic data with the library API only: tensors, autograd, nn, AdamW.
// Built against the installed package (see examples/CMakeLists.txt); prints the loss going down.
#include <cstdio>

#include "attn/attn.h"
#include "attn/nn/linear.h"
#include "attn/ops/loss.h"
#include "attn/optim/adam.h"

int main() {
  using namespace attn;
  manual_seed(0);
  // Two Gaussian blobs in 16-d, labels 0 / 1.
  Generator g(1);
  Tensor x = randn({256, 16}, g);
  std::vector<int64_t> labels(256);
  for (int64_t i = 0; i < 256; ++i) labels[size_t(i)] = i % 2;
  Tensor y = Tensor::from_vector(labels, {256});
  x = x + (y.to(DType::f32).unsqueeze(1) * 2.0 - 1.0);   // shift the classes apart
  nn::Linear fc1(16, 32), fc2(32, 2);
  std::vector<Tensor> params = fc1.parameters();
  for (const Tensor& p : fc2.parameters()) params.push_back(p);
  optim::AdamW opt(params, {.lr = 1e-2});
  double first = 0, last = 0;
  for (int step = 0; step < 50; ++step) {
    Tensor loss = cross_entropy(fc2.forward(relu(fc1.forward(x))), y);
    loss.backward();
    opt.step();
    opt.zero_grad();
    if (step == 0) first = loss.item();
    last = loss.item();
  }
  std::printf("loss %.4f -> %.4f\n", first, last);
  return last < first ? 0 : 1;
}
