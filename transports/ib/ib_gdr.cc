#include "transports/ib/ib_gdr.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <new>

#include "src/base/env.h"
#include "src/base/error.h"
#include "src/base/logging.h"
#include "src/cuda/runtime.h"
#include "transports/ib/ib_devices.h"
#include "transports/ib/ib_verbs.h"

namespace loom::transport::ib {
namespace {

std::atomic<size_t> liveRings{0};
std::atomic<uint64_t> stepsByAddress{0};
std::atomic<int> peermemOverride{-1};

// nvidia-peermem (or the older nv_peer_mem) registers itself with the kernel's peer-memory
// interface; NCCL looks for the same two files.
bool peermemLoaded() {
  const int forced = peermemOverride.load(std::memory_order_relaxed);
  if (forced >= 0) return forced != 0;
  return access("/sys/kernel/mm/memory_peers/nv_mem/version", F_OK) == 0 ||
         access("/sys/module/nvidia_peermem/version", F_OK) == 0;
}

}  // namespace

ibv_mr* registerDeviceMemory(ibv_pd* pd, const std::string& nic, void* data, size_t bytes,
                             int access, const char** how) {
  auto* memory = static_cast<uint8_t*>(data);
  const Verbs& v = verbs();
  std::string dmabuf;
  if (v.regDmabufMr == nullptr) {
    dmabuf = strCat(v.source, " has no dma-buf registration (IBVERBS_1.12, rdma-core 34 or later)");
  } else {
    try {
      uint64_t offset = 0;
      const int fd = cuda::deviceRuntime().exportDmabuf(memory, bytes, &offset);
      ibv_mr* mr =
          v.regDmabufMr(pd, offset, bytes, reinterpret_cast<uintptr_t>(memory), fd, access);
      const int err = errno;
      ::close(fd);  // the registration keeps the buffer
      if (mr != nullptr) {
        *how = "dma-buf";
        return mr;
      }
      dmabuf = strCat(nic, " refused the dma-buf registration: ", std::strerror(err));
    } catch (const Error& e) {
      dmabuf = e.what();
    }
  }
  if (!peermemLoaded()) throw InvalidArgument(strCat(dmabuf, "; and nvidia-peermem is not loaded"));
  ibv_mr* mr = v.regMr(pd, memory, bytes, access);
  if (mr == nullptr)
    throw InvalidArgument(strCat(dmabuf, "; and ", nic, " refused the GPU memory through ",
                                 "nvidia-peermem: ", std::strerror(errno)));
  *how = "nvidia-peermem";
  return mr;
}

GdrRing::GdrRing(int ibDevice, int gpu, size_t slotBytes, int access, const std::string& link)
    : gpu_(gpu), slotBytes_(slotBytes) {
  const IbDevice& dev = IbDevices::instance().devices().at(ibDevice);
  cuda::DeviceRuntime& rt = cuda::deviceRuntime();
  cuda::CurrentDeviceScope scope(gpu);
  try {
    // Whole pages, as a dma-buf range must be: one page more, and the slots from the first
    // page boundary in it.
    allocation_ = static_cast<uint8_t*>(rt.malloc(kSlots * slotBytes + kPageBytes));
    const auto start = reinterpret_cast<uintptr_t>(allocation_);
    slots_ = allocation_ + ((start + kPageBytes - 1) / kPageBytes * kPageBytes - start);
    host_ =
        static_cast<uint8_t*>(rt.hostAlloc(kPageBytes, cuda::kHostMapped | cuda::kHostPortable));
    std::memset(host_, 0, kPageBytes);
    control_ = new (host_) GdrControl;
    dataMr_ = registerDeviceMemory(dev.pd, dev.name, slots_, kSlots * slotBytes, access, &how_);
    controlMr_ = verbs().regMr(dev.pd, host_, kPageBytes, access);
    if (controlMr_ == nullptr)
      throwSystemError(strCat(link, ": registering the pinned control page with ", dev.name),
                       errno);
    view_ = mappedSimpleView(MemoryKind::kDevice, slots_, slotBytes, control_, host_,
                             rt.hostDevicePointer(host_));
  } catch (...) {
    release();
    throw;
  }
  liveRings.fetch_add(1, std::memory_order_relaxed);
}

GdrRing::~GdrRing() {
  release();
  liveRings.fetch_sub(1, std::memory_order_relaxed);
}

void GdrRing::release() noexcept {
  if (controlMr_ != nullptr) verbs().deregMr(controlMr_);
  if (dataMr_ != nullptr) verbs().deregMr(dataMr_);
  controlMr_ = dataMr_ = nullptr;
  try {
    cuda::DeviceRuntime& rt = cuda::deviceRuntime();
    cuda::CurrentDeviceScope scope(gpu_);
    if (host_ != nullptr) rt.freeHost(host_);
    if (allocation_ != nullptr) rt.free(allocation_);
  } catch (const std::exception& e) {
    LOOM_WARN(kLogNet, "freeing a GPUDirect ring failed: ", e.what());
  }
  host_ = slots_ = allocation_ = nullptr;
}

std::unique_ptr<GdrRing> tryGdrRing(int ibDevice, int gpu, size_t slotBytes, int access,
                                    const std::string& link, std::string* why) {
  if (envInt(EnvVar::LOOM_GDR_DISABLE) != 0) {
    *why = "LOOM_GDR_DISABLE=1";
    return nullptr;
  }
  try {
    return std::make_unique<GdrRing>(ibDevice, gpu, slotBytes, access, link);
  } catch (const Error& e) {
    *why = e.what();
    return nullptr;
  }
}

size_t liveGdrRings() { return liveRings.load(std::memory_order_relaxed); }

uint64_t gdrStepsByAddress() { return stepsByAddress.load(std::memory_order_relaxed); }

void countStepByAddress() { stepsByAddress.fetch_add(1, std::memory_order_relaxed); }

void setPeermemForTest(int loaded) { peermemOverride.store(loaded, std::memory_order_relaxed); }

}  // namespace loom::transport::ib
