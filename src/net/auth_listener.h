// The bootstrap wire format and the listener that admits only connections proving the job's
// secret. Every bootstrap connection (rank -> root, rank -> rank) starts with a Hello; the
// listener reads Hellos of all pending connections at once (poll), so a stranger that sends
// garbage, a wrong secret, a truncated or oversized header, or trickles bytes slowly is refused
// and logged without delaying the ranks of the job.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "src/net/secret.h"
#include "src/net/socket.h"

namespace loom {

enum class HelloKind : uint16_t {
  kRegister = 1,  // rank -> root: "I am rank r of n; my listener is at ..."
  kRing = 2,      // rank -> next rank in the bootstrap ring, kept open for collectives
  kMessage = 3,   // rank -> rank: one tagged message, then the connection closes
  kData = 4,      // rank -> rank: a data connection of a transport, matched by tag, kept open
  kControl = 5,   // rank -> rank 0: the communicator's control channel, kept open
};

struct Hello {
  HelloKind kind = HelloKind::kMessage;
  Secret secret{};
  int32_t rank = -1;
  int32_t nranks = 0;
  uint32_t tag = 0;
  uint32_t payloadBytes = 0;
};

// magic 4, version 2, kind 2, secret 16, rank 4, nranks 4, tag 4, payload bytes 4.
inline constexpr size_t kHelloBytes = 40;
// Bootstrap messages are small (addresses, rank descriptions); anything larger is refused.
inline constexpr uint32_t kMaxBootstrapPayload = 16u << 20;
// Payloads admitted but not yet claimed by a wait, together; beyond it new ones are refused
// (setup blobs are small: only a peer gone wrong gets near it).
inline constexpr size_t kMaxUnclaimedBytes = size_t{256} << 20;
// A peer that holds the secret sends its whole Hello at once; one that takes longer is refused.
inline constexpr int kHelloDeadlineMs = 10000;

// Decodes the kHelloBytes of a Hello into `hello` and checks them against the job's `secret`.
// Returns why the connection must be refused ("" when it may go on to its payload).
std::string parseHello(const uint8_t* bytes, const Secret& secret, Hello* hello);

// Writes the kHelloBytes of `hello` (the wire format parseHello reads) to `out`.
void encodeHello(const Hello& hello, uint8_t* out);
// Writes the Hello and its payload.
void sendHello(Socket& socket, const Hello& hello, const void* payload, Deadline deadline,
               AbortFlag abort);

struct IncomingConnection {
  Socket socket;
  Hello hello;
  std::vector<char> payload;
};

// Thread-safe: several threads may wait for their messages at once (one of them polls the
// sockets, the others sleep until it has admitted something).
class AuthListener {
 public:
  // Listens on `address` (port 0: any free port). `owner` names it in logs ("rank 3").
  AuthListener(const SocketAddress& address, const Secret& secret, std::string owner);
  const SocketAddress& address() const { return address_; }

  // Waits up to `timeoutMs` for one authenticated connection with its whole payload.
  std::optional<IncomingConnection> poll(int timeoutMs);
  // Waits for a connection whose Hello satisfies `want`, keeping others for later calls.
  // `whatFor` names the wait in the timeout message. If `watch` (a connection on which nothing
  // is expected) closes meanwhile, its peer died: RemoteError instead of waiting on.
  IncomingConnection waitFor(const std::function<bool(const Hello&)>& want, Deadline deadline,
                             AbortFlag abort, const std::string& whatFor,
                             const Socket* watch = nullptr);
  // Accepts and checks what is pending without waiting.
  void drain();
  // A connection whose Hello satisfies `want`, waiting up to `timeoutMs` for it (0: only what
  // is pending), else nothing.
  std::optional<IncomingConnection> tryTake(const std::function<bool(const Hello&)>& want,
                                            int timeoutMs);
  // The communicator's size, once known: from then on only its ranks are admitted (ring,
  // message and data Hellos naming another size or a rank outside it are refused, and so are
  // registrations, which go to the root's listener only), so that a peer with the secret but a
  // wrong view of the job cannot pile up connections here.
  void expectRanks(int nranks) { expectedRanks_.store(nranks, std::memory_order_relaxed); }

 private:
  struct Pending {
    Socket socket;
    std::vector<uint8_t> header;
    Hello hello;
    std::vector<char> payload;
    size_t payloadGot = 0;
    bool headerDone = false;
    Deadline deadline = Deadline::never();
  };
  // Only the thread that holds polling_ calls these; pending_ is theirs.
  bool pollOnce(int timeoutMs, const Socket* watch = nullptr);
  void progress(Pending& p, bool& finished);
  // Runs pollOnce if no other thread polls (the caller holds `lock` on mutex_, released while
  // polling); else waits up to `timeoutMs` for the poller to admit something.
  void pollOrWait(std::unique_lock<std::mutex>& lock, int timeoutMs, const Socket* watch);
  void refuse(Pending& p, const std::string& why);

  Socket listener_;
  SocketAddress address_;
  Secret secret_;
  std::string owner_;
  std::vector<Pending> pending_;
  std::mutex mutex_;  // ready_ and polling_
  std::condition_variable admitted_;
  bool polling_ = false;
  std::deque<IncomingConnection> ready_;
  size_t readyBytes_ = 0;  // payload bytes in ready_
  std::atomic<int> expectedRanks_{0};
};

}  // namespace loom
