// mpi_coll_perf: Open MPI's collectives (MPI_Allreduce, MPI_Allgather, MPI_Reduce_scatter_block,
// MPI_Bcast, MPI_Reduce, MPI_Alltoall, MPI_Gather, MPI_Scatter, MPI_Sendrecv) in the same
// table, sizes, data and checks as loom's *_perf binaries, as the reference to compare with.
//
//   mpirun -np 4 --oversubscribe build/perf/mpi_coll_perf --coll all_reduce -b 8 -e 256M -f 4
//
// Out of place passes separate buffers; in place uses MPI_IN_PLACE where MPI has it. MPI_Bcast
// has one buffer, so out of place the root first copies its send buffer into it (as a native
// out-of-place broadcast does). Reduce_scatter_block in place leaves the result at the start
// of the buffer, which the check takes into account.
#include <mpi.h>

#include <cstring>
#include <string>

#include "perf/harness/baseline.h"

namespace loomperf {
namespace {

MPI_Datatype mpiType(loomDataType_t t) {
  switch (t) {
    case loomInt8:
      return MPI_INT8_T;
    case loomUint8:
      return MPI_UINT8_T;
    case loomInt32:
      return MPI_INT32_T;
    case loomUint32:
      return MPI_UINT32_T;
    case loomInt64:
      return MPI_INT64_T;
    case loomUint64:
      return MPI_UINT64_T;
    case loomFloat32:
      return MPI_FLOAT;
    case loomFloat64:
      return MPI_DOUBLE;
    default:
      return MPI_DATATYPE_NULL;
  }
}

MPI_Op mpiOp(Op op) {
  switch (op) {
    case Op::kSum:
      return MPI_SUM;
    case Op::kProd:
      return MPI_PROD;
    case Op::kMax:
      return MPI_MAX;
    case Op::kMin:
      return MPI_MIN;
    default:
      return MPI_OP_NULL;
  }
}

class MpiBaseline : public Baseline, public ProcessGroup {
 public:
  MpiBaseline(int* argc, char*** argv) {
    MPI_Init(argc, argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    MPI_Get_library_version(version, &len);
    describe_ = std::string(version, strcspn(version, ",\n"));
  }
  ~MpiBaseline() override { MPI_Finalize(); }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string describe() const override { return describe_; }
  ProcessGroup& group() override { return *this; }

  std::string supports(const CollSpec& spec, loomDataType_t type, Op op) const override {
    if (mpiType(type) == MPI_DATATYPE_NULL)
      return std::string("MPI has no ") + typeInfo(type).name +
             " type; use an integer, float or double";
    if (spec.hasOp && mpiOp(op) == MPI_OP_NULL)
      return std::string("MPI has no ") + opName(op) + " reduction; use sum, prod, max or min";
    return "";
  }

  void run(const CollSpec& spec, const void* send, void* recv, const CollCounts& c,
           loomDataType_t type, Op op, int root, bool inPlace) override {
    const MPI_Datatype t = mpiType(type);
    const int n = static_cast<int>(c.paramCount);
    const size_t ts = typeInfo(type).size;
    char* r = static_cast<char*>(recv);
    const std::string name = spec.name;
    const bool isRoot = rank_ == root;
    if (name == "all_reduce") {
      MPI_Allreduce(inPlace ? MPI_IN_PLACE : send, recv, n, t, mpiOp(op), MPI_COMM_WORLD);
    } else if (name == "all_gather") {
      if (inPlace)
        MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, recv, n, t, MPI_COMM_WORLD);
      else
        MPI_Allgather(send, n, t, recv, n, t, MPI_COMM_WORLD);
    } else if (name == "reduce_scatter") {
      MPI_Reduce_scatter_block(inPlace ? MPI_IN_PLACE : send, recv, n, t, mpiOp(op),
                               MPI_COMM_WORLD);
    } else if (name == "broadcast") {
      if (!inPlace && isRoot) std::memcpy(recv, send, c.paramCount * ts);
      MPI_Bcast(recv, n, t, root, MPI_COMM_WORLD);
    } else if (name == "reduce") {
      const void* in = inPlace ? (isRoot ? MPI_IN_PLACE : recv) : send;
      MPI_Reduce(in, recv, n, t, mpiOp(op), root, MPI_COMM_WORLD);
    } else if (name == "alltoall") {
      MPI_Alltoall(inPlace ? MPI_IN_PLACE : send, n, t, recv, n, t, MPI_COMM_WORLD);
    } else if (name == "gather") {
      const void* in = inPlace ? (isRoot ? MPI_IN_PLACE : r + rank_ * c.paramCount * ts) : send;
      MPI_Gather(in, n, t, recv, n, t, root, MPI_COMM_WORLD);
    } else if (name == "scatter") {
      void* out = inPlace ? (isRoot ? MPI_IN_PLACE : r + rank_ * c.paramCount * ts) : recv;
      MPI_Scatter(inPlace ? recv : send, n, t, out, n, t, root, MPI_COMM_WORLD);
    } else if (name == "sendrecv") {
      int next = (rank_ + 1) % size_, prev = (rank_ - 1 + size_) % size_;
      if (inPlace)
        MPI_Sendrecv_replace(recv, n, t, next, 0, prev, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      else
        MPI_Sendrecv(send, n, t, next, 0, recv, n, t, prev, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
  }

  size_t resultOffset(const CollSpec& spec, const CollCounts& c, size_t ts,
                      bool inPlace) const override {
    if (inPlace && std::strcmp(spec.name, "reduce_scatter") == 0) return 0;
    return Baseline::resultOffset(spec, c, ts, inPlace);
  }

  // ProcessGroup, over MPI_COMM_WORLD.
  void barrier() override { MPI_Barrier(MPI_COMM_WORLD); }
  void allReduce(double* v, int n, Combine how) override {
    MPI_Op op = how == Combine::kSum ? MPI_SUM : how == Combine::kMin ? MPI_MIN : MPI_MAX;
    MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_DOUBLE, op, MPI_COMM_WORLD);
  }
  void allReduce(int64_t* v, int n) override {
    MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
  }
  std::vector<std::string> allGather(const std::string& mine) override {
    constexpr int kBytes = 2048;
    std::string in(kBytes, '\0');
    in.replace(0, std::min<size_t>(mine.size(), kBytes - 1), mine.substr(0, kBytes - 1));
    std::string all(static_cast<size_t>(kBytes) * size_, '\0');
    MPI_Allgather(in.data(), kBytes, MPI_CHAR, all.data(), kBytes, MPI_CHAR, MPI_COMM_WORLD);
    std::vector<std::string> out;
    for (int p = 0; p < size_; ++p) out.emplace_back(all.data() + p * kBytes);
    return out;
  }

 private:
  int rank_ = 0, size_ = 1;
  std::string describe_;
};

}  // namespace
}  // namespace loomperf

int main(int argc, char** argv) {
  return loomperf::baselineMain(argc, argv, "mpi_coll_perf",
                                [](const loomperf::BaselineArgs&, int* ac, char*** av) {
                                  return std::make_unique<loomperf::MpiBaseline>(ac, av);
                                });
}
