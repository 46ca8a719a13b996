// One rank of a multi-process collective test, spawned by tests/coll/process_coll_test.cc:
//
//   loom_coll_rank SCENARIO NRANKS RANK ID
//
// ID is the hex unique id. The transport comes from the environment (LOOM_TRANSPORT).
// Scenarios: allreduce, allgather, broadcast, alltoall, reducescatter, reduce, ring (send/recv
// to the next rank, receive from the previous one, in a group), or all of them ("all").
// Prints "ok" and exits 0 when every result is right; else prints "fail <what>" and exits 1.
// "until-error": AllReduces of 8 floats until one fails (a peer killed by the test),
// printing "running" after the first 200; prints "error <code>: <message>" and exits 10 +
// code. "until-error-large": the same with 4 MiB (the general path, several steps).
// "ring-repeated": one 64 KiB ring shift 40 times (not part of "all"). "exchange-repeated":
// an 8 KiB AllReduce 40 times, out of place and in place in turn (not part of "all").
// "streams-p2p": receives from every peer posted on one host stream before the sends on
// another, an AllReduce on a third, every result checked. "streams-until-error": such rounds
// (receives first) until one fails, printing "running" after the first 50, then as
// "until-error".
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "loom/loom.h"
#include "src/exec/cpu/exchange_now.h"
#include "tests/coll/coll_case.h"
#include "tests/coll/rank_process.h"
#include "tests/test_util.h"
#include "transports/shm/direct_read.h"

