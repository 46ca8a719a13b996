#include "src/net/auth_listener.h"

#include <arpa/inet.h>
#include <poll.h>

#include <cstring>

#include "src/base/error.h"
#include "src/base/logging.h"
#include "src/net/byte_order.h"
#include "src/net/test_hooks.h"

namespace loom {
namespace {

constexpr uint32_t kHelloMagic = 0x4c4d484c;  // "LMHL"
constexpr uint16_t kWireVersion = 1;
// Beyond this many half-open connections the oldest is dropped: strangers cannot exhaust fds.
constexpr size_t kMaxPending = 256;

}  // namespace

void encodeHello(const Hello& h, uint8_t* out) {
  uint8_t* p = out;
  wire::put32(p, kHelloMagic);
  wire::put16(p, kWireVersion);
  wire::put16(p, static_cast<uint16_t>(h.kind));
  std::memcpy(p, h.secret.data(), h.secret.size());
  p += h.secret.size();
  wire::put32(p, static_cast<uint32_t>(h.rank));
  wire::put32(p, static_cast<uint32_t>(h.nranks));
  wire::put32(p, h.tag);
  wire::put32(p, h.payloadBytes);
}

void sendHello(Socket& socket, const Hello& h, const void* payload, Deadline deadline,
               AbortFlag abort) {
  uint8_t buf[kHelloBytes];
  encodeHello(h, buf);
  socket.sendAll(buf, sizeof(buf), deadline, abort);
  if (h.payloadBytes > 0) socket.sendAll(payload, h.payloadBytes, deadline, abort);
}

std::string parseHello(const uint8_t* bytes, const Secret& secret, Hello* hello) {
  const uint8_t* q = bytes;
  uint32_t magic = wire::get32(q);
  uint16_t version = wire::get16(q);
  uint16_t kind = wire::get16(q);
  std::memcpy(hello->secret.data(), q, hello->secret.size());
  q += hello->secret.size();
  hello->rank = static_cast<int32_t>(wire::get32(q));
  hello->nranks = static_cast<int32_t>(wire::get32(q));
  hello->tag = wire::get32(q);
  hello->payloadBytes = wire::get32(q);
  if (magic != kHelloMagic) return "it does not speak loom's bootstrap protocol (bad magic)";
  if (version != kWireVersion)
    return strCat("it speaks bootstrap version ", version, ", this loom ", kWireVersion);
  if (!secretsEqual(hello->secret, secret)) return "it did not prove the job's secret";
  if (kind < 1 || kind > static_cast<uint16_t>(HelloKind::kControl))
    return strCat("unknown connection kind ", kind);
  // Only now: the enum must never hold a value outside its enumerators.
  hello->kind = static_cast<HelloKind>(kind);
  if (hello->payloadBytes > kMaxBootstrapPayload)
    return strCat("it announced ", hello->payloadBytes, " bytes, more than the ",
                  kMaxBootstrapPayload, " a bootstrap message may have");
  return "";
}

AuthListener::AuthListener(const SocketAddress& address, const Secret& secret, std::string owner)
    : listener_(Socket::listen(address)), secret_(secret), owner_(std::move(owner)) {
  address_ = listener_.localAddress();
  testing::notifyListenerCreated(address_);
}

void AuthListener::refuse(Pending& p, const std::string& why) {
  LOOM_WARN(kLogBootstrap, owner_, " refused a connection from ", p.socket.peerName(), ": ", why,
            ". If this is a rank of your job, it was given a different unique id.");
  testing::countRefusedConnection();
  p.socket.close();
}

// Reads what the connection has for us; sets `finished` when it is either admitted to ready_
// or refused (socket closed).
void AuthListener::progress(Pending& p, bool& finished) {
  finished = false;
  if (!p.headerDone) {
    uint8_t buf[kHelloBytes];
    size_t want = kHelloBytes - p.header.size();
    long n = p.socket.recvSome(buf, want);
    if (n < 0) {
      refuse(p, strCat("it closed after ", p.header.size(), " of ", kHelloBytes,
                       " header bytes (truncated)"));
      finished = true;
      return;
    }
    p.header.insert(p.header.end(), buf, buf + n);
    if (p.header.size() < kHelloBytes) return;
    std::string why = parseHello(p.header.data(), secret_, &p.hello);
    const int expected = expectedRanks_.load(std::memory_order_relaxed);
    if (why.empty() && expected > 0 &&
        (p.hello.kind == HelloKind::kRegister || p.hello.nranks != expected || p.hello.rank < 0 ||
         p.hello.rank >= expected)) {
      why =
          strCat("its Hello (kind ", static_cast<int>(p.hello.kind), ") claims rank ", p.hello.rank,
                 " of ", p.hello.nranks, ", not a rank of this communicator of ", expected);
    }
    if (!why.empty()) {
      refuse(p, why);
      finished = true;
      return;
    }
    p.headerDone = true;
    p.payload.resize(p.hello.payloadBytes);
  }
  if (p.payloadGot < p.payload.size()) {
    long n = p.socket.recvSome(p.payload.data() + p.payloadGot, p.payload.size() - p.payloadGot);
    if (n < 0) {
      refuse(p, strCat("it closed after ", p.payloadGot, " of ", p.payload.size(),
                       " payload bytes (truncated)"));
      finished = true;
      return;
    }
    p.payloadGot += static_cast<size_t>(n);
  }
  if (p.payloadGot == p.payload.size()) {
    finished = true;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (readyBytes_ + p.payload.size() <= kMaxUnclaimedBytes) {
        // A message is complete with its payload: its socket need not hold an fd meanwhile.
        if (p.hello.kind == HelloKind::kMessage) p.socket.close();
        p.socket.setPeerName(strCat("rank ", p.hello.rank));
        readyBytes_ += p.payload.size();
        ready_.push_back({std::move(p.socket), p.hello, std::move(p.payload)});
        return;
      }
    }
    refuse(p, strCat("its ", p.payload.size(), " payload bytes would exceed the ",
                     kMaxUnclaimedBytes, " bytes of messages that nobody has claimed yet"));
  }
}

