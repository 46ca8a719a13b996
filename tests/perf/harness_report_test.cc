// Unit tests of the harness's output: nccl-tests' number format, rank lines, the JSON writer
// and the launch detection.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "perf/harness/json_writer.h"
#include "perf/harness/launch.h"
#include "perf/harness/report.h"

namespace loomperf {
namespace {

TEST(PerfReport, FloatFormatLikeNcclTests) {
  EXPECT_EQ(floatStr(12.3456, 7), "  12.35");
  EXPECT_EQ(floatStr(12345.6, 7), "12345.6");
  EXPECT_EQ(floatStr(1234567, 7), "1234567");
  EXPECT_EQ(floatStr(123456789, 7), "1.2e+08");
  EXPECT_EQ(floatStr(0.5, 6), "  0.50");
  EXPECT_EQ(floatStr(1234.5, 6), "1234.5");
}

TEST(PerfReport, RankLineParsesLikeNcclTests) {
  std::string line = rankLine(3, 0, 4242, "node7", -1, "cpu", "loom CPU communicator");
  EXPECT_EQ(line,
            "#  Rank  3 Group  0 Pid   4242 on      node7 device -1 [cpu] loom CPU communicator\n");
}

TEST(PerfJson, WritesNestedValuesWithCommas) {
  JsonWriter w;
  w.beginObject();
  w.key("version");
  w.integer(1);
  w.key("args");
  w.beginList();
  w.str("a\"b");
  w.str("c\\d\n");
  w.endList();
  w.key("x");
  w.number(1.5);
  w.key("n");
  w.null();
  w.key("ok");
  w.boolString(true);
  w.key("empty");
  w.beginObject();
  w.endObject();
  w.endObject();
  EXPECT_TRUE(w.complete());
  EXPECT_EQ(
      w.drain(),
      R"({"version":1,"args":["a\"b","c\\d\n"],"x":1.500000,"n":null,"ok":"true","empty":{}})");
}

TEST(PerfJson, CloseAllFinishesADocument) {
  JsonWriter w;
  w.beginObject();
  w.key("results");
  w.beginList();
  w.beginObject();
  w.key("size");
  w.closeAll();
  EXPECT_EQ(w.drain(), R"({"results":[{"size":null}]})");
  EXPECT_EQ(jsonQuote(std::string("\x01", 1)), "\"\\u0001\"");
}

TEST(PerfJson, MisuseThrows) {
  JsonWriter w;
  w.beginObject();
  EXPECT_THROW(w.integer(3), std::logic_error);
  EXPECT_THROW(w.endList(), std::logic_error);
}

TEST(PerfLaunch, DetectsEachLauncher) {
  std::map<std::string, std::string> vars;
  auto env = [&](const char* n) -> const char* {
    auto it = vars.find(n);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
  Launch l;
  std::string err;
  ASSERT_TRUE(detectLaunch(env, true, &l, &err));
  EXPECT_EQ(l.mode, LaunchMode::kThreads);

  vars = {{"RANK", "2"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "0"}};
  ASSERT_TRUE(detectLaunch(env, true, &l, &err)) << err;
  EXPECT_EQ(l.mode, LaunchMode::kEnv);
  EXPECT_EQ(l.proc, 2);
  EXPECT_EQ(l.nprocs, 4);
  EXPECT_EQ(l.localProc, 0);
  EXPECT_EQ(l.source, "torchrun");

  vars = {{"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "2"}, {"SLURM_LOCALID", "1"}};
  ASSERT_TRUE(detectLaunch(env, true, &l, &err)) << err;
  EXPECT_EQ(l.source, "slurm");
  EXPECT_EQ(l.proc, 1);

  vars = {{"OMPI_COMM_WORLD_SIZE", "2"}, {"OMPI_COMM_WORLD_RANK", "1"}};
  ASSERT_TRUE(detectLaunch(env, true, &l, &err)) << err;
  EXPECT_EQ(l.mode, LaunchMode::kMpi);
  ASSERT_TRUE(detectLaunch(env, false, &l, &err)) << err;  // no MPI built: the variables
  EXPECT_EQ(l.mode, LaunchMode::kEnv);
  EXPECT_EQ(l.proc, 1);

  vars = {{"RANK", "4"}, {"WORLD_SIZE", "4"}};
  EXPECT_FALSE(detectLaunch(env, true, &l, &err));
  EXPECT_NE(err.find("WORLD_SIZE"), std::string::npos) << err;
  vars = {{"WORLD_SIZE", "4"}};
  EXPECT_FALSE(detectLaunch(env, true, &l, &err));
  EXPECT_NE(err.find("RANK"), std::string::npos) << err;
}

TEST(ReportEnv, KeepsRunVariablesAndRedactsSecrets) {
  EXPECT_EQ(runEnvironmentEntry("LOOM_ALGO=ring"), "LOOM_ALGO=ring");
  EXPECT_EQ(runEnvironmentEntry("NCCL_DEBUG=INFO"), "NCCL_DEBUG=INFO");
  EXPECT_EQ(runEnvironmentEntry("WORLD_SIZE=4"), "WORLD_SIZE=4");
  EXPECT_EQ(runEnvironmentEntry("LOOM_COMM_SECRET=hunter2"), "LOOM_COMM_SECRET=<redacted>");
  EXPECT_EQ(runEnvironmentEntry("HOME=/root"), "");
  EXPECT_EQ(runEnvironmentEntry("AWS_SECRET_ACCESS_KEY=x"), "");
  EXPECT_EQ(runEnvironmentEntry("GITHUB_TOKEN=x"), "");
}

}  // namespace
}  // namespace loomperf
