// How the ranks of a benchmark agree on things outside the measured calls: barriers, the
// combined timing of a size, the total of wrong elements, the rank lines of the preamble.
// Two levels: the threads of one process (ThreadTeam), then the processes (ProcessGroup: MPI
// under mpirun, a small loom communicator of one rank per process for env launches, nothing
// for a single process). Only a team's thread 0 talks to the process group.
#ifndef LOOM_PERF_HARNESS_TEAM_H_
#define LOOM_PERF_HARNESS_TEAM_H_

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "loom/loom.h"

namespace loomperf {

enum class Combine { kSum, kMin, kMax };

class ProcessGroup {
 public:
  virtual ~ProcessGroup() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual void barrier() = 0;
  virtual void allReduce(double* values, int n, Combine how) = 0;
  virtual void allReduce(int64_t* values, int n) = 0;  // sum
  // Every process's text, in process order, on every process.
  virtual std::vector<std::string> allGather(const std::string& mine) = 0;
};

// One process: every operation is the identity.
std::unique_ptr<ProcessGroup> makeSingleProcessGroup();
// Over `comm`, a CPU communicator with one rank per process, used with NULL streams.
std::unique_ptr<ProcessGroup> makeLoomProcessGroup(loomComm_t comm);

// nccl-tests' -a: which time a size reports.
enum class TimeReport { kRank0 = 0, kMean = 1, kMin = 2, kMax = 3 };

class ThreadTeam {
 public:
  ThreadTeam(int nthreads, ProcessGroup* group);
  int size() const { return nthreads_; }

  void barrier(int thread);
  // One value per thread; the result over every thread of every process.
  double combine(int thread, double value, TimeReport how);
  int64_t sum(int thread, int64_t value);
  // Each thread's text, concatenated in thread order then process order.
  std::string gatherText(int thread, const std::string& mine);

 private:
  // Runs `finish` on thread 0 once every thread has deposited its value.
  template <typename Finish>
  void rendezvous(int thread, Finish finish);

  int nthreads_;
  ProcessGroup* group_;
  std::mutex mu_;
  std::condition_variable cv_;
  int arrived_ = 0;
  uint64_t generation_ = 0;
  std::vector<double> doubles_;
  std::vector<int64_t> ints_;
  std::vector<std::string> texts_;
  double doubleResult_ = 0;
  int64_t intResult_ = 0;
  std::string textResult_;
};

}  // namespace loomperf

#endif  // LOOM_PERF_HARNESS_TEAM_H_
