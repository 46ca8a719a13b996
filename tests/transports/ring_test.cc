// Rings of ranks as threads of this process, with real transports: every rank sends to the next
// and receives from the previous on two channels, and checks every byte of every step.
#include <gtest/gtest.h>
#include <unistd.h>

#include "src/comm/comm.h"
#include "tests/test_util.h"
#include "tests/transports/transport_test_util.h"
#include "transports/registry.h"

namespace loom::transport::test {
namespace {

using loom::test::ScopedEnv;

struct RingCase {
  const char* transport;   // LOOM_TRANSPORT ("" leaves the choice to loom)
  const char* shmDisable;  // LOOM_SHM_DISABLE
  const char* streams;     // LOOM_SOCKET_NSTREAMS
  const char* buffsize;    // LOOM_BUFFSIZE
  int nranks;
  uint64_t steps;
  const char* expected;  // the transport every pair must get
};

std::string caseName(const ::testing::TestParamInfo<RingCase>& info) {
  const RingCase& c = info.param;
  std::string name = c.transport[0] != '\0' ? c.transport : "auto";
  if (std::string(c.shmDisable) == "1") name += "_shmdisabled";
  if (std::string(c.streams) != "2") name += strCat("_streams", c.streams);
  return strCat(name, "_buf", c.buffsize, "_n", c.nranks);
}

void PrintTo(const RingCase& c, std::ostream* out) {
  *out << "LOOM_TRANSPORT=" << c.transport << " LOOM_SHM_DISABLE=" << c.shmDisable
       << " LOOM_SOCKET_NSTREAMS=" << c.streams << " LOOM_BUFFSIZE=" << c.buffsize << ", "
       << c.nranks << " ranks, " << c.steps << " steps";
}

class TransportRing : public ::testing::TestWithParam<RingCase> {};

TEST_P(TransportRing, StreamsEveryByteOnTwoChannels) {
  const RingCase& c = GetParam();
  ScopedEnv transport("LOOM_TRANSPORT", c.transport);
  ScopedEnv shmDisable("LOOM_SHM_DISABLE", c.shmDisable);
  ScopedEnv streams("LOOM_SOCKET_NSTREAMS", c.streams);
  ScopedEnv buffsize("LOOM_BUFFSIZE", c.buffsize);
  ScopedEnv timeout("LOOM_TIMEOUT", "60");  // a rank that fails must not leave others waiting
  std::vector<loomComm_t> comms = loom::test::initThreads(c.nranks, loom::test::makeId());
  std::vector<std::string> errors(c.nranks);
  loom::test::runThreads(c.nranks, [&](int r) {
    try {
      auto& comm = *static_cast<Comm*>(comms[r]);
      std::vector<ConnectionRequest> requests = ringRequests(comm, 2);
      Connections conns = connectAll(comm, requests, /*batchTag=*/1);
      for (const char* name : conns.sendTransport) EXPECT_STREQ(name, c.expected);
      for (const char* name : conns.recvTransport) EXPECT_STREQ(name, c.expected);
      errors[r] = exchange(comm, requests, conns, c.steps);
    } catch (const std::exception& e) {
      errors[r] = e.what();
    }
  });
  for (int r = 0; r < c.nranks; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
  loom::test::finalizeAndDestroy(comms);
}

// 64 KiB buffers (8 KiB slots) keep 1000 steps quick; the 4 MiB default is covered with fewer.
INSTANTIATE_TEST_SUITE_P(Transports, TransportRing,
                         ::testing::Values(RingCase{"shm", "0", "2", "65536", 2, 1000, "shm"},
                                           RingCase{"shm", "0", "2", "65536", 3, 1000, "shm"},
                                           RingCase{"shm", "0", "2", "65536", 5, 1000, "shm"},
                                           RingCase{"socket", "0", "2", "65536", 2, 1000, "socket"},
                                           RingCase{"socket", "0", "2", "65536", 3, 1000, "socket"},
                                           RingCase{"socket", "0", "2", "65536", 5, 1000, "socket"},
                                           RingCase{"", "1", "2", "65536", 2, 1000, "socket"},
                                           RingCase{"", "1", "2", "65536", 3, 1000, "socket"},
                                           RingCase{"", "1", "2", "65536", 5, 1000, "socket"},
                                           RingCase{"", "0", "2", "65536", 3, 1000, "shm"},
                                           RingCase{"socket", "0", "1", "65536", 3, 1000, "socket"},
                                           RingCase{"socket", "0", "3", "65536", 2, 1000, "socket"},
                                           RingCase{"shm", "0", "2", "4194304", 2, 64, "shm"},
                                           RingCase{"socket", "0", "2", "4194304", 2, 64, "socket"},
                                           RingCase{"socket", "0", "2", "100", 2, 1000, "socket"}),
                         caseName);

// Rings are memfds: no name of ours exists in /dev/shm at any moment, each connection holds
// one fd on each side while it lives, and none is left once the connections are gone.
TEST(TransportShm, RingsAreMemfdsAndNoNameExists) {
  ScopedEnv transport("LOOM_TRANSPORT", "shm");
  ScopedEnv timeout("LOOM_TIMEOUT", "60");
  const long pid = getpid();
  ASSERT_EQ(devShmNamesOf(pid), std::vector<std::string>{});
  const int n = 3;
  std::vector<loomComm_t> comms = loom::test::initThreads(n, loom::test::makeId());
  std::vector<Connections> conns(n);
  std::vector<std::string> errors(n);
  loom::test::runThreads(n, [&](int r) {
    try {
      auto& comm = *static_cast<Comm*>(comms[r]);
      conns[r] = connectAll(comm, ringRequests(comm, 2), 3);
    } catch (const std::exception& e) {
      errors[r] = e.what();
    }
  });
  for (int r = 0; r < n; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
  EXPECT_EQ(devShmNamesOf(pid), std::vector<std::string>{});
  EXPECT_EQ(ringMemfdsOf(pid), 2 * n * 2);  // n ranks x 2 channels, two ends each
  conns.clear();
  EXPECT_EQ(devShmNamesOf(pid), std::vector<std::string>{});
  EXPECT_EQ(ringMemfdsOf(pid), 0);
  loom::test::finalizeAndDestroy(comms);
}

}  // namespace
}  // namespace loom::transport::test
