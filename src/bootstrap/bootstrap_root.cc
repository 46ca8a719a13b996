#include "src/bootstrap/bootstrap_root.h"

#include <arpa/inet.h>
#include <poll.h>

#include <cstring>
#include <memory>
#include <optional>
#include <thread>

#include "src/base/error.h"
#include "src/base/logging.h"
#include "src/net/auth_listener.h"

namespace loom {
namespace {

void appendU32(std::vector<char>& out, uint32_t v) {
  v = htonl(v);
  const char* p = reinterpret_cast<const char*>(&v);
  out.insert(out.end(), p, p + 4);
}
uint32_t readU32(const char*& p, const char* end) {
  LOOM_ENFORCE(end - p >= 4, RemoteError, "bootstrap message truncated");
  uint32_t v;
  std::memcpy(&v, p, 4);
  p += 4;
  return ntohl(v);
}
void appendAddress(std::vector<char>& out, const SocketAddress& a) {
  appendU32(out, a.length);
  const char* p = reinterpret_cast<const char*>(&a.storage);
  out.insert(out.end(), p, p + a.length);
}
SocketAddress readAddress(const char*& p, const char* end) {
  SocketAddress a;
  uint32_t len = readU32(p, end);
  LOOM_ENFORCE(len <= sizeof(a.storage) && end - p >= static_cast<long>(len), RemoteError,
               "bootstrap address truncated");
  std::memcpy(&a.storage, p, len);
  a.length = len;
  p += len;
  return a;
}

// One rendezvous: lives on its own thread until every rank has had its answer.
class Root {
 public:
  Root(std::unique_ptr<AuthListener> listener) : listener_(std::move(listener)) {}

  void run() {
    ScopedLogContext context(strCat("root ", listener_->address().toString()));
    while (answered_ < nranks_ || nranks_ < 0) {
      if (std::optional<IncomingConnection> c = listener_->poll(50)) admit(std::move(*c));
      watchForDeparted();
      if (nranks_ > 0 && failure_.status == loomSuccess && arrived_ == nranks_) answerAll();
      if (deadline_.expired()) {
        if (failure_.status == loomSuccess) failTimeout();
        break;  // ranks still missing will find nobody listening and time out themselves
      }
    }
    LOOM_INFO(kLogBootstrap, "rendezvous done (", arrived_, " of ", nranks_, " ranks arrived)");
  }

 private:
  void admit(IncomingConnection c) {
    const Hello& h = c.hello;
    if (h.kind != HelloKind::kRegister) {
      LOOM_WARN(kLogBootstrap, "ignored a non-registration connection from rank ", h.rank);
      return;
    }
    RootRegistration reg;
    try {
      reg = decodeRegistration(c.payload);
    } catch (const Error& e) {
      LOOM_WARN(kLogBootstrap, "bad registration from rank ", h.rank, ": ", e.what());
      return;
    }
    if (nranks_ < 0) {
      if (h.nranks < 1 || h.nranks > kMaxRootRanks || h.rank < 0 || h.rank >= h.nranks) {
        // Not a size any job has: refuse this registration alone, before it fixes nranks.
        RootReply bad{
            loomInvalidArgument,
            strCat("rank ", h.rank, " of ", h.nranks,
                   " is not a valid rank of a valid job size (1 to ", kMaxRootRanks, " ranks)"),
            {}};
        LOOM_WARN(kLogBootstrap, bad.message);
        send(c.socket, bad);
        return;
      }
      // The first rank fixes nranks and starts the clock for everyone else.
      nranks_ = h.nranks;
      firstRank_ = h.rank;
      ranks_.resize(static_cast<size_t>(nranks_));
      deadline_ = Deadline::after(std::chrono::milliseconds(reg.timeoutMs));
      timeoutMs_ = reg.timeoutMs;
    }
    if (failure_.status != loomSuccess) {
      // The rendezvous already failed: tell latecomers at once instead of letting them wait.
      send(c.socket, failure_);
      ++answered_;
      return;
    }
    if (h.nranks != nranks_) {
      fail(loomInvalidArgument,
           strCat("ranks disagree about the job size: rank ", h.rank, " passed nranks=", h.nranks,
                  " but rank ", firstRank_, " passed nranks=", nranks_,
                  "; every rank must pass the same nranks"));
      send(c.socket, failure_);
      ++answered_;
      return;
    }
    if (h.rank < 0 || h.rank >= nranks_ || ranks_[h.rank].has_value()) {
      fail(loomInvalidArgument, strCat("two processes registered as rank ", h.rank, " of ", nranks_,
                                       "; every rank must pass a different rank"));
      send(c.socket, failure_);
      ++answered_;
      return;
    }
    c.socket.setPeerName(strCat("rank ", h.rank));
    ranks_[h.rank] = Member{std::move(c.socket), reg.listener};
    ++arrived_;
    LOOM_INFO(kLogBootstrap, "rank ", h.rank, " of ", nranks_, " arrived (", arrived_, "/", nranks_,
              ")");
  }

