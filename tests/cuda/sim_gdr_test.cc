// GPU ranks over the ib transport on the software NIC (tests/softnic, a test double of an RDMA
// device, loaded as libibverbs) under the simulated runtime (a test double of CUDA): GPUDirect
// RDMA (transports/ib/ib_gdr.h), where the NIC writes into the peer GPU's ring and reads from
// this GPU's, and the staging through the proxy's pinned rings that replaces it when it is
// disabled or the memory cannot be registered. Each way carries the same calls with the same
// bits (two_hosts.h); the in-process matrix over ib is SimExecutor.IbConnectionsUseGpuDirectRdma.
// Nothing here says anything about real GPUs or NICs.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <vector>

#include "loom/loom.h"
#include "src/cuda/runtime.h"
#include "tests/cuda/fork_pair.h"
#include "tests/cuda/two_hosts.h"
#include "tests/test_util.h"

#ifdef LOOM_SOFTNIC_LIB
#include "transports/ib/ib_gdr.h"

namespace loom {
namespace {

using transport::ib::liveGdrRings;

// 0 when this rank's connections are GPUDirect (`direct`) or all staged (not `direct`).
int expectDirect(bool direct) {
  if (direct && liveGdrRings() == 0) return 30;
  if (!direct && liveGdrRings() != 0) return 31;
  return 0;
}

// Both GPUs' rings are registered by dma-buf: every step is one RDMA write from one GPU's slot
// into the other's, with no copy by the proxy.
TEST(SimGdr, TwoHostsWriteEachOthersGpuMemory) {
  test::ScopedEnv lib("LOOM_IBVERBS_LIB", LOOM_SOFTNIC_LIB);
  test::pipelineOnTwoHosts({"ib", nullptr, [](int) { return expectDirect(true); }});
}

TEST(SimGdr, LoomGdrDisableStagesEveryStep) {
  test::ScopedEnv lib("LOOM_IBVERBS_LIB", LOOM_SOFTNIC_LIB);
  test::ScopedEnv gdr("LOOM_GDR_DISABLE", "1");
  test::pipelineOnTwoHosts({"ib", nullptr, [](int) { return expectDirect(false); }});
}

// Rank 0 direct, rank 1 staged: a GPUDirect sender writes into a host ring (header and data
// in one slot) and a host sender writes into a GPUDirect ring (word, then data).
TEST(SimGdr, DirectOnOneSideStagedOnTheOther) {
  test::ScopedEnv lib("LOOM_IBVERBS_LIB", LOOM_SOFTNIC_LIB);
  test::pipelineOnTwoHosts({"ib",
                            [](int r) {
                              if (r == 1) setenv("LOOM_GDR_DISABLE", "1", 1);
                            },
                            [](int r) { return expectDirect(r == 0); }});
}

// Buffers the NIC has registered (loomMemAlloc's device memory, or cudaMalloc memory given to
// loomCommRegister) are read by the NIC in place: the AllGather and Send steps that only copy
// them are posted by address, with no copy into a slot, and the results stay exact.
int expectStepsByAddress(bool some) {
  if (some && transport::ib::gdrStepsByAddress() == 0) return 32;
  if (!some && transport::ib::gdrStepsByAddress() != 0) return 33;
  return expectDirect(true);
}

TEST(SimGdr, LoomMemAllocBuffersAreSentInPlace) {
  test::ScopedEnv lib("LOOM_IBVERBS_LIB", LOOM_SOFTNIC_LIB);
  test::pipelineOnTwoHosts({"ib", nullptr, [](int) { return expectStepsByAddress(true); },
                            test::TwoHostsBuffer::kLoomMemAlloc});
}

TEST(SimGdr, RegisteredBuffersAreSentInPlace) {
  test::ScopedEnv lib("LOOM_IBVERBS_LIB", LOOM_SOFTNIC_LIB);
  test::pipelineOnTwoHosts({"ib", nullptr, [](int) { return expectStepsByAddress(true); },
                            test::TwoHostsBuffer::kRegistered});
}

// Plain cudaMalloc memory is not registered: every step is copied into the GPUDirect slot.
TEST(SimGdr, UnregisteredBuffersAreCopiedIntoTheSlots) {
  test::ScopedEnv lib("LOOM_IBVERBS_LIB", LOOM_SOFTNIC_LIB);
  test::pipelineOnTwoHosts({"ib", nullptr, [](int) { return expectStepsByAddress(false); }});
}

// A grouped Send and Recv on the same registered buffer (in place): the receive may overwrite
// the buffer once the send's steps are posted, so those steps are copied into the slots, not
// posted by address, and each rank ends with exactly its peer's data.
TEST(SimGdr, InPlaceSendRecvOfARegisteredBufferIsExact) {
  test::ScopedEnv lib("LOOM_IBVERBS_LIB", LOOM_SOFTNIC_LIB);
  test::ScopedEnv wire("LOOM_TRANSPORT", "ib");
  test::ScopedEnv host("LOOM_HOSTID", "host-a");  // the child is host-b
  test::ScopedEnv buffsize("LOOM_BUFFSIZE", "65536");
  test::ScopedEnv timeout("LOOM_TIMEOUT", "100");
  constexpr size_t kCount = 300000;
  auto rank = [&](int r, const loomUniqueId& id) -> int {
    if (r == 1) setenv("LOOM_HOSTID", "host-b", 1);
    loomComm_t comm = test::initGpuRank(r, id, r);
    if (comm == nullptr) return 10;
    cuda::DeviceRuntime& rt = cuda::deviceRuntime();
    void* stream = rt.streamCreate();
    void* p = nullptr;
    if (loomMemAlloc(&p, kCount * sizeof(int32_t)) != loomSuccess) return 11;
    auto* buf = static_cast<int32_t*>(p);
    const std::vector<int32_t> in = test::rankInput(kCount, r);
    std::vector<int32_t> out(kCount);
    auto s = static_cast<loomStream_t>(stream);
    for (int round = 0; round < 3; ++round) {
      rt.memcpyAsync(buf, in.data(), kCount * sizeof(int32_t), stream);
      if (loomGroupStart() != loomSuccess ||
          loomSend(buf, kCount, loomInt32, 1 - r, comm, s) != loomSuccess ||
          loomRecv(buf, kCount, loomInt32, 1 - r, comm, s) != loomSuccess ||
          loomGroupEnd() != loomSuccess)
        return 12;
      rt.memcpyAsync(out.data(), buf, kCount * sizeof(int32_t), stream);
      rt.streamSynchronize(stream);
      for (size_t i = 0; i < kCount; ++i)
        if (out[i] != static_cast<int32_t>(i % 1000) * (2 - r)) return 13;
    }
    if (transport::ib::liveGdrRings() == 0) return 14;
    if (loomMemFree(buf) != loomSuccess) return 15;
    rt.streamDestroy(stream);
    return loomCommDestroy(comm) == loomSuccess ? 0 : 16;
  };
  const test::ForkedPair result = test::runForkedPair(rank);
  EXPECT_EQ(result.parent, 0);
  EXPECT_EQ(result.childStatus, 0);
}

// A NIC without dma-buf (the software NIC's no_dmabuf fault): nvidia-peermem takes the device
// pointer where it is loaded; else the connections are staged.
TEST(SimGdr, NoDmabufAndNoPeermemStagesEveryStep) {
  test::ScopedEnv lib("LOOM_IBVERBS_LIB", LOOM_SOFTNIC_LIB);
  test::ScopedEnv fault("SOFTNIC_FAULT", "no_dmabuf");
  transport::ib::setPeermemForTest(0);
  test::pipelineOnTwoHosts({"ib", nullptr, [](int) { return expectDirect(false); }});
}

TEST(SimGdr, NoDmabufFallsBackToPeermem) {
  test::ScopedEnv lib("LOOM_IBVERBS_LIB", LOOM_SOFTNIC_LIB);
  test::ScopedEnv fault("SOFTNIC_FAULT", "no_dmabuf");
  transport::ib::setPeermemForTest(1);
  test::pipelineOnTwoHosts({"ib", nullptr, [](int) { return expectDirect(true); }});
}

// Applies a software NIC fault spec in this process, through the library loom loaded.
bool injectFault(const char* spec) {
  void* lib = dlopen(LOOM_SOFTNIC_LIB, RTLD_NOW | RTLD_NOLOAD);
  if (lib == nullptr) return false;
  auto inject = reinterpret_cast<int (*)(const char*)>(dlsym(lib, "loom_softnic_inject"));
  const bool ok = inject != nullptr && inject(spec) == 0;
  dlclose(lib);
  return ok;
}

// A data connection that breaks under a kernel, direct or staged: rank 1's queue pair meets a
// local fatal error (the software NIC's qp_fatal fault: IBV_EVENT_QP_FATAL, and its work
// request completes with IBV_WC_FATAL_ERR). Rank 1's proxy fails the connection, its kernel
// stops, its communicator reports loomRemoteError and the control channel tells rank 0, whose
// kernel stops too. Neither rank hangs or waits for its timeout (LOOM_TIMEOUT, far away: a
// hang fails the test as loomTimeout).
//   - AllReduce: the fault hits whichever of rank 1's queue pairs posts its 300th request;
//   - Send/Recv: after a first exchange, rank 1 comes late to the second, so rank 0 has
//     filled every slot and has nothing in flight; the fault hits rank 1's first credit write,
//     on a receive connection that reads ahead of its kernel. It is this side's own fault, so
//     it is raised at once (RecvConnection::failedHere), where a peer's exit would be kept
//     until a step is asked for, and rank 0 would wait for that credit until its timeout.
void aQueuePairDies(const char* gdrDisable, bool receiverOnly) {
  test::ScopedEnv lib("LOOM_IBVERBS_LIB", LOOM_SOFTNIC_LIB);
  test::ScopedEnv gdr("LOOM_GDR_DISABLE", gdrDisable);
  test::ScopedEnv wire("LOOM_TRANSPORT", "ib");
  test::ScopedEnv host("LOOM_HOSTID", "host-a");  // the child is host-b
  test::ScopedEnv buffsize("LOOM_BUFFSIZE", "65536");
  test::ScopedEnv timeout("LOOM_TIMEOUT", "100");
  constexpr size_t kCount = 300000;
  auto rank = [&](int r, const loomUniqueId& id) -> int {
    if (r == 1) {
      setenv("LOOM_HOSTID", "host-b", 1);
      if (!receiverOnly) setenv("SOFTNIC_FAULT", "qp_fatal@300", 1);
    }
    loomComm_t comm = test::initGpuRank(r, id, r);
    if (comm == nullptr) return 10;
    cuda::DeviceRuntime& rt = cuda::deviceRuntime();
    void* stream = rt.streamCreate();
    auto* buf = static_cast<float*>(rt.malloc(kCount * sizeof(float)));
    rt.memsetAsync(buf, 0, kCount * sizeof(float), stream);
    auto s = static_cast<loomStream_t>(stream);
    loomResult_t async = loomSuccess;
    for (int call = 0; call < 20 && async == loomSuccess; ++call) {
      if (receiverOnly && r == 1 && call == 1) {
        usleep(300000);
        if (!injectFault("qp_fatal")) return 12;  // the next request fails
      }
      const loomResult_t enqueued =
          !receiverOnly ? loomAllReduce(buf, buf, kCount, loomFloat32, loomSum, comm, s)
          : r == 0      ? loomSend(buf, kCount, loomFloat32, 1, comm, s)
                        : loomRecv(buf, kCount, loomFloat32, 0, comm, s);
      rt.streamSynchronize(stream);  // the kernel ends: no hang
      if (loomCommGetAsyncError(comm, &async) != loomSuccess) return 11;
      if (enqueued != loomSuccess && async == loomSuccess) async = enqueued;
    }
    if (async != loomRemoteError) return 20 + static_cast<int>(async);
    loomCommAbort(comm);
    return 0;
  };
  const test::ForkedPair result = test::runForkedPair(rank);
  EXPECT_EQ(result.parent, 0);
  EXPECT_EQ(result.childStatus, 0);
}

TEST(SimGdr, AQueuePairThatDiesFailsBothRanks) { aQueuePairDies("0", false); }
TEST(SimGdr, AQueuePairThatDiesFailsBothRanksStaged) { aQueuePairDies("1", false); }
TEST(SimGdr, AReceiversQueuePairThatDiesFailsBothRanks) { aQueuePairDies("0", true); }
TEST(SimGdr, AReceiversQueuePairThatDiesFailsBothRanksStaged) { aQueuePairDies("1", true); }

}  // namespace
}  // namespace loom

#else
TEST(SimGdr, NeedsTheIbTransport) {
  GTEST_SKIP() << "this build has no ib transport (LOOM_WITH_IBVERBS=OFF)";
}
#endif