namespace {

using namespace loom::colltest;

// One case on this rank, its result checked.
void runCase(const Case& c, loomComm_t comm, int n, int rank) {
  RankData d(c, n, rank);
  check(d.setup(comm), "setup " + describe(c, n), comm);
  check(d.issue(comm, nullptr), describe(c, n), comm);
  std::string err = d.verify();
  if (!err.empty()) fail(err);
  check(d.teardown(comm), "teardown " + describe(c, n), comm);
}

// Every type (and a few ops) of one collective at counts 1, 7, 4099, cycling placements.
// AllReduce also at 30011 (prime): between 2 processes the exchange carries it up to float32
// (in place through the peer's slot, from 3 processes through the staging region: planner.cc),
// the ring 8-byte types; from 3 ranks the ring carries every type but the 8-bit ones.
// Broadcast and Reduce also at 300007 (prime): at
// least 4 pieces of 64 KiB for every type, so the chain goes in pieces between processes
// (planner.cc); Broadcast's does with more ranks than CPUs too, where Reduce's goes whole.
// AllGather also at 65537 (prime): at least 64 KiB a rank for every type, so from 3 processes
// with more ranks than CPUs it goes in one exchange with staged sends (planner_state.cc).
void collective(Kind kind, loomComm_t comm, int n, int rank) {
  const Op ops[] = {Op::kSum, Op::kAvg, Op::kMax, Op::kPreMulDev};
  const bool chain = kind == Kind::kBroadcast || kind == Kind::kReduce;
  const std::vector<size_t> counts =
      kind == Kind::kAllReduce   ? std::vector<size_t>{1, 7, 4099, 30011}
      : chain                    ? std::vector<size_t>{1, 7, 4099, 300007}
      : kind == Kind::kAllGather ? std::vector<size_t>{1, 7, 4099, 65537}
                                 : std::vector<size_t>{1, 7, 4099};
  int index = 0;
  for (loomDataType_t t : allTypes()) {
    for (Op op : ops) {
      if (!reduces(kind) && op != Op::kSum) continue;
      for (size_t count : counts) {
        Case c;
        c.kind = kind;
        c.type = t;
        c.op = op;
        c.count = count;
        c.root = (index / 5) % n;
        c.salt = 20000 + index;
        const int placement = index++ % 5;
        c.inPlace = placement == 1 || placement == 3;
        c.sendOffset = placement == 2 ? 1 : 0;
        c.recvOffset = placement == 2 ? 3 : placement == 3 ? 5 : 0;
        runCase(c, comm, n, rank);
      }
    }
  }
}

// One ring shift of `count` elements of `t` in a group, checked.
void ringOnce(loomComm_t comm, int n, int rank, loomDataType_t t, size_t count, uint32_t salt) {
  const int next = (rank + 1) % n, prev = (rank + n - 1) % n;
  const size_t elem = typeInfo(t).size;
  Buffer send(count * elem, salt % 2), recv(count * elem, salt % 3);
  auto value = [&](int who, size_t i) {
    return encodeValue(t, inputValue(t, Op::kMax, who, i, salt));
  };
  for (size_t i = 0; i < count; ++i) storeBits(send.data() + i * elem, elem, value(rank, i));
  check(loomGroupStart(), "loomGroupStart", nullptr);
  if (rank % 2 == 0) check(loomSend(send.data(), count, t, next, comm, nullptr), "send", comm);
  check(loomRecv(recv.data(), count, t, prev, comm, nullptr), "recv", comm);
  if (rank % 2 == 1) check(loomSend(send.data(), count, t, next, comm, nullptr), "send", comm);
  check(loomGroupEnd(), "loomGroupEnd", comm);
  std::string where = std::string("ring ") + typeInfo(t).name + " count " + std::to_string(count) +
                      " salt " + std::to_string(salt) + " rank " + std::to_string(rank);
  std::string err = recv.checkGuards() + send.checkGuards();
  if (err.empty())
    err = compareElements(
        t, recv.data(), count, [&](size_t i) { return value(prev, i); }, "recvbuff");
  if (!err.empty()) fail(where + ": " + err);
}

void ring(loomComm_t comm, int n, int rank) {
  uint32_t salt = 30000;
  for (loomDataType_t t : allTypes())
    for (size_t count : {0, 1, 7, 4099, 100003}) ringOnce(comm, n, rank, t, count, ++salt);
}

// The same 64 KiB shift 40 times, new data each time: enough calls for the CMA policy's
// warm-up to pull some of them (shm_way_policy.h) and take the faster way after.
// Prints how many of them this rank pulled ("cma-reads N").
void ringRepeated(loomComm_t comm, int n, int rank) {
  for (uint32_t call = 0; call < 40; ++call)
    ringOnce(comm, n, rank, loomFloat32, 16384, 40000 + call);
  std::printf("cma-reads %llu\n", static_cast<unsigned long long>(
                                      loom::transport::shm::testing::cmaReadsInThisProcess()));
}

// An AllReduce of 8 KiB (one slot of the "cma" runs' 64 KiB rings: the exchange's fast path,
// exchange_now.h) 40 times, out of place and in place in turn, every result checked. Prints how
// many steps this rank pulled and how many calls took the fast path ("cma-reads N fast M"): the
// fast path moves its steps as the way policy says, as the general path does.
void exchangeRepeated(loomComm_t comm, int n, int rank) {
  for (uint32_t call = 0; call < 40; ++call) {
    Case c;
    c.count = 2048;
    c.inPlace = call % 2 == 1;
    c.salt = 50000 + call;
    runCase(c, comm, n, rank);
  }
  std::printf(
      "cma-reads %llu fast %llu\n",
      static_cast<unsigned long long>(loom::transport::shm::testing::cmaReadsInThisProcess()),
      static_cast<unsigned long long>(loom::testing::exchangeNowCallsOnThisThread()));
}

// Element i of a round's message src -> dst.
int32_t p2pValue(int src, int dst, int round, size_t i) {
  return static_cast<int32_t>(
      (static_cast<uint32_t>(src + 1) * 1000003u) ^ (static_cast<uint32_t>(dst + 1) * 7919u) ^
      (static_cast<uint32_t>(round) * 104729u) ^ (static_cast<uint32_t>(i) * 2654435761u));
}

// Three host streams of one communicator, destroyed (synchronized) at the end.
struct RankStreams {
  explicit RankStreams(loomComm_t comm) : comm(comm) {
    for (loomStream_t& s : streams) check(loomStreamCreate(comm, &s), "loomStreamCreate", comm);
  }
  ~RankStreams() {
    for (loomStream_t s : streams) loomStreamDestroy(s);
  }
  // Waits for every stream, even after one failed: the others may still be running operations
  // on the caller's buffers. Returns the first error.
  loomResult_t synchronize() {
    loomResult_t first = loomSuccess;
    for (loomStream_t s : streams) {
      const loomResult_t r = loomStreamSynchronize(s);
      if (first == loomSuccess) first = r;
    }
    return first;
  }
  loomComm_t comm;
  loomStream_t streams[3] = {};
};

// One round: receives from every peer on stream 0, then an AllReduce on stream 2, then the
// sends on stream 1. Returns the first error; checks every result when `verify`.
loomResult_t p2pRound(RankStreams& rs, int n, int rank, int round, size_t count, bool verify) {
  loomComm_t comm = rs.comm;
  std::vector<std::vector<int32_t>> in(n), out(n);
  std::vector<int32_t> sum(count);
  for (size_t i = 0; i < count; ++i) sum[i] = p2pValue(rank, rank, round, i) % 1000;
  for (int p = 0; p < n; ++p) {
    if (p == rank) continue;
    in[p].assign(count, -1);
    out[p].resize(count);
    for (size_t i = 0; i < count; ++i) out[p][i] = p2pValue(rank, p, round, i);
  }
  auto post = [&]() -> loomResult_t {
    for (int p = 0; p < n; ++p) {
      if (p == rank) continue;
      loomResult_t r = loomRecv(in[p].data(), count, loomInt32, p, comm, rs.streams[0]);
      if (r != loomSuccess) return r;
    }
    loomResult_t r =
        loomAllReduce(sum.data(), sum.data(), count, loomInt32, loomSum, comm, rs.streams[2]);
    if (r != loomSuccess) return r;
    for (int p = 0; p < n; ++p) {
      if (p == rank) continue;
      r = loomSend(out[p].data(), count, loomInt32, p, comm, rs.streams[1]);
      if (r != loomSuccess) return r;
    }
    return loomSuccess;
  };
  const loomResult_t posted = post();
  // The buffers must outlive the operations. A stream's error is the operation's own; a post
  // after it may only see that the communicator failed.
  const loomResult_t synced = rs.synchronize();
  const loomResult_t r = synced != loomSuccess ? synced : posted;
  if (r != loomSuccess || !verify) return r;
  const std::string where = "round " + std::to_string(round) + " count " + std::to_string(count);
  for (int p = 0; p < n; ++p) {
    if (p == rank) continue;
    for (size_t i = 0; i < count; ++i)
      if (in[p][i] != p2pValue(p, rank, round, i))
        fail(where + ": element " + std::to_string(i) + " from rank " + std::to_string(p) + " is " +
             std::to_string(in[p][i]));
  }
  for (size_t i = 0; i < count; ++i) {
    int32_t want = 0;
    for (int q = 0; q < n; ++q) want += p2pValue(q, q, round, i) % 1000;
    if (sum[i] != want)
      fail(where + ": AllReduce element " + std::to_string(i) + " is " + std::to_string(sum[i]) +
           ", expected " + std::to_string(want));
  }
  return loomSuccess;
}

void streamsP2p(loomComm_t comm, int n, int rank) {
  RankStreams rs(comm);
  int round = 0;
  for (size_t count : {1, 7, 4099, 100003, 1000003})
    check(p2pRound(rs, n, rank, round++, count, true), "streams-p2p", comm);
}

int streamsUntilError(loomComm_t comm, int n, int rank) {
  RankStreams rs(comm);
  for (int round = 1;; ++round) {
    const loomResult_t r = p2pRound(rs, n, rank, round, 4099, false);
    if (r != loomSuccess) {
      std::printf("error %d: %s\n", static_cast<int>(r), loomGetLastError(comm));
      std::fflush(stdout);
      return 10 + static_cast<int>(r);
    }
    if (round == 50) {
      std::printf("running\n");
      std::fflush(stdout);
    }
  }
}

// Returns the exit code: 10 + the first error's code.
int allReduceUntilError(loomComm_t comm, size_t count) {
  std::vector<float> in(count, 1.0f), out(count);
  for (uint64_t call = 1;; ++call) {
    const loomResult_t r =
        loomAllReduce(in.data(), out.data(), count, loomFloat32, loomSum, comm, nullptr);
    if (r != loomSuccess) {
      std::printf("error %d: %s\n", static_cast<int>(r), loomGetLastError(comm));
      std::fflush(stdout);
      return 10 + static_cast<int>(r);
    }
    if (call == 200) {
      std::printf("running\n");
      std::fflush(stdout);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: %s SCENARIO NRANKS RANK ID\n", argv[0]);
    return 2;
  }
  const std::string scenario = argv[1];
  const int n = std::atoi(argv[2]), rank = std::atoi(argv[3]);
  loomUniqueId id = loom::test::idFromHex(argv[4]);
  loomComm_t comm = nullptr;
  check(loomCommInitRank(&comm, n, id, rank), "loomCommInitRank", nullptr);
  if (scenario == "until-error") return allReduceUntilError(comm, 8);
  if (scenario == "until-error-large") return allReduceUntilError(comm, size_t{1} << 20);
  if (scenario == "streams-until-error") return streamsUntilError(comm, n, rank);
  const bool all = scenario == "all";
  bool known = false;
  auto run = [&](const char* name, auto body) {
    if (!all && scenario != name) return;
    known = true;
    body();
  };
  run("allreduce", [&] { collective(Kind::kAllReduce, comm, n, rank); });
  run("allgather", [&] { collective(Kind::kAllGather, comm, n, rank); });
  run("broadcast", [&] { collective(Kind::kBroadcast, comm, n, rank); });
  run("alltoall", [&] { collective(Kind::kAlltoAll, comm, n, rank); });
  run("reducescatter", [&] { collective(Kind::kReduceScatter, comm, n, rank); });
  run("reduce", [&] { collective(Kind::kReduce, comm, n, rank); });
  run("ring", [&] { ring(comm, n, rank); });
  if (scenario == "ring-repeated") {  // not part of "all"
    known = true;
    ringRepeated(comm, n, rank);
  }
  if (scenario == "exchange-repeated") {  // not part of "all"
    known = true;
    exchangeRepeated(comm, n, rank);
  }
  if (scenario == "streams-p2p") {  // not part of "all"
    known = true;
    streamsP2p(comm, n, rank);
  }
  if (!known) fail("unknown scenario " + scenario);
  check(loomCommFinalize(comm), "loomCommFinalize", comm);
  check(loomCommDestroy(comm), "loomCommDestroy", nullptr);
  std::printf("ok\n");
  return 0;
}
