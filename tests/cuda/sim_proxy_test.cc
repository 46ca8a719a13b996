// GPU ranks over a wire transport (transports/proxy/proxy_connection.h) under the simulated
// runtime: the device program steps each connection's proxy ring in pinned host memory and
// the communicator's proxy thread moves its steps over TCP. Results are bit-identical to CPU
// communicators (SimExecutor.WireConnectionsRunThroughTheProxy, the whole matrix); these tests
// cover what the proxy adds: calls that each need the wire, pipelined through a ring much
// smaller than the call, and a peer whose death reaches the stream as its error, not a hang.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "loom/loom.h"
#include "src/comm/comm_registry.h"
#include "src/cuda/runtime.h"
#include "src/exec/cuda/cuda_executor.h"
#include "tests/cuda/fork_pair.h"
#include "tests/test_util.h"
#include "tests/transports/transport_test_util.h"

namespace loom {
namespace {

// Exact int32 sums whatever the order: rank r contributes (i % 1000) * (r + 1).
std::vector<int32_t> rankInput(size_t count, int r) {
  std::vector<int32_t> in(count);
  for (size_t i = 0; i < count; ++i) in[i] = static_cast<int32_t>(i % 1000) * (r + 1);
  return in;
}

// Rank r of a forked pair (fork_pair.h) on simulated GPU `device`, made current: its
// communicator, or nullptr when init failed.
loomComm_t initGpuRank(int r, const loomUniqueId& id, int device) {
  loomConfig_t config = LOOM_CONFIG_INITIALIZER;
  config.device = device;
  loomComm_t comm = nullptr;
  if (loomCommInitRankConfig(&comm, 2, id, r, &config) != loomSuccess) return nullptr;
  cuda::deviceRuntime().setDevice(device);
  return comm;
}

// Two GPU ranks (on GPUs 0 and 1) as processes on two hosts (LOOM_HOSTID), so no memory
// transport connects them: `transport` carries every connection, behind the proxy rings.
// LOOM_BUFFSIZE is small so that each call is many steps through rings of kSlots slots:
// AllReduce, AllGather and a Send/Recv pair, repeated, every result exact.
void pipelineOnTwoHosts(const char* transport) {
  test::ScopedEnv wire("LOOM_TRANSPORT", transport);
  test::ScopedEnv host("LOOM_HOSTID", "host-a");       // the child is host-b
  test::ScopedEnv buffsize("LOOM_BUFFSIZE", "65536");  // 8 slots of 8 KiB
  test::ScopedEnv timeout("LOOM_TIMEOUT", "120");
  constexpr size_t kCount = 300000;  // 1.2 MB: about 150 steps per pass
  auto rank = [&](int r, const loomUniqueId& id) -> int {
    if (r == 1) setenv("LOOM_HOSTID", "host-b", 1);
    loomComm_t comm = initGpuRank(r, id, r);
    if (comm == nullptr) return 10;
    cuda::DeviceRuntime& rt = cuda::deviceRuntime();
    void* stream = rt.streamCreate();
    auto* buf = static_cast<int32_t*>(rt.malloc(2 * kCount * sizeof(int32_t)));
    const std::vector<int32_t> in = rankInput(kCount, r);
    std::vector<int32_t> out(2 * kCount);
    for (int round = 0; round < 3; ++round) {
      rt.memcpyAsync(buf, in.data(), kCount * sizeof(int32_t), stream);
      if (loomAllReduce(buf, buf, kCount, loomInt32, loomSum, comm,
                        static_cast<loomStream_t>(stream)) != loomSuccess)
        return 11;
      rt.memcpyAsync(out.data(), buf, kCount * sizeof(int32_t), stream);
      rt.streamSynchronize(stream);
      for (size_t i = 0; i < kCount; ++i)
        if (out[i] != static_cast<int32_t>(i % 1000) * 3) return 12;
      rt.memcpyAsync(buf + r * kCount, in.data(), kCount * sizeof(int32_t), stream);
      if (loomAllGather(buf + r * kCount, buf, kCount, loomInt32, comm,
                        static_cast<loomStream_t>(stream)) != loomSuccess)
        return 13;
      rt.memcpyAsync(out.data(), buf, 2 * kCount * sizeof(int32_t), stream);
      rt.streamSynchronize(stream);
      for (int from = 0; from < 2; ++from)
        for (size_t i = 0; i < kCount; ++i)
          if (out[from * kCount + i] != static_cast<int32_t>(i % 1000) * (from + 1)) return 14;
      // Rank 0 sends its input (where AllGather put it) to rank 1, into a poisoned buffer.
      if (r == 1) rt.memsetAsync(buf, 0xff, kCount * sizeof(int32_t), stream);
      const loomResult_t p2p =
          r == 0 ? loomSend(buf, kCount, loomInt32, 1, comm, static_cast<loomStream_t>(stream))
                 : loomRecv(buf, kCount, loomInt32, 0, comm, static_cast<loomStream_t>(stream));
      if (p2p != loomSuccess) return 15;
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
    rt.free(buf);
    rt.streamDestroy(stream);
    return loomCommDestroy(comm) == loomSuccess ? 0 : 19;
  };
  const test::ForkedPair result = test::runForkedPair(rank);
  EXPECT_EQ(result.parent, 0);
  EXPECT_EQ(result.childStatus, 0);
}

TEST(SimProxy, TwoHostsOverSocketsPipelineThroughSmallRings) { pipelineOnTwoHosts("socket"); }

// The same over RDMA, on the software NIC (tests/softnic: a test double of an RDMA device,
// loaded as libibverbs), so GPU buffers cross hosts by ib behind the proxy rings.
TEST(SimProxy, TwoHostsOverTheSoftwareNicPipelineThroughSmallRings) {
#ifdef LOOM_SOFTNIC_LIB
  test::ScopedEnv lib("LOOM_IBVERBS_LIB", LOOM_SOFTNIC_LIB);
  pipelineOnTwoHosts("ib");
#else
  GTEST_SKIP() << "this build has no ib transport (LOOM_WITH_IBVERBS=OFF)";
#endif
}

// A data connection that breaks under a kernel (the software NIC kills rank 1's queue pair
// after 300 work requests, IBV_EVENT_QP_FATAL): rank 1's proxy fails the send, its kernel
// stops, its communicator reports loomRemoteError and the control channel tells rank 0, whose
// kernel stops too. Neither rank hangs or waits for its timeout.
TEST(SimProxy, AQueuePairThatDiesFailsBothRanks) {
#ifdef LOOM_SOFTNIC_LIB
  test::ScopedEnv lib("LOOM_IBVERBS_LIB", LOOM_SOFTNIC_LIB);
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
    loomComm_t comm = initGpuRank(r, id, r);
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
#else
  GTEST_SKIP() << "this build has no ib transport (LOOM_WITH_IBVERBS=OFF)";
#endif
}

// The host-side calls of a proxy connection (tryAcquire/post, tryReceive/release, progress)
// carry every byte and tag in order with kSlots of flow control, as any connection's do: the
// transports' ring exchange (transport_test_util.h) over 3 GPU ranks' socket connections,
// which the registry puts behind proxy rings.
TEST(SimProxy, HostSideCallsCarryEveryByteAndTag) {
  test::ScopedEnv tcp("LOOM_TRANSPORT", "socket");
  test::ScopedEnv buffsize("LOOM_BUFFSIZE", "65536");
  constexpr int kRanks = 3;
  std::vector<loomComm_t> comms(kRanks);
  std::vector<int> devices{0, 1, 0};
  ASSERT_EQ(loomCommInitAll(comms.data(), kRanks, devices.data()), loomSuccess);
  std::vector<std::string> errors(kRanks);
  test::runThreads(kRanks, [&](int r) {
    try {
      Comm& comm = *findComm(comms[r]);
      std::vector<transport::ConnectionRequest> requests = transport::test::ringRequests(comm, 2);
      transport::Connections conns = transport::connectAll(comm, requests, /*batchTag=*/1);
      for (const auto& c : conns.sends)
        if (!c->needsHostProgress() || c->view() == nullptr) errors[r] = "a send is not proxied";
      for (const auto& c : conns.recvs)
        if (!c->needsHostProgress() || c->view() == nullptr) errors[r] = "a recv is not proxied";
      if (errors[r].empty()) errors[r] = transport::test::exchange(comm, requests, conns, 300);
    } catch (const std::exception& e) {
      errors[r] = e.what();
    }
  });
  for (int r = 0; r < kRanks; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
  test::finalizeAndDestroy(comms);
}

// A peer process that dies between calls: the next call's kernel stops once the death reaches
// it (the control channel, or the proxy's broken send), the stream goes on, and the
// communicator reports loomRemoteError (not the timeout, which is far away).
TEST(SimProxy, APeerThatDiesFailsTheCallOnTheStream) {
  test::ScopedEnv tcp("LOOM_TRANSPORT", "socket");
  test::ScopedEnv timeout("LOOM_TIMEOUT", "600");
  constexpr size_t kCount = 100000;
  std::string error;
  auto rank = [&](int r, const loomUniqueId& id) -> int {
    loomComm_t comm = initGpuRank(r, id, 0);
    if (comm == nullptr) return 10;
    cuda::DeviceRuntime& rt = cuda::deviceRuntime();
    void* stream = rt.streamCreate();
    auto* buf = static_cast<float*>(rt.malloc(kCount * sizeof(float)));
    rt.memsetAsync(buf, 0, kCount * sizeof(float), stream);
    if (loomAllReduce(buf, buf, kCount, loomFloat32, loomSum, comm,
                      static_cast<loomStream_t>(stream)) != loomSuccess)
      return 11;
    rt.streamSynchronize(stream);
    if (r == 1) _exit(0);  // dies without destroying its communicator
    // The control channel may report the death before this call: then it is refused at once.
    const loomResult_t enqueued = loomAllReduce(buf, buf, kCount, loomFloat32, loomSum, comm,
                                                static_cast<loomStream_t>(stream));
    rt.streamSynchronize(stream);  // a kernel it launched ends: no hang
    loomResult_t async = loomSuccess;
    if (loomCommGetAsyncError(comm, &async) != loomSuccess) return 13;
    if (enqueued != loomSuccess && async == loomSuccess) async = enqueued;
    if (async != loomRemoteError) return 20 + static_cast<int>(async);
    error = loomGetLastError(comm);
    loomCommAbort(comm);
    return 0;
  };
  const test::ForkedPair result = test::runForkedPair(rank);
  EXPECT_EQ(result.parent, 0) << error;
  EXPECT_EQ(result.childStatus, 0);
  EXPECT_TRUE(test::contains(error, "AllReduce")) << error;
  EXPECT_TRUE(test::contains(error, "rank 1")) << error;
}

}  // namespace
}  // namespace loom
