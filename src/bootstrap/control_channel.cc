#include "src/bootstrap/control_channel.h"

#include <arpa/inet.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <thread>

#include "src/base/error.h"
#include "src/base/logging.h"
#include "src/net/byte_order.h"
#include "src/net/test_hooks.h"

namespace loom {
namespace {

// A progress round waits this long for ranks that do not answer. Only a silent rank makes the
// round wait, and a report that calls a live rank silent misleads, so it allows for a control
// thread that a loaded host (or a sanitizer) keeps off the CPU for a while.
constexpr auto kRoundWait = std::chrono::milliseconds(2000);
// A control frame is a few bytes; a peer that cannot take one in this time is gone.
constexpr auto kSendWait = std::chrono::milliseconds(2000);

using wire::get32;
using wire::get64;
using wire::put32;
using wire::put64;

std::vector<uint8_t> rankBody(int rank) {
  std::vector<uint8_t> body;
  put32(body, static_cast<uint32_t>(rank));
  return body;
}

}  // namespace

void encodeProgress(const RankProgress& p, uint8_t* out) {
  put64(out, p.issued);
  put64(out, p.completed);
  put64(out, p.count);
  put32(out, static_cast<uint32_t>(p.datatype));
  put32(out, static_cast<uint32_t>(p.root));
  put32(out, p.msSinceIssued);
  put32(out, p.msSinceCompleted);
  put32(out, p.answered ? 1u : 0u);
  put32(out, 0);
  std::memcpy(out, p.kind, sizeof(p.kind));
}

RankProgress decodeProgress(const uint8_t* in) {
  RankProgress p;
  p.issued = get64(in);
  p.completed = get64(in);
  p.count = get64(in);
  p.datatype = static_cast<int32_t>(get32(in));
  p.root = static_cast<int32_t>(get32(in));
  p.msSinceIssued = get32(in);
  p.msSinceCompleted = get32(in);
  p.answered = (get32(in) & 1u) != 0;
  get32(in);
  std::memcpy(p.kind, in, sizeof(p.kind));
  p.kind[sizeof(p.kind) - 1] = '\0';
  return p;
}

ControlChannel::ControlChannel(int rank, int nranks, std::vector<Socket> links, Interrupt& failures,
                               Hooks hooks, std::string owner, AuthListener* accept)
    : rank_(rank),
      nranks_(nranks),
      failures_(failures),
      hooks_(std::move(hooks)),
      owner_(std::move(owner)),
      accept_(accept) {
  for (size_t l = 0; l < links.size(); ++l) {
    links_.push_back(std::make_unique<Link>());
    links_.back()->socket = std::move(links[l]);
    links_.back()->down = !links_.back()->socket.valid();
    links_.back()->adopted = links_.back()->socket.valid();
    if (rank_ == 0 && l > 0 && !links_.back()->adopted) ++missing_;
  }
  if (accept_ == nullptr) missing_ = 0;
  if (nranks_ <= 1) return;
  wake_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_ < 0) throwSystemError("eventfd() for the control channel", errno);
  thread_ = std::thread([this] { run(); });
}

ControlChannel::~ControlChannel() {
  if (thread_.joinable()) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    poke();
    thread_.join();
  }
  // Connections that arrived but were not taken yet must hear the goodbye too.
  if (missing_ > 0) adoptPending();
  bool left;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    left = left_;
  }
  if (!left) sendToAll(ControlFrame::kBye, rankBody(rank_), -1);
  // Read what is left before closing: a socket closed with unread bytes sends a reset, which
  // may overtake our BYE at the peer.
  for (auto& link : links_) {
    if (!link->socket.valid()) continue;
    ::shutdown(link->socket.fd(), SHUT_WR);
    uint8_t buf[4096];
    try {
      while (link->socket.recvSome(buf, sizeof(buf)) > 0) {
      }
    } catch (const Error&) {
    }
  }
  if (wake_ >= 0) ::close(wake_);
}

