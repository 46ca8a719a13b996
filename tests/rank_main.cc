// One rank of a multi-process test, spawned by tests/process_test.cc:
//
//   loom_test_rank SCENARIO NRANKS RANK ID
//
// ID is the hex unique id from the test, or "env" to call loomGetUniqueId() here (with
// LOOM_COMM_ID set: no broadcast). Prints "ok" and exits 0 on success; on failure prints
// "fail <code> <message>" and exits 10 + the loomResult_t code. Scenarios:
//   lifecycle       init, check count/rank, split (two colors, reversed keys), nested split,
//                   NOCOLOR split, finalize and destroy everything
//   init            init, then finalize and destroy
//   hosts           init, print "hosts H local L of M" (what the rank exchange found), then
//                   finalize and destroy
//   stall           init, but stop for good right after registering with the root (prints
//                   "stalled"): the test kills this process to simulate a crash
//   stall-ring      the same, once the bootstrap ring is connected (before the rank exchange)
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "loom/loom.h"
#include "src/comm/comm.h"
#include "src/net/test_hooks.h"
#include "tests/test_util.h"

namespace {

[[noreturn]] void fail(loomResult_t code, const std::string& what) {
  std::printf("fail %d %s\n", static_cast<int>(code), what.c_str());
  std::fflush(stdout);
  std::exit(10 + static_cast<int>(code));
}

void check(loomResult_t r, const char* what, loomComm_t comm) {
  if (r != loomSuccess) fail(r, std::string(what) + ": " + loomGetLastError(comm));
}

void expectEq(int got, int want, const char* what) {
  if (got != want)
    fail(loomInternalError,
         std::string(what) + ": got " + std::to_string(got) + ", want " + std::to_string(want));
}

void lifecycle(loomComm_t comm, int nranks, int rank) {
  int count = -1, me = -1;
  check(loomCommCount(comm, &count), "loomCommCount", comm);
  check(loomCommUserRank(comm, &me), "loomCommUserRank", comm);
  expectEq(count, nranks, "count");
  expectEq(me, rank, "rank");

  // Two colors; keys reversed, so new ranks count down within each color.
  loomComm_t half = nullptr;
  check(loomCommSplit(comm, rank % 2, -rank, &half, nullptr), "loomCommSplit", comm);
  int halfSize = (nranks + 1 - rank % 2) / 2;
  check(loomCommCount(half, &count), "count(half)", half);
  check(loomCommUserRank(half, &me), "rank(half)", half);
  expectEq(count, halfSize, "half count");
  expectEq(me, halfSize - 1 - rank / 2, "half rank");

  // Nested: split the half again, everyone in one color ordered by key = old rank.
  loomComm_t nested = nullptr;
  check(loomCommSplit(half, 7, me, &nested, nullptr), "nested loomCommSplit", half);
  int nestedRank = -1;
  check(loomCommUserRank(nested, &nestedRank), "rank(nested)", nested);
  expectEq(nestedRank, me, "nested rank");

  // Only rank 0 joins; everyone else passes NOCOLOR and gets NULL.
  loomComm_t solo = nullptr;
  check(loomCommSplit(comm, rank == 0 ? 0 : LOOM_SPLIT_NOCOLOR, 0, &solo, nullptr),
        "NOCOLOR loomCommSplit", comm);
  if ((rank == 0) != (solo != nullptr)) fail(loomInternalError, "NOCOLOR split handle");

  for (loomComm_t c : {solo, nested, half, comm}) {
    if (c == nullptr) continue;
    check(loomCommFinalize(c), "loomCommFinalize", c);
    check(loomCommDestroy(c), "loomCommDestroy", c);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: %s SCENARIO NRANKS RANK ID|env\n", argv[0]);
    return 2;
  }
  std::string scenario = argv[1];
  int nranks = std::atoi(argv[2]);
  int rank = std::atoi(argv[3]);
  std::string idText = argv[4];
  loomUniqueId id;
  if (idText == "env") {
    check(loomGetUniqueId(&id), "loomGetUniqueId", nullptr);
  } else {
    id = loom::test::idFromHex(idText);
  }
  if (scenario == "stall" || scenario == "stall-ring") {
    std::string at = scenario == "stall" ? "root_registered" : "bootstrap_ready";
    loom::testing::setInitStageHook([at](int, const std::string& stage) {
      if (stage != at) return;
      std::printf("stalled\n");
      std::fflush(stdout);
      for (;;) pause();  // the test kills us here
    });
  }
  loomComm_t comm = nullptr;
  check(loomCommInitRank(&comm, nranks, id, rank), "loomCommInitRank", nullptr);
  if (scenario == "lifecycle") {
    lifecycle(comm, nranks, rank);
  } else {
    if (scenario == "hosts") {
      // Internal view: the C handle is a loom::Comm.
      auto* c = static_cast<loom::Comm*>(comm);
      std::printf("hosts %d local %d of %d\n", c->hostCount(), c->localRank(), c->localRanks());
    }
    check(loomCommFinalize(comm), "loomCommFinalize", comm);
    check(loomCommDestroy(comm), "loomCommDestroy", comm);
  }
  std::printf("ok\n");
  return 0;
}
