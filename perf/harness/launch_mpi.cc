// The MPI side of the launch, compiled only when CMake finds MPI. MPI carries the unique id
// and the combined results; loom itself never links it.
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "perf/harness/launch.h"

namespace loomperf {
namespace {

class MpiGroup : public ProcessGroup {
 public:
  MpiGroup() {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void barrier() override { MPI_Barrier(MPI_COMM_WORLD); }
  void allReduce(double* v, int n, Combine how) override {
    MPI_Op op = how == Combine::kSum ? MPI_SUM : how == Combine::kMin ? MPI_MIN : MPI_MAX;
    MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_DOUBLE, op, MPI_COMM_WORLD);
  }
  void allReduce(int64_t* v, int n) override {
    MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
  }
  std::vector<std::string> allGather(const std::string& mine) override {
    int len = static_cast<int>(mine.size());
    std::vector<int> lens(size_), displs(size_);
    MPI_Allgather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, MPI_COMM_WORLD);
    int total = 0;
    for (int p = 0; p < size_; ++p) {
      displs[p] = total;
      total += lens[p];
    }
    std::string all(total, '\0');
    MPI_Allgatherv(mine.data(), len, MPI_CHAR, all.data(), lens.data(), displs.data(), MPI_CHAR,
                   MPI_COMM_WORLD);
    std::vector<std::string> out;
    for (int p = 0; p < size_; ++p) out.push_back(all.substr(displs[p], lens[p]));
    return out;
  }

 private:
  int rank_ = 0, size_ = 1;
};

}  // namespace

bool mpiBuilt() { return true; }

std::unique_ptr<ProcessGroup> mpiStart(int* argc, char*** argv, Launch* l) {
  int provided = 0;
  // Only the main thread (the team's thread 0) calls MPI.
  MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
  auto group = std::make_unique<MpiGroup>();
  l->nprocs = group->size();
  l->proc = group->rank();
  const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_RANK");
  l->localProc = local != nullptr ? std::atoi(local) : l->proc;
  return group;
}

void mpiBroadcast(void* data, size_t bytes) {
  MPI_Bcast(data, static_cast<int>(bytes), MPI_BYTE, 0, MPI_COMM_WORLD);
}

void mpiFinish() { MPI_Finalize(); }

}  // namespace loomperf
