// One rank of the fault-propagation tests (tests/fault_propagation_test.cc):
//
//   loom_fault_test_rank SCENARIO NRANKS RANK ID VICTIM [RELAY_PAUSE_MS]
//
// RELAY_PAUSE_MS pauses the control channel after each frame it sends to several ranks, as a
// loaded machine may (src/net/test_hooks.h).
// The victim prints "stalled" at the scenario's point and waits to be killed (SIGKILL), or
// aborts. Every other rank prints "fail <code> <rank> <message>" and exits 10 + code when its
// call fails, where <rank> is the rank its communicator's failure names (-1: none), or "ok"
// (exit 0) if nothing failed. Scenarios:
//   init     the victim stops once the bootstrap ring and control channel are up
//   traffic  AllReduce in a loop; after 20 the victim stops and the rank after it goes idle
//            (it waits for loomCommGetAsyncError to report the failure, then calls)
//   recv     V = victim: rank V+3 receives from rank V+2, which idles, as does rank V+1
//   split    the others split off a child without the victim and run AllReduce on the child
//   abort    the victim calls loomCommAbort; the others call AllReduce
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "loom/loom.h"
#include "src/comm/comm.h"
#include "src/net/test_hooks.h"
#include "tests/test_util.h"

namespace {

int failedRank(loomComm_t comm) {
  if (comm == nullptr) return -1;
  const loom::Interrupt* failure = static_cast<loom::Comm*>(comm)->abortFlag()->failure();
  return failure != nullptr ? failure->rank() : -1;
}

[[noreturn]] void report(loomResult_t code, loomComm_t comm, const std::string& what) {
  std::printf("fail %d %d %s\n", static_cast<int>(code), failedRank(comm), what.c_str());
  std::fflush(stdout);
  std::_Exit(10 + static_cast<int>(code));
}

void check(loomResult_t r, const char* what, loomComm_t comm) {
  if (r != loomSuccess) report(r, comm, std::string(what) + ": " + loomGetLastError(comm));
}

[[noreturn]] void stall() {
  std::printf("stalled\n");
  std::fflush(stdout);
  for (;;) pause();  // the test kills us here
}

// One AllReduce of rank-dependent integers whose sum is exact; fails the process if wrong.
void allReduce(loomComm_t comm, int rank, int nranks) {
  constexpr size_t kCount = 4096;
  std::vector<float> data(kCount, static_cast<float>(rank + 1));
  check(loomAllReduce(data.data(), data.data(), kCount, loomFloat32, loomSum, comm, nullptr),
        "loomAllReduce", comm);
  const float want = static_cast<float>(nranks * (nranks + 1) / 2);
  for (float v : data)
    if (v != want) report(loomInternalError, comm, "wrong AllReduce result");
}

// Waits (bounded) for the communicator to report the failure, then makes a call.
void idleThenCall(loomComm_t comm, int rank, int nranks) {
  loomResult_t state = loomSuccess;
  for (int i = 0; i < 3000 && state == loomSuccess; ++i) {
    check(loomCommGetAsyncError(comm, &state), "loomCommGetAsyncError", comm);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (state != loomRemoteError)
    report(state == loomSuccess ? loomInternalError : state, comm,
           "loomCommGetAsyncError did not report the failure");
  allReduce(comm, rank, nranks);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 6 && argc != 7) {
    std::fprintf(stderr, "usage: %s SCENARIO NRANKS RANK ID VICTIM [RELAY_PAUSE_MS]\n", argv[0]);
    return 2;
  }
  const std::string scenario = argv[1];
  const int n = std::atoi(argv[2]);
  const int rank = std::atoi(argv[3]);
  const loomUniqueId id = loom::test::idFromHex(argv[4]);
  const int victim = std::atoi(argv[5]);
  if (argc == 7) loom::testing::setControlRelayPauseMs(std::atoi(argv[6]));
  if (scenario == "init" && rank == victim) {
    loom::testing::setInitStageHook([](int, const std::string& stage) {
      if (stage == "bootstrap_ready") stall();
    });
  }
  loomComm_t comm = nullptr;
  check(loomCommInitRank(&comm, n, id, rank), "loomCommInitRank", nullptr);
  allReduce(comm, rank, n);
  if (scenario == "traffic") {
    for (int i = 0; i < 20; ++i) allReduce(comm, rank, n);
    if (rank == victim) stall();
    if (rank == (victim + 1) % n) idleThenCall(comm, rank, n);
    for (int i = 0; i < 100000; ++i) allReduce(comm, rank, n);
  } else if (scenario == "recv") {
    if (rank == victim) stall();
    const int receiver = (victim + 3) % n, sender = (victim + 2) % n;
    if (rank == receiver) {
      std::vector<float> in(1024);
      check(loomRecv(in.data(), in.size(), loomFloat32, sender, comm, nullptr), "loomRecv", comm);
      report(loomInternalError, comm, "the receive completed, but nobody sent");
    }
    idleThenCall(comm, rank, n);
  } else if (scenario == "split") {
    loomComm_t child = nullptr;
    check(loomCommSplit(comm, rank == victim ? LOOM_SPLIT_NOCOLOR : 0, rank, &child, nullptr),
          "loomCommSplit", comm);
    if (rank == victim) stall();
    for (int i = 0; i < 1000000; ++i) allReduce(child, rank < victim ? rank : rank - 1, n - 1);
  } else if (scenario == "abort") {
    if (rank == victim) {
      check(loomCommAbort(comm), "loomCommAbort", nullptr);
      std::printf("ok\n");
      return 0;
    }
    for (int i = 0; i < 100000; ++i) allReduce(comm, rank, n);
  }
  check(loomCommFinalize(comm), "loomCommFinalize", comm);
  check(loomCommDestroy(comm), "loomCommDestroy", comm);
  std::printf("ok\n");
  return 0;
}
