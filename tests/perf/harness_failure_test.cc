// The harness end to end on purpose-broken collectives: a wrong result must show in #wrong,
// the footer must say FAILED and the exit status must be 1; a rank that never arrives must be
// turned by -T into a message and exit status 1 instead of a hang.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "perf/harness/collectives.h"
#include "perf/harness/runner.h"

namespace loomperf {
namespace {

int runBench(const CollSpec& spec, std::vector<std::string> args) {
  args.insert(args.begin(), "broken_perf");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  return benchMain(static_cast<int>(args.size()), argv.data(), spec);
}

// AllReduce whose rank 0 receives a sum off by one element: loom's result is right, the
// harness must notice the corruption.
loomResult_t corruptingAllReduce(const void* s, void* r, size_t count, loomDataType_t type,
                                 loomRedOp_t op, const CallSite& site, loomComm_t comm,
                                 loomStream_t stream) {
  loomResult_t res = allReduceSpec().run(s, r, count, type, op, site, comm, stream);
  if (res == loomSuccess && stream != nullptr) res = loomStreamSynchronize(stream);
  if (res == loomSuccess && site.rank == 0 && count > 0) static_cast<char*>(r)[0] ^= 0x40;
  return res;
}

// Rank 1 never calls the collective, so rank 0 waits for it forever.
loomResult_t stuckAllReduce(const void* s, void* r, size_t count, loomDataType_t type,
                            loomRedOp_t op, const CallSite& site, loomComm_t comm,
                            loomStream_t stream) {
  if (site.rank == 1) return loomSuccess;
  return allReduceSpec().run(s, r, count, type, op, site, comm, stream);
}

TEST(PerfHarnessEndToEnd, WrongResultsFailTheRun) {
  CollSpec broken = allReduceSpec();
  broken.run = corruptingAllReduce;
  testing::internal::CaptureStdout();
  int status =
      runBench(broken, {"-t", "2", "-b", "64", "-e", "256", "-f", "4", "-w", "0", "-n", "1"});
  std::string out = testing::internal::GetCapturedStdout();
  EXPECT_EQ(status, 1) << out;
  EXPECT_NE(out.find("# Out of bounds values : 4 FAILED"), std::string::npos) << out;
  // Each row: one wrong element out of place and one in place.
  EXPECT_NE(out.find("sum      -1"), std::string::npos) << out;
}

TEST(PerfHarnessEndToEnd, CorrectResultsPass) {
  testing::internal::CaptureStdout();
  int status = runBench(allReduceSpec(),
                        {"-t", "2", "-b", "64", "-e", "256", "-f", "4", "-w", "0", "-n", "1"});
  std::string out = testing::internal::GetCapturedStdout();
  EXPECT_EQ(status, 0) << out;
  EXPECT_NE(out.find("# Out of bounds values : 0 OK"), std::string::npos) << out;
}

TEST(PerfHarnessEndToEndDeathTest, TimeoutAbortsAStuckRun) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  CollSpec stuck = allReduceSpec();
  stuck.run = stuckAllReduce;
  EXPECT_EXIT(runBench(stuck, {"-t", "2", "-b", "64", "-e", "64", "-w", "0", "-n", "1", "-T", "1"}),
              testing::ExitedWithCode(1), "Test timeout \\(1s\\)");
}

}  // namespace
}  // namespace loomperf
