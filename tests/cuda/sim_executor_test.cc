// CUDA communicators under the simulated runtime run their calls on their streams
// (src/exec/cuda/sim_executor.h): results are bit-identical to CPU communicators on the same
// inputs, and a call is ordered after the stream's earlier work and returns before it runs.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <future>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "loom/loom.h"
#include "src/base/error.h"
#include "src/comm/comm.h"
#include "src/comm/comm_registry.h"
#include "src/cuda/runtime.h"
#include "tests/test_util.h"

namespace loom {
namespace {

using test::contains;

enum class Coll { kAllReduce, kAllGather, kReduceScatter, kBroadcast, kReduce, kAlltoAll };

struct Case {
  Coll coll;
  loomDataType_t type;
  loomRedOp_t op;
  size_t count;
  bool inPlace;
};

size_t typeSize(loomDataType_t t) { return t == loomBfloat16 ? 2 : t == loomFloat64 ? 8 : 4; }

// Bytes of a rank's send and receive buffers for the call (NCCL's sizes; in place, the
// send buffer lies inside the receive buffer and is not allocated on its own).
std::pair<size_t, size_t> bufferBytes(const Case& c, int n) {
  const size_t b = c.count * typeSize(c.type);
  switch (c.coll) {
    case Coll::kAllGather:
      return {b, b * n};
    case Coll::kReduceScatter:
      return {b * n, b};
    case Coll::kAlltoAll:
      return {b * n, b * n};
    default:
      return {b, b};
  }
}

// Runs the case on one rank: `send`, `recv` are that rank's buffers (recv poisoned), laid out
// as bufferBytes says; in place uses NCCL's offsets into recv.
loomResult_t call(const Case& c, char* send, char* recv, int rank, loomComm_t comm, void* stream) {
  auto s = static_cast<loomStream_t>(stream);
  const size_t b = c.count * typeSize(c.type);
  switch (c.coll) {
    case Coll::kAllReduce:
      return loomAllReduce(c.inPlace ? recv : send, recv, c.count, c.type, c.op, comm, s);
    case Coll::kAllGather:
      return loomAllGather(c.inPlace ? recv + rank * b : send, recv, c.count, c.type, comm, s);
    case Coll::kReduceScatter:
      return loomReduceScatter(c.inPlace ? recv : send, c.inPlace ? recv + rank * b : recv, c.count,
                               c.type, c.op, comm, s);
    case Coll::kBroadcast:
      return loomBroadcast(c.inPlace ? recv : send, recv, c.count, c.type, 0, comm, s);
    case Coll::kReduce:
      return loomReduce(c.inPlace ? recv : send, recv, c.count, c.type, c.op, 0, comm, s);
    case Coll::kAlltoAll:
      return loomAlltoAll(send, recv, c.count, c.type, comm, s);
  }
  return loomInternalError;
}

std::vector<Case> matrix() {
  std::vector<Case> cases;
  const loomDataType_t types[] = {loomFloat32, loomBfloat16, loomInt32, loomFloat64};
  const loomRedOp_t ops[] = {loomSum, loomMax, loomProd};
  for (Coll coll : {Coll::kAllReduce, Coll::kAllGather, Coll::kReduceScatter, Coll::kBroadcast,
                    Coll::kReduce, Coll::kAlltoAll}) {
    const bool reduces =
        coll == Coll::kAllReduce || coll == Coll::kReduceScatter || coll == Coll::kReduce;
    for (loomDataType_t type : types)
      for (loomRedOp_t op : ops) {
        if (!reduces && op != loomSum) continue;
        for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{4097}})
          for (bool inPlace : {false, true}) {
            if (coll == Coll::kAlltoAll && inPlace) continue;
            cases.push_back({coll, type, op, count, inPlace});
          }
      }
  }
  return cases;
}

