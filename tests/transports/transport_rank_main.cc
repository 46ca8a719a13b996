// One rank of a multi-process transport test, spawned by process_test.cc:
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
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "loom/loom.h"
#include "src/base/error.h"
#include "src/comm/comm.h"
#include "tests/test_util.h"
#include "tests/transports/transport_test_util.h"

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
  loomComm_t comm = nullptr;
  loomResult_t r = loomCommInitRank(&comm, nranks, id, rank);
  if (r != loomSuccess) fail(r, std::string("loomCommInitRank: ") + loomGetLastError(nullptr));
  try {
    run(scenario, *static_cast<loom::Comm*>(comm));
  } catch (const loom::Error& e) {
    fail(e.code(), e.what());
  }
  if (loomCommFinalize(comm) != loomSuccess) fail(loomInternalError, loomGetLastError(comm));
  loomCommDestroy(comm);
  say("ok");
  return 0;
}
