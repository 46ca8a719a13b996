// The CUDA IPC transport (transports/cuda_ipc) under the simulated runtime, a test double of
// CUDA whose device memory is host memory in memfds: which pairs it takes, rings in the
// receiver's device memory between threads (one GPU and two) and between processes (IPC
// handles), and host-side steps refused. The collectives over it are the matrix of
// cuda_executor_test.cc, which runs over cuda_ipc by default.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "loom/loom.h"
#include "src/base/error.h"
#include "src/comm/comm.h"
#include "src/comm/comm_registry.h"
#include "src/cuda/runtime.h"
#include "tests/cuda/fork_pair.h"
#include "tests/test_util.h"
#include "transports/cuda_ipc/cuda_ipc_transport.h"
#include "transports/registry.h"
#include "transports/tags.h"

namespace loom {
namespace {

using test::contains;
using test::messageOf;
using test::ScopedEnv;
using topo::PathClass;
using transport::ConnectionRequest;
using transport::Connections;
using transport::Protocol;

RankInfo gpuRank(int rank, int device, int pid, uint32_t caps = cuda::kCapIpcLegacy) {
  RankInfo info;
  info.hostHash = 42;
  info.rank = rank;
  info.device = device;
  info.pid = pid;
  info.gpuCaps = caps;
  std::memcpy(info.gpuUuid, "gpu-uuid-0000000", 16);
  info.gpuUuid[15] = static_cast<uint8_t>('0' + device);
  return info;
}

const char* chosen(const RankInfo& a, const RankInfo& b, PathClass path) {
  return transport::selectTransport({a, b, path}).name();
}

TEST(CudaIpcChoice, TakesGpuPairsOfOneHostThatTheLevelAllows) {
  ScopedEnv level("LOOM_P2P_LEVEL", "");
  ScopedEnv disable("LOOM_P2P_DISABLE", "0");
  RankInfo cpu0 = gpuRank(0, -1, 100, 0), cpu1 = gpuRank(1, -1, 101, 0);
  EXPECT_STREQ(chosen(cpu0, cpu1, PathClass::kSameNuma), "shm");
  // One GPU, two processes: always, whatever the topology says of the processes.
  EXPECT_STREQ(chosen(gpuRank(0, 0, 100), gpuRank(1, 0, 101), PathClass::kSameNuma), "cuda_ipc");
  // Two GPUs: by the path between them; the default level is PXB.
  EXPECT_STREQ(chosen(gpuRank(0, 0, 100), gpuRank(1, 1, 101), PathClass::kNvlink), "cuda_ipc");
  EXPECT_STREQ(chosen(gpuRank(0, 0, 100), gpuRank(1, 1, 101), PathClass::kPcieSwitch), "cuda_ipc");
  EXPECT_STREQ(chosen(gpuRank(0, 0, 100), gpuRank(1, 1, 101), PathClass::kHostBridge), "shm");
  EXPECT_STREQ(chosen(gpuRank(0, 0, 100), gpuRank(1, 1, 100), PathClass::kSameProcess), "cuda_ipc");
  // Between processes both GPUs must share memory through IPC; within one, no handle is used.
  EXPECT_STREQ(chosen(gpuRank(0, 0, 100), gpuRank(1, 0, 101, 0), PathClass::kSameGpu), "shm");
  EXPECT_STREQ(chosen(gpuRank(0, 0, 100, 0), gpuRank(1, 0, 100, 0), PathClass::kSameGpu),
               "cuda_ipc");
  // Another host: never.
  RankInfo far = gpuRank(1, 0, 101);
  far.hostHash = 43;
  EXPECT_STREQ(chosen(gpuRank(0, 0, 100), far, PathClass::kNetwork), "socket");
}

TEST(CudaIpcChoice, FollowsLevelAndDisableAsNccl) {
  const RankInfo a = gpuRank(0, 0, 100), b = gpuRank(1, 1, 101), sameGpu = gpuRank(1, 0, 101);
  {
    ScopedEnv level("LOOM_P2P_LEVEL", "SYS");
    EXPECT_STREQ(chosen(a, b, PathClass::kCrossSocket), "cuda_ipc");
    EXPECT_EQ(transport::p2pLevel(), PathClass::kCrossSocket);
  }
  {
    ScopedEnv level("LOOM_P2P_LEVEL", "LOC");
    EXPECT_STREQ(chosen(a, b, PathClass::kNvlink), "shm");
    EXPECT_STREQ(chosen(a, sameGpu, PathClass::kSameNuma), "cuda_ipc");
  }
  {
    ScopedEnv level("LOOM_P2P_LEVEL", "4");  // NCCL's number for PHB
    EXPECT_EQ(transport::p2pLevel(), PathClass::kHostBridge);
    ScopedEnv numa("LOOM_P2P_LEVEL", "NUMA");  // a loom label
    EXPECT_EQ(transport::p2pLevel(), PathClass::kSameNuma);
  }
  {
    ScopedEnv level("LOOM_P2P_LEVEL", "fast");
    const std::string msg = messageOf<InvalidArgument>([&] { chosen(a, b, PathClass::kNvlink); });
    EXPECT_TRUE(contains(msg, "LOOM_P2P_LEVEL=fast is not a level")) << msg;
  }
  {
    ScopedEnv disable("LOOM_P2P_DISABLE", "1");
    EXPECT_STREQ(chosen(a, sameGpu, PathClass::kSameGpu), "shm");
  }
}

TEST(CudaIpcChoice, ForcingItWhereItCannotConnectSaysWhy) {
  ScopedEnv force("LOOM_TRANSPORT", "cuda_ipc");
  const std::string cpu = messageOf<InvalidArgument>(
      [&] { chosen(gpuRank(0, -1, 100, 0), gpuRank(1, -1, 101, 0), PathClass::kSameNuma); });
  EXPECT_TRUE(contains(cpu, "rank 0 is on the CPU")) << cpu;
  ScopedEnv disable("LOOM_P2P_DISABLE", "1");
  const std::string off = messageOf<InvalidArgument>(
      [&] { chosen(gpuRank(0, 0, 100), gpuRank(1, 0, 101), PathClass::kSameGpu); });
  EXPECT_TRUE(contains(off, "LOOM_P2P_DISABLE=1 forbids it")) << off;
}

// The requests of a ring over `channels` channels: send to the next rank, receive from the
// previous one.
std::vector<ConnectionRequest> ring(const Comm& comm, Protocol protocol) {
  const int n = comm.nranks(), r = comm.rank();
  std::vector<ConnectionRequest> requests;
  for (int c = 0; c < 2; ++c) {
    requests.push_back({(r + 1) % n, c, true, protocol});
    requests.push_back({(r + n - 1) % n, c, false, protocol});
  }
  return requests;
}

// "" when every connection of `conns` went through `transport` and its view is a ring of
// `protocol` that the ranks' GPUs reach: in the receiver's device memory (cuda_ipc), or in
// host memory mapped into the device (shm for a GPU rank); else what is not.
std::string checkDeviceRings(const Comm& comm, const Connections& conns, Protocol protocol,
                             const char* transport = "cuda_ipc") {
  cuda::DeviceRuntime& rt = cuda::deviceRuntime();
  const bool ipc = std::string(transport) == "cuda_ipc";
  const int next = (comm.rank() + 1) % comm.nranks();
  auto check = [&](const transport::ConnectionView* v, const char* name, const char* side, size_t i,
                   int owner) -> std::string {
    if (std::string(name) != transport) return strCat(side, " ", i, " via ", name);
    const void* slots = protocol == Protocol::kLL ? static_cast<const void*>(v->ll.slots)
                                                  : static_cast<const void*>(v->simple.slots);
    const cuda::PointerInfo info = rt.pointerInfo(slots);
    const bool ok =
        v->protocol == protocol &&
        (ipc ? v->memory == MemoryKind::kDevice && info.kind == cuda::PointerKind::kDevice &&
                   info.device == owner
             : v->memory == MemoryKind::kHostMapped &&
                   info.kind == cuda::PointerKind::kHostPinned && info.devicePointer == slots);
    if (!ok)
      return strCat(side, " ", i, ": not a ", protocol == Protocol::kLL ? "LL" : "Simple",
                    " ring the GPU reaches (", cuda::pointerKindName(info.kind), " of device ",
                    info.device, ")");
    if (protocol == Protocol::kLL && rt.pointerInfo(v->ll.step).kind != info.kind)
      return strCat(side, " ", i, ": its step counter is not beside its ring");
    return "";
  };
  for (size_t i = 0; i < conns.sends.size(); ++i) {
    std::string e = check(conns.sends[i]->view(), conns.sendTransport[i], "send", i,
                          comm.rankInfo(next).device);
    if (!e.empty()) return e;
  }
  for (size_t i = 0; i < conns.recvs.size(); ++i) {
    std::string e = check(conns.recvs[i]->view(), conns.recvTransport[i], "receive", i,
                          comm.rankInfo(comm.rank()).device);
    if (!e.empty()) return e;
  }
  return "";
}

// Three ranks as threads, two on GPU 0 and one on GPU 1: every ring is in its receiver's GPU,
// Simple and LL, and the host may not step one.
TEST(CudaIpcRings, LiveInTheReceiversGpuBetweenThreads) {
  const int devices[3] = {0, 1, 0};
  for (Protocol protocol : {Protocol::kSimple, Protocol::kLL}) {
    loomComm_t comms[3] = {};
    ASSERT_EQ(loomCommInitAll(comms, 3, devices), loomSuccess) << loomGetLastError(nullptr);
    std::vector<std::string> errors(3);
    std::vector<std::string> refusals(3);
    // Kept until every rank has looked: a receiver's ring goes with its connection.
    std::vector<Connections> kept(3);
    test::runThreads(3, [&](int r) {
      try {
        Comm& comm = *findComm(comms[r]);
        Connections& conns = kept[r];
        conns = transport::connectAll(comm, ring(comm, protocol), /*batchTag=*/1);
        errors[r] = checkDeviceRings(comm, conns, protocol);
        refusals[r] = messageOf<InternalError>([&] { conns.sends[0]->tryAcquire(); }) + " | " +
                      messageOf<InternalError>([&] {
                        size_t bytes = 0;
                        conns.recvs[0]->tryReceive(&bytes);
                      });
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
    for (int r = 0; r < 3; ++r) {
      EXPECT_EQ(errors[r], "") << "rank " << r;
      EXPECT_TRUE(contains(refusals[r], "only the CUDA executor's device program steps it"))
          << refusals[r];
    }
    kept.clear();
    for (loomComm_t c : comms) EXPECT_EQ(loomCommDestroy(c), loomSuccess);
  }
}

// GPU ranks that CUDA IPC does not take connect through shm, whose rings each side maps into
// its GPU (cudaHostRegister): the views are the device's addresses, and the host still steps
// the ring through its own.
TEST(CudaIpcRings, WithoutP2PShmRingsAreMappedIntoTheGpu) {
  ScopedEnv disable("LOOM_P2P_DISABLE", "1");
  const int devices[2] = {0, 1};
  for (Protocol protocol : {Protocol::kSimple, Protocol::kLL}) {
    loomComm_t comms[2] = {};
    ASSERT_EQ(loomCommInitAll(comms, 2, devices), loomSuccess) << loomGetLastError(nullptr);
    std::vector<std::string> errors(2);
    std::vector<Connections> kept(2);
    test::runThreads(2, [&](int r) {
      try {
        Comm& comm = *findComm(comms[r]);
        kept[r] = transport::connectAll(comm, ring(comm, protocol), /*batchTag=*/1);
        errors[r] = checkDeviceRings(comm, kept[r], protocol, "shm");
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
    for (int r = 0; r < 2; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
    // Unregistered with their connections: the runtime knows none of the rings any more.
    const void* slots = protocol == Protocol::kLL
                            ? static_cast<const void*>(kept[0].sends[0]->view()->ll.slots)
                            : static_cast<const void*>(kept[0].sends[0]->view()->simple.slots);
    kept.clear();
    EXPECT_EQ(cuda::deviceRuntime().pointerInfo(slots).kind, cuda::PointerKind::kUnregistered);
    for (loomComm_t c : comms) EXPECT_EQ(loomCommDestroy(c), loomSuccess);
  }
}

// Two processes on GPU 0 and GPU 1 (LOOM_P2P_LEVEL=SYS, since the simulated GPUs have no path
// in the topology): each opens the other's ring through its IPC handle (a memfd here), and
// an AllReduce over those rings, run by the device program, is exact.
TEST(CudaIpcRings, CrossProcessesThroughIpcHandles) {
  ScopedEnv level("LOOM_P2P_LEVEL", "SYS");
  constexpr size_t kCount = 70001;  // Simple steps, and a ragged end
  auto rank = [&](int r, const loomUniqueId& id) -> int {
    loomConfig_t config = LOOM_CONFIG_INITIALIZER;
    config.device = r;
    loomComm_t handle = nullptr;
    if (loomCommInitRankConfig(&handle, 2, id, r, &config) != loomSuccess) return 10;
    Comm& comm = *findComm(handle);
    for (Protocol protocol : {Protocol::kSimple, Protocol::kLL}) {
      // Tags far from the communicator's own batches (the AllReduce below connects too).
      const uint32_t tag = transport::kMaxBatchTag - (protocol == Protocol::kLL ? 1 : 0);
      Connections conns = transport::connectAll(comm, ring(comm, protocol), tag);
      if (!checkDeviceRings(comm, conns, protocol).empty()) return 11;
      // And with CUDA IPC refused, shm rings mapped into each side's GPU.
      ScopedEnv off("LOOM_P2P_DISABLE", "1");
      Connections shm = transport::connectAll(comm, ring(comm, protocol), tag - 2);
      if (!checkDeviceRings(comm, shm, protocol, "shm").empty()) return 15;
    }
    cuda::DeviceRuntime& rt = cuda::deviceRuntime();
    rt.setDevice(r);
    void* stream = rt.streamCreate();
    auto* buf = static_cast<int32_t*>(rt.malloc(kCount * sizeof(int32_t)));
    std::vector<int32_t> in(kCount), out(kCount);
    for (size_t i = 0; i < kCount; ++i) in[i] = static_cast<int32_t>(i % 1000) * (r + 1);
    rt.memcpyAsync(buf, in.data(), kCount * sizeof(int32_t), stream);
    if (loomAllReduce(buf, buf, kCount, loomInt32, loomSum, handle,
                      static_cast<loomStream_t>(stream)) != loomSuccess)
      return 12;
    rt.memcpyAsync(out.data(), buf, kCount * sizeof(int32_t), stream);
    rt.streamSynchronize(stream);
    for (size_t i = 0; i < kCount; ++i)
      if (out[i] != static_cast<int32_t>(i % 1000) * 3) return 13;
    rt.free(buf);
    rt.streamDestroy(stream);
    return loomCommDestroy(handle) == loomSuccess ? 0 : 14;
  };
  const test::ForkedPair result = test::runForkedPair(rank);
  EXPECT_EQ(result.parent, 0);
  EXPECT_EQ(result.childStatus, 0);
}

}  // namespace
}  // namespace loom
