#include "transports/cuda_ipc/cuda_ipc_transport.h"

#include <unistd.h>

#include <cstring>
#include <random>
#include <vector>

#include "src/base/env.h"
#include "src/base/error.h"
#include "src/base/logging.h"
#include "src/cuda/runtime.h"
#include "transports/ring_views.h"
#include "transports/slot_ring.h"

namespace loom::transport {
namespace {

using topo::PathClass;

constexpr uint32_t kBlobMagic = 0x4c4d4349;  // "LMCI"
constexpr uint32_t kAckMagic = 0x4c4d4341;   // "LMCA"

// The control words at the start of a ring, each written by one side only and on its own
// 128-byte line (a GPU's L2 line), so the two sides' stores never share one. Plain words: the
// device program reads and writes them with its own ordering (connection_view.h).
struct RingControl {
  alignas(128) uint64_t tail;  // Simple: steps the sender posted
  alignas(128) uint64_t head;  // Simple and LL: steps the receiver released
  // LL: each side's next step (LLRingView::step). They live here, in memory the device reaches,
  // because a kernel advances them and the next launch resumes from them.
  alignas(128) uint64_t senderStep;
  alignas(128) uint64_t receiverStep;
  alignas(128) uint64_t words[kSlots];  // Simple: bytes | tag << 32 of each slot
  uint64_t direct[kSlots];              // Simple: always 0 (the data is in the slot)
  uint64_t region[kSlots];
};
// The slots start one page in: aligned for 16-byte vector loads, never on a control line.
constexpr size_t kDataOffset = kPageBytes;
static_assert(sizeof(RingControl) <= kDataOffset);

size_t ringBytes(Protocol protocol, size_t slotBytes) {
  return kDataOffset + (protocol == Protocol::kLL ? kLLRingBytes : kSlots * slotBytes);
}

ConnectionView viewOf(void* base, Protocol protocol, size_t slotBytes, bool sender) {
  auto* control = static_cast<RingControl*>(base);
  uint8_t* data = static_cast<uint8_t*>(base) + kDataOffset;
  if (protocol == Protocol::kLL) {
    return llRingView(reinterpret_cast<uint64_t*>(data), &control->head,
                      sender ? &control->senderStep : &control->receiverStep, MemoryKind::kDevice);
  }
  ConnectionView v;
  v.protocol = Protocol::kSimple;
  v.memory = MemoryKind::kDevice;
  v.simple.slots = data;
  v.simple.slotBytes = slotBytes;
  v.simple.nslots = kSlots;
  v.simple.tail = &control->tail;
  v.simple.head = &control->head;
  v.simple.words = control->words;
  v.simple.direct = control->direct;
  v.simple.region = control->region;
  return v;
}

// Tells one process from another, a fork's child from its parent (pid) and a process in
// another PID namespace with the same pid (the nonce) alike.
struct ProcessTag {
  int32_t pid = 0;
  uint64_t nonce = 0;
  bool operator==(const ProcessTag& o) const { return pid == o.pid && nonce == o.nonce; }
};
ProcessTag thisProcess() {
  static const uint64_t nonce = [] {
    std::random_device rd;
    return (static_cast<uint64_t>(rd()) << 32) | rd();
  }();
  return {static_cast<int32_t>(::getpid()), nonce};
}

// Phase 1 blob: where the receiver's ring is, for a sender in its process (address) or in
// another (handle).
struct IpcBlob {
  uint32_t magic = kBlobMagic;
  uint8_t protocol = 0;
  uint8_t hasHandle = 0;
  uint64_t slotBytes = 0;
  uint64_t bytes = 0;
  uint64_t address = 0;
  int32_t device = -1;
  ProcessTag process;
  cuda::IpcMemHandle handle;
};

struct IpcAck {
  uint32_t magic = kAckMagic;
};

// The ring's memory, released as it was obtained: freed by the receiver, which allocated it;
// closed by a sender in another process, which opened it; left alone by one that borrowed the
// receiver's address.
class RingMemory {
 public:
  enum class Kind : uint8_t { kOwned, kOpened, kBorrowed };
  RingMemory(void* base, Kind kind) : base_(base), kind_(kind) {}
  RingMemory(RingMemory&& o) noexcept : base_(o.base_), kind_(o.kind_) { o.base_ = nullptr; }
  RingMemory& operator=(RingMemory&&) = delete;
  ~RingMemory() {
    if (base_ == nullptr || kind_ == Kind::kBorrowed) return;
    try {
      if (kind_ == Kind::kOwned)
        cuda::deviceRuntime().free(base_);
      else
        cuda::deviceRuntime().ipcCloseMemHandle(base_);
    } catch (const std::exception& e) {
      LOOM_WARN(kLogP2p, "cuda_ipc: releasing a ring's device memory failed: ", e.what());
    }
  }
  void* base() const { return base_; }

