// Bucketed, overlapped gradient all-reduce (see include/attn/dist/grad_reducer.h).
#include "attn/dist/grad_reducer.h"

#include <chrono>
#include <string>

#include "attn/autograd/hooks.h"
#include "attn/core/error.h"

namespace attn::dist {

GradReducer::GradReducer(Communicator& comm, std::vector<Tensor> params, GradReducerOptions options)
    : comm_(comm), params_(std::move(params)), opt_(options) {
  const int64_t n = int64_t(params_.size());
  slots_.resize(size_t(n));
  bucket_of_.assign(size_t(n), -1);
  ready_.assign(size_t(n), 0);
  std::vector<int64_t> order;
  for (int64_t i = n - 1; i >= 0; --i) {
    const Tensor& p = params_[size_t(i)];
    ATTN_CHECK(p.dtype() == DType::f32, "GradReducer: expected f32 parameters, got ", dtype_name(p.dtype()),
               " for parameter ", i);
    ATTN_CHECK(!index_.count(p.impl_ptr().get()), "GradReducer: parameter ", i, " is listed twice");
    index_[p.impl_ptr().get()] = i;
    numel_ += p.numel();
    order.push_back(i);
  }
  build_buckets(order);   // reverse order of registration, until the first step shows the real one
  stats_.bytes = numel_ * 4;
}

// Buckets over the parameters in `order`: each closes once it reaches its size; each parameter's
// first gradient of a pass is made in its slot.
void GradReducer::build_buckets(const std::vector<int64_t>& order) {
  std::vector<std::vector<int64_t>> groups;
  std::vector<int64_t> sizes;
  int64_t bytes = 0;
  for (int64_t i : order) {
    const int64_t numel = params_[size_t(i)].numel();
    if (groups.empty() || bytes >= (groups.size() == 1 ? opt_.first_bucket_bytes : opt_.bucket_bytes)) {
      groups.emplace_back();
      sizes.push_back(0);
      bytes = 0;
    }
    groups.back().push_back(i);
    sizes.back() += numel;
    bytes += numel * 4;
  }
  buckets_.clear();
  for (size_t b = 0; b < groups.size(); ++b) {
    Bucket bk;
    bk.flat = Tensor::zeros({sizes[b]}, DType::f32);
    int64_t off = 0;
    for (int64_t i : groups[b]) {
      const Tensor& p = params_[size_t(i)];
      slots_[size_t(i)] = bk.flat.slice(0, off, off + p.numel()).view(p.shape());
      off += p.numel();
      bucket_of_[size_t(i)] = int64_t(b);
      autograd::set_leaf_grad_buffer(p.impl(), slots_[size_t(i)].impl_ptr());
    }
    bk.params = groups[b];
    buckets_.push_back(std::move(bk));
  }
  stats_.buckets = int64_t(buckets_.size());
}

// After the first step: the buckets again, in the order in which that step's gradients became final
// (rank 0's, so every rank builds the same buckets), the parameters without one last. Registration
// order is only a guess: a weight used early and late in the forward (a tied embedding, the key and
// value projections of cross-attention applied to the encoder's output) is final much later than its
// place says, and it would hold its bucket and every bucket after it until the end of the backward.
void GradReducer::rebuild_in_ready_order() {
  std::string mine;
  for (int64_t i : ready_order_) mine += std::to_string(i) + " ";
  const std::string first = comm_.allgather(mine)[0];
  std::vector<int64_t> order;
  std::vector<char> seen(params_.size(), 0);
  size_t at = 0;
  while (at < first.size()) {
    const size_t sp = first.find(' ', at);
    const int64_t i = std::stoll(first.substr(at, sp - at));
    ATTN_CHECK(i >= 0 && i < int64_t(params_.size()) && !seen[size_t(i)], "GradReducer: rank 0's gradient order is not ",
               "a list of distinct parameters of this model (the ranks train different models?)");
    seen[size_t(i)] = 1;
    order.push_back(i);
    at = sp + 1;
  }
  for (int64_t i = int64_t(params_.size()) - 1; i >= 0; --i)
    if (!seen[size_t(i)]) order.push_back(i);
  build_buckets(order);
}

GradReducer::~GradReducer() {
  autograd::set_leaf_ready_hook({});
  for (const Tensor& p : params_) autograd::set_leaf_grad_buffer(p.impl(), nullptr);
  for (Bucket& b : buckets_)
    if (b.request) b.request->wait();
}

void GradReducer::arm() {
  if (opt_.rebuild && opt_.overlap && steps_ == 1 && comm_.size() > 1) rebuild_in_ready_order();
  ready_order_.clear();
  std::fill(ready_.begin(), ready_.end(), 0);
  for (Bucket& b : buckets_) b.pending = int64_t(b.params.size());
  next_launch_ = 0;
  stats_.started_early = 0;
  armed_ = true;
  if (opt_.overlap && comm_.size() > 1) autograd::set_leaf_ready_hook([this](TensorImpl& leaf) { on_ready(leaf); });
}

void GradReducer::on_ready(TensorImpl& leaf) {
  auto it = index_.find(&leaf);
  if (it == index_.end() || ready_[size_t(it->second)]) return;
  ready_[size_t(it->second)] = 1;
  ready_order_.push_back(it->second);
  --buckets_[size_t(bucket_of_[size_t(it->second)])].pending;
  const int64_t before = next_launch_;
  launch_ready();
  stats_.started_early += next_launch_ - before;
  progress();
}

void GradReducer::launch_ready() {
  while (next_launch_ < int64_t(buckets_.size()) && buckets_[size_t(next_launch_)].pending == 0) launch(next_launch_++);
}

// The bucket's slots hold this pass's gradients (zeros where a parameter has none), then its all-reduce starts.
void GradReducer::launch(int64_t b) {
  Bucket& bk = buckets_[size_t(b)];
  for (int64_t i : bk.params) {
    TensorImpl& p = params_[size_t(i)].impl();
    Tensor& slot = slots_[size_t(i)];
    if (!p.grad) slot.zero_();
    else if (p.grad != slot.impl_ptr()) slot.copy_(Tensor(p.grad));   // a sum of several gradients, or accumulation
  }
  bk.request = comm_.iallreduce_sum(bk.flat.data<float>(), bk.flat.numel());
}

void GradReducer::progress() {
  for (int64_t b = 0; b < next_launch_; ++b)
    if (buckets_[size_t(b)].request && buckets_[size_t(b)].request->test()) buckets_[size_t(b)].request.reset();
}

void GradReducer::finish() {
  ATTN_CHECK(armed_, "GradReducer::finish: arm() was not called before the backward pass");
  const auto t0 = std::chrono::steady_clock::now();
  autograd::set_leaf_ready_hook({});
  armed_ = false;
  if (comm_.size() > 1) {
    while (next_launch_ < int64_t(buckets_.size())) launch(next_launch_++);
    for (Bucket& b : buckets_)
      if (b.request) {
        b.request->wait();
        b.request.reset();
      }
  }
  // Every parameter's gradient is now its slot (the sum over ranks). A parameter this rank gave no
  // gradient keeps none when the sum is all zeros (no rank had one), as in one process, where the
  // optimizer then leaves it alone (AdamW would otherwise decay it and its moments).
  if (comm_.size() > 1)
    for (size_t i = 0; i < params_.size(); ++i) {
      TensorImpl& p = params_[i].impl();
      if (!p.grad) {
        const float* v = slots_[i].data<float>();
        bool any = false;
        for (int64_t k = 0, n = slots_[i].numel(); k < n && !any; ++k) any = v[k] != 0.0f;
        if (!any) continue;
      }
      p.grad = slots_[i].impl_ptr();
    }
  stats_.exposed_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ++steps_;
}

}  // namespace attn::dist
