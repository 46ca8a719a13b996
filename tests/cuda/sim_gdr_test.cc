// GPU ranks over the ib transport on the software NIC (tests/softnic, a test double of an RDMA
// device, loaded as libibverbs) under the simulated runtime (a test double of CUDA): GPUDirect
// RDMA (transports/ib/ib_gdr.h), where the NIC writes into the peer GPU's ring and reads from
// this GPU's, and the staging through the proxy's pinned rings that replaces it when it is
// disabled or the memory cannot be registered. Each way carries the same calls with the same
// bits (two_hosts.h); the in-process matrix over ib is SimExecutor.IbConnectionsUseGpuDirectRdma.
// Nothing here says anything about real GPUs or NICs.
#include <gtest/gtest.h>

#include <cstdlib>

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

// A data connection that breaks under a kernel (the software NIC kills rank 1's queue pair
// after 300 work requests, IBV_EVENT_QP_FATAL), direct or staged: rank 1's proxy fails the
// send, its kernel stops, its communicator reports loomRemoteError and the control channel tells
// rank 0, whose kernel stops too. Neither rank hangs or waits for its timeout.
void aQueuePairDies(const char* gdrDisable) {
  test::ScopedEnv lib("LOOM_IBVERBS_LIB", LOOM_SOFTNIC_LIB);
  test::ScopedEnv gdr("LOOM_GDR_DISABLE", gdrDisable);
  test::ScopedEnv wire("LOOM_TRANSPORT", "ib");
  test::ScopedEnv host("LOOM_HOSTID", "host-a");  // the child is host-b
  test::ScopedEnv buffsize("LOOM_BUFFSIZE", "65536");
  test::ScopedEnv timeout("LOOM_TIMEOUT", "600");
  constexpr size_t kCount = 300000;
  auto rank = [&](int r, const loomUniqueId& id) -> int {
    if (r == 1) {
      setenv("LOOM_HOSTID", "host-b", 1);
      setenv("SOFTNIC_FAULT", "qp_fatal@300", 1);
    }
    loomComm_t comm = test::initGpuRank(r, id, r);
    if (comm == nullptr) return 10;
    cuda::DeviceRuntime& rt = cuda::deviceRuntime();
    void* stream = rt.streamCreate();
    auto* buf = static_cast<float*>(rt.malloc(kCount * sizeof(float)));
    rt.memsetAsync(buf, 0, kCount * sizeof(float), stream);
    loomResult_t async = loomSuccess;
    for (int call = 0; call < 20 && async == loomSuccess; ++call) {
      const loomResult_t enqueued = loomAllReduce(buf, buf, kCount, loomFloat32, loomSum, comm,
                                                  static_cast<loomStream_t>(stream));
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

TEST(SimGdr, AQueuePairThatDiesFailsBothRanks) { aQueuePairDies("0"); }
TEST(SimGdr, AQueuePairThatDiesFailsBothRanksStaged) { aQueuePairDies("1"); }

}  // namespace
}  // namespace loom

#else
TEST(SimGdr, NeedsTheIbTransport) {
  GTEST_SKIP() << "this build has no ib transport (LOOM_WITH_IBVERBS=OFF)";
}
#endif
