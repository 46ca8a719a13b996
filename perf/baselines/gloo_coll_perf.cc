// gloo_coll_perf: Gloo's collectives over its TCP transport in the same table, sizes, data and
// checks as loom's *_perf binaries. One rank per process, launched like loom's env launch
// (RANK/WORLD_SIZE, Slurm, or mpirun's variables: Gloo itself needs no MPI); ranks meet
// through a file store in LOOM_PERF_GLOO_STORE (a directory every rank can reach, fresh per
// run; default /tmp/loom_gloo_<job>).
//
//   --coll all_reduce --algo ring|halving_doubling|bcube   (default ring)
//   --coll all_gather | broadcast | reduce_scatter | alltoall
//
// Gloo's halving-doubling AllReduce and its ReduceScatter work in place only: out of place,
// the input is first copied into the output buffer inside the timed call. Its AlltoAll works
// out of place only: in place, the input is copied aside inside the timed call. Sum, prod, max and
// min of int8, uint8, int32, int64, float and double.
#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/allreduce_halving_doubling.h>
#include <gloo/alltoall.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/config.h>
#include <gloo/math.h>
#include <gloo/reduce_scatter.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>
#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "perf/harness/baseline.h"
#include "perf/harness/launch.h"

namespace loomperf {
namespace {

template <typename T>
const gloo::ReductionFunction<T>* classicFn(Op op) {
  switch (op) {
    case Op::kProd:
      return gloo::ReductionFunction<T>::product;
    case Op::kMax:
      return gloo::ReductionFunction<T>::max;
    case Op::kMin:
      return gloo::ReductionFunction<T>::min;
    default:
      return gloo::ReductionFunction<T>::sum;
  }
}

template <typename T>
gloo::AllreduceOptions::Func optionsFn(Op op) {
  using F = void (*)(void*, const void*, const void*, size_t);
  switch (op) {
    case Op::kProd:
      return static_cast<F>(&gloo::product<T>);
    case Op::kMax:
      return static_cast<F>(&gloo::max<T>);
    case Op::kMin:
      return static_cast<F>(&gloo::min<T>);
    default:
      return static_cast<F>(&gloo::sum<T>);
  }
}

class GlooBaseline : public Baseline, public ProcessGroup {
 public:
  explicit GlooBaseline(const BaselineArgs& args) : algo_(args.algo.empty() ? "ring" : args.algo) {
    Launch l;
    std::string error;
    if (!detectLaunch([](const char* n) { return std::getenv(n); }, false, &l, &error)) {
      std::fprintf(stderr, "gloo_coll_perf: %s\n", error.c_str());
      std::exit(2);
    }
    rank_ = l.proc;
    size_ = l.nprocs;
    std::string store;
    if (const char* s = std::getenv("LOOM_PERF_GLOO_STORE")) {
      store = s;
    } else {
      const char* job = std::getenv("OMPI_MCA_ess_base_jobid");
      if (job == nullptr) job = std::getenv("SLURM_JOB_ID");
      store = std::string("/tmp/loom_gloo_") + (job ? job : "default");
    }
    mkdir(store.c_str(), 0700);
    gloo::transport::tcp::attr attr;
    const char* host = std::getenv("LOOM_PERF_GLOO_HOST");
    attr.hostname = host ? host : "127.0.0.1";
    auto device = gloo::transport::tcp::CreateDevice(attr);
    gloo::rendezvous::FileStore fileStore(store);
    auto ctx = std::make_shared<gloo::rendezvous::Context>(rank_, size_);
    ctx->connectFullMesh(fileStore, device);
    ctx_ = ctx;
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string describe() const override {
    return "Gloo " + std::to_string(GLOO_VERSION_MAJOR) + "." + std::to_string(GLOO_VERSION_MINOR) +
           " tcp (" + algo_ + ")";
  }
  ProcessGroup& group() override { return *this; }

  std::string supports(const CollSpec& spec, loomDataType_t type, Op op) const override {
    const std::string n = spec.name;
    if (n != "all_reduce" && n != "all_gather" && n != "broadcast" && n != "reduce_scatter" &&
        n != "alltoall")
      return "--coll " + n + ": this comparison covers all_reduce, all_gather, broadcast, " +
             "reduce_scatter and alltoall";
    if (n == "all_reduce" && algo_ != "ring" && algo_ != "halving_doubling" && algo_ != "bcube")
      return "--algo " + algo_ + ": use ring, halving_doubling or bcube";
    switch (type) {
      case loomInt8:
      case loomUint8:
      case loomInt32:
      case loomInt64:
      case loomFloat32:
      case loomFloat64:
        break;
      default:
        return std::string("not measuring Gloo with ") + typeInfo(type).name;
    }
    if (spec.hasOp && static_cast<int>(op) > static_cast<int>(Op::kMin))
      return std::string("Gloo has no ") + opName(op) + " reduction";
    return "";
  }

  void run(const CollSpec& spec, const void* send, void* recv, const CollCounts& c,
           loomDataType_t type, Op op, int root, bool inPlace) override {
    switch (type) {
      case loomInt8:
        return runTyped<int8_t>(spec, send, recv, c, op, root, inPlace);
      case loomUint8:
        return runTyped<uint8_t>(spec, send, recv, c, op, root, inPlace);
      case loomInt32:
        return runTyped<int32_t>(spec, send, recv, c, op, root, inPlace);
      case loomInt64:
        return runTyped<int64_t>(spec, send, recv, c, op, root, inPlace);
      case loomFloat64:
        return runTyped<double>(spec, send, recv, c, op, root, inPlace);
      default:
        return runTyped<float>(spec, send, recv, c, op, root, inPlace);
    }
  }

  // The classic algorithms are set up once per buffer address (classicAlgorithm).
  bool movesThroughBuffers(const CollSpec& spec) const override {
    const std::string name = spec.name;
    return !(name == "reduce_scatter" || (name == "all_reduce" && algo_ == "halving_doubling"));
  }

  // ProcessGroup, over Gloo itself (between measurements only).
  void barrier() override {
    gloo::BarrierOptions opts(ctx_);
    gloo::barrier(opts);
  }
  void allReduce(double* v, int n, Combine how) override {
    gloo::AllreduceOptions opts(ctx_);
    opts.setOutput(v, n);
    Op op = how == Combine::kSum ? Op::kSum : how == Combine::kMin ? Op::kMin : Op::kMax;
    opts.setReduceFunction(optionsFn<double>(op));
    opts.setTag(kControlTag);
    gloo::allreduce(opts);
  }
  void allReduce(int64_t* v, int n) override {
    gloo::AllreduceOptions opts(ctx_);
    opts.setOutput(v, n);
    opts.setReduceFunction(optionsFn<int64_t>(Op::kSum));
    opts.setTag(kControlTag);
    gloo::allreduce(opts);
  }
  std::vector<std::string> allGather(const std::string& mine) override {
    constexpr size_t kBytes = 2048;
    std::vector<char> in(kBytes, 0), out(kBytes * size_);
    std::memcpy(in.data(), mine.data(), std::min(mine.size(), kBytes - 1));
    gloo::AllgatherOptions opts(ctx_);
    opts.setInput(in.data(), kBytes);
    opts.setOutput(out.data(), out.size());
    gloo::allgather(opts);
    std::vector<std::string> all;
    for (int p = 0; p < size_; ++p) all.emplace_back(out.data() + p * kBytes);
    return all;
  }

 private:
  static constexpr uint32_t kControlTag = 7;

  template <typename T>
  void runTyped(const CollSpec& spec, const void* sendv, void* recvv, const CollCounts& c, Op op,
                int root, bool inPlace) {
    const std::string name = spec.name;
    T* recv = static_cast<T*>(recvv);
    T* send = const_cast<T*>(static_cast<const T*>(sendv));
    const size_t n = c.paramCount;
    if (n == 0) return;  // Gloo refuses empty buffers; there is nothing to move anyway
    if (name == "all_reduce" && algo_ == "halving_doubling") {
      if (!inPlace) std::memcpy(recv, send, n * sizeof(T));
      if (n == 0) return;
      classicAlgorithm<gloo::AllreduceHalvingDoubling<T>>(recv, n, 0, [&] {
        return std::make_unique<gloo::AllreduceHalvingDoubling<T>>(
            ctx_, std::vector<T*>{recv}, static_cast<int>(n), classicFn<T>(op));
      })->run();
    } else if (name == "all_reduce") {
      gloo::AllreduceOptions opts(ctx_);
      if (!inPlace) opts.setInput(send, n);
      opts.setOutput(recv, n);
      opts.setAlgorithm(algo_ == "bcube" ? gloo::AllreduceOptions::Algorithm::BCUBE
                                         : gloo::AllreduceOptions::Algorithm::RING);
      opts.setReduceFunction(optionsFn<T>(op));
      gloo::allreduce(opts);
    } else if (name == "all_gather") {
      gloo::AllgatherOptions opts(ctx_);
      if (!inPlace) opts.setInput(send, n);
      opts.setOutput(recv, n * size_);
      gloo::allgather(opts);
    } else if (name == "broadcast") {
      gloo::BroadcastOptions opts(ctx_);
      if (!inPlace && rank_ == root) opts.setInput(send, n);
      opts.setOutput(recv, n);
      opts.setRoot(root);
      gloo::broadcast(opts);
    } else if (name == "reduce_scatter") {
      // In place over the whole buffer; rank r's block ends up at its start.
      if (!inPlace) std::memcpy(recv, send, n * size_ * sizeof(T));
      if (n == 0) return;
      classicAlgorithm<gloo::ReduceScatterHalvingDoubling<T>>(recv, n * size_, 1, [&] {
        return std::make_unique<gloo::ReduceScatterHalvingDoubling<T>>(
            ctx_, std::vector<T*>{recv}, static_cast<int>(n * size_),
            std::vector<int>(size_, static_cast<int>(n)), classicFn<T>(op));
      })->run();
    } else if (name == "alltoall") {
      // Gloo's AlltoAll has no in-place form: in place, the input is copied aside first.
      if (inPlace) {
        if (scratch_.size() < n * size_ * sizeof(T)) scratch_.resize(n * size_ * sizeof(T));
        std::memcpy(scratch_.data(), recv, n * size_ * sizeof(T));
        send = reinterpret_cast<T*>(scratch_.data());
      }
      gloo::AlltoallOptions opts(ctx_);
      opts.setInput(send, n * size_);
      opts.setOutput(recv, n * size_);
      gloo::alltoall(opts);
    }
  }

  size_t resultOffset(const CollSpec& spec, const CollCounts& c, size_t ts,
                      bool inPlace) const override {
    // Gloo's halving-doubling ReduceScatter leaves each rank's block at the start.
    if (std::strcmp(spec.name, "reduce_scatter") == 0) return 0;
    return Baseline::resultOffset(spec, c, ts, inPlace);
  }

  // Gloo's classic algorithms connect their buffers when built; build each once per buffer,
  // size and kind, and reuse it, as a training job would.
  template <typename A, typename Make>
  gloo::Algorithm* classicAlgorithm(void* ptr, size_t count, int kind, Make make) {
    auto key = std::make_tuple(ptr, count, kind, typeid(A).name());
    auto it = algorithms_.find(key);
    if (it == algorithms_.end()) it = algorithms_.emplace(key, make()).first;
    return it->second.get();
  }

  std::string algo_;
  std::vector<char> scratch_;  // in-place AlltoAll's copy of the input; grows once
  int rank_ = 0, size_ = 1;
  std::shared_ptr<gloo::Context> ctx_;
  std::map<std::tuple<void*, size_t, int, const char*>, std::unique_ptr<gloo::Algorithm>>
      algorithms_;
};

}  // namespace
}  // namespace loomperf

int main(int argc, char** argv) {
  return loomperf::baselineMain(argc, argv, "gloo_coll_perf",
                                [](const loomperf::BaselineArgs& args, int*, char***) {
                                  return std::make_unique<loomperf::GlooBaseline>(args);
                                });
}
