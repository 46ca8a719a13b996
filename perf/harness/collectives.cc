#include "perf/harness/collectives.h"

#include <array>

#include "perf/harness/datatypes.h"

namespace loomperf {
namespace {

char* at(void* buf, size_t elems, loomDataType_t type) {
  return static_cast<char*>(buf) + elems * typeInfo(type).size;
}
const char* at(const void* buf, size_t elems, loomDataType_t type) {
  return static_cast<const char*>(buf) + elems * typeInfo(type).size;
}
double gbps(double bytes, double seconds) { return seconds > 0 ? bytes / 1.0e9 / seconds : 0; }

// ---- Counts (nccl-tests' getCollByteCount) ------------------------------------------------
CollCounts sameCounts(size_t count, int) { return {count, count, count, 0, 0}; }
// Each rank contributes count/n elements and receives all of them (AllGather, Gather).
CollCounts gatherCounts(size_t count, int n) {
  size_t base = count / n;
  return {base, base * n, base, base, 0};
}
// Each rank sends n blocks of count/n and keeps one (ReduceScatter, Scatter).
CollCounts scatterCounts(size_t count, int n) {
  size_t base = count / n;
  return {base * n, base, base, 0, base};
}
CollCounts allToAllCounts(size_t count, int n) {
  size_t base = count / n;
  return {base * n, base * n, base, 0, 0};
}

// ---- Bandwidth (nccl-tests' getBw) ---------------------------------------------------------
Bandwidth allReduceBw(size_t count, size_t ts, double sec, int n) {
  double alg = gbps(static_cast<double>(count * ts), sec);
  return {alg, alg * 2.0 * (n - 1) / n};
}
// The whole nranks * count buffer moves; each rank already has 1/n of it.
Bandwidth perRankBlocksBw(size_t count, size_t ts, double sec, int n) {
  double alg = gbps(static_cast<double>(count * ts) * n, sec);
  return {alg, alg * (n - 1) / n};
}
Bandwidth rootedBw(size_t count, size_t ts, double sec, int) {
  double alg = gbps(static_cast<double>(count * ts), sec);
  return {alg, alg};
}

// ---- Calls -------------------------------------------------------------------------------
loomResult_t runAllReduce(const void* s, void* r, size_t count, loomDataType_t type, loomRedOp_t op,
                          const CallSite&, loomComm_t comm, loomStream_t st) {
  return loomAllReduce(s, r, count, type, op, comm, st);
}
loomResult_t runAllGather(const void* s, void* r, size_t count, loomDataType_t type, loomRedOp_t,
                          const CallSite&, loomComm_t comm, loomStream_t st) {
  return loomAllGather(s, r, count, type, comm, st);
}
loomResult_t runReduceScatter(const void* s, void* r, size_t count, loomDataType_t type,
                              loomRedOp_t op, const CallSite&, loomComm_t comm, loomStream_t st) {
  return loomReduceScatter(s, r, count, type, op, comm, st);
}
loomResult_t runBroadcast(const void* s, void* r, size_t count, loomDataType_t type, loomRedOp_t,
                          const CallSite& site, loomComm_t comm, loomStream_t st) {
  return loomBroadcast(s, r, count, type, site.root, comm, st);
}
loomResult_t runReduce(const void* s, void* r, size_t count, loomDataType_t type, loomRedOp_t op,
                       const CallSite& site, loomComm_t comm, loomStream_t st) {
  return loomReduce(s, r, count, type, op, site.root, comm, st);
}
loomResult_t runAllToAll(const void* s, void* r, size_t count, loomDataType_t type, loomRedOp_t,
                         const CallSite&, loomComm_t comm, loomStream_t st) {
  return loomAlltoAll(s, r, count, type, comm, st);
}

// Runs `body` inside a group; the group's result wins unless the body failed first.
template <typename Body>
loomResult_t grouped(Body body) {
  loomResult_t res = loomGroupStart();
  if (res != loomSuccess) return res;
  loomResult_t inner = body();
  loomResult_t end = loomGroupEnd();
  return inner != loomSuccess ? inner : end;
}

// Ring shift, as nccl-tests' sendrecv: send to the next rank, receive from the previous one.
loomResult_t runSendRecv(const void* s, void* r, size_t count, loomDataType_t type, loomRedOp_t,
                         const CallSite& site, loomComm_t comm, loomStream_t st) {
  int next = (site.rank + 1) % site.nranks, prev = (site.rank - 1 + site.nranks) % site.nranks;
  return grouped([&] {
    loomResult_t res = loomSend(s, count, type, next, comm, st);
    return res != loomSuccess ? res : loomRecv(r, count, type, prev, comm, st);
  });
}
// Gather and Scatter from point-to-point calls, as nccl-tests builds them.
loomResult_t runGather(const void* s, void* r, size_t count, loomDataType_t type, loomRedOp_t,
                       const CallSite& site, loomComm_t comm, loomStream_t st) {
  return grouped([&] {
    loomResult_t res = loomSend(s, count, type, site.root, comm, st);
    for (int p = 0; p < site.nranks && res == loomSuccess && site.rank == site.root; ++p)
      res = loomRecv(at(r, p * count, type), count, type, p, comm, st);
    return res;
  });
}
loomResult_t runScatter(const void* s, void* r, size_t count, loomDataType_t type, loomRedOp_t,
                        const CallSite& site, loomComm_t comm, loomStream_t st) {
  return grouped([&] {
    loomResult_t res = loomSuccess;
    for (int p = 0; p < site.nranks && res == loomSuccess && site.rank == site.root; ++p)
      res = loomSend(at(s, p * count, type), count, type, p, comm, st);
    return res != loomSuccess ? res : loomRecv(r, count, type, site.root, comm, st);
  });
}

// ---- Data --------------------------------------------------------------------------------
// Inputs are indexed over the logical send buffer so that blocks stay distinguishable.
void inputWhole(const Pattern& p, const CallSite& s, const CollCounts& c, void* send) {
  p.fillInput(s.rank, 0, c.sendCount, send);
}
// A rank's single block of a gathered buffer is its own slice rank * count of the index space.
void inputOwnBlock(const Pattern& p, const CallSite& s, const CollCounts& c, void* send) {
  p.fillInput(s.rank, s.rank * c.paramCount, c.paramCount, send);
}

bool expectReduced(const Pattern& p, const CallSite&, const CollCounts& c, void* want) {
  p.fillReduced(0, c.recvCount, want);
  return true;
}
bool expectReducedOnRoot(const Pattern& p, const CallSite& s, const CollCounts& c, void* want) {
  if (s.rank != s.root) return false;
  return expectReduced(p, s, c, want);
}
bool expectReducedBlock(const Pattern& p, const CallSite& s, const CollCounts& c, void* want) {
  p.fillReduced(s.rank * c.paramCount, c.paramCount, want);
  return true;
}
bool expectEveryBlock(const Pattern& p, const CallSite& s, const CollCounts& c, void* want) {
  for (int q = 0; q < s.nranks; ++q) {
    char* dst = static_cast<char*>(want) + q * c.paramCount * p.elemSize();
    p.fillInput(q, q * c.paramCount, c.paramCount, dst);
  }
  return true;
}
bool expectEveryBlockOnRoot(const Pattern& p, const CallSite& s, const CollCounts& c, void* want) {
  if (s.rank != s.root) return false;
  return expectEveryBlock(p, s, c, want);
}
bool expectRootData(const Pattern& p, const CallSite& s, const CollCounts& c, void* want) {
  p.fillInput(s.root, 0, c.recvCount, want);
  return true;
}
bool expectRootBlock(const Pattern& p, const CallSite& s, const CollCounts& c, void* want) {
  p.fillInput(s.root, s.rank * c.paramCount, c.paramCount, want);
  return true;
}
// Block q of rank r's result is block r of rank q's input.
bool expectTransposed(const Pattern& p, const CallSite& s, const CollCounts& c, void* want) {
  for (int q = 0; q < s.nranks; ++q) {
    char* dst = static_cast<char*>(want) + q * c.paramCount * p.elemSize();
    p.fillInput(q, s.rank * c.paramCount, c.paramCount, dst);
  }
  return true;
}
bool expectFromPrevious(const Pattern& p, const CallSite& s, const CollCounts& c, void* want) {
  p.fillInput((s.rank - 1 + s.nranks) % s.nranks, 0, c.recvCount, want);
  return true;
}

const CollSpec kSpecs[] = {
    {"all_reduce", true, false, sameCounts, allReduceBw, runAllReduce, inputWhole, expectReduced},
    {"all_gather", false, false, gatherCounts, perRankBlocksBw, runAllGather, inputOwnBlock,
     expectEveryBlock},
    {"reduce_scatter", true, false, scatterCounts, perRankBlocksBw, runReduceScatter, inputWhole,
     expectReducedBlock},
    {"broadcast", false, true, sameCounts, rootedBw, runBroadcast, inputWhole, expectRootData},
    {"reduce", true, true, sameCounts, rootedBw, runReduce, inputWhole, expectReducedOnRoot},
    {"alltoall", false, false, allToAllCounts, perRankBlocksBw, runAllToAll, inputWhole,
     expectTransposed},
    {"sendrecv", false, false, sameCounts, rootedBw, runSendRecv, inputWhole, expectFromPrevious},
    {"gather", false, true, gatherCounts, perRankBlocksBw, runGather, inputOwnBlock,
     expectEveryBlockOnRoot},
    {"scatter", false, true, scatterCounts, perRankBlocksBw, runScatter, inputWhole,
     expectRootBlock},
};

}  // namespace

const CollSpec& allReduceSpec() { return kSpecs[0]; }
const CollSpec& allGatherSpec() { return kSpecs[1]; }
const CollSpec& reduceScatterSpec() { return kSpecs[2]; }
const CollSpec& broadcastSpec() { return kSpecs[3]; }
const CollSpec& reduceSpec() { return kSpecs[4]; }
const CollSpec& allToAllSpec() { return kSpecs[5]; }
const CollSpec& sendRecvSpec() { return kSpecs[6]; }
const CollSpec& gatherSpec() { return kSpecs[7]; }
const CollSpec& scatterSpec() { return kSpecs[8]; }

const CollSpec* collSpecByName(std::string_view name) {
  for (const CollSpec& s : kSpecs)
    if (name == s.name) return &s;
  return nullptr;
}

}  // namespace loomperf
