// A communicator: this rank's place in a group of ranks, the bootstrap network that connects
// the group, what every rank told the others about itself, and the state that loomCommAbort
// and loomCommGetAsyncError read from other threads.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "loom/loom.h"
#include "src/bootstrap/bootstrap.h"
#include "src/bootstrap/unique_id.h"
#include "src/comm/call_progress.h"
#include "src/comm/connection_key.h"
#include "src/comm/device.h"
#include "src/comm/flight_recorder.h"
#include "src/topo/system.h"
#include "transports/peers.h"
#include "transports/transport.h"

// The C API's opaque handle type; every Comm is one.
struct loomComm {};

namespace loom::transport {
struct Connections;  // transports/registry.h
}  // namespace loom::transport

namespace loom {

class Comm;

// State that the layers above the communicator keep per communicator: the planner's
// (plan/planner_state.h) and the executor's (exec/device_executor.h). Comm sits below those
// layers and never includes them, so it owns their state through this interface and tells it
// what the communicator's life asks of it.
class CommLayerState {
 public:
  virtual ~CommLayerState() = default;
  // Before the communicator drops its connections (abort, destroy): waits for the calls in
  // flight to leave and keeps new ones out until resume().
  virtual void quiesce() {}
  virtual void resume() {}
  // Waits for the work queued on the layer's streams (finalize, abort, destroy).
  virtual void drain() {}
  // Takes in the outcome of work that finished on the layer's streams (a CUDA executor's
  // kernels), so that what asyncError() reports next includes it.
  virtual void collect() {}
};
enum class CommLayer { kPlan = 0, kExec = 1 };
inline constexpr int kCommLayers = 2;

struct CommOptions {
  int device = LOOM_DEVICE_CPU;
  bool blocking = true;
  std::chrono::milliseconds timeout{0};  // 0: wait forever
  std::string name = "loom";
  // Makes the layers' state of a communicator once it is ready (after the rank exchange and
  // topology, before it reports success). The C API, which sees every layer, sets it
  // (src/api/comm_layers.h); the children of a split inherit it with the options.
  void (*attachLayers)(Comm& comm) = nullptr;
};

// Applies a user config (NULL: defaults, or the parent's options when splitting) after
// checking its size, magic and version and every field. Throws InvalidArgument.
CommOptions resolveOptions(const loomConfig_t* config, const CommOptions* parent);

// final: the Peers calls below are direct calls wherever the type is known (the data path).
class Comm final : public loomComm, public transport::Peers {
 public:
  Comm(CommOptions options, int rank, int nranks);
  ~Comm();
  Comm(const Comm&) = delete;
  Comm& operator=(const Comm&) = delete;

  // Collective init through the rendezvous named by the id. Blocking; throws on failure.
  void initFromId(const UniqueIdContents& id);
  // Runs `work` (an init) on a background thread; its outcome lands in asyncError().
  void startAsync(std::function<void()> work);
  // Collective over this communicator; returns nullptr for LOOM_SPLIT_NOCOLOR.
  std::shared_ptr<Comm> split(int color, int key, const CommOptions& childOptions);
  // Collective over the ranks not in `exclude` (shrink.cc): they make a new communicator of
  // themselves, ranks in parent order, without waiting for the excluded ranks. `flags`:
  // LOOM_SHRINK_DEFAULT or LOOM_SHRINK_ABORT (stop this communicator's operations first).
  std::shared_ptr<Comm> shrink(const std::vector<int>& exclude, int flags,
                               const CommOptions& childOptions);
  // Collective: waits until every rank has finalized.
  void finalize();
  // Stops waits in progress (any thread), waits for them to leave, releases resources.
  void abort();
  // Releases resources; aborts first if a background init is still running.
  void destroy();

  int rank() const override { return rank_; }
  int nranks() const override { return nranks_; }
  int device() const { return options_.device; }
  const CommOptions& options() const { return options_; }
  const std::vector<RankInfo>& rankInfos() const { return rankInfos_; }
  // ---- What transports ask while they set up connections (transports/peers.h) ----
  const RankInfo& rankInfo(int rank) const override;
  topo::PathClass pathClass(int peer) const override { return pathBetween(rank_, peer); }
  const topo::Nic* localNic() const override;
  void sendBlob(int peer, uint32_t tag, const void* data, size_t size) override;
  void recvBlob(int peer, uint32_t tag, void* data, size_t size) override;
  Socket connectData(int peer, uint32_t tag) override;
  Socket acceptData(int peer, uint32_t tag) override;
  // The bootstrap network, for transport setup (its tagged messages; see connect()).
  Bootstrap& bootstrap() { return *bootstrap_; }

