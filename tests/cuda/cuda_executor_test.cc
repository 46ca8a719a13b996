// CUDA communicators under the simulated runtime launch their calls on their streams
// (src/exec/cuda/cuda_executor.h), as kernels whose host twins run the device program:
// results are bit-identical to CPU communicators on the same inputs, a call is ordered after
// the stream's earlier work and returns before it runs, and what a kernel finds wrong reaches
// loomCommGetAsyncError.
#include "src/exec/cuda/cuda_executor.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <functional>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "loom/loom.h"
#include "src/base/error.h"
#include "src/comm/comm.h"
#include "src/comm/comm_registry.h"
#include "src/cuda/runtime.h"
#include "tests/cuda/fork_pair.h"
#include "tests/test_util.h"
#include "tools/gpu_check/coll_cases.h"

#ifdef LOOM_SOFTNIC_LIB
#include "transports/ib/ib_gdr.h"
#endif

namespace loom {
namespace {

using test::contains;

// The first call between two ranks connects them, and a connection waits for the peer's side
// (as NCCL's runtime connection does): a thread that drives several ranks connects them with
// one call per rank on threads first (or with a group), and its later calls return at once.
// `count` floats: calls of another size may use other channels, hence other connections.
void connectRanks(const std::vector<loomComm_t>& comms, const std::vector<void*>& streams,
                  size_t count) {
  cuda::DeviceRuntime& rt = cuda::deviceRuntime();
  std::vector<loomResult_t> results(comms.size(), loomInternalError);
  test::runThreads(static_cast<int>(comms.size()), [&](int r) {
    auto* buf = static_cast<float*>(rt.malloc(count * sizeof(float)));
    results[r] = loomAllReduce(buf, buf, count, loomFloat32, loomSum, comms[r],
                               static_cast<loomStream_t>(streams[r]));
    rt.streamSynchronize(streams[r]);
    loomResult_t async = loomInternalError;  // takes in the finished launch
    if (results[r] == loomSuccess) results[r] = loomCommGetAsyncError(comms[r], &async);
    if (results[r] == loomSuccess) results[r] = async;
    rt.free(buf);
  });
  for (size_t r = 0; r < comms.size(); ++r) ASSERT_EQ(results[r], loomSuccess) << r;
}

// Every collective x type x op (tools/gpu_check/coll_cases.h: counts 0, 1, 7, 4097, in and out
// of place, poisoned outputs) on CUDA communicators and on CPU communicators with the same
// inputs, compared bit for bit. `devices[r]` is rank r's simulated GPU (all on GPU 0 when
// empty); `ring`, when not empty, the ring order the CUDA communicators must have chosen.
// `whileConnected` runs after the calls, before the communicators are destroyed.
void expectBitIdentical(int nranks, const char* proto, std::vector<int> devices = {},
                        const std::vector<int>& ring = {},
                        const std::function<void()>& whileConnected = {}) {
  test::ScopedEnv protoEnv("LOOM_PROTO", proto);
  std::vector<loomComm_t> cpu(nranks), gpu(nranks);
  if (devices.empty()) devices.assign(nranks, 0);
  ASSERT_EQ(loomCommInitAll(cpu.data(), nranks, nullptr), loomSuccess);
  ASSERT_EQ(loomCommInitAll(gpu.data(), nranks, devices.data()), loomSuccess)
      << loomGetLastError(nullptr);
  if (!ring.empty()) {
    for (int r = 0; r < nranks; ++r) EXPECT_EQ(findComm(gpu[r])->ringOrder(), ring) << r;
  }
  const std::vector<gpucheck::CollCase> cases = gpucheck::collCases({0, 1, 7, 4097}, {}, true);
  ASSERT_GT(cases.size(), 1000u);
  std::vector<int> failures(nranks);
  test::runThreads(nranks, [&](int r) {
    failures[r] = gpucheck::runRankCases(cases, r, nranks, cpu[r], gpu[r], "sim");
  });
  for (int r = 0; r < nranks; ++r)
    EXPECT_EQ(failures[r], 0) << "rank " << r << "; first failure: " << gpucheck::firstFailure();
  // Every call was launched as the device program (src/exec/cuda/device_program.h), over
  // Simple or LL rings, none through the CPU executor's code; or the other way round.
  for (int r = 0; r < nranks; ++r) {
    const auto& executor = dynamic_cast<const CudaExecutor&>(executorOf(*findComm(gpu[r])));
    EXPECT_GT(executor.deviceLaunches(), cases.size() / 2) << r;
  }
  if (whileConnected) whileConnected();
  for (loomComm_t c : cpu) EXPECT_EQ(loomCommDestroy(c), loomSuccess);
  for (loomComm_t c : gpu) EXPECT_EQ(loomCommDestroy(c), loomSuccess);
}

class SimExecutorMatrix : public ::testing::TestWithParam<std::tuple<int, const char*>> {};

TEST_P(SimExecutorMatrix, BitIdenticalToCpuCommunicators) {
  ASSERT_STREQ(cuda::deviceRuntime().name(), "sim");
  expectBitIdentical(std::get<0>(GetParam()), std::get<1>(GetParam()));
}

INSTANTIATE_TEST_SUITE_P(Ranks, SimExecutorMatrix,
                         ::testing::Combine(::testing::Values(1, 2, 3, 4),
                                            ::testing::Values("simple", "ll")));

// The matrix above runs over CUDA IPC rings in device memory (transports/cuda_ipc). With
// LOOM_P2P_DISABLE=1 the ranks connect through shm rings in host memory instead, which the
// device program steps alike.
TEST(SimExecutor, ShmRingsWhenP2PIsDisabledSimple) {
  test::ScopedEnv p2p("LOOM_P2P_DISABLE", "1");
  expectBitIdentical(3, "simple");
}
TEST(SimExecutor, ShmRingsWhenP2PIsDisabledLL) {
  test::ScopedEnv p2p("LOOM_P2P_DISABLE", "1");
  expectBitIdentical(3, "ll");
}

// Over sockets (TCP) each connection of a GPU rank is a proxy ring in pinned host memory: the
// device program steps it as a memory transport's ring, and the proxy thread moves its steps
// over the wire, with the same bits.
TEST(SimExecutor, WireConnectionsRunThroughTheProxy) {
  test::ScopedEnv tcp("LOOM_TRANSPORT", "socket");
  expectBitIdentical(3, "simple", {0, 1, 0});
}

// Over ib (the software NIC, a test double loaded as libibverbs) each connection of a GPU rank
// is GPUDirect RDMA (transports/ib/ib_gdr.h): the NIC writes into the peer GPU's ring, and the
// proxy thread only posts and counts steps. A connection joins two ranks of one communicator,
// so both ends are GPUDirect here; SimGdr.DirectOnOneSideStagedOnTheOther covers the mixed
// ends.
TEST(SimExecutor, IbConnectionsUseGpuDirectRdma) {
#ifdef LOOM_SOFTNIC_LIB
  test::ScopedEnv lib("LOOM_IBVERBS_LIB", LOOM_SOFTNIC_LIB);
  test::ScopedEnv ib("LOOM_TRANSPORT", "ib");
  expectBitIdentical(3, "simple", {0, 1, 0}, {},
                     [] { EXPECT_GT(transport::ib::liveGdrRings(), 0u); });
#else
  GTEST_SKIP() << "this build has no ib transport (LOOM_WITH_IBVERBS=OFF)";
#endif
}

// Four ranks on two GPUs of an Azure NDv2 (its NCCL topology file): the ring keeps each GPU's
// ranks side by side (0 2 1 3, not rank order) and every result is still exact.
TEST(SimExecutor, RanksOnTwoGpusRunTheTopologysRing) {
  test::ScopedEnv topo("LOOM_TOPO_FILE",
                       std::string(LOOM_TOPO_FIXTURES) + "/azure-ndv2-nccl-dump.xml");
  expectBitIdentical(4, "simple", {0, 1, 0, 1}, {0, 2, 1, 3});
}

// A call waits for the stream's earlier work and returns before it runs; work after it sees
// its result.
TEST(SimExecutor, CallsAreOrderedOnTheirStreamAndReturnAtOnce) {
  cuda::DeviceRuntime& rt = cuda::deviceRuntime();
  constexpr int kRanks = 2;
  constexpr size_t kCount = 1000;
  std::vector<loomComm_t> gpu(kRanks);
  std::vector<int> devices(kRanks, 0);
  ASSERT_EQ(loomCommInitAll(gpu.data(), kRanks, devices.data()), loomSuccess);
  std::promise<void> release;
  std::shared_future<void> gate = release.get_future().share();
  std::vector<std::vector<float>> results(kRanks, std::vector<float>(kCount, -1.0f));
  std::vector<void*> streams(kRanks);
  std::vector<float*> bufs(kRanks);
  for (int r = 0; r < kRanks; ++r) {
    streams[r] = rt.streamCreate();
    bufs[r] = static_cast<float*>(rt.malloc(kCount * sizeof(float)));
  }
  connectRanks(gpu, streams, kCount);
  // Rank 0's stream is held by a host function; its input is written after that.
  rt.launchHostFunc(
      streams[0], [](void* g) { static_cast<std::shared_future<void>*>(g)->wait(); }, &gate);
  std::vector<std::vector<float>> inputs(kRanks);
  for (int r = 0; r < kRanks; ++r) {
    inputs[r].assign(kCount, static_cast<float>(r + 1));
    rt.memcpyAsync(bufs[r], inputs[r].data(), kCount * sizeof(float), streams[r]);
  }
  for (int r = 0; r < kRanks; ++r) {
    // Both calls return although rank 0's cannot have started.
    ASSERT_EQ(loomAllReduce(bufs[r], bufs[r], kCount, loomFloat32, loomSum, gpu[r],
                            static_cast<loomStream_t>(streams[r])),
              loomSuccess)
        << loomGetLastError(nullptr);
    rt.memcpyAsync(results[r].data(), bufs[r], kCount * sizeof(float), streams[r]);
  }
  EXPECT_FALSE(rt.streamQuery(streams[0]));
  EXPECT_FALSE(rt.streamQuery(streams[1]));  // its call waits for rank 0's
  EXPECT_EQ(results[1][0], -1.0f);
  // The hang reports and the flight record see the calls still in flight, not done at enqueue.
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_EQ(findComm(gpu[r])->calls().inFlight(nullptr), 2u) << r;  // call #1: connectRanks'
    EXPECT_EQ(findComm(gpu[r])->calls().snapshot().completed, 1u) << r;
  }
  release.set_value();
  for (int r = 0; r < kRanks; ++r) {
    rt.streamSynchronize(streams[r]);
    loomResult_t async = loomInternalError;  // takes in the launches that finished
    EXPECT_EQ(loomCommGetAsyncError(gpu[r], &async), loomSuccess);
    EXPECT_EQ(async, loomSuccess);
    EXPECT_EQ(findComm(gpu[r])->calls().inFlight(nullptr), 0u) << r;
    EXPECT_EQ(findComm(gpu[r])->calls().snapshot().completed, 2u) << r;
    EXPECT_EQ(results[r][0], 3.0f);
    EXPECT_EQ(results[r][kCount - 1], 3.0f);
    rt.free(bufs[r]);
    rt.streamDestroy(streams[r]);
  }
  for (loomComm_t c : gpu) EXPECT_EQ(loomCommDestroy(c), loomSuccess);
}

}  // namespace
}  // namespace loom

