// LoomBackend's life cycle, point-to-point, coalescing and splitting; the collectives are in
// collectives.cc.
#include "backend.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <functional>

#include "buffers.h"
#include "wire.h"

namespace loom_torch {
namespace {

constexpr const char* kUniqueIdKey = "loom_unique_id";

int timeoutMs(std::chrono::milliseconds timeout) {
  if (timeout.count() <= 0) return LOOM_CONFIG_UNDEF_INT;  // LOOM_TIMEOUT or loom's default
  return static_cast<int>(std::min<int64_t>(timeout.count(), INT_MAX));
}

}  // namespace

LoomBackend::LoomBackend(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                         c10::intrusive_ptr<Options> options)
    : c10d::Backend(rank, size), options_(std::move(options)) {
  // Group rank 0 creates the id (its process hosts the rendezvous until every rank joined);
  // the others read it from the group's store, which blocks until it is there.
  loomUniqueId id;
  if (rank == 0) {
    check(loomGetUniqueId(&id), nullptr, "loomGetUniqueId");
    const auto* bytes = reinterpret_cast<const uint8_t*>(id.internal);
    store->set(kUniqueIdKey, std::vector<uint8_t>(bytes, bytes + sizeof(id.internal)));
  } else {
    std::vector<uint8_t> bytes = store->get(kUniqueIdKey);
    TORCH_CHECK(bytes.size() == sizeof(id.internal), "loom: the unique id in the store has ",
                bytes.size(), " bytes, not ", sizeof(id.internal),
                "; is another backend using the key '", kUniqueIdKey, "'?");
    std::memcpy(id.internal, bytes.data(), bytes.size());
  }
  loomConfig_t config = LOOM_CONFIG_INITIALIZER;
  config.timeoutMs = timeoutMs(options_->timeout);
  const std::string name = "torch group '" + options_->group_name + "'";
  config.name = name.c_str();
  check(loomCommInitRankConfig(&comm_, size, id, rank, &config), nullptr, "loomCommInitRankConfig");
  initLanes();
}

LoomBackend::LoomBackend(loomComm_t comm, int rank, int size, c10::intrusive_ptr<Options> options)
    : c10d::Backend(rank, size), options_(std::move(options)), comm_(comm) {
  initLanes();
}

void LoomBackend::initLanes() { collLane_ = std::make_unique<Lane>(comm_, "collectives"); }

LoomBackend::~LoomBackend() { destroyComm(/*finalize=*/false); }

loomComm_t LoomBackend::liveComm(const char* name) {
  std::lock_guard<std::mutex> lock(commMutex_);
  TORCH_CHECK(!aborted_ && comm_ != nullptr, "loom: ", name, " on rank ", rank_,
              " after the communicator was ", aborted_ ? "aborted" : "shut down",
              abortReason_.empty() ? "" : ": ", abortReason_,
              ". Create a new process group to continue.");
  return comm_;
}

int LoomBackend::checkPeer(int peer, const char* name) const {
  TORCH_CHECK_VALUE(peer >= 0 && peer < size_, "loom: ", name, ": rank ", peer,
                    " is not in this group of ", size_, " ranks");
  return peer;
}

c10::intrusive_ptr<LoomWork> LoomBackend::makeWork(c10d::OpType type, const char* name,
                                                   std::vector<at::Tensor> outputs, bool asyncOp) {
  liveComm(name);
  if (coalescing_) {
    // The group's work stands for every operation of the group.
    for (auto& t : outputs) coalescedOutputs_.push_back(t);
    return coalescedWork_;
  }
  ++seq_;
  auto work = c10::make_intrusive<LoomWork>(rank_, type, name, std::move(outputs), seq_,
                                            [this](const std::string& why) { abortWith(why); });
  work->setWatched(asyncOp);
  return work;
}

c10::intrusive_ptr<c10d::Work> LoomBackend::run(Lane& lane,
                                                const c10::intrusive_ptr<LoomWork>& work,
                                                Launch launch) {
  if (coalescing_) {
    coalesced_.push_back(std::move(launch));
  } else {
    lane.submit(work, launch);
  }
  return work;
}

c10::intrusive_ptr<c10d::Work> LoomBackend::runMany(Lane& lane,
                                                    const c10::intrusive_ptr<LoomWork>& work,
                                                    std::vector<Launch> launches) {
  if (coalescing_) {
    for (auto& l : launches) coalesced_.push_back(std::move(l));
  } else {
    runGroup(lane, work, std::move(launches));
  }
  return work;
}

Lane& LoomBackend::p2pLane(int peer, bool sending) {
  if (coalescing_) return *collLane_;
  auto& lane = p2pLanes_[{peer, sending}];
  if (!lane) lane = std::make_unique<Lane>(comm_, sending ? "send" : "recv");
  return *lane;
}

Lane& LoomBackend::laneFor(const char* name) {
  liveComm(name);
  return *collLane_;
}

// ---- point-to-point ---------------------------------------------------------------------------

c10::intrusive_ptr<c10d::Work> LoomBackend::send(std::vector<at::Tensor>& tensors, int dstRank,
                                                 int /*tag*/) {
  const at::Tensor& t = single(tensors, "send");
  checkPeer(dstRank, "send");
  Lane& lane = p2pLane(dstRank, true);
  auto work = makeWork(c10d::OpType::SEND, "send", {});
  Wire w = moveWire(readable(lane, *work, t));
  loomComm_t comm = comm_;
  return run(lane, work, [=](loomStream_t s) {
    check(loomSend(w.data, w.count, w.type, dstRank, comm, s), comm, "loomSend");
  });
}

c10::intrusive_ptr<c10d::Work> LoomBackend::recv(std::vector<at::Tensor>& tensors, int srcRank,
                                                 int /*tag*/) {
  const at::Tensor& t = single(tensors, "recv");
  checkPeer(srcRank, "recv");
  Lane& lane = p2pLane(srcRank, false);
  auto work = makeWork(c10d::OpType::RECV, "recv", {t});
  Wire w = moveWire(writable(lane, *work, t));
  loomComm_t comm = comm_;
  return run(lane, work, [=](loomStream_t s) {
    check(loomRecv(w.data, w.count, w.type, srcRank, comm, s), comm, "loomRecv");
  });
}

c10::intrusive_ptr<c10d::Work> LoomBackend::recvAnysource(std::vector<at::Tensor>& /*tensors*/,
                                                          int /*tag*/) {
  TORCH_CHECK(false,
              "loom: recv from any source is not supported: loom matches every receive with "
              "one peer. Pass src= to torch.distributed.recv.");
}

c10::intrusive_ptr<c10d::Work> LoomBackend::barrier(const c10d::BarrierOptions& /*opts*/) {
  Lane& lane = laneFor("barrier");
  auto work = makeWork(c10d::OpType::BARRIER, "barrier", {});
  at::Tensor token = at::zeros({1}, at::kByte);
  work->keep(token);
  loomComm_t comm = comm_;
  void* p = token.data_ptr();
  return run(lane, work, [=](loomStream_t s) {
    check(loomAllReduce(p, p, 1, loomUint8, loomSum, comm, s), comm, "barrier (loomAllReduce)");
  });
}

// ---- coalescing -------------------------------------------------------------------------------

void LoomBackend::startCoalescing() {
  TORCH_CHECK(!coalescing_, "loom: startCoalescing inside a coalescing block");
  liveComm("startCoalescing");
  coalescing_ = true;
  ++seq_;
  coalescedOutputs_.clear();
  coalescedWork_ = c10::make_intrusive<LoomWork>(
      rank_, c10d::OpType::COALESCED, "coalesced operations", std::vector<at::Tensor>{}, seq_,
      [this](const std::string& why) { abortWith(why); });
}

c10::intrusive_ptr<c10d::Work> LoomBackend::endCoalescing() {
  TORCH_CHECK(coalescing_, "loom: endCoalescing without startCoalescing");
  coalescing_ = false;
  auto work = std::move(coalescedWork_);
  work->addOutputs(std::move(coalescedOutputs_));
  std::vector<Launch> launches = std::move(coalesced_);
  coalesced_.clear();
  coalescedOutputs_.clear();
  runGroup(*collLane_, work, std::move(launches));
  return work;
}

void LoomBackend::runGroup(Lane& lane, const c10::intrusive_ptr<LoomWork>& work,
                           std::vector<Launch> launches) {
  // One loom group: its sends and receives may be posted in any order, and its collectives
  // progress together.
  lane.submit(work, [&](loomStream_t s) {
    check(loomGroupStart(), comm_, "loomGroupStart");
    std::exception_ptr error;
    for (auto& launch : launches) {
      try {
        launch(s);
      } catch (...) {
        error = std::current_exception();
        break;
      }
    }
    loomResult_t r = loomGroupEnd();
    if (error) std::rethrow_exception(error);
    check(r, comm_, "loomGroupEnd");
  });
}

// ---- split, errors, abort, shutdown ----------------------------------------------------------

c10::intrusive_ptr<c10d::Backend> LoomBackend::split(
    const c10::intrusive_ptr<c10d::Store>& /*store*/, const std::vector<int>& ranks,
    const c10::intrusive_ptr<c10d::Backend::Options>& opts) {
  loomComm_t comm = liveComm("split");
  const auto& globals = options_->global_ranks_in_group;
  const int me = globals.empty() ? rank_ : static_cast<int>(globals.at(rank_));
  auto pos = std::find(ranks.begin(), ranks.end(), me);
  // Every new group gets the color of its member list, so that ranks agree without talking.
  size_t hash = 0;
  for (int r : ranks) hash = hash * 1000003u ^ std::hash<int>()(r);
  const int color = pos == ranks.end() ? LOOM_SPLIT_NOCOLOR : static_cast<int>(hash & INT_MAX);
  const int key = pos == ranks.end() ? 0 : static_cast<int>(pos - ranks.begin());
  // loomCommSplit uses the communicator on this thread: nothing may run on it meanwhile.
  drainAll();
  loomComm_t child = nullptr;
  check(loomCommSplit(comm, color, key, &child, nullptr), comm, "loomCommSplit");
  ++splits_;
  if (child == nullptr) return nullptr;
  auto childOpts = c10::make_intrusive<Options>(opts ? opts->timeout : options_->timeout);
  if (opts) {
    childOpts->group_name = opts->group_name;
    childOpts->group_desc = opts->group_desc;
  }
  childOpts->global_ranks_in_group.assign(ranks.begin(), ranks.end());
  return c10::make_intrusive<LoomBackend>(child, key, static_cast<int>(ranks.size()), childOpts);
}

c10::intrusive_ptr<c10d::Backend> LoomBackend::shrink(
    const std::vector<int64_t>& ranksToExclude, int shrinkFlags,
    const c10::intrusive_ptr<c10d::Backend::Options>& optsOverride) {
  // torch's SHRINK_DEFAULT and SHRINK_ABORT have the values of loom's flags (NCCL's).
  TORCH_CHECK_VALUE(shrinkFlags == LOOM_SHRINK_DEFAULT || shrinkFlags == LOOM_SHRINK_ABORT,
                    "loom: shrink: flags ", shrinkFlags,
                    " are neither SHRINK_DEFAULT (0) nor SHRINK_ABORT (1)");
  TORCH_CHECK(!coalescing_, "loom: shrink inside a coalescing block");
  std::vector<int> excluded;
  for (int64_t r : ranksToExclude) {
    TORCH_CHECK_VALUE(r >= 0 && r < size_, "loom: shrink: rank ", r, " is not in this group of ",
                      size_, " ranks");
    TORCH_CHECK_VALUE(r != rank_, "loom: shrink: rank ", r,
                      " excludes itself; only the remaining ranks call shrink_group");
    excluded.push_back(static_cast<int>(r));
  }
  TORCH_CHECK_VALUE(!excluded.empty(), "loom: shrink: no rank to exclude");
  loomComm_t comm = nullptr;
  {
    std::lock_guard<std::mutex> lock(commMutex_);
    TORCH_CHECK(!aborted_ && comm_ != nullptr, "loom: shrink on rank ", rank_,
                " after the communicator was ", aborted_ ? "aborted" : "shut down",
                abortReason_.empty() ? "" : ": ", abortReason_,
                "; loomCommShrink needs the parent communicator. Create a new process group "
                "from the store instead.");
    comm = comm_;
  }
  // Without SHRINK_ABORT nothing may be in flight: let what was submitted finish. With it, loom
  // stops the operations in flight itself (they fail, which finishes their works).
  if (shrinkFlags == LOOM_SHRINK_DEFAULT) drainAll();
  auto childOpts =
      c10::make_intrusive<Options>(optsOverride ? optsOverride->timeout : options_->timeout);
  childOpts->group_name = options_->group_name + ":shrunk";
  loomConfig_t config = LOOM_CONFIG_INITIALIZER;
  config.timeoutMs = timeoutMs(childOpts->timeout);
  const std::string name = "torch group '" + childOpts->group_name + "'";
  config.name = name.c_str();
  loomComm_t child = nullptr;
  check(loomCommShrink(comm, excluded.data(), static_cast<int>(excluded.size()), &child, &config,
                       shrinkFlags),
        comm, "loomCommShrink");
  shrunk_ = true;
  if (shrinkFlags == LOOM_SHRINK_ABORT) {
    // The parent is unusable now; aborting it frees it and fails whatever still waits on it.
    abortWith("the group was shrunk with SHRINK_ABORT; use the group shrink_group returned");
  }
  drainAll();
  // Remaining ranks keep their order: the new rank counts the remaining ranks below this one.
  int newRank = 0;
  std::vector<uint64_t> globals;
  const auto& parentGlobals = options_->global_ranks_in_group;
  for (int r = 0; r < size_; ++r) {
    if (std::find(excluded.begin(), excluded.end(), r) != excluded.end()) continue;
    if (r < rank_) ++newRank;
    globals.push_back(parentGlobals.empty() ? static_cast<uint64_t>(r) : parentGlobals.at(r));
  }
  childOpts->global_ranks_in_group = globals;
  return c10::make_intrusive<LoomBackend>(child, newRank, static_cast<int>(globals.size()),
                                          childOpts);
}

void LoomBackend::performNocolorSplit() {
  loomComm_t comm = liveComm("split");
  drainAll();
  loomComm_t child = nullptr;
  check(loomCommSplit(comm, LOOM_SPLIT_NOCOLOR, 0, &child, nullptr), comm, "loomCommSplit");
  ++splits_;
}

void LoomBackend::drainAll() {
  collLane_->drain();
  for (auto& [key, lane] : p2pLanes_) lane->drain();
}

c10d::ErrorType LoomBackend::getError() {
  std::lock_guard<std::mutex> lock(commMutex_);
  if (aborted_) return c10d::ErrorType::COMM_ERROR;
  if (comm_ == nullptr) return c10d::ErrorType::SUCCESS;
  loomResult_t state = loomSuccess;
  if (loomCommGetAsyncError(comm_, &state) != loomSuccess) return c10d::ErrorType::COMM_ERROR;
  switch (state) {
    case loomSuccess:
    case loomInProgress:
      return c10d::ErrorType::SUCCESS;
    case loomTimeout:
      return c10d::ErrorType::TIMEOUT;
    case loomRemoteError:
      return c10d::ErrorType::REMOTE_ERROR;
    default:
      return c10d::ErrorType::COMM_ERROR;
  }
}

void LoomBackend::abortWith(const std::string& why) {
  std::lock_guard<std::mutex> lock(commMutex_);
  if (aborted_ || comm_ == nullptr) return;
  aborted_ = true;
  abortReason_ = why;
  // Safe from any thread: every operation in progress returns with an error, which finishes
  // the works waiting for it.
  loomCommAbort(comm_);
}

void LoomBackend::abort() { abortWith("abort() was called"); }

void LoomBackend::shutdown() { destroyComm(/*finalize=*/true); }

void LoomBackend::destroyComm(bool finalize) {
  if (collLane_) drainAll();
  // The lanes' streams belong to the communicator: they go first.
  p2pLanes_.clear();
  collLane_.reset();
  std::lock_guard<std::mutex> lock(commMutex_);
  if (comm_ == nullptr) return;
  if (!aborted_) {
    if (finalize && !shrunk_ && loomCommFinalize(comm_) != loomSuccess) {
      TORCH_WARN("loom: shutdown on rank ", rank_, ": ", loomGetLastError(comm_));
    }
    loomCommDestroy(comm_);
  }
  comm_ = nullptr;
}

}  // namespace loom_torch