// The rank's input (and in place, the whole receive buffer) for case `k`: random bytes, the
// same for both communicators. Floats keep to small integers so sums and products stay finite.
std::vector<char> input(const Case& c, size_t bytes, int rank, size_t k) {
  std::mt19937 gen(static_cast<unsigned>(k * 131 + rank));
  std::vector<char> out(bytes);
  const size_t elems = bytes / typeSize(c.type);
  for (size_t i = 0; i < elems; ++i) {
    const int v = static_cast<int>(gen() % 7) - 3;
    char* at = out.data() + i * typeSize(c.type);
    if (c.type == loomFloat32) {
      const float f = static_cast<float>(v) * 0.5f;
      std::memcpy(at, &f, 4);
    } else if (c.type == loomFloat64) {
      const double d = v * 0.25;
      std::memcpy(at, &d, 8);
    } else if (c.type == loomInt32) {
      const int32_t x = v * 1000 + static_cast<int32_t>(gen() % 1000);
      std::memcpy(at, &x, 4);
    } else {  // bfloat16: the top half of the float
      const float f = static_cast<float>(v) * 0.5f;
      uint32_t u;
      std::memcpy(&u, &f, 4);
      const uint16_t h = static_cast<uint16_t>(u >> 16);
      std::memcpy(at, &h, 2);
    }
  }
  return out;
}

// `devices[r]` is rank r's simulated GPU (all on GPU 0 when empty); `ring`, when not empty,
// the ring order the CUDA communicators must have chosen.
void expectBitIdentical(int nranks, const char* proto, std::vector<int> devices = {},
                        const std::vector<int>& ring = {}) {
  test::ScopedEnv protoEnv("LOOM_PROTO", proto);
  cuda::DeviceRuntime& rt = cuda::deviceRuntime();
  std::vector<loomComm_t> cpu(nranks), gpu(nranks);
  if (devices.empty()) devices.assign(nranks, 0);
  ASSERT_EQ(loomCommInitAll(cpu.data(), nranks, nullptr), loomSuccess);
  ASSERT_EQ(loomCommInitAll(gpu.data(), nranks, devices.data()), loomSuccess)
      << loomGetLastError(nullptr);
  if (!ring.empty()) {
    for (int r = 0; r < nranks; ++r) EXPECT_EQ(findComm(gpu[r])->ringOrder(), ring) << r;
  }
  const std::vector<Case> cases = matrix();
  test::runThreads(nranks, [&](int r) {
    rt.setDevice(devices[r]);  // this thread's current device, as in CUDA
    void* stream = rt.streamCreate();
    for (size_t k = 0; k < cases.size(); ++k) {
      const Case& c = cases[k];
      auto [sendBytes, recvBytes] = bufferBytes(c, nranks);
      if (c.inPlace) recvBytes = std::max(sendBytes, recvBytes);  // send lies inside recv
      const std::vector<char> in = input(c, c.inPlace ? recvBytes : sendBytes, r, k);
      // CPU communicator, host buffers.
      std::vector<char> hostSend(c.inPlace ? 0 : sendBytes), hostRecv(recvBytes, '\x5a');
      if (!in.empty()) {  // count 0: no bytes, and memcpy takes no null pointer
        std::memcpy(c.inPlace ? hostRecv.data() : hostSend.data(), in.data(), in.size());
      }
      ASSERT_EQ(call(c, hostSend.data(), hostRecv.data(), r, cpu[r], nullptr), loomSuccess)
          << k << ": " << loomGetLastError(nullptr);
      // CUDA communicator, device buffers filled and read back on its stream.
      char* devSend = static_cast<char*>(rt.malloc(std::max<size_t>(sendBytes, 1)));
      char* devRecv = static_cast<char*>(rt.malloc(std::max<size_t>(recvBytes, 1)));
      rt.memsetAsync(devRecv, 0x5a, recvBytes, stream);
      rt.memcpyAsync(c.inPlace ? devRecv : devSend, in.data(), in.size(), stream);
      ASSERT_EQ(call(c, devSend, devRecv, r, gpu[r], stream), loomSuccess)
          << k << ": " << loomGetLastError(nullptr);
      std::vector<char> out(recvBytes);
      rt.memcpyAsync(out.data(), devRecv, recvBytes, stream);
      rt.streamSynchronize(stream);
      rt.free(devSend);
      rt.free(devRecv);
      EXPECT_EQ(out, hostRecv) << "case " << k << " rank " << r << " coll "
                               << static_cast<int>(c.coll) << " type " << c.type << " op " << c.op
                               << " count " << c.count << " inPlace " << c.inPlace;
    }
    rt.streamDestroy(stream);
  });
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
    EXPECT_EQ(findComm(gpu[r])->calls().inFlight(nullptr), 1u) << r;
    EXPECT_EQ(findComm(gpu[r])->calls().snapshot().completed, 0u) << r;
  }
  release.set_value();
  for (int r = 0; r < kRanks; ++r) {
    rt.streamSynchronize(streams[r]);
    EXPECT_EQ(findComm(gpu[r])->calls().inFlight(nullptr), 0u) << r;
    EXPECT_EQ(findComm(gpu[r])->calls().snapshot().completed, 1u) << r;
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

// Two processes share simulated GPU 0: both inits succeed, the AllReduce on their streams is
// exact, and the parent warns once that processes share a GPU without MPS.
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
  // Fork before this process starts any thread (the unique id's root listener is one): a child
  // forked while another thread holds a lock, such as a sanitizer's allocator lock, can
  // deadlock. The child gets the id through a pipe.
  int idPipe[2];
  ASSERT_EQ(pipe(idPipe), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(idPipe[1]);
    loomUniqueId id;
    const bool got = read(idPipe[0], &id, sizeof(id)) == static_cast<ssize_t>(sizeof(id));
    _exit(got ? rank(1, id) : 14);
  }
  close(idPipe[0]);
  loomUniqueId id;
  ASSERT_EQ(loomGetUniqueId(&id), loomSuccess);
  ASSERT_EQ(write(idPipe[1], &id, sizeof(id)), static_cast<ssize_t>(sizeof(id)));
  close(idPipe[1]);
  ::testing::internal::CaptureStderr();
  const int parent = rank(0, id);
  const std::string log = ::testing::internal::GetCapturedStderr();
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_EQ(parent, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_TRUE(contains(log, "MPS is not running")) << log;
}

}  // namespace
}  // namespace loom

