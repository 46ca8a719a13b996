// The one rule that maps a step onto reduceCopy's operands (src/kernels/step_operands.h):
// source order, the input's place and pre-op bit, destinations, post-op.
#include "src/kernels/step_operands.h"

#include <gtest/gtest.h>

namespace loom {
namespace {

using algo::Prim;

struct Fixture {
  char input[1], output[1], r0[1], r1[1], r2[1], s0[1], s1[1];
  const void* received[3] = {r0, r1, r2};
  void* slots[2] = {s0, s1};
  StepBuffers buffers(int nrecv, int nslots) const {
    StepBuffers b;
    b.input = input;
    b.received = received;
    b.nrecv = nrecv;
    b.output = const_cast<char*>(output);
    b.slots = const_cast<void* const*>(slots);
    b.nslots = nslots;
    return b;
  }
};

TEST(StepOperands, ReductionPutsTheInputAfterTheReceivedDataByDefault) {
  Fixture f;
  ReduceCopyArgs args;
  stepOperands(Prim::kRecvReduceCopySend, true, f.buffers(2, 1), args);
  ASSERT_EQ(args.nsrc, 3);
  EXPECT_EQ(args.src[0], f.r0);
  EXPECT_EQ(args.src[1], f.r1);
  EXPECT_EQ(args.src[2], f.input);
  EXPECT_EQ(args.preOpOnSource, 1u << 2);  // only the local input gets the pre-op
  ASSERT_EQ(args.ndst, 2);
  EXPECT_EQ(args.dst[0], f.output);
  EXPECT_EQ(args.dst[1], f.s0);
  EXPECT_TRUE(args.postOp);
}

TEST(StepOperands, InputPositionAndPartialResults) {
  Fixture f;
  StepBuffers b = f.buffers(3, 0);
  b.inputPosition = 1;
  b.inputHasPreOp = true;  // a later phase: the pre-op was applied before
  ReduceCopyArgs args;
  stepOperands(Prim::kRecvReduceCopy, false, b, args);
  ASSERT_EQ(args.nsrc, 4);
  EXPECT_EQ(args.src[0], f.r0);
  EXPECT_EQ(args.src[1], f.input);
  EXPECT_EQ(args.src[2], f.r1);
  EXPECT_EQ(args.src[3], f.r2);
  EXPECT_EQ(args.preOpOnSource, 0u);
  EXPECT_FALSE(args.postOp);
  b.inputPosition = 7;  // past the received data: last
  stepOperands(Prim::kRecvReduceCopy, false, b, args);
  EXPECT_EQ(args.src[3], f.input);
}

TEST(StepOperands, CopiesAndSends) {
  Fixture f;
  ReduceCopyArgs args;
  stepOperands(Prim::kRecvCopySend, false, f.buffers(1, 1), args);  // no input read
  ASSERT_EQ(args.nsrc, 1);
  EXPECT_EQ(args.src[0], f.r0);
  EXPECT_EQ(args.preOpOnSource, 0u);
  ASSERT_EQ(args.ndst, 2);
  stepOperands(Prim::kSendFromOutput, false, f.buffers(0, 2), args);
  ASSERT_EQ(args.nsrc, 1);
  EXPECT_EQ(args.src[0], f.output);
  ASSERT_EQ(args.ndst, 2);  // the output is read, not written
  EXPECT_EQ(args.dst[0], f.s0);
  StepBuffers b = f.buffers(0, 2);
  void* posted[2] = {nullptr, f.s1};  // the first link posts by address: no slot to fill
  b.slots = posted;
  stepOperands(Prim::kSend, false, b, args);
  ASSERT_EQ(args.nsrc, 1);
  EXPECT_EQ(args.src[0], f.input);
  EXPECT_EQ(args.preOpOnSource, 1u);
  ASSERT_EQ(args.ndst, 1);
  EXPECT_EQ(args.dst[0], f.s1);
  stepOperands(Prim::kRecv, false, f.buffers(1, 0), args);  // a receive ignores the input
  ASSERT_EQ(args.nsrc, 1);
  EXPECT_EQ(args.src[0], f.r0);
  ASSERT_EQ(args.ndst, 1);
  EXPECT_EQ(args.dst[0], f.output);
}

TEST(StepAppliesOp, OnlyFoldsAndTheOpsOwnPreAndPostOpsChangeBits) {
  // Folding sources changes bits whatever the op.
  for (ReduceOpKind op : {ReduceOpKind::kSum, ReduceOpKind::kMax, ReduceOpKind::kPreMulSum,
                          ReduceOpKind::kSumPostDiv}) {
    EXPECT_TRUE(stepAppliesOp(Prim::kRecvReduceSend, false, false, op));
    EXPECT_TRUE(stepAppliesOp(Prim::kRecvReduceCopy, false, true, op));
  }
  // A ring's first send and an out-of-place copy move the input as it is: byte copies, unless
  // PreMulSum still has to multiply it.
  for (Prim p : {Prim::kSend, Prim::kCopySend, Prim::kCopy}) {
    EXPECT_FALSE(stepAppliesOp(p, false, false, ReduceOpKind::kSum));
    EXPECT_FALSE(stepAppliesOp(p, false, false, ReduceOpKind::kProd));
    EXPECT_FALSE(stepAppliesOp(p, false, false, ReduceOpKind::kSumPostDiv));
    EXPECT_TRUE(stepAppliesOp(p, false, false, ReduceOpKind::kPreMulSum));
    EXPECT_FALSE(stepAppliesOp(p, false, true, ReduceOpKind::kPreMulSum));  // already applied
  }
  // Received results are copied as they are, except where a final step still divides.
  EXPECT_FALSE(stepAppliesOp(Prim::kRecv, false, false, ReduceOpKind::kSumPostDiv));
  EXPECT_FALSE(stepAppliesOp(Prim::kRecvCopySend, false, false, ReduceOpKind::kPreMulSum));
  EXPECT_TRUE(stepAppliesOp(Prim::kRecv, true, false, ReduceOpKind::kSumPostDiv));
  EXPECT_FALSE(stepAppliesOp(Prim::kRecv, true, false, ReduceOpKind::kMin));
}

}  // namespace
}  // namespace loom
