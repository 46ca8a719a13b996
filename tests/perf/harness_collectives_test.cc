// Unit tests of the per-collective rules the harness copies from nccl-tests: element counts,
// in-place offsets, bus-bandwidth factors.
#include <gtest/gtest.h>

#include "perf/harness/collectives.h"

namespace loomperf {
namespace {

constexpr double kOneGBps = 1.0e9;  // bytes moved in one second give 1 GB/s

TEST(PerfBandwidth, BusFactorsMatchNcclTests) {
  const int n = 4;
  const size_t count = 1000;                // paramCount
  const double sec = count * 4 / kOneGBps;  // algbw of 1 GB/s for count floats
  auto bus = [&](const CollSpec& s) { return s.bandwidth(count, 4, sec, n); };
  EXPECT_DOUBLE_EQ(bus(allReduceSpec()).alg, 1.0);
  EXPECT_DOUBLE_EQ(bus(allReduceSpec()).bus, 2.0 * 3 / 4);
  // AllGather, ReduceScatter, AlltoAll: the whole n * count buffer over (n-1)/n.
  EXPECT_DOUBLE_EQ(bus(allGatherSpec()).alg, 4.0);
  EXPECT_DOUBLE_EQ(bus(allGatherSpec()).bus, 4.0 * 3 / 4);
  EXPECT_DOUBLE_EQ(bus(reduceScatterSpec()).bus, 4.0 * 3 / 4);
  EXPECT_DOUBLE_EQ(bus(allToAllSpec()).bus, 4.0 * 3 / 4);
  EXPECT_DOUBLE_EQ(bus(broadcastSpec()).bus, 1.0);
  EXPECT_DOUBLE_EQ(bus(reduceSpec()).bus, 1.0);
  EXPECT_DOUBLE_EQ(bus(sendRecvSpec()).bus, 1.0);
  EXPECT_DOUBLE_EQ(bus(gatherSpec()).bus, 4.0 * 3 / 4);
  EXPECT_DOUBLE_EQ(bus(scatterSpec()).bus, 4.0 * 3 / 4);
}

TEST(PerfCounts, RoundDownToWholeBlocksPerRank) {
  // 1001 elements over 4 ranks: 250 each, as nccl-tests' count / nranks.
  CollCounts ag = allGatherSpec().counts(1001, 4);
  EXPECT_EQ(ag.sendCount, 250u);
  EXPECT_EQ(ag.recvCount, 1000u);
  EXPECT_EQ(ag.paramCount, 250u);
  EXPECT_EQ(ag.sendInplaceOffset, 250u);  // in place: rank r's input sits at block r
  EXPECT_EQ(ag.recvInplaceOffset, 0u);

  CollCounts rs = reduceScatterSpec().counts(1001, 4);
  EXPECT_EQ(rs.sendCount, 1000u);
  EXPECT_EQ(rs.recvCount, 250u);
  EXPECT_EQ(rs.paramCount, 250u);
  EXPECT_EQ(rs.sendInplaceOffset, 0u);
  EXPECT_EQ(rs.recvInplaceOffset, 250u);  // in place: rank r's result is block r

  CollCounts a2a = allToAllSpec().counts(1001, 4);
  EXPECT_EQ(a2a.sendCount, 1000u);
  EXPECT_EQ(a2a.recvCount, 1000u);
  EXPECT_EQ(a2a.paramCount, 250u);

  CollCounts ar = allReduceSpec().counts(1001, 4);
  EXPECT_EQ(ar.sendCount, 1001u);
  EXPECT_EQ(ar.recvCount, 1001u);
  EXPECT_EQ(ar.paramCount, 1001u);
  EXPECT_EQ(ar.sendInplaceOffset + ar.recvInplaceOffset, 0u);

  // Fewer elements than ranks: nothing to send, as in nccl-tests.
  EXPECT_EQ(allGatherSpec().counts(3, 4).paramCount, 0u);
}

// Each call moves on by the larger of its input and output and starts over where the next
// call would run past the buffer; loom's loop and the baselines' share this arithmetic.
TEST(PerfCounts, CallsMoveThroughTheBuffer) {
  const size_t buffer = 64 * 1024;
  // AllGather of 4 ranks at 16 KiB: 1 KiB in, 4 KiB out per rank: moves by the output.
  const BufferShift gather(allGatherSpec().counts(16 * 1024 / 4, 4), 4, buffer);
  EXPECT_EQ(gather.bytes, 16u * 1024);
  EXPECT_EQ(gather.steps, 4u);
  EXPECT_EQ(gather.at(0), 0u);
  EXPECT_EQ(gather.at(3), 48u * 1024);
  EXPECT_EQ(gather.at(4), 0u);
  EXPECT_EQ(gather.at(6), 32u * 1024);
  // A size that does not divide the buffer stops short of its end.
  const BufferShift odd(allReduceSpec().counts(5000, 2), 4, buffer);
  EXPECT_EQ(odd.steps, 3u);
  EXPECT_EQ(odd.at(2), 40000u);
  EXPECT_EQ(odd.at(3), 0u);
  // At the largest size, and for empty calls, every call starts at the beginning.
  EXPECT_EQ(BufferShift(allReduceSpec().counts(buffer / 4, 2), 4, buffer).at(1), 0u);
  EXPECT_EQ(BufferShift(allReduceSpec().counts(0, 2), 4, buffer).at(7), 0u);
  EXPECT_EQ(BufferShift().at(5), 0u);
}

TEST(PerfCollectives, NamesAndFlags) {
  for (const char* name : {"all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce",
                           "alltoall", "sendrecv", "gather", "scatter"}) {
    const CollSpec* s = collSpecByName(name);
    ASSERT_NE(s, nullptr) << name;
    EXPECT_STREQ(s->name, name);
  }
  EXPECT_EQ(collSpecByName("allreduce"), nullptr);
  EXPECT_TRUE(allReduceSpec().hasOp);
  EXPECT_FALSE(allReduceSpec().hasRoot);
  EXPECT_TRUE(reduceSpec().hasOp && reduceSpec().hasRoot);
  EXPECT_FALSE(broadcastSpec().hasOp);
}

// The expectations agree with a direct computation from the inputs.
TEST(PerfCollectives, ExpectedResultsFromInputs) {
  const int n = 3;
  Pattern p(loomInt32, Op::kSum, n, 5);
  CollCounts c = reduceScatterSpec().counts(12, n);  // 4 per rank
  std::vector<int32_t> want(c.recvCount);
  CallSite site{1, n, 0};
  ASSERT_TRUE(reduceScatterSpec().fillExpected(p, site, c, want.data()));
  for (size_t j = 0; j < c.recvCount; ++j) {
    double s = 0;
    for (int r = 0; r < n; ++r) s += p.input(r, 1 * c.paramCount + j);
    EXPECT_EQ(want[j], static_cast<int32_t>(s));
  }
  // AlltoAll: block q of rank 1 is block 1 of rank q's input.
  c = allToAllSpec().counts(12, n);
  want.assign(c.recvCount, 0);
  ASSERT_TRUE(allToAllSpec().fillExpected(p, site, c, want.data()));
  for (int q = 0; q < n; ++q)
    for (size_t j = 0; j < c.paramCount; ++j)
      EXPECT_EQ(want[q * c.paramCount + j], static_cast<int32_t>(p.input(q, c.paramCount + j)));
  // Reduce checks the root only.
  c = reduceSpec().counts(12, n);
  want.assign(c.recvCount, 0);
  EXPECT_FALSE(reduceSpec().fillExpected(p, CallSite{1, n, 0}, c, want.data()));
  EXPECT_TRUE(reduceSpec().fillExpected(p, CallSite{0, n, 0}, c, want.data()));
}

}  // namespace
}  // namespace loomperf
