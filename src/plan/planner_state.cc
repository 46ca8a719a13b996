#include "src/plan/planner_state.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <string>
#include <vector>

#include "algorithms/doubling.h"
#include "src/base/env.h"
#include "src/base/error.h"
#include "src/comm/comm.h"
#include "src/plan/plan.h"
#include "src/tune/cost_model.h"
#include "transports/registry.h"
#include "transports/slot_ring.h"

namespace loom {
namespace {

bool ringBased(CollKind k) {
  return k == CollKind::kAllReduce || k == CollKind::kAllGather || k == CollKind::kReduceScatter ||
         k == CollKind::kBroadcast || k == CollKind::kReduce;
}

tune::Algo tuneAlgo(Algorithm a) {
  return a == Algorithm::kTree   ? tune::Algo::kTree
         : a == Algorithm::kHier ? tune::Algo::kHier
                                 : tune::Algo::kRing;
}

// Whether every pair of ranks talks over the network: each rank on its own host, or ranks of
// one host that do not use shared memory (LOOM_SHM_DISABLE, LOOM_TRANSPORT=socket). The same
// answer on every rank: the layout is shared, and the transport settings must match (the
// connection setup refuses ranks that chose differently).
bool onlyNetworkLinks(const Comm& comm, const tune::NodeLayout& layout) {
  const int n = comm.nranks();
  if (n < 2 || layout.nodes() == n) return n >= 2;
  for (const std::vector<int>& host : layout.ranks) {
    if (host.size() < 2) continue;
    try {
      const std::vector<RankInfo>& infos = comm.rankInfos();
      const transport::PeerPair pair{infos[host[0]], infos[host[1]],
                                     comm.pathBetween(host[0], host[1])};
      return !transport::selectTransport(pair).sharesMemory();
    } catch (const Error&) {
      return false;  // a bad LOOM_TRANSPORT fails where connections are made, with its message
    }
  }
  return false;
}

// The last-level cache of this host's CPUs in bytes (L3, else L2), 0 where it is not known.
size_t lastLevelCacheBytes() {
  for (int name : {_SC_LEVEL3_CACHE_SIZE, _SC_LEVEL2_CACHE_SIZE}) {
    const long bytes = sysconf(name);
    if (bytes > 0) return static_cast<size_t>(bytes);
  }
  return 0;
}

constexpr size_t kMinStreamStoreBytes = size_t{4} << 20;

constexpr uint64_t kBytesLimit = (uint64_t{1} << 48) - 2;  // larger calls skip the cache

// AllGather in one exchange (planner.cc, gatherExchange) by default: between processes of one host
// with more ranks than CPUs, from 64 KiB to 64 MiB a rank. There every hand-over of the ring
// waits for the next rank's turn on a CPU, n - 1 of them in a row, where the exchange needs
// each rank's turn once; and each block is copied once into the sender's staging region, from
// which every peer reads it, where the ring copies it into a slot and out at every hop.
// Measured against the ring, 4 processes on 2 CPUs, interleaved, medians of 3 runs of 400
// calls: 16 and 32 KiB a rank 0.87x and 0.70x (a call's own costs: four tasks, and a wait for
// every peer to have read this rank's block), 64 KiB 1.34x, 256 KiB 1.40x, 1 MiB 1.18x, 4 MiB
// 1.21x, 16 MiB 1.29x, and on an AMD EPYC host (4 processes, 2 CPUs, 2 interleaved runs of 5
// calls) 32 MiB 1.50x out of place and 1.43x in place, 64 MiB 1.43x and 1.44x; 3 processes:
// 32 KiB 0.86x, 128 KiB-8 MiB 1.15-1.23x. Larger blocks keep the ring, so the staging region
// (one per calling thread, as large as the largest block staged) stays within 64 MiB. With a
// CPU per rank the two were not compared (this host has 2 CPUs), so the ring stays there.
// ReduceScatter keeps the ring: in one exchange (each block sent into its owner's slot, every
// owner folding its n blocks in one pass) the same lines cross as through the ring, nothing is
// copied once for several peers, and it measured 0.5-0.8x the ring at 4 processes on 2 CPUs
// (Intel Xeon VM, 256 KiB-4 MiB; 4 threads: 0.46x at 64 KiB, 1.0x at 4 MiB).
constexpr size_t kGatherExchangeMinBytes = size_t{64} << 10;
constexpr size_t kGatherExchangeMaxBytes = size_t{64} << 20;

// LOOM_EXCHANGE_THRESHOLD's defaults (planner_state.h). Between processes of one host the
// ring's two steps beat the exchange from 256 KiB at 2 ranks where cache lines cross between
// the cores slowly (2 processes, far state, in place: ring 41.5 us against 67 us), while up to
// 128 KiB the exchange's one hand-over keeps it ahead where they cross fast.
constexpr size_t kExchangeMaxBytes = size_t{256} << 10;
constexpr size_t kProcessExchangeMaxBytes = size_t{128} << 10;

uint64_t pack(CollKind kind, size_t bytes, PlanChoice c) {
  return (static_cast<uint64_t>(bytes) + 1) << 16 | static_cast<uint64_t>(kind) << 8 |
         static_cast<uint64_t>(c.algorithm) << 4 | static_cast<uint64_t>(c.protocol);
}

}  // namespace

PlannerState::PlannerState(const Comm& comm)
    : nranks_(comm.nranks()),
      layout_(tune::nodeLayout(comm)),
      model_(tune::clusterModel(comm, layout_)),
      slotBytes_(comm.slotBytes()) {
  // Case-insensitive, as NCCL reads NCCL_ALGO / NCCL_PROTO ("Ring", "LL", "Simple").
  auto lower = [](std::string v) {
    for (char& ch : v) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    return v;
  };
  const std::string algo = lower(envString(EnvVar::LOOM_ALGO));
  if (algo == "ring") {
    forcedAlgorithm_ = Algorithm::kRing;
  } else if (algo == "tree") {
    forcedAlgorithm_ = Algorithm::kTree;
  } else if (algo == "exchange") {
    forcedAlgorithm_ = comm.nranks() <= kMaxExchangeRanks ? Algorithm::kExchange : Algorithm::kRing;
  } else if (algo == "doubling") {
    forcedAlgorithm_ = comm.nranks() > 1 ? Algorithm::kDoubling : Algorithm::kRing;
  } else if (algo == "hier") {
    // Where it cannot run (one node, one rank per node, uneven nodes) it is the ring.
    forcedAlgorithm_ =
        tune::applies(model_, tune::Algo::kHier) ? Algorithm::kHier : Algorithm::kRing;
  } else {
    LOOM_ENFORCE(algo.empty(), InvalidArgument, "LOOM_ALGO='", envString(EnvVar::LOOM_ALGO),
                 "' is not an algorithm; use ring, tree, hier, exchange or doubling (or unset it)");
  }
  const std::string proto = lower(envString(EnvVar::LOOM_PROTO));
  if (proto == "simple") {
    forcedProtocol_ = transport::Protocol::kSimple;
  } else if (proto == "ll") {
    forcedProtocol_ = transport::Protocol::kLL;
  } else {
    LOOM_ENFORCE(proto.empty(), InvalidArgument, "LOOM_PROTO='", envString(EnvVar::LOOM_PROTO),
                 "' is not a protocol; use simple or ll (or unset it)");
  }
  const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  const size_t hostRanks = layout_.ranks[layout_.nodeOf[comm.rank()]].size();
  oversubscribed_ = cpus > 0 && hostRanks > static_cast<size_t>(cpus);
  if (envIsSet(EnvVar::LOOM_STREAM_STORE_THRESHOLD)) {
    const int64_t stream = envInt(EnvVar::LOOM_STREAM_STORE_THRESHOLD);
    LOOM_ENFORCE(stream >= 0, InvalidArgument, "LOOM_STREAM_STORE_THRESHOLD=", stream,
                 " must be a size in bytes (>= 0; 0: never)");
    streamStoreMinBytes_ = static_cast<size_t>(stream);
  } else {
    streamStoreMinBytes_ = std::max(kMinStreamStoreBytes,
                                    lastLevelCacheBytes() / (6 * std::max<size_t>(1, hostRanks)));
  }
  const int64_t doubling = envInt(EnvVar::LOOM_DOUBLING_THRESHOLD);
  LOOM_ENFORCE(doubling >= 0, InvalidArgument, "LOOM_DOUBLING_THRESHOLD=", doubling,
               " must be a size in bytes (>= 0; 0: never)");
  doublingMaxBytes_ = static_cast<size_t>(doubling);
  const algo::DoublingPlace d = algo::doublingPlace(nranks_, 0);
  doublingSteps_ = d.rounds + (d.pow2 < nranks_ ? 2 : 0);
  networkOnly_ = onlyNetworkLinks(comm, layout_);
  const std::vector<RankInfo>& infos = comm.rankInfos();
  const bool oneProcess = std::all_of(infos.begin(), infos.end(),
                                      [&](const RankInfo& r) { return r.pid == infos[0].pid; });
  processesShareMemory_ = nranks_ >= 2 && layout_.nodes() == 1 && !networkOnly_ && !oneProcess;
  if (envIsSet(EnvVar::LOOM_EXCHANGE_THRESHOLD)) {
    const int64_t exchange = envInt(EnvVar::LOOM_EXCHANGE_THRESHOLD);
    LOOM_ENFORCE(exchange >= 0, InvalidArgument, "LOOM_EXCHANGE_THRESHOLD=", exchange,
                 " must be a size in bytes (>= 0)");
    exchangeMaxBytes_ = static_cast<size_t>(exchange);
  } else {
    exchangeMaxBytes_ = processesShareMemory_ ? kProcessExchangeMaxBytes : kExchangeMaxBytes;
  }
  cpuRanksOnly_ = std::all_of(infos.begin(), infos.end(),
                              [](const RankInfo& r) { return r.device == LOOM_DEVICE_CPU; });
  if (envIsSet(EnvVar::LOOM_TREE_THRESHOLD)) treeThreshold_ = envInt(EnvVar::LOOM_TREE_THRESHOLD);
  if (envIsSet(EnvVar::LOOM_LL_THRESHOLD)) llThreshold_ = envInt(EnvVar::LOOM_LL_THRESHOLD);
  LOOM_ENFORCE(treeThreshold_ >= -1 && llThreshold_ >= -1, InvalidArgument,
               "LOOM_TREE_THRESHOLD and LOOM_LL_THRESHOLD must be sizes in bytes (>= 0)");
}

PlanChoice PlannerState::choose(CollKind kind, size_t bytes) const {
  if (bytes > kBytesLimit) return decide(kind, bytes);
  const uint64_t key = (static_cast<uint64_t>(bytes) + 1) << 16 | static_cast<uint64_t>(kind) << 8;
  std::atomic<uint64_t>& slot =
      cache_[(bytes * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(kind)) >> 58];
  const uint64_t word = slot.load(std::memory_order_relaxed);
  if ((word & ~uint64_t{0xff}) == key) {
    return PlanChoice{static_cast<Algorithm>((word >> 4) & 0xf),
                      static_cast<transport::Protocol>(word & 0xf)};
  }
  const PlanChoice c = decide(kind, bytes);
  slot.store(pack(kind, bytes, c), std::memory_order_relaxed);
  return c;
}

PlanChoice PlannerState::decide(CollKind kind, size_t bytes) const {
  PlanChoice c;
  std::vector<tune::Proto> protos;
  if (forcedProtocol_)
    protos.push_back(*forcedProtocol_ == transport::Protocol::kLL ? tune::Proto::kLL
                                                                  : tune::Proto::kSimple);
  if (kind == CollKind::kBroadcast || kind == CollKind::kReduce) {
    c.algorithm = Algorithm::kChain;
  } else if (!ringBased(kind)) {
    c.algorithm = Algorithm::kDirect;
  } else if (kind == CollKind::kAllGather && gathersInOneExchange(bytes)) {
    c.algorithm = Algorithm::kExchange;
  } else if (kind != CollKind::kAllReduce) {
    c.algorithm = Algorithm::kRing;
  } else if (forcedAlgorithm_) {
    c.algorithm = *forcedAlgorithm_;
  } else if (networkOnly_ && nranks_ > 2 && doublingMaxBytes_ > 0 &&
             bytes <= doublingMaxBytes_ / static_cast<size_t>(doublingSteps_)) {
    c.algorithm = Algorithm::kDoubling;
  } else if (nranks_ > 1 && nranks_ <= kMaxExchangeRanks &&
             bytes <= exchangeMaxBytes_ / static_cast<size_t>((nranks_ - 1) * (nranks_ - 1))) {
    c.algorithm = Algorithm::kExchange;
  } else if (treeThreshold_ >= 0) {
    c.algorithm = nranks_ > 2 && static_cast<int64_t>(bytes) <= treeThreshold_ ? Algorithm::kTree
                                                                               : Algorithm::kRing;
  } else {
    const tune::Choice best = tune::best(model_, static_cast<double>(bytes), {}, protos);
    c.algorithm = best.algo == tune::Algo::kTree   ? Algorithm::kTree
                  : best.algo == tune::Algo::kHier ? Algorithm::kHier
                                                   : Algorithm::kRing;
  }
  if (forcedProtocol_) {
    c.protocol = *forcedProtocol_;
  } else if (llThreshold_ >= 0) {
    c.protocol = static_cast<int64_t>(bytes) <= llThreshold_ ? transport::Protocol::kLL
                                                             : transport::Protocol::kSimple;
  } else {
    // The model prices AllReduce; the other collectives move their data over the ring (or
    // direct links) with the same per-hop trade-off, so they take the ring's protocol.
    const tune::Algo algo =
        kind == CollKind::kAllReduce ? tuneAlgo(c.algorithm) : tune::Algo::kRing;
    const tune::Choice best = tune::best(model_, static_cast<double>(bytes), {algo});
    c.protocol =
        best.proto == tune::Proto::kLL ? transport::Protocol::kLL : transport::Protocol::kSimple;
  }
  return c;
}

// LOOM_ALGO=exchange forces it for 3 to 8 CPU ranks (2 ranks: the ring is the same schedule),
// any other forced algorithm the ring.
bool PlannerState::gathersInOneExchange(size_t bytes) const {
  if (nranks_ <= 2 || nranks_ > kMaxExchangeRanks || !cpuRanksOnly_) return false;
  if (forcedAlgorithm_) return *forcedAlgorithm_ == Algorithm::kExchange;
  return processesShareMemory_ && oversubscribed_ && bytes >= kGatherExchangeMinBytes &&
         bytes <= kGatherExchangeMaxBytes;
}

const PlannerState& plannerState(const Comm& comm) {
  const CommLayerState* state = comm.layer(CommLayer::kPlan);
  LOOM_ENFORCE(state != nullptr, InvalidUsage,
               "the communicator's planner is used before init made it");
  return static_cast<const PlannerState&>(*state);
}

}  // namespace loom
