#include "src/core/planner.h"

#include <algorithm>

#include "algorithms/alltoall.h"
#include "algorithms/tree.h"
#include "src/core/env.h"
#include "src/core/error.h"
#include "src/core/schedules.h"
#include "src/kernels/datatype_traits.h"

namespace loom {
namespace {

using algo::Prim;

// A lone rank has no connections: its chunk only bounds the size of each copy.
constexpr size_t kLocalChunkBytes = size_t{1} << 20;

bool ringBased(CollKind k) {
  return k == CollKind::kAllReduce || k == CollKind::kAllGather || k == CollKind::kReduceScatter ||
         k == CollKind::kBroadcast || k == CollKind::kReduce;
}

size_t chunkElements(size_t slotBytes, size_t elemSize, size_t align) {
  size_t chunk = slotBytes / elemSize;
  return std::max(align, chunk / align * align);
}

int treeChannel(int tree, int channel) { return kTreeChannelBase + 16 * tree + channel; }

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
  }
  return "?";
}

Algorithm chooseAlgorithm(const CollOp& op) {
  if (op.kind == CollKind::kBroadcast || op.kind == CollKind::kReduce) return Algorithm::kChain;
  if (!ringBased(op.kind)) return Algorithm::kDirect;
  if (op.kind != CollKind::kAllReduce) return Algorithm::kRing;
  std::string forced = envString(EnvVar::LOOM_ALGO);
  if (forced == "ring") return Algorithm::kRing;
  if (forced == "tree") return Algorithm::kTree;
  LOOM_ENFORCE(forced.empty(), InvalidArgument, "LOOM_ALGO='", forced,
               "' is not an algorithm; use ring or tree (or unset it)");
  const int64_t threshold = envInt(EnvVar::LOOM_TREE_THRESHOLD);
  const size_t bytes = op.count * dataTypeSize(op.type);
  return op.comm->nranks() > 2 && static_cast<int64_t>(bytes) <= threshold ? Algorithm::kTree
                                                                           : Algorithm::kRing;
}

transport::Protocol chooseProtocol(const CollOp& op) {
  std::string forced = envString(EnvVar::LOOM_PROTO);
  if (forced == "simple") return transport::Protocol::kSimple;
  if (forced == "ll") return transport::Protocol::kLL;
  LOOM_ENFORCE(forced.empty(), InvalidArgument, "LOOM_PROTO='", forced,
               "' is not a protocol; use simple or ll (or unset it)");
  const size_t bytes = op.count * dataTypeSize(op.type);
  return static_cast<int64_t>(bytes) <= envInt(EnvVar::LOOM_LL_THRESHOLD)
             ? transport::Protocol::kLL
             : transport::Protocol::kSimple;
}

