// Ranks as separate processes (transport_rank_main.cc): shm between processes, socket between
// processes, a peer killed after setup, and host identities that rule shm out.
#include <dirent.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>

#include "src/base/error.h"
#include "src/comm/comm.h"
#include "tests/test_util.h"
#include "tests/transports/transport_test_util.h"
#include "transports/registry.h"

namespace loom::transport::test {
namespace {

using loom::test::RankProcess;
using loom::test::ScopedEnv;

constexpr int kWaitMs = 100000;

// A scratch directory for log files, removed with its files at the end of the test.
class TempDir {
 public:
  TempDir() {
    char pattern[] = "/tmp/loom-transport-test-XXXXXX";
    path_ = mkdtemp(pattern) != nullptr ? pattern : "";
  }
  ~TempDir() {
    for (const std::string& f : files()) ::unlink((path_ + "/" + f).c_str());
    ::rmdir(path_.c_str());
  }
  const std::string& path() const { return path_; }
  std::vector<std::string> files() const {
    std::vector<std::string> out;
    if (DIR* d = opendir(path_.c_str())) {
      while (dirent* e = readdir(d)) {
        if (e->d_name[0] != '.') out.emplace_back(e->d_name);
      }
      closedir(d);
    }
    return out;
  }
  std::string readAll() const {
    std::string all;
    for (const std::string& f : files()) {
      std::ifstream in(path_ + "/" + f);
      std::stringstream s;
      s << in.rdbuf();
      all += s.str();
    }
    return all;
  }

 private:
  std::string path_;
};

struct Finished {
  std::optional<int> code;
  std::string output;
};

// Runs `scenario` on `nranks` rank processes; env[r] are the extra variables of rank r.
std::vector<Finished> runRanks(const std::string& scenario, int nranks,
                               const std::vector<std::vector<std::string>>& env) {
  const std::string id = loom::test::idToHex(loom::test::makeId());
  std::vector<RankProcess> procs;
  for (int r = 0; r < nranks; ++r)
    procs.push_back(
        loom::test::spawnRank({scenario, std::to_string(nranks), std::to_string(r), id}, env[r]));
  std::vector<Finished> done(nranks);
  for (int r = 0; r < nranks; ++r) {
    done[r].code = loom::test::waitRank(procs[r], kWaitMs, &done[r].output);
    EXPECT_TRUE(devShmNamesOf(procs[r].pid).empty()) << "rank " << r << " leaked";
  }
  return done;
}

class TransportProcess : public ::testing::TestWithParam<std::string> {};

// Two processes stream 1000 checked steps each way on two channels; the log says which
// transport each pair got, and nothing is left in /dev/shm.
TEST_P(TransportProcess, StreamsBetweenProcesses) {
  TempDir logs;
  ASSERT_FALSE(logs.path().empty());
  std::vector<std::string> env{"LOOM_TRANSPORT=" + GetParam(),
                               "LOOM_BUFFSIZE=65536",
                               "LOOM_TIMEOUT=60",
                               "LOOM_DEBUG=INFO",
                               "LOOM_DEBUG_SUBSYS=SHM,NET",
                               "LOOM_DEBUG_FILE=" + logs.path() + "/rank.%p"};
  std::vector<Finished> done = runRanks("stream", 2, {env, env});
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(done[r].code, std::optional<int>(0)) << "rank " << r << ": " << done[r].output;
    EXPECT_NE(done[r].output.find("ok"), std::string::npos) << done[r].output;
  }
  const std::string log = logs.readAll();
  for (const char* link : {"rank 0 -> rank 1 channel 0", "rank 0 -> rank 1 channel 1",
                           "rank 1 -> rank 0 channel 0", "rank 1 -> rank 0 channel 1"}) {
    EXPECT_NE(log.find(std::string(link) + " via " + GetParam()), std::string::npos)
        << link << " missing in the log:\n"
        << log;
  }
}

// As above with LL connections (channels 2 and 3) beside the Simple ones, all streaming at
// once; socket carries the LL requests as ordinary connections.
TEST_P(TransportProcess, StreamsSimpleAndLLBetweenProcesses) {
  TempDir logs;
  ASSERT_FALSE(logs.path().empty());
  std::vector<std::string> env{"LOOM_TRANSPORT=" + GetParam(),
                               "LOOM_BUFFSIZE=65536",
                               "LOOM_TIMEOUT=60",
                               "LOOM_DEBUG=INFO",
                               "LOOM_DEBUG_SUBSYS=SHM,NET",
                               "LOOM_DEBUG_FILE=" + logs.path() + "/rank.%p"};
  std::vector<Finished> done = runRanks("mixed", 2, {env, env});
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(done[r].code, std::optional<int>(0)) << "rank " << r << ": " << done[r].output;
    EXPECT_NE(done[r].output.find("ok"), std::string::npos) << done[r].output;
  }
  const std::string log = logs.readAll();
  for (int c = 0; c < 4; ++c) {
    const std::string how = strCat(" via ", GetParam(), " (send side, ", c < 2 ? "Simple" : "LL");
    for (const char* link : {"rank 0 -> rank 1 channel ", "rank 1 -> rank 0 channel "}) {
      EXPECT_NE(log.find(strCat(link, c, how)), std::string::npos)
          << link << c << how << " missing in the log:\n"
          << log;
    }
  }
}