  // A registered rank whose connection closes before the answer has died: fail everyone now.
  void watchForDeparted() {
    if (failure_.status != loomSuccess) return;
    for (int r = 0; r < nranks_; ++r) {
      if (!ranks_[r] || !ranks_[r]->socket.valid()) continue;
      pollfd p{ranks_[r]->socket.fd(), POLLIN, 0};
      if (::poll(&p, 1, 0) <= 0) continue;
      char byte;
      if (ranks_[r]->socket.recvSome(&byte, 1) < 0) {
        ranks_[r]->socket.close();
        fail(loomRemoteError,
             strCat("rank ", r, " disconnected from the rendezvous before all ", nranks_,
                    " ranks arrived: it exited, crashed or was "
                    "killed; check its log"));
        return;
      }
    }
  }

  void failTimeout() {
    std::vector<int> missing;
    for (int r = 0; r < nranks_; ++r)
      if (!ranks_[r]) missing.push_back(r);
    fail(loomTimeout,
         strCat(missing.size(), " of ", nranks_, " ranks never reached the rendezvous at ",
                listener_->address().toString(), " within ", timeoutMs_ / 1000.0,
                " s: missing rank(s) ", joinInts(missing),
                ". Check that every rank calls loomCommInitRank with this unique id and nranks=",
                nranks_, ", or raise LOOM_TIMEOUT"));
  }

  void fail(loomResult_t status, const std::string& message) {
    failure_.status = status;
    failure_.message = message;
    LOOM_WARN(kLogBootstrap, message);
    for (auto& m : ranks_) {
      if (m && m->socket.valid()) {
        send(m->socket, failure_);
        m->socket.close();
        ++answered_;
      }
    }
  }

  void answerAll() {
    RootReply reply;
    for (auto& m : ranks_) reply.listeners.push_back(m->listener);
    for (auto& m : ranks_) {
      send(m->socket, reply);
      m->socket.close();
    }
    answered_ = nranks_;
  }

  void send(Socket& s, const RootReply& reply) {
    std::vector<char> bytes = encodeReply(reply);
    try {
      s.sendAll(bytes.data(), bytes.size(), Deadline::after(std::chrono::seconds(5)), nullptr);
    } catch (const Error& e) {
      LOOM_WARN(kLogBootstrap, "could not answer ", s.peerName(), ": ", e.what());
    }
  }

