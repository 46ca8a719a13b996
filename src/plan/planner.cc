#include "src/plan/planner.h"

#include <algorithm>
#include <cstdint>

#include "algorithms/alltoall.h"
#include "algorithms/doubling.h"
#include "algorithms/hierarchical.h"
#include "algorithms/tree.h"
#include "algorithms/walker.h"
#include "src/base/env.h"
#include "src/base/error.h"
#include "src/kernels/datatype_traits.h"
#include "src/plan/planner_state.h"
#include "src/tune/comm_topology.h"
#include "src/tune/cost_model.h"
#include "transports/registry.h"
#include "transports/slot_ring.h"

namespace loom {
namespace {

using algo::Prim;

// A lone rank has no connections: its chunk only bounds the size of each copy.
constexpr size_t kLocalChunkBytes = size_t{1} << 20;

size_t chunkElements(size_t slotBytes, size_t elemSize, size_t align) {
  size_t chunk = slotBytes / elemSize;
  return std::max(align, chunk / align * align);
}

// Pieces of chains and ring AllReduce. A step is passed on only once all of it has arrived,
// and a slot (LOOM_BUFFSIZE / 8, 2 MiB) holds a medium call's step whole:
//   - a chain (Broadcast, Reduce) in one piece keeps every rank but one waiting: the root
//     writes all of it, then the next rank reads it;
//   - a ring AllReduce's steps of 512 KiB (1 MiB at 2 ranks) cycle through 4 MiB of slots
//     per direction, more than a core's L2, so the peer reads lines back from L3.
// So between processes that share memory, a chain's slice, or each rank's share of a ring
// AllReduce's slice, goes in kPieces pieces: the next rank reads one piece while the one
// before writes the next, and the slots in use stay in L2. A piece holds at least 64 KiB
// (chain) or 128 KiB (ring), and a share that makes fewer than kMinPieces goes whole: fewer
// pieces measured slower (2 processes, AllReduce 512 KiB in two 128 KiB pieces: 0.9x). Calls
// from kPiecesBelow bytes keep slot-sized pieces. Over TCP a piece is more system calls, and
// threads read each other's buffers in one copy, so there the slot decides alone. So it does
// with more ranks than CPUs, where a rank waits for the next to be scheduled at every
// hand-over and pieces add hand-overs (3 and 4 processes on 2 CPUs, Reduce 256 KiB-4 MiB in
// pieces: 0.67-1.03x), except for Broadcast: in one piece only one rank of its chain works at a
// time, and with neighbours on different CPUs each hand-over moves the whole step between
// cores (4 processes on 2 CPUs, Broadcast 1 MiB in one piece: 0.4x against pieces when the
// chain alternates CPUs, 0.9-1.1x otherwise).
// CUDA ranks keep slot-sized pieces too: these figures are the CPU executor's.
constexpr size_t kPieces = 8;
constexpr size_t kMinPieces = 4;
constexpr size_t kMinPieceBytes = size_t{64} << 10;
constexpr size_t kMinRingPieceBytes = size_t{128} << 10;
constexpr size_t kPiecesBelow = size_t{16} << 20;

size_t pieceElements(size_t sliceCount, size_t elemSize, size_t align, size_t minPieceBytes) {
  const size_t bytes = sliceCount * elemSize;
  if (bytes < kMinPieces * minPieceBytes) return SIZE_MAX;
  const size_t piece = std::max(minPieceBytes, bytes / kPieces);
  return chunkElements(piece, elemSize, align);
}

ConnectionKey keyOf(LinkPurpose purpose, int channel, const CollOp& op) {
  return ConnectionKey{purpose, static_cast<uint8_t>(channel), op.protocol};
}
ConnectionKey ringKey(int channel, const CollOp& op) {
  return keyOf(LinkPurpose::kRing, channel, op);
}
// Send/Recv have their connections; the collectives that talk to peers directly theirs.
ConnectionKey p2pKey(const CollOp& op) {
  const bool sendRecv = op.kind == CollKind::kSend || op.kind == CollKind::kRecv;
  return keyOf(sendRecv ? LinkPurpose::kP2p : LinkPurpose::kDirect, 0, op);
}

// This rank's place in hierarchical AllReduce: its node's chain, and the ring of the ranks at
// the same local position on every node.
struct HierPlace {
  int localRanks = 1, pos = 0;  // in the node's chain
  int intraNext = -1, intraPrev = -1;
  int nodes = 1, node = 0;  // the inter-node ring is indexed by node
  int interNext = -1, interPrev = -1;
};

HierPlace hierPlace(const Comm& c) {
  const tune::NodeLayout& l = plannerState(c).layout();
  HierPlace h;
  h.node = l.nodeOf[c.rank()];
  const std::vector<int>& chain = l.ranks[h.node];
  h.localRanks = static_cast<int>(chain.size());
  h.pos = static_cast<int>(std::find(chain.begin(), chain.end(), c.rank()) - chain.begin());
  h.intraNext = chain[(h.pos + 1) % h.localRanks];
  h.intraPrev = chain[(h.pos + h.localRanks - 1) % h.localRanks];
  h.nodes = l.nodes();
  h.interNext = l.ranks[(h.node + 1) % h.nodes][h.pos];
  h.interPrev = l.ranks[(h.node + h.nodes - 1) % h.nodes][h.pos];
  return h;
}

size_t opBytes(const CollOp& op) { return op.count * dataTypeSize(op.type); }

// The ranks a rank of recursive doubling exchanges with: its extra rank or host, then its
// partner of every round.
struct DoublingPeers {
  int peer[33] = {};
  int count = 0;
};
DoublingPeers doublingPeers(int nranks, int rank) {
  const algo::DoublingPlace d = algo::doublingPlace(nranks, rank);
  DoublingPeers p;
  if (d.extraPeer >= 0) p.peer[p.count++] = d.extraPeer;
  if (!d.extra)
    for (int k = 0; k < d.rounds; ++k) p.peer[p.count++] = algo::doublingPartner(rank, k);
  return p;
}

}  // namespace

const char* algorithmName(Algorithm a) {
  switch (a) {
    case Algorithm::kRing:
      return "ring";
    case Algorithm::kTree:
      return "tree";
    case Algorithm::kChain:
      return "chain";
    case Algorithm::kDirect:
      return "direct";
    case Algorithm::kHier:
      return "hier";
    case Algorithm::kExchange:
      return "exchange";
    case Algorithm::kDoubling:
      return "doubling";
  }
  return "?";
}

void choosePlan(CollOp& op) {
  const PlannerState& state = plannerState(*op.comm);
  const size_t bytes = opBytes(op);
  const PlanChoice choice = state.choose(op.kind, bytes);
  op.algorithm = choice.algorithm;
  op.protocol = choice.protocol;
}

void wantedConnections(const CollOp& op, std::vector<LinkRequest>& out) {
  Comm& c = *op.comm;
  const int n = c.nranks(), me = c.rank();
  if (n == 1) return;
  switch (op.algorithm) {
    case Algorithm::kExchange:
      if (n > 2) {  // every peer, point-to-point connections (two ranks: the ring's)
        for (int p = 0; p < n; ++p) {
          if (p == me) continue;
          out.push_back({p, p2pKey(op), true});
          out.push_back({p, p2pKey(op), false});
        }
        break;
      }
      [[fallthrough]];
    case Algorithm::kRing:
    case Algorithm::kChain: {
      const auto& order = c.ringOrder();
      int next = order[(c.ringPosition() + 1) % n], prev = order[(c.ringPosition() + n - 1) % n];
      for (int ch = 0; ch < c.channels(); ++ch) {
        out.push_back({next, ringKey(ch, op), true});
        out.push_back({prev, ringKey(ch, op), false});
      }
      break;
    }
    case Algorithm::kDoubling: {
      const DoublingPeers peers = doublingPeers(n, me);
      for (int i = 0; i < peers.count; ++i) {
        out.push_back({peers.peer[i], p2pKey(op), true});
        out.push_back({peers.peer[i], p2pKey(op), false});
      }
      break;
    }
    case Algorithm::kTree: {
      const tune::NodeLayout& layout = plannerState(c).layout();
      for (int t = 0; t < 2; ++t) {
        algo::TreeLinks links = tune::treeLinks(layout, t, me);
        for (int ch = 0; ch < c.channels(); ++ch) {
          // Up: receive from children, send to the parent; down: the reverse.
          if (links.parent >= 0) {
            out.push_back({links.parent, treeKey(t, ch, op.protocol), true});
            out.push_back({links.parent, treeKey(t, ch, op.protocol), false});
          }
          for (int child : links.child) {
            if (child < 0) continue;
            out.push_back({child, treeKey(t, ch, op.protocol), true});
            out.push_back({child, treeKey(t, ch, op.protocol), false});
          }
        }
      }
      break;
    }
    case Algorithm::kHier: {
      const HierPlace h = hierPlace(c);
      for (int ch = 0; ch < c.channels(); ++ch) {
        out.push_back({h.intraNext, keyOf(LinkPurpose::kHierIntra, ch, op), true});
        out.push_back({h.intraPrev, keyOf(LinkPurpose::kHierIntra, ch, op), false});
        out.push_back({h.interNext, keyOf(LinkPurpose::kHierInter, ch, op), true});
        out.push_back({h.interPrev, keyOf(LinkPurpose::kHierInter, ch, op), false});
      }
      break;
    }
    case Algorithm::kDirect:
      if (op.kind == CollKind::kSend && op.peer != me) out.push_back({op.peer, p2pKey(op), true});
      if (op.kind == CollKind::kRecv && op.peer != me) out.push_back({op.peer, p2pKey(op), false});
      if (op.kind == CollKind::kAlltoAll) {
        for (int p = 0; p < n; ++p) {
          if (p == me) continue;
          out.push_back({p, p2pKey(op), true});
          out.push_back({p, p2pKey(op), false});
        }
      }
      break;
  }
}

namespace {

struct Planner {
  const CollOp& op;
  Comm& c;
  Plan& plan;
  TaskLabel name;  // the operation's name and number; tasks add their part
  size_t elem, align;