void ControlChannel::adoptPending() {
  if (accept_ == nullptr) return;
  while (missing_ > 0) {
    std::optional<IncomingConnection> in;
    try {
      in = accept_->tryTake(
          [&](const Hello& h) {
            return h.kind == HelloKind::kControl && h.rank > 0 && h.rank < nranks_ &&
                   !links_[static_cast<size_t>(h.rank)]->adopted;
          },
          0);
    } catch (const Error& e) {
      LOOM_WARN(kLogBootstrap, owner_, ": accepting control connections: ", e.what());
      return;
    }
    if (!in) return;
    const int from = in->hello.rank;
    Link& link = *links_[static_cast<size_t>(from)];
    {
      std::lock_guard<std::mutex> lock(link.sendMutex);
      link.socket = std::move(in->socket);
      link.socket.setPeerName(strCat("rank ", from));
      link.adopted = true;
      link.down = false;
    }
    --missing_;
    if (failures_.failed()) {  // it joins a job that has failed already
      std::vector<uint8_t> body;
      put32(body, static_cast<uint32_t>(failures_.rank()));
      put32(body, static_cast<uint32_t>(failures_.code()));
      const std::string text = std::string(failures_.message()).substr(0, kMaxFailureText);
      body.insert(body.end(), text.begin(), text.end());
      send(from, ControlFrame::kFailed, body);
    }
  }
}

void ControlChannel::poke() {
  uint64_t one = 1;
  if (wake_ >= 0) (void)!::write(wake_, &one, sizeof(one));
}

void ControlChannel::send(int l, ControlFrame type, const std::vector<uint8_t>& body) {
  if (l < 0 || static_cast<size_t>(l) >= links_.size()) return;
  Link& link = *links_[static_cast<size_t>(l)];
  std::vector<uint8_t> frame;
  frame.reserve(kControlHeaderBytes + body.size());
  put32(frame, static_cast<uint32_t>(body.size()));
  frame.push_back(static_cast<uint8_t>(type));
  frame.insert(frame.end(), 3, 0);
  frame.insert(frame.end(), body.begin(), body.end());
  std::lock_guard<std::mutex> lock(link.sendMutex);
  if (!link.socket.valid()) return;
  try {
    link.socket.sendAll(frame.data(), frame.size(), Deadline::after(kSendWait), nullptr);
  } catch (const Error& e) {
    // The control thread sees the connection end and reports it; nothing more to do here.
    LOOM_INFO(kLogBootstrap, owner_, ": control frame to ", link.socket.peerName(),
              " not sent: ", e.what());
  }
}

void ControlChannel::sendToAll(ControlFrame type, const std::vector<uint8_t>& body, int except) {
  for (size_t l = 0; l < links_.size(); ++l)
    if (static_cast<int>(l) != except && !links_[l]->down) {
      send(static_cast<int>(l), type, body);
      if (const int pause = testing::controlRelayPauseMs(); pause > 0)
        std::this_thread::sleep_for(std::chrono::milliseconds(pause));
    }
}

void ControlChannel::reportFailure(loomResult_t code, int rank, const std::string& message) {
  failAndRelay(code, rank, message, -1);
}

void ControlChannel::leave() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (left_) return;
    left_ = true;
  }
  sendToAll(ControlFrame::kLeaving, rankBody(rank_), -1);
}

void ControlChannel::failAndRelay(loomResult_t code, int rank, const std::string& message,
                                  int from) {
  // The first failure wins, here and (through rank 0) everywhere. It goes out before this
  // rank's waits see it: a rank whose call then fails and exits at once must not look like
  // the first death to the others. A rank that left names nothing: the others' deaths that
  // follow its LEAVING (they fail and exit on it) must not overtake that LEAVING elsewhere.
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (left_) return;
  }
  if (claimed_.exchange(true)) return;
  if (from < 0 || rank_ == 0) {
    std::vector<uint8_t> body;
    put32(body, static_cast<uint32_t>(rank));
    put32(body, static_cast<uint32_t>(code));
    const std::string text = message.substr(0, kMaxFailureText);
    body.insert(body.end(), text.begin(), text.end());
    sendToAll(ControlFrame::kFailed, body, from);  // rank 0: to the others; else: to rank 0
  }
  failures_.fail(code, rank, message);
  if (from >= 0) LOOM_WARN(kLogBootstrap, owner_, ": ", message);
}

void ControlChannel::awaitVerdict() const {
  // A claimed failure is recorded here once it has gone out to the others (failAndRelay).
  Deadline until = Deadline::after(std::chrono::milliseconds(kVerdictWaitMs));
  while (!failures_.raised() && (claimed_.load() || !until.expired()))
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
}

void ControlChannel::onLinkLost(int l) {
  Link& link = *links_[static_cast<size_t>(l)];
  if (link.down) return;
  link.down = true;
  if (link.saidBye) return;
  // A split child's peer that exits because the parent's job failed is no death of its own:
  // give the parent's verdict a moment to arrive on the parent's control thread.
  if (failures_.hasParent()) awaitVerdict();
  if (failures_.failure() != nullptr && !failures_.failed()) return;  // the parent's explains it
  const int peer = rank_ == 0 ? l : 0;
  failAndRelay(loomRemoteError, peer,
               strCat("rank ", peer, " died: its control connection ",
                      rank_ == 0 ? "to rank 0" : "from rank 0",
                      " closed without a goodbye (did it exit, crash or get killed?)"),
               l);
}

