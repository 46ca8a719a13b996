#include "src/bootstrap/bootstrap.h"

#include <cstring>
#include <thread>

#include "src/base/error.h"
#include "src/base/logging.h"
#include "src/bootstrap/bootstrap_root.h"
#include "src/net/net_if.h"
#include "src/net/test_hooks.h"

namespace loom {

std::unique_ptr<AuthListener> Bootstrap::openListener(const Secret& secret,
                                                      const std::string& owner,
                                                      const SocketAddress* toward) {
  NetInterface itf = chooseBootstrapInterface(toward);
  return std::make_unique<AuthListener>(itf.address, secret, owner);
}

Bootstrap::Bootstrap(std::unique_ptr<AuthListener> listener, std::vector<SocketAddress> peers,
                     const BootstrapOptions& options)
    : listener_(std::move(listener)), peers_(std::move(peers)), options_(options) {
  listener_->expectRanks(options_.nranks);
}

Deadline Bootstrap::deadline() const { return Deadline::after(options_.timeout); }

std::unique_ptr<Bootstrap> Bootstrap::viaRoot(const UniqueIdContents& id,
                                              const BootstrapOptions& options) {
  auto listener = openListener(options.secret, options.owner, &id.root);
  // The root may not be listening yet (LOOM_COMM_ID: rank 0 starts it): connect retries.
  Deadline deadline = Deadline::after(options.timeout);
  Socket root;
  try {
    root = Socket::connect(id.root, deadline, options.abort, /*retryRefused=*/true);
  } catch (const Error& e) {
    throw Error(e.code() == loomSystemError ? loomRemoteError : e.code(),
                strCat("cannot reach the rendezvous root at ", id.root.toString(), ": ", e.what(),
                       ". Is the process that called loomGetUniqueId still running, "
                       "and is that address reachable from here (LOOM_SOCKET_IFNAME)?"));
  }
  root.setPeerName(strCat("the rendezvous root at ", id.root.toString()));
  RootRegistration reg{listener->address(), options.timeout.count()};
  std::vector<char> payload = encodeRegistration(reg);
  Hello hello{HelloKind::kRegister,
              options.secret,
              options.rank,
              options.nranks,
              0,
              static_cast<uint32_t>(payload.size())};
  sendHello(root, hello, payload.data(), deadline, options.abort);
  LOOM_INFO(kLogBootstrap, "registered with the rendezvous root at ", id.root.toString(),
            "; listening on ", listener->address().toString());
  testing::notifyInitStage(options.rank, "root_registered");

  // Wait a little longer than the root, which reports who is missing at its deadline.
  Deadline replyDeadline =
      options.timeout.count() > 0
          ? Deadline::after(options.timeout + std::chrono::milliseconds(kRootGraceMs))
          : Deadline::never();
  RootReply reply;
  try {
    reply = receiveReply(root, replyDeadline, options.abort);
  } catch (const TimeoutError&) {
    throw TimeoutError(strCat("the rendezvous root at ", id.root.toString(),
                              " did not answer within the deadline; not all ranks arrived. "
                              "Check that every rank uses this unique id and nranks=",
                              options.nranks, ", or raise LOOM_TIMEOUT"));
  }
  if (reply.status != loomSuccess) throw Error(reply.status, reply.message);
  LOOM_ENFORCE_EQ(static_cast<int>(reply.listeners.size()), options.nranks, RemoteError,
                  "the rendezvous root sent the wrong number of ranks");
  std::unique_ptr<Bootstrap> b(
      new Bootstrap(std::move(listener), std::move(reply.listeners), options));
  b->connectRing();
  return b;
}

std::unique_ptr<Bootstrap> Bootstrap::viaPeers(std::unique_ptr<AuthListener> listener,
                                               std::vector<SocketAddress> peers,
                                               const BootstrapOptions& options) {
  std::unique_ptr<Bootstrap> b(new Bootstrap(std::move(listener), std::move(peers), options));
  b->connectRing();
  return b;
}

Socket Bootstrap::connectPeer(int peer, Deadline deadline) {
  try {
    Socket s = Socket::connect(peers_[peer], deadline, options_.abort, /*retryRefused=*/false);
    s.setPeerName(strCat("rank ", peer));
    return s;
  } catch (const SystemError& e) {
    // Its listener was open before it told anyone the address: a refusal means it is gone,
    // perhaps because another rank died first.
    awaitVerdict();
    throw RemoteError(strCat("cannot connect to rank ", peer, " at ", peers_[peer].toString(),
                             " (did it exit or crash?): ", e.what()));
  }
}

void Bootstrap::connectRing() {
  const int n = options_.nranks, r = options_.rank;
  connectControl(deadline());
  if (n > 1) {
    try {
      const int next = (r + 1) % n, prev = (r + n - 1) % n;
      Deadline dl = deadline();
      next_ = connectPeer(next, dl);
      Hello hello{HelloKind::kRing, options_.secret, r, n, 0, 0};
      sendHello(next_, hello, nullptr, dl, options_.abort);
      next_.setPeerName(strCat("rank ", next));
      IncomingConnection in = listener_->waitFor(
          [&](const Hello& h) { return h.kind == HelloKind::kRing && h.rank == prev; }, dl,
          options_.abort, strCat("rank ", prev, " to connect the bootstrap ring"), &next_);
      prev_ = std::move(in.socket);
      prev_.setPeerName(strCat("rank ", prev));
    } catch (const RemoteError&) {
      awaitVerdict();
      throw;
    }
  }
  listener_->drain();
  testing::notifyInitStage(r, "bootstrap_ready");
}

void Bootstrap::connectControl(Deadline dl) {
  if (options_.failures == nullptr) return;
  const int n = options_.nranks, r = options_.rank;
  std::vector<Socket> links(static_cast<size_t>(r == 0 ? n : 1));
  if (r != 0) {
    links[0] = connectPeer(0, dl);
    Hello hello{HelloKind::kControl, options_.secret, r, n, 0, 0};
    sendHello(links[0], hello, nullptr, dl, options_.abort);
    links[0].setPeerName("rank 0");
  }
  // Rank 0's control thread takes the others' connections from the listener as they come.
  control_ =
      std::make_unique<ControlChannel>(r, n, std::move(links), *options_.failures, options_.control,
                                       options_.owner, r == 0 ? listener_.get() : nullptr);
}

void Bootstrap::allGather(void* data, size_t bytesPerRank) {
  const int n = options_.nranks, r = options_.rank;
  char* base = static_cast<char*>(data);
  Deadline dl = deadline();
  // Ring: at step s each rank forwards the block it received at step s-1 (its own at s = 0).
  try {
    for (int s = 0; s < n - 1; ++s) {
      int sendBlock = (r - s + n) % n;
      int recvBlock = (r - s - 1 + n) % n;
      sendRecvAll(next_, base + sendBlock * bytesPerRank, bytesPerRank, prev_,
                  base + recvBlock * bytesPerRank, bytesPerRank, dl, options_.abort);
    }
  } catch (const RemoteError&) {
    awaitVerdict();
    throw;
  }
  listener_->drain();
}

void Bootstrap::awaitVerdict() const {
  if (options_.abort == nullptr || control_ == nullptr) return;
  // A neighbour that closed the ring may be a survivor that failed first: the control channel
  // names the rank that died.
  control_->awaitVerdict();
  throwIfAborted(options_.abort, "the bootstrap exchange");
}

void Bootstrap::barrier() {
  std::vector<char> bytes(static_cast<size_t>(options_.nranks), 1);
  allGather(bytes.data(), 1);
}

void Bootstrap::send(int peer, uint32_t tag, const void* data, size_t size) {
  LOOM_ENFORCE(peer >= 0 && peer < options_.nranks, InternalError, "bootstrap send to rank ", peer,
               " of ", options_.nranks);
  LOOM_ENFORCE(size <= kMaxBootstrapPayload, InternalError, "bootstrap message of ", size,
               " bytes is too large");
  Deadline dl = deadline();
  Socket s = connectPeer(peer, dl);
  Hello hello{HelloKind::kMessage,        options_.secret, options_.rank, options_.nranks, tag,
              static_cast<uint32_t>(size)};
  sendHello(s, hello, data, dl, options_.abort);
}

void Bootstrap::recv(int peer, uint32_t tag, void* data, size_t size, const std::string& whatFor) {
  IncomingConnection c = listener_->waitFor(
      [&](const Hello& h) {
        return h.kind == HelloKind::kMessage && h.rank == peer && h.tag == tag;
      },
      deadline(), options_.abort,
      whatFor.empty() ? strCat("a bootstrap message from rank ", peer, " (tag ", tag, ")")
                      : whatFor);
  LOOM_ENFORCE(c.payload.size() == size, RemoteError, "rank ", peer, " sent ", c.payload.size(),
               " bytes for bootstrap tag ", tag, " where ", size, " were expected");
  std::memcpy(data, c.payload.data(), size);
}

}  // namespace loom

namespace loom {

Socket Bootstrap::connectData(int peer, uint32_t tag) {
  Deadline dl = deadline();
  Socket s = connectPeer(peer, dl);
  Hello hello{HelloKind::kData, options_.secret, options_.rank, options_.nranks, tag, 0};
  sendHello(s, hello, nullptr, dl, options_.abort);
  return s;
}

Socket Bootstrap::acceptData(int peer, uint32_t tag) {
  IncomingConnection c = listener_->waitFor(
      [&](const Hello& h) { return h.kind == HelloKind::kData && h.rank == peer && h.tag == tag; },
      deadline(), options_.abort, strCat("a data connection from rank ", peer, " (tag ", tag, ")"));
  c.socket.setPeerName(strCat("rank ", peer));
  return std::move(c.socket);
}

}  // namespace loom