  // ---- Data path (executor.cc) ----
  // Ring order (order[i] = rank at ring position i) and this rank's position in it.
  const std::vector<int>& ringOrder() const { return ringOrder_; }
  int ringPosition() const { return ringPosition_; }
  int channels() const { return channels_; }
  // Slot sizes of the connections (LOOM_BUFFSIZE / kSlots for the rings, LOOM_P2P_BUFFSIZE
  // for those that come one per peer: transports/slot_ring.h), read at init.
  size_t slotBytes() const { return slotBytes_; }
  size_t p2pSlotBytes() const { return p2pSlotBytes_; }
  // A layer's state (see CommLayerState), or nullptr before init made it.
  CommLayerState* layer(CommLayer which) const { return layers_[static_cast<int>(which)].get(); }
  void setLayer(CommLayer which, std::unique_ptr<CommLayerState> state) {
    layers_[static_cast<int>(which)] = std::move(state);
  }
  // Connections are made on first use, batch by batch (connect), and kept for the
  // communicator's life. nullptr when not connected yet. Callers hold lockConnections().
  transport::SendConnection* sendConnection(int peer, ConnectionKey key);
  transport::RecvConnection* recvConnection(int peer, ConnectionKey key);
  // Held while looking connections up (planning a call): connect() adds them meanwhile.
  std::unique_lock<std::mutex> lockConnections() {
    return std::unique_lock<std::mutex>(connectMutex_);
  }
  // Connects the missing ones of `wanted` with their peers.
  //
  // The rule, with several operations in flight. Each call claims the missing connections
  // nobody is making yet and makes them in one batch with the peers (bootstrap messages are
  // matched by sender and tag, so batches of different threads run side by side); then it
  // waits for those that other threads of this rank are making. No lock is held while a batch
  // waits for a peer, and the operations already running keep progressing (their driver does
  // not make connections). So a batch waits only for the peers' operations that need the same
  // connections, which they post anyway - as they would for the data - and a rank whose
  // streams reach connection setup in a different order than its peer's cannot deadlock.
  void connect(const std::vector<LinkRequest>& wanted);
  // Numbers operations, for messages ("AllReduce #12").
  uint64_t nextOpNumber() { return ++opCounter_; }
  // Reduction ops made by loomRedOpCreatePreMulSum: handle values from loomNumOps up.
  struct CustomOp {
    loomDataType_t type;
    std::vector<unsigned char> value;  // the scalar, when read at creation
    const void* pointer;               // the scalar's address, when read at each use
  };
  loomRedOp_t addCustomOp(CustomOp op);
  void removeCustomOp(loomRedOp_t op);
  // nullptr when `op` is not a live custom op of this communicator.
  const CustomOp* customOp(loomRedOp_t op) const;
  // Waits for the work queued on the layers' streams (finalize, abort, destroy).
  void drainStreams();
  // From the rank exchange at init: hosts in the job, and this rank among those on its host.
  int hostCount() const { return hostCount_; }
  int localRank() const { return localRank_; }
  int localRanks() const { return localRanks_; }
  // Topology from init (discoverTopology): nodes, each rank's place, path class per rank pair.
  const topo::System& system() const { return system_; }
  // The path class between two ranks from the topology (kNetwork between hosts when the
  // topology does not cover them).
  topo::PathClass pathBetween(int a, int b) const;
  // The init's outcome, a data-path failure, or the job's failure that reached this rank.
  loomResult_t asyncError() const {
    const loomResult_t state = state_.load();
    if (state != loomSuccess) return state;
    const Interrupt* failure = interrupt_->failure();
    return failure != nullptr ? failure->code() : state;
  }
  // Has the layers take in the outcome of work their streams finished (CommLayerState::collect):
  // loomCommGetAsyncError calls it before asyncError().
  void collectFinishedWork();
  // Throws InvalidUsage unless init finished successfully and finalize was not called.
  void requireReady(const char* operation) const;

  // A data-path error leaves the communicator unusable (peers may be mid-operation): later
  // calls fail with a message saying so, and loomCommGetAsyncError reports `code`. A dead or
  // failed peer (loomRemoteError) is also told to every rank (reportFailure), with the message
  // set by the setLastError that comes just before.
  void markFailed(loomResult_t code);

  // ---- Faults and hang reports (bootstrap/control_channel.h, docs/architecture.md) ----
  // What every wait of this communicator watches: loomCommAbort here, the job's first failure
  // (seen here or by any rank, through the control channel), or its split parent's failure.
  AbortFlag abortFlag() const { return interrupt_.get(); }
  // Records the failure of the job (a dead peer, `rank`; -1 when unknown) and, if it is the
  // first, tells every rank, whose waits then fail with it.
  void reportFailure(loomResult_t code, int rank, const std::string& message);
  // The calls issued and completed here, for hang reports.
  CallProgress& calls() { return calls_; }
  // Asks every rank what it did last and says which have not arrived at this rank's call in
  // flight (hang_report.h). Empty when there is none or the ranks cannot be asked.
  std::string hangReport();

  void setLastError(const std::string& message);
  const char* lastError();