namespace loom {
namespace {

// Two processes share simulated GPU 0: both inits succeed and the AllReduce on their streams
// is exact. (CudaSimComm.ProcessesSharingAGpuWithoutMpsWarnOnce checks the warning: it is
// given once per process, so whichever test shares a GPU first in this binary gets it.)
TEST(SimExecutor, ProcessesShareAGpu) {
  constexpr size_t kCount = 5000;
  auto rank = [&](int r, const loomUniqueId& id) -> int {
    loomConfig_t config = LOOM_CONFIG_INITIALIZER;
    config.device = 0;
    loomComm_t comm = nullptr;
    if (loomCommInitRankConfig(&comm, 2, id, r, &config) != loomSuccess) return 10;
    cuda::DeviceRuntime& rt = cuda::deviceRuntime();
    void* stream = rt.streamCreate();
    auto* buf = static_cast<int32_t*>(rt.malloc(kCount * sizeof(int32_t)));
    std::vector<int32_t> in(kCount), out(kCount);
    for (size_t i = 0; i < kCount; ++i) in[i] = static_cast<int32_t>(i) * (r + 1);
    rt.memcpyAsync(buf, in.data(), kCount * sizeof(int32_t), stream);
    if (loomAllReduce(buf, buf, kCount, loomInt32, loomSum, comm,
                      static_cast<loomStream_t>(stream)) != loomSuccess)
      return 11;
    rt.memcpyAsync(out.data(), buf, kCount * sizeof(int32_t), stream);
    rt.streamSynchronize(stream);
    for (size_t i = 0; i < kCount; ++i)
      if (out[i] != static_cast<int32_t>(i) * 3) return 12;
    rt.free(buf);
    rt.streamDestroy(stream);
    return loomCommDestroy(comm) == loomSuccess ? 0 : 13;
  };
  const test::ForkedPair result = test::runForkedPair(rank);
  EXPECT_EQ(result.parent, 0);
  EXPECT_EQ(result.childStatus, 0);
}

}  // namespace
}  // namespace loom

