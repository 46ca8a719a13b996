// Unit tests of the perf harness's command line: nccl-tests' size syntax and flags.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "perf/harness/device.h"
#include "perf/harness/options.h"

namespace loomperf {
namespace {

ParseStatus parse(std::vector<std::string> args, Options* o, std::string* err) {
  args.insert(args.begin(), "all_reduce_perf");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  return parseOptions(static_cast<int>(args.size()), argv.data(), o, err);
}

TEST(PerfSizeParse, PlainAndSuffixes) {
  EXPECT_EQ(parseSize("8"), 8);
  EXPECT_EQ(parseSize("64K"), 64 * 1024);
  EXPECT_EQ(parseSize("64k"), 64 * 1024);
  EXPECT_EQ(parseSize("256M"), 256.0 * 1024 * 1024);
  EXPECT_EQ(parseSize("2G"), 2.0 * 1024 * 1024 * 1024);
  EXPECT_EQ(parseSize("1.5K"), 1536);
  EXPECT_EQ(parseSize("0"), 0);
}

TEST(PerfSizeParse, RejectsGarbage) {
  EXPECT_LT(parseSize("abc"), 0);
  EXPECT_LT(parseSize("10X"), 0);
  EXPECT_LT(parseSize("10KB"), 0);
  EXPECT_LT(parseSize("-5"), 0);
  EXPECT_LT(parseSize(""), 0);
}

TEST(PerfOptions, DefaultsAreNcclTests) {
  Options o;
  std::string err;
  ASSERT_EQ(parse({}, &o, &err), ParseStatus::kRun) << err;
  EXPECT_EQ(o.minBytes, 32u << 20);
  EXPECT_EQ(o.maxBytes, 32u << 20);
  EXPECT_EQ(o.iters, 20);
  EXPECT_EQ(o.warmupIters, 5);
  EXPECT_EQ(o.check, 1);
  EXPECT_EQ(o.types, std::vector<loomDataType_t>{loomFloat32});
  EXPECT_EQ(o.ops, std::vector<Op>{Op::kSum});
  EXPECT_EQ(o.device, "cpu");
}

TEST(PerfOptions, EveryFlag) {
  Options o;
  std::string err;
  ASSERT_EQ(
      parse({"-t", "2",   "-g", "3",        "-b", "8",  "-e",       "128M",     "-f", "2",  "-i",
             "1K", "-n",  "7",  "-w",       "1",  "-m", "4",        "-N",       "2",  "-c", "3",
             "-o", "max", "-d", "bfloat16", "-r", "1",  "-z",       "1",        "-y", "1",  "-T",
             "30", "-a",  "3",  "-C",       "1",  "-J", "out.json", "--device", "cpu"},
            &o, &err),
      ParseStatus::kRun)
      << err;
  EXPECT_EQ(o.nThreads, 2);
  EXPECT_EQ(o.nGpus, 3);
  EXPECT_EQ(o.minBytes, 8u);
  EXPECT_EQ(o.maxBytes, 128u << 20);
  EXPECT_EQ(o.stepFactor, 2u);
  EXPECT_EQ(o.stepBytes, 1024u);
  EXPECT_EQ(o.iters, 7);
  EXPECT_EQ(o.warmupIters, 1);
  EXPECT_EQ(o.aggIters, 4);
  EXPECT_EQ(o.runCycles, 2);
  EXPECT_EQ(o.check, 3);
  EXPECT_EQ(o.ops, std::vector<Op>{Op::kMax});
  EXPECT_EQ(o.types, std::vector<loomDataType_t>{loomBfloat16});
  EXPECT_EQ(o.root, 1);
  EXPECT_EQ(o.blocking, 1);
  EXPECT_EQ(o.streamNull, 1);
  EXPECT_EQ(o.timeoutSec, 30);
  EXPECT_EQ(o.average, 3);
  EXPECT_EQ(o.reportCputime, 1);
  EXPECT_EQ(o.jsonPath, "out.json");
}

TEST(PerfOptions, AllTypesAllOpsEveryRoot) {
  Options o;
  std::string err;
  ASSERT_EQ(parse({"-d", "all", "-o", "all", "-r", "-1"}, &o, &err), ParseStatus::kRun) << err;
  EXPECT_EQ(o.types.size(), 12u);
  EXPECT_EQ(o.types.front(), loomInt8);
  EXPECT_EQ(o.ops.size(), 6u);
  EXPECT_EQ(o.ops.back(), Op::kMulSum);
  EXPECT_EQ(o.root, -1);
}

TEST(PerfOptions, LocalRegisterSelectsLoomMemAlloc) {
  Options o;
  std::string err;
  EXPECT_EQ(o.localRegister, 0);
  ASSERT_EQ(parse({"-R", "1"}, &o, &err), ParseStatus::kRun) << err;
  EXPECT_EQ(o.localRegister, 1);
  ASSERT_EQ(parse({"--local_register", "2"}, &o, &err), ParseStatus::kRun) << err;
  EXPECT_EQ(o.localRegister, 2);
  EXPECT_EQ(parse({"-R", "3"}, &o, &err), ParseStatus::kError);
  EXPECT_NE(err.find("-R"), std::string::npos) << err;
}

TEST(PerfOptions, HugePagesIsOffByDefaultAndTakesZeroOrOne) {
  Options o;
  std::string err;
  EXPECT_EQ(o.hugePages, 0);
  ASSERT_EQ(parse({"--huge_pages", "1"}, &o, &err), ParseStatus::kRun) << err;
  EXPECT_EQ(o.hugePages, 1);
  EXPECT_EQ(parse({"--huge_pages", "2"}, &o, &err), ParseStatus::kError);
  EXPECT_NE(err.find("--huge_pages"), std::string::npos) << err;
}

TEST(PerfOptions, ErrorsNameTheFlag) {
  Options o;
  std::string err;
  EXPECT_EQ(parse({"-b", "1X"}, &o, &err), ParseStatus::kError);
  EXPECT_NE(err.find("minbytes"), std::string::npos) << err;
  EXPECT_EQ(parse({"-b", "2M", "-e", "1M"}, &o, &err), ParseStatus::kError);
  EXPECT_NE(err.find("maxbytes"), std::string::npos) << err;
  EXPECT_EQ(parse({"-d", "float128"}, &o, &err), ParseStatus::kError);
  EXPECT_NE(err.find("datatype"), std::string::npos) << err;
  EXPECT_EQ(parse({"-o", "xor"}, &o, &err), ParseStatus::kError);
  EXPECT_EQ(parse({"--device", "tpu"}, &o, &err), ParseStatus::kError);
  EXPECT_EQ(parse({"-t", "0"}, &o, &err), ParseStatus::kError);
  EXPECT_EQ(parse({"-a", "4"}, &o, &err), ParseStatus::kError);
  EXPECT_EQ(parse({"-h"}, &o, &err), ParseStatus::kHelp);
}

// --device cuda: -G and a shared legacy default stream are refused; -y 1 with one rank per
// process is fine.
TEST(PerfOptions, CudaRefusesWhatItCannotHonour) {
  Options o;
  std::string err;
  ASSERT_EQ(parse({"--device", "cuda", "-G", "2"}, &o, &err), ParseStatus::kRun) << err;
  EXPECT_EQ(o.device, "cuda");
  EXPECT_EQ(o.cudaGraphLaunches, 2);
  EXPECT_NE(validateCudaOptions(o, 1).find("-G 2"), std::string::npos);
  o.cudaGraphLaunches = 0;
  EXPECT_EQ(validateCudaOptions(o, 4), "");
  o.streamNull = 1;
  EXPECT_EQ(validateCudaOptions(o, 1), "");
  EXPECT_NE(validateCudaOptions(o, 2).find("legacy default stream"), std::string::npos);
}

// nccl-tests' spread: a process's ranks take the devices after the ranks of the processes
// before it on the host, wrapping round, so several ranks share a device.
TEST(PerfOptions, CudaRanksSpreadOverDevices) {
  EXPECT_EQ(cudaDeviceOfRank(0, 4, 0, 2), 0);
  EXPECT_EQ(cudaDeviceOfRank(0, 4, 1, 2), 1);
  EXPECT_EQ(cudaDeviceOfRank(0, 4, 2, 2), 0);
  EXPECT_EQ(cudaDeviceOfRank(1, 2, 1, 8), 3);
  EXPECT_EQ(cudaDeviceOfRank(3, 2, 1, 4), 3);
  EXPECT_EQ(cudaDeviceOfRank(2, 1, 0, 1), 0);
}

}  // namespace
}  // namespace loomperf