  // The last calls of this communicator (flight_recorder.h). It dumps itself once on abort and
  // on a remote error or timeout (markFailed); dumpFlightRecord writes a dump on demand.
  FlightRecorder& flightRecorder() { return recorder_; }
  void dumpFlightRecord(std::string_view reason) const { recorder_.dump(reason); }
  // A call's end, for the flight recorder and the hang reports: when it returns (CPU), or when
  // its device stream reaches its end (CUDA: the executor says so, not the enqueue).
  void finishCall(uint64_t seq, loomResult_t result) {
    const uint64_t now = FlightRecorder::ticks();  // one reading for both
    recorder_.finish(seq, result, now);
    if (result == loomSuccess) calls_.complete(seq, now);
  }

 private:
  void initFromPeers(std::unique_ptr<AuthListener> listener, std::vector<SocketAddress> peers,
                     const Secret& secret);
  void exchangeRankInfo();
  // Topology: discover (or load LOOM_TOPO_FILE), exchange, build system_, dump. Collective.
  void discoverTopology();
  BootstrapOptions bootstrapOptions(const Secret& secret);
  // LOOM_WARN_STUCK_S, on the control thread: starts a hang report once per stuck call.
  void checkStuck();
  void stopStuckReporter();
  void releaseResources();
  std::string describe() const;

  const CommOptions options_;
  DeviceUse deviceUse_;  // counts this communicator on its CUDA device (loomMemAlloc asks)
  const int rank_;
  const int nranks_;
  // Faults and hang reports (see abortFlag()). Shared: a split child watches its parent's.
  std::shared_ptr<Interrupt> interrupt_ = std::make_shared<Interrupt>();
  CallProgress calls_;
  std::chrono::milliseconds warnStuck_{0};  // LOOM_WARN_STUCK_S; 0: off
  std::mutex stuckMutex_;                   // the three below
  bool stuckClosed_ = false;
  uint64_t stuckWarned_ = 0;  // the call reported last
  std::thread stuckReporter_;
  std::atomic<bool> stuckReporting_{false};
  std::atomic<loomResult_t> state_{loomInProgress};
  bool finalized_ = false;
  // Held by every operation that uses the bootstrap ring (init, split, finalize). Connection
  // setup uses tagged messages only, which any thread may send and receive (connect()).
  std::mutex opMutex_;
  std::thread worker_;  // a non-blocking init
  std::unique_ptr<Bootstrap> bootstrap_;
  std::vector<RankInfo> rankInfos_;
  std::vector<int> ringOrder_;
  size_t slotBytes_ = 0;
  size_t p2pSlotBytes_ = 0;
  int ringPosition_ = 0;
  int channels_ = 1;
  std::map<LinkRequest, std::unique_ptr<transport::SendConnection>> sends_;
  std::map<LinkRequest, std::unique_ptr<transport::RecvConnection>> recvs_;
  // sends_ and recvs_ indexed [wire id][peer] (a row is empty until a connection with its key
  // is made): every call looks its connections up, a map walk each cost more.
  std::vector<std::vector<transport::SendConnection*>> sendTable_;
  std::vector<std::vector<transport::RecvConnection*>> recvTable_;
  // What failed setup batches had made (transport::connectAll's leftover), unused, kept with
  // the connections: the peers' finished sides keep seeing this rank's side alive.
  std::vector<transport::Connections> failedSetups_;
  template <typename T>
  std::vector<T*>& tableRow(std::vector<std::vector<T*>>& table, ConnectionKey key) {
    const size_t ch = static_cast<size_t>(key.wireId());
    if (table.size() <= ch) table.resize(ch + 1);
    if (table[ch].empty()) table[ch].assign(static_cast<size_t>(nranks_), nullptr);
    return table[ch];
  }
  // Declared after the connections, so destroyed before them: the layers' calls use them.
  std::unique_ptr<CommLayerState> layers_[kCommLayers];
  // Guards sends_, recvs_, their tables and the setup bookkeeping below; never held while a
  // batch waits for a peer.
  std::mutex connectMutex_;
  std::condition_variable connectDone_;  // a batch ended
  std::set<LinkRequest> connecting_;     // claimed by a batch in progress
  int batchesInFlight_ = 0;
  loomResult_t connectFailure_ = loomSuccess;  // of the last batch that failed
  std::string connectFailureMessage_;
  std::atomic<uint64_t> opCounter_{0};
  std::mutex customOpsMutex_;
  std::vector<std::unique_ptr<CustomOp>> customOps_;  // index = op - loomNumOps
  int hostCount_ = 0;
  int localRank_ = 0;
  int localRanks_ = 0;
  topo::System system_;
  std::mutex lastErrorMutex_;
  std::string lastError_;
  std::string lastErrorCopy_;  // what lastError() returned, stable until the next call
  FlightRecorder recorder_;
};

}  // namespace loom
