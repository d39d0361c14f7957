// The MPI world (Open MPI): MPI_COMM_WORLD duplicated, errors returned as attn::Error.
// Compiled only when attn is built with MPI (ATTN_HAVE_MPI).
#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <string>

#include "attn/core/env.h"
#include "attn/core/error.h"
#include "attn/dist/comm.h"

namespace attn::dist {

namespace {

void check_mpi(int rc, const char* call) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  fail("dist: ", call, " failed: ", std::string(text, size_t(len)),
       " (another rank has probably stopped; mpirun's message names it)");
}

class MpiRequest final : public Request {
 public:
  explicit MpiRequest(MPI_Request r) : req_(r) {}
  ~MpiRequest() override {
    if (req_ != MPI_REQUEST_NULL) MPI_Wait(&req_, MPI_STATUS_IGNORE);
  }
  bool test() override {
    if (req_ == MPI_REQUEST_NULL) return true;
    int done = 0;
    check_mpi(MPI_Test(&req_, &done, MPI_STATUS_IGNORE), "MPI_Test (all-reduce)");
    return done != 0;
  }
  void wait() override {
    if (req_ == MPI_REQUEST_NULL) return;
    check_mpi(MPI_Wait(&req_, MPI_STATUS_IGNORE), "MPI_Wait (all-reduce)");
  }

 private:
  MPI_Request req_;
};

class MpiWorld final : public Communicator {
 public:
  MpiWorld() {
    // libnbc's ring for non-blocking all-reduces (bandwidth-optimal at any rank count; Open MPI's
    // default picks by size); a value the user set wins.
    setenv("OMPI_MCA_coll_libnbc_iallreduce_algorithm", "ring", 0);
    int inited = 0;
    MPI_Initialized(&inited);
    if (!inited) {
      int provided = 0;
      check_mpi(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
      owner_ = true;
    }
    check_mpi(MPI_Comm_dup(MPI_COMM_WORLD, &comm_), "MPI_Comm_dup");
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
    char lib[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    MPI_Get_library_version(lib, &len);
    std::string name(lib, size_t(len));
    if (const size_t cut = name.find(','); cut != std::string::npos) name.resize(cut);   // "Open MPI v4.1.4"
    const std::string btl = env::mpi_btl();
    transport_ = name + (btl.empty() ? " (shared memory within a machine, TCP between machines)" : " (btl " + btl + ")");
  }
  ~MpiWorld() override {
    if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
    if (owner_) MPI_Finalize();
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string transport() const override { return transport_; }

  void allreduce_sum(float* data, int64_t n) override { allreduce(data, n, MPI_FLOAT); }
  void allreduce_sum(double* data, int64_t n) override { allreduce(data, n, MPI_DOUBLE); }
  void allreduce_max(uint64_t* data, int64_t n) override {
    ATTN_CHECK(n <= INT_MAX, "dist: allreduce_max takes at most ", INT_MAX, " values, got ", n);
    check_mpi(MPI_Allreduce(MPI_IN_PLACE, data, int(n), MPI_UINT64_T, MPI_MAX, comm_), "MPI_Allreduce (max)");
  }

  std::unique_ptr<Request> iallreduce_sum(float* data, int64_t n) override {
    ATTN_CHECK(n <= INT_MAX, "dist: a non-blocking all-reduce takes at most ", INT_MAX, " floats, got ", n);
    MPI_Request r = MPI_REQUEST_NULL;
    check_mpi(MPI_Iallreduce(MPI_IN_PLACE, data, int(n), MPI_FLOAT, MPI_SUM, comm_, &r), "MPI_Iallreduce");
    return std::make_unique<MpiRequest>(r);
  }

  std::vector<std::string> allgather(const std::string& mine) override {
    int len = int(mine.size());
    std::vector<int> lens(size_t(size_), 0), offs(size_t(size_), 0);
    check_mpi(MPI_Allgather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, comm_), "MPI_Allgather");
    int64_t total = 0;
    for (int r = 0; r < size_; ++r) {
      offs[size_t(r)] = int(total);
      total += lens[size_t(r)];
    }
    ATTN_CHECK(total <= INT_MAX, "dist: allgather of ", total, " bytes is too large");
    std::string all(size_t(total), '\0');
    check_mpi(MPI_Allgatherv(mine.data(), len, MPI_CHAR, all.data(), lens.data(), offs.data(), MPI_CHAR, comm_),
              "MPI_Allgatherv");
    std::vector<std::string> out;
    for (int r = 0; r < size_; ++r) out.push_back(all.substr(size_t(offs[size_t(r)]), size_t(lens[size_t(r)])));
    return out;
  }

  void barrier() override { check_mpi(MPI_Barrier(comm_), "MPI_Barrier"); }

  void abort(int code) override {
    MPI_Abort(comm_ != MPI_COMM_NULL ? comm_ : MPI_COMM_WORLD, code);
    std::_Exit(code);
  }

 private:
  void allreduce(void* data, int64_t n, MPI_Datatype t) {
    const int64_t chunk = int64_t(1) << 30;
    int bytes = 0;
    MPI_Type_size(t, &bytes);
    for (int64_t at = 0; at < n; at += chunk) {
      const int m = int(std::min(chunk, n - at));
      check_mpi(MPI_Allreduce(MPI_IN_PLACE, static_cast<char*>(data) + at * bytes, m, t, MPI_SUM, comm_),
                "MPI_Allreduce");
    }
  }

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
  bool owner_ = false;
  std::string transport_;
};

}  // namespace

std::unique_ptr<Communicator> make_mpi_world() { return std::make_unique<MpiWorld>(); }

}  // namespace attn::dist