// This process is rank 0 and the peer a process that is SIGKILLed once connected. Nothing may
// leak into /dev/shm, and for socket the dead peer must surface as a RemoteError naming it.
TEST_P(TransportProcess, PeerKilledAfterSetup) {
  ScopedEnv transport("LOOM_TRANSPORT", GetParam());
  ScopedEnv buffsize("LOOM_BUFFSIZE", "65536");
  ScopedEnv timeout("LOOM_TIMEOUT", "60");
  loomUniqueId id = loom::test::makeId();
  RankProcess peer = loom::test::spawnRank({"hold", "2", "1", loom::test::idToHex(id)});
  ASSERT_GT(peer.pid, 0);
  loomComm_t handle = nullptr;
  ASSERT_LOOM_OK(loomCommInitRank(&handle, 2, id, 0));
  auto& comm = *static_cast<Comm*>(handle);
  Connections conns;
  ASSERT_NO_THROW(conns = connectAll(comm, ringRequests(comm, 1), 1));
  std::string output;
  ASSERT_TRUE(loom::test::waitForLine(peer, "connected", kWaitMs, &output)) << output;
  EXPECT_TRUE(devShmNamesOf(getpid()).empty());
  EXPECT_TRUE(devShmNamesOf(peer.pid).empty());

  ASSERT_EQ(kill(peer.pid, SIGKILL), 0);
  EXPECT_EQ(loom::test::waitRank(peer, kWaitMs), std::optional<int>(128 + SIGKILL));
  EXPECT_TRUE(devShmNamesOf(getpid()).empty());
  EXPECT_TRUE(devShmNamesOf(peer.pid).empty());

  SendConnection& send = *conns.sends[0];
  RecvConnection& recv = *conns.recvs[0];
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  if (GetParam() == "shm") {
    // The ring cannot tell that the peer died (shm_transport.h): our mapping stays valid, we
    // can fill the window, and then wait for releases that never come. The executor's
    // deadline reports that; here it is enough that nothing crashed.
    for (int i = 0; i < kSlots; ++i) {
      ASSERT_NE(send.tryAcquire(), nullptr);
      send.post(1);
    }
    EXPECT_EQ(send.tryAcquire(), nullptr);
    size_t bytes = 0;
    EXPECT_EQ(recv.tryReceive(&bytes), nullptr);
  } else {
    std::string recvError, sendError;
    while (recvError.empty() && std::chrono::steady_clock::now() < end) {
      try {
        recv.progress();
      } catch (const RemoteError& e) {
        recvError = e.what();
      }
    }
    EXPECT_NE(recvError.find("rank 1"), std::string::npos) << recvError;
    while (sendError.empty() && std::chrono::steady_clock::now() < end) {
      try {
        if (void* slot = send.tryAcquire()) {
          (void)slot;
          send.post(send.slotBytes());
        }
        send.progress();
      } catch (const RemoteError& e) {
        sendError = e.what();
      }
    }
    EXPECT_NE(sendError.find("rank 1"), std::string::npos) << sendError;
  }
  conns = Connections{};
  EXPECT_EQ(loomCommDestroy(handle), loomSuccess) << loomGetLastError(nullptr);
}

// Where ptrace rules forbid pidfd_getfd (here: a test switch in the ranks), the rings come
// from the creator's fd server by SCM_RIGHTS; Simple and LL stream as before.
TEST(TransportProcessShm, RingsComeBySCMRightsWhereThePidfdIsRefused) {
  TempDir logs;
  ASSERT_FALSE(logs.path().empty());
  std::vector<std::string> env{"LOOM_TRANSPORT=shm",
                               "LOOM_BUFFSIZE=65536",
                               "LOOM_TIMEOUT=60",
                               "TRANSPORT_TEST_REFUSE_PIDFD=1",
                               "LOOM_DEBUG=INFO",
                               "LOOM_DEBUG_SUBSYS=SHM",
                               "LOOM_DEBUG_FILE=" + logs.path() + "/rank.%p"};
  std::vector<Finished> done = runRanks("mixed", 2, {env, env});
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(done[r].code, std::optional<int>(0)) << "rank " << r << ": " << done[r].output;
    EXPECT_NE(done[r].output.find("ok"), std::string::npos) << done[r].output;
  }
  const std::string log = logs.readAll();
  for (const char* peer : {"rank 0 (pid", "rank 1 (pid"}) {
    EXPECT_NE(log.find(peer), std::string::npos) << log;
  }
  EXPECT_NE(log.find("shared rings come from its fd server by SCM_RIGHTS"), std::string::npos)
      << log;
}

INSTANTIATE_TEST_SUITE_P(Transports, TransportProcess, ::testing::Values("shm", "socket"),
                         [](const auto& info) { return info.param; });

// Ranks whose host ids differ get socket by default, and forcing shm between them fails on
// both sides with a message that says why.
TEST(TransportHosts, DifferentHostsUseSocketAndRefuseForcedShm) {
  std::vector<std::vector<std::string>> env{{"LOOM_HOSTID=host-a", "LOOM_TIMEOUT=60"},
                                            {"LOOM_HOSTID=host-b", "LOOM_TIMEOUT=60"}};
  std::vector<Finished> done = runRanks("connect", 2, env);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(done[r].code, std::optional<int>(0)) << done[r].output;
    EXPECT_NE(done[r].output.find("via socket"), std::string::npos) << done[r].output;
  }
  for (auto& e : env) e.push_back("LOOM_TRANSPORT=shm");
  done = runRanks("connect", 2, env);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(done[r].code, std::optional<int>(10 + loomInvalidArgument)) << done[r].output;
    EXPECT_NE(done[r].output.find("LOOM_TRANSPORT=shm cannot connect"), std::string::npos)
        << done[r].output;
    EXPECT_NE(done[r].output.find("different hosts"), std::string::npos) << done[r].output;
  }
}

}  // namespace
}  // namespace loom::transport::test