  // Appends a task; returns its index in the plan (what a later task's gate names).
  int add(const algo::StepProgram& program, const PlanLinks& links, const TaskLabel& label,
          int gate = -1, TaskInput input = {}) {
    TaskPlan& t = plan.tasks.emplace_back();
    t.program = program;
    t.links = links;
    t.label = label;
    t.gate = gate;
    t.input = input;
    return static_cast<int>(plan.tasks.size()) - 1;
  }
  TaskPlan& task(int index) { return plan.tasks[static_cast<size_t>(index)]; }
  TaskLabel toRank(int peer) const {
    TaskLabel l = name;
    l.toRank = peer;
    return l;
  }
  TaskLabel fromRank(int peer) const {
    TaskLabel l = name;
    l.fromRank = peer;
    return l;
  }
  TaskLabel localBlock() const {
    TaskLabel l = name;
    l.part = "local block";
    return l;
  }
  static PlanLinks links(int sendTo, int recvFrom, ConnectionKey key) {
    PlanLinks l;
    l.key = key;
    if (sendTo >= 0) l.addSend(sendTo);
    if (recvFrom >= 0) l.addRecv(recvFrom);
    return l;
  }
  PlanLinks ringLinks(int sendTo, int recvFrom, int channel) const {
    return links(sendTo, recvFrom, ringKey(channel, op));
  }
  PlanLinks p2pLinks(int sendTo, int recvFrom) const { return links(sendTo, recvFrom, p2pKey(op)); }
  // Every rank of a ring or tree must cut the data into the same pieces, but its links may be
  // of different transports (shared memory inside a node, TCP between nodes) with different
  // slot sizes: pieces are capped at the smallest slot any transport uses for the protocol.
  size_t commonSlotBytes() const {
    const size_t env = plannerState(c).slotBytes();
    return std::min(env, transport::commonSlotBytes(op.protocol));
  }
  size_t chunkFor(transport::SendConnection* conn) {
    if (conn == nullptr) return chunkElements(kLocalChunkBytes, elem, align);
    return chunkElements(std::min(conn->slotBytes(), commonSlotBytes()), elem, align);
  }