 private:
  void* base_;
  Kind kind_;
};

[[noreturn]] void hostStepRefused(const char* what, int peer) {
  throw InternalError(strCat(
      "cuda_ipc ", what, " with rank ", peer,
      ": the ring lives in device memory and only the CUDA executor's device program steps it; "
      "this call also needs a connection the device program cannot run (a wire transport). "
      "Set LOOM_P2P_DISABLE=1 to carry this communicator's local pairs over shm"));
}

// One side's hold on a ring: its memory, and the view of it that side's device program uses.
struct RingEnd {
  RingEnd(RingMemory ring, Protocol protocol, size_t slotBytes, int peer, bool sender)
      : memory(std::move(ring)),
        view(viewOf(memory.base(), protocol, slotBytes, sender)),
        slotBytes(protocol == Protocol::kLL ? kLLSlotBytes : slotBytes),
        peer(peer) {}
  RingMemory memory;
  ConnectionView view;
  size_t slotBytes;
  int peer;
};

class IpcSendConnection final : public SendConnection {
 public:
  explicit IpcSendConnection(RingEnd end) : end_(std::move(end)) {}
  void* tryAcquire() override { hostStepRefused("send", end_.peer); }
  void post(size_t, uint32_t) override { hostStepRefused("send", end_.peer); }
  bool progress() override { return false; }      // the device program's stores are the transfer
  bool drained() const override { return true; }  // every step is in the ring when posted
  size_t slotBytes() const override { return end_.slotBytes; }
  WaitArm armWait(WaitSet&, bool) override { hostStepRefused("send", end_.peer); }
  const ConnectionView* view() const override { return &end_.view; }
  // resync(): nothing to take back; no host-side copy of the counters exists.

 private:
  RingEnd end_;
};

class IpcRecvConnection final : public RecvConnection {
 public:
  explicit IpcRecvConnection(RingEnd end) : end_(std::move(end)) {}
  const void* tryReceive(size_t*, uint32_t*) override { hostStepRefused("receive", end_.peer); }
  void release() override { hostStepRefused("receive", end_.peer); }
  bool progress() override { return false; }
  size_t slotBytes() const override { return end_.slotBytes; }
  WaitArm armWait(WaitSet&) override { hostStepRefused("receive", end_.peer); }
  const ConnectionView* view() const override { return &end_.view; }

 private:
  RingEnd end_;
};

class IpcPendingRecv final : public PendingRecv {
 public:
  IpcPendingRecv(RingMemory ring, Protocol protocol, size_t slotBytes, int peer)
      : ring_(std::move(ring)), protocol_(protocol), slotBytes_(slotBytes), peer_(peer) {}
  std::unique_ptr<RecvConnection> finish(const ConnectBlob& ack) override {
    LOOM_ENFORCE(fromBlob<IpcAck>(ack).magic == kAckMagic, RemoteError, "rank ", peer_,
                 " sent a malformed cuda_ipc acknowledgement");
    return std::make_unique<IpcRecvConnection>(
        RingEnd(std::move(ring_), protocol_, slotBytes_, peer_, /*sender=*/false));
  }

