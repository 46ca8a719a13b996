// Several hosts faked with LOOM_HOSTID (one value per process, so the ranks are processes:
// threads would share one environment and one host). Ranks are numbered interleaved across
// hosts. Every AllReduce of tests/coll (every type; sum, avg, max, PreMulSum; counts 1, 7,
// 4099; in place and out of place) through hierarchical AllReduce, the tree over nodes and
// the tuner's choice; and the ring in the INFO log crossing each host boundary once.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/test_util.h"

namespace loom {
namespace {

struct Job {
  int hosts;
  int perHost;
  std::vector<std::string> env;  // on top of LOOM_HOSTID, LOOM_SOCKET_IFNAME and LOOM_TIMEOUT
  int extraOnHost0 = 0;          // uneven hosts: more ranks on host 0
};

// Runs `scenario` of loom_coll_rank; returns every rank's output. Each must exit 0.
std::vector<std::string> runJob(const std::string& scenario, const Job& job) {
  const int n = job.hosts * job.perHost + job.extraOnHost0;
  const std::string id = test::idToHex(test::makeId());
  std::vector<test::RankProcess> procs;
  for (int r = 0; r < n; ++r) {
    const int host = r < job.hosts * job.perHost ? r % job.hosts : 0;
    std::vector<std::string> env{"LOOM_HOSTID=fake-host-" + std::to_string(host),
                                 "LOOM_SOCKET_IFNAME=lo", "LOOM_TIMEOUT=60"};
    env.insert(env.end(), job.env.begin(), job.env.end());
    procs.push_back(test::spawnProcess(LOOM_COLL_RANK_BINARY,
                                       {scenario, std::to_string(n), std::to_string(r), id}, env));
  }
  std::vector<std::string> outputs(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    std::optional<int> code = test::waitRank(procs[r], 240000, &outputs[r]);
    EXPECT_TRUE(code.has_value()) << "rank " << r << " hung: " << outputs[r];
    if (code.has_value()) {
      EXPECT_EQ(*code, 0) << "rank " << r << ": " << outputs[r];
    }
  }
  return outputs;
}

TEST(Hierarchical, TwoHostsOfTwo) { runJob("allreduce", {2, 2, {"LOOM_ALGO=hier"}}); }

TEST(Hierarchical, ThreeHostsOfTwo) { runJob("allreduce", {3, 2, {"LOOM_ALGO=hier"}}); }

TEST(Hierarchical, TwoHostsOfThreeSmallSlotsTwoChannels) {
  // 1 KiB slots: 4099 elements take many pipeline loops, and blocks of unequal pieces.
  runJob("allreduce", {2, 3, {"LOOM_ALGO=hier", "LOOM_BUFFSIZE=8192", "LOOM_NCHANNELS=2"}});
}

TEST(Hierarchical, LLProtocol) { runJob("allreduce", {2, 2, {"LOOM_ALGO=hier", "LOOM_PROTO=ll"}}); }

TEST(Hierarchical, UnevenHostsFallBackToTheRing) {
  runJob("allreduce", {2, 1, {"LOOM_ALGO=hier"}, 1});
}

TEST(HostTree, ThreeHostsOfTwo) { runJob("allreduce", {3, 2, {"LOOM_ALGO=tree"}}); }

TEST(HostTree, TwoHostsOfThreeSmallSlots) {
  runJob("allreduce", {2, 3, {"LOOM_ALGO=tree", "LOOM_BUFFSIZE=8192"}});
}

TEST(HostTree, LLOverMixedTransports) {
  // LL slots differ between shared memory and TCP: every rank must still cut the same pieces.
  runJob("allreduce", {3, 2, {"LOOM_ALGO=tree", "LOOM_PROTO=ll"}});
}

TEST(HostRing, LLOverMixedTransports) {
  runJob("allreduce", {2, 2, {"LOOM_ALGO=ring", "LOOM_PROTO=ll"}});
}

TEST(Tuner, EveryCollectiveOnThreeHostsOfTwo) { runJob("all", {3, 2, {}}); }

TEST(TopologyRing, InterleavedRanksCrossEachHostBoundaryOnce) {
  const std::vector<std::string> out =
      runJob("allgather",
             {3, 2, {"LOOM_DEBUG=INFO", "LOOM_DEBUG_SUBSYS=GRAPH", "LOOM_DEBUG_FILE=/dev/stdout"}});
  for (size_t r = 0; r < out.size(); ++r) {
    EXPECT_NE(out[r].find("ring 0: 0 3 1 4 2 5 (3 node(s), 3 crossing(s)"), std::string::npos)
        << "rank " << r << ": " << out[r];
  }
}

}  // namespace
}  // namespace loom
