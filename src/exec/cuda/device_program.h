// The device program: one task of a launch (device_plan.h) walked step by step, as the CUDA
// executor runs it, with one group of threads per task (a CUDA block, or one host thread on
// the simulated runtime).
//
// How it works. The task walks its step program with the walker every executor shares
// (algorithms/walker.h). Per step, the group's first thread does the protocol: it waits for
// the task's gate, for every slot it receives (the sender's tail past this side's head), and
// for a free slot toward every peer it sends to (tail - head < nslots); it checks each
// received slot's tag and byte count, and lays out the step's reduceCopy operands with
// stepOperands(), the one rule every executor follows. Then every thread of the group does
// the step's data: a byte copy where nothing is reduced or converted (bit-exact, NaN payloads
// included, as on the CPU), else reduceCopyElement() per element, the CPU's per-element math.
// Then the first thread publishes: head = h + 1 for what it received, the slot's byte count
// and tag then tail = t + 1 for what it sent, each with release order after the data.
//
// The counters are those of the connection's shared ring (connection_view.h, SimpleRingView):
// each side writes only its own, so its value is that side's next step, and a launch resumes
// where the last left off. Tasks of one launch that use the same connection run in the order
// the host gave them (DeviceTask::before), as the CPU executor's tasks do.
//
// Every wait checks the launch's error word (a failed task ends the launch), the
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
#include "src/kernels/reduce_copy.h"
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
  for (int i = 0; recvs && i < task.nrecv; ++i) {
    const transport::SimpleRingView& r = task.recv[i].ring;
    const uint64_t h = *r.head;  // only this side writes head
    if (!waitFor(ctx, launch, t, task.recv[i].peer, true, [&] { return ctx.load(r.tail) > h; }))
      return false;
    const uint64_t slot = h % r.nslots;
    const uint64_t word = r.words[slot];
    const uint32_t tag = static_cast<uint32_t>(word >> 32);
    const uint64_t got = word & 0xffffffffu;
    if (r.direct[slot] != 0 || r.region[slot] != 0 || got > r.slotBytes) {
      fail(ctx, launch, t, DeviceFault::kCorrupt, task.recv[i].peer, true, tag, got, bytes);
      return false;
    }
    if (tag != call.signature) {
      fail(ctx, launch, t, DeviceFault::kTag, task.recv[i].peer, true, tag, got, bytes);
      return false;
    }
    if (got != bytes) {
      fail(ctx, launch, t, DeviceFault::kSize, task.recv[i].peer, true, tag, got, bytes);
      return false;
    }
    received[i] = r.slots + slot * r.slotBytes;
  }
  for (int i = 0; sends && i < task.nsend; ++i) {
    const transport::SimpleRingView& r = task.send[i].ring;
    const uint64_t tail = *r.tail;  // only this side writes tail
    if (!waitFor(ctx, launch, t, task.send[i].peer, false,
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
      reduces && (algo::primReduces(s.prim) || algo::primReadsInput(s.prim) || s.final);
  sh.copy = sh.args.nsrc == 1 && !opApplies;
  sh.bytes = bytes;
  return true;
}

// The group's first thread, after the data: frees what it received and publishes what it sent.
template <typename Ctx>
LOOM_HOST_DEVICE inline void finishStep(Ctx& ctx, const DeviceTask& task, const DeviceCall& call,
                                        const algo::Step& s, uint64_t bytes) {
  if (algo::primRecvs(s.prim))
    for (int i = 0; i < task.nrecv; ++i) {
      const transport::SimpleRingView& r = task.recv[i].ring;
      ctx.store(r.head, *r.head + 1);
    }
  if (algo::primSends(s.prim))
    for (int i = 0; i < task.nsend; ++i) {
      const transport::SimpleRingView& r = task.send[i].ring;
      const uint64_t tail = *r.tail;
      const uint64_t slot = tail % r.nslots;
      r.words[slot] = bytes | (static_cast<uint64_t>(call.signature) << 32);
      r.direct[slot] = 0;
      r.region[slot] = 0;
      ctx.store(r.tail, tail + 1);  // data, count and tag before tail
    }
}

}  // namespace device_program

// Runs task `t` of `launch` on the calling group; T and Op are the launch's element type and
// reduction (its calls share them).
template <typename T, typename Op, typename Ctx>
LOOM_HOST_DEVICE void runDeviceTask(const DeviceLaunch& launch, int t, Ctx& ctx) {
  namespace dp = device_program;
  const DeviceTask& task = launch.tasks[t];
  const DeviceCall& call = launch.calls[task.call];
  DeviceStepShared& sh = ctx.shared();
  const bool leader = ctx.thread() == 0;
  if (leader) {
    sh.stop = false;
    for (int k = 0; k < task.nbefore && !sh.stop; ++k) {
      const int b = task.before[k];
      sh.stop =
          !dp::waitFor(ctx, launch, t, -1, true, [&] { return ctx.load(&launch.done[b]) != 0; });
    }
  }
  ctx.sync();
  if (sh.stop) return;
  const Op op(call.scalar);
  algo::StepCursor cursor;
  algo::Step s;
  uint64_t stepsDone = 0;
  while (algo::nextStep(task.program, cursor, s)) {
    if (leader) sh.stop = !dp::prepareStep(ctx, launch, t, s, stepsDone);
    ctx.sync();
    if (sh.stop) return;
    const ReduceCopyArgs& args = sh.args;
    if (args.count > 0 && args.nsrc > 0 && args.ndst > 0) {
      if (sh.copy) {
        for (int d = 0; d < args.ndst; ++d)
          if (args.dst[d] != args.src[0]) ctx.copy(args.dst[d], args.src[0], sh.bytes);
      } else {
        for (size_t i = ctx.thread(); i < args.count; i += ctx.threads()) {
          const T value = reduceCopyElement<T>(op, args, i);
          for (int d = 0; d < args.ndst; ++d) static_cast<T*>(args.dst[d])[i] = value;
        }
      }
    }
    ctx.sync();
    if (leader) {
      dp::finishStep(ctx, task, call, s, sh.bytes);
      ctx.store(&launch.stepsDone[t], ++stepsDone);
    }
  }
  if (leader) ctx.store(&launch.done[t], 1);
}

}  // namespace loom