 private:
  RingMemory ring_;
  Protocol protocol_;
  size_t slotBytes_;
  int peer_;
};

bool p2pDisabled() { return envInt(EnvVar::LOOM_P2P_DISABLE) != 0; }

bool sameGpu(const RankInfo& a, const RankInfo& b) {
  static constexpr uint8_t kNone[16] = {};
  return std::memcmp(a.gpuUuid, kNone, sizeof(kNone)) != 0 &&
         std::memcmp(a.gpuUuid, b.gpuUuid, sizeof(a.gpuUuid)) == 0;
}
bool sameProcess(const RankInfo& a, const RankInfo& b) {
  return a.hostHash == b.hostHash && a.pid == b.pid;
}
// Ranks that share a GPU copy inside it, whatever the topology says about their processes.
PathClass p2pPath(const PeerPair& pair) {
  return sameGpu(pair.self, pair.peer) ? PathClass::kSameGpu : pair.path;
}

// Why the pair may not use CUDA IPC, or "" when it may.
std::string refusal(const PeerPair& pair) {
  const RankInfo& a = pair.self;
  const RankInfo& b = pair.peer;
  if (a.device < 0 || b.device < 0)
    return strCat("rank ", a.device < 0 ? a.rank : b.rank,
                  " is on the CPU, and CUDA IPC connects GPU ranks only");
  if (a.hostHash != b.hostHash)
    return strCat("rank ", a.rank, " and rank ", b.rank, " are on different hosts");
  if (p2pDisabled()) return "LOOM_P2P_DISABLE=1 forbids it";
  const PathClass path = p2pPath(pair);
  const PathClass level = p2pLevel();
  if (path > level)
    return strCat("the path between their GPUs (", topo::pathClassLabel(path),
                  ") is worse than LOOM_P2P_LEVEL allows (", topo::pathClassLabel(level), ")");
  if (sameProcess(a, b)) {
    if (a.device != b.device && !cuda::deviceRuntime().canAccessPeer(a.device, b.device))
      return strCat("GPU ", a.device, " cannot access GPU ", b.device, "'s memory (no P2P)");
    return "";
  }
  if ((a.gpuCaps & b.gpuCaps & cuda::kCapIpcLegacy) == 0)
    return strCat("the GPU of rank ", (a.gpuCaps & cuda::kCapIpcLegacy) == 0 ? a.rank : b.rank,
                  " cannot share memory with other processes (no CUDA IPC)");
  return "";
}

}  // namespace

PathClass p2pLevel() {
  const std::string text = envString(EnvVar::LOOM_P2P_LEVEL);
  if (text.empty()) return PathClass::kPcieSwitch;
  // NCCL_P2P_LEVEL's names and numbers, in its order.
  static const struct {
    const char* name;
    PathClass path;
  } kNccl[] = {{"LOC", PathClass::kSameGpu},    {"NVL", PathClass::kNvlink},
               {"PIX", PathClass::kPcieSwitch}, {"PXB", PathClass::kPcieSwitch},
               {"PHB", PathClass::kHostBridge}, {"SYS", PathClass::kCrossSocket}};
  for (size_t i = 0; i < std::size(kNccl); ++i)
    if (text == kNccl[i].name || text == std::to_string(i)) return kNccl[i].path;
  try {
    return topo::parsePathClass(text);
  } catch (const InvalidArgument&) {
    throw InvalidArgument(
        strCat("LOOM_P2P_LEVEL=", text,
               " is not a level; use LOC, NVL, PIX, PXB, PHB or SYS (or 0-5, "
               "as NCCL_P2P_LEVEL), or a loom path label (PROC, GPU, NUMA, ...)"));
  }
}

bool CudaIpcTransport::canConnect(const PeerPair& pair) const { return refusal(pair).empty(); }

std::string CudaIpcTransport::whyNot(const PeerPair& pair) const { return refusal(pair); }

size_t CudaIpcTransport::maxSlotBytes(Protocol protocol) const {
  return protocol == Protocol::kLL ? kLLSlotBytes : SIZE_MAX;
}

std::unique_ptr<PendingRecv> CudaIpcTransport::setupRecv(const SetupContext& ctx,
                                                         ConnectBlob* blob) {
  LOOM_ENFORCE(ctx.device >= 0, InternalError, "cuda_ipc set up for a CPU rank");
  cuda::DeviceRuntime& rt = cuda::deviceRuntime();
  cuda::CurrentDeviceScope scope(ctx.device);
  const size_t bytes = ringBytes(ctx.protocol, ctx.slotBytes);
  RingMemory ring(rt.malloc(bytes), RingMemory::Kind::kOwned);
  // Counters at 0, and every LL word 0, a flag no step uses (ll_words.h); Simple slots need
  // nothing.
  const size_t zeroed = ctx.protocol == Protocol::kLL ? bytes : kDataOffset;
  const std::vector<uint8_t> zeros(zeroed, 0);
  rt.memcpy(ring.base(), zeros.data(), zeroed);
  IpcBlob b;
  b.protocol = static_cast<uint8_t>(ctx.protocol);
  b.slotBytes = ctx.slotBytes;
  b.bytes = bytes;
  b.address = reinterpret_cast<uint64_t>(ring.base());
  b.device = ctx.device;
  b.process = thisProcess();
  if (!sameProcess(ctx.peers.rankInfo(ctx.peers.rank()), ctx.peers.rankInfo(ctx.peer))) {
    b.handle = rt.ipcGetMemHandle(ring.base());
    b.hasHandle = 1;
  }
  toBlob(b, blob);
  return std::make_unique<IpcPendingRecv>(std::move(ring), ctx.protocol, ctx.slotBytes, ctx.peer);
}

std::unique_ptr<SendConnection> CudaIpcTransport::connectSend(const SetupContext& ctx,
                                                              const ConnectBlob& blob,
                                                              ConnectBlob* ack) {
  const auto b = fromBlob<IpcBlob>(blob);
  LOOM_ENFORCE(b.magic == kBlobMagic && b.protocol == static_cast<uint8_t>(ctx.protocol) &&
                   b.bytes == ringBytes(ctx.protocol, b.slotBytes) &&
                   (ctx.protocol == Protocol::kLL || b.slotBytes % kPageBytes == 0),
               RemoteError, "rank ", ctx.peer,
               " sent a malformed cuda_ipc connection blob (is it the same loom version?)");
  cuda::DeviceRuntime& rt = cuda::deviceRuntime();
  cuda::CurrentDeviceScope scope(ctx.device);
  const bool local = b.process == thisProcess();
  void* base = reinterpret_cast<void*>(b.address);
  if (local) {
    if (b.device != ctx.device) rt.enablePeerAccess(b.device);
  } else {
    LOOM_ENFORCE(b.hasHandle != 0, RemoteError, "rank ", ctx.peer,
                 " sent no CUDA IPC handle although it is in another process (it took this "
                 "process for its own: are both in one PID namespace?)");
    base = rt.ipcOpenMemHandle(b.handle);
  }
  RingMemory ring(base, local ? RingMemory::Kind::kBorrowed : RingMemory::Kind::kOpened);
  toBlob(IpcAck{}, ack);
  LOOM_INFO(kLogP2p, "rank ", ctx.peers.rank(), " -> rank ", ctx.peer, " channel ", ctx.channel,
            ": CUDA IPC ring in GPU ", b.device, "'s memory (",
            local ? "same process" : "IPC handle", ")");
  return std::make_unique<IpcSendConnection>(
      RingEnd(std::move(ring), ctx.protocol, b.slotBytes, ctx.peer, /*sender=*/true));
}

}  // namespace loom::transport
