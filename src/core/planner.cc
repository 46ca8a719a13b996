#include "src/core/planner.h"

#include <algorithm>
#include <cstdint>

#include "algorithms/alltoall.h"
#include "algorithms/doubling.h"
#include "algorithms/hierarchical.h"
#include "algorithms/tree.h"
#include "src/core/env.h"
#include "src/core/error.h"
#include "src/core/planner_state.h"
#include "src/core/schedules.h"
#include "src/kernels/datatype_traits.h"
#include "src/tune/comm_topology.h"
#include "src/tune/cost_model.h"
#include "transports/shm/ll_connection.h"
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

int treeChannel(int tree, int channel) { return kTreeChannelBase + 16 * tree + channel; }
int hierIntraChannel(int channel) { return kHierIntraChannelBase + channel; }
int hierInterChannel(int channel) { return kHierInterChannelBase + channel; }

// This rank's place in hierarchical AllReduce: its node's chain, and the ring of the ranks at
// the same local position on every node.
struct HierPlace {
  int localRanks = 1, pos = 0;  // in the node's chain
  int intraNext = -1, intraPrev = -1;
  int nodes = 1, node = 0;  // the inter-node ring is indexed by node
  int interNext = -1, interPrev = -1;
};

HierPlace hierPlace(const Comm& c) {
  const tune::NodeLayout& l = c.plannerState().layout();
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

// Every connection id of `op` is shifted when it uses LL.
int protocolOffset(const CollOp& op) {
  return op.protocol == transport::Protocol::kLL ? kLLChannelOffset : 0;
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
  const PlannerState& state = op.comm->plannerState();
  const size_t bytes = opBytes(op);
  const PlanChoice choice = state.choose(op.kind, bytes);
  op.algorithm = choice.algorithm;
  op.protocol = choice.protocol;
  op.streamStores = state.streamsStores(bytes);
}

void wantedConnections(const CollOp& op, std::vector<Comm::ConnectionKey>& out) {
  Comm& c = *op.comm;
  const int n = c.nranks(), me = c.rank();
  if (n == 1) return;
  const int off = protocolOffset(op);
  const size_t first = out.size();
  switch (op.algorithm) {
    case Algorithm::kExchange:
      if (n > 2) {  // every peer, point-to-point connections (two ranks: the ring's)
        for (int p = 0; p < n; ++p) {
          if (p == me) continue;
          out.push_back({p, kCollP2pChannel, true});
          out.push_back({p, kCollP2pChannel, false});
        }
        break;
      }
      [[fallthrough]];
    case Algorithm::kRing:
    case Algorithm::kChain: {
      const auto& order = c.ringOrder();
      int next = order[(c.ringPosition() + 1) % n], prev = order[(c.ringPosition() + n - 1) % n];
      for (int ch = 0; ch < c.channels(); ++ch) {
        out.push_back({next, ch, true});
        out.push_back({prev, ch, false});
      }
      break;
    }
    case Algorithm::kDoubling: {
      const DoublingPeers peers = doublingPeers(n, me);
      for (int i = 0; i < peers.count; ++i) {
        out.push_back({peers.peer[i], kCollP2pChannel, true});
        out.push_back({peers.peer[i], kCollP2pChannel, false});
      }
      break;
    }
    case Algorithm::kTree: {
      const tune::NodeLayout& layout = c.plannerState().layout();
      for (int t = 0; t < 2; ++t) {
        algo::TreeLinks links = tune::treeLinks(layout, t, me);
        for (int ch = 0; ch < c.channels(); ++ch) {
          // Up: receive from children, send to the parent; down: the reverse.
          if (links.parent >= 0) {
            out.push_back({links.parent, treeChannel(t, ch), true});
            out.push_back({links.parent, treeChannel(t, ch), false});
          }
          for (int child : links.child) {
            if (child < 0) continue;
            out.push_back({child, treeChannel(t, ch), true});
            out.push_back({child, treeChannel(t, ch), false});
          }
        }
      }
      break;
    }
    case Algorithm::kHier: {
      const HierPlace h = hierPlace(c);
      for (int ch = 0; ch < c.channels(); ++ch) {
        out.push_back({h.intraNext, hierIntraChannel(ch), true});
        out.push_back({h.intraPrev, hierIntraChannel(ch), false});
        out.push_back({h.interNext, hierInterChannel(ch), true});
        out.push_back({h.interPrev, hierInterChannel(ch), false});
      }
      break;
    }
    case Algorithm::kDirect:
      if (op.kind == CollKind::kSend && op.peer != me) out.push_back({op.peer, kP2pChannel, true});
      if (op.kind == CollKind::kRecv && op.peer != me) out.push_back({op.peer, kP2pChannel, false});
      if (op.kind == CollKind::kAlltoAll) {
        for (int p = 0; p < n; ++p) {
          if (p == me) continue;
          out.push_back({p, kCollP2pChannel, true});
          out.push_back({p, kCollP2pChannel, false});
        }
      }
      break;
  }
  for (size_t i = first; i < out.size(); ++i) out[i].channel += off;
}

namespace {

struct Planner {
  const CollOp& op;
  Comm& c;
  std::vector<std::unique_ptr<PrimTask>>& tasks;
  TaskLabel name;  // the operation's name and number; tasks add their part
  size_t elem, align;
  int off;  // protocolOffset(op)

  PrimTask* add(std::unique_ptr<StepSource> steps, const TaskLinks& links, const TaskLabel& label,
                const PrimTask* gate = nullptr) {
    tasks.push_back(std::make_unique<PrimTask>(op, std::move(steps), links, label, gate));
    return tasks.back().get();
  }
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
  TaskLinks ringLinks(int sendTo, int recvFrom, int channel) {
    TaskLinks l;
    if (sendTo >= 0) l.addSend(c.sendConnection(sendTo, channel + off), sendTo);
    if (recvFrom >= 0) l.addRecv(c.recvConnection(recvFrom, channel + off), recvFrom);
    return l;
  }
  // Every rank of a ring or tree must cut the data into the same pieces, but its links may be
  // of different transports (shared memory inside a node, TCP between nodes) with different
  // slot sizes: pieces are capped at the smallest slot any transport uses for the protocol.
  size_t commonSlotBytes() const {
    const size_t env = c.plannerState().slotBytes();
    return op.protocol == transport::Protocol::kLL ? std::min(env, transport::shm::kLLSlotBytes)
                                                   : env;
  }
  size_t chunkFor(transport::SendConnection* conn) {
    if (conn == nullptr) return chunkElements(kLocalChunkBytes, elem, align);
    return chunkElements(std::min(conn->slotBytes(), commonSlotBytes()), elem, align);
  }

  void ring(Algorithm algorithm) {
    const int n = c.nranks(), me = c.rank();
    RingPlace place{c.ringOrder().data(), n, me, c.ringPosition()};
    const int next = n > 1 ? c.ringOrder()[(place.pos + 1) % n] : -1;
    const int prev = n > 1 ? c.ringOrder()[(place.pos + n - 1) % n] : -1;
    for (int ch = 0; ch < c.channels(); ++ch) {
      const size_t chunk = chunkFor(n > 1 ? c.sendConnection(next, ch + off) : nullptr);
      TaskLabel label = name;
      label.algo = algorithmName(algorithm);
      label.channel = ch;
      algo::Range slice = algo::channelSlice(op.count, c.channels(), ch, align);
      switch (op.kind) {
        case CollKind::kAllReduce:
          add(ringAllReduceSteps(place, slice, chunk, align), ringLinks(next, prev, ch), label);
          break;
        case CollKind::kAllGather: {
          bool inPlace = static_cast<const char*>(op.sendbuff) ==
                         static_cast<const char*>(op.recvbuff) + me * op.count * elem;
          add(ringAllGatherSteps(place, op.count, slice, chunk, inPlace), ringLinks(next, prev, ch),
              label);
          break;
        }
        case CollKind::kReduceScatter:
          add(ringReduceScatterSteps(place, op.count, slice, chunk), ringLinks(next, prev, ch),
              label);
          break;
        default: {
          auto coll = op.kind == CollKind::kBroadcast ? algo::ChainColl::kBroadcast
                                                      : algo::ChainColl::kReduce;
          algo::ChainPeers peers = algo::chainPeers(coll, place.order, n, op.root, me);
          add(chainSteps(coll, place, op.root, slice, chunk, op.sendbuff == op.recvbuff),
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
  // more use the point-to-point connections, one channel.
  void exchange() {
    for (int ch = 0; ch < exchangeChannelCount(op); ++ch) {
      TaskLinks out, in;
      size_t chunk = 0;
      LOOM_ENFORCE(exchangeLinks(op, ch, out, in, chunk), InternalError,
                   "exchange AllReduce planned before its connections were made");
      const algo::Range slice = exchangeSlice(op, ch);
      PrimTask* send =
          add(pipeSteps(Prim::kSend, slice.offset, slice.offset, slice.count, chunk, false), out,
              exchangeLabel(op, name.number, ch, "send"));
      PrimTask* fold = add(
          pipeSteps(Prim::kRecvReduceCopy, slice.offset, slice.offset, slice.count, chunk, true),
          in, exchangeLabel(op, name.number, ch, "fold"));
      linkExchangeTasks(op, *send, *fold);
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
      transport::SendConnection* conn = c.sendConnection(peers.peer[i], kCollP2pChannel + off);
      LOOM_ENFORCE(conn != nullptr, InternalError,
                   "doubling AllReduce planned before its connections were made");
      chunk = std::min(chunk, chunkFor(conn));
    }
    auto steps = [&](Prim prim, bool final) {
      return pipeSteps(prim, 0, 0, op.count, chunk, final);
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
      add(steps(Prim::kSend, false), ringLinks(x, -1, kCollP2pChannel), label("input", x, -1));
      add(steps(Prim::kRecv, false), ringLinks(-1, x, kCollP2pChannel), label("result", -1, x));
      return;
    }
    CollOp partial = op;  // reads what the previous fold wrote
    partial.sendbuff = op.recvbuff;
    partial.inputHasPreOp = true;
    const PrimTask* last = nullptr;  // the fold that wrote the output last
    if (x >= 0) {
      PrimTask* fold = add(steps(Prim::kRecvReduceCopy, false), ringLinks(-1, x, kCollP2pChannel),
                           label("fold", -1, x));
      fold->setInputPosition(0);  // this rank's first: it is the lower one
      last = fold;
    }
    for (int k = 0; k < d.rounds; ++k) {
      const int partner = algo::doublingPartner(me, k);
      const bool final = k + 1 == d.rounds;
      const TaskLinks out = ringLinks(partner, -1, kCollP2pChannel);
      const TaskLinks in = ringLinks(-1, partner, kCollP2pChannel);
      PrimTask *send, *fold;
      if (last != nullptr) {
        send = addOwned(partial, steps(Prim::kSend, false), out, label("send", partner, -1), last);
        fold = addOwned(partial, steps(Prim::kRecvReduceCopy, final), in,
                        label("fold", -1, partner), send);
      } else {
        const bool inPlace = op.sendbuff == op.recvbuff;
        send = add(steps(Prim::kSend, false), out, label("send", partner, -1));
        fold = add(steps(Prim::kRecvReduceCopy, final), in, label("fold", -1, partner),
                   inPlace ? send : nullptr);
      }
      if (last != nullptr || op.sendbuff == op.recvbuff) send->setCopyInput();
      fold->setInputPosition(me < partner ? 0 : 1);  // the lower rank's vector first
      last = fold;
    }
    if (x >= 0)
      addOwned(partial, steps(Prim::kSend, false), ringLinks(x, -1, kCollP2pChannel),
               label("result", x, -1), last);
  }

  // Double binary tree: each tree reduces up and broadcasts down one half of the data.
  void tree() {
    const int me = c.rank();
    const tune::NodeLayout& layout = c.plannerState().layout();
    for (int t = 0; t < 2; ++t) {
      algo::TreeLinks links = tune::treeLinks(layout, t, me);
      algo::TreePrims prims = algo::treeAllReducePrims(links, op.sendbuff == op.recvbuff);
      algo::Range half = algo::treeAllReduceHalf(op.count, t, align);
      for (int ch = 0; ch < c.channels(); ++ch) {
        const int id = treeChannel(t, ch) + off;
        TaskLinks up, down;
        if (links.parent >= 0) {
          up.addSend(c.sendConnection(links.parent, id), links.parent);
          down.addRecv(c.recvConnection(links.parent, id), links.parent);
        }
        for (int child : links.child) {
          if (child < 0) continue;
          up.addRecv(c.recvConnection(child, id), child);
          down.addSend(c.sendConnection(child, id), child);
        }
        transport::SendConnection* any = up.nsend > 0     ? up.send[0]
                                         : down.nsend > 0 ? down.send[0]
                                                          : nullptr;
        const size_t chunk = chunkFor(any);
        algo::Range slice = algo::splitEven(half, c.channels(), ch, align);
        TaskLabel label = name;
        label.algo = "tree";
        label.tree = t;
        label.channel = ch;
        TaskLabel upLabel = label, downLabel = label;
        upLabel.part = "up";
        downLabel.part = "down";
        Prim upPrim = prims.up == Prim::kNone ? Prim::kCopy : prims.up;
        bool upFinal = upPrim == Prim::kRecvReduceCopy || upPrim == Prim::kCopy;
        PrimTask* upTask =
            add(pipeSteps(upPrim, slice.offset, slice.offset, slice.count, chunk, upFinal), up,
                upLabel);
        if (prims.down != Prim::kNone) {
          add(pipeSteps(prims.down, slice.offset, slice.offset, slice.count, chunk, false), down,
              downLabel, upTask);
        }
      }
    }
  }

  // A task on a variant of `op` (owned by its step source, see OpOwningSteps).
  PrimTask* addOwned(const CollOp& variant, std::unique_ptr<StepSource> steps,
                     const TaskLinks& links, const TaskLabel& label, const PrimTask* gate) {
    auto owning = std::make_unique<OpOwningSteps>(variant, std::move(steps));
    const CollOp& owned = owning->op();
    tasks.push_back(std::make_unique<PrimTask>(owned, std::move(owning), links, label, gate));
    return tasks.back().get();
  }

  // Hierarchical AllReduce (algorithms/hierarchical.h), per channel three tasks: reduce-scatter
  // inside the node on `op`; AllReduce of this rank's block across nodes, and all-gather inside
  // the node, both on the output buffer. Each phase is gated on the whole previous one.
  void hier() {
    const HierPlace h = hierPlace(c);
    const int L = h.localRanks;
    // Phases 2 and 3 read the partial results from the output. The pre-op (PreMulSum's
    // multiply) was applied to the inputs in phase 1 (inputHasPreOp); phase 2 applies the
    // post-op (SumPostDiv) on its final steps; phase 3 only copies.
    CollOp net = op;
    net.sendbuff = op.recvbuff;
    net.inputHasPreOp = true;
    CollOp gather = net;
    gather.kind = CollKind::kAllGather;
    gather.reduce = ReduceOpKind::kSum;
    for (int ch = 0; ch < c.channels(); ++ch) {
      const int intra = hierIntraChannel(ch), inter = hierInterChannel(ch);
      const size_t localChunk = chunkFor(c.sendConnection(h.intraNext, intra + off));
      const size_t netChunk = chunkFor(c.sendConnection(h.interNext, inter + off));
      TaskLabel label = name;
      label.algo = "hier";
      label.channel = ch;
      auto part = [&label](const char* what) {
        TaskLabel l = label;
        l.part = what;
        return l;
      };
      auto local = [&](bool isGather) {
        return hierLocalSteps(isGather, L, h.pos, op.count, c.channels(), ch, localChunk, align);
      };
      const algo::Range block = algo::hierSlice(op.count, L, h.pos, c.channels(), ch, align);
      // The inter-node ring's order is never read by the AllReduce walk (positions only).
      const RingPlace ring{nullptr, h.nodes, c.rank(), h.node};
      auto netSteps = [&] { return ringAllReduceSteps(ring, block, netChunk, align); };

      PrimTask* scatter = add(local(false), ringLinks(h.intraNext, h.intraPrev, intra),
                              part("local reduce-scatter"));
      const size_t scatterSteps = countSteps(*local(false));
      PrimTask* across =
          addOwned(net, afterSteps(scatterSteps, netSteps()),
                   ringLinks(h.interNext, h.interPrev, inter), part("across nodes"), scatter);
      const size_t acrossSteps =
          (scatterSteps > 0 ? scatterSteps - 1 : 0) + countSteps(*netSteps());
      addOwned(gather, afterSteps(acrossSteps, local(true)),
               ringLinks(h.intraNext, h.intraPrev, intra), part("local all-gather"), across);
    }
  }

  void direct(size_t p2pChunkBytes) {
    const int n = c.nranks(), me = c.rank();
    const size_t chunk = chunkElements(p2pChunkBytes, elem, align);
    TaskLinks none;
    if (op.kind == CollKind::kSend) {
      add(pipeSteps(Prim::kSend, 0, 0, op.count, chunk, false), ringLinks(op.peer, -1, kP2pChannel),
          toRank(op.peer));
    } else if (op.kind == CollKind::kRecv) {
      add(pipeSteps(Prim::kRecv, 0, 0, op.count, chunk, false), ringLinks(-1, op.peer, kP2pChannel),
          fromRank(op.peer));
    } else if (op.sendbuff != op.recvbuff) {
      for (int s = 0; s < n; ++s) {
        algo::AllToAllStep st = algo::allToAllStep(n, me, s, op.count);
        if (st.local) {
          add(pipeSteps(Prim::kCopy, st.sendOffset, st.recvOffset, st.count, chunk, false), none,
              localBlock());
          continue;
        }
        add(pipeSteps(Prim::kSend, st.sendOffset, 0, st.count, chunk, false),
            ringLinks(st.sendPeer, -1, kCollP2pChannel), toRank(st.sendPeer));
        add(pipeSteps(Prim::kRecv, 0, st.recvOffset, st.count, chunk, false),
            ringLinks(-1, st.recvPeer, kCollP2pChannel), fromRank(st.recvPeer));
      }
    } else {
      // In place: the block from rank p lands where the block for rank p is read from, so the
      // receive from p is gated on the send to p (step i overwrites only what the send's step
      // i copied out; PrimTask never posts such input by address, see directInput_).
      std::vector<PrimTask*> sendTo(static_cast<size_t>(n), nullptr);
      for (int s = 0; s < n; ++s) {
        algo::AllToAllStep st = algo::allToAllStep(n, me, s, op.count);
        if (st.local) continue;  // the own block stays where it is
        sendTo[st.sendPeer] = add(pipeSteps(Prim::kSend, st.sendOffset, 0, st.count, chunk, false),
                                  ringLinks(st.sendPeer, -1, kCollP2pChannel), toRank(st.sendPeer));
      }
      for (int s = 0; s < n; ++s) {
        algo::AllToAllStep st = algo::allToAllStep(n, me, s, op.count);
        if (st.local) continue;
        add(pipeSteps(Prim::kRecv, 0, st.recvOffset, st.count, chunk, false),
            ringLinks(-1, st.recvPeer, kCollP2pChannel), fromRank(st.recvPeer),
            sendTo[st.recvPeer]);
      }
    }
  }
};

}  // namespace

void planOp(const CollOp& op, uint64_t number, std::vector<std::unique_ptr<PrimTask>>& tasks) {
  Comm& c = *op.comm;
  const size_t elem = dataTypeSize(op.type);
  Planner p{op,
            c,
            tasks,
            TaskLabel{collName(op.kind), number},
            elem,
            std::max<size_t>(1, 64 / elem),
            protocolOffset(op)};
  Algorithm a = op.algorithm;
  if (a == Algorithm::kTree) {
    p.tree();
  } else if (a == Algorithm::kHier) {
    p.hier();
  } else if (a == Algorithm::kExchange) {
    p.exchange();
  } else if (a == Algorithm::kDoubling) {
    p.doubling();
  } else if (a == Algorithm::kDirect) {
    size_t slot = kLocalChunkBytes;
    if (c.nranks() > 1) {
      const bool all = op.kind == CollKind::kAlltoAll;
      const int peer = all ? (c.rank() + 1) % c.nranks() : op.peer;
      const int id = (all ? kCollP2pChannel : kP2pChannel) + p.off;
      slot = op.kind == CollKind::kRecv ? c.recvConnection(peer, id)->slotBytes()
                                        : c.sendConnection(peer, id)->slotBytes();
      // AlltoAll's peers may sit behind different transports: one piece size for all.
      if (op.kind == CollKind::kAlltoAll) slot = std::min(slot, p.commonSlotBytes());
    }
    p.direct(slot);
  } else {
    p.ring(a);
  }
}

int exchangeChannelCount(const CollOp& op) {
  return op.comm->nranks() == 2 ? op.comm->channels() : 1;
}

algo::Range exchangeSlice(const CollOp& op, int channel) {
  const size_t align = std::max<size_t>(1, 64 / dataTypeSize(op.type));
  return algo::channelSlice(op.count, exchangeChannelCount(op), channel, align);
}

bool exchangeLinks(const CollOp& op, int channel, TaskLinks& out, TaskLinks& in, size_t& chunk) {
  Comm& c = *op.comm;
  const int n = c.nranks(), me = c.rank();
  const size_t elem = dataTypeSize(op.type), align = std::max<size_t>(1, 64 / elem);
  const int id = (n == 2 ? channel : kCollP2pChannel) + protocolOffset(op);
  const size_t env = c.plannerState().slotBytes();
  const size_t common =
      op.protocol == transport::Protocol::kLL ? std::min(env, transport::shm::kLLSlotBytes) : env;
  chunk = SIZE_MAX;
  for (int p = 0; p < n; ++p) {
    if (p == me) continue;
    transport::SendConnection* send = c.sendConnection(p, id);
    transport::RecvConnection* recv = c.recvConnection(p, id);
    if (send == nullptr || recv == nullptr) return false;
    out.addSend(send, p);
    in.addRecv(recv, p);
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

void linkExchangeTasks(const CollOp& op, PrimTask& send, PrimTask& fold) {
  fold.setInputPosition(op.comm->rank());
  if (op.sendbuff == op.recvbuff) {
    send.setCopyInput();
    fold.setGate(&send);
  }
}

}  // namespace loom
