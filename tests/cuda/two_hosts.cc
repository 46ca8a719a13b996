#include "tests/cuda/two_hosts.h"

#include <gtest/gtest.h>

#include <cstdlib>

#include "src/comm/comm_registry.h"
#include "src/cuda/runtime.h"
#include "src/exec/cuda/cuda_executor.h"
#include "tests/cuda/fork_pair.h"
#include "tests/test_util.h"

namespace loom::test {

std::vector<int32_t> rankInput(size_t count, int r) {
  std::vector<int32_t> in(count);
  for (size_t i = 0; i < count; ++i) in[i] = static_cast<int32_t>(i % 1000) * (r + 1);
  return in;
}

loomComm_t initGpuRank(int r, const loomUniqueId& id, int device) {
  loomConfig_t config = LOOM_CONFIG_INITIALIZER;
  config.device = device;
  loomComm_t comm = nullptr;
  if (loomCommInitRankConfig(&comm, 2, id, r, &config) != loomSuccess) return nullptr;
  cuda::deviceRuntime().setDevice(device);
  return comm;
}

namespace {

// One rank's three rounds; 0, or the code of the first wrong thing.
int pipelineRank(int r, loomComm_t comm, TwoHostsBuffer kind) {
  constexpr size_t kCount = 300000;  // 1.2 MB: about 150 steps per pass
  constexpr size_t kBytes = 2 * kCount * sizeof(int32_t);
  cuda::DeviceRuntime& rt = cuda::deviceRuntime();
  void* stream = rt.streamCreate();
  int32_t* buf = nullptr;
  void* registration = nullptr;
  if (kind == TwoHostsBuffer::kLoomMemAlloc) {
    void* p = nullptr;
    if (loomMemAlloc(&p, kBytes) != loomSuccess) return 20;
    buf = static_cast<int32_t*>(p);
  } else {
    buf = static_cast<int32_t*>(rt.malloc(kBytes));
    if (kind == TwoHostsBuffer::kRegistered &&
        loomCommRegister(comm, buf, kBytes, &registration) != loomSuccess)
      return 21;
  }
  const std::vector<int32_t> in = rankInput(kCount, r);
  std::vector<int32_t> out(2 * kCount);
  auto s = static_cast<loomStream_t>(stream);
  for (int round = 0; round < 3; ++round) {
    rt.memcpyAsync(buf, in.data(), kCount * sizeof(int32_t), stream);
    if (loomAllReduce(buf, buf, kCount, loomInt32, loomSum, comm, s) != loomSuccess) return 11;
    rt.memcpyAsync(out.data(), buf, kCount * sizeof(int32_t), stream);
    rt.streamSynchronize(stream);
    for (size_t i = 0; i < kCount; ++i)
      if (out[i] != static_cast<int32_t>(i % 1000) * 3) return 12;
    rt.memcpyAsync(buf + r * kCount, in.data(), kCount * sizeof(int32_t), stream);
    if (loomAllGather(buf + r * kCount, buf, kCount, loomInt32, comm, s) != loomSuccess) return 13;
    rt.memcpyAsync(out.data(), buf, 2 * kCount * sizeof(int32_t), stream);
    rt.streamSynchronize(stream);
    for (int from = 0; from < 2; ++from)
      for (size_t i = 0; i < kCount; ++i)
        if (out[from * kCount + i] != static_cast<int32_t>(i % 1000) * (from + 1)) return 14;
    // Rank 0 sends its input (where AllGather put it) to rank 1, into a poisoned buffer.
    if (r == 1) rt.memsetAsync(buf, 0xff, kCount * sizeof(int32_t), stream);
    const loomResult_t p2p = r == 0 ? loomSend(buf, kCount, loomInt32, 1, comm, s)
                                    : loomRecv(buf, kCount, loomInt32, 0, comm, s);
    if (p2p != loomSuccess) return 15;
    // The send's steps may go by address (GPUDirect from a registered buffer): the call ends
    // only once they are read, so poisoning its buffer next on the stream cannot reach rank 1.
    if (r == 0) rt.memsetAsync(buf, 0xee, kCount * sizeof(int32_t), stream);
    rt.memcpyAsync(out.data(), buf, kCount * sizeof(int32_t), stream);
    rt.streamSynchronize(stream);
    if (r == 1)
      for (size_t i = 0; i < kCount; ++i)
        if (out[i] != static_cast<int32_t>(i % 1000)) return 16;
  }
  loomResult_t async = loomInternalError;
  if (loomCommGetAsyncError(comm, &async) != loomSuccess || async != loomSuccess) return 17;
  auto& executor = static_cast<CudaExecutor&>(executorOf(*findComm(comm)));
  if (executor.deviceLaunches() == 0) return 18;
  if (registration != nullptr && loomCommDeregister(comm, registration) != loomSuccess) return 22;
  if (kind == TwoHostsBuffer::kLoomMemAlloc) {
    if (loomMemFree(buf) != loomSuccess) return 23;
  } else {
    rt.free(buf);
  }
  rt.streamDestroy(stream);
  return 0;
}

}  // namespace

void pipelineOnTwoHosts(const TwoHostsRun& run) {
  ScopedEnv wire("LOOM_TRANSPORT", run.transport);
  ScopedEnv host("LOOM_HOSTID", "host-a");       // the child is host-b
  ScopedEnv buffsize("LOOM_BUFFSIZE", "65536");  // 8 slots of 8 KiB
  ScopedEnv timeout("LOOM_TIMEOUT", "120");
  auto rank = [&](int r, const loomUniqueId& id) -> int {
    if (r == 1) setenv("LOOM_HOSTID", "host-b", 1);
    if (run.beforeInit) run.beforeInit(r);
    loomComm_t comm = initGpuRank(r, id, r);
    if (comm == nullptr) return 10;
    if (const int failed = pipelineRank(r, comm, run.buffer); failed != 0) return failed;
    if (run.afterCalls)
      if (const int failed = run.afterCalls(r); failed != 0) return failed;
    return loomCommDestroy(comm) == loomSuccess ? 0 : 19;
  };
  const ForkedPair result = runForkedPair(rank);
  EXPECT_EQ(result.parent, 0);
  EXPECT_EQ(result.childStatus, 0);
}

}  // namespace loom::test
