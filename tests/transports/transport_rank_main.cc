// One rank of a multi-process transport test, spawned by process_test.cc and kill_test.cc:
//
//   loom_transport_test_rank SCENARIO NRANKS RANK ID
//
// ID is the hex unique id from the test. Prints "ok" and exits 0 on success; on failure prints
// "fail <code> <message>" and exits 10 + the loomResult_t code. The environment (set by the
// test) chooses the transport. Scenarios, all on a ring (send to rank+1, receive from rank-1):
//   stream   2 channels, 1000 steps checked byte by byte, then finalize
//   mixed    as stream, on 2 Simple channels and 2 LL channels (2, 3) at once
//   connect  1 channel; print "via <transport>" for every connection, then finalize
//   hold     1 channel; print "connected" and wait to be killed (a crash after setup)
//   allreduce-twice  print "starting", init, print "initialized", then (no connections of its
//            own) an AllReduce of 16 and one of 1 Mi floats (the LL and the Simple rings, set
//            up by the first calls), 150 ms of sleep, the same again, each checked exactly;
//            the test kills a rank in init or in connection setup
// TRANSPORT_TEST_REFUSE_PIDFD=1 makes this process refuse pidfd_getfd (as ptrace rules may),
// so the shm rings it imports come by SCM_RIGHTS.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "loom/loom.h"
#include "src/base/error.h"
#include "src/comm/comm.h"
#include "tests/test_util.h"
#include "tests/transports/transport_test_util.h"
#include "transports/shm/fd_passing.h"

namespace {

[[noreturn]] void fail(int code, const std::string& what) {
  std::printf("fail %d %s\n", code, what.c_str());
  std::fflush(stdout);
  std::exit(10 + code);
}

void say(const std::string& line) {
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

// Two AllReduces of every rank's (rank + 1) in each element: the sum is exact in float.
void allReduceTwice(loomComm_t comm, int nranks, int rank) {
  for (size_t count : {size_t{16}, size_t{1} << 20}) {
    std::vector<float> data(count, static_cast<float>(rank + 1));
    loomResult_t r =
        loomAllReduce(data.data(), data.data(), count, loomFloat32, loomSum, comm, nullptr);
    if (r != loomSuccess) fail(r, std::string("loomAllReduce: ") + loomGetLastError(comm));
    const float want = static_cast<float>(nranks * (nranks + 1) / 2);
    for (float v : data)
      if (v != want) fail(loomInternalError, "wrong AllReduce result");
  }
}

void run(const std::string& scenario, loom::Comm& comm) {
  using namespace loom::transport;
  std::vector<ConnectionRequest> requests =
      test::ringRequests(comm, scenario == "stream" || scenario == "mixed" ? 2 : 1);
  if (scenario == "mixed") {
    for (const ConnectionRequest& r : test::ringRequests(comm, 2, Protocol::kLL, 2))
      requests.push_back(r);
  }
  Connections conns = connectAll(comm, requests, /*batchTag=*/1);
  if (scenario == "stream" || scenario == "mixed") {
    std::string error = test::exchange(comm, requests, conns, 1000);
    if (!error.empty()) fail(loomInternalError, error);
  } else if (scenario == "connect") {
    for (const char* name : conns.sendTransport) say(std::string("via ") + name);
  } else if (scenario == "hold") {
    say("connected");
    for (;;) pause();  // the test kills us here
  } else {
    fail(loomInvalidArgument, "unknown scenario " + scenario);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: %s SCENARIO NRANKS RANK ID\n", argv[0]);
    return 2;
  }
  const std::string scenario = argv[1];
  const int nranks = std::atoi(argv[2]);
  const int rank = std::atoi(argv[3]);
  loomUniqueId id = loom::test::idFromHex(argv[4]);
  if (const char* refuse = std::getenv("TRANSPORT_TEST_REFUSE_PIDFD"); refuse && refuse[0] == '1')
    loom::transport::shm::testing::refusePidfd(true);
  if (scenario == "allreduce-twice") say("starting");
  loomComm_t comm = nullptr;
  loomResult_t r = loomCommInitRank(&comm, nranks, id, rank);
  if (r != loomSuccess) fail(r, std::string("loomCommInitRank: ") + loomGetLastError(nullptr));
  if (scenario == "allreduce-twice") {
    say("initialized");
    allReduceTwice(comm, nranks, rank);
    std::this_thread::sleep_for(std::chrono::milliseconds(150));
    allReduceTwice(comm, nranks, rank);
  } else {
    try {
      run(scenario, *static_cast<loom::Comm*>(comm));
    } catch (const loom::Error& e) {
      fail(e.code(), e.what());
    }
  }
  if (loomCommFinalize(comm) != loomSuccess) fail(loomInternalError, loomGetLastError(comm));
  loomCommDestroy(comm);
  say("ok");
  return 0;
}
