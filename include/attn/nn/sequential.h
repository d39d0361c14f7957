// nn::Sequential and nn::ModuleList: containers whose children are named "0", "1", ...
//
//   nn::Sequential seq;
//   seq.push_back(std::make_shared<nn::Linear>(8, 16));
//   seq.push_back(std::make_shared<nn::Lambda>([](const Tensor& x) { return attn::relu(x); }));
//   seq.push_back(std::make_shared<nn::Linear>(16, 4));
//   Tensor y = seq.forward(x);                 // "0.weight", "0.bias", "2.weight", "2.bias"
//
//   nn::ModuleList<Block> blocks;              // typed: blocks[i]->forward(x, mask)
//   for (int i = 0; i < depth; ++i) blocks.push_back(std::make_shared<Block>(cfg));
//   register_module("blocks", ...);            // keys "blocks.0.*", "blocks.1.*", ...
//
// Sequential accepts any module type with `Tensor forward(const Tensor&)` (it keeps a call
// wrapper per child; Module itself has no virtual forward).
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "attn/nn/module.h"

namespace attn::nn {

// A parameter-free module wrapping a function (activations inside a Sequential).
class Lambda : public Module {
 public:
  explicit Lambda(std::function<Tensor(const Tensor&)> fn) : fn_(std::move(fn)) {}
  Tensor forward(const Tensor& x) const { return fn_(x); }

 private:
  std::function<Tensor(const Tensor&)> fn_;
};

// Identity (timm's nn.Identity stand-in, e.g. a disabled norm or head).
class Identity : public Module {
 public:
  Tensor forward(const Tensor& x) const { return x; }
};

class Sequential : public Module {
 public:
  Sequential() = default;
  template <class M>
  std::shared_ptr<M> push_back(std::shared_ptr<M> m) {
    ATTN_CHECK(m != nullptr, "Sequential: cannot add a null module");
    M* raw = m.get();
    calls_.push_back([raw](const Tensor& x) { return raw->forward(x); });
    modules_.push_back(m);
    return register_module(std::to_string(modules_.size() - 1), std::move(m));
  }
  // x through every child in order.
  Tensor forward(const Tensor& x) const {
    Tensor h = x;
    for (const auto& f : calls_) h = f(h);
    return h;
  }
  size_t size() const { return modules_.size(); }
  const std::shared_ptr<Module>& operator[](size_t i) const {
    ATTN_CHECK(i < modules_.size(), "Sequential: index ", i, " out of range for ", modules_.size(), " modules");
    return modules_[i];
  }

 private:
  std::vector<std::function<Tensor(const Tensor&)>> calls_;
  std::vector<std::shared_ptr<Module>> modules_;
};

template <class M = Module>
class ModuleList : public Module {
 public:
  ModuleList() = default;
  std::shared_ptr<M> push_back(std::shared_ptr<M> m) {
    ATTN_CHECK(m != nullptr, "ModuleList: cannot add a null module");
    items_.push_back(m);
    return register_module(std::to_string(items_.size() - 1), std::move(m));
  }
  size_t size() const { return items_.size(); }
  bool empty() const { return items_.empty(); }
  const std::shared_ptr<M>& operator[](size_t i) const {
    ATTN_CHECK(i < items_.size(), "ModuleList: index ", i, " out of range for ", items_.size(), " modules");
    return items_[i];
  }
  auto begin() const { return items_.begin(); }
  auto end() const { return items_.end(); }

 private:
  std::vector<std::shared_ptr<M>> items_;
};

}  // namespace attn::nn
