// The autograd tape. This engine knows no op: each op defines its own Node subclass, with typed
// fields for what its backward needs, beside its forward in src/ops/<family>.cpp.
//
//   struct MulNode : autograd::Node {
//     Tensor a, b;                                        // saved inputs
//     const char* name() const override { return "mul"; }
//     std::vector<Tensor> backward(const Tensor& dout) override {
//       return {sum_to(dout * b, a.shape()), sum_to(dout * a, b.shape())};
//     }
//   };
//   Tensor out = ...;                                     // computed without history
//   if (autograd::needs_grad({a, b})) {
//     auto n = std::make_shared<MulNode>(); n->a = a.detach(); n->b = b.detach();
//     autograd::attach(out, n, {a, b});
//   }
//
// backward() returns one gradient per input (undefined where none flows), each of the input's
// shape. It runs under NoGradGuard (no double backward).
#pragma once
#include <initializer_list>
#include <memory>
#include <vector>

#include "attn/core/tensor.h"

namespace attn::autograd {

struct Node;

// Where the gradient of one input goes: to the node that produced it, or to a leaf's .grad.
struct Edge {
  std::shared_ptr<Node> fn;
  std::shared_ptr<TensorImpl> leaf;
};

struct Node {
  std::vector<Edge> next;                 // one per input, in the op's argument order
  std::weak_ptr<TensorImpl> output;       // for retain_grad on non-leaf outputs
  Shape output_shape;
  DType output_dtype = DType::f32;
  virtual ~Node() = default;
  virtual const char* name() const = 0;
  virtual std::vector<Tensor> backward(const Tensor& dout) = 0;
  // Frees saved tensors after a backward pass that did not ask to retain the graph.
  virtual void release() {}
  // Single-input ops whose input gradient is zero except on a view of the input (slice, select) may
  // return that view of `grad`, a tensor of the input's shape; the engine then adds dout into it in
  // place, in the gradient it accumulates for the input, instead of calling backward() for a full-size
  // tensor that is mostly zeros (q, k, v selected from one qkv tensor: one buffer, not three plus two
  // additions). Such ops override both.
  virtual bool grad_is_view() const { return false; }
  virtual Tensor input_grad_view(const Tensor& grad) const { return Tensor(); }
};

// True when grad mode is on and any defined input requires grad.
bool needs_grad(std::initializer_list<Tensor> inputs);
bool needs_grad(const std::vector<Tensor>& inputs);
// Makes `node` the grad_fn of `out` with one edge per input; marks out as requiring grad.
void attach(Tensor& out, std::shared_ptr<Node> node, std::initializer_list<Tensor> inputs);
void attach(Tensor& out, std::shared_ptr<Node> node, const std::vector<Tensor>& inputs);

// Runs the backward pass from `root` with gradient `grad` (ones for a scalar root).
void run_backward(const Tensor& root, const Tensor& grad, bool retain_graph);

}  // namespace attn::autograd
