#include "transports/registry.h"

#include <algorithm>
#include <cstring>
#include <set>
#include <tuple>

#include "src/base/env.h"
#include "src/base/error.h"
#include "src/base/logging.h"
#include "transports/cuda_ipc/cuda_ipc_transport.h"
#include "transports/proxy/proxy_connection.h"
#include "transports/shm/shm_transport.h"
#include "transports/slot_ring.h"
#include "transports/socket/socket_transport.h"
#include "transports/tags.h"
#if LOOM_HAVE_IBVERBS
#include "transports/ib/ib_transport.h"
#endif

namespace loom::transport {
namespace {

constexpr uint32_t kEnvelopeMagic = 0x4c4d5445;  // "LMTE"

// One bootstrap message of connection setup.
struct SetupEnvelope {
  uint32_t magic = kEnvelopeMagic;
  int32_t status = loomSuccess;  // else the loomResult_t of the sender's failure
  int32_t protocol = 0;          // the Protocol this side asked for: both ends must agree
  char transport[16] = {};
  ConnectBlob blob;       // the transport's blob
  char error[1024] = {};  // what failed, when status says so
};

SetupEnvelope okEnvelope(const Transport& t, Protocol protocol, const ConnectBlob& blob) {
  SetupEnvelope e;
  e.protocol = static_cast<int32_t>(protocol);
  std::strncpy(e.transport, t.name(), sizeof(e.transport) - 1);
  e.blob = blob;
  return e;
}

SetupEnvelope errorEnvelope(const Error& error) {
  SetupEnvelope e;
  e.status = error.code();
  std::strncpy(e.error, error.what(), sizeof(e.error) - 1);
  return e;
}

std::string linkText(int sender, int receiver, int channel) {
  return strCat("rank ", sender, " -> rank ", receiver, " channel ", channel);
}

// Receives the envelope of `kind` from `peer`; throws the peer's failure as a RemoteError.
SetupEnvelope receiveEnvelope(Peers& comm, const ConnectionRequest& r, uint32_t batchTag,
                              SetupMessage kind) {
  SetupEnvelope e;
  comm.recvBlob(r.peer, messageTag(batchTag, r.channel, kind), &e, sizeof(e));
  const std::string link =
      r.send ? linkText(comm.rank(), r.peer, r.channel) : linkText(r.peer, comm.rank(), r.channel);
  LOOM_ENFORCE(e.magic == kEnvelopeMagic, RemoteError, "rank ", r.peer,
               " sent a malformed transport setup message for ", link);
  e.transport[sizeof(e.transport) - 1] = '\0';
  e.error[sizeof(e.error) - 1] = '\0';
  LOOM_ENFORCE(e.status == loomSuccess, RemoteError, "rank ", r.peer,
               " failed to set up its side of ", link, ": ", e.error);
  // Checked here, before any transport reads the blob: the blobs of the protocols differ.
  LOOM_ENFORCE(e.protocol == static_cast<int32_t>(r.protocol), InvalidArgument, link, ": rank ",
               r.peer, " asked for the ", protocolName(static_cast<Protocol>(e.protocol)),
               " protocol and rank ", comm.rank(), " for ", protocolName(r.protocol),
               "; both ends of a connection must request the same protocol");
  return e;
}

void validate(const Peers& comm, const std::vector<ConnectionRequest>& requests,
              uint32_t batchTag) {
  std::set<std::tuple<int, int, bool>> seen;
  for (const ConnectionRequest& r : requests) {
    LOOM_ENFORCE(r.peer >= 0 && r.peer < comm.nranks() && r.peer != comm.rank(), InvalidArgument,
                 "connection request to rank ", r.peer, " from rank ", comm.rank(), " of ",
                 comm.nranks(), ": the peer must be another rank of the communicator");
    checkTagFields(batchTag, r.channel);
    LOOM_ENFORCE(r.protocol == Protocol::kSimple || r.protocol == Protocol::kLL, InvalidArgument,
                 "connection request to rank ", r.peer, " with unknown protocol ",
                 static_cast<int>(r.protocol));
    LOOM_ENFORCE(seen.insert({r.peer, r.channel, r.send}).second, InvalidArgument,
                 "duplicate connection request: ", r.send ? "send to" : "receive from", " rank ",
                 r.peer, " on channel ", r.channel);
  }
}

// The state of one batch on this rank; on failure it tells every peer still waiting for a
// message from us why, so they fail now with our reason.
class Batch {
 public:
  Batch(Peers& comm, const std::vector<ConnectionRequest>& requests, uint32_t batchTag,
        Connections* leftover)
      : leftover_(leftover),
        comm_(comm),
        requests_(requests),
        batchTag_(batchTag),
        owed_(requests.size(), true),
        pending_(requests.size()) {}