namespace loom {
namespace {

// A call whose peer never comes ends: by timeout, or at once on abort. Either way the
// kernel leaves, the stream's later work runs, and the communicator reports the error.
TEST(SimExecutor, MissingPeerTimesOutOrAbortsOnTheStream) {
  cuda::DeviceRuntime& rt = cuda::deviceRuntime();
  for (bool abort : {false, true}) {
    test::ScopedEnv timeout("LOOM_TIMEOUT", abort ? "300" : "1");
    std::vector<loomComm_t> gpu(2);
    std::vector<int> devices(2, 0);
    ASSERT_EQ(loomCommInitAll(gpu.data(), 2, devices.data()), loomSuccess);
    void* stream = rt.streamCreate();
    void* peerStream = rt.streamCreate();
    connectRanks(gpu, {stream, peerStream}, 1024);
    auto* buf = static_cast<float*>(rt.malloc(1024 * sizeof(float)));
    ASSERT_EQ(loomAllReduce(buf, buf, 1024, loomFloat32, loomSum, gpu[0],
                            static_cast<loomStream_t>(stream)),
              loomSuccess);
    if (abort) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      EXPECT_FALSE(rt.streamQuery(stream));  // waiting for rank 1
      EXPECT_EQ(loomCommAbort(gpu[0]), loomSuccess);
    }
    EXPECT_NO_THROW(rt.streamSynchronize(stream));
    if (!abort) {
      loomResult_t async = loomSuccess;
      EXPECT_EQ(loomCommGetAsyncError(gpu[0], &async), loomSuccess);
      EXPECT_EQ(async, loomTimeout);
      const std::string msg = loomGetLastError(gpu[0]);
      EXPECT_TRUE(contains(msg, "AllReduce")) << msg;
      EXPECT_TRUE(contains(msg, "data from rank 1")) << msg;
      EXPECT_EQ(loomCommAbort(gpu[0]), loomSuccess);
    }
    EXPECT_EQ(loomCommAbort(gpu[1]), loomSuccess);
    rt.free(buf);
    rt.streamDestroy(stream);
    rt.streamDestroy(peerStream);
  }
}

}  // namespace
}  // namespace loom

