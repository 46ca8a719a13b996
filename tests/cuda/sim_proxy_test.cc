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
#include "tests/cuda/two_hosts.h"
#include "tests/test_util.h"
#include "tests/transports/transport_test_util.h"

namespace loom {
namespace {

// Two GPU ranks on two hosts (two_hosts.h) over sockets: every connection is behind a proxy
// ring, pipelined through rings much smaller than the calls. The same over ib is in
// sim_gdr_test.cc, directly and staged.
TEST(SimProxy, TwoHostsOverSocketsPipelineThroughSmallRings) {
  test::pipelineOnTwoHosts({"socket", nullptr, nullptr});
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
    loomComm_t comm = test::initGpuRank(r, id, 0);
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
