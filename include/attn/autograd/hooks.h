// What a data-parallel run asks of the backward engine (attn/dist/grad_reducer.h uses both):
//
//   autograd::set_leaf_ready_hook([&](TensorImpl& p) { reducer.ready(p); });  // p's gradient is final
//   autograd::set_leaf_grad_buffer(p.impl(), slot.impl_ptr());  // p's first gradient lands in `slot`
//
// A leaf is ready when every node of the pass that feeds it has run: its .grad holds the whole
// gradient of this backward pass. Hooks and buffers belong to the calling thread.
#pragma once
#include <functional>
#include <memory>

#include "attn/core/tensor.h"

namespace attn::autograd {

// Called once per leaf per backward pass, in the order the leaves complete; an empty function removes it.
using LeafReadyHook = std::function<void(TensorImpl& leaf)>;
void set_leaf_ready_hook(LeafReadyHook hook);

// The first gradient a leaf with no .grad receives is copied into `buffer` (same shape and dtype),
// which becomes its .grad, instead of into a new tensor; null removes the leaf's buffer.
void set_leaf_grad_buffer(TensorImpl& leaf, std::shared_ptr<TensorImpl> buffer);

}  // namespace attn::autograd
