#include "perf/harness/p2p_compose.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <vector>

#include "perf/harness/datatypes.h"

namespace loomperf {
namespace {

// Per-communicator scratch for received partial results. Grown by the first (largest,
// warm-up) call and reused after, so measured calls never allocate.
char* scratch(loomComm_t comm, size_t bytes) {
  static std::mutex mu;
  static std::map<loomComm_t, std::unique_ptr<std::vector<char>>> buffers;
  std::lock_guard lock(mu);
  auto& b = buffers[comm];
  if (!b) b = std::make_unique<std::vector<char>>();
  if (b->size() < bytes) b->resize(bytes);
  return b->data();
}

template <typename T>
void addTyped(void* dst, const void* a, const void* b, size_t n) {
  auto* d = static_cast<T*>(dst);
  const auto* x = static_cast<const T*>(a);
  const auto* y = static_cast<const T*>(b);
  for (size_t i = 0; i < n; ++i) d[i] = static_cast<T>(x[i] + y[i]);
}

// dst = a + b, element-wise; dst may alias a or b.
void add(loomDataType_t type, void* dst, const void* a, const void* b, size_t n) {
  switch (type) {
    case loomInt8:
      return addTyped<int8_t>(dst, a, b, n);
    case loomUint8:
      return addTyped<uint8_t>(dst, a, b, n);
    case loomInt32:
      return addTyped<int32_t>(dst, a, b, n);
    case loomUint32:
      return addTyped<uint32_t>(dst, a, b, n);
    case loomInt64:
      return addTyped<int64_t>(dst, a, b, n);
    case loomUint64:
      return addTyped<uint64_t>(dst, a, b, n);
    case loomFloat32:
      return addTyped<float>(dst, a, b, n);
    case loomFloat64:
      return addTyped<double>(dst, a, b, n);
    default:
      throw std::invalid_argument("composed reductions support integer, float and double");
  }
}

// The context every composed call shares.
struct Ctx {
  loomDataType_t type;
  size_t es;
  const CallSite& site;
  loomComm_t comm;
  loomStream_t stream;
  int next() const { return (site.rank + 1) % site.nranks; }
  int prev() const { return (site.rank - 1 + site.nranks) % site.nranks; }
  char* at(void* p, size_t elems) const { return static_cast<char*>(p) + elems * es; }
  const char* at(const void* p, size_t elems) const {
    return static_cast<const char*>(p) + elems * es;
  }
};

// Waits for a group's transfers when running on a host stream: the next step reads them.
loomResult_t finish(const Ctx& c, loomResult_t r) {
  if (r == loomSuccess && c.stream != nullptr) r = loomStreamSynchronize(c.stream);
  return r;
}

// One ring step: send `scount` elements to the next rank while receiving from the previous.
loomResult_t exchange(const Ctx& c, const void* s, size_t scount, int to, void* r, size_t rcount,
                      int from) {
  loomResult_t res = loomGroupStart();
  if (res != loomSuccess) return res;
  if (scount > 0) res = loomSend(s, scount, c.type, to, c.comm, c.stream);
  if (res == loomSuccess && rcount > 0) res = loomRecv(r, rcount, c.type, from, c.comm, c.stream);
  loomResult_t end = loomGroupEnd();
  return finish(c, res != loomSuccess ? res : end);
}

// Block b of `count` elements split n ways (the last blocks take the remainder).
size_t blockStart(size_t count, int n, int b) { return count * b / n; }
size_t blockSize(size_t count, int n, int b) {
  return blockStart(count, n, b + 1) - blockStart(count, n, b);
}

// Ring ReduceScatter over `count` elements in n blocks: rank r ends with the sum of block r in
// `outBlock`. Step s forwards the partial sum of block r-1-s and adds what arrives for r-2-s.
loomResult_t ringReduceScatter(const Ctx& c, const void* in, void* outBlock, size_t count) {
  const int n = c.site.nranks, r = c.site.rank;
  if (n == 1) {
    if (outBlock != in) std::memmove(outBlock, in, count * c.es);
    return loomSuccess;
  }
  size_t maxBlock = blockSize(count, n, n - 1);
  char* cur = scratch(c.comm, 2 * maxBlock * c.es);
  char* tmp = cur + maxBlock * c.es;
  for (int s = 0; s < n - 1; ++s) {
    int sendB = (r - 1 - s + 2 * n) % n, recvB = (r - 2 - s + 2 * n) % n;
    const void* src = s == 0 ? c.at(in, blockStart(count, n, sendB)) : cur;
    loomResult_t res = exchange(c, src, blockSize(count, n, sendB), c.next(), tmp,
                                blockSize(count, n, recvB), c.prev());
    if (res != loomSuccess) return res;
    void* dst = s == n - 2 ? outBlock : cur;
    add(c.type, dst, c.at(in, blockStart(count, n, recvB)), tmp, blockSize(count, n, recvB));
  }
  return loomSuccess;
}

// Ring AllGather in place over `buf` (block r already there): step s passes on block r-s.
loomResult_t ringAllGather(const Ctx& c, void* buf, size_t count) {
  const int n = c.site.nranks, r = c.site.rank;
  for (int s = 0; s < n - 1; ++s) {
    int sendB = (r - s + n) % n, recvB = (r - s - 1 + n) % n;
    loomResult_t res =
        exchange(c, c.at(buf, blockStart(count, n, sendB)), blockSize(count, n, sendB), c.next(),
                 c.at(buf, blockStart(count, n, recvB)), blockSize(count, n, recvB), c.prev());
    if (res != loomSuccess) return res;
  }
  return loomSuccess;
}

// Direct ReduceScatter: block p goes straight to rank p; each rank adds the n-1 it receives.
loomResult_t directReduceScatter(const Ctx& c, const void* in, void* outBlock, size_t count) {
  const int n = c.site.nranks, r = c.site.rank;
  const size_t mine = blockSize(count, n, r);
  char* tmp = scratch(c.comm, std::max<size_t>(mine * (n - 1), 1) * c.es);
  loomResult_t res = loomGroupStart();
  for (int p = 0, slot = 0; p < n && res == loomSuccess; ++p) {
    if (p == r) continue;
    if (blockSize(count, n, p) > 0)  // zero-size blocks are skipped on both sides
      res = loomSend(c.at(in, blockStart(count, n, p)), blockSize(count, n, p), c.type, p, c.comm,
                     c.stream);
    if (res == loomSuccess && mine > 0)
      res = loomRecv(tmp + slot * mine * c.es, mine, c.type, p, c.comm, c.stream);
    ++slot;
  }
  loomResult_t end = loomGroupEnd();
  res = finish(c, res != loomSuccess ? res : end);
  if (res != loomSuccess) return res;
  char* dst = static_cast<char*>(outBlock);
  const char* first = c.at(in, blockStart(count, n, r));
  if (n == 1) {
    if (dst != first) std::memmove(dst, first, mine * c.es);
    return loomSuccess;
  }
  add(c.type, dst, first, tmp, mine);
  for (int k = 1; k < n - 1; ++k) add(c.type, dst, dst, tmp + k * mine * c.es, mine);
  return loomSuccess;
}

// Direct AllGather in place over `buf`: every rank sends its block to every other at once.
loomResult_t directAllGather(const Ctx& c, void* buf, size_t count) {
  const int n = c.site.nranks, r = c.site.rank;
  loomResult_t res = loomGroupStart();
  for (int p = 0; p < n && res == loomSuccess; ++p) {
    if (p == r) continue;
    if (blockSize(count, n, r) > 0)
      res = loomSend(c.at(buf, blockStart(count, n, r)), blockSize(count, n, r), c.type, p, c.comm,
                     c.stream);
    if (res == loomSuccess && blockSize(count, n, p) > 0)
      res = loomRecv(c.at(buf, blockStart(count, n, p)), blockSize(count, n, p), c.type, p, c.comm,
                     c.stream);
  }
  loomResult_t end = loomGroupEnd();
  return finish(c, res != loomSuccess ? res : end);
}

// ---- The five collectives, each both ways ----------------------------------------------
template <Composition how>
loomResult_t allReduce(const void* s, void* r, size_t count, loomDataType_t type, loomRedOp_t,
                       const CallSite& site, loomComm_t comm, loomStream_t stream) {
  Ctx c{type, typeInfo(type).size, site, comm, stream};
  char* mine = c.at(r, blockStart(count, site.nranks, site.rank));
  loomResult_t res = how == Composition::kRing ? ringReduceScatter(c, s, mine, count)
                                               : directReduceScatter(c, s, mine, count);
  if (res != loomSuccess) return res;
  return how == Composition::kRing ? ringAllGather(c, r, count) : directAllGather(c, r, count);
}

template <Composition how>
loomResult_t reduceScatter(const void* s, void* r, size_t count, loomDataType_t type, loomRedOp_t,
                           const CallSite& site, loomComm_t comm, loomStream_t stream) {
  Ctx c{type, typeInfo(type).size, site, comm, stream};
  const size_t total = count * site.nranks;
  return how == Composition::kRing ? ringReduceScatter(c, s, r, total)
                                   : directReduceScatter(c, s, r, total);
}

template <Composition how>
loomResult_t allGather(const void* s, void* r, size_t count, loomDataType_t type, loomRedOp_t,
                       const CallSite& site, loomComm_t comm, loomStream_t stream) {
  Ctx c{type, typeInfo(type).size, site, comm, stream};
  char* own = c.at(r, site.rank * count);
  if (own != s) std::memmove(own, s, count * c.es);
  const size_t total = count * site.nranks;
  return how == Composition::kRing ? ringAllGather(c, r, total) : directAllGather(c, r, total);
}

template <Composition how>
loomResult_t broadcast(const void* s, void* r, size_t count, loomDataType_t type, loomRedOp_t,
                       const CallSite& site, loomComm_t comm, loomStream_t stream) {
  Ctx c{type, typeInfo(type).size, site, comm, stream};
  const int n = site.nranks, root = site.root;
  if (site.rank == root && r != s) std::memmove(r, s, count * c.es);
  if (how == Composition::kDirect) {
    loomResult_t res = loomGroupStart();
    for (int p = 0; p < n && res == loomSuccess && count > 0; ++p) {
      if (p == root || (site.rank != root && p != site.rank)) continue;
      res = site.rank == root ? loomSend(r, count, type, p, comm, stream)
                              : loomRecv(r, count, type, root, comm, stream);
    }
    loomResult_t end = loomGroupEnd();
    return finish(c, res != loomSuccess ? res : end);
  }
  // Pipelined chain root -> root+1 -> ...: in step k a rank receives chunk k and forwards
  // chunk k-1, so every link is busy once the pipe is full.
  const int pos = (site.rank - root + n) % n;
  const int chunks = static_cast<int>(std::clamp<size_t>(count * c.es / (64 << 10), 1, 16));
  for (int k = 0; k <= chunks; ++k) {
    const bool recvNow = pos > 0 && k < chunks, sendNow = pos < n - 1 && k > 0;
    const int rk = std::min(k, chunks - 1), sk = std::max(k - 1, 0);
    loomResult_t res = exchange(
        c, c.at(r, blockStart(count, chunks, sk)), sendNow ? blockSize(count, chunks, sk) : 0,
        (site.rank + 1) % n, c.at(r, blockStart(count, chunks, rk)),
        recvNow ? blockSize(count, chunks, rk) : 0, (site.rank - 1 + n) % n);
    if (res != loomSuccess) return res;
  }
  return loomSuccess;
}

template <Composition how>
loomResult_t allToAll(const void* s, void* r, size_t count, loomDataType_t type, loomRedOp_t,
                      const CallSite& site, loomComm_t comm, loomStream_t stream) {
  Ctx c{type, typeInfo(type).size, site, comm, stream};
  const int n = site.nranks, me = site.rank;
  std::memmove(c.at(r, me * count), c.at(s, me * count), count * c.es);
  if (count == 0) return loomSuccess;
  if (how == Composition::kRing) {
    for (int k = 1; k < n; ++k) {  // pairwise: send to me+k, receive from me-k
      int to = (me + k) % n, from = (me - k + n) % n;
      loomResult_t res =
          exchange(c, c.at(s, to * count), count, to, c.at(r, from * count), count, from);
      if (res != loomSuccess) return res;
    }
    return loomSuccess;
  }
  loomResult_t res = loomGroupStart();
  for (int p = 0; p < n && res == loomSuccess; ++p) {
    if (p == me) continue;
    res = loomSend(c.at(s, p * count), count, type, p, comm, stream);
    if (res == loomSuccess) res = loomRecv(c.at(r, p * count), count, type, p, comm, stream);
  }
  loomResult_t end = loomGroupEnd();
  return finish(c, res != loomSuccess ? res : end);
}

CollSpec withRun(const CollSpec& base, const char* name, decltype(CollSpec::run) run) {
  CollSpec s = base;
  s.name = name;
  s.run = run;
  return s;
}

struct Entry {
  const char* native;
  CollSpec ring, direct;
};

const std::vector<Entry>& entries() {
  static const std::vector<Entry> kEntries = {
      {"all_reduce", withRun(allReduceSpec(), "all_reduce", allReduce<Composition::kRing>),
       withRun(allReduceSpec(), "all_reduce", allReduce<Composition::kDirect>)},
      {"all_gather", withRun(allGatherSpec(), "all_gather", allGather<Composition::kRing>),
       withRun(allGatherSpec(), "all_gather", allGather<Composition::kDirect>)},
      {"broadcast", withRun(broadcastSpec(), "broadcast", broadcast<Composition::kRing>),
       withRun(broadcastSpec(), "broadcast", broadcast<Composition::kDirect>)},
      {"reduce_scatter",
       withRun(reduceScatterSpec(), "reduce_scatter", reduceScatter<Composition::kRing>),
       withRun(reduceScatterSpec(), "reduce_scatter", reduceScatter<Composition::kDirect>)},
      {"alltoall", withRun(allToAllSpec(), "alltoall", allToAll<Composition::kRing>),
       withRun(allToAllSpec(), "alltoall", allToAll<Composition::kDirect>)},
  };
  return kEntries;
}

}  // namespace

const CollSpec& composedSpec(std::string_view name, Composition how) {
  for (const Entry& e : entries())
    if (name == e.native) return how == Composition::kRing ? e.ring : e.direct;
  throw std::invalid_argument("no composed form of " + std::string(name));
}

bool composedSupports(loomDataType_t type) {
  switch (type) {
    case loomInt8:
    case loomUint8:
    case loomInt32:
    case loomUint32:
    case loomInt64:
    case loomUint64:
    case loomFloat32:
    case loomFloat64:
      return true;
    default:
      return false;
  }
}

}  // namespace loomperf