  Connections run() {
    try {
      // Phase 1: every receiver creates its side and sends its blob to the sender.
      for (size_t i = 0; i < requests_.size(); ++i) {
        if (!requests_[i].send) phaseOne(i);
      }
      // Phase 2: every sender attaches to its receiver's side and acknowledges.
      for (size_t i = 0; i < requests_.size(); ++i) {
        if (requests_[i].send) phaseTwo(i);
      }
      // Phase 3: every receiver hears the acknowledgement and finishes.
      for (size_t i = 0; i < requests_.size(); ++i) {
        if (!requests_[i].send) phaseThree(i);
      }
    } catch (const Error& e) {
      tellPeers(e);
      if (leftover_ != nullptr) {
        for (auto& p : pending_)
          if (p) out_.unfinished.push_back(std::move(p));
        *leftover_ = std::move(out_);
      }
      throw;
    }
    return std::move(out_);
  }

 private:
  SetupContext context(const ConnectionRequest& r) {
    SetupContext ctx{comm_,     r.peer,     r.channel,
                     batchTag_, r.protocol, r.slotBytes != 0 ? r.slotBytes : slotBytesFromEnv()};
    ctx.device = comm_.rankInfo(comm_.rank()).device;
    return ctx;
  }
  Transport& transportFor(int peer) {
    return selectTransport(
        PeerPair{comm_.rankInfo(comm_.rank()), comm_.rankInfo(peer), comm_.pathClass(peer)});
  }
  void sendEnvelope(const ConnectionRequest& r, SetupMessage kind, const SetupEnvelope& e) {
    comm_.sendBlob(r.peer, messageTag(batchTag_, r.channel, kind), &e, sizeof(e));
  }

  void phaseOne(size_t i) {
    const ConnectionRequest& r = requests_[i];
    Transport& t = transportFor(r.peer);
    ConnectBlob blob;
    pending_[i] = t.setupRecv(context(r), &blob);
    owed_[i] = false;
    sendEnvelope(r, SetupMessage::kBlob, okEnvelope(t, r.protocol, blob));
  }

  void phaseTwo(size_t i) {
    const ConnectionRequest& r = requests_[i];
    SetupEnvelope in = receiveEnvelope(comm_, r, batchTag_, SetupMessage::kBlob);
    Transport& t = transportFor(r.peer);
    LOOM_ENFORCE(std::strcmp(in.transport, t.name()) == 0, InvalidArgument,
                 linkText(comm_.rank(), r.peer, r.channel), ": rank ", r.peer, " chose the ",
                 in.transport, " transport and rank ", comm_.rank(), " chose ", t.name(),
                 ". Set LOOM_TRANSPORT, LOOM_SHM_DISABLE, LOOM_P2P_DISABLE and LOOM_P2P_LEVEL the "
                 "same on every rank");
    ConnectBlob ack;
    const SetupContext ctx = context(r);
    std::unique_ptr<SendConnection> send = t.connectSend(ctx, in.blob, &ack);
    const bool staged = ctx.device >= 0 && send->view() == nullptr;
    if (staged) send = proxySend(std::move(send), ctx.device);
    out_.sends.push_back(std::move(send));
    out_.sendTransport.push_back(t.name());
    owed_[i] = false;
    sendEnvelope(r, SetupMessage::kAck, okEnvelope(t, r.protocol, ack));
    LOOM_LOG(LogLevel::kInfo, t.logSubsys(), linkText(comm_.rank(), r.peer, r.channel), " via ",
             t.name(), stagedText(staged, ctx.device), " (send side, ", protocolName(r.protocol),
             ")");
  }