  struct Member {
    Socket socket;
    SocketAddress listener;
  };
  std::unique_ptr<AuthListener> listener_;
  int nranks_ = -1;
  int firstRank_ = -1;
  int arrived_ = 0;
  int answered_ = 0;
  int64_t timeoutMs_ = 0;
  Deadline deadline_ = Deadline::never();
  std::vector<std::optional<Member>> ranks_;
  RootReply failure_;
};

}  // namespace

std::vector<char> encodeRegistration(const RootRegistration& r) {
  std::vector<char> out;
  appendU32(out, static_cast<uint32_t>(r.timeoutMs >> 32));
  appendU32(out, static_cast<uint32_t>(r.timeoutMs & 0xffffffffu));
  appendAddress(out, r.listener);
  return out;
}

RootRegistration decodeRegistration(const std::vector<char>& bytes) {
  const char* p = bytes.data();
  const char* end = p + bytes.size();
  RootRegistration r;
  uint64_t hi = readU32(p, end), lo = readU32(p, end);
  r.timeoutMs = static_cast<int64_t>((hi << 32) | lo);
  // Deadline arithmetic in nanoseconds must not overflow; 0 means no deadline.
  LOOM_ENFORCE(r.timeoutMs >= 0 && r.timeoutMs <= kMaxRootTimeoutMs, RemoteError,
               "bootstrap registration with a timeout of ", r.timeoutMs, " ms");
  r.listener = readAddress(p, end);
  LOOM_ENFORCE(p == end, RemoteError, "bootstrap registration has ", end - p,
               " bytes after its end");
  return r;
}

std::vector<char> encodeReply(const RootReply& reply) {
  std::vector<char> body;
  appendU32(body, static_cast<uint32_t>(reply.status));
  if (reply.status == loomSuccess) {
    appendU32(body, static_cast<uint32_t>(reply.listeners.size()));
    for (const SocketAddress& a : reply.listeners) appendAddress(body, a);
  } else {
    appendU32(body, static_cast<uint32_t>(reply.message.size()));
    body.insert(body.end(), reply.message.begin(), reply.message.end());
  }
  std::vector<char> out;
  appendU32(out, static_cast<uint32_t>(body.size()));
  out.insert(out.end(), body.begin(), body.end());
  return out;
}

RootReply receiveReply(Socket& socket, Deadline deadline, AbortFlag abort) {
  uint32_t size;
  socket.recvAll(&size, 4, deadline, abort);
  size = ntohl(size);
  LOOM_ENFORCE(size <= kMaxBootstrapPayload, RemoteError, "the rendezvous root sent a reply of ",
               size, " bytes; is it a different loom version?");
  std::vector<char> body(size);
  socket.recvAll(body.data(), size, deadline, abort);
  return decodeReplyBody(body);
}

RootReply decodeReplyBody(const std::vector<char>& body) {
  const char* p = body.data();
  const char* end = p + body.size();
  RootReply reply;
  const uint32_t status = readU32(p, end);
  LOOM_ENFORCE(status < static_cast<uint32_t>(loomNumResults), RemoteError,
               "the rendezvous root sent an unknown status ", status);
  reply.status = static_cast<loomResult_t>(status);
  uint32_t count = readU32(p, end);
  if (reply.status == loomSuccess) {
    LOOM_ENFORCE(count <= kMaxRootRanks, RemoteError, "the rendezvous root sent ", count, " ranks");
    for (uint32_t i = 0; i < count; ++i) reply.listeners.push_back(readAddress(p, end));
  } else {
    LOOM_ENFORCE(end - p >= static_cast<long>(count), RemoteError, "root reply truncated");
    reply.message.assign(p, count);
  }
  return reply;
}

SocketAddress startBootstrapRoot(const SocketAddress& address, const Secret& secret) {
  auto listener = std::make_unique<AuthListener>(address, secret, "the rendezvous root");
  SocketAddress bound = listener->address();
  auto root = std::make_shared<Root>(std::move(listener));
  std::thread([root] {
    try {
      root->run();
    } catch (const std::exception& e) {
      LOOM_WARN(kLogBootstrap, "the rendezvous root stopped: ", e.what());
    }
  }).detach();
  LOOM_INFO(kLogBootstrap, "rendezvous root listening on ", bound.toString());
  return bound;
}

}  // namespace loom