  // The chunk of a ring AllReduce (`ways` = ranks: each loop moves that many chunks) or of a
  // chain (`ways` = 1), cut into pieces where pieces pay (kPieces).
  size_t piecesBetweenProcesses(size_t chunk, algo::Range slice, int ways) const {
    const PlannerState& state = plannerState(c);
    if (!state.processesShareMemory() || !state.cpuRanksOnly() ||
        (state.oversubscribed() && op.kind != CollKind::kBroadcast) ||
        slice.count * elem >= kPiecesBelow)
      return chunk;
    const size_t minPiece = ways > 1 ? kMinRingPieceBytes : kMinPieceBytes;
    return std::min(chunk,
                    pieceElements(slice.count / static_cast<size_t>(ways), elem, align, minPiece));
  }

  void ring(Algorithm algorithm) {
    const int n = c.nranks(), me = c.rank();
    const int* order = c.ringOrder().data();
    const int pos = c.ringPosition();
    const int next = n > 1 ? order[(pos + 1) % n] : -1;
    const int prev = n > 1 ? order[(pos + n - 1) % n] : -1;
    for (int ch = 0; ch < c.channels(); ++ch) {
      const size_t chunk = chunkFor(n > 1 ? c.sendConnection(next, ringKey(ch, op)) : nullptr);
      TaskLabel label = name;
      label.algo = algorithmName(algorithm);
      label.channel = ch;
      algo::Range slice = algo::channelSlice(op.count, c.channels(), ch, align);
      switch (op.kind) {
        case CollKind::kAllReduce:
          add(algo::ringAllReduceProgram(n, pos, slice, piecesBetweenProcesses(chunk, slice, n),
                                         align),
              ringLinks(next, prev, ch), label);
          break;
        case CollKind::kAllGather: {
          bool inPlace = static_cast<const char*>(op.sendbuff) ==
                         static_cast<const char*>(op.recvbuff) + me * op.count * elem;
          add(algo::ringBlocksProgram(true, order, n, pos, op.count, slice, chunk, inPlace),
              ringLinks(next, prev, ch), label);
          break;
        }
        case CollKind::kReduceScatter:
          add(algo::ringBlocksProgram(false, order, n, pos, op.count, slice, chunk, false),
              ringLinks(next, prev, ch), label);
          break;
        default: {
          auto coll = op.kind == CollKind::kBroadcast ? algo::ChainColl::kBroadcast
                                                      : algo::ChainColl::kReduce;
          algo::ChainPeers peers = algo::chainPeers(coll, order, n, op.root, me);
          add(algo::chainProgram(coll, order, n, op.root, me, slice,
                                 piecesBetweenProcesses(chunk, slice, 1),
                                 op.sendbuff == op.recvbuff),
              ringLinks(peers.sendTo, peers.recvFrom, ch), label);
        }
      }
    }
  }

