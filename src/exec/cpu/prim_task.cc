#include "src/exec/cpu/prim_task.h"

#include <cstring>

#include "src/base/error.h"
#include "src/kernels/cross_core_copy.h"
#include "src/kernels/datatype_traits.h"
#include "src/kernels/reduce_copy_dispatch.h"
#include "src/kernels/step_operands.h"

namespace loom {

using algo::Prim;

namespace {

// Which operands of a step cross between cores (cross_core_copy.h): each source that is a slot
// another core wrote (bit s: args.src[s]), and each destination that is a slot a peer reads
// (bit d: args.dst[d]).
struct Crossing {
  uint32_t sources = 0;
  uint32_t destinations = 0;
};

// The slot of a connection's ring in host memory that `p` lies in, or -1: a step a peer
// posted by address (its own buffer, a registered region) is not in one.
int sharedSlotOf(const transport::ConnectionView* view, const void* p) {
  if (view == nullptr || view->protocol != transport::Protocol::kSimple ||
      view->memory != MemoryKind::kHost || view->simple.slots == nullptr)
    return -1;
  const transport::SimpleRingView& ring = view->simple;
  const auto* at = static_cast<const uint8_t*>(p);
  if (at < ring.slots || at >= ring.slots + size_t{ring.nslots} * ring.slotBytes) return -1;
  return static_cast<int>(static_cast<size_t>(at - ring.slots) / ring.slotBytes);
}

// Whether a received step lies in a slot another core wrote: not one this rank pulled into its
// slot with CMA (its sender posted it by address), which this core's kernel call wrote.
bool receivedFromAnotherCore(const transport::ConnectionView* view, const void* p) {
  const int slot = sharedSlotOf(view, p);
  return slot >= 0 && view->simple.direct[slot] == 0;
}

void copyBytes(void* dst, const void* src, size_t bytes, bool crosses) {
  if (crosses) {
    crossCoreCopy(dst, src, bytes);
  } else {
    std::memcpy(dst, src, bytes);
  }
}

// A pure copy to every destination, bit-exact: one read of the source. With several
// destinations (output and slot) it goes tile by tile, the first copy's tile still in cache
// when the others read it, instead of reading the whole source once per destination.
// A destination whose bit is set in `stream` is written with non-temporal stores
// (streamCopy) from the source's tile, which the first copy brought into cache. Otherwise a
// copy that `crossing` marks walks 8 pages at once (crossCoreCopy), the others go through
// memcpy.
void copyToAll(const void* src, void* const* dst, int ndst, size_t bytes, uint32_t stream,
               Crossing crossing) {
  constexpr size_t kTile = 64 * 1024;
  int first = -1;  // the destination that is not the source, read back per tile
  for (int d = 0; d < ndst; ++d) {
    if (dst[d] != src && first < 0) first = d;
  }
  if (first < 0) return;  // in place everywhere
  const bool firstCrosses =
      (crossing.sources & 1) != 0 || (crossing.destinations >> first & 1) != 0;
  // A streamed destination leaves no copy in cache to read back: the others copy the source.
  const bool firstStreams = (stream >> first & 1) != 0;
  for (size_t off = 0; off < bytes; off += kTile) {
    const size_t n = bytes - off < kTile ? bytes - off : kTile;
    const char* from = static_cast<const char*>(src) + off;
    char* firstAt = static_cast<char*>(dst[first]) + off;
    if (firstStreams) {
      streamCopy(firstAt, from, n);
    } else {
      copyBytes(firstAt, from, n, firstCrosses);
    }
    const char* copied = firstStreams ? from : firstAt;
    for (int d = first + 1; d < ndst; ++d) {
      if (dst[d] == src || dst[d] == dst[first]) continue;
      char* at = static_cast<char*>(dst[d]) + off;
      if ((stream >> d & 1) != 0) {
        streamCopy(at, copied, n);
      } else {
        copyBytes(at, copied, n, (crossing.destinations >> d & 1) != 0);
      }
    }
  }
}

}  // namespace

void checkReceived(const TaskLabel& label, const CollOp& op, int peer, uint32_t tag,
                   uint32_t signature, size_t got, size_t expected) {
  // Ranks that disagree about the call fail clearly instead of mixing data.
  LOOM_ENFORCE(tag == signature, RemoteError, label.str(), ": rank ", peer,
               " made a different call than this rank's ", describeCall(op),
               "; every rank must call the same collectives in the same order with the "
               "same count, datatype, op and root");
  LOOM_ENFORCE(got == expected, RemoteError, label.str(), ": rank ", peer, " sent ", got,
               " bytes where ", expected,
               " were expected; did every rank call it with the same count and datatype?");
}

std::string TaskLabel::str() const {
  std::string s = number > 0 ? strCat(what, " #", number) : std::string(what);
  if (algo != nullptr)
    s += tree >= 0 ? strCat(" (", algo, " ", tree, ")") : strCat(" (", algo, ")");
  if (channel >= 0) s += strCat(" channel ", channel);
  if (part != nullptr) s += strCat(" ", part);
  if (toRank >= 0) s += strCat(" to rank ", toRank);
  if (fromRank >= 0) s += strCat(" from rank ", fromRank);
  return s;
}

namespace {
const CpuCallFlags kNoFlags;
}  // namespace

const MemRegion* PrimTask::RegionLookup::find(const void* data, size_t bytes) {
  const auto address = reinterpret_cast<uintptr_t>(data);
  if (found_ && address >= found_->base && address - found_->base <= found_->size &&
      bytes <= found_->size - (address - found_->base))
    return &*found_;
  found_ = findRegion(data, bytes);
  return found_ ? &*found_ : nullptr;
}

PrimTask::PrimTask(const CollOp& op, const algo::StepProgram& program, const TaskLinks& links,
                   const TaskLabel& label, const PrimTask* gate, TaskInput input)
    : op_(&op),
      flags_(&kNoFlags),
      program_(program),
      links_(links),
      label_(label),
      gate_(gate),
      elemSize_(dataTypeSize(op.type)),
      input_(static_cast<const char*>(input.fromOutput ? op.recvbuff : op.sendbuff)),
      inputHasPreOp_(input.fromOutput),
      isReduction_(!input.copiesOnly &&
                   (op.kind == CollKind::kAllReduce || op.kind == CollKind::kReduce ||
                    op.kind == CollKind::kReduceScatter)),
      signature_(collSignature(op)),
      // An input may go out as it is unless a pre-op (a user PreMulSum) changes it on
      // the way, or received data overwrites it meanwhile (in-place AlltoAll, a Send whose
      // buffer a Recv of its group fills).
      directInput_(!(isReduction_ && op.reduce == ReduceOpKind::kPreMulSum && !inputHasPreOp_) &&
                   !(op.kind == CollKind::kAlltoAll && op.sendbuff == op.recvbuff) &&
                   !op.inputOverwritten) {
  // The first step, for every walk (restart) of the program.
  done_ = !algo::nextStep(program_, cursor_, current_);
  firstCursor_ = cursor_;
  firstStep_ = current_;
  empty_ = done_;
}

std::string PrimTask::waitingFor() const {
  if (done_) return "nothing";
  switch (wait_) {
    case Wait::kGate:
      return strCat(label_.str(), ": its own earlier phase");
    case Wait::kData:
      return strCat(label_.str(), ": data from rank ", links_.recvPeer[waitIndex_]);
    case Wait::kSlot:
      return strCat(label_.str(), ": a free slot toward rank ", links_.sendPeer[waitIndex_]);
    case Wait::kNothing:
      break;
  }
  return strCat(label_.str(), ": its turn on a connection an earlier operation uses");
}

void PrimTask::checkPeer() const {
  if (done_) return;
  if (wait_ == Wait::kData) links_.recv[waitIndex_]->checkPeer();
  if (wait_ == Wait::kSlot) links_.send[waitIndex_]->checkPeer();
}

transport::WaitArm PrimTask::armWait(transport::WaitSet& set) const {
  switch (wait_) {
    case Wait::kData:
      return links_.recv[waitIndex_]->armWait(set);
    case Wait::kSlot:
      return links_.send[waitIndex_]->armWait(set, /*drain=*/false);
    case Wait::kGate:
      return transport::WaitArm::kArmed;
    case Wait::kNothing:
      break;
  }
  return transport::WaitArm::kReady;
}

// Runs the current step if its slots are ready. Returns true if it ran.
// It runs once per step of every call and once per poll of a waiting task, so it keeps to what
// the step needs: waiting for data costs a small function (the step's own work is runStep's),
// no array is cleared beyond the links it has, the reduceCopy arguments are the task's own
// (filled by stepOperands, never cleared), and the walk looks one step ahead, so the task is
// done as its last step runs rather than one call later.
bool PrimTask::tryStep() {
  if (gate_ != nullptr && gate_->stepsDone() <= stepsDone_ && !gate_->done()) {
    wait_ = Wait::kGate;
    return false;
  }
  const algo::Step& s = current_;
  const void* received[kMaxTaskPeers];
  if (algo::primRecvs(s.prim)) {
    const size_t bytes = s.count * elemSize_;
    // A step that only moves one peer's data into the output (AllGather, Broadcast, the
    // second half of a ring AllReduce) offers the output to a connection that places data
    // itself; the step's own copy (or post-op) then runs in place.
    // Once per step: the offer holds until the step is released.
    if (!offered_ && links_.nrecv == 1 &&
        (s.prim == algo::Prim::kRecv || s.prim == algo::Prim::kRecvCopySend)) {
      char* out = static_cast<char*>(op_->recvbuff) + s.outOffset * elemSize_;
      links_.recv[0]->offerDestination({out, bytes, outputRegion_.find(out, bytes)});
      offered_ = true;
    }
    // LL links too go through the connection's staging buffers (tryReceive unpacks, post
    // packs), not through their view (transport.h, view()). On the CPU those buffers stay in
    // L1, so packing a step from one costs what packing it from the reduceCopy's own tile
    // would, and unpacking checks each word's flag and copies it in one pass, where reading
    // the words in the slot takes a pass for the flags first (a step must not write before
    // all of it has landed: in place, its output is its input) and a second for the data
    // (docs/performance.md).
    for (int i = 0; i < links_.nrecv; ++i) {
      size_t got = 0;
      uint32_t tag = 0;
      received[i] = links_.recv[i]->tryReceive(&got, &tag);
      if (received[i] == nullptr) {
        wait_ = Wait::kData;
        waitIndex_ = i;
        return false;
      }
      checkReceived(label_, *op_, links_.recvPeer[i], tag, signature_, got, bytes);
    }
  }
  return runStep(received);
}

// The rest of tryStep once the step's data is in: every slot the step needs must be ready
// before it runs; asking again is harmless (a ring hands out the same slot until it is
// released or posted).
bool PrimTask::runStep(const void* const* received) {
  const algo::Step& s = current_;
  const size_t bytes = s.count * elemSize_;
  const int nrecv = links_.nrecv, nsend = links_.nsend;
  const bool recvs = algo::primRecvs(s.prim), sends = algo::primSends(s.prim);
  char* out = static_cast<char*>(op_->recvbuff) + s.outOffset * elemSize_;
  const char* in = input_ + s.inOffset * elemSize_;
  // Single-copy sends (transports/shm/direct_read.h): when the bytes a step sends end up in a
  // user buffer that stays put until the call returns - the output it writes, or an input sent
  // as it is - a connection that takes it gets that address instead of a filled slot. A pure
  // copy sends its input rather than the copy it just wrote: the same bytes, but lines the
  // peer can read without taking them out of this core's cache first.
  const bool opApplies =
      isReduction_ && stepAppliesOp(s.prim, s.final, inputHasPreOp_, op_->reduce);
  // Slots to fill: a link that posts the data by address (direct) fills none. One more
  // destination after them: the staging copy, when a link takes it.
  void* fill[kMaxTaskPeers + 1];
  const transport::StepMemory* direct[kMaxTaskPeers];
  transport::StepMemory inStep, outStep, stagedStep;
  // A task that stages its sends copies a step that no peer reads in place into the staging
  // region once, for every peer that maps it; it pulls nothing with CMA, since one copy that
  // peers read as memory costs less than a system call per peer (4 processes on 2 CPUs).
  bool staged = false;
  if (sends) {
    const MemRegion* staging = stagesSends_ ? flags_->staging : nullptr;
    if (staging != nullptr && (s.inOffset + s.count) * elemSize_ > staging->size) staging = nullptr;
    const bool mayPull = flags_->mayPull && staging == nullptr;
    const bool inputGoes = directInput_ && (s.prim == algo::Prim::kSend ||
                                            (s.prim == algo::Prim::kCopySend && !opApplies));
    const bool outputGoes = algo::primWritesOutput(s.prim) || s.prim == algo::Prim::kSendFromOutput;
    if (inputGoes) inStep = {in, bytes, inputRegion_.find(in, bytes), mayPull};
    if (outputGoes) outStep = {out, bytes, outputRegion_.find(out, bytes), mayPull};
    if (staging != nullptr)
      stagedStep = {reinterpret_cast<const char*>(staging->base) + s.inOffset * elemSize_, bytes,
                    staging, false};
    for (int i = 0; i < nsend; ++i) {
      transport::SendConnection& link = *links_.send[i];
      direct[i] = nullptr;
      if (inputGoes && link.acceptsStep(inStep)) {
        direct[i] = &inStep;
      } else if (outputGoes && link.acceptsStep(outStep)) {
        direct[i] = &outStep;
      } else if (staging != nullptr && link.acceptsStep(stagedStep)) {
        direct[i] = &stagedStep;
        staged = true;
      }
      void* slot = link.tryAcquire();
      if (slot == nullptr) {
        wait_ = Wait::kSlot;
        waitIndex_ = i;
        return false;
      }
      fill[i] = direct[i] ? nullptr : slot;
    }
    fill[nsend] = staged ? const_cast<void*>(stagedStep.data) : nullptr;
  }

  StepBuffers buffers;
  buffers.input = in;
  buffers.inputHasPreOp = inputHasPreOp_;
  buffers.inputPosition = inputPosition_;
  buffers.received = received;
  buffers.nrecv = nrecv;
  buffers.output = out;
  buffers.slots = fill;
  buffers.nslots = nsend + 1;
  ReduceCopyArgs& args = args_;
  stepOperands(s.prim, s.final, buffers, args);
  args.count = s.count;
  args.scalar = op_->scalar;
  args.streamDestinations = flags_->streamStores ? ~0u : 0u;
  // Pure copies (no reduction, no pre/post-op to apply) are byte copies: bit-exact for every
  // value, NaN payloads included, and as fast as memcpy gets.
  if (args.count > 0 && args.nsrc > 0 && args.ndst > 0) {
    Crossing crossing;
    if (flags_->streamSlots || (flags_->crossCoreCopies && bytes >= kCrossCoreBlockBytes)) {
      for (int src = 0; recvs && src < args.nsrc; ++src)
        for (int i = 0; i < nrecv; ++i)
          if (args.src[src] == received[i] &&
              receivedFromAnotherCore(links_.recv[i]->view(), received[i]))
            crossing.sources |= 1u << src;
      for (int d = 0; d < args.ndst; ++d)
        for (int i = 0; sends && i < nsend; ++i)
          if (fill[i] != nullptr && args.dst[d] == fill[i] &&
              sharedSlotOf(links_.send[i]->view(), fill[i]) >= 0)
            crossing.destinations |= 1u << d;
    }
    if (flags_->streamSlots) args.streamDestinations |= crossing.destinations;
    if (!flags_->crossCoreCopies || bytes < kCrossCoreBlockBytes) crossing = Crossing{};
    if (args.nsrc == 1 && !opApplies) {
      copyToAll(args.src[0], args.dst, args.ndst, bytes, args.streamDestinations, crossing);
    } else {
      args.crossCorePages = (crossing.sources | crossing.destinations) != 0;
      if (kernel_ != nullptr) {
        kernel_(args);
      } else {
        reduceCopy(op_->type, op_->reduce, args);
      }
    }
  }
  if (recvs)
    for (int i = 0; i < nrecv; ++i) links_.recv[i]->release();
  if (sends) {
    for (int i = 0; i < nsend; ++i) {
      if (direct[i])
        links_.send[i]->postStep(*direct[i], signature_);
      else
        links_.send[i]->post(bytes, signature_);
    }
  }
  wait_ = Wait::kNothing;
  offered_ = false;
  ++stepsDone_;
  done_ = !algo::nextStep(program_, cursor_, current_);
  return true;
}

}  // namespace loom
