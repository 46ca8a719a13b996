// The device program: one task of a launch (device_plan.h) walked step by step, as the CUDA
// executor runs it, with one group of threads per task (a CUDA block, or one host thread on
// the simulated runtime).
//
// How it works. The group's first thread (the leader) walks the task's step program with the
// walker every executor shares (algorithms/walker.h) and leaves each step in the group's
// shared scratch. Per step, the leader does the protocol: it waits for the task's gate, for
// every step it receives and for a free slot toward every peer it sends to; it checks each
// received step's tag and byte count, and lays out the step's reduceCopy operands with
// stepOperands(), the one rule every executor follows. Then every thread of the group does the
// step's data: a byte copy where nothing is reduced or converted (bit-exact, NaN payloads
// included, as on the CPU), else reduceCopyGroup() in 16-byte packs, with the CPU's
// per-element math.
// Then the leader publishes what it received and sent.
//
// The rings are the connections' own (connection_view.h), so CPU and device sides interoperate
// and a launch resumes where the last left off:
//   - Simple: a step has landed when the sender's tail passed this side's head; the leader
//     frees it with head = h + 1, and sends by writing the slot, its byte count and tag, then
//     tail = t + 1, each with release order after the data. Each side writes only its own
//     counter, so its value is that side's next step. A step that only copies a user buffer
//     the connection reads itself (DeviceLink::inputByAddress) is posted by address: the slot
//     stays unwritten, its direct word holds the address, and the task does not finish
//     before head has passed every such step, so the buffer stays as it was until read.
//   - LL: a step has landed when its header and every data word carry the step's flag
//     (ll_words.h). The leader waits for the header and checks it; then every thread polls
//     its own data words (word w is thread w % threads') and unpacks them to a staging
//     buffer, and the leader frees the slot by advancing the side's step counter and the
//     shared head. A step to send is written to a staging buffer, then every thread packs its
//     words into each link's slot under the step's flag (with the refresh rule's extra
//     words), and the leader writes the header last; the sender's step counter is the
//     connection's own.
// Tasks of one launch that use the same connection run in the order the host gave them
// (DeviceTask::before), as the CPU executor's tasks do.
//
// Every wait checks the launch's failure word (a failed task ends the launch), the
// communicator's abort and the timeout, and stops with a DeviceError instead of hanging.
//
// The context `Ctx` is what differs between the simulated runtime and a GPU:
//   int thread(), threads()          this thread's index in the group, the group's size
//   void sync()                      a barrier of the group
//   uint64_t load(const uint64_t*)   an acquire load of a counter another thread writes
//   void store(uint64_t*, uint64_t)  a release store, visible to other processes' threads
//   bool claim(uint32_t*)            compare-and-swap 0 -> non-zero (the first failure)
//   uint64_t nowNs(), bool aborted(), void pause()
//   DeviceStepShared& shared()       the group's scratch for one step
//   void copy(void*, const void*, size_t)  a byte copy by the whole group
// C++17 and host/device: nvcc compiles it.
#pragma once

#include "algorithms/walker.h"
#include "src/exec/cuda/device_plan.h"
#include "src/kernels/ll_words.h"
#include "src/kernels/reduce_copy_group.h"
#include "src/kernels/step_operands.h"

