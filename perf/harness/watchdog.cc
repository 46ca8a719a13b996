#include "perf/harness/watchdog.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>

namespace loomperf {
namespace {

int64_t nowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

void abortAndExit(const std::vector<loomComm_t>& comms) {
  // The first failure aborts; a thread that fails because of that abort must not abort the
  // freed communicators again, so it waits for the exit instead.
  static std::atomic<bool> aborting{false};
  if (aborting.exchange(true))
    for (;;) pause();
  std::fflush(stdout);
  for (loomComm_t c : comms)
    if (c != nullptr) loomCommAbort(c);
  std::fflush(stdout);
  std::fflush(stderr);
  std::_Exit(1);
}

Watchdog::Watchdog(int timeoutSec, int nthreads)
    : timeoutSec_(timeoutSec), marks_(nthreads), what_(nthreads) {
  for (auto& m : marks_) m = 0;
  for (auto& w : what_) w = "";
  if (timeoutSec_ > 0) thread_ = std::thread([this] { loop(); });
}

Watchdog::~Watchdog() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Watchdog::watch(std::vector<loomComm_t> comms) {
  std::lock_guard lock(mu_);
  comms_ = std::move(comms);
}

// Only the watchdog's thread reads the clock: a clock read per call would add a visible share
// to a sub-microsecond call's time, which the other libraries' loops do not pay.
void Watchdog::busy(int thread, const char* what) {
  what_[thread].store(what, std::memory_order_relaxed);
  marks_[thread].store(marks_[thread].load(std::memory_order_relaxed) + 1,
                       std::memory_order_release);
}

void Watchdog::idle(int thread) {
  marks_[thread].store(marks_[thread].load(std::memory_order_relaxed) + 1,
                       std::memory_order_release);
}

void Watchdog::loop() {
  std::unique_lock lock(mu_);
  const int64_t limit = static_cast<int64_t>(timeoutSec_) * 1000000000;
  // A thread is stuck when its mark stayed odd (busy) and unchanged for `limit`: the time runs
  // from when this loop first saw that mark.
  std::vector<uint64_t> seen(marks_.size(), 0);
  std::vector<int64_t> seenAt(marks_.size(), nowNs());
  while (!cv_.wait_for(lock, std::chrono::milliseconds(100), [&] { return stop_; })) {
    int64_t now = nowNs();
    for (size_t t = 0; t < marks_.size(); ++t) {
      const uint64_t mark = marks_[t].load(std::memory_order_acquire);
      if (mark != seen[t]) {
        seen[t] = mark;
        seenAt[t] = now;
      }
      if ((mark & 1) == 0 || now - seenAt[t] <= limit) continue;
      char host[256] = "localhost";
      gethostname(host, sizeof host - 1);
      // nccl-tests' wording, so scripts that grep for it keep working.
      std::printf("%s: Test timeout (%ds) in %s; aborting the communicators\n", host, timeoutSec_,
                  what_[t].load());
      std::fprintf(stderr,
                   "%s: Test timeout (%ds): %s did not finish; loomCommAbort on every "
                   "communicator of this process, exiting with status 1\n",
                   host, timeoutSec_, what_[t].load());
      abortAndExit(comms_);
    }
  }
}

}  // namespace loomperf