  // AllReduce in one exchange (a ring needs 2(n-1) steps in a row, a tree 2 log n): every rank
  // sends its whole input to every other rank and folds all n inputs itself, in rank order -
  // so every rank gets the same bits even where the op is not symmetric (max of +0 and -0, NaN
  // payloads). Each rank sends and reduces (n-1) times the data, so it pays only for small
  // calls and few ranks (planner_state.cc). Two ranks use the ring's connections and channels;
  // more use the point-to-point connections, one channel. A channel's slice goes in one step
  // (up to a slot), not in pieces that would let a fold overlap the peer's writes: between
  // processes pieces of 32-64 KiB measured slower where cache lines cross fast (AMD EPYC VM,
  // 2 processes, 12 interleaved runs, near state, 64 KiB out of place / in place 9.8 / 6.9 us
  // in pieces against 5.3 / 4.7 whole, 128 KiB 18.0 / 12.4 against 10.3 / 7.9) and no faster
  // in place where they cross slowly (far state, 6 runs: 64 KiB 18.6 against 16.8 us); pulled
  // out of place they gained there (13.7 against 17.0 us), which beats Intel MPI either way.
  void exchange() {
    for (int ch = 0; ch < exchangeChannelCount(op); ++ch) {
      PlanLinks out, in;
      size_t chunk = 0;
      LOOM_ENFORCE(exchangeLinks(op, ch, out, in, chunk), InternalError,
                   "exchange AllReduce planned before its connections were made");
      const algo::Range slice = exchangeSlice(op, ch);
      const int send =
          add(algo::pipeProgram(Prim::kSend, slice.offset, slice.offset, slice.count, chunk, false),
              out, exchangeLabel(op, name.number, ch, "send"));
      const int fold = add(algo::pipeProgram(Prim::kRecvReduceCopy, slice.offset, slice.offset,
                                             slice.count, chunk, true),
                           in, exchangeLabel(op, name.number, ch, "fold"));
      linkExchangeTasks(op, task(send), task(fold), send);
    }
  }