void wantedConnections(const CollOp& op, std::vector<Comm::ConnectionKey>& out) {
  Comm& c = *op.comm;
  const int n = c.nranks(), me = c.rank();
  if (n == 1) return;
  const int off = protocolOffset(op);
  const size_t first = out.size();
  switch (op.algorithm) {
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
    case Algorithm::kTree:
      for (int t = 0; t < 2; ++t) {
        algo::TreeLinks links = algo::dtree(n, t, me);
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
    case Algorithm::kDirect:
      if (op.kind == CollKind::kSend && op.peer != me) out.push_back({op.peer, kP2pChannel, true});
      if (op.kind == CollKind::kRecv && op.peer != me) out.push_back({op.peer, kP2pChannel, false});
      if (op.kind == CollKind::kAlltoAll) {
        for (int p = 0; p < n; ++p) {
          if (p == me) continue;
          out.push_back({p, kP2pChannel, true});
          out.push_back({p, kP2pChannel, false});
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
  std::string name;
  size_t elem, align;
  int off;  // protocolOffset(op)

  PrimTask* add(std::unique_ptr<StepSource> steps, const TaskLinks& links, const std::string& label,
                const PrimTask* gate = nullptr) {
    tasks.push_back(std::make_unique<PrimTask>(op, std::move(steps), links, label, gate));
    return tasks.back().get();
  }
  TaskLinks ringLinks(int sendTo, int recvFrom, int channel) {
    TaskLinks l;
    if (sendTo >= 0) l.addSend(c.sendConnection(sendTo, channel + off), sendTo);
    if (recvFrom >= 0) l.addRecv(c.recvConnection(recvFrom, channel + off), recvFrom);
    return l;
  }
  size_t chunkFor(transport::SendConnection* conn) {
    return chunkElements(conn != nullptr ? conn->slotBytes() : kLocalChunkBytes, elem, align);
  }

  void ring(Algorithm algorithm) {
    const int n = c.nranks(), me = c.rank();
    RingPlace place{c.ringOrder().data(), n, me, c.ringPosition()};
    const int next = n > 1 ? c.ringOrder()[(place.pos + 1) % n] : -1;
    const int prev = n > 1 ? c.ringOrder()[(place.pos + n - 1) % n] : -1;
    for (int ch = 0; ch < c.channels(); ++ch) {
      const size_t chunk = chunkFor(n > 1 ? c.sendConnection(next, ch + off) : nullptr);
      const std::string label = strCat(name, " (", algorithmName(algorithm), ") channel ", ch);
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

  // Double binary tree: each tree reduces up and broadcasts down one half of the data.
  void tree() {
    const int n = c.nranks(), me = c.rank();
    for (int t = 0; t < 2; ++t) {
      algo::TreeLinks links = algo::dtree(n, t, me);
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
        const std::string label = strCat(name, " (tree ", t, ") channel ", ch);
        Prim upPrim = prims.up == Prim::kNone ? Prim::kCopy : prims.up;
        bool upFinal = upPrim == Prim::kRecvReduceCopy || upPrim == Prim::kCopy;
        PrimTask* upTask =
            add(pipeSteps(upPrim, slice.offset, slice.offset, slice.count, chunk, upFinal), up,
                label + " up");
        if (prims.down != Prim::kNone) {
          add(pipeSteps(prims.down, slice.offset, slice.offset, slice.count, chunk, false), down,
              label + " down", upTask);
        }
      }
    }
  }

  void direct(size_t p2pChunkBytes) {
    const int n = c.nranks(), me = c.rank();
    const size_t chunk = chunkElements(p2pChunkBytes, elem, align);
    TaskLinks none;
    if (op.kind == CollKind::kSend) {
      add(pipeSteps(Prim::kSend, 0, 0, op.count, chunk, false), ringLinks(op.peer, -1, kP2pChannel),
          strCat(name, " to rank ", op.peer));
    } else if (op.kind == CollKind::kRecv) {
      add(pipeSteps(Prim::kRecv, 0, 0, op.count, chunk, false), ringLinks(-1, op.peer, kP2pChannel),
          strCat(name, " from rank ", op.peer));
    } else {
      for (int s = 0; s < n; ++s) {
        algo::AllToAllStep st = algo::allToAllStep(n, me, s, op.count);
        if (st.local) {
          add(pipeSteps(Prim::kCopy, st.sendOffset, st.recvOffset, st.count, chunk, false), none,
              strCat(name, " local block"));
          continue;
        }
        add(pipeSteps(Prim::kSend, st.sendOffset, 0, st.count, chunk, false),
            ringLinks(st.sendPeer, -1, kP2pChannel), strCat(name, " to rank ", st.sendPeer));
        add(pipeSteps(Prim::kRecv, 0, st.recvOffset, st.count, chunk, false),
            ringLinks(-1, st.recvPeer, kP2pChannel), strCat(name, " from rank ", st.recvPeer));
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
            strCat(collName(op.kind), " #", number),
            elem,
            std::max<size_t>(1, 64 / elem),
            protocolOffset(op)};
  Algorithm a = op.algorithm;
  if (a == Algorithm::kTree) {
    p.tree();
  } else if (a == Algorithm::kDirect) {
    size_t slot = kLocalChunkBytes;
    if (c.nranks() > 1) {
      int peer = op.kind == CollKind::kAlltoAll ? (c.rank() + 1) % c.nranks() : op.peer;
      slot = op.kind == CollKind::kRecv ? c.recvConnection(peer, kP2pChannel + p.off)->slotBytes()
                                        : c.sendConnection(peer, kP2pChannel + p.off)->slotBytes();
    }
    p.direct(slot);
  } else {
    p.ring(a);
  }
}

}  // namespace loom