void ControlChannel::readLink(int l) {
  Link& link = *links_[static_cast<size_t>(l)];
  uint8_t buf[16384];
  bool lost = false;
  for (;;) {
    long n;
    try {
      n = link.socket.recvSome(buf, sizeof(buf));
    } catch (const Error&) {
      n = -1;
    }
    if (n < 0) {
      lost = true;  // handled after the frames that came before the end (a BYE, a FAILED)
      break;
    }
    if (n == 0) break;
    link.in.insert(link.in.end(), buf, buf + n);
  }
  size_t at = 0;
  while (!link.down && link.in.size() - at >= kControlHeaderBytes) {
    const uint8_t* p = link.in.data() + at;
    const uint32_t size = get32(p);
    const auto type = static_cast<ControlFrame>(*p);
    if (size > kMaxControlBody) {
      at = link.in.size();
      lost = true;  // an authenticated peer that sends this is broken
      break;
    }
    if (link.in.size() - at < kControlHeaderBytes + size) break;
    onFrame(l, type, link.in.data() + at + kControlHeaderBytes, size);
    at += kControlHeaderBytes + size;
  }
  link.in.erase(link.in.begin(), link.in.begin() + static_cast<long>(at));
  if (lost) onLinkLost(l);
}

void ControlChannel::onFrame(int l, ControlFrame type, const uint8_t* body, size_t size) {
  const int from = rank_ == 0 ? l : 0;
  switch (type) {
    case ControlFrame::kFailed: {
      if (size < 8) return;
      const int rank = static_cast<int32_t>(get32(body));
      const auto code = static_cast<loomResult_t>(get32(body));
      std::string text(reinterpret_cast<const char*>(body), size - 8);
      if (rank_ == 0 && from != rank && text.rfind("rank ", 0) != 0)
        text = strCat("rank ", from, " reports: ", text);
      const bool known = code > loomSuccess && code < loomNumResults && code != loomInProgress;
      failAndRelay(known ? code : loomRemoteError, rank < nranks_ ? rank : -1, text, l);
      return;
    }
    case ControlFrame::kLeaving: {
      links_[static_cast<size_t>(l)]->saidBye = true;  // its EOF is expected now
      failAndRelay(loomRemoteError, from,
                   strCat("rank ", from, " left: it aborted the communicator (loomCommAbort)"), l);
      return;
    }
    case ControlFrame::kBye:
      links_[static_cast<size_t>(l)]->saidBye = true;
      return;
    case ControlFrame::kProgressRequest: {
      if (size < 4) return;
      const uint32_t id = get32(body);
      if (rank_ == 0) {
        round_.requesters.emplace_back(l, id);
        if (!round_.active) startRound();
        return;
      }
      std::vector<uint8_t> reply;
      put32(reply, id);
      reply.resize(4 + kProgressEntryBytes);
      RankProgress mine = hooks_.progress ? hooks_.progress() : RankProgress{};
      mine.answered = true;
      encodeProgress(mine, reply.data() + 4);
      send(0, ControlFrame::kProgress, reply);
      return;
    }
    case ControlFrame::kProgress: {
      if (rank_ != 0 || size < 4 + kProgressEntryBytes) return;
      const uint32_t id = get32(body);
      if (round_.active && id == round_.id) {
        round_.table[static_cast<size_t>(l)] = decodeProgress(body);
        round_.table[static_cast<size_t>(l)].answered = true;
      }
      return;
    }
    case ControlFrame::kProgressTable: {
      if (rank_ == 0 || size < 8) return;
      const uint32_t id = get32(body);
      const uint32_t n = get32(body);
      if (n != static_cast<uint32_t>(nranks_) || size < 8 + n * kProgressEntryBytes) return;
      std::vector<RankProgress> table;
      for (uint32_t r = 0; r < n; ++r)
        table.push_back(decodeProgress(body + r * kProgressEntryBytes));
      deliver(id, std::move(table));
      return;
    }
  }
}

void ControlChannel::startRound() {
  round_.active = true;
  ++round_.id;
  round_.table.assign(static_cast<size_t>(nranks_), RankProgress{});
  round_.table[0] = hooks_.progress ? hooks_.progress() : RankProgress{};
  round_.table[0].answered = true;
  round_.deadline = std::chrono::steady_clock::now() + kRoundWait;
  std::vector<uint8_t> body;
  put32(body, round_.id);
  sendToAll(ControlFrame::kProgressRequest, body, -1);
}