  // Recursive doubling (algorithms/doubling.h) over the point-to-point connections, two tasks
  // per round: the send, and the fold gated on it where the fold overwrites what the send
  // reads; each round gated on the fold before it. From the second round (and on a host rank
  // once its extra rank's input is folded in) the input is the output buffer: the partial
  // result, its pre-op applied.
  void doubling() {
    const int me = c.rank();
    const algo::DoublingPlace d = algo::doublingPlace(c.nranks(), me);
    const DoublingPeers peers = doublingPeers(c.nranks(), me);
    // One piece size on every rank: the least over the rank's connections (every
    // point-to-point connection has the same slots, so all ranks agree).
    size_t chunk = SIZE_MAX;
    for (int i = 0; i < peers.count; ++i) {
      transport::SendConnection* conn = c.sendConnection(peers.peer[i], p2pKey(op));
      LOOM_ENFORCE(conn != nullptr, InternalError,
                   "doubling AllReduce planned before its connections were made");
      chunk = std::min(chunk, chunkFor(conn));
    }
    auto steps = [&](Prim prim, bool final) {
      return algo::pipeProgram(prim, 0, 0, op.count, chunk, final);
    };
    auto label = [&](const char* part, int to, int from) {
      TaskLabel l = name;
      l.algo = "doubling";
      l.part = part;
      l.toRank = to;
      l.fromRank = from;
      return l;
    };
    const int x = d.extraPeer;
    if (d.extra) {
      add(steps(Prim::kSend, false), p2pLinks(x, -1), label("input", x, -1));
      add(steps(Prim::kRecv, false), p2pLinks(-1, x), label("result", -1, x));
      return;
    }
    const TaskInput partial{.fromOutput = true};  // reads what the previous fold wrote
    int last = -1;                                // the fold that wrote the output last
    if (x >= 0) {
      last = add(steps(Prim::kRecvReduceCopy, false), p2pLinks(-1, x), label("fold", -1, x));
      task(last).inputPosition = 0;  // this rank's first: it is the lower one
    }
    for (int k = 0; k < d.rounds; ++k) {
      const int partner = algo::doublingPartner(me, k);
      const bool final = k + 1 == d.rounds;
      const PlanLinks out = p2pLinks(partner, -1);
      const PlanLinks in = p2pLinks(-1, partner);
      int send = -1, fold = -1;
      if (last >= 0) {
        send = add(steps(Prim::kSend, false), out, label("send", partner, -1), last, partial);
        fold =
            add(steps(Prim::kRecvReduceCopy, final), in, label("fold", -1, partner), send, partial);
      } else {
        const bool inPlace = op.sendbuff == op.recvbuff;
        send = add(steps(Prim::kSend, false), out, label("send", partner, -1));
        fold = add(steps(Prim::kRecvReduceCopy, final), in, label("fold", -1, partner),
                   inPlace ? send : -1);
      }
      if (last >= 0 || op.sendbuff == op.recvbuff) task(send).copyInput = true;
      task(fold).inputPosition = me < partner ? 0 : 1;  // the lower rank's vector first
      last = fold;
    }
    if (x >= 0)
      add(steps(Prim::kSend, false), p2pLinks(x, -1), label("result", x, -1), last, partial);
  }

