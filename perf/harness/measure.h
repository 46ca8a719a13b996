// One benchmark thread's measuring: nccl-tests' BenchTime for one collective at one size
// (checked sync run, timed iterations, time combined over all ranks, checked runs), on the
// thread's slice of ranks. With --device cuda the buffers are device memory (device.h), the
// time is that of events on the ranks' streams, and checks copy the results back first.
#ifndef LOOM_PERF_HARNESS_MEASURE_H_
#define LOOM_PERF_HARNESS_MEASURE_H_

#include <cstdint>

#include "perf/harness/collectives.h"
#include "perf/harness/job.h"

namespace loomperf {

struct Measurement {
  double seconds = 0;  // per call, combined over the ranks as -a says
  Bandwidth bw;
  int64_t wrong = 0;        // wrong elements over every rank
  bool failedHere = false;  // this thread's ranks held wrong elements
};

class Measurer {
 public:
  // With --device cuda, makes the thread's (first) rank's device its current one.
  Measurer(Job& job, int thread);

  // Chooses what the next calls measure. root < 0: the collective has no root.
  void select(const CollSpec& spec, loomDataType_t type, Op op, int root);
  // nccl-tests' counts for `bytes` of the selected collective and type.
  CollCounts counts(size_t bytes) const;
  // -w out-of-place calls at `bytes`, then waits for them.
  void warmup(size_t bytes);
  Measurement measure(size_t bytes, bool inPlace);

 private:
  void setup(size_t bytes);
  size_t sendBytes() const { return counts_.sendCount * ts_; }
  size_t recvBytes() const { return counts_.recvCount * ts_; }
  CallSite site(const Rank& r) const;
  void startColl(bool inPlace, int iter);
  void complete();
  void initData(bool inPlace, uint64_t seed);
  int64_t checkData(bool inPlace);
  // --device cuda: records the events `event` names on the thread's ranks' streams; the
  // longest time between timedStart and timedEnd over those ranks.
  void startEvents(void* Rank::*event);
  double eventSeconds();
  Rank& rank(int g) { return job_.ranks[t_ * o_.nGpus + g]; }

  Job& job_;
  const Options& o_;
  int t_;
  const CollSpec* spec_ = nullptr;
  loomDataType_t type_ = loomFloat32;
  Op op_ = Op::kSum;
  int root_ = -1;
  size_t ts_ = 4;
  BufferShift shift_;  // where each call of the size starts (setup())
  CollCounts counts_;
  uint64_t seed_ = 100;
};

}  // namespace loomperf

#endif  // LOOM_PERF_HARNESS_MEASURE_H_
