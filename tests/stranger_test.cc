// Strangers at the door: while a job initialises, something connects to every port loom
// listens on (the rendezvous root and each rank) with a wrong secret, garbage, a truncated
// header, an oversized one, and a slow trickle. The job must initialise and work normally, and
// every stranger must be refused (its connection closed by loom), never admitted.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <thread>

#include "src/net/test_hooks.h"
#include "tests/test_util.h"

namespace loom::test {
namespace {

int connectTo(const SocketAddress& address) {
  int fd = socket(address.family(), SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  if (connect(fd, address.sa(), address.length) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// A header that looks like loom's (right magic and version) but proves a wrong secret.
std::vector<char> fakeHello(uint32_t payloadBytes) {
  std::vector<char> h(40, 0);
  uint32_t magic = htonl(0x4c4d484c);
  uint16_t version = htons(1), kind = htons(1);
  std::memcpy(h.data(), &magic, 4);
  std::memcpy(h.data() + 4, &version, 2);
  std::memcpy(h.data() + 6, &kind, 2);
  std::memset(h.data() + 8, 0x5a, 16);  // not the secret
  uint32_t bytes = htonl(payloadBytes);
  std::memcpy(h.data() + 36, &bytes, 4);
  return h;
}

class Strangers {
 public:
  // Opens the five kinds of bad connection to `address`; the trickler keeps sending.
  void attack(const SocketAddress& address) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto open = [&](const std::vector<char>& bytes, bool closeAfter) {
      int fd = connectTo(address);
      if (fd < 0) return;
      if (!bytes.empty()) (void)!send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (closeAfter) {
        close(fd);
      } else {
        fds_.push_back(fd);
      }
    };
    open(fakeHello(0), false);                // wrong secret
    open(std::vector<char>(64, 'G'), false);  // garbage
    open(std::vector<char>(20, 0), true);     // truncated, then gone
    open(fakeHello(0xffffffffu), false);      // absurd payload size
    int slow = connectTo(address);
    if (slow >= 0) {
      fds_.push_back(slow);
      tricklers_.emplace_back([this, slow] {
        for (int i = 0; i < 40 && !stop_; ++i) {  // one byte per 50 ms, up to 2 s
          if (send(slow, "L", 1, MSG_NOSIGNAL) < 0) return;
          std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
      });
    }
    ++listeners_;
  }

  // After the job is gone, every stranger connection must have been closed by loom.
  void expectAllRefused() {
    stop_ = true;
    for (auto& t : tricklers_) t.join();
    std::lock_guard<std::mutex> lock(mutex_);
    for (int fd : fds_) {
      pollfd p{fd, POLLIN, 0};
      bool closed = false;
      for (int i = 0; i < 100 && !closed; ++i) {
        if (poll(&p, 1, 50) > 0) {
          char buf[64];
          ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
          closed = n == 0 || (n < 0 && errno == ECONNRESET);
          EXPECT_LE(n, 0) << "loom sent bytes to a stranger";
          if (n > 0) break;
        }
      }
      EXPECT_TRUE(closed) << "a stranger's connection is still open";
      close(fd);
    }
  }

  int listeners() const { return listeners_; }

 private:
  std::mutex mutex_;
  std::vector<int> fds_;
  std::vector<std::thread> tricklers_;
  std::atomic<bool> stop_{false};
  std::atomic<int> listeners_{0};
};

TEST(Strangers, JobInitialisesWhileEveryPortIsAttacked) {
  Strangers strangers;
  testing::setListenerHook([&](const SocketAddress& a) { strangers.attack(a); });
  uint64_t refusedBefore = testing::refusedConnectionCount();

  const int n = 4;
  loomUniqueId id = makeId();
  std::vector<loomComm_t> comms = initThreads(n, id);
  // The job works: a split (new listeners, attacked too) and finalize.
  std::vector<loomComm_t> halves(n, nullptr);
  runThreads(n, [&](int r) {
    EXPECT_EQ(loomCommSplit(comms[r], r % 2, r, &halves[r], nullptr), loomSuccess)
        << loomGetLastError(comms[r]);
  });
  for (int r = 0; r < n; ++r) {
    int rank = -1;
    EXPECT_EQ(loomCommUserRank(halves[r], &rank), loomSuccess);
    EXPECT_EQ(rank, r / 2);
  }
  finalizeAndDestroy(halves);
  finalizeAndDestroy(comms);
  testing::setListenerHook(nullptr);

  // Root + 4 ranks + 4 split listeners.
  EXPECT_EQ(strangers.listeners(), 1 + n + n);
  strangers.expectAllRefused();
  // Bad headers that arrived while loom was reading its listeners were refused and counted
  // (the rest were closed with their listener).
  EXPECT_GT(testing::refusedConnectionCount(), refusedBefore);
}

}  // namespace
}  // namespace loom::test
