// loomCommShrink: the ranks of a communicator that are not excluded (the survivors) make a new
// communicator of themselves, without a unique id and without waiting for the excluded ranks,
// which may be dead.
//
// How it works. Every survivor knows the exclude list, so each computes the new membership (the
// survivors in parent rank order) by itself; what the survivors must still exchange are the
// addresses of their new listeners. The parent's ring cannot carry that exchange (it passes
// through the dead), so it goes point to point, over the parent's listeners, whose addresses
// every rank learnt at init:
//   1. Each survivor opens a new listener and sends one message to every other parent rank: its
//      new listener's address and its exclude list. To survivors a send must succeed (a refused
//      connection means that rank is gone and should have been excluded); to excluded ranks it
//      is a notice, sent within a short budget and allowed to fail, so that an excluded rank
//      which is alive and calls loomCommShrink itself learns that it is excluded instead of
//      waiting for the others until the deadline.
//   2. Each survivor waits (up to the deadline) for the message of every other survivor,
//      however late it calls, and checks that its exclude list is its own; a rank that passed a
//      different list makes both ends fail with loomInvalidUsage.
//   3. The survivors connect the new communicator's bootstrap ring directly, as a split does.
// Every connection proves the job's secret.
//
// A successful shrink consumes every message sent to its survivors; only notices to excluded
// ranks that did not take part stay behind, in their listeners. A sender keeps a notice's
// connection open until its own shrink returns, and writes one byte on it just before it
// returns successfully. The receiver of a notice from a rank it waits for fails at once when
// that rank's shrink is in progress (open, no byte: they disagree) or failed (closed, no
// byte). A notice with the byte may be left over from an earlier shrink that excluded this
// rank, so a later shrink including it waits on for that rank's message; only at the deadline
// does it say that this rank was excluded.
#include <algorithm>
#include <cstring>
#include <set>

#include "src/base/error.h"
#include "src/base/logging.h"
#include "src/comm/comm.h"
#include "transports/registry.h"

