// The host thread of a CUDA communicator's proxy: it calls progress() on the connections that
// need the host while a kernel steps them (SendConnection::needsHostProgress: a wire
// connection behind a proxy ring, transports/proxy/proxy_connection.h, or a GPUDirect RDMA
// one, transports/ib/ib_gdr.h).
//
// A connection is driven from the moment a launch that steps it is enqueued (hold) until that
// launch is finished (release), and a send connection after that until everything it was
// given has left (drained): a kernel ends once its last step is in the proxy ring, before the
// wire has carried it. Connections of no launch are left alone, as a CPU communicator's are
// between calls; the wire's own buffers hold what arrives meanwhile.
//
// The thread starts with the first hold and sleeps while there is nothing to drive. It spins
// briefly when nothing moves, then yields, then naps: a kernel's next step usually comes within
// microseconds, but on a host with few cores the thread must not starve the ranks' own.
//
// A connection whose progress() throws (the peer is gone, the wire broke) is dropped and its
// error kept; `onFailure` is told, so that the executor stops the kernels that step it
// (anyFailed, failureOf), and failureOf() gives the error to report for those launches. A
// later hold of it drives nothing: its launch is stopped the same way.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "include/loom/loom.h"
#include "transports/transport.h"

namespace loom {

class ProxyThread {
 public:
  struct Failure {
    std::string what;
    loomResult_t code = loomSuccess;
  };
  explicit ProxyThread(std::function<void()> onFailure) : onFailure_(std::move(onFailure)) {}
  ~ProxyThread();
  ProxyThread(const ProxyThread&) = delete;
  ProxyThread& operator=(const ProxyThread&) = delete;

  // The connections of one launch that need the host (others are ignored; duplicates are
  // fine): driven until release() with the same lists.
  void hold(const std::vector<transport::SendConnection*>& sends,
            const std::vector<transport::RecvConnection*>& recvs);
  void release(const std::vector<transport::SendConnection*>& sends,
               const std::vector<transport::RecvConnection*>& recvs);
  // Whether any connection has failed, and the first error of any of these connections (a
  // Failure with code loomSuccess when none has).
  bool anyFailed() const { return anyFailed_.load(std::memory_order_acquire); }
  Failure failureOf(const std::vector<transport::SendConnection*>& sends,
                    const std::vector<transport::RecvConnection*>& recvs) const;
  // Waits until no connection is held and every released send has drained or failed, for at
  // most `limit` (0: no limit), then lets go of whatever is left once the thread's current
  // round is over, and forgets the failures, so that the connections may be destroyed. Called
  // with no launch in flight. False when something was left.
  bool flush(std::chrono::milliseconds limit);

 private:
  struct Driven {
    transport::SendConnection* send = nullptr;  // one of the two
    transport::RecvConnection* recv = nullptr;
    int holds = 0;
    // Holds so far: a send found drained in a round may be dropped only if no launch held it
    // since the round began (that launch may have posted, ended and released meanwhile).
    uint64_t generation = 0;
  };
  void loop();
  void change(const std::vector<transport::SendConnection*>& sends,
              const std::vector<transport::RecvConnection*>& recvs, int delta);

  std::function<void()> onFailure_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;  // something to drive, or stop
  std::condition_variable idle_;  // nothing left to drive, or a round ended
  // By connection (its address, send or receive): what launches hold it.
  std::map<const void*, Driven> driven_;
  std::map<const void*, Failure> failed_;
  std::atomic<bool> anyFailed_{false};
  bool inRound_ = false;  // the thread is calling connections outside the lock
  bool stop_ = false;
  std::thread thread_;  // started by the first hold()
};

}  // namespace loom
