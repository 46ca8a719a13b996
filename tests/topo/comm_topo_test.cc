// Communicators on threads: every rank loads LOOM_TOPO_FILE (or discovers this machine), the
// ranks exchange descriptions, and system() shows one node with the expected classes;
// LOOM_TOPO_DUMP_FILE writes a file that loads back.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "src/base/logging.h"
#include "src/comm/comm.h"
#include "src/topo/discovery.h"
#include "src/topo/system_exchange.h"
#include "tests/test_util.h"

namespace loom {
namespace {

using test::contains;
using test::ScopedEnv;

const std::string kXe8640 =
    std::string(LOOM_TOPO_FIXTURES) + "/dell-xe8640-h100x4-mlx5x4-nvlink.ipa20.xml";

const topo::System& systemOf(loomComm_t comm) { return static_cast<Comm*>(comm)->system(); }

void expectOneNodeOfCpuRanks(const std::vector<loomComm_t>& comms) {
  int n = static_cast<int>(comms.size());
  for (int r = 0; r < n; ++r) {
    const topo::System& system = systemOf(comms[r]);
    ASSERT_EQ(system.nranks(), n);
    ASSERT_EQ(system.nodes().size(), 1u);
    for (int a = 0; a < n; ++a) {
      EXPECT_EQ(system.nodeOf(a), 0);
      EXPECT_EQ(system.rank(a).gpu, -1);  // CPU communicators
      for (int b = 0; b < n; ++b)         // threads of one process
        EXPECT_EQ(system.pathClass(a, b), topo::PathClass::kSameProcess);
    }
  }
}

TEST(CommTopo, TopoFileLoadsOnEveryRank) {
  ScopedEnv file("LOOM_TOPO_FILE", kXe8640);
  std::vector<loomComm_t> comms = test::initThreads(3, test::makeId());
  expectOneNodeOfCpuRanks(comms);
  for (loomComm_t comm : comms) {
    const topo::NodeTopology& node = systemOf(comm).nodes()[0];
    EXPECT_EQ(node.source, kXe8640);
    EXPECT_EQ(node.gpus.size(), 4u);
    EXPECT_EQ(node.numaNodes.size(), 8u);
    EXPECT_DOUBLE_EQ(node.nvlink(0, 1), 150.0);
  }
  test::finalizeAndDestroy(comms);
}

TEST(CommTopo, NcclTopoFileLoadsOnEveryRankAndDumpsBack) {
  const std::string ndv4 = std::string(LOOM_TOPO_FIXTURES) + "/azure-ndv4-nccl-dump.xml";
  ScopedEnv file("LOOM_TOPO_FILE", ndv4);
  std::vector<loomComm_t> comms = test::initThreads(2, test::makeId());
  expectOneNodeOfCpuRanks(comms);
  for (loomComm_t comm : comms) {
    const topo::NodeTopology& node = systemOf(comm).nodes()[0];
    EXPECT_EQ(node.format, "nccl");
    EXPECT_EQ(node.gpus.size(), 8u);
    EXPECT_EQ(node.nics.size(), 8u);
    EXPECT_EQ(node.gpus[7].nvlinks, 12);
  }
  // What LOOM_TOPO_DUMP_FILE writes: the NCCL file, then the system view in a comment; it
  // loads back as LOOM_TOPO_FILE.
  std::string dump = topo::dumpText(topo::loadCached(ndv4).get(), systemOf(comms[0]));
  EXPECT_TRUE(contains(dump, "<system version=\"1\">")) << dump.substr(0, 200);
  EXPECT_TRUE(contains(dump, "<!-- loom system view"));
  auto again = topo::loadXmlText(dump, "dump");
  EXPECT_EQ(again->node().gpus.size(), 8u);
  EXPECT_DOUBLE_EQ(again->node().nvlink(0, 5), 300.0);
  test::finalizeAndDestroy(comms);
}

TEST(CommTopo, ThisMachineIsDiscovered) {
  std::vector<loomComm_t> comms = test::initThreads(2, test::makeId());
  expectOneNodeOfCpuRanks(comms);
  const topo::NodeTopology& node = systemOf(comms[0]).nodes()[0];
  EXPECT_EQ(node.source, "this machine");
  EXPECT_GE(node.cores, 1);
  EXPECT_GE(node.numaNodes.size(), 1u);
  EXPECT_GE(systemOf(comms[0]).rank(0).numa, 0);  // the rank runs on one of them
  test::finalizeAndDestroy(comms);
}

TEST(CommTopo, BadTopoFileFallsBackWithoutFailingInit) {
  ScopedEnv file("LOOM_TOPO_FILE", "/nonexistent/topo.xml");
  std::vector<loomComm_t> comms = test::initThreads(2, test::makeId());
  expectOneNodeOfCpuRanks(comms);
  const topo::NodeTopology& node = systemOf(comms[1]).nodes()[0];
  EXPECT_TRUE(contains(node.source, "fallback")) << node.source;
  EXPECT_TRUE(contains(node.source, "/nonexistent/topo.xml")) << node.source;
  test::finalizeAndDestroy(comms);
}

TEST(CommTopo, DumpFileLoadsBack) {
  std::string pattern = testing::TempDir() + "loom_topo_dump_%h_%p.xml";
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  std::string path = Logger::expandFilePattern(pattern, host, getpid());
  unlink(path.c_str());
  {
    ScopedEnv file("LOOM_TOPO_FILE", kXe8640);
    ScopedEnv dump("LOOM_TOPO_DUMP_FILE", pattern);
    std::vector<loomComm_t> comms = test::initThreads(2, test::makeId());
    test::finalizeAndDestroy(comms);
  }
  std::ifstream in(path);
  ASSERT_TRUE(in.good()) << "no dump at " << path;
  std::ostringstream text;
  text << in.rdbuf();
  EXPECT_TRUE(contains(text.str(), "<!-- loom system view")) << text.str().substr(0, 200);
  EXPECT_TRUE(contains(text.str(), "1 node(s), 2 rank(s)"));
  EXPECT_TRUE(contains(text.str(), "path classes between ranks"));
  auto loaded = topo::loadXmlFile(path);
  EXPECT_EQ(loaded->node().gpus.size(), 4u);
  EXPECT_EQ(loaded->node().nics.size(), 6u);
  EXPECT_DOUBLE_EQ(loaded->node().nvlink(2, 3), 150.0);
  unlink(path.c_str());
}

}  // namespace
}  // namespace loom