namespace loom {

// What the group's first thread tells the others about a step.
// Plain members only: a kernel keeps it in shared memory, which has no constructors.
struct DeviceStepShared {
  ReduceCopyArgs args;
  size_t bytes;
  bool copy;                               // a byte copy of src[0] to every destination
  bool stop;                               // the launch failed: every thread leaves
  const void* received[kDeviceTaskPeers];  // the slots received this step
  void* fill[kDeviceTaskPeers];            // the slots to fill this step
  // LL links of this step: the data words to land (receive) or to write (send), nullptr for
  // a Simple link, with their step's flag; and the words each send link writes.
  const uint64_t* llIn[kDeviceTaskPeers];
  uint64_t* llOut[kDeviceTaskPeers];
  uint32_t llInFlag[kDeviceTaskPeers];
  uint32_t llOutFlag[kDeviceTaskPeers];
  size_t llOutWords[kDeviceTaskPeers];
  bool llRecv, llSend;    // whether any link of the step is LL
  bool landFailed;        // a thread's landLL saw the launch fail
  const void* byAddress;  // the step's bytes, posted by address on every send link; or null
  bool postedByAddress;   // some step of the task was
  // The leader's walk: where it stands, the step it prepared, whether there was one.
  algo::StepCursor cursor;
  algo::Step step;
  uint64_t stepsDone;
  bool more;
};

namespace device_program {

template <typename Ctx>
LOOM_HOST_DEVICE inline void fail(Ctx& ctx, const DeviceLaunch& launch, int task, DeviceFault fault,
                                  int peer, bool waitingForData, uint32_t tag = 0, uint64_t got = 0,
                                  uint64_t expected = 0) {
  DeviceError& e = *launch.error;
  if (!ctx.claim(&e.fault)) return;  // another task failed first
  e.task = task;
  e.peer = peer;
  e.waitingForData = waitingForData ? 1 : 0;
  e.gotTag = tag;
  e.gotBytes = got;
  e.expectedBytes = expected;
  e.fault = static_cast<uint32_t>(fault);
  ctx.store(launch.failed, 1);  // the record before the word the other tasks poll
}

// Polls until ready() or a reason to stop; true when ready. `peer` and `data` name the wait
// in the error a timeout or abort records.
template <typename Ctx, typename Ready>
LOOM_HOST_DEVICE inline bool waitFor(Ctx& ctx, const DeviceLaunch& launch, int task, int peer,
                                     bool data, Ready ready) {
  uint64_t start = 0;
  for (unsigned polls = 0;; ++polls) {
    if (ready()) return true;
    if (ctx.load(launch.failed) != 0) return false;
    if ((polls & 255u) != 255u) {
      ctx.pause();
      continue;
    }
    if (ctx.aborted()) {
      fail(ctx, launch, task, DeviceFault::kAborted, peer, data);
      return false;
    }
    const uint64_t now = ctx.nowNs();
    if (start == 0) start = now;
    if (launch.timeoutNs != 0 && now - start > launch.timeoutNs) {
      fail(ctx, launch, task, DeviceFault::kTimeout, peer, data);
      return false;
    }
    ctx.pause();
  }
}

// What receiveLL found: the step's header, or that the launch failed.
struct LLReceived {
  bool ok = false;
  uint32_t tag = 0;
  uint32_t bytes = 0;
};

// Waits for the header of LL step *link.ll.step from `link` (ll_words.h); its data words are
// landed by the whole group (landLL). A count larger than a slot fails the launch (kCorrupt).
// Results by value: nothing of the group's first thread goes to local memory on a GPU.
template <typename Ctx>
LOOM_HOST_DEVICE inline LLReceived receiveLL(Ctx& ctx, const DeviceLaunch& launch, int t,
                                             const DeviceLink& link) {
  const transport::LLRingView& r = link.ll;
  const uint64_t step = *r.step;
  const uint64_t* slot = llSlot(r, step);
  const uint32_t flag = llFlag(step);
  LLReceived got;
  uint64_t countWord = 0, tagWord = 0;
  if (!waitFor(ctx, launch, t, link.peer, true, [&] {
        countWord = llLoad(slot + kLLCountWord);
        tagWord = llLoad(slot + kLLTagWord);
        return llFlagOf(countWord) == flag && llFlagOf(tagWord) == flag;
      }))
    return got;
  got.bytes = llDataOf(countWord);
  got.tag = llDataOf(tagWord);
  if (got.bytes > r.dataWords * kLLBytesPerWord) {
    fail(ctx, launch, t, DeviceFault::kCorrupt, link.peer, true, got.tag, got.bytes, 0);
    return got;
  }
  got.ok = true;
  return got;
}

// 4 bytes of a staging buffer (fewer at a step's end), at a multiple of 4: one aligned access.
LOOM_HOST_DEVICE inline void llPutData(unsigned char* stage, size_t at, size_t n, uint32_t v) {
  if (n == kLLBytesPerWord) {
#if defined(__CUDA_ARCH__)
    *reinterpret_cast<uint32_t*>(stage + at) = v;
#else
    memcpy(stage + at, &v, kLLBytesPerWord);
#endif
    return;
  }
  for (size_t b = 0; b < n; ++b) stage[at + b] = static_cast<unsigned char>(v >> (8 * b));
}
LOOM_HOST_DEVICE inline uint32_t llGetData(const unsigned char* stage, size_t at, size_t n) {
  uint32_t v = 0;
  if (n == kLLBytesPerWord) {
#if defined(__CUDA_ARCH__)
    v = *reinterpret_cast<const uint32_t*>(stage + at);
#else
    memcpy(&v, stage + at, kLLBytesPerWord);
#endif
    return v;
  }
  for (size_t b = 0; b < n; ++b) v |= uint32_t(stage[at + b]) << (8 * b);
  return v;
}

// Every thread of the group: polls its own data words of each LL step received this step
// until they carry the step's flag, and unpacks them to the link's staging buffer. False when
// the launch failed (then every thread returns false, having seen the failure word).
template <typename Ctx>
LOOM_HOST_DEVICE inline bool landLL(Ctx& ctx, const DeviceLaunch& launch, int t,
                                    const DeviceTask& task, const DeviceStepShared& sh) {
  const size_t words = llWordsFor(sh.bytes);
  for (int i = 0; i < task.nrecv; ++i) {
    const uint64_t* data = sh.llIn[i];
    if (data == nullptr) continue;
    auto* stage = static_cast<unsigned char*>(const_cast<void*>(sh.received[i]));
    const uint32_t flag = sh.llInFlag[i];
    for (size_t w = static_cast<size_t>(ctx.thread()); w < words;
         w += static_cast<size_t>(ctx.threads())) {
      uint64_t word = 0;
      if (!waitFor(ctx, launch, t, task.recv[i].peer, true, [&] {
            word = llLoad(data + w);
            return llFlagOf(word) == flag;
          }))
        return false;
      const size_t at = w * kLLBytesPerWord;
      const size_t rest = sh.bytes - at;
      llPutData(stage, at, rest < kLLBytesPerWord ? rest : kLLBytesPerWord, llDataOf(word));
    }
  }
  return true;
}

// Every thread of the group: packs its words of the step to send (in the send staging buffer)
// into each LL send link's slot under the step's flag, with the refresh rule's extra words.
template <typename Ctx>
LOOM_HOST_DEVICE inline void packLL(Ctx& ctx, const DeviceTask& task, const DeviceStepShared& sh) {
  const unsigned char* stage = task.llStage + task.nrecv * kDeviceLLStageBytes;
  const size_t words = llWordsFor(sh.bytes);
  for (int i = 0; i < task.nsend; ++i) {
    uint64_t* out = sh.llOut[i];
    if (out == nullptr) continue;
    const uint32_t flag = sh.llOutFlag[i];
    for (size_t w = static_cast<size_t>(ctx.thread()); w < sh.llOutWords[i];
         w += static_cast<size_t>(ctx.threads())) {
      uint32_t v = 0;
      if (w < words) {
        const size_t at = w * kLLBytesPerWord;
        const size_t rest = sh.bytes - at;
        v = llGetData(stage, at, rest < kLLBytesPerWord ? rest : kLLBytesPerWord);
      }
      llStore(out + w, llWord(flag, v));
    }
  }
}

// The group's first thread: waits for the step's slots and lays out its operands. False when
// the launch failed.
template <typename Ctx>
LOOM_HOST_DEVICE inline bool prepareStep(Ctx& ctx, const DeviceLaunch& launch, int t,
                                         const algo::Step& s, uint64_t stepsDone) {
  const DeviceTask& task = launch.tasks[t];
  const DeviceCall& call = launch.calls[task.call];
  DeviceStepShared& sh = ctx.shared();
  const void** received = sh.received;
  void** fill = sh.fill;
  if (task.gate >= 0) {
    const int g = task.gate;
    if (!waitFor(ctx, launch, t, -1, true, [&] {
          return ctx.load(&launch.stepsDone[g]) > stepsDone || ctx.load(&launch.done[g]) != 0;
        }))
      return false;
  }
  const uint64_t bytes = s.count * call.elemSize;
  const bool recvs = algo::primRecvs(s.prim), sends = algo::primSends(s.prim);
  sh.llRecv = sh.llSend = sh.landFailed = false;
  for (int i = 0; i < kDeviceTaskPeers; ++i) {
    sh.llIn[i] = nullptr;
    sh.llOut[i] = nullptr;
  }
  for (int i = 0; recvs && i < task.nrecv; ++i) {
    const DeviceLink& link = task.recv[i];
    uint32_t tag = 0;
    uint64_t got = 0;
    if (link.protocol == transport::Protocol::kLL) {
      const LLReceived step = receiveLL(ctx, launch, t, link);
      if (!step.ok) return false;
      tag = step.tag;
      got = step.bytes;
      received[i] = task.llStage + i * kDeviceLLStageBytes;
      const uint64_t at = *link.ll.step;
      sh.llIn[i] = llDataWords(link.ll, at);
      sh.llInFlag[i] = llFlag(at);
      sh.llRecv = true;
    } else {
      const transport::SimpleRingView& r = link.ring;
      const uint64_t h = *r.head;  // only this side writes head
      if (!waitFor(ctx, launch, t, link.peer, true, [&] { return ctx.load(r.tail) > h; }))
        return false;
      const uint64_t slot = h % r.nslots;
      const uint64_t word = r.words[slot];
      tag = static_cast<uint32_t>(word >> 32);
      got = word & 0xffffffffu;
      if (r.direct[slot] != 0 || r.region[slot] != 0 || got > r.slotBytes) {
        fail(ctx, launch, t, DeviceFault::kCorrupt, link.peer, true, tag, got, bytes);
        return false;
      }
      received[i] = r.slots + slot * r.slotBytes;
    }
    if (tag != call.signature) {
      fail(ctx, launch, t, DeviceFault::kTag, link.peer, true, tag, got, bytes);
      return false;
    }
    if (got != bytes) {
      fail(ctx, launch, t, DeviceFault::kSize, link.peer, true, tag, got, bytes);
      return false;
    }
  }
  for (int i = 0; sends && i < task.nsend; ++i) {
    const DeviceLink& link = task.send[i];
    if (link.protocol == transport::Protocol::kLL) {
      const transport::LLRingView& r = link.ll;
      const uint64_t step = *r.step;
      if (!waitFor(ctx, launch, t, link.peer, false,
                   [&] { return step - ctx.load(r.head) < r.nslots; }))
        return false;
      // Every LL link sends the same bytes: written once, to the staging buffer after the
      // receive links', and packed into each slot by the group (packLL) as the step finishes.
      fill[i] = i == 0 ? task.llStage + task.nrecv * kDeviceLLStageBytes : nullptr;
      sh.llOut[i] = llDataWords(r, step);
      sh.llOutFlag[i] = llFlag(step);
      sh.llOutWords[i] = llWordsToWrite(step, bytes, r.nslots, r.dataWords, r.refreshSteps);
      sh.llSend = true;
      continue;
    }
    const transport::SimpleRingView& r = link.ring;
    const uint64_t tail = *r.tail;  // only this side writes tail
    if (!waitFor(ctx, launch, t, link.peer, false,
                 [&] { return tail - ctx.load(r.head) < r.nslots; }))
      return false;
    fill[i] = r.slots + (tail % r.nslots) * r.slotBytes;
  }
  const char* input =
      static_cast<const char*>(task.inputFromOutput ? call.recvbuff : call.sendbuff);
  StepBuffers b;
  b.input = input + s.inOffset * call.elemSize;
  b.inputHasPreOp = task.inputFromOutput;
  b.inputPosition = task.inputPosition;
  b.received = received;
  b.nrecv = task.nrecv;
  b.output = static_cast<char*>(call.recvbuff) + s.outOffset * call.elemSize;
  b.slots = fill;
  b.nslots = task.nsend;
  stepOperands(s.prim, s.final, b, sh.args);
  sh.args.count = s.count;
  sh.args.scalar = call.scalar;
  const bool reduces = call.isReduction && !task.copiesOnly;
  const bool opApplies =
      reduces && stepAppliesOp(s.prim, s.final, task.inputFromOutput, call.reduce);
  sh.copy = sh.args.nsrc == 1 && !opApplies;
  sh.bytes = bytes;
  // A copy of a buffer every send link reads itself goes by address: the slots (the last
  // destinations, stepOperands) are left out; an output destination, if any, stays.
  sh.byAddress = nullptr;
  if (sends && sh.copy && bytes > 0 && !sh.llSend && sh.args.ndst >= task.nsend) {
    const bool fromInput = algo::primReadsInput(s.prim) && sh.args.src[0] == b.input;
    const bool fromOutput = s.prim == algo::Prim::kSendFromOutput && sh.args.src[0] == b.output;
    bool all = fromInput || fromOutput;
    for (int i = 0; all && i < task.nsend; ++i)
      all = fromInput ? task.send[i].inputByAddress : task.send[i].outputByAddress;
    if (all) {
      sh.byAddress = sh.args.src[0];
      sh.args.ndst -= task.nsend;
      sh.postedByAddress = true;
    }
  }
  return true;
}

// The group's first thread, after the data: frees what it received and publishes what it sent.
template <typename Ctx>
LOOM_HOST_DEVICE inline void finishStep(Ctx& ctx, const DeviceTask& task, const DeviceCall& call,
                                        const algo::Step& s, uint64_t bytes,
                                        const void* byAddress) {
  if (algo::primRecvs(s.prim))
    for (int i = 0; i < task.nrecv; ++i) {
      const DeviceLink& link = task.recv[i];
      if (link.protocol == transport::Protocol::kLL) {
        const uint64_t next = *link.ll.step + 1;
        *link.ll.step = next;
        ctx.store(const_cast<uint64_t*>(link.ll.head), next);  // read before head
        continue;
      }
      const transport::SimpleRingView& r = link.ring;
      ctx.store(r.head, *r.head + 1);
    }
  if (algo::primSends(s.prim))
    for (int i = 0; i < task.nsend; ++i) {
      const DeviceLink& link = task.send[i];
      if (link.protocol == transport::Protocol::kLL) {
        // The group packed the data words (packLL); the header comes last (ll_words.h).
        const transport::LLRingView& r = link.ll;
        const uint64_t step = *r.step;
        llWriteHeader(llSlot(r, step), llFlag(step), static_cast<uint32_t>(bytes), call.signature);
        *r.step = step + 1;
        continue;
      }
      const transport::SimpleRingView& r = link.ring;
      const uint64_t tail = *r.tail;
      const uint64_t slot = tail % r.nslots;
      r.words[slot] = bytes | (static_cast<uint64_t>(call.signature) << 32);
      r.direct[slot] = reinterpret_cast<uintptr_t>(byAddress);
      r.region[slot] = 0;
      ctx.store(r.tail, tail + 1);  // data, count and tag before tail
    }
}

// The group's data of one step: a byte copy, or the reduction in 16-byte packs.
template <typename T, typename Op, typename Ctx>
LOOM_HOST_DEVICE inline void stepData(Ctx& ctx, const Op& op, const DeviceStepShared& sh) {
  const ReduceCopyArgs& args = sh.args;
  if (args.count == 0 || args.nsrc == 0 || args.ndst == 0) return;
  if (sh.copy) {
    for (int d = 0; d < args.ndst; ++d)
      if (args.dst[d] != args.src[0]) ctx.copy(args.dst[d], args.src[0], sh.bytes);
    return;
  }
  reduceCopyGroup<T>(op, args, static_cast<size_t>(ctx.thread()),
                     static_cast<size_t>(ctx.threads()));
}

}  // namespace device_program

// Runs task `t` of `launch` on the calling group; T and Op are the launch's element type and
// reduction (its calls share them). The leader walks the program; the others only follow
// what it leaves in the shared scratch, so they hold few values of their own.
template <typename T, typename Op, typename Ctx>
LOOM_HOST_DEVICE void runDeviceTask(const DeviceLaunch& launch, int t, Ctx& ctx) {
  namespace dp = device_program;
  const DeviceTask& task = launch.tasks[t];
  DeviceStepShared& sh = ctx.shared();
  const bool leader = ctx.thread() == 0;
  if (leader) {
    sh.stop = false;
    sh.postedByAddress = false;
    sh.cursor = algo::StepCursor{};
    sh.stepsDone = 0;
    for (int k = 0; k < task.nbefore && !sh.stop; ++k) {
      const int b = task.before[k];
      sh.stop =
          !dp::waitFor(ctx, launch, t, -1, true, [&] { return ctx.load(&launch.done[b]) != 0; });
    }
  }
  const Op op(launch.calls[task.call].scalar);
  for (;;) {
    if (leader && !sh.stop) {
      sh.more = algo::nextStep(task.program, sh.cursor, sh.step);
      if (sh.more) sh.stop = !dp::prepareStep(ctx, launch, t, sh.step, sh.stepsDone);
    }
    ctx.sync();
    if (sh.stop || !sh.more) break;
    if (sh.llRecv) {
      // Threads only ever set landFailed, and read it past the barrier: they all agree.
      if (!dp::landLL(ctx, launch, t, task, sh)) sh.landFailed = true;
      ctx.sync();
      if (sh.landFailed) {
        if (leader) sh.stop = true;  // the task is not done
        break;
      }
    }
    dp::stepData<T>(ctx, op, sh);
    ctx.sync();
    if (sh.llSend) {
      dp::packLL(ctx, task, sh);
      ctx.sync();
    }
    if (leader) {
      dp::finishStep(ctx, task, launch.calls[task.call], sh.step, sh.bytes, sh.byAddress);
      ctx.store(&launch.stepsDone[t], ++sh.stepsDone);
    }
  }
  // Steps posted by address read the caller's buffers until the connection has sent them.
  if (leader && !sh.stop && sh.postedByAddress)
    for (int i = 0; i < task.nsend && !sh.stop; ++i) {
      const transport::SimpleRingView& r = task.send[i].ring;
      const uint64_t tail = *r.tail;
      sh.stop = !dp::waitFor(ctx, launch, t, task.send[i].peer, false,
                             [&] { return ctx.load(r.head) == tail; });
    }
  if (leader && !sh.stop) ctx.store(&launch.done[t], 1);
}

}  // namespace loom