  // Double binary tree: each tree reduces up and broadcasts down one half of the data.
  void tree() {
    const int me = c.rank();
    const tune::NodeLayout& layout = plannerState(c).layout();
    for (int t = 0; t < 2; ++t) {
      algo::TreeLinks links = tune::treeLinks(layout, t, me);
      algo::TreePrims prims = algo::treeAllReducePrims(links, op.sendbuff == op.recvbuff);
      algo::Range half = algo::treeAllReduceHalf(op.count, t, align);
      for (int ch = 0; ch < c.channels(); ++ch) {
        const ConnectionKey id = treeKey(t, ch, op.protocol);
        PlanLinks up, down;
        up.key = down.key = id;
        if (links.parent >= 0) {
          up.addSend(links.parent);
          down.addRecv(links.parent);
        }
        for (int child : links.child) {
          if (child < 0) continue;
          up.addRecv(child);
          down.addSend(child);
        }
        const int anyPeer = up.nsend > 0 ? up.sendPeer[0] : down.nsend > 0 ? down.sendPeer[0] : -1;
        const size_t chunk = chunkFor(anyPeer >= 0 ? c.sendConnection(anyPeer, id) : nullptr);
        algo::Range slice = algo::splitEven(half, c.channels(), ch, align);
        TaskLabel label = name;
        label.algo = "tree";
        label.tree = t;
        label.channel = ch;
        TaskLabel upLabel = label, downLabel = label;
        upLabel.part = "up";
        downLabel.part = "down";
        const algo::TreePrograms programs = algo::treeAllReducePrograms(prims, slice, chunk);
        const int upTask = add(programs.up, up, upLabel);
        if (prims.down != Prim::kNone) add(programs.down, down, downLabel, upTask);
      }
    }
  }

  // Hierarchical AllReduce (algorithms/hierarchical.h), per channel three tasks: reduce-scatter
  // inside the node on `op`; AllReduce of this rank's block across nodes, and all-gather inside
  // the node, both on the output buffer. Each phase is gated on the whole previous one.
  void hier() {
    const HierPlace h = hierPlace(c);
    const int L = h.localRanks;
    // Phases 2 and 3 read the partial results from the output. The pre-op (PreMulSum's
    // multiply) was applied to the inputs in phase 1 (TaskInput::fromOutput); phase 2 applies the
    // post-op (SumPostDiv) on its final steps; phase 3 only copies.
    const TaskInput net{.fromOutput = true};
    const TaskInput gather{.fromOutput = true, .copiesOnly = true};
    for (int ch = 0; ch < c.channels(); ++ch) {
      const ConnectionKey intra = keyOf(LinkPurpose::kHierIntra, ch, op);
      const ConnectionKey inter = keyOf(LinkPurpose::kHierInter, ch, op);
      const size_t localChunk = chunkFor(c.sendConnection(h.intraNext, intra));
      const size_t netChunk = chunkFor(c.sendConnection(h.interNext, inter));
      TaskLabel label = name;
      label.algo = "hier";
      label.channel = ch;
      auto part = [&label](const char* what) {
        TaskLabel l = label;
        l.part = what;
        return l;
      };
      auto local = [&](bool isGather) {
        return algo::hierLocalProgram(isGather, L, h.pos, op.count, c.channels(), ch, localChunk,
                                      align);
      };
      const algo::Range block = algo::hierSlice(op.count, L, h.pos, c.channels(), ch, align);
      // The inter-node ring's order is never read by the AllReduce walk (positions only).
      const algo::StepProgram netSteps =
          algo::ringAllReduceProgram(h.nodes, h.node, block, netChunk, align);

      const int scatter =
          add(local(false), links(h.intraNext, h.intraPrev, intra), part("local reduce-scatter"));
      const size_t scatterSteps = algo::stepCount(local(false));
      const int across =
          add(algo::afterSteps(scatterSteps, netSteps), links(h.interNext, h.interPrev, inter),
              part("across nodes"), scatter, net);
      const size_t acrossSteps =
          (scatterSteps > 0 ? scatterSteps - 1 : 0) + algo::stepCount(netSteps);
      add(algo::afterSteps(acrossSteps, local(true)), links(h.intraNext, h.intraPrev, intra),
          part("local all-gather"), across, gather);
    }
  }

