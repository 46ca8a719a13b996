// GPUDirect RDMA for the ib transport: a GPU rank's ring whose data the NIC reads and writes in
// the GPU's memory, so the proxy thread posts and counts a connection's steps but copies none.
//
// When. A GPU rank's ib connection is direct unless LOOM_GDR_DISABLE=1, as long as the ring's
// device memory can be registered with the NIC:
//   - dma-buf: the CUDA driver exports the memory as a dma-buf fd
//     (cuMemGetHandleForAddressRange) and ibv_reg_dmabuf_mr registers it (Linux 5.12 or later,
//     rdma-core 34 or later, a driver with dma-buf support);
//   - else nvidia-peermem: with that kernel module loaded, ibv_reg_mr takes a device pointer.
// Otherwise the connection is staged through pinned host memory by the proxy
// (transports/proxy/proxy_connection.h). The transport logs the choice and its reason at INFO
// for every connection. The distance between the GPU and the NIC is not weighed: a GPU far from
// its NIC (across a CPU socket) may be faster staged, and LOOM_GDR_DISABLE=1 says so.
//
// Layout. The data slots are device memory, slotBytes each, back to back. The control is one
// page of pinned host memory mapped into the GPU and registered with the NIC too:
//   - the Simple ring's counters and per-slot words (connection_view.h), which the device program
//     steps as it steps a shm ring: a sender's kernel writes a slot, its word, then tail; a
//     receiver's kernel reads tail, the word and the slot, then writes head;
//   - on a receiver, the sender's NIC writes each step's word (bytes | tag << 32) into `words`
//     before the data, so the kernel reads it from host memory where the proxy could not;
//   - on a sender, `headers` holds each step's IbSlotHeader for a receiver whose ring is a host
//     ring with headers in its slots (ib_connection.h).
// The device program's system-scope fences order its data before tail; on the receiving side
// the proxy flushes the NIC's writes into the GPU (cudaDeviceFlushGPUDirectRDMAWrites, where the
// device needs it) before it publishes tail.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "transports/ib/ib_connection.h"
#include "transports/mapped_ring.h"
#include "transports/transport.h"

namespace loom::transport::ib {

struct GdrControl : MappedRingControl {
  IbSlotHeader headers[kSlots] = {};  // a sender's step headers
};
static_assert(sizeof(GdrControl) <= kPageBytes);

class GdrRing {
 public:
  // Allocates the slots on CUDA device `gpu` and the control page, and registers both with
  // RDMA device `ibDevice` (IbDevices index) for `access`. Throws Error saying why when either
  // cannot be registered (tryGdrRing turns that into staging).
  GdrRing(int ibDevice, int gpu, size_t slotBytes, int access, const std::string& link);
  ~GdrRing();
  GdrRing(const GdrRing&) = delete;
  GdrRing& operator=(const GdrRing&) = delete;

  GdrControl& control() const { return *control_; }
  // Step `step`'s slot, a device address.
  uint8_t* data(uint64_t step) const { return slots_ + (step % kSlots) * slotBytes_; }
  uint64_t dataAddress() const { return reinterpret_cast<uintptr_t>(slots_); }
  uint32_t dataLkey() const { return dataMr_->lkey; }
  uint32_t dataRkey() const { return dataMr_->rkey; }
  // Host addresses of the control page's words and headers, for the NIC.
  uint64_t wordsAddress() const { return reinterpret_cast<uintptr_t>(control_->words); }
  uint32_t controlLkey() const { return controlMr_->lkey; }
  uint32_t controlRkey() const { return controlMr_->rkey; }
  size_t slotBytes() const { return slotBytes_; }
  int gpu() const { return gpu_; }
  // "dma-buf" or "nvidia-peermem": how the slots were registered.
  const char* how() const { return how_; }
  const ConnectionView* view() const { return &view_; }

 private:
  void release() noexcept;
  int gpu_;
  size_t slotBytes_;
  uint8_t* allocation_ = nullptr;  // device memory
  uint8_t* slots_ = nullptr;       // in it, from a page boundary
  uint8_t* host_ = nullptr;        // the control page, pinned and mapped
  GdrControl* control_ = nullptr;
  ibv_mr* dataMr_ = nullptr;
  ibv_mr* controlMr_ = nullptr;
  const char* how_ = "";
  ConnectionView view_;
};

// Registers the CUDA device memory [data, data + bytes) with `pd` (of RDMA device `nic`, for
// messages): dma-buf first, then nvidia-peermem. Returns the MR and sets `how` ("dma-buf",
// "nvidia-peermem"), or throws InvalidArgument saying what each way answered.
ibv_mr* registerDeviceMemory(ibv_pd* pd, const std::string& nic, void* data, size_t bytes,
                             int access, const char** how);

// A direct ring for a GPU rank's connection, or nullptr with `why` saying why the connection
// is staged instead (LOOM_GDR_DISABLE, no dma-buf and no nvidia-peermem, a refused
// registration).
std::unique_ptr<GdrRing> tryGdrRing(int ibDevice, int gpu, size_t slotBytes, int access,
                                    const std::string& link, std::string* why);

// How many direct rings exist now in this process, and how many steps device programs have
// posted by address from registered GPU buffers (for tests).
size_t liveGdrRings();
uint64_t gdrStepsByAddress();
void countStepByAddress();

// Tests: whether nvidia-peermem counts as loaded (1 or 0; -1, the default, looks in sysfs).
void setPeermemForTest(int loaded);

}  // namespace loom::transport::ib
