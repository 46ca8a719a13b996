#include "perf/harness/team.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace loomperf {
namespace {

class SingleProcessGroup : public ProcessGroup {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  void barrier() override {}
  void allReduce(double*, int, Combine) override {}
  void allReduce(int64_t*, int) override {}
  std::vector<std::string> allGather(const std::string& mine) override { return {mine}; }
};

// Control traffic over loom itself: it runs between measurements only, on its own
// communicator, so it never mixes with the calls being timed.
class LoomProcessGroup : public ProcessGroup {
 public:
  explicit LoomProcessGroup(loomComm_t comm) : comm_(comm) {
    loomCommUserRank(comm, &rank_);
    loomCommCount(comm, &size_);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void barrier() override {
    double one = 1;
    allReduce(&one, 1, Combine::kSum);
  }
  void allReduce(double* v, int n, Combine how) override {
    loomRedOp_t op = how == Combine::kSum ? loomSum : how == Combine::kMin ? loomMin : loomMax;
    check(loomAllReduce(v, v, n, loomFloat64, op, comm_, nullptr), "loomAllReduce");
  }
  void allReduce(int64_t* v, int n) override {
    check(loomAllReduce(v, v, n, loomInt64, loomSum, comm_, nullptr), "loomAllReduce");
  }
  std::vector<std::string> allGather(const std::string& mine) override {
    std::vector<char> in(kTextBytes, 0), out(kTextBytes * size_);
    std::memcpy(in.data(), mine.data(), std::min(mine.size(), kTextBytes - 1));
    check(loomAllGather(in.data(), out.data(), kTextBytes, loomUint8, comm_, nullptr),
          "loomAllGather");
    std::vector<std::string> all;
    for (int p = 0; p < size_; ++p) all.emplace_back(out.data() + p * kTextBytes);
    return all;
  }

 private:
  static constexpr size_t kTextBytes = 16384;
  void check(loomResult_t r, const char* what) {
    if (r == loomSuccess) return;
    std::fprintf(stderr, "loom perf: %s between processes failed: %s: %s\n", what,
                 loomGetErrorString(r), loomGetLastError(comm_));
    std::exit(1);
  }
  loomComm_t comm_;
  int rank_ = 0, size_ = 1;
};

}  // namespace

std::unique_ptr<ProcessGroup> makeSingleProcessGroup() {
  return std::make_unique<SingleProcessGroup>();
}
std::unique_ptr<ProcessGroup> makeLoomProcessGroup(loomComm_t comm) {
  return std::make_unique<LoomProcessGroup>(comm);
}

ThreadTeam::ThreadTeam(int nthreads, ProcessGroup* group)
    : nthreads_(nthreads), group_(group), doubles_(nthreads), ints_(nthreads), texts_(nthreads) {}

template <typename Finish>
void ThreadTeam::rendezvous(int thread, Finish finish) {
  std::unique_lock lock(mu_);
  ++arrived_;
  if (thread == 0) {
    cv_.wait(lock, [&] { return arrived_ == nthreads_; });
    finish();  // the other threads wait on the generation, so the lock may stay held
    arrived_ = 0;
    ++generation_;
    cv_.notify_all();
  } else {
    uint64_t gen = generation_;
    cv_.notify_all();
    cv_.wait(lock, [&] { return generation_ != gen; });
  }
}

void ThreadTeam::barrier(int thread) {
  rendezvous(thread, [&] { group_->barrier(); });
}

double ThreadTeam::combine(int thread, double value, TimeReport how) {
  {
    std::lock_guard lock(mu_);
    doubles_[thread] = value;
  }
  double result = 0;
  rendezvous(thread, [&] {
    double v = doubles_[0];
    switch (how) {
      case TimeReport::kRank0:
        // Only process 0's thread 0 counts; a sum spreads its value to everyone.
        v = group_->rank() == 0 ? doubles_[0] : 0;
        group_->allReduce(&v, 1, Combine::kSum);
        break;
      case TimeReport::kMean:
        v = 0;
        for (double d : doubles_) v += d;
        group_->allReduce(&v, 1, Combine::kSum);
        v /= static_cast<double>(nthreads_) * group_->size();
        break;
      case TimeReport::kMin:
        v = *std::min_element(doubles_.begin(), doubles_.end());
        group_->allReduce(&v, 1, Combine::kMin);
        break;
      case TimeReport::kMax:
        v = *std::max_element(doubles_.begin(), doubles_.end());
        group_->allReduce(&v, 1, Combine::kMax);
        break;
    }
    doubleResult_ = v;
  });
  std::lock_guard lock(mu_);
  result = doubleResult_;
  return result;
}

int64_t ThreadTeam::sum(int thread, int64_t value) {
  {
    std::lock_guard lock(mu_);
    ints_[thread] = value;
  }
  rendezvous(thread, [&] {
    int64_t v = 0;
    for (int64_t i : ints_) v += i;
    group_->allReduce(&v, 1);
    intResult_ = v;
  });
  std::lock_guard lock(mu_);
  return intResult_;
}

std::string ThreadTeam::gatherText(int thread, const std::string& mine) {
  {
    std::lock_guard lock(mu_);
    texts_[thread] = mine;
  }
  rendezvous(thread, [&] {
    std::string local;
    for (const std::string& t : texts_) local += t;
    std::string all;
    for (const std::string& t : group_->allGather(local)) all += t;
    textResult_ = all;
  });
  std::lock_guard lock(mu_);
  return textResult_;
}

}  // namespace loomperf