  void phaseThree(size_t i) {
    const ConnectionRequest& r = requests_[i];
    SetupEnvelope in = receiveEnvelope(comm_, r, batchTag_, SetupMessage::kAck);
    std::unique_ptr<RecvConnection> recv = pending_[i]->finish(in.blob);
    pending_[i].reset();
    const int device = context(r).device;
    const bool staged = device >= 0 && recv->view() == nullptr;
    if (staged) recv = proxyRecv(std::move(recv), device);
    out_.recvs.push_back(std::move(recv));
    Transport& t = transportFor(r.peer);
    out_.recvTransport.push_back(t.name());
    LOOM_LOG(LogLevel::kInfo, t.logSubsys(), linkText(r.peer, comm_.rank(), r.channel), " via ",
             t.name(), stagedText(staged, device), " (receive side, ", protocolName(r.protocol),
             ")");
  }

  // A GPU rank's wire connection is staged through pinned host memory (proxy_connection.h):
  // there is no GPUDirect path yet, so the log says so where it matters.
  static std::string stagedText(bool staged, int device) {
    if (!staged) return "";
    return strCat(", staged through pinned host memory by the proxy for GPU ", device);
  }

  // Best effort: a peer that is gone cannot be told, and our own error is the one to report.
  void tellPeers(const Error& error) {
    SetupEnvelope e = errorEnvelope(error);
    for (size_t i = 0; i < requests_.size(); ++i) {
      if (!owed_[i]) continue;
      try {
        sendEnvelope(requests_[i], requests_[i].send ? SetupMessage::kAck : SetupMessage::kBlob, e);
      } catch (const Error&) {
      }
    }
  }

  Connections* leftover_;
  Peers& comm_;
  const std::vector<ConnectionRequest>& requests_;
  const uint32_t batchTag_;
  std::vector<bool> owed_;  // we still owe this request's peer a message (blob or ack)
  std::vector<std::unique_ptr<PendingRecv>> pending_;
  Connections out_;
};

}  // namespace

const std::vector<Transport*>& transports() {
  // Stateless objects, in order of preference; the table is constant after first use.
  static CudaIpcTransport cudaIpc;
  static ShmTransport shm;
  static SocketTransport socket;
#if LOOM_HAVE_IBVERBS
  static ib::IbTransport ib;
  static const std::vector<Transport*> table{&cudaIpc, &shm, &ib, &socket};
#else
  static const std::vector<Transport*> table{&cudaIpc, &shm, &socket};
#endif
  return table;
}

Transport& selectTransport(const PeerPair& pair) {
  const RankInfo& self = pair.self;
  const RankInfo& peer = pair.peer;
  const std::string forced = envString(EnvVar::LOOM_TRANSPORT);
  if (!forced.empty()) {
    std::string names;
    for (Transport* t : transports()) {
      if (forced != t->name()) {
        names += strCat(names.empty() ? "" : ", ", t->name());
        continue;
      }
      LOOM_ENFORCE(t->canConnect(pair), InvalidArgument, "LOOM_TRANSPORT=", forced,
                   " cannot connect rank ", self.rank, " and rank ", peer.rank, ": ",
                   t->whyNot(pair),
                   ". Unset LOOM_TRANSPORT to let loom choose, or set "
                   "it to socket, which connects any two ranks");
      return *t;
    }
    throw InvalidArgument(strCat("LOOM_TRANSPORT=", forced, " is not a transport; choose one of: ",
                                 names, " (or leave it unset to let loom choose)"));
  }
  for (Transport* t : transports()) {
    if (t->canConnect(pair)) return *t;
  }
  throw InternalError(strCat("no transport can connect rank ", self.rank, " and rank ", peer.rank));
}

size_t commonSlotBytes(Protocol protocol) {
  size_t bytes = SIZE_MAX;
  for (const Transport* t : transports()) bytes = std::min(bytes, t->maxSlotBytes(protocol));
  return bytes;
}

size_t pullThreshold() {
  size_t threshold = 0;
  for (const Transport* t : transports()) threshold = std::max(threshold, t->pullThreshold());
  return threshold;
}

Connections connectAll(Peers& comm, const std::vector<ConnectionRequest>& requests,
                       uint32_t batchTag, Connections* leftover) {
  validate(comm, requests, batchTag);
  return Batch(comm, requests, batchTag, leftover).run();
}

}  // namespace loom::transport
