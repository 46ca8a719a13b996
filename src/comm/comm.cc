#include "src/comm/comm.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <set>

#include "src/base/env.h"
#include "src/base/error.h"
#include "src/base/host_id.h"
#include "src/base/logging.h"
#include "src/comm/device.h"
#include "src/comm/hang_report.h"
#include "src/comm/ring_setup.h"
#include "src/topo/system_exchange.h"
#include "transports/registry.h"
#include "transports/slot_ring.h"

namespace loom {
namespace {

int rankNamedIn(const std::string& message) {
  // Transport errors name the peer as "rank N" ("rank 2 is gone: ..."); describe() names this
  // rank as "rank r/n", which is skipped.
  for (size_t at = message.find("rank "); at != std::string::npos;
       at = message.find("rank ", at + 1)) {
    size_t end = at + 5;
    while (end < message.size() && std::isdigit(static_cast<unsigned char>(message[end]))) ++end;
    if (end == at + 5 || (end < message.size() && message[end] == '/')) continue;
    return std::stoi(message.substr(at + 5, end - at - 5));
  }
  return -1;
}

}  // namespace

CommOptions resolveOptions(const loomConfig_t* config, const CommOptions* parent) {
  CommOptions o;
  if (parent != nullptr) {
    o = *parent;
  } else {
    int64_t seconds = envInt(EnvVar::LOOM_TIMEOUT);
    LOOM_ENFORCE(seconds >= 0, InvalidArgument, "LOOM_TIMEOUT=", seconds,
                 " is negative; give seconds, or 0 to wait forever");
    o.timeout = std::chrono::milliseconds(seconds * 1000);
  }
  if (config == nullptr) return o;
  LOOM_ENFORCE(config->magic == LOOM_CONFIG_MAGIC, InvalidArgument, "config->magic is 0x", std::hex,
               config->magic, ": initialise every loomConfig_t with LOOM_CONFIG_INITIALIZER");
  LOOM_ENFORCE(config->version >= 1 && config->version <= LOOM_CONFIG_VERSION, InvalidArgument,
               "config->version is ", config->version, " but this loom knows versions 1 to ",
               LOOM_CONFIG_VERSION, ": initialise it with LOOM_CONFIG_INITIALIZER");
  LOOM_ENFORCE(config->size >= sizeof(loomConfig_t), InvalidArgument, "config->size is ",
               config->size, ", expected at least ", sizeof(loomConfig_t),
               ": initialise it with LOOM_CONFIG_INITIALIZER");
  if (config->device != LOOM_CONFIG_UNDEF_INT) {
    validateDevice(config->device);
    o.device = config->device;
  }
  if (config->blocking != LOOM_CONFIG_UNDEF_INT) {
    LOOM_ENFORCE(config->blocking == 0 || config->blocking == 1, InvalidArgument,
                 "config->blocking is ", config->blocking, "; use 1 (blocking) or 0");
    o.blocking = config->blocking == 1;
  }
  if (config->timeoutMs != LOOM_CONFIG_UNDEF_INT) {
    LOOM_ENFORCE(config->timeoutMs >= 0, InvalidArgument, "config->timeoutMs is ",
                 config->timeoutMs, "; use milliseconds, or 0 to wait forever");
    o.timeout = std::chrono::milliseconds(config->timeoutMs);
  }
  if (config->name != nullptr) {
    o.name = config->name;
    LOOM_ENFORCE(!o.name.empty() && o.name.size() <= 256, InvalidArgument,
                 "config->name must have 1 to 256 characters");
  }
  return o;
}

Comm::Comm(CommOptions options, int rank, int nranks)
    : options_(std::move(options)),
      deviceUse_(options_.device),
      rank_(rank),
      nranks_(nranks),
      recorder_(options_.name, rank, nranks) {}

Comm::~Comm() {
  interrupt_->abortLocally();
  if (worker_.joinable()) worker_.join();
  stopStuckReporter();
}

std::string Comm::describe() const {
  return strCat("comm '", options_.name, "' rank ", rank_, "/", nranks_);
}

BootstrapOptions Comm::bootstrapOptions(const Secret& secret) {
  BootstrapOptions o;
  o.secret = secret;
  o.rank = rank_;
  o.nranks = nranks_;
  o.timeout = options_.timeout;
  o.abort = interrupt_.get();
  o.owner = describe();
  o.failures = interrupt_.get();
  o.control.progress = [this] { return calls_.snapshot(); };
  int64_t stuck = envInt(EnvVar::LOOM_WARN_STUCK_S);
  LOOM_ENFORCE(stuck >= 0, InvalidArgument, "LOOM_WARN_STUCK_S=", stuck,
               " is negative; give seconds, or 0 to turn the warning off");
  warnStuck_ = std::chrono::milliseconds(stuck * 1000);
  if (stuck > 0) {
    o.control.tick = [this] { checkStuck(); };
    o.control.tickMs = static_cast<int>(std::min<int64_t>(1000, stuck * 1000));
  }
  return o;
}

void Comm::initFromId(const UniqueIdContents& id) {
  std::lock_guard<std::mutex> lock(opMutex_);
  ScopedLogContext context(describe());
  try {
    bootstrap_ = Bootstrap::viaRoot(id, bootstrapOptions(id.secret));
    exchangeRankInfo();
  } catch (const Error& e) {
    state_ = e.code();
    throw;
  }
}

void Comm::initFromPeers(std::unique_ptr<AuthListener> listener, std::vector<SocketAddress> peers,
                         const Secret& secret) {
  std::lock_guard<std::mutex> lock(opMutex_);
  ScopedLogContext context(describe());
  try {
    bootstrap_ =
        Bootstrap::viaPeers(std::move(listener), std::move(peers), bootstrapOptions(secret));
    exchangeRankInfo();
  } catch (const Error& e) {
    state_ = e.code();
    throw;
  }
}

void Comm::exchangeRankInfo() {
  rankInfos_.assign(static_cast<size_t>(nranks_), RankInfo{});
  RankInfo& mine = rankInfos_[rank_];
  mine.hostHash = hashString(hostIdentity());
  mine.rank = rank_;
  mine.device = options_.device;
  mine.pid = static_cast<int32_t>(getpid());
  mine.version = LOOM_VERSION_CODE;
  describeDevice(options_.device, mine);
  bootstrap_->allGather(rankInfos_.data(), sizeof(RankInfo));
  checkGpuSharing(rankInfos_, rank_);
  std::vector<uint64_t> hosts;
  int localRank = 0, localRanks = 0;
  for (const RankInfo& info : rankInfos_) {
    LOOM_ENFORCE(info.version == LOOM_VERSION_CODE, InvalidUsage, "rank ", info.rank,
                 " runs loom version code ", info.version, " but rank ", rank_, " runs ",
                 LOOM_VERSION_CODE, "; every rank must use the same loom build");
    if (std::find(hosts.begin(), hosts.end(), info.hostHash) == hosts.end())
      hosts.push_back(info.hostHash);
    if (info.hostHash == mine.hostHash) {
      if (info.rank < rank_) ++localRank;
      ++localRanks;
    }
  }
  uint64_t id = 0;  // the same on every rank: names this communicator in flight-record dumps
  for (const RankInfo& info : rankInfos_)
    id = FlightRecorder::mixId(id, info.hostHash ^ static_cast<uint64_t>(info.pid) << 1);
  recorder_.setCommId(id);
  int64_t channels = envInt(EnvVar::LOOM_NCHANNELS);
  LOOM_ENFORCE(channels >= 1 && channels <= 16, InvalidArgument, "LOOM_NCHANNELS=", channels,
               " is out of range; use 1 to 16");
  channels_ = static_cast<int>(channels);
  hostCount_ = static_cast<int>(hosts.size());
  localRank_ = localRank;
  localRanks_ = localRanks;
  static std::once_flag envLogged;
  std::call_once(envLogged, logEnvTable);
  discoverTopology();
  ringPosition_ = buildRing(rankInfos_, system_, rank_, ringOrder_);
  slotBytes_ = transport::slotBytesFromEnv();
  p2pSlotBytes_ = transport::p2pSlotBytesFromEnv();
  if (options_.attachLayers != nullptr) options_.attachLayers(*this);
  LOOM_INFO(
      kLogInit, "ready: ", hosts.size(), " host(s), local rank ", localRank, " of ", localRanks,
      ", device ",
      options_.device == LOOM_DEVICE_CPU ? std::string("cpu") : strCat("cuda:", options_.device));
  state_ = loomSuccess;
}

// ---- Topology (src/topo) ----
// Every rank describes its node and the ranks exchange descriptions. Discovery problems fall
// back to a minimal topology inside discoverSystem; only bootstrap failures reach the caller.
void Comm::discoverTopology() {
  system_ = topo::discoverSystem(*bootstrap_, rankInfos_[rank_].hostHash, options_.device);
}

void Comm::startAsync(std::function<void()> work) {
  worker_ = std::thread([this, work = std::move(work)] {
    try {
      work();
    } catch (const Error& e) {
      setLastError(e.what());
      state_ = e.code();
      LOOM_WARN(kLogInit, describe(), ": non-blocking init failed: ", e.what());
    } catch (const std::exception& e) {
      setLastError(e.what());
      state_ = loomInternalError;
    }
  });
}

void Comm::requireReady(const char* operation) const {
  if (const Interrupt* failure = interrupt_->failure())
    throw Error(failure->code(), strCat(operation, " on ", describe(),
                                        ": the communicator failed: ", failure->message(),
                                        ". Destroy it (loomCommDestroy)."));
  loomResult_t state = state_.load();
  LOOM_ENFORCE(state != loomInProgress, InvalidUsage, operation, " on ", describe(),
               ": its init has not finished; poll loomCommGetAsyncError until it returns "
               "loomSuccess");
  LOOM_ENFORCE(state == loomSuccess, InvalidUsage, operation, " on ", describe(),
               ": the communicator failed earlier (", loomGetErrorString(state),
               "); destroy it and create a new one");
  LOOM_ENFORCE(!finalized_, InvalidUsage, operation, " on ", describe(),
               ": it was finalized; only loomCommDestroy may follow loomCommFinalize");
}

std::shared_ptr<Comm> Comm::split(int color, int key, const CommOptions& childOptions) {
  requireReady("loomCommSplit");
  LOOM_ENFORCE(color >= 0 || color == LOOM_SPLIT_NOCOLOR, InvalidArgument, "color ", color,
               " is invalid: use a non-negative color or LOOM_SPLIT_NOCOLOR");
  std::unique_ptr<AuthListener> listener;
  struct Entry {
    int32_t color, key;
    uint32_t addressLength;
    sockaddr_storage address;
  };
  std::vector<Entry> entries(static_cast<size_t>(nranks_));
  Secret secret;
  {
    std::lock_guard<std::mutex> lock(opMutex_);
    ScopedLogContext context(describe());
    secret = bootstrap_->secret();
    Entry& mine = entries[rank_];
    std::memset(&mine, 0, sizeof(mine));
    mine.color = color;
    mine.key = key;
    if (color != LOOM_SPLIT_NOCOLOR) {
      listener = Bootstrap::openListener(secret, describe() + " (split)", nullptr);
      mine.addressLength = listener->address().length;
      mine.address = listener->address().storage;
    }
    bootstrap_->allGather(entries.data(), sizeof(Entry));
  }
  if (color == LOOM_SPLIT_NOCOLOR) return nullptr;
  // Members of my color, ordered by (key, parent rank).
  std::vector<int> members;
  for (int r = 0; r < nranks_; ++r)
    if (entries[r].color == color) members.push_back(r);
  std::stable_sort(members.begin(), members.end(),
                   [&](int a, int b) { return entries[a].key < entries[b].key; });
  std::vector<SocketAddress> peers;
  int newRank = -1;
  for (size_t i = 0; i < members.size(); ++i) {
    LOOM_ENFORCE(entries[members[i]].addressLength > 0 &&
                     entries[members[i]].addressLength <= sizeof(sockaddr_storage),
                 RemoteError, "rank ", members[i],
                 " sent a split request whose listener address has ",
                 entries[members[i]].addressLength, " bytes (is it the same loom build?)");
    SocketAddress a;
    a.storage = entries[members[i]].address;
    a.length = entries[members[i]].addressLength;
    peers.push_back(a);
    if (members[i] == rank_) newRank = static_cast<int>(i);
  }
  auto child = std::make_shared<Comm>(childOptions, newRank, static_cast<int>(members.size()));
  child->interrupt_->inheritFrom(interrupt_);  // the parent's failures end the child's waits
  // The child proves the parent's secret: it is the same job.
  child->initFromPeers(std::move(listener), std::move(peers), secret);
  return child;
}

topo::PathClass Comm::pathBetween(int a, int b) const {
  if (a == b) return topo::PathClass::kSameProcess;
  if (a < system_.nranks() && b < system_.nranks()) return system_.pathClass(a, b);
  return rankInfo(a).hostHash == rankInfo(b).hostHash ? topo::PathClass::kCrossSocket
                                                      : topo::PathClass::kNetwork;
}

const topo::Nic* Comm::localNic() const {
  if (rank_ >= system_.nranks()) return nullptr;
  const topo::RankPlace& place = system_.rank(rank_);
  const std::vector<topo::Nic>& nics = system_.nodes().at(place.node).nics;
  return place.nic >= 0 && place.nic < static_cast<int>(nics.size()) ? &nics[place.nic] : nullptr;
}

const RankInfo& Comm::rankInfo(int rank) const {
  LOOM_ENFORCE(rank >= 0 && static_cast<size_t>(rank) < rankInfos_.size(), InternalError,
               "rank information of rank ", rank, " asked before the rank exchange");
  return rankInfos_[static_cast<size_t>(rank)];
}

void Comm::sendBlob(int peer, uint32_t tag, const void* data, size_t size) {
  bootstrap_->send(peer, tag, data, size);
}
void Comm::recvBlob(int peer, uint32_t tag, void* data, size_t size) {
  // Blobs carry the connection setup of the call in flight, which the peer sends only once it
  // reaches the same call: a timeout names that call and the likely cause, not a bootstrap tag.
  std::string what = strCat("rank ", peer, "'s part of a connection setup");
  if (calls_.inFlight(nullptr) != 0)
    what = strCat(what, " for this rank's ", describeCall(calls_.snapshot()), ", which rank ", peer,
                  " sends when it reaches the same call (did every rank call the same ",
                  "operations in the same order?)");
  bootstrap_->recv(peer, tag, data, size, what);
}
Socket Comm::connectData(int peer, uint32_t tag) { return bootstrap_->connectData(peer, tag); }
Socket Comm::acceptData(int peer, uint32_t tag) { return bootstrap_->acceptData(peer, tag); }

transport::SendConnection* Comm::sendConnection(int peer, ConnectionKey key) {
  const size_t id = static_cast<size_t>(key.wireId());
  if (peer < 0 || peer >= nranks_ || id >= sendTable_.size() || sendTable_[id].empty())
    return nullptr;
  return sendTable_[id][peer];
}

transport::RecvConnection* Comm::recvConnection(int peer, ConnectionKey key) {
  const size_t id = static_cast<size_t>(key.wireId());
  if (peer < 0 || peer >= nranks_ || id >= recvTable_.size() || recvTable_[id].empty())
    return nullptr;
  return recvTable_[id][peer];
}

void Comm::connect(const std::vector<LinkRequest>& wanted) {
  std::unique_lock<std::mutex> lock(connectMutex_);
  auto made = [&](const LinkRequest& k) {
    return k.send ? sends_.count(k) > 0 : recvs_.count(k) > 0;
  };
  if (std::all_of(wanted.begin(), wanted.end(), made)) return;  // every call after the first
  // Several operations may want the same connection: ask for each once, in a stable order
  // (both ends of a pair sort the same way).
  std::set<LinkRequest> mine;
  for (const LinkRequest& k : wanted)
    if (!made(k) && connecting_.count(k) == 0) mine.insert(k);
  if (!mine.empty()) {
    connecting_.insert(mine.begin(), mine.end());
    ++batchesInFlight_;
    lock.unlock();
    std::vector<transport::ConnectionRequest> requests;
    for (const LinkRequest& k : mine)
      requests.push_back(
          transport::ConnectionRequest{k.peer, k.key.wireId(), k.send, k.key.protocol,
                                       k.key.ringBuffers() ? slotBytes_ : p2pSlotBytes_});
    transport::Connections made;
    std::exception_ptr failed;
    try {
      ScopedLogContext context(describe());
      made = transport::connectAll(*this, requests, 0, &made);
    } catch (const Error& e) {
      failed = std::current_exception();
      lock.lock();
      connectFailure_ = e.code();
      connectFailureMessage_ = e.what();
      failedSetups_.push_back(std::move(made));  // kept until the communicator goes
      lock.unlock();
    }
    lock.lock();
    size_t si = 0, ri = 0;
    for (const LinkRequest& k : mine) {  // in the order of `requests`
      connecting_.erase(k);
      if (failed) continue;
      if (k.send) {
        sends_[k] = std::move(made.sends[si++]);
        tableRow(sendTable_, k.key)[k.peer] = sends_[k].get();
      } else {
        recvs_[k] = std::move(made.recvs[ri++]);
        tableRow(recvTable_, k.key)[k.peer] = recvs_[k].get();
      }
    }
    --batchesInFlight_;
    connectDone_.notify_all();
    if (failed) std::rethrow_exception(failed);
  }
  // Those that other threads of this rank are making (bounded waits: aborts are checked).
  for (const LinkRequest& k : wanted) {
    while (!made(k)) {
      if (connecting_.count(k) == 0)
        throw Error(connectFailure_ != loomSuccess ? connectFailure_ : loomInternalError,
                    strCat("connection setup failed in another operation of ", describe(), ": ",
                           connectFailureMessage_));
      throwIfAborted(interrupt_.get(), "connection setup");
      connectDone_.wait_for(lock, std::chrono::milliseconds(kAbortPollMs));
    }
  }
}

loomRedOp_t Comm::addCustomOp(CustomOp op) {
  std::lock_guard<std::mutex> lock(customOpsMutex_);
  size_t index = 0;
  while (index < customOps_.size() && customOps_[index]) ++index;
  LOOM_ENFORCE(index < 1u << 20, InvalidUsage, "over a million live custom reduction ops on ",
               describe(), "; destroy them with loomRedOpDestroy");
  if (index == customOps_.size()) customOps_.emplace_back();
  customOps_[index] = std::make_unique<CustomOp>(std::move(op));
  return static_cast<loomRedOp_t>(loomNumOps + static_cast<int>(index));
}

void Comm::removeCustomOp(loomRedOp_t op) {
  std::lock_guard<std::mutex> lock(customOpsMutex_);
  size_t index = static_cast<size_t>(static_cast<int>(op) - loomNumOps);
  LOOM_ENFORCE(static_cast<int>(op) >= loomNumOps && index < customOps_.size() && customOps_[index],
               InvalidArgument, "op ", static_cast<int>(op), " is not a live custom op of ",
               describe(), " (built-in ops cannot be destroyed)");
  customOps_[index].reset();
}

const Comm::CustomOp* Comm::customOp(loomRedOp_t op) const {
  if (static_cast<int>(op) < loomNumOps) return nullptr;  // built in: no lock on the hot path
  std::lock_guard<std::mutex> lock(const_cast<std::mutex&>(customOpsMutex_));
  size_t index = static_cast<size_t>(static_cast<int>(op) - loomNumOps);
  return index < customOps_.size() ? customOps_[index].get() : nullptr;
}

void Comm::collectFinishedWork() {
  for (auto& layer : layers_)
    if (layer) layer->collect();
}

void Comm::drainStreams() {
  for (auto& layer : layers_)
    if (layer) layer->drain();
}

void Comm::releaseResources() {
  stopStuckReporter();
  // Waits for other threads' calls to leave: runs (an abort makes them fail fast), then
  // connection batches.
  for (auto& layer : layers_)
    if (layer) layer->quiesce();
  struct Resume {
    std::unique_ptr<CommLayerState>* layers;
    ~Resume() {
      for (int i = kCommLayers - 1; i >= 0; --i)
        if (layers[i]) layers[i]->resume();
    }
  } resume{layers_};
  std::unique_lock<std::mutex> connections(connectMutex_);
  connectDone_.wait(connections, [&] { return batchesInFlight_ == 0; });
  std::lock_guard<std::mutex> lock(opMutex_);
  sendTable_.clear();
  recvTable_.clear();
  sends_.clear();
  recvs_.clear();
  failedSetups_.clear();
  bootstrap_.reset();
}

void Comm::finalize() {
  requireReady("loomCommFinalize");
  drainStreams();
  std::lock_guard<std::mutex> lock(opMutex_);
  ScopedLogContext context(describe());
  bootstrap_->barrier();
  finalized_ = true;
  LOOM_INFO(kLogInit, "finalized");
}

void Comm::abort() {
  interrupt_->abortLocally();
  if (worker_.joinable() && worker_.get_id() != std::this_thread::get_id()) worker_.join();
  {
    // The others see this rank leave (after the waits here stopped: init holds opMutex_).
    std::lock_guard<std::mutex> lock(opMutex_);
    if (bootstrap_ && bootstrap_->control()) bootstrap_->control()->leave();
  }
  drainStreams();      // their operations see the abort flag and fail fast
  releaseResources();  // waits for other threads' calls to leave
  recorder_.dumpOnce("loomCommAbort");
}

void Comm::destroy() {
  if (state_.load() == loomInProgress) {
    abort();
    return;
  }
  if (worker_.joinable()) worker_.join();
  drainStreams();
  releaseResources();
}

void Comm::markFailed(loomResult_t code) {
  loomResult_t expected = loomSuccess;
  state_.compare_exchange_strong(expected, code);
  if (code == loomRemoteError && interrupt_->failure() == nullptr) {
    {
      // The connection that failed here may be to a survivor that failed first and exited: the
      // control channel names the rank that died (ControlChannel::awaitVerdict).
      std::unique_lock<std::mutex> lock(opMutex_, std::try_to_lock);
      if (lock.owns_lock() && bootstrap_ && bootstrap_->control())
        bootstrap_->control()->awaitVerdict();
    }
    if (interrupt_->failure() == nullptr) {
      std::string message;
      {
        std::lock_guard<std::mutex> lock(lastErrorMutex_);
        message = lastError_;
      }
      reportFailure(code, rankNamedIn(message), strCat("rank ", rank_, " reports: ", message));
    }
  }
  if (code == loomRemoteError || code == loomTimeout) {
    std::unique_lock<std::mutex> lock(lastErrorMutex_);
    std::string reason = strCat(resultName(code), ": ", lastError_);
    lock.unlock();
    recorder_.dumpOnce(reason);
  }
}

void Comm::reportFailure(loomResult_t code, int rank, const std::string& message) {
  ControlChannel* control = nullptr;
  {
    std::unique_lock<std::mutex> lock(opMutex_, std::try_to_lock);
    // Without the lock (init or split in progress on another thread), the interrupt alone.
    if (lock.owns_lock() && bootstrap_) control = bootstrap_->control();
    if (control != nullptr) {
      control->reportFailure(code, rank, message);
      return;
    }
  }
  interrupt_->fail(code, rank, message);
}

std::string Comm::hangReport() {
  std::vector<RankProgress> table;
  {
    std::unique_lock<std::mutex> lock(opMutex_, std::try_to_lock);
    if (!lock.owns_lock() || !bootstrap_ || bootstrap_->control() == nullptr) return "";
    // Bounded: rank 0 waits kRoundWait for the ranks, this rank a little longer for rank 0.
    table = bootstrap_->control()->gatherProgress(std::chrono::milliseconds(3000));
  }
  return formatHangReport(rank_, table);
}

void Comm::checkStuck() {
  std::lock_guard<std::mutex> lock(stuckMutex_);
  if (stuckClosed_ || stuckReporting_.load()) return;
  if (stuckReporter_.joinable()) stuckReporter_.join();  // the last one has finished
  CallProgress::Clock::duration age{};
  const uint64_t call = calls_.inFlight(&age);
  if (call == 0 || call == stuckWarned_ || age < warnStuck_) return;
  stuckWarned_ = call;
  stuckReporting_ = true;
  // Its own thread: the report needs answers that this control thread delivers.
  stuckReporter_ = std::thread([this, age] {
    std::string report = hangReport();
    if (!report.empty()) {
      LOOM_WARN(kLogColl, describe(), ": a call has waited ",
                std::chrono::duration_cast<std::chrono::seconds>(age).count(),
                " s (LOOM_WARN_STUCK_S) and goes on waiting: ", report);
      dumpFlightRecord("LOOM_WARN_STUCK_S: " + report);
    }
    stuckReporting_ = false;
  });
}

void Comm::stopStuckReporter() {
  std::thread reporter;
  {
    std::lock_guard<std::mutex> lock(stuckMutex_);
    stuckClosed_ = true;
    reporter = std::move(stuckReporter_);
  }
  if (reporter.joinable()) reporter.join();
}

void Comm::setLastError(const std::string& message) {
  std::lock_guard<std::mutex> lock(lastErrorMutex_);
  lastError_ = message;
}

const char* Comm::lastError() {
  std::lock_guard<std::mutex> lock(lastErrorMutex_);
  lastErrorCopy_ = lastError_;
  return lastErrorCopy_.c_str();
}

}  // namespace loom