  // AllGather in one exchange (planner_state.cc says when): each rank sends its block
  // straight to every other rank and receives every other block from its owner, where the ring
  // hands each block along n - 1 ranks in a row. The send task stages its steps
  // (TaskPlan::stagesSends): a block no peer can read in place is copied once into memory that
  // every peer maps, not into n - 1 slots. Over the point-to-point connections, with a receive
  // task per peer, so a block lands as soon as its owner posts it.
  void gatherExchange() {
    const int n = c.nranks(), me = c.rank();
    LOOM_ENFORCE(op.kind == CollKind::kAllGather && n > 2, InternalError,
                 "the exchange planned for a ", collName(op.kind), " of ", n, " ranks");
    PlanLinks out;
    out.key = p2pKey(op);
    size_t chunk = SIZE_MAX;
    for (int p = 0; p < n; ++p) {
      if (p == me) continue;
      out.addSend(p);
      chunk = std::min(chunk, chunkFor(c.sendConnection(p, p2pKey(op))));
    }
    TaskLabel label = name;
    label.algo = algorithmName(Algorithm::kExchange);
    for (int r = 0; r < n; ++r) {
      const size_t at = static_cast<size_t>(r) * op.count;
      TaskLabel part = label;
      if (r == me) {
        part.part = "send to all";
        // Staging pays only where peers are other processes that map the region; threads of
        // one process read this rank's buffer in place already.
        task(add(algo::pipeProgram(Prim::kCopySend, 0, at, op.count, chunk, false), out, part))
            .stagesSends = plannerState(c).processesShareMemory();
      } else {
        part.fromRank = r;
        add(algo::pipeProgram(Prim::kRecv, 0, at, op.count, chunk, false), p2pLinks(-1, r), part);
      }
    }
  }

