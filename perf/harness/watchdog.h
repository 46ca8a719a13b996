// -T: turns a stuck run into a message and a non-zero exit. Each benchmark thread marks when
// it starts waiting on loom and when the wait ends; a wait longer than the timeout aborts every
// communicator of the process (loomCommAbort, safe from any thread) and exits with status 1.
#ifndef LOOM_PERF_HARNESS_WATCHDOG_H_
#define LOOM_PERF_HARNESS_WATCHDOG_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "loom/loom.h"

namespace loomperf {

class Watchdog {
 public:
  // timeoutSec 0: never fires (no thread is started).
  Watchdog(int timeoutSec, int nthreads);
  ~Watchdog();
  // Communicators to abort when the timeout fires.
  void watch(std::vector<loomComm_t> comms);
  void busy(int thread, const char* what);
  void idle(int thread);

 private:
  void loop();
  int timeoutSec_;
  std::vector<std::atomic<uint64_t>> marks_;  // per thread: +1 at busy() and idle(); odd: busy
  std::vector<std::atomic<const char*>> what_;
  std::vector<loomComm_t> comms_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

// Aborts `comms`, then exits with status 1 without running destructors (other threads may
// still be inside loom calls on them).
[[noreturn]] void abortAndExit(const std::vector<loomComm_t>& comms);

}  // namespace loomperf

#endif  // LOOM_PERF_HARNESS_WATCHDOG_H_