namespace loom {
namespace {

// A call whose peer never comes fails on its stream: by timeout, or at once on abort. Either
// way the stream's work ends, the stream reports the error and so does the communicator.
TEST(SimExecutor, MissingPeerTimesOutOrAbortsOnTheStream) {
  cuda::DeviceRuntime& rt = cuda::deviceRuntime();
  for (bool abort : {false, true}) {
    test::ScopedEnv timeout("LOOM_TIMEOUT", abort ? "300" : "1");
    std::vector<loomComm_t> gpu(2);
    std::vector<int> devices(2, 0);
    ASSERT_EQ(loomCommInitAll(gpu.data(), 2, devices.data()), loomSuccess);
    void* stream = rt.streamCreate();
    auto* buf = static_cast<float*>(rt.malloc(1024 * sizeof(float)));
    ASSERT_EQ(loomAllReduce(buf, buf, 1024, loomFloat32, loomSum, gpu[0],
                            static_cast<loomStream_t>(stream)),
              loomSuccess);
    if (abort) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      EXPECT_FALSE(rt.streamQuery(stream));  // waiting for rank 1
      EXPECT_EQ(loomCommAbort(gpu[0]), loomSuccess);
    }
    std::string msg;
    try {
      rt.streamSynchronize(stream);
    } catch (const CudaError& e) {
      msg = e.what();
    }
    EXPECT_FALSE(msg.empty()) << "the stream reported no error";
    if (!abort) {
      EXPECT_TRUE(contains(msg, "AllReduce")) << msg;
      loomResult_t async = loomSuccess;
      EXPECT_EQ(loomCommGetAsyncError(gpu[0], &async), loomSuccess);
      EXPECT_EQ(async, loomTimeout);
      EXPECT_EQ(loomCommAbort(gpu[0]), loomSuccess);
    }
    EXPECT_EQ(loomCommAbort(gpu[1]), loomSuccess);
    rt.free(buf);
    rt.streamDestroy(stream);
  }
}

}  // namespace
}  // namespace loom
