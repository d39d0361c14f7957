// The backward engine: topological order over the tape, gradient accumulation, retain_grad.
// It calls Node::backward and nothing op-specific.
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "attn/autograd/grad_mode.h"
#include "attn/autograd/hooks.h"
#include "attn/autograd/node.h"
#include "attn/core/profile.h"
#include "attn/ops/elementwise.h"

namespace attn {

static thread_local bool g_grad_enabled = true;
bool grad_enabled() { return g_grad_enabled; }
void set_grad_enabled(bool on) { g_grad_enabled = on; }
static thread_local bool g_autocast_bf16 = false;
bool autocast_bf16() { return g_autocast_bf16; }
void set_autocast_bf16(bool on) { g_autocast_bf16 = on; }

namespace autograd {

bool needs_grad(std::initializer_list<Tensor> inputs) {
  if (!grad_enabled()) return false;
  for (const Tensor& t : inputs)
    if (t.defined() && t.requires_grad()) return true;
  return false;
}

bool needs_grad(const std::vector<Tensor>& inputs) {
  if (!grad_enabled()) return false;
  for (const Tensor& t : inputs)
    if (t.defined() && t.requires_grad()) return true;
  return false;
}

void attach(Tensor& out, std::shared_ptr<Node> node, const std::vector<Tensor>& inputs) {
  node->next.clear();
  node->next.reserve(inputs.size());
  for (const Tensor& t : inputs) {
    Edge e;
    if (t.defined() && t.requires_grad()) {
      if (t.grad_fn()) e.fn = t.grad_fn();
      else e.leaf = t.impl_ptr();
    }
    node->next.push_back(std::move(e));
  }
  node->output = out.impl_ptr();
  node->output_shape = out.shape();
  node->output_dtype = out.dtype();
  out.impl().grad_fn = std::move(node);
  out.impl().requires_grad = true;
}

void attach(Tensor& out, std::shared_ptr<Node> node, std::initializer_list<Tensor> inputs) {
  attach(out, std::move(node), std::vector<Tensor>(inputs));
}

// Sums gradients out of place. `own` makes the first one a private copy: a leaf's .grad may be
// changed in place later (clipping), and the incoming gradient may alias another tensor's.
static void accumulate(std::shared_ptr<TensorImpl>& slot, const Tensor& g, bool own) {
  if (!slot) slot = own ? g.clone().impl_ptr() : g.impl_ptr();
  else slot = add(Tensor(slot), g).impl_ptr();
}

namespace {
// The gradient accumulated for one node's output. `owned`: the tensor was made here (zeros, a sum, a
// clone), so nothing else sees it and it may be written in place.
struct Slot {
  std::shared_ptr<TensorImpl> grad;
  bool owned = false;
};

void accumulate_slot(Slot& slot, const Tensor& g) {
  slot.owned = slot.grad != nullptr;   // a sum is a new tensor; a first gradient may alias another's
  accumulate(slot.grad, g, false);
}

// dout of a view op (Node::grad_is_view) added in place into its input's accumulated gradient.
void accumulate_view(const Node& n, const Tensor& dout, Slot& slot, const Node& input) {
  if (!slot.grad) slot.grad = Tensor::zeros(input.output_shape, input.output_dtype).impl_ptr();
  else if (!slot.owned) slot.grad = Tensor(slot.grad).clone().impl_ptr();
  slot.owned = true;
  Tensor part = n.input_grad_view(Tensor(slot.grad));
  ATTN_CHECK(part.defined() && part.shape() == dout.shape(), "backward: node '", n.name(),
             "' gave a gradient view of shape ", part.defined() ? part.shape() : Shape{},
             " for an output gradient of shape ", dout.shape());
  add_(part, dout.dtype() == part.dtype() ? dout : dout.to(part.dtype()));
}
}  // namespace

namespace {
thread_local LeafReadyHook t_leaf_ready;
thread_local std::unordered_map<TensorImpl*, std::shared_ptr<TensorImpl>> t_leaf_buffers;
}  // namespace

void set_leaf_ready_hook(LeafReadyHook hook) { t_leaf_ready = std::move(hook); }

void set_leaf_grad_buffer(TensorImpl& leaf, std::shared_ptr<TensorImpl> buffer) {
  if (!buffer) {
    t_leaf_buffers.erase(&leaf);
    return;
  }
  ATTN_CHECK(buffer->shape == leaf.shape && buffer->dtype == leaf.dtype, "set_leaf_grad_buffer: expected a buffer of shape ",
             leaf.shape, ", got ", buffer->shape);
  t_leaf_buffers[&leaf] = std::move(buffer);
}

static void accumulate_leaf(TensorImpl& leaf, const Tensor& g) {
  ATTN_CHECK(g.shape() == leaf.shape, "backward: gradient of shape ", g.shape(),
             " for a leaf of shape ", leaf.shape);
  Tensor gg = g.dtype() == leaf.dtype ? g : g.to(leaf.dtype);
  if (!leaf.grad && !t_leaf_buffers.empty()) {
    if (auto it = t_leaf_buffers.find(&leaf); it != t_leaf_buffers.end()) {
      Tensor(it->second).copy_(gg);   // the first gradient, in its slot (a private copy, as a clone)
      leaf.grad = it->second;
      return;
    }
  }
  accumulate(leaf.grad, gg, true);
}

// "<node name> (backward)", a stable literal for the per-op profile (attn/core/profile.h); asked for only
// while a profile records.
static const char* backward_label(const char* name) {
  static std::mutex mu;
  static std::unordered_map<const char*, std::string> labels;
  std::lock_guard<std::mutex> lk(mu);
  auto [it, fresh] = labels.try_emplace(name);
  if (fresh) it->second = std::string(name) + " (backward)";
  return it->second.c_str();
}

// One node of the pass: its gradient (if any reached it) through its backward into its inputs'.
static void backward_node(Node* n, std::unordered_map<Node*, Slot>& grads, bool retain_graph) {
  auto gi = grads.find(n);
  if (gi == grads.end() || !gi->second.grad) return;
  Tensor dout(gi->second.grad);
  grads.erase(gi);
  if (auto out = n->output.lock(); out && out->retains_grad) accumulate(out->grad, dout, true);
  // View ops feeding another node: add into that node's gradient in place.
  if (n->grad_is_view() && n->next.size() == 1 && n->next[0].fn) {
    Node& in = *n->next[0].fn;
    accumulate_view(*n, dout, grads[&in], in);
    if (!retain_graph) n->release();
    return;
  }
  std::vector<Tensor> din;
  {
    const profile::Scope scope(profile::recording() ? backward_label(n->name()) : "backward");
    din = n->backward(dout);
  }
  ATTN_CHECK(din.size() == n->next.size(), "backward: node '", n->name(), "' returned ", din.size(),
             " gradients for ", n->next.size(), " inputs");
  for (size_t k = 0; k < din.size(); ++k) {
    const Edge& e = n->next[k];
    if (!din[k].defined()) continue;
    if (e.fn) {
      ATTN_CHECK(din[k].shape() == e.fn->output_shape, "backward: node '", n->name(),
                 "' returned a gradient of shape ", din[k].shape(), " for input ", k, " of shape ",
                 e.fn->output_shape);
      accumulate_slot(grads[e.fn.get()], din[k]);
    } else if (e.leaf) {
      accumulate_leaf(*e.leaf, din[k]);
    }
  }
  if (!retain_graph) n->release();
}

void run_backward(const Tensor& root, const Tensor& grad_in, bool retain_graph) {
  ATTN_CHECK(root.requires_grad(), "backward: the tensor does not require grad (nothing on the tape "
             "leads to it)");
  NoGradGuard no_grad;
  Tensor grad = grad_in;
  if (!grad.defined()) {
    ATTN_CHECK(root.numel() == 1, "backward: a gradient is needed for a non-scalar output of shape ",
               root.shape());
    grad = Tensor::ones(root.shape(), root.dtype());
  }
  ATTN_CHECK(grad.shape() == root.shape(), "backward: gradient shape ", grad.shape(),
             " does not match output shape ", root.shape());
  if (!root.grad_fn()) {
    accumulate_leaf(root.impl(), grad);
    if (t_leaf_ready) t_leaf_ready(root.impl());
    return;
  }
  // Topological order by iterative DFS (post-order), then reverse.
  std::vector<Node*> order;
  std::unordered_set<Node*> seen;
  std::vector<std::pair<Node*, size_t>> stack;
  stack.push_back({root.grad_fn().get(), 0});
  seen.insert(root.grad_fn().get());
  while (!stack.empty()) {
    auto& [n, i] = stack.back();
    if (i < n->next.size()) {
      Node* c = n->next[i++].fn.get();
      if (c && seen.insert(c).second) stack.push_back({c, 0});
    } else {
      order.push_back(n);
      stack.pop_back();
    }
  }
  // With a leaf-ready hook: how many nodes of this pass still feed each leaf.
  std::unordered_map<TensorImpl*, int> feeding;
  if (t_leaf_ready)
    for (Node* n : order)
      for (const Edge& e : n->next)
        if (e.leaf) ++feeding[e.leaf.get()];
  std::unordered_map<Node*, Slot> grads;
  grads[root.grad_fn().get()].grad = grad.impl_ptr();
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    Node* n = *it;
    backward_node(n, grads, retain_graph);
    if (!feeding.empty())
      for (const Edge& e : n->next)
        if (e.leaf && --feeding[e.leaf.get()] == 0 && e.leaf->grad) t_leaf_ready(*e.leaf);
  }
}

}  // namespace autograd
}  // namespace attn
