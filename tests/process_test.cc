// Ranks as separate processes (tests/rank_main.cc, spawned with fork+exec): lifecycle for
// several job sizes, LOOM_COMM_ID without any broadcast, a rank killed with SIGKILL during
// init, and LOOM_DEBUG_FILE.
#include <dirent.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "tests/test_util.h"

namespace loom::test {
namespace {

constexpr int kRankTimeoutMs = 90000;

// Spawns `nranks` ranks running `scenario` with `id` ("env" or hex); expects all to print ok.
void runJob(const std::string& scenario, int nranks, const std::string& id,
            const std::vector<std::string>& env = {}) {
  std::vector<RankProcess> ranks;
  for (int r = 0; r < nranks; ++r) {
    ranks.push_back(spawnRank({scenario, std::to_string(nranks), std::to_string(r), id}, env));
  }
  for (int r = 0; r < nranks; ++r) {
    std::string output;
    std::optional<int> code = waitRank(ranks[r], kRankTimeoutMs, &output);
    ASSERT_TRUE(code.has_value()) << "rank " << r << " hung; output: " << output;
    EXPECT_EQ(*code, 0) << "rank " << r << " output: " << output;
    EXPECT_NE(output.find("ok"), std::string::npos) << output;
  }
}

class ProcessLifecycle : public ::testing::TestWithParam<int> {};

TEST_P(ProcessLifecycle, InitSplitDestroy) { runJob("lifecycle", GetParam(), idToHex(makeId())); }

INSTANTIATE_TEST_SUITE_P(Ranks, ProcessLifecycle, ::testing::Values(1, 2, 3, 4, 7, 8),
                         [](const auto& info) { return std::to_string(info.param) + "ranks"; });

TEST(Process, CommIdWithoutBroadcastIPv4) {
  std::string commId = "127.0.0.1:" + std::to_string(freePort());
  runJob("lifecycle", 4, "env", {"LOOM_COMM_ID=" + commId});
}

TEST(Process, CommIdWithoutBroadcastHostname) {
  std::string commId = "localhost:" + std::to_string(freePort());
  runJob("init", 3, "env", {"LOOM_COMM_ID=" + commId, "LOOM_COMM_SECRET=job-42"});
}

TEST(Process, CommIdWithoutBroadcastIPv6) {
  int fd = socket(AF_INET6, SOCK_STREAM, 0);
  sockaddr_in6 a{};
  a.sin6_family = AF_INET6;
  a.sin6_addr = in6addr_loopback;
  bool haveV6 = fd >= 0 && bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
  if (fd >= 0) close(fd);
  if (!haveV6) GTEST_SKIP() << "no IPv6 loopback on this machine";
  std::string commId = "[::1]:" + std::to_string(freePort());
  runJob("init", 3, "env", {"LOOM_COMM_ID=" + commId});
}

TEST(Process, DifferentSecretsDoNotJoin) {
  // Two ranks derive ids from the same LOOM_COMM_ID but different secrets: rank 1 is refused
  // by the root and the job times out instead of mixing.
  std::string commId = "LOOM_COMM_ID=127.0.0.1:" + std::to_string(freePort());
  RankProcess r0 =
      spawnRank({"init", "2", "0", "env"}, {commId, "LOOM_COMM_SECRET=a", "LOOM_TIMEOUT=2"});
  RankProcess r1 =
      spawnRank({"init", "2", "1", "env"}, {commId, "LOOM_COMM_SECRET=b", "LOOM_TIMEOUT=2"});
  std::string out0, out1;
  std::optional<int> c0 = waitRank(r0, kRankTimeoutMs, &out0);
  std::optional<int> c1 = waitRank(r1, kRankTimeoutMs, &out1);
  ASSERT_TRUE(c0 && c1) << out0 << out1;
  EXPECT_EQ(*c0, 10 + loomTimeout) << out0;
  EXPECT_NE(out0.find("missing rank(s) 1"), std::string::npos) << out0;
  EXPECT_NE(*c1, 0) << out1;
}

// Kills rank 1 with SIGKILL once it reaches `scenario`'s stall point; the others must fail
// with loomRemoteError, well before their timeout, saying that a peer exited or crashed (rank
// 1, or a neighbour that failed because of it first).
void killRankDuringInit(const std::string& scenario) {
  const int n = 3;
  std::string id = idToHex(makeId());
  std::vector<std::string> env{"LOOM_TIMEOUT=60"};
  RankProcess victim = spawnRank({scenario, "3", "1", id}, env);
  std::vector<RankProcess> others;
  for (int r : {0, 2})
    others.push_back(spawnRank({"init", std::to_string(n), std::to_string(r), id}, env));
  std::string victimOut;
  ASSERT_TRUE(waitForLine(victim, "stalled", kRankTimeoutMs, &victimOut)) << victimOut;
  kill(victim.pid, SIGKILL);
  std::optional<int> victimCode = waitRank(victim, kRankTimeoutMs);
  EXPECT_EQ(victimCode.value_or(-1), 128 + SIGKILL);
  for (RankProcess& p : others) {
    std::string output;
    std::optional<int> code = waitRank(p, 45000, &output);
    ASSERT_TRUE(code.has_value()) << "a rank hung after its peer died: " << output;
    EXPECT_EQ(*code, 10 + loomRemoteError) << output;
    // "... (did it exit or crash?)" from a neighbour, or the root's "... it exited, crashed
    // or was killed".
    EXPECT_NE(output.find("exit"), std::string::npos) << output;
  }
}

TEST(Process, RankKilledAfterRegisteringWithRoot) { killRankDuringInit("stall"); }

TEST(Process, RankKilledAfterJoiningTheRing) { killRankDuringInit("stall-ring"); }

TEST(Process, HostIdGroupsRanksIntoHosts) {
  // Five ranks pretending to be on three hosts (LOOM_HOSTID), numbered interleaved.
  const std::vector<std::string> hostOf{"a", "b", "c", "a", "b"};
  std::string id = idToHex(makeId());
  std::vector<RankProcess> ranks;
  for (int r = 0; r < 5; ++r) {
    ranks.push_back(spawnRank({"hosts", "5", std::to_string(r), id}, {"LOOM_HOSTID=" + hostOf[r]}));
  }
  const std::vector<std::string> expected{"hosts 3 local 0 of 2", "hosts 3 local 0 of 2",
                                          "hosts 3 local 0 of 1", "hosts 3 local 1 of 2",
                                          "hosts 3 local 1 of 2"};
  for (int r = 0; r < 5; ++r) {
    std::string output;
    std::optional<int> code = waitRank(ranks[r], kRankTimeoutMs, &output);
    ASSERT_TRUE(code.has_value()) << output;
    EXPECT_EQ(*code, 0) << output;
    EXPECT_NE(output.find(expected[r]), std::string::npos) << "rank " << r << ": " << output;
  }
}

TEST(Process, DebugFileNamesHostAndPid) {
  char dirTemplate[] = "/tmp/loom-log-XXXXXX";
  ASSERT_NE(mkdtemp(dirTemplate), nullptr);
  std::string dir = dirTemplate;
  runJob("init", 2, idToHex(makeId()),
         {"LOOM_DEBUG=INFO", "LOOM_DEBUG_FILE=" + dir + "/loom.%h.%p.log"});
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  int files = 0;
  DIR* d = opendir(dir.c_str());
  ASSERT_NE(d, nullptr);
  while (dirent* e = readdir(d)) {
    std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    ++files;
    EXPECT_EQ(name.rfind(std::string("loom.") + host + ".", 0), 0u) << name;
    std::ifstream in(dir + "/" + name);
    std::stringstream text;
    text << in.rdbuf();
    EXPECT_NE(text.str().find("ready"), std::string::npos) << text.str();
    EXPECT_NE(text.str().find("LOOM_DEBUG_FILE="), std::string::npos) << "env table at INFO";
    unlink((dir + "/" + name).c_str());
  }
  closedir(d);
  rmdir(dir.c_str());
  EXPECT_EQ(files, 2);
}

}  // namespace
}  // namespace loom::test
