// The CUDA runtime behind the seam on the machine the tests run on. Without a driver or GPU
// (the normal case for CI) it reports no device and every call fails with a message, never a
// crash; CUDA communicators are refused with a message that says no driver or device was
// found, and CPU communicators never load the seam at all. Runs without LOOM_CUDA_SIM.
#include <gtest/gtest.h>

#include <vector>

#include "loom/loom.h"
#include "src/base/error.h"
#include "src/cuda/runtime.h"
#include "tests/test_util.h"
#if LOOM_HAVE_CUDA
#include "src/cuda/cudart_runtime.h"
#endif

namespace loom {
namespace {

using test::contains;
using test::messageOf;

#if LOOM_HAVE_CUDA
TEST(CudartRuntime, ReportsNoDeviceWithoutCrashing) {
  auto rt = cuda::makeCudartRuntime();
  EXPECT_STREQ(rt->name(), "cudart");
  if (rt->deviceCount() > 0) GTEST_SKIP() << "this machine has a GPU; tests/cuda/gpu covers it";
  EXPECT_EQ(rt->deviceCount(), 0);
  EXPECT_EQ(rt->deviceCount(), 0);  // the failed first call left nothing sticky behind
  std::vector<char> host(64);
  EXPECT_EQ(rt->pointerInfo(host.data()).kind, cuda::PointerKind::kUnregistered);
  const std::string msg = messageOf<CudaError>([&] { rt->malloc(64); });
  EXPECT_TRUE(contains(msg, "cudaMalloc failed")) << msg;
  EXPECT_TRUE(contains(messageOf<CudaError>([&] { rt->streamCreate(); }), "cudaStream"));
  const cuda::DriverEntryPoints& d = rt->driver();  // no driver: no entry points
  EXPECT_EQ(d.cuMemCreate, nullptr);
  EXPECT_EQ(d.cuStreamWaitValue32, nullptr);
  EXPECT_EQ(d.cuMemGetHandleForAddressRange, nullptr);
}
#endif

TEST(CudaComm, CpuCommunicatorsNeverLoadTheSeam) {
  ASSERT_FALSE(cuda::deviceRuntimeLoaded());
  loomComm_t comms[2] = {nullptr, nullptr};
  ASSERT_LOOM_OK(loomCommInitAll(comms, 2, nullptr));
  test::runThreads(2, [&](int r) {
    std::vector<float> buf(1000, 1.0f + r);
    ASSERT_LOOM_OK(
        loomAllReduce(buf.data(), buf.data(), buf.size(), loomFloat32, loomSum, comms[r], nullptr));
    EXPECT_EQ(buf[999], 3.0f);
  });
  void* mem = nullptr;
  ASSERT_LOOM_OK(loomMemAlloc(&mem, 4096));
  ASSERT_LOOM_OK(loomMemFree(mem));
  for (loomComm_t c : comms) ASSERT_LOOM_OK(loomCommDestroy(c));
  EXPECT_FALSE(cuda::deviceRuntimeLoaded());
}

TEST(CudaComm, InitWithoutDriverSaysSo) {
  if (cuda::deviceRuntime().deviceCount() > 0) GTEST_SKIP() << "this machine has a GPU";
  loomConfig_t config = LOOM_CONFIG_INITIALIZER;
  config.device = 0;
  loomComm_t comm = nullptr;
  loomUniqueId id;
  ASSERT_LOOM_OK(loomGetUniqueId(&id));
  const loomResult_t r = loomCommInitRankConfig(&comm, 1, id, 0, &config);
  const std::string msg = loomGetLastError(nullptr);
#if LOOM_HAVE_CUDA
  EXPECT_EQ(r, loomInvalidArgument) << msg;
  EXPECT_TRUE(contains(msg, "no CUDA driver or device was found")) << msg;
#else
  EXPECT_EQ(r, loomInvalidUsage) << msg;
  EXPECT_TRUE(contains(msg, "built without CUDA")) << msg;
#endif
  EXPECT_EQ(comm, nullptr);

  const int devlist[2] = {0, 0};
  loomComm_t comms[2] = {nullptr, nullptr};
  EXPECT_NE(loomCommInitAll(comms, 2, devlist), loomSuccess);
  EXPECT_TRUE(contains(loomGetLastError(nullptr), "CUDA")) << loomGetLastError(nullptr);
}

}  // namespace
}  // namespace loom