bool AuthListener::pollOnce(int timeoutMs, const Socket* watch) {
  std::vector<pollfd> fds;
  fds.push_back({listener_.fd(), POLLIN, 0});
  for (const Pending& p : pending_) fds.push_back({p.socket.fd(), POLLIN, 0});
  if (watch != nullptr && watch->valid()) fds.push_back({watch->fd(), POLLIN, 0});
  int rc = ::poll(fds.data(), fds.size(), timeoutMs);
  if (rc < 0 && errno != EINTR) throwSystemError("poll() on the bootstrap listener", errno);
  if (rc > 0 && watch != nullptr && watch->valid() && fds.back().revents != 0 &&
      watch->peerClosed()) {
    throw RemoteError(strCat(watch->peerName(), " closed the connection (did it exit or crash?)"));
  }

  // Progress only those connections that have something to read, then admit new ones.
  std::vector<Pending> still;
  for (size_t i = 0; i < pending_.size(); ++i) {
    Pending& p = pending_[i];
    bool finished = false;
    if (rc > 0 && fds[i + 1].revents != 0) progress(p, finished);
    if (!finished && p.deadline.expired()) {
      refuse(p, strCat("it sent only ", p.header.size(), " header bytes in ", kHelloDeadlineMs,
                       " ms"));
      finished = true;
    }
    if (!finished) still.push_back(std::move(p));
  }
  pending_ = std::move(still);
  for (;;) {
    Socket s = listener_.tryAccept();
    if (!s.valid()) break;
    if (pending_.size() >= kMaxPending) {
      refuse(pending_.front(), "too many connections are waiting to prove the secret");
      pending_.erase(pending_.begin());
    }
    Pending p;
    p.socket = std::move(s);
    p.deadline = Deadline::after(std::chrono::milliseconds(kHelloDeadlineMs));
    bool finished = false;
    progress(p, finished);  // a legitimate peer has usually sent its Hello already
    if (!finished) pending_.push_back(std::move(p));
  }
  std::lock_guard<std::mutex> lock(mutex_);
  return !ready_.empty();
}

void AuthListener::pollOrWait(std::unique_lock<std::mutex>& lock, int timeoutMs,
                              const Socket* watch) {
  if (polling_) {
    admitted_.wait_for(lock, std::chrono::milliseconds(timeoutMs));
    return;
  }
  polling_ = true;
  lock.unlock();
  struct Done {
    AuthListener& self;
    std::unique_lock<std::mutex>& lock;
    ~Done() {
      lock.lock();
      self.polling_ = false;
      self.admitted_.notify_all();  // what it admitted may be another waiter's
    }
  } done{*this, lock};
  pollOnce(timeoutMs, watch);
}

void AuthListener::drain() {
  std::unique_lock<std::mutex> lock(mutex_);
  if (!polling_) pollOrWait(lock, 0, nullptr);  // else the poller accepts them
}

std::optional<IncomingConnection> AuthListener::poll(int timeoutMs) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (ready_.empty()) pollOrWait(lock, timeoutMs, nullptr);
  if (ready_.empty()) return std::nullopt;
  IncomingConnection c = std::move(ready_.front());
  ready_.pop_front();
  readyBytes_ -= c.payload.size();
  return c;
}

std::optional<IncomingConnection> AuthListener::tryTake(
    const std::function<bool(const Hello&)>& want, int timeoutMs) {
  std::unique_lock<std::mutex> lock(mutex_);
  for (int pass = 0; pass < 2; ++pass) {
    for (auto it = ready_.begin(); it != ready_.end(); ++it) {
      if (want(it->hello)) {
        IncomingConnection c = std::move(*it);
        ready_.erase(it);
        return c;
      }
    }
    if (pass == 0) pollOrWait(lock, timeoutMs, nullptr);
  }
  return std::nullopt;
}

IncomingConnection AuthListener::waitFor(const std::function<bool(const Hello&)>& want,
                                         Deadline deadline, AbortFlag abort,
                                         const std::string& whatFor, const Socket* watch) {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    for (auto it = ready_.begin(); it != ready_.end(); ++it) {
      if (want(it->hello)) {
        IncomingConnection c = std::move(*it);
        ready_.erase(it);
        readyBytes_ -= c.payload.size();
        return c;
      }
    }
    throwIfAborted(abort, whatFor.c_str());
    if (deadline.expired()) throw TimeoutError(strCat("timed out waiting for ", whatFor));
    pollOrWait(lock, deadline.pollMs(kAbortPollMs), watch);
  }
}

}  // namespace loom
