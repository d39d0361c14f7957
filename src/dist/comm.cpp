// The world of one process, and the choice of world() (see include/attn/dist/comm.h).
#include "attn/dist/comm.h"

#include <cstdlib>

#include "attn/core/env.h"
#include "attn/core/error.h"

namespace attn::dist {

namespace {

class Done final : public Request {
 public:
  bool test() override { return true; }
  void wait() override {}
};

}  // namespace

std::unique_ptr<Request> SingleProcess::iallreduce_sum(float*, int64_t) { return std::make_unique<Done>(); }

void SingleProcess::abort(int code) { std::exit(code); }

bool launched_by_mpi() { return env::launched_by_mpi(); }

#ifdef ATTN_HAVE_MPI
std::unique_ptr<Communicator> make_mpi_world();   // mpi_comm.cpp
bool built_with_mpi() { return true; }
#else
bool built_with_mpi() { return false; }
#endif

Communicator& world() {
  static std::unique_ptr<Communicator> w = []() -> std::unique_ptr<Communicator> {
    if (!launched_by_mpi()) return std::make_unique<SingleProcess>();
#ifdef ATTN_HAVE_MPI
    return make_mpi_world();
#else
    const std::optional<int> n = env::mpi_world_size();
    ATTN_CHECK(!n || *n <= 1, "dist: this process was started by mpirun as one of ", *n,
               " processes, but attn was built without MPI (-DATTN_MPI=OFF): rebuild with -DATTN_MPI=ON "
               "(Debian's libopenmpi-dev) to train data-parallel, or run attn without mpirun");
    return std::make_unique<SingleProcess>();
#endif
  }();
  return *w;
}

}  // namespace attn::dist
