// The simulated device runtime (src/cuda/sim_runtime.h), a test double of CUDA: memory and
// its pointer attributes, streams that run in order, events, host-twin kernels, and IPC
// handles that cross a fork through memfds. Each test makes its own runtime.
#include "src/cuda/sim_runtime.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <future>
#include <thread>
#include <vector>

#include "src/base/error.h"
#include "tests/test_util.h"

namespace loom::cuda {
namespace {

using test::contains;
using test::messageOf;

TEST(SimRuntime, DevicesHaveStableDistinctIdentities) {
  auto rt = makeSimRuntime(3);
  EXPECT_EQ(rt->deviceCount(), 3);
  EXPECT_STREQ(rt->name(), "sim");
  const DeviceIdentity a = rt->identity(0), b = rt->identity(1);
  EXPECT_NE(a.uuid, b.uuid);
  EXPECT_STREQ(a.busId, "0000:10:00.0");
  EXPECT_STREQ(b.busId, "0000:11:00.0");
  EXPECT_EQ(makeSimRuntime(1)->identity(0).uuid, a.uuid);  // another process sees the same GPU
  EXPECT_TRUE(a.caps & kCapIpcLegacy);
  EXPECT_TRUE(a.caps & kCapSimulated);
  EXPECT_FALSE(a.caps & kCapMps);
  EXPECT_TRUE(contains(messageOf<CudaError>([&] { rt->identity(3); }), "cudaErrorInvalidDevice"));
  EXPECT_TRUE(contains(messageOf<CudaError>([&] { rt->setDevice(-1); }), "cudaErrorInvalidDevice"));
}

TEST(SimRuntime, PointerAttributesFollowEachAllocation) {
  auto rt = makeSimRuntime(2);
  rt->setDevice(1);
  EXPECT_EQ(rt->currentDevice(), 1);
  char* dev = static_cast<char*>(rt->malloc(1000));
  PointerInfo info = rt->pointerInfo(dev + 999);
  EXPECT_EQ(info.kind, PointerKind::kDevice);
  EXPECT_EQ(info.device, 1);
  EXPECT_EQ(info.hostPointer, nullptr);
  EXPECT_EQ(rt->pointerInfo(dev + 1000).kind, PointerKind::kUnregistered);  // past the end

  void* pinned = rt->hostAlloc(64, kHostMapped);
  info = rt->pointerInfo(pinned);
  EXPECT_EQ(info.kind, PointerKind::kHostPinned);
  EXPECT_EQ(rt->hostDevicePointer(pinned), pinned);  // unified addressing
  void* managed = rt->mallocManaged(64);
  EXPECT_EQ(rt->pointerInfo(managed).kind, PointerKind::kManaged);

  std::vector<char> pageable(4096);
  EXPECT_EQ(rt->pointerInfo(pageable.data()).kind, PointerKind::kUnregistered);
  EXPECT_TRUE(contains(messageOf<CudaError>([&] { rt->hostDevicePointer(pageable.data()); }),
                       "cudaErrorInvalidValue"));
  rt->hostRegister(pageable.data(), 4096, kHostDefault);
  EXPECT_EQ(rt->pointerInfo(pageable.data() + 4095).kind, PointerKind::kHostPinned);
  EXPECT_TRUE(contains(messageOf<CudaError>([&] { rt->hostRegister(pageable.data() + 8, 8, 0); }),
                       "AlreadyRegistered"));
  rt->hostUnregister(pageable.data());
  EXPECT_EQ(rt->pointerInfo(pageable.data()).kind, PointerKind::kUnregistered);

  rt->free(dev);
  EXPECT_EQ(rt->pointerInfo(dev).kind, PointerKind::kUnregistered);
  EXPECT_TRUE(contains(messageOf<CudaError>([&] { rt->free(dev); }), "cudaFree failed"));
  rt->free(managed);
  rt->freeHost(pinned);
  rt->free(nullptr);  // as cudaFree(NULL)
  rt->setDevice(0);
}

// The dma-buf of device memory (for ibv_reg_dmabuf_mr) is the allocation's own memfd, with the
// range's offset in it; other memory, and ranges past the allocation, are refused.
TEST(SimRuntime, DeviceMemoryExportsADmabuf) {
  auto rt = makeSimRuntime(1);
  auto* dev = static_cast<char*>(rt->malloc(3 * 4096));
  std::memset(dev + 5000, 0x5a, 16);
  uint64_t offset = 0;
  const int fd = rt->exportDmabuf(dev + 4096, 8192, &offset);
  ASSERT_GE(fd, 0);
  EXPECT_EQ(offset, 4096u);
  char seen[16] = {};
  EXPECT_EQ(pread(fd, seen, sizeof(seen), 5000), static_cast<ssize_t>(sizeof(seen)));
  EXPECT_EQ(seen[0], 0x5a);
  EXPECT_EQ(seen[15], 0x5a);
  close(fd);
  EXPECT_TRUE(
      contains(messageOf<CudaError>([&] { rt->exportDmabuf(dev + 4096, 3 * 4096, &offset); }),
               "not inside one cudaMalloc allocation"));
  void* pinned = rt->hostAlloc(4096, kHostMapped);
  EXPECT_TRUE(contains(messageOf<CudaError>([&] { rt->exportDmabuf(pinned, 64, &offset); }),
                       "cuMemGetHandleForAddressRange"));
  rt->flushRdmaWrites(0);  // nothing to flush: simulated device memory is host memory
  EXPECT_THROW(rt->flushRdmaWrites(1), CudaError);
  rt->freeHost(pinned);
  rt->free(dev);
}

TEST(SimRuntime, StreamRunsWorkInOrderAndAsynchronously) {
  auto rt = makeSimRuntime(1);
  Stream s = rt->streamCreate();
  constexpr size_t kBytes = 1 << 16;
  char* a = static_cast<char*>(rt->malloc(kBytes));
  char* b = static_cast<char*>(rt->malloc(kBytes));
  std::vector<char> host(kBytes, 0);

  // The host function blocks the stream; nothing queued after it may run before it returns.
  std::promise<void> release;
  std::shared_future<void> gate = release.get_future().share();
  rt->launchHostFunc(
      s, [](void* g) { static_cast<std::shared_future<void>*>(g)->wait(); }, &gate);
  rt->memsetAsync(a, 0x5a, kBytes, s);
  rt->memcpyAsync(b, a, kBytes, s);
  rt->memcpyAsync(host.data(), b, kBytes, s);
  EXPECT_FALSE(rt->streamQuery(s));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(host[0], 0);  // still held behind the host function
  release.set_value();
  rt->streamSynchronize(s);
  EXPECT_TRUE(rt->streamQuery(s));
  EXPECT_EQ(std::count(host.begin(), host.end(), 0x5a), static_cast<long>(kBytes));

  // Many small items keep their order.
  std::vector<int> order;
  std::vector<std::pair<std::vector<int>*, int>> items;
  items.reserve(1000);
  for (int i = 0; i < 1000; ++i) {
    items.push_back({&order, i});
    rt->launchHostFunc(
        s,
        [](void* p) {
          auto* item = static_cast<std::pair<std::vector<int>*, int>*>(p);
          item->first->push_back(item->second);
        },
        &items.back());
  }
  rt->streamSynchronize(s);
  ASSERT_EQ(order.size(), 1000u);
  for (int i = 0; i < 1000; ++i) EXPECT_EQ(order[i], i);
  rt->free(a);
  rt->free(b);
  rt->streamDestroy(s);
}

TEST(SimRuntime, EventsOrderWorkAcrossStreams) {
  auto rt = makeSimRuntime(1);
  Stream producer = rt->streamCreate(), consumer = rt->streamCreate();
  Event ready = rt->eventCreate(false);
  EXPECT_TRUE(rt->eventQuery(ready));  // never recorded: complete, as in CUDA

  std::promise<void> release;
  std::shared_future<void> gate = release.get_future().share();
  int value = 0, seen = -1;
  rt->launchHostFunc(
      producer, [](void* g) { static_cast<std::shared_future<void>*>(g)->wait(); }, &gate);
  rt->launchHostFunc(
      producer, [](void* v) { *static_cast<int*>(v) = 42; }, &value);
  rt->eventRecord(ready, producer);
  rt->streamWaitEvent(consumer, ready);
  struct Read {
    int* from;
    int* to;
  } read{&value, &seen};
  rt->launchHostFunc(
      consumer, [](void* r) { *static_cast<Read*>(r)->to = *static_cast<Read*>(r)->from; }, &read);
  EXPECT_FALSE(rt->eventQuery(ready));
  EXPECT_FALSE(rt->streamQuery(consumer));  // waits for the producer's event
  release.set_value();
  rt->streamSynchronize(consumer);
  EXPECT_EQ(seen, 42);
  EXPECT_TRUE(rt->eventQuery(ready));
  rt->eventSynchronize(ready);

  // A wait refers to the record that was latest when it was enqueued.
  rt->eventRecord(ready, producer);
  rt->streamSynchronize(producer);
  Event t0 = rt->eventCreate(true), t1 = rt->eventCreate(true);
  rt->eventRecord(t0, consumer);
  rt->eventRecord(t1, consumer);
  rt->eventSynchronize(t1);
  EXPECT_GE(rt->eventElapsedMs(t0, t1), 0.0f);
  EXPECT_TRUE(contains(messageOf<CudaError>([&] { rt->eventElapsedMs(ready, t1); }), "timing"));
  rt->eventDestroy(t0);
  rt->eventDestroy(t1);
  rt->eventDestroy(ready);
  rt->streamDestroy(producer);
  rt->streamDestroy(consumer);
}

TEST(SimRuntime, EventDestroyedWithPendingRecordIsSafe) {
  auto rt = makeSimRuntime(1);
  Stream s = rt->streamCreate();
  std::promise<void> release;
  std::shared_future<void> gate = release.get_future().share();
  rt->launchHostFunc(
      s, [](void* g) { static_cast<std::shared_future<void>*>(g)->wait(); }, &gate);
  Event e = rt->eventCreate(false);
  rt->eventRecord(e, s);
  rt->eventDestroy(e);
  release.set_value();
  rt->streamSynchronize(s);
  rt->streamDestroy(s);
}

// A host twin copies its argument at launch; the stream runs the kernel later.
void* const kFakeKernel = reinterpret_cast<void*>(0x1234);
std::function<void()> fillTwin(Dim3 grid, Dim3 block, void** args) {
  int* out = *static_cast<int**>(args[0]);
  const int value = *static_cast<int*>(args[1]);
  const unsigned threads = grid.x * block.x;
  return [=] {
    for (unsigned i = 0; i < threads; ++i) out[i] = value + static_cast<int>(i);
  };
}

TEST(SimRuntime, KernelsRunAsHostTwins) {
  auto rt = makeSimRuntime(1);
  int* out = static_cast<int*>(rt->malloc(64 * sizeof(int)));
  Stream s = rt->streamCreate();
  EXPECT_TRUE(contains(messageOf<CudaError>([&] {
                         void* none[1] = {nullptr};
                         rt->launchKernel(kFakeKernel, Dim3{1}, Dim3{1}, none, 0, s);
                       }),
                       "host twin"));
  rt->registerHostKernel(kFakeKernel, fillTwin);
  {
    int value = 100;  // gone before the stream runs the kernel
    void* args[] = {&out, &value};
    rt->launchKernel(kFakeKernel, Dim3{2}, Dim3{32}, args, 0, s);
  }
  rt->streamSynchronize(s);
  for (int i = 0; i < 64; ++i) EXPECT_EQ(out[i], 100 + i);
  rt->streamDestroy(s);
  rt->free(out);
}

TEST(SimRuntime, FailingWorkIsReportedBySynchronize) {
  auto rt = makeSimRuntime(1);
  Stream s = rt->streamCreate();
  rt->registerHostKernel(kFakeKernel, [](Dim3, Dim3, void**) -> std::function<void()> {
    return [] { throw InternalError("a simulated kernel fault"); };
  });
  rt->launchKernel(kFakeKernel, Dim3{1}, Dim3{1}, nullptr, 0, s);
  EXPECT_TRUE(contains(messageOf<CudaError>([&] { rt->streamSynchronize(s); }),
                       "a simulated kernel fault"));
  rt->streamSynchronize(s);  // reported once
  rt->streamDestroy(s);
}

// Capture only records the state, as a test double: beginning twice, capturing the legacy
// stream and ending without a capture fail as in CUDA, and work on a capturing stream fails
// (the simulation captures nothing) until the capture ends.
TEST(SimRuntime, StreamCaptureRecordsTheStateAndRefusesWork) {
  auto owned = makeSimRuntime(1);
  DeviceRuntime& rt = *owned;
  Stream s = rt.streamCreate();
  EXPECT_FALSE(rt.streamIsCapturing(s));
  EXPECT_FALSE(rt.streamIsCapturing(nullptr));
  EXPECT_THROW(rt.streamEndCapture(s), CudaError);
  EXPECT_THROW(rt.streamBeginCapture(nullptr), CudaError);
  rt.streamBeginCapture(s);
  EXPECT_TRUE(rt.streamIsCapturing(s));
  EXPECT_THROW(rt.streamBeginCapture(s), CudaError);
  int value = 0, one = 1;
  EXPECT_THROW(rt.memcpyAsync(&value, &one, sizeof(int), s), CudaError);
  EXPECT_THROW(rt.streamSynchronize(s), CudaError);
  rt.streamEndCapture(s);
  EXPECT_FALSE(rt.streamIsCapturing(s));
  rt.memcpyAsync(&value, &one, sizeof(int), s);
  rt.streamSynchronize(s);
  EXPECT_EQ(value, 1);
  rt.streamDestroy(s);
}

// The child opens the parent's device memory by its handle (the memfd, reached through /proc),
// reads what the parent wrote and writes an answer the parent sees in its own mapping.
TEST(SimRuntime, IpcHandleCrossesFork) {
  auto rt = makeSimRuntime(1);
  rt->setDevice(0);  // the current device is per thread, across runtimes, as in CUDA
  constexpr size_t kBytes = 3 * 4096 + 5;
  auto* mem = static_cast<unsigned char*>(rt->malloc(kBytes));
  for (size_t i = 0; i < kBytes; ++i) mem[i] = static_cast<unsigned char>(i * 7);
  const IpcMemHandle handle = rt->ipcGetMemHandle(mem);
  EXPECT_TRUE(
      contains(messageOf<CudaError>([&] { rt->ipcOpenMemHandle(handle); }), "this process"));
  EXPECT_TRUE(contains(messageOf<CudaError>([&] { rt->ipcGetMemHandle(mem + 1); }),
                       "cudaErrorInvalidValue"));

  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    int code = 0;
    try {
      auto* peer = static_cast<unsigned char*>(rt->ipcOpenMemHandle(handle));
      if (peer == mem) code = 2;  // a new mapping, not the inherited one
      const PointerInfo info = rt->pointerInfo(peer);
      if (info.kind != PointerKind::kDevice || info.device != 0) code = 3;
      for (size_t i = 0; i < kBytes && code == 0; ++i)
        if (peer[i] != static_cast<unsigned char>(i * 7)) code = 4;
      for (size_t i = 0; i < kBytes; ++i) peer[i] = static_cast<unsigned char>(255 - i % 251);
      rt->ipcCloseMemHandle(peer);
    } catch (...) {
      code = 5;
    }
    _exit(code);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  ASSERT_EQ(WEXITSTATUS(status), 0);
  for (size_t i = 0; i < kBytes; ++i)
    ASSERT_EQ(mem[i], static_cast<unsigned char>(255 - i % 251)) << i;
  rt->free(mem);
}

}  // namespace
}  // namespace loom::cuda
