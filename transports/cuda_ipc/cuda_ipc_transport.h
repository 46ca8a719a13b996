// The CUDA IPC transport: ranks of CUDA communicators on one host keep their rings in device
// memory, where the device program (src/exec/cuda/device_program.h) writes and reads them
// directly, over NVLink or PCIe between GPUs, or inside one GPU between ranks that share it.
//
// The receiver allocates the ring on its GPU (control words, then the slots: the Simple and LL
// layouts of connection_view.h, as shm lays them out in host memory) and sends its address and
// a cudaIpcMemHandle. A sender in the same process uses the address (enabling peer access
// between different GPUs); one in another process opens the handle, and closes it when the
// connection goes. Only the receiver's ring is shared; each side's counters live in it, so a
// kernel resumes where the last launch left off.
//
// Which pairs it takes (canConnect): ranks of CUDA communicators on one host, where
//   - LOOM_P2P_DISABLE is not 1;
//   - the path between their GPUs is no worse than LOOM_P2P_LEVEL (NCCL's names: LOC, NVL,
//     PIX, PXB, PHB, SYS, or 0-5; or loom's path labels). The default is PXB: NVLink and PCIe
//     switches, not through a host bridge. Ranks that share a GPU always qualify;
//   - between processes, both GPUs can export and open IPC handles; within a process, two
//     different GPUs can access each other's memory.
// Other CUDA pairs on one host take shm, whose rings the device reaches through the host.
//
// Setup makes CUDA calls (cudaMalloc, cudaMemcpy, IPC handles), which CUDA forbids inside a
// stream's host function: an executor on a GPU connects before it enqueues a call. (The
// simulated executor connects on its stream's thread, which the simulated runtime allows.)
//
// The rings are stepped only by device code: the connections' host-side calls (tryAcquire,
// tryReceive, ...) refuse, so a call that the device program cannot run (one that also needs a
// wire transport) fails with a message instead of touching device memory from the host.
#pragma once

#include "transports/transport_setup.h"

namespace loom::transport {

class CudaIpcTransport final : public Transport {
 public:
  const char* name() const override { return "cuda_ipc"; }
  LogSubsys logSubsys() const override { return kLogP2p; }
  bool canConnect(const PeerPair& pair) const override;
  std::string whyNot(const PeerPair& pair) const override;
  // LL rings have the common LL layout (ring_views.h); Simple slots are LOOM_BUFFSIZE's.
  size_t maxSlotBytes(Protocol protocol) const override;
  bool sharesMemory() const override { return true; }
  std::unique_ptr<PendingRecv> setupRecv(const SetupContext& ctx, ConnectBlob* blob) override;
  std::unique_ptr<SendConnection> connectSend(const SetupContext& ctx, const ConnectBlob& blob,
                                              ConnectBlob* ack) override;
};

// The worst path LOOM_P2P_LEVEL allows (NCCL's names, numbers or loom's labels); throws
// InvalidArgument for anything else.
topo::PathClass p2pLevel();

}  // namespace loom::transport
