// Groups of calls on CUDA communicators under the simulated runtime
// (src/exec/cuda/cuda_executor.h): the calls of a group run together, once, on their streams, as
// NCCL launches a group. So a rank's send and receive of one group cannot wait for each other, one
// thread can drive every rank, and the group's streams are ordered with it.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "loom/loom.h"
#include "src/comm/comm_registry.h"
#include "src/cuda/runtime.h"
#include "src/exec/cuda/cuda_executor.h"
#include "tests/test_util.h"

namespace loom {
namespace {

// More than a connection's buffer (LOOM_BUFFSIZE, 4 MiB by default): a send that ran on its own
// would wait for the receive queued behind it on the same stream.
constexpr size_t kCount = (8u << 20) / sizeof(float) + 3;

struct Ranks {
  explicit Ranks(int n) : comms(n), streams(n), send(n), recv(n) {
    cuda::DeviceRuntime& rt = cuda::deviceRuntime();
    std::vector<int> devices(n, 0);
    EXPECT_EQ(loomCommInitAll(comms.data(), n, devices.data()), loomSuccess)
        << loomGetLastError(nullptr);
    for (int r = 0; r < n; ++r) {
      streams[r] = rt.streamCreate();
      send[r] = static_cast<float*>(rt.malloc(kCount * sizeof(float)));
      recv[r] = static_cast<float*>(rt.malloc(kCount * sizeof(float)));
    }
  }
  ~Ranks() {
    cuda::DeviceRuntime& rt = cuda::deviceRuntime();
    for (size_t r = 0; r < comms.size(); ++r) {
      rt.streamSynchronize(streams[r]);
      rt.free(send[r]);
      rt.free(recv[r]);
      rt.streamDestroy(streams[r]);
      EXPECT_EQ(loomCommDestroy(comms[r]), loomSuccess);
    }
  }
  loomStream_t stream(int r) const { return static_cast<loomStream_t>(streams[r]); }

