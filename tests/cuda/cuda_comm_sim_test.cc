// CUDA communicators under the simulated runtime (LOOM_CUDA_SIM=1, LOOM_CUDA_SIM_DEVICES=2,
// set by ctest for this binary): device ordinals, rank info, ranks sharing a GPU, buffer
// checks by pointer attributes, and loomMemAlloc's device memory.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "loom/loom.h"
#include "src/comm/comm_registry.h"
#include "src/comm/device.h"
#include "src/cuda/runtime.h"
#include "tests/test_util.h"

namespace loom {
namespace {

using test::contains;

class CudaSimComm : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_STREQ(cuda::deviceRuntime().name(), "sim") << "run with LOOM_CUDA_SIM=1";
    ASSERT_EQ(cuda::deviceRuntime().deviceCount(), 2) << "run with LOOM_CUDA_SIM_DEVICES=2";
    cuda::deviceRuntime().setDevice(0);
  }
  std::vector<loomComm_t> initAll(std::vector<int> devices) {
    std::vector<loomComm_t> comms(devices.size(), nullptr);
    EXPECT_EQ(loomCommInitAll(comms.data(), static_cast<int>(devices.size()), devices.data()),
              loomSuccess)
        << loomGetLastError(nullptr);
    return comms;
  }
  static void destroy(const std::vector<loomComm_t>& comms) {
    for (loomComm_t c : comms) EXPECT_EQ(loomCommDestroy(c), loomSuccess);
  }
};

TEST_F(CudaSimComm, RanksOnSharedAndDistinctGpusKnowEachOthersGpu) {
  std::vector<loomComm_t> comms = initAll({0, 0, 1});
  for (int r = 0; r < 3; ++r) {
    int device = -7;
    ASSERT_EQ(loomCommDevice(comms[r], &device), loomSuccess);
    EXPECT_EQ(device, r < 2 ? 0 : 1);
  }
  const cuda::DeviceIdentity gpu0 = cuda::deviceRuntime().identity(0);
  std::shared_ptr<Comm> c = findComm(comms[2]);
  for (int r = 0; r < 3; ++r) {
    const RankInfo& info = c->rankInfo(r);
    const bool onGpu0 = r < 2;
    EXPECT_EQ(std::memcmp(info.gpuUuid, gpu0.uuid.data(), 16) == 0, onGpu0) << r;
    EXPECT_STREQ(info.gpuBusId, onGpu0 ? "0000:10:00.0" : "0000:11:00.0");
    EXPECT_TRUE(info.gpuCaps & cuda::kCapIpcLegacy) << r;
  }
  destroy(comms);
}

TEST_F(CudaSimComm, OrdinalBeyondTheVisibleDevicesIsRefused) {
  loomConfig_t config = LOOM_CONFIG_INITIALIZER;
  config.device = 2;
  loomUniqueId id;
  ASSERT_EQ(loomGetUniqueId(&id), loomSuccess);
  loomComm_t comm = nullptr;
  EXPECT_EQ(loomCommInitRankConfig(&comm, 1, id, 0, &config), loomInvalidArgument);
  const std::string msg = loomGetLastError(nullptr);
  EXPECT_TRUE(contains(msg, "only 2 CUDA device(s)")) << msg;
}

// Every buffer kind against a device-0 communicator (one rank, so accepted calls run alone).
TEST_F(CudaSimComm, BuffersAreCheckedByPointerAttributes) {
  std::vector<loomComm_t> comms = initAll({0});
  cuda::DeviceRuntime& rt = cuda::deviceRuntime();
  constexpr size_t kCount = 256;
  constexpr size_t kBytes = kCount * sizeof(float);
  auto allReduce = [&](void* send, void* recv) {
    const loomResult_t r =
        loomAllReduce(send, recv, kCount, loomFloat32, loomSum, comms[0], nullptr);
    return std::make_pair(r, std::string(loomGetLastError(nullptr)));
  };
  void* dev0 = rt.malloc(kBytes * 2);
  rt.setDevice(1);
  void* dev1 = rt.malloc(kBytes);
  rt.setDevice(0);
  void* pinned = rt.hostAlloc(kBytes, cuda::kHostDefault);
  void* managed = rt.mallocManaged(kBytes);
  std::vector<float> pageable(kCount);
  std::vector<float> registered(kCount);
  rt.hostRegister(registered.data(), kBytes, cuda::kHostDefault);

  auto [r, msg] = allReduce(pageable.data(), dev0);
  EXPECT_EQ(r, loomInvalidArgument);
  EXPECT_TRUE(contains(msg, "sendbuff")) << msg;
  EXPECT_TRUE(contains(msg, "is pageable host memory")) << msg;

  std::tie(r, msg) = allReduce(dev0, dev1);
  EXPECT_EQ(r, loomInvalidArgument);
  EXPECT_TRUE(contains(msg, "recvbuff")) << msg;
  EXPECT_TRUE(contains(msg, "device memory of CUDA device 1")) << msg;

  // The receive buffer is half of what the call writes.
  float* gatherRecv = static_cast<float*>(rt.malloc(kBytes / 2));
  EXPECT_EQ(loomAllGather(dev0, gatherRecv, kCount, loomFloat32, comms[0], nullptr),
            loomInvalidArgument);
  msg = loomGetLastError(nullptr);
  EXPECT_TRUE(contains(msg, "ends in pageable host memory")) << msg;

  for (void* ok : {dev0, pinned, managed, static_cast<void*>(registered.data())}) {
    std::tie(r, msg) = allReduce(ok, ok);
    EXPECT_EQ(r, loomSuccess) << msg;
  }
  rt.streamSynchronize(nullptr);
  rt.hostUnregister(registered.data());
  rt.free(gatherRecv);
  rt.free(managed);
  rt.freeHost(pinned);
  rt.free(dev1);
  rt.free(dev0);
  destroy(comms);
}

