#include "src/exec/cuda/proxy_thread.h"

#include <sched.h>

#include <utility>

#include "src/base/cpu_arch.h"
#include "src/base/error.h"

namespace loom {
namespace {

// Rounds without progress before the thread yields, and before it naps between rounds.
constexpr unsigned kSpinRounds = 64;
constexpr unsigned kYieldRounds = 4096;
constexpr auto kNap = std::chrono::microseconds(20);

}  // namespace

ProxyThread::~ProxyThread() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void ProxyThread::hold(const std::vector<transport::SendConnection*>& sends,
                       const std::vector<transport::RecvConnection*>& recvs) {
  change(sends, recvs, +1);
}

void ProxyThread::release(const std::vector<transport::SendConnection*>& sends,
                          const std::vector<transport::RecvConnection*>& recvs) {
  change(sends, recvs, -1);
}

void ProxyThread::change(const std::vector<transport::SendConnection*>& sends,
                         const std::vector<transport::RecvConnection*>& recvs, int delta) {
  bool any = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto add = [&](const void* key, Driven d) {
      if (failed_.count(key) != 0) return;  // the executor stops the launch (anyFailed)
      if (delta > 0) {
        Driven& entry = driven_.emplace(key, d).first->second;
        ++entry.holds;
        ++entry.generation;
        any = true;
      } else if (auto it = driven_.find(key); it != driven_.end() && it->second.holds > 0) {
        --it->second.holds;  // the thread drops it once drained
      }
    };
    // A launch lists a connection once per task that steps it; it holds it once.
    std::vector<const void*> seen;
    auto first = [&](const void* key) {
      for (const void* k : seen)
        if (k == key) return false;
      seen.push_back(key);
      return true;
    };
    for (transport::SendConnection* c : sends)
      if (c->needsHostProgress() && first(c)) add(c, Driven{c, nullptr, 0});
    for (transport::RecvConnection* c : recvs)
      if (c->needsHostProgress() && first(c)) add(c, Driven{nullptr, c, 0});
    if (any && !thread_.joinable()) thread_ = std::thread([this] { loop(); });
  }
  if (any) wake_.notify_all();
}

ProxyThread::Failure ProxyThread::failureOf(
    const std::vector<transport::SendConnection*>& sends,
    const std::vector<transport::RecvConnection*>& recvs) const {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const transport::SendConnection* c : sends)
    if (auto it = failed_.find(c); it != failed_.end()) return it->second;
  for (const transport::RecvConnection* c : recvs)
    if (auto it = failed_.find(c); it != failed_.end()) return it->second;
  return Failure{};
}

bool ProxyThread::flush(std::chrono::milliseconds limit) {
  std::unique_lock<std::mutex> lock(mutex_);
  auto done = [&] { return driven_.empty(); };
  bool flushed = true;
  if (limit.count() <= 0) {
    idle_.wait(lock, done);
  } else {
    flushed = idle_.wait_for(lock, limit, done);
  }
  driven_.clear();
  idle_.wait(lock, [&] { return !inRound_; });
  // The launches that stepped a failed connection are finished and have reported it; the
  // connections may now be destroyed, and a new one may get a failed one's address.
  failed_.clear();
  anyFailed_.store(false, std::memory_order_release);
  return flushed;
}

void ProxyThread::loop() {
  std::vector<std::pair<const void*, Driven>> round;
  std::vector<std::pair<const void*, uint64_t>> finished;  // with the generation seen
  std::vector<std::pair<const void*, Failure>> failures;
  unsigned still = 0;  // rounds in a row in which nothing moved
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stop_) {
    if (driven_.empty()) {
      idle_.notify_all();
      wake_.wait(lock, [&] { return stop_ || !driven_.empty(); });
      still = 0;
      continue;
    }
    round.assign(driven_.begin(), driven_.end());
    inRound_ = true;
    lock.unlock();
    bool moved = false;
    finished.clear();
    failures.clear();
    for (const auto& [key, d] : round) {
      try {
        moved = (d.send != nullptr ? d.send->progress() : d.recv->progress()) || moved;
        if (d.holds == 0 && (d.send == nullptr || d.send->drained()))
          finished.emplace_back(key, d.generation);
      } catch (const Error& e) {
        failures.emplace_back(key, Failure{e.what(), e.code()});
      } catch (const std::exception& e) {
        failures.emplace_back(key, Failure{e.what(), loomInternalError});
      }
    }
    if (moved) {
      still = 0;
    } else if (++still < kSpinRounds) {
      cpuPause();
    } else if (still < kYieldRounds) {
      sched_yield();
    } else {
      std::this_thread::sleep_for(kNap);
    }
    lock.lock();
    inRound_ = false;
    idle_.notify_all();
    for (const auto& [key, generation] : finished) {
      auto it = driven_.find(key);
      if (it != driven_.end() && it->second.generation == generation) driven_.erase(it);
    }
    for (auto& [key, failure] : failures) {
      driven_.erase(key);
      failed_.emplace(key, std::move(failure));
      anyFailed_.store(true, std::memory_order_release);
    }
    if (!failures.empty()) {
      lock.unlock();
      onFailure_();
      lock.lock();
    }
  }
}

}  // namespace loom
