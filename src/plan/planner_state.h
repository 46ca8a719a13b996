// What the planner keeps per communicator, made once at init (plannerState(comm)):
//   - the environment overrides (LOOM_ALGO, LOOM_PROTO, LOOM_TREE_THRESHOLD, LOOM_LL_THRESHOLD,
//     LOOM_BUFFSIZE), read and checked once: a bad value fails init with InvalidArgument
//     instead of every call, and a call reads no environment (tunables are owned by the
//     communicator: docs/architecture.md, "Environment variables");
//   - the node layout and the tuner's model of the job (src/tune), built once;
//   - the decisions for recent call sizes: the tuner searches its candidates once per
//     (collective, size), then a call costs one atomic load.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <optional>

#include "src/comm/comm.h"
#include "src/plan/coll.h"
#include "src/tune/cluster_model.h"
#include "src/tune/comm_topology.h"
#include "transports/transport.h"

namespace loom {

struct PlanChoice {
  Algorithm algorithm = Algorithm::kRing;
  transport::Protocol protocol = transport::Protocol::kSimple;
};

class PlannerState final : public CommLayerState {
 public:
  explicit PlannerState(const Comm& comm);  // throws InvalidArgument for bad overrides

  // The algorithm and protocol of a call of `kind` moving `bytes` per rank.
  PlanChoice choose(CollKind kind, size_t bytes) const;

  const tune::NodeLayout& layout() const { return layout_; }
  // LOOM_BUFFSIZE / 8: the slot size every transport of this communicator uses.
  size_t slotBytes() const { return slotBytes_; }
  // More ranks on this rank's host than the host has CPUs online: waiting ranks should yield
  // their CPU at once instead of spinning (executor.cc's Backoff).
  bool oversubscribed() const { return oversubscribed_; }
  // Host calls whose larger buffer (largestBufferBytes, coll.h) holds at least this many bytes
  // write their output and the peers' slots with non-temporal stores; 0: never
  // (LOOM_STREAM_STORE_THRESHOLD, below).
  size_t streamStoreMinBytes() const { return streamStoreMinBytes_; }
  // Every pair of ranks talks over the network (each on its own host, or shared memory off):
  // no step can be pulled with CMA.
  bool networkOnly() const { return networkOnly_; }
  // Every rank is on this host, not all in one process, and they share memory (shm): a step
  // between processes is copied into a slot and out again, a hand-over in memory cheap enough
  // to cut a step into pieces that pipeline (planner.cc's chains and rings), and a copy that
  // every peer maps (a staging region) saves a copy per peer. Threads of one process read each
  // other's buffers in one copy instead, and pieces only add hand-overs there.
  bool processesShareMemory() const { return processesShareMemory_; }
  // Every rank of the communicator runs on the CPU (no CUDA rank): the same on every rank.
  bool cpuRanksOnly() const { return cpuRanksOnly_; }

 private:
  PlanChoice decide(CollKind kind, size_t bytes) const;
  bool gathersInOneExchange(size_t bytes) const;

  int nranks_;
  tune::NodeLayout layout_;
  tune::ClusterModel model_;
  std::optional<Algorithm> forcedAlgorithm_;
  std::optional<transport::Protocol> forcedProtocol_;
  int64_t treeThreshold_ = -1;  // -1: unset (the tuner decides)
  int64_t llThreshold_ = -1;
  // LOOM_EXCHANGE_THRESHOLD: AllReduce takes the exchange algorithm (one step; every rank sends
  // its input to every other) while (nranks - 1)^2 x bytes <= this: each rank sends and reduces
  // (n-1) times its data, and more ranks share the same cores. Default 256 KiB: with 2 ranks the
  // exchange beats the ring up to there over TCP and between threads, and with 4 ranks on 2
  // cores up to 32 KiB, near the 28 KiB this bound gives them (docs/performance.md). Between
  // processes of one host 128 KiB (planner_state.cc): 2 ranks, and 3 on 2 cores (32 KiB).
  size_t exchangeMaxBytes_ = 0;
  // LOOM_DOUBLING_THRESHOLD: where every link is a network link (networkOnly_), AllReduce of
  // more than 2 ranks takes recursive doubling while doublingSteps_ x bytes <= this: the
  // whole vector crosses that many times in a row (log2 of the largest power of two <= n
  // rounds, 2 more where extra ranks fold in first and get the result last). There a
  // message costs system calls at both ends, and doubling sends one per round where the
  // exchange sends n - 1 and the ring runs 2(n - 1) steps. Default 1 MiB: over TCP doubling
  // beats the exchange and the ring for 3, 4 and 6 ranks up to a few hundred KiB per rank,
  // ties the ring near 1 MiB and loses beyond, where the ring's pipelining wins. Over shared
  // memory a message is cheap and the exchange stays ahead, so doubling is for network-only
  // jobs (docs/performance.md).
  size_t doublingMaxBytes_ = 0;
  int doublingSteps_ = 0;
  bool networkOnly_ = false;
  bool processesShareMemory_ = false;
  bool cpuRanksOnly_ = false;
  bool oversubscribed_ = false;
  // LOOM_STREAM_STORE_THRESHOLD. A slot of a large call is read by the peer after it left the
  // writer's L2, and a line served from another core's cache can be slower than one from
  // memory; with streaming stores the output's lines are not read before being overwritten
  // either. But while a call's working set fits in the last-level cache, plain stores keep it
  // there and streaming loses. That set is about 6x the call's larger buffer per rank on the
  // host (input, output, the slots it writes and those it reads, and the cache is shared with
  // whatever else runs). Default: the cache's size / (6 x ranks on this host), at least 4 MiB
  // (also where the size is unknown): 21.7 MiB for 2 ranks and a 260 MiB L3, 10.8 MiB for 4,
  // 4 MiB for a 32 MiB L3 (docs/performance.md).
  size_t streamStoreMinBytes_ = 0;
  size_t slotBytes_ = 0;
  // Direct-mapped: each word packs (bytes + 1, kind, algorithm, protocol), so a reader sees a
  // whole entry or none; a lost race only costs a recomputation.
  mutable std::array<std::atomic<uint64_t>, 64> cache_{};
};

// The planner's state of `comm`, made at init (src/api/comm_layers.h). Throws InvalidUsage
// before that.
const PlannerState& plannerState(const Comm& comm);

}  // namespace loom
