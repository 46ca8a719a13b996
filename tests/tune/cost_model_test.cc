// Sanity of the tuner (src/tune/cost_model.h): the choices it must keep on this flat machine
// (LL and tree for tiny AllReduces, ring and Simple for large ones), hierarchical AllReduce
// for large calls across hosts, and predictions that grow with size.
#include "src/tune/cost_model.h"

#include <gtest/gtest.h>

#include <sstream>

#include "src/tune/decision_table.h"

namespace loom::tune {
namespace {

TEST(CostModel, FlatMachineTinyIsLLTreeLargeIsRingSimple) {
  // (At 3 ranks the tree and the ring take the same 4 hops; the model keeps the ring.)
  for (int ranks : {4, 8, 16}) {
    const ClusterModel m = defaultModel(1, ranks, 1.25, 1);
    const Choice tiny = best(m, 8);
    EXPECT_EQ(tiny.algo, Algo::kTree) << ranks;
    EXPECT_EQ(tiny.proto, Proto::kLL) << ranks;
    const Choice large = best(m, 64 << 20);
    EXPECT_EQ(large.algo, Algo::kRing) << ranks;
    EXPECT_EQ(large.proto, Proto::kSimple) << ranks;
  }
  // Two ranks: the tree does not apply; LL for tiny calls.
  const Choice two = best(defaultModel(1, 2, 1.25, 1), 8);
  EXPECT_EQ(two.algo, Algo::kRing);
  EXPECT_EQ(two.proto, Proto::kLL);
  // Simple from 1 KiB on (measured faster there at 2 and 4 ranks, every collective).
  for (int ranks : {2, 4, 8})
    EXPECT_EQ(best(defaultModel(1, ranks, 1.25, 1), 1024).proto, Proto::kSimple) << ranks;
}

TEST(CostModel, HierarchicalOnlyWhereItApplies) {
  EXPECT_FALSE(applies(defaultModel(1, 4, 1.25, 1), Algo::kHier));
  EXPECT_FALSE(applies(defaultModel(4, 1, 1.25, 1), Algo::kHier));
  ClusterModel uneven = defaultModel(2, 3, 1.25, 1);
  uneven.uniform = false;
  EXPECT_FALSE(applies(uneven, Algo::kHier));
  EXPECT_EQ(best(uneven, 64 << 20).algo == Algo::kHier, false);
}

TEST(CostModel, LargeCallsAcrossHostsGoHierarchical) {
  // 3 hosts x 2 ranks at 1 Gbit/s: the network moves 2(N-1)/N instead of 2(n-1)/n of the data.
  const ClusterModel m = defaultModel(3, 2, 0.125, 1);
  EXPECT_EQ(best(m, 64 << 20).algo, Algo::kHier);
  EXPECT_LT(predictUs(m, Algo::kHier, Proto::kSimple, 1, 64 << 20),
            predictUs(m, Algo::kRing, Proto::kSimple, 1, 64 << 20));
}

TEST(CostModel, TimeGrowsWithSizeAndBusBandwidthStaysUnderTheLink) {
  for (const ClusterModel& m : {defaultModel(1, 4, 1.25, 1), defaultModel(3, 2, 0.125, 2),
                                gpuServerModel(2), gpuServerModel(1024)}) {
    double last = 0;
    for (double bytes = 8; bytes <= double(1 << 30); bytes *= 8) {
      const Choice c = best(m, bytes);
      EXPECT_GE(c.timeUs, last) << bytes;
      last = c.timeUs;
      EXPECT_GT(c.timeUs, 0);
      EXPECT_GE(c.channels, m.channelsMin);
      EXPECT_LE(c.channels, m.channelsMax);
    }
  }
}

TEST(CostModel, BigGpuClusterUsesMoreChannelsForLargeCalls) {
  const ClusterModel m = gpuServerModel(8);
  EXPECT_GT(best(m, 1 << 30).channels, best(m, 8).channels);
}

TEST(DecisionTable, PrintsOneRowPerSize) {
  std::ostringstream out;
  printDecisionTable(gpuServerModel(2), out);
  const std::string text = out.str();
  EXPECT_NE(text.find("8 B"), std::string::npos) << text;
  EXPECT_NE(text.find("2 GiB"), std::string::npos) << text;
  EXPECT_NE(text.find("busbw"), std::string::npos) << text;
}

}  // namespace
}  // namespace loom::tune