namespace loom {
namespace {

// What the device program reports when ranks disagree or a peer stops calling: the CPU
// executor's errors, through the communicator.
class SimDeviceProgramFaults : public ::testing::Test {
 protected:
  // After the test's environment (LOOM_TIMEOUT is read at init).
  void init() {
    ASSERT_EQ(loomCommInitAll(gpu_, 2, devices_), loomSuccess);
    for (int r = 0; r < 2; ++r) {
      streams_[r] = rt_.streamCreate();
      bufs_[r] = static_cast<float*>(rt_.malloc(kCount * sizeof(float)));
    }
    connectRanks({gpu_[0], gpu_[1]}, {streams_[0], streams_[1]}, kCount);
  }
  void TearDown() override {
    for (int r = 0; r < 2 && gpu_[r] != nullptr; ++r) {
      EXPECT_EQ(loomCommAbort(gpu_[r]), loomSuccess);
      rt_.free(bufs_[r]);
      rt_.streamDestroy(streams_[r]);
    }
  }
  loomResult_t allReduce(int r, size_t count) {
    return loomAllReduce(bufs_[r], bufs_[r], count, loomFloat32, loomSum, gpu_[r],
                         static_cast<loomStream_t>(streams_[r]));
  }
  // The communicator's error once its stream's work is done ("" when none).
  std::string sync(int r) {
    rt_.streamSynchronize(streams_[r]);
    loomResult_t async = loomSuccess;
    EXPECT_EQ(loomCommGetAsyncError(gpu_[r], &async), loomSuccess);
    return async == loomSuccess ? "" : loomGetLastError(gpu_[r]);
  }
  static constexpr size_t kCount = 1 << 16;
  cuda::DeviceRuntime& rt_ = cuda::deviceRuntime();
  loomComm_t gpu_[2] = {};
  int devices_[2] = {0, 0};
  void* streams_[2] = {};
  float* bufs_[2] = {};
};

TEST_F(SimDeviceProgramFaults, RanksThatMakeDifferentCallsFailClearly) {
  test::ScopedEnv proto("LOOM_PROTO", "simple");
  init();
  ASSERT_EQ(allReduce(0, kCount), loomSuccess);
  ASSERT_EQ(allReduce(1, kCount - 1), loomSuccess);
  const std::string errors = sync(0) + " | " + sync(1);
  EXPECT_TRUE(contains(errors, "made a different call")) << errors;
  loomResult_t async = loomSuccess;
  EXPECT_EQ(loomCommGetAsyncError(gpu_[0], &async), loomSuccess);
  EXPECT_EQ(async, loomRemoteError);
}

TEST_F(SimDeviceProgramFaults, APeerThatStopsCallingTimesOutNamingIt) {
  test::ScopedEnv proto("LOOM_PROTO", "simple");
  test::ScopedEnv timeout("LOOM_TIMEOUT", "1");
  init();
  ASSERT_EQ(allReduce(0, kCount), loomSuccess);
  const std::string error = sync(0);
  EXPECT_TRUE(contains(error, "no progress for 1 s")) << error;
  EXPECT_TRUE(contains(error, "data from rank 1")) << error;
  loomResult_t async = loomSuccess;
  EXPECT_EQ(loomCommGetAsyncError(gpu_[0], &async), loomSuccess);
  EXPECT_EQ(async, loomTimeout);
  const auto& executor = dynamic_cast<const CudaExecutor&>(executorOf(*findComm(gpu_[0])));
  EXPECT_EQ(executor.deviceLaunches(), 2u);  // connectRanks' and the one that timed out
}

}  // namespace
}  // namespace loom