TEST_F(CudaSimComm, MemAllocGivesDeviceMemoryOnACudaCommunicatorsDevice) {
  cuda::DeviceRuntime& rt = cuda::deviceRuntime();
  void* host = nullptr;
  ASSERT_EQ(loomMemAlloc(&host, 4096), loomSuccess);  // no CUDA communicator yet: host memory
  EXPECT_EQ(rt.pointerInfo(host).kind, cuda::PointerKind::kUnregistered);

  std::vector<loomComm_t> comms = initAll({0});
  void* dev = nullptr;
  ASSERT_EQ(loomMemAlloc(&dev, 10000), loomSuccess);
  cuda::PointerInfo info = rt.pointerInfo(static_cast<char*>(dev) + 9999);
  EXPECT_EQ(info.kind, cuda::PointerKind::kDevice);
  EXPECT_EQ(info.device, 0);
  std::vector<char> copy(10000, 1);
  rt.memcpy(copy.data(), dev, copy.size());
  EXPECT_EQ(std::count(copy.begin(), copy.end(), 0), 10000);  // zero-filled
  // It is IPC-exportable, and the communicator takes it.
  EXPECT_NO_THROW(rt.ipcGetMemHandle(dev));
  EXPECT_EQ(loomAllReduce(dev, dev, 100, loomFloat32, loomSum, comms[0], nullptr), loomSuccess);
  rt.streamSynchronize(nullptr);
  // The current device has no CUDA communicator: host memory.
  rt.setDevice(1);
  void* onOther = nullptr;
  ASSERT_EQ(loomMemAlloc(&onOther, 64), loomSuccess);
  EXPECT_EQ(rt.pointerInfo(onOther).kind, cuda::PointerKind::kUnregistered);
  rt.setDevice(0);
  EXPECT_EQ(loomMemFree(dev), loomSuccess);
  EXPECT_EQ(rt.pointerInfo(dev).kind, cuda::PointerKind::kUnregistered);
  EXPECT_EQ(loomMemFree(dev), loomInvalidArgument);
  EXPECT_EQ(loomMemFree(onOther), loomSuccess);
  EXPECT_EQ(loomMemFree(host), loomSuccess);
  destroy(comms);
}

RankInfo gpuRank(int rank, int pid, uint8_t uuidByte, uint32_t caps) {
  RankInfo info;
  info.rank = rank;
  info.pid = pid;
  info.hostHash = 77;
  info.device = 0;
  info.gpuUuid[0] = uuidByte;
  info.gpuCaps = caps;
  std::strcpy(info.gpuBusId, "0000:10:00.0");
  return info;
}

TEST_F(CudaSimComm, ProcessesSharingAGpuWithoutMpsWarnOnce) {
  ::testing::internal::CaptureStderr();
  // Threads of one process, distinct GPUs, or MPS: no warning.
  checkGpuSharing({gpuRank(0, 10, 1, 0), gpuRank(1, 10, 1, 0)}, 0);
  checkGpuSharing({gpuRank(0, 10, 1, 0), gpuRank(1, 11, 2, 0)}, 0);
  checkGpuSharing({gpuRank(0, 10, 1, cuda::kCapMps), gpuRank(1, 11, 1, cuda::kCapMps)}, 0);
  std::string out = ::testing::internal::GetCapturedStderr();
  EXPECT_FALSE(contains(out, "MPS")) << out;

  ::testing::internal::CaptureStderr();
  checkGpuSharing({gpuRank(0, 10, 1, 0), gpuRank(1, 11, 1, 0)}, 0);
  checkGpuSharing({gpuRank(0, 10, 1, 0), gpuRank(1, 11, 1, 0)}, 1);
  out = ::testing::internal::GetCapturedStderr();
  EXPECT_TRUE(contains(out, "without MPS") || contains(out, "MPS is not running")) << out;
  EXPECT_EQ(out.find("MPS is not running"), out.rfind("MPS is not running")) << out;
}

}  // namespace
}  // namespace loom