  std::vector<loomComm_t> comms;
  std::vector<void*> streams;
  std::vector<float*> send, recv;
};

// Fills rank r's send buffer with r * 1000 + i % 1000 and poisons its receive buffer, on its
// stream.
void fill(Ranks& ranks, int r) {
  cuda::DeviceRuntime& rt = cuda::deviceRuntime();
  std::vector<float> in(kCount);
  for (size_t i = 0; i < kCount; ++i) in[i] = static_cast<float>(r * 1000 + i % 1000);
  rt.memcpyAsync(ranks.send[r], in.data(), kCount * sizeof(float), ranks.streams[r]);
  rt.memsetAsync(ranks.recv[r], 0x7f, kCount * sizeof(float), ranks.streams[r]);
  rt.streamSynchronize(ranks.streams[r]);
}

// Rank r's receive buffer holds what rank `from` sent.
void expectReceivedFrom(Ranks& ranks, int r, int from) {
  cuda::DeviceRuntime& rt = cuda::deviceRuntime();
  std::vector<float> out(kCount);
  rt.memcpyAsync(out.data(), ranks.recv[r], kCount * sizeof(float), ranks.streams[r]);
  rt.streamSynchronize(ranks.streams[r]);
  size_t wrong = 0;
  for (size_t i = 0; i < kCount; ++i)
    if (out[i] != static_cast<float>(from * 1000 + i % 1000)) ++wrong;
  EXPECT_EQ(wrong, 0u) << "rank " << r << " from rank " << from;
}

// Rank r's send to the next rank and receive from the one before, on its stream.
void postRingShift(Ranks& ranks, int r) {
  const int n = static_cast<int>(ranks.comms.size());
  ASSERT_EQ(
      loomSend(ranks.send[r], kCount, loomFloat32, (r + 1) % n, ranks.comms[r], ranks.stream(r)),
      loomSuccess);
  ASSERT_EQ(loomRecv(ranks.recv[r], kCount, loomFloat32, (r + n - 1) % n, ranks.comms[r],
                     ranks.stream(r)),
            loomSuccess);
}

// Every rank sends to the next and receives from the one before, both in one group on its own
// stream, from its own thread: 3 ranks (odd), messages bigger than a connection's buffer.
TEST(SimGroup, SendAndReceiveOfARankRunTogether) {
  constexpr int n = 3;
  Ranks ranks(n);
  test::runThreads(n, [&](int r) {
    fill(ranks, r);
    ASSERT_EQ(loomGroupStart(), loomSuccess);
    postRingShift(ranks, r);
    ASSERT_EQ(loomGroupEnd(), loomSuccess) << loomGetLastError(ranks.comms[r]);
    expectReceivedFrom(ranks, r, (r + n - 1) % n);
  });
}

// One thread drives all ranks, each on its own stream, in one group (loomCommInitAll + a group,
// as with several GPUs per thread). Rank 0's stream is held first: the group, launched on it,
// waits, and so does the work queued after the group on every other rank's stream.
TEST(SimGroup, OneThreadDrivesEveryRankAndTheStreamsWaitForTheGroup) {
  cuda::DeviceRuntime& rt = cuda::deviceRuntime();
  constexpr int n = 4;
  Ranks ranks(n);
  for (int r = 0; r < n; ++r) fill(ranks, r);
  std::promise<void> release;
  std::shared_future<void> gate = release.get_future().share();
  rt.launchHostFunc(
      ranks.streams[0], [](void* g) { static_cast<std::shared_future<void>*>(g)->wait(); }, &gate);
  ASSERT_EQ(loomGroupStart(), loomSuccess);
  for (int r = 0; r < n; ++r) postRingShift(ranks, r);
  ASSERT_EQ(loomGroupEnd(), loomSuccess) << loomGetLastError(nullptr);
  // Queued after the group: rank 3 copies what it received.
  std::vector<float> seen(kCount, -1.0f);
  rt.memcpyAsync(seen.data(), ranks.recv[3], kCount * sizeof(float), ranks.streams[3]);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  for (int r = 0; r < n; ++r) EXPECT_FALSE(rt.streamQuery(ranks.streams[r])) << "stream " << r;
  EXPECT_EQ(seen[0], -1.0f);
  release.set_value();
  rt.streamSynchronize(ranks.streams[3]);
  EXPECT_EQ(seen[kCount - 1], static_cast<float>(2 * 1000 + (kCount - 1) % 1000));
  for (int r = 0; r < n; ++r) expectReceivedFrom(ranks, r, (r + n - 1) % n);
}

// A kernel runs on one device and reduces one type with one op: one thread's group of three
// ranks on two GPUs, with a float32 sum, an int32 max and a broadcast, becomes two launches on
// each device (the broadcast rides with the first), and every result is exact.
TEST(SimGroup, SeveralReductionsAndDevicesLaunchOncePerKernel) {
  cuda::DeviceRuntime& rt = cuda::deviceRuntime();
  constexpr int n = 3;
  constexpr size_t kN = 1001;
  const std::vector<int> devices = {0, 1, 0};
  std::vector<loomComm_t> comms(n);
  ASSERT_EQ(loomCommInitAll(comms.data(), n, devices.data()), loomSuccess);
  std::vector<void*> streams(n);
  std::vector<float*> sums(n);
  std::vector<int32_t*> maxes(n), bcasts(n);
  for (int r = 0; r < n; ++r) {
    cuda::CurrentDeviceScope device(devices[r]);
    streams[r] = rt.streamCreate();
    sums[r] = static_cast<float*>(rt.malloc(kN * sizeof(float)));
    maxes[r] = static_cast<int32_t*>(rt.malloc(kN * sizeof(int32_t)));
    bcasts[r] = static_cast<int32_t*>(rt.malloc(kN * sizeof(int32_t)));
    std::vector<float> s(kN);
    std::vector<int32_t> m(kN), b(kN, -1);
    for (size_t i = 0; i < kN; ++i) {
      s[i] = static_cast<float>(r + 1);                    // sum 6, in any order
      m[i] = static_cast<int32_t>((i + r) % n) - 1;        // max 1
      if (r == 1) b[i] = static_cast<int32_t>(i) * 7 + 3;  // the root's
    }
    rt.memcpy(sums[r], s.data(), kN * sizeof(float));
    rt.memcpy(maxes[r], m.data(), kN * sizeof(int32_t));
    rt.memcpy(bcasts[r], b.data(), kN * sizeof(int32_t));
  }
  ASSERT_EQ(loomGroupStart(), loomSuccess);
  for (int r = 0; r < n; ++r) {
    const auto stream = static_cast<loomStream_t>(streams[r]);
    ASSERT_EQ(loomAllReduce(sums[r], sums[r], kN, loomFloat32, loomSum, comms[r], stream),
              loomSuccess);
    ASSERT_EQ(loomBroadcast(bcasts[r], bcasts[r], kN, loomInt32, 1, comms[r], stream), loomSuccess);
    ASSERT_EQ(loomAllReduce(maxes[r], maxes[r], kN, loomInt32, loomMax, comms[r], stream),
              loomSuccess);
  }
  ASSERT_EQ(loomGroupEnd(), loomSuccess) << loomGetLastError(nullptr);
  for (int r = 0; r < n; ++r) {
    rt.streamSynchronize(streams[r]);
    std::vector<float> s(kN);
    std::vector<int32_t> m(kN), b(kN);
    rt.memcpy(s.data(), sums[r], kN * sizeof(float));
    rt.memcpy(m.data(), maxes[r], kN * sizeof(int32_t));
    rt.memcpy(b.data(), bcasts[r], kN * sizeof(int32_t));
    size_t wrong = 0;
    for (size_t i = 0; i < kN; ++i)
      wrong += (s[i] != 6.0f) + (m[i] != 1) + (b[i] != static_cast<int32_t>(i) * 7 + 3);
    EXPECT_EQ(wrong, 0u) << "rank " << r;
    loomResult_t async = loomInternalError;
    EXPECT_EQ(loomCommGetAsyncError(comms[r], &async), loomSuccess);
    EXPECT_EQ(async, loomSuccess) << loomGetLastError(comms[r]);
    const auto& executor = dynamic_cast<const CudaExecutor&>(executorOf(*findComm(comms[r])));
    EXPECT_EQ(executor.deviceLaunches(), 2u) << "rank " << r;
  }
  for (int r = 0; r < n; ++r) {
    rt.free(sums[r]);
    rt.free(maxes[r]);
    rt.free(bcasts[r]);
    rt.streamDestroy(streams[r]);
    EXPECT_EQ(loomCommDestroy(comms[r]), loomSuccess);
  }
}

// A call on a stream that is capturing a CUDA graph is refused at once, alone or in a group,
// with nothing enqueued (the simulated runtime fails any work on a capturing stream, which
// would be a CUDA error instead). The capture then ends, and the same calls run, exact.
TEST(SimGroup, CallsOnACapturingStreamAreRefused) {
  cuda::DeviceRuntime& rt = cuda::deviceRuntime();
  constexpr int n = 2;
  Ranks ranks(n);
  auto shift = [&]() -> loomResult_t {
    if (loomGroupStart() != loomSuccess) return loomInternalError;
    for (int r = 0; r < n; ++r) postRingShift(ranks, r);
    return loomGroupEnd();
  };
  for (int r = 0; r < n; ++r) fill(ranks, r);
  ASSERT_EQ(shift(), loomSuccess) << loomGetLastError(nullptr);  // connected
  rt.streamBeginCapture(ranks.streams[1]);
  EXPECT_EQ(loomAllReduce(ranks.send[1], ranks.recv[1], kCount, loomFloat32, loomSum,
                          ranks.comms[1], ranks.stream(1)),
            loomInvalidUsage);
  EXPECT_TRUE(test::contains(loomGetLastError(ranks.comms[1]), "AllReduce"))
      << loomGetLastError(ranks.comms[1]);
  EXPECT_TRUE(test::contains(loomGetLastError(ranks.comms[1]), "capturing a graph"));
  EXPECT_EQ(shift(), loomInvalidUsage);
  EXPECT_TRUE(test::contains(loomGetLastError(nullptr), "capturing a graph"))
      << loomGetLastError(nullptr);
  EXPECT_TRUE(rt.streamIsCapturing(ranks.streams[1]));
  rt.streamEndCapture(ranks.streams[1]);
  for (int r = 0; r < n; ++r) fill(ranks, r);
  ASSERT_EQ(shift(), loomSuccess) << loomGetLastError(nullptr);
  for (int r = 0; r < n; ++r) expectReceivedFrom(ranks, r, (r + n - 1) % n);
  for (int r = 0; r < n; ++r) {
    loomResult_t async = loomInternalError;
    EXPECT_EQ(loomCommGetAsyncError(ranks.comms[r], &async), loomSuccess);
    EXPECT_EQ(async, loomSuccess) << loomGetLastError(ranks.comms[r]);
  }
}

// A group that mixes CPU and CUDA communicators is refused at loomGroupEnd, and none of its
// calls runs.
TEST(SimGroup, MixingDevicesIsRefusedBeforeAnythingRuns) {
  Ranks ranks(1);
  loomComm_t cpu = nullptr;
  ASSERT_EQ(loomCommInitAll(&cpu, 1, nullptr), loomSuccess);
  std::vector<float> host(kCount, 1.0f);
  fill(ranks, 0);
  ASSERT_EQ(loomGroupStart(), loomSuccess);
  ASSERT_EQ(loomAllReduce(ranks.send[0], ranks.recv[0], kCount, loomFloat32, loomSum,
                          ranks.comms[0], ranks.stream(0)),
            loomSuccess);
  ASSERT_EQ(loomAllReduce(host.data(), host.data(), kCount, loomFloat32, loomSum, cpu, nullptr),
            loomSuccess);
  EXPECT_EQ(loomGroupEnd(), loomInvalidUsage);
  EXPECT_TRUE(test::contains(loomGetLastError(nullptr), "a group mixes"))
      << loomGetLastError(nullptr);
  cuda::deviceRuntime().streamSynchronize(ranks.streams[0]);
  EXPECT_EQ(host[0], 1.0f);
  std::vector<float> out(1);
  cuda::deviceRuntime().memcpy(out.data(), ranks.recv[0], sizeof(float));
  float poison;
  std::memset(&poison, 0x7f, sizeof(poison));
  EXPECT_EQ(out[0], poison);  // the CUDA call did not run either
  EXPECT_EQ(loomCommDestroy(cpu), loomSuccess);
}

}  // namespace
}  // namespace loom
