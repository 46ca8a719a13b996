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
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "loom/loom.h"
#include "tests/coll/coll_case.h"
#include "tests/coll/rank_process.h"
#include "tests/test_util.h"

namespace {

using namespace loom::colltest;

// Every type (and a few ops) of one collective at counts 1, 7, 4099, cycling placements.
void collective(Kind kind, loomComm_t comm, int n, int rank) {
  const Op ops[] = {Op::kSum, Op::kAvg, Op::kMax, Op::kPreMulDev};
  int index = 0;
  for (loomDataType_t t : allTypes()) {
    for (Op op : ops) {
      if (!reduces(kind) && op != Op::kSum) continue;
      for (size_t count : {1, 7, 4099}) {
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
        RankData d(c, n, rank);
        check(d.setup(comm), "setup " + describe(c, n), comm);
        check(d.issue(comm, nullptr), describe(c, n), comm);
        std::string err = d.verify();
        if (!err.empty()) fail(err);
        check(d.teardown(comm), "teardown " + describe(c, n), comm);
      }
    }
  }
}

void ring(loomComm_t comm, int n, int rank) {
  const int next = (rank + 1) % n, prev = (rank + n - 1) % n;
  uint32_t salt = 30000;
  for (loomDataType_t t : allTypes()) {
    const size_t elem = typeInfo(t).size;
    for (size_t count : {0, 1, 7, 4099, 100003}) {
      ++salt;
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
      std::string where = std::string("ring ") + typeInfo(t).name + " count " +
                          std::to_string(count) + " rank " + std::to_string(rank);
      std::string err = recv.checkGuards() + send.checkGuards();
      if (err.empty())
        err = compareElements(
            t, recv.data(), count, [&](size_t i) { return value(prev, i); }, "recvbuff");
      if (!err.empty()) fail(where + ": " + err);
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
  if (!known) fail("unknown scenario " + scenario);
  check(loomCommFinalize(comm), "loomCommFinalize", comm);
  check(loomCommDestroy(comm), "loomCommDestroy", nullptr);
  std::printf("ok\n");
  return 0;
}