void ControlChannel::finishRoundIfDone(bool deadlinePassed) {
  if (!round_.active) return;
  bool all = true;
  for (size_t l = 1; l < links_.size(); ++l) all &= links_[l]->down || round_.table[l].answered;
  if (!all && !deadlinePassed) return;
  round_.active = false;
  for (const auto& [link, id] : round_.requesters) {
    if (link == 0) {
      deliver(id, round_.table);
      continue;
    }
    std::vector<uint8_t> body;
    put32(body, id);
    put32(body, static_cast<uint32_t>(nranks_));
    body.resize(8 + round_.table.size() * kProgressEntryBytes);
    for (size_t r = 0; r < round_.table.size(); ++r)
      encodeProgress(round_.table[r], body.data() + 8 + r * kProgressEntryBytes);
    send(link, ControlFrame::kProgressTable, body);
  }
  round_.requesters.clear();
}

void ControlChannel::deliver(uint32_t id, std::vector<RankProgress> table) {
  std::lock_guard<std::mutex> lock(mutex_);
  results_[id] = std::move(table);
  delivered_.notify_all();
}

std::vector<RankProgress> ControlChannel::gatherProgress(std::chrono::milliseconds wait) {
  if (nranks_ <= 1) {
    RankProgress mine = hooks_.progress ? hooks_.progress() : RankProgress{};
    mine.answered = true;
    return {mine};
  }
  uint32_t id;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    id = nextRequest_++;
    if (rank_ == 0) localRequests_.push_back(id);
  }
  if (rank_ == 0) {
    poke();
  } else {
    if (links_.empty() || links_[0]->down) return {};
    std::vector<uint8_t> body;
    put32(body, id);
    send(0, ControlFrame::kProgressRequest, body);
  }
  std::unique_lock<std::mutex> lock(mutex_);
  delivered_.wait_for(lock, wait, [&] { return results_.count(id) > 0 || stopping_; });
  auto it = results_.find(id);
  if (it == results_.end()) return {};
  std::vector<RankProgress> table = std::move(it->second);
  results_.erase(it);
  return table;
}

void ControlChannel::run() {
  using Clock = std::chrono::steady_clock;
  Clock::time_point nextTick = hooks_.tickMs > 0
                                   ? Clock::now() + std::chrono::milliseconds(hooks_.tickMs)
                                   : Clock::time_point::max();
  std::vector<pollfd> fds;
  std::vector<int> which;
  for (;;) {
    fds.assign(1, pollfd{wake_, POLLIN, 0});
    which.clear();
    for (size_t l = 0; l < links_.size(); ++l) {
      if (links_[l]->down) continue;
      fds.push_back(pollfd{links_[l]->socket.fd(), POLLIN, 0});
      which.push_back(static_cast<int>(l));
    }
    Clock::time_point until = nextTick;
    if (round_.active) until = std::min(until, round_.deadline);
    // Rank 0 takes control connections while ranks are still joining.
    if (missing_ > 0) until = std::min(until, Clock::now() + std::chrono::milliseconds(5));
    int timeoutMs = -1;
    if (until != Clock::time_point::max()) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now());
      timeoutMs = static_cast<int>(std::max<int64_t>(0, left.count() + 1));
    }
    int rc = ::poll(fds.data(), fds.size(), timeoutMs);
    if (rc < 0 && errno != EINTR) {
      LOOM_WARN(kLogBootstrap, owner_,
                ": poll() on the control channel failed: ", std::strerror(errno));
      return;
    }
    if (rc > 0 && fds[0].revents != 0) {
      uint64_t count;
      (void)!::read(wake_, &count, sizeof(count));
      std::vector<uint32_t> local;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        if (stopping_) return;
        local.swap(localRequests_);
      }
      for (uint32_t id : local) round_.requesters.emplace_back(0, id);
      if (!local.empty() && !round_.active) startRound();
    }
    for (size_t i = 1; rc > 0 && i < fds.size(); ++i)
      if (fds[i].revents != 0) readLink(which[i - 1]);
    if (missing_ > 0) adoptPending();
    const Clock::time_point now = Clock::now();
    if (round_.active) finishRoundIfDone(now >= round_.deadline);
    if (now >= nextTick) {
      nextTick = now + std::chrono::milliseconds(hooks_.tickMs);
      if (hooks_.tick) hooks_.tick();
    }
  }
}

}  // namespace loom