namespace loom {
namespace {

// The bootstrap tag of shrink messages (transport setup owns the tags with bit 31 set,
// transports/tags.h).
constexpr uint32_t kShrinkTag = 0x53485246u;    // "SHRF"
constexpr uint32_t kShrinkMagic = 0x4b524853u;  // "SHRK"
// Written on the notices when the sender's shrink succeeded.
constexpr char kNoticeAgreed = 'A';
// What the notices to excluded ranks may take in all: a dead host answers no connection.
constexpr std::chrono::milliseconds kNoticeBudget{500};

// A shrink message: this header, then the exclude list as a bitmap of the parent's ranks.
struct ShrinkHeader {
  uint32_t magic;
  uint32_t reserved;
  int32_t nranks;  // the parent's
  uint32_t addressLength;
  sockaddr_storage address;  // the sender's new listener
};

std::string rankList(const std::vector<int>& ranks) {
  std::string text = "{";
  for (size_t i = 0; i < ranks.size(); ++i) text += strCat(i > 0 ? ", " : "", ranks[i]);
  return text + "}";
}

std::vector<int> ranksIn(const std::vector<uint8_t>& bitmap, int nranks) {
  std::vector<int> ranks;
  for (int r = 0; r < nranks; ++r)
    if (bitmap[static_cast<size_t>(r / 8)] & (1u << (r % 8))) ranks.push_back(r);
  return ranks;
}

// The exclude list checked and sorted. Throws InvalidArgument.
std::vector<int> checkedExcludeList(std::vector<int> exclude, int rank, int nranks) {
  LOOM_ENFORCE(!exclude.empty(), InvalidArgument,
               "the exclude list is empty; name at least one rank to exclude (to copy a "
               "communicator, split it with one color)");
  std::sort(exclude.begin(), exclude.end());
  for (size_t i = 0; i < exclude.size(); ++i) {
    LOOM_ENFORCE(exclude[i] >= 0 && exclude[i] < nranks, InvalidArgument, "excluded rank ",
                 exclude[i], " is out of range for a communicator of ", nranks,
                 " ranks (valid: 0 to ", nranks - 1, ")");
    LOOM_ENFORCE(i == 0 || exclude[i] != exclude[i - 1], InvalidArgument, "rank ", exclude[i],
                 " is excluded twice; list each rank once");
  }
  LOOM_ENFORCE(!std::binary_search(exclude.begin(), exclude.end(), rank), InvalidArgument,
               "this rank (", rank,
               ") is in its own exclude list; only the ranks that stay call loomCommShrink");
  return exclude;
}

}  // namespace

std::shared_ptr<Comm> Comm::shrink(const std::vector<int>& excludeList, int flags,
                                   const CommOptions& childOptions) {
  LOOM_ENFORCE((flags & ~LOOM_SHRINK_ABORT) == 0, InvalidArgument, "shrinkFlags is ", flags,
               "; use LOOM_SHRINK_DEFAULT or LOOM_SHRINK_ABORT");
  LOOM_ENFORCE(state_.load() != loomInProgress, InvalidUsage, "loomCommShrink on ", describe(),
               ": its init has not finished; poll loomCommGetAsyncError until it returns "
               "loomSuccess");
  LOOM_ENFORCE(!finalized_, InvalidUsage, "loomCommShrink on ", describe(),
               ": it was finalized; only loomCommDestroy may follow loomCommFinalize");
  const std::vector<int> exclude = checkedExcludeList(excludeList, rank_, nranks_);
  std::vector<uint8_t> excluded(static_cast<size_t>((nranks_ + 7) / 8), 0);
  for (int r : exclude) excluded[static_cast<size_t>(r / 8)] |= static_cast<uint8_t>(1u << (r % 8));
  auto isExcluded = [&](int r) { return std::binary_search(exclude.begin(), exclude.end(), r); };

  // A communicator that failed is unusable anyway, so its calls stop as with LOOM_SHRINK_ABORT
  // even when a survivor passes LOOM_SHRINK_DEFAULT.
  if ((flags & LOOM_SHRINK_ABORT) || state_.load() != loomSuccess) {
    // The calls in flight stop (the abort flag fails their waits) and leave; this communicator
    // stays unusable, as after a peer's failure. Its connections close, so that survivors still
    // waiting in a call for this rank's data fail now and come to shrink too; its bootstrap
    // stays for the exchange below.
    interrupt_->abortLocally();
    drainStreams();
    for (auto& layer : layers_)
      if (layer) layer->quiesce();
    {
      std::unique_lock<std::mutex> connections(connectMutex_);
      connectDone_.wait(connections, [&] { return batchesInFlight_ == 0; });
      sendTable_.clear();
      recvTable_.clear();
      sends_.clear();
      recvs_.clear();
      failedSetups_.clear();
    }
    for (int i = kCommLayers - 1; i >= 0; --i)
      if (layers_[i]) layers_[i]->resume();
    markFailed(loomRemoteError);
  }

  std::vector<Socket> notices;  // open until this call returns (see the top of the file)
  std::unique_ptr<AuthListener> listener;
  std::vector<SocketAddress> peers;  // the new communicator's, in new rank order
  std::vector<int> members;          // their parent ranks
  Secret secret;
  {
    std::lock_guard<std::mutex> lock(opMutex_);
    ScopedLogContext context(describe());
    LOOM_ENFORCE(bootstrap_ != nullptr, InvalidUsage, "loomCommShrink on ", describe(),
                 ": it was aborted or destroyed");
    const uint32_t tag = kShrinkTag;
    secret = bootstrap_->secret();
    AuthListener& parentListener = bootstrap_->listener();
    const std::vector<SocketAddress>& parentPeers = bootstrap_->peerAddresses();
    listener = Bootstrap::openListener(secret, describe() + " (shrink)", &parentListener.address());
    for (int r = 0; r < nranks_; ++r)
      if (!isExcluded(r)) members.push_back(r);
    peers.resize(members.size());

    ShrinkHeader header;
    std::memset(&header, 0, sizeof(header));
    header.magic = kShrinkMagic;
    header.nranks = nranks_;
    header.addressLength = listener->address().length;
    header.address = listener->address().storage;
    std::vector<char> payload(sizeof(header) + excluded.size());
    std::memcpy(payload.data(), &header, sizeof(header));
    std::memcpy(payload.data() + sizeof(header), excluded.data(), excluded.size());
    // A data Hello, not a message one: the listener keeps its socket open, and the sender
    // answers on it whether its shrink succeeded (the notice to excluded ranks below).
    const Hello hello{HelloKind::kData, secret, rank_,
                      nranks_,          tag,    static_cast<uint32_t>(payload.size())};

    // No abort flag: after a failure the parent's flag may stay raised for good. The deadline
    // bounds every wait.
    const Deadline deadline = Deadline::after(options_.timeout);
    auto post = [&](int peer, Deadline dl) {
      Socket s = Socket::connect(parentPeers[peer], dl, nullptr, /*retryRefused=*/false);
      sendHello(s, hello, payload.data(), dl, nullptr);
      return s;
    };
    std::exception_ptr sendFailure;
    for (int peer : members) {
      if (peer == rank_) continue;
      try {
        post(peer, deadline);
      } catch (const Error& e) {
        // Keep sending: the other survivors must hear from this rank even so.
        if (!sendFailure)
          sendFailure = std::make_exception_ptr(RemoteError(
              strCat("cannot reach rank ", peer, " at ", parentPeers[peer].toString(), " (",
                     e.what(), "); if it failed, add it to the exclude list of every survivor")));
      }
    }
    const Deadline noticeDeadline = deadline.min(Deadline::after(kNoticeBudget));
    for (int peer : exclude) {
      try {
        notices.push_back(post(peer, noticeDeadline));
      } catch (const Error& e) {
        LOOM_TRACE(kLogInit, "loomCommShrink: excluded rank ", peer, " is not reachable (",
                   e.what(), ")");
      }
    }
    if (sendFailure) std::rethrow_exception(sendFailure);

    std::set<int> missing(members.begin(), members.end());
    missing.erase(rank_);
    peers[static_cast<size_t>(std::lower_bound(members.begin(), members.end(), rank_) -
                              members.begin())] = listener->address();
    std::vector<int> excludedBy;  // ranks whose finished shrink excluded this rank
    while (!missing.empty()) {
      IncomingConnection c;
      try {
        c = parentListener.waitFor(
            [&](const Hello& h) {
              return h.kind == HelloKind::kData && h.tag == tag && missing.count(h.rank) > 0;
            },
            deadline, nullptr,
            strCat("the loomCommShrink message of rank(s) ",
                   rankList(std::vector<int>(missing.begin(), missing.end())),
                   ": every surviving rank must call loomCommShrink; exclude those that failed"));
      } catch (const TimeoutError& e) {
        for (int r : excludedBy) {
          LOOM_ENFORCE(missing.count(r) == 0, InvalidUsage, e.what(), ". Rank ", r,
                       " made a communicator without this rank (", rank_,
                       ") in a loomCommShrink; every surviving rank must pass the same exclude "
                       "list");
        }
        throw;
      }
      const int from = c.hello.rank;
      ShrinkHeader theirs;
      LOOM_ENFORCE(c.payload.size() == payload.size(), InvalidUsage, "rank ", from,
                   " sent a loomCommShrink message of ", c.payload.size(), " bytes where ",
                   payload.size(), " were expected; do all ranks run the same loom build?");
      std::memcpy(&theirs, c.payload.data(), sizeof(theirs));
      LOOM_ENFORCE(theirs.magic == kShrinkMagic && theirs.nranks == nranks_ &&
                       theirs.addressLength > 0 && theirs.addressLength <= sizeof(sockaddr_storage),
                   RemoteError, "rank ", from, " sent a malformed loomCommShrink message");
      std::vector<uint8_t> theirList(c.payload.begin() + sizeof(theirs), c.payload.end());
      if (theirList != excluded) {
        const std::vector<int> other = ranksIn(theirList, nranks_);
        const bool excludesMe = std::binary_search(other.begin(), other.end(), rank_);
        char agreed = 0;
        if (excludesMe && c.socket.recvSome(&agreed, 1) == 1 && agreed == kNoticeAgreed) {
          excludedBy.push_back(from);  // maybe left over from an earlier shrink: wait on
          continue;
        }
        throw InvalidUsage(strCat("rank ", from, " called loomCommShrink excluding ",
                                  rankList(other), " but this rank (", rank_, ") excludes ",
                                  rankList(exclude), excludesMe ? ", so it excludes this rank" : "",
                                  "; every surviving rank must pass the same exclude list"));
      }
      SocketAddress address;
      address.storage = theirs.address;
      address.length = static_cast<socklen_t>(theirs.addressLength);
      peers[static_cast<size_t>(std::lower_bound(members.begin(), members.end(), from) -
                                members.begin())] = address;
      missing.erase(from);
    }
    LOOM_INFO(kLogInit, "loomCommShrink: excluding ", rankList(exclude), ", ", members.size(),
              " rank(s) remain");
  }
  const int newRank =
      static_cast<int>(std::lower_bound(members.begin(), members.end(), rank_) - members.begin());
  auto child = std::make_shared<Comm>(childOptions, newRank, static_cast<int>(members.size()));
  // The child proves the parent's secret: it is the same job.
  child->initFromPeers(std::move(listener), std::move(peers), secret);
  for (Socket& s : notices) {
    try {
      s.sendSome(&kNoticeAgreed, 1);
    } catch (const Error&) {
      // That rank is gone: nobody reads the notice.
    }
  }
  return child;
}

}  // namespace loom
