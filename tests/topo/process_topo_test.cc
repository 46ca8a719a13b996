// Ranks as processes with their own host ids and topology files: the exchange carries
// descriptions of different sizes, ranks with one host id form a node, and pairs across host
// ids are network paths.
#include <gtest/gtest.h>

#include "tests/test_util.h"

namespace loom::test {
namespace {

constexpr int kRankTimeoutMs = 90000;
const std::string kFixtures = LOOM_TOPO_FIXTURES;

TEST(ProcessTopo, TwoHostsWithDifferentTopologies) {
  std::string id = idToHex(makeId());
  // Ranks 0 and 1 share host "a" (an XE8640), rank 2 is alone on host "b" (a g4dn).
  std::vector<std::vector<std::string>> envs = {
      {"LOOM_HOSTID=a",
       "LOOM_TOPO_FILE=" + kFixtures + "/dell-xe8640-h100x4-mlx5x4-nvlink.ipa20.xml"},
      {"LOOM_HOSTID=a",
       "LOOM_TOPO_FILE=" + kFixtures + "/dell-xe8640-h100x4-mlx5x4-nvlink.ipa20.xml"},
      {"LOOM_HOSTID=b", "LOOM_TOPO_FILE=" + kFixtures + "/aws-g4dn-metal-t4x8-efa.xml"},
  };
  std::vector<RankProcess> ranks;
  for (int r = 0; r < 3; ++r)
    ranks.push_back(spawnProcess(LOOM_TOPO_RANK_BINARY, {"3", std::to_string(r), id}, envs[r]));
  for (int r = 0; r < 3; ++r) {
    std::string out;
    std::optional<int> code = waitRank(ranks[r], kRankTimeoutMs, &out);
    ASSERT_TRUE(code.has_value()) << "rank " << r << " hung: " << out;
    ASSERT_EQ(*code, 0) << "rank " << r << ": " << out;
    EXPECT_TRUE(contains(out, "nodes 2\n")) << out;
    EXPECT_TRUE(contains(out, "node 0 gpus 4 nics 6\n")) << out;
    EXPECT_TRUE(contains(out, "node 1 gpus 8 nics 2\n")) << out;
    EXPECT_TRUE(contains(out, "rank 1 node 0\n")) << out;
    EXPECT_TRUE(contains(out, "rank 2 node 1\n")) << out;
    EXPECT_TRUE(contains(out, "class 0 2 NET\n")) << out;
    EXPECT_TRUE(contains(out, "class 2 1 NET\n")) << out;
    EXPECT_TRUE(contains(out, "class 2 2 PROC\n")) << out;
    // Two processes of host "a": a host-memory path between NUMA nodes of the XE8640, which
    // one depends on the CPUs this machine runs them on.
    bool hostPath = contains(out, "class 0 1 NUMA\n") || contains(out, "class 0 1 SOCK\n") ||
                    contains(out, "class 0 1 SYS\n");
    EXPECT_TRUE(hostPath) << out;
  }
}

}  // namespace
}  // namespace loom::test
