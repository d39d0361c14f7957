// Gradients summed over the ranks of a data-parallel run, in buckets that overlap the backward pass.
//
//   dist::GradReducer reducer(dist::world(), model.parameters());
//   reducer.arm();            // before the (last micro-batch's) backward
//   loss.backward();          // each bucket's all-reduce starts as soon as its gradients are final
//   reducer.finish();         // waits for the rest: every .grad is the sum over ranks
//
// Buckets hold parameters in reverse order of registration (about the order in which backward
// finishes them): a first small one (1 MB, so communication starts early), then about 25 MB each.
// After the first step they are built again in the order that step's gradients became final (rank
// 0's), as PyTorch's DDP rebuilds its buckets: a weight used both early and late in the forward is
// then no longer a bucket that holds back every bucket after it.
// Each bucket is one f32 buffer, and each parameter's gradient is made in its slot there (the
// engine copies a first gradient into the slot instead of into a new tensor), so the all-reduce
// works in place, with no copy in or out. Buckets start in index order on every rank (MPI needs the
// same order of collectives everywhere); a parameter without a gradient on a rank is reduced as zeros
// in finish(), and keeps no gradient where every rank's was missing (the sum is all zeros), so the
// optimizer skips it as it would in one process. Open MPI advances a non-blocking all-reduce only inside MPI calls: each
// completed leaf tests the buckets in flight.
//
// The sum is the step's gradient when every rank's loss is already weighted by its share of the
// global batch (train::Trainer does this), as averaging would be for equal shards.
#pragma once
#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "attn/core/tensor.h"
#include "attn/dist/comm.h"

namespace attn::dist {

struct GradReducerOptions {
  int64_t first_bucket_bytes = int64_t(1) << 20;
  int64_t bucket_bytes = int64_t(25) << 20;
  bool overlap = true;   // false: every bucket waits for finish() (for measuring what overlap hides)
  bool rebuild = true;   // rebuild the buckets in the first step's order of readiness
};

// What the last finish() saw.
struct ReduceStats {
  double exposed_seconds = 0;   // time spent in finish(): communication not hidden behind the backward
  int64_t buckets = 0;
  int64_t started_early = 0;    // buckets whose all-reduce started during the backward pass
  int64_t bytes = 0;
};

class GradReducer {
 public:
  GradReducer(Communicator& comm, std::vector<Tensor> params, GradReducerOptions options = {});
  ~GradReducer();
  GradReducer(const GradReducer&) = delete;
  GradReducer& operator=(const GradReducer&) = delete;

  void arm();
  void finish();
  const ReduceStats& stats() const { return stats_; }
  int64_t num_buckets() const { return int64_t(buckets_.size()); }
  int64_t numel() const { return numel_; }

 private:
  struct Bucket {
    Tensor flat;                   // f32, the bucket's slots end to end
    std::vector<int64_t> params;   // indices into params_
    int64_t pending = 0;           // parameters not yet final in this pass
    std::unique_ptr<Request> request;
  };
  void build_buckets(const std::vector<int64_t>& order);
  void rebuild_in_ready_order();
  void on_ready(TensorImpl& leaf);
  void launch_ready();
  void launch(int64_t b);
  void progress();

  Communicator& comm_;
  std::vector<Tensor> params_;
  std::vector<Tensor> slots_;      // per parameter: its view of its bucket's buffer
  std::vector<int64_t> bucket_of_;
  std::unordered_map<TensorImpl*, int64_t> index_;
  std::vector<Bucket> buckets_;
  GradReducerOptions opt_;
  int64_t numel_ = 0, next_launch_ = 0;
  bool armed_ = false;
  std::vector<char> ready_;
  std::vector<int64_t> ready_order_;   // this pass's parameters in the order they became final
  int64_t steps_ = 0;                  // finish() calls so far
  ReduceStats stats_;
};

}  // namespace attn::dist