  void direct(size_t p2pChunkBytes) {
    const int n = c.nranks(), me = c.rank();
    const size_t chunk = chunkElements(p2pChunkBytes, elem, align);
    const PlanLinks none;
    if (op.kind == CollKind::kSend) {
      add(algo::pipeProgram(Prim::kSend, 0, 0, op.count, chunk, false), p2pLinks(op.peer, -1),
          toRank(op.peer));
    } else if (op.kind == CollKind::kRecv) {
      add(algo::pipeProgram(Prim::kRecv, 0, 0, op.count, chunk, false), p2pLinks(-1, op.peer),
          fromRank(op.peer));
    } else if (op.sendbuff != op.recvbuff) {
      for (int s = 0; s < n; ++s) {
        algo::AllToAllStep st = algo::allToAllStep(n, me, s, op.count);
        if (st.local) {
          add(algo::pipeProgram(Prim::kCopy, st.sendOffset, st.recvOffset, st.count, chunk, false),
              none, localBlock());
          continue;
        }
        add(algo::pipeProgram(Prim::kSend, st.sendOffset, 0, st.count, chunk, false),
            p2pLinks(st.sendPeer, -1), toRank(st.sendPeer));
        add(algo::pipeProgram(Prim::kRecv, 0, st.recvOffset, st.count, chunk, false),
            p2pLinks(-1, st.recvPeer), fromRank(st.recvPeer));
      }
    } else {
      // In place: the block from rank p lands where the block for rank p is read from, so the
      // receive from p is gated on the send to p (step i overwrites only what the send's step
      // i copied out; PrimTask never posts such input by address, see directInput_).
      std::vector<int> sendTo(static_cast<size_t>(n), -1);
      for (int s = 0; s < n; ++s) {
        algo::AllToAllStep st = algo::allToAllStep(n, me, s, op.count);
        if (st.local) continue;  // the own block stays where it is
        sendTo[st.sendPeer] =
            add(algo::pipeProgram(Prim::kSend, st.sendOffset, 0, st.count, chunk, false),
                p2pLinks(st.sendPeer, -1), toRank(st.sendPeer));
      }
      for (int s = 0; s < n; ++s) {
        algo::AllToAllStep st = algo::allToAllStep(n, me, s, op.count);
        if (st.local) continue;
        add(algo::pipeProgram(Prim::kRecv, 0, st.recvOffset, st.count, chunk, false),
            p2pLinks(-1, st.recvPeer), fromRank(st.recvPeer), sendTo[st.recvPeer]);
      }
    }
  }
};

}  // namespace

void buildPlan(const CollOp& op, uint64_t number, Plan& plan) {
  Comm& c = *op.comm;
  const size_t elem = dataTypeSize(op.type);
  plan.tasks.clear();
  Planner p{
      op, c, plan, TaskLabel{collName(op.kind), number}, elem, std::max<size_t>(1, 64 / elem)};
  Algorithm a = op.algorithm;
  if (a == Algorithm::kTree) {
    p.tree();
  } else if (a == Algorithm::kHier) {
    p.hier();
  } else if (a == Algorithm::kExchange) {
    if (op.kind == CollKind::kAllReduce)
      p.exchange();
    else
      p.gatherExchange();
  } else if (a == Algorithm::kDoubling) {
    p.doubling();
  } else if (a == Algorithm::kDirect) {
    size_t slot = kLocalChunkBytes;
    if (c.nranks() > 1) {
      int peer = op.kind == CollKind::kAlltoAll ? (c.rank() + 1) % c.nranks() : op.peer;
      slot = op.kind == CollKind::kRecv ? c.recvConnection(peer, p2pKey(op))->slotBytes()
                                        : c.sendConnection(peer, p2pKey(op))->slotBytes();
      // AlltoAll's peers may sit behind different transports: one piece size for all.
      if (op.kind == CollKind::kAlltoAll) slot = std::min(slot, p.commonSlotBytes());
    }
    p.direct(slot);
  } else {
    p.ring(a);
  }
}

ConnectionKey exchangeKey(const CollOp& op, int channel) {
  return op.comm->nranks() == 2 ? ringKey(channel, op) : p2pKey(op);
}

int exchangeChannelCount(const CollOp& op) {
  return op.comm->nranks() == 2 ? op.comm->channels() : 1;
}

algo::Range exchangeSlice(const CollOp& op, int channel) {
  const size_t align = std::max<size_t>(1, 64 / dataTypeSize(op.type));
  return algo::channelSlice(op.count, exchangeChannelCount(op), channel, align);
}

bool exchangeLinks(const CollOp& op, int channel, PlanLinks& out, PlanLinks& in, size_t& chunk) {
  Comm& c = *op.comm;
  const int n = c.nranks(), me = c.rank();
  const size_t elem = dataTypeSize(op.type), align = std::max<size_t>(1, 64 / elem);
  const ConnectionKey id = exchangeKey(op, channel);
  out.key = in.key = id;
  const size_t env = plannerState(c).slotBytes();
  const size_t common = std::min(env, transport::commonSlotBytes(op.protocol));
  chunk = SIZE_MAX;
  for (int p = 0; p < n; ++p) {
    if (p == me) continue;
    transport::SendConnection* send = c.sendConnection(p, id);
    transport::RecvConnection* recv = c.recvConnection(p, id);
    if (send == nullptr || recv == nullptr) return false;
    out.addSend(p);
    in.addRecv(p);
    chunk = std::min(chunk, chunkElements(std::min(send->slotBytes(), common), elem, align));
  }
  return true;
}

TaskLabel exchangeLabel(const CollOp& op, uint64_t number, int channel, const char* part) {
  TaskLabel label{collName(op.kind), number};
  label.algo = "exchange";
  label.channel = op.comm->nranks() == 2 ? channel : -1;
  label.part = part;
  return label;
}

void linkExchangeTasks(const CollOp& op, TaskPlan& send, TaskPlan& fold, int sendIndex) {
  fold.inputPosition = op.comm->rank();
  if (op.sendbuff == op.recvbuff) {
    // The fold overwrites the input, so the send copies it first. Between 3 or more
    // processes the copy goes once into the staging region, which every peer maps and folds
    // from, instead of once into each peer's slot. Between 2 it goes into the peer's slot:
    // the same lines cross as through the staging region, and the slot measured faster (AMD
    // EPYC VM, 64-128 KiB: docs/performance.md, "AllReduce up to 128 KiB").
    send.copyInput = true;
    send.stagesSends = plannerState(*op.comm).processesShareMemory() && op.comm->nranks() > 2;
    fold.gate = sendIndex;
  }
}

}  // namespace loom
