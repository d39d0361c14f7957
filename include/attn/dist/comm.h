// Processes that train together: the communicator of a data-parallel run.
//
//   dist::Communicator& w = dist::world();     // MPI under mpirun (when built with it), else one process
//   if (w.size() > 1) w.allreduce_sum(grads.data(), n);             // summed over ranks, in place
//   auto req = w.iallreduce_sum(bucket, n);  ...  req->wait();       // overlapped with other work
//   std::vector<std::string> all = w.allgather(config.dump());        // every rank's string, by rank
//
// world() decides once per process: a process started by mpirun (Open MPI's OMPI_COMM_WORLD_SIZE,
// or PMIx's PMIX_RANK, in the environment) initialises MPI and joins MPI_COMM_WORLD; any other
// process is a world of one, with no MPI call at all. A build configured with -DATTN_MPI=OFF has
// only the world of one, and says so when started by mpirun.
//
// Every collective must be called by every rank in the same order (MPI's rule). Failures of the
// transport (a rank that died) become attn::Error naming the call; mpirun then names the lost rank.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace attn::dist {

// An operation in flight (a non-blocking all-reduce).
class Request {
 public:
  virtual ~Request() = default;
  virtual bool test() = 0;   // true once complete (also advances it: MPI progresses only inside calls)
  virtual void wait() = 0;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // What carries the traffic, for logs: "none" (one process) or e.g. "Open MPI 4.1.4 (shared memory)".
  virtual std::string transport() const = 0;
  // In-place sums over all ranks.
  virtual void allreduce_sum(float* data, int64_t n) = 0;
  virtual void allreduce_sum(double* data, int64_t n) = 0;
  virtual std::unique_ptr<Request> iallreduce_sum(float* data, int64_t n) = 0;
  // In-place maximum over all ranks.
  virtual void allreduce_max(uint64_t* data, int64_t n) = 0;
  // Every rank's string, indexed by rank.
  virtual std::vector<std::string> allgather(const std::string& mine) = 0;
  virtual void barrier() = 0;
  // Ends the whole run at once (after an error on one rank: the others may be inside a collective).
  [[noreturn]] virtual void abort(int code) = 0;
};

// The process's communicator (see above). The first call initialises MPI when it is used.
Communicator& world();
// True when this process was started by an MPI launcher (mpirun), whatever the build.
bool launched_by_mpi();
// True when attn was built with MPI (-DATTN_MPI=ON, the default where Open MPI is installed).
bool built_with_mpi();

// A world of one process: every collective is the identity. world() without MPI.
class SingleProcess final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string transport() const override { return "none"; }
  void allreduce_sum(float*, int64_t) override {}
  void allreduce_sum(double*, int64_t) override {}
  std::unique_ptr<Request> iallreduce_sum(float*, int64_t) override;
  void allreduce_max(uint64_t*, int64_t) override {}
  std::vector<std::string> allgather(const std::string& mine) override { return {mine}; }
  void barrier() override {}
  [[noreturn]] void abort(int code) override;
};

}  // namespace attn::dist
