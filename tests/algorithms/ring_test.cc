// Ring arithmetic and the ring schedules, checked by running them in the simulator (sim.h)
// for many rank counts, ring orders, element counts, channel counts, alignments and in place.
#include "algorithms/ring.h"

#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

#include "tests/algorithms/sim.h"

namespace loom::algo::test {
namespace {

// How a run is cut: alignment unit and chunk (a multiple of it), both in elements.
struct Cut {
  std::size_t align;
  std::size_t chunk;
};
const std::vector<Cut> kCuts = {{1, 3}, {4, 8}};

// Builds every rank's AllReduce program; inputs are inputValue(rank, i).
void buildAllReduce(Sim& sim, const std::vector<int>& order, std::size_t count, int nch, Cut cut,
                    bool inPlace) {
  const int n = static_cast<int>(order.size());
  for (int pos = 0; pos < n; ++pos) {
    const int rank = order[pos];
    RankState& st = sim.rank(rank);
    st.mem.assign(inPlace ? count : 2 * count, kUntouched);
    st.outBase = inPlace ? 0 : count;
    for (std::size_t i = 0; i < count; ++i) st.mem[i] = inputValue(rank, i);
    const int prev = ringPrev(order.data(), n, rank), next = ringNext(order.data(), n, rank);
    for (int ch = 0; ch < nch; ++ch) {
      const Range slice = channelSlice(count, nch, ch, cut.align);
      addProgram(sim, rank, ch, ringAllReduceProgram(n, pos, slice, cut.chunk, cut.align), {prev},
                 {next}, tagByOutput);
    }
  }
}

void buildAllGather(Sim& sim, const std::vector<int>& order, std::size_t count, int nch, Cut cut,
                    bool inPlace) {
  const int n = static_cast<int>(order.size());
  const std::size_t un = static_cast<std::size_t>(n);
  for (int pos = 0; pos < n; ++pos) {
    const int rank = order[pos];
    RankState& st = sim.rank(rank);
    st.mem.assign(inPlace ? un * count : count + un * count, kUntouched);
    st.inBase = inPlace ? allGatherInPlaceOffset(rank, count) : 0;
    st.outBase = inPlace ? 0 : count;
    for (std::size_t i = 0; i < count; ++i) st.mem[st.inBase + i] = inputValue(rank, i);
    const int prev = ringPrev(order.data(), n, rank), next = ringNext(order.data(), n, rank);
    for (int ch = 0; ch < nch; ++ch) {
      const Range slice = channelSlice(count, nch, ch, cut.align);
      addProgram(sim, rank, ch,
                 ringBlocksProgram(true, order.data(), n, pos, count, slice, cut.chunk, inPlace),
                 {prev}, {next}, tagByOutput);
    }
  }
}

void buildReduceScatter(Sim& sim, const std::vector<int>& order, std::size_t rc, int nch, Cut cut,
                        bool inPlace) {
  const int n = static_cast<int>(order.size());
  const std::size_t un = static_cast<std::size_t>(n);
  for (int pos = 0; pos < n; ++pos) {
    const int rank = order[pos];
    RankState& st = sim.rank(rank);
    st.mem.assign(inPlace ? un * rc : un * rc + rc, kUntouched);
    st.outBase = inPlace ? reduceScatterInPlaceOffset(rank, rc) : un * rc;
    for (std::size_t i = 0; i < un * rc; ++i) st.mem[i] = inputValue(rank, i);
    const int prev = ringPrev(order.data(), n, rank), next = ringNext(order.data(), n, rank);
    for (int ch = 0; ch < nch; ++ch) {
      const Range slice = channelSlice(rc, nch, ch, cut.align);
      addProgram(sim, rank, ch,
                 ringBlocksProgram(false, order.data(), n, pos, rc, slice, cut.chunk, inPlace),
                 {prev}, {next}, tagByInput);
    }
  }
}

Value sumOver(int n, std::size_t i) {
  Value v = 0;
  for (int r = 0; r < n; ++r) v += inputValue(r, i);
  return v;
}

// AllReduce counts the whole buffer; AllGather and ReduceScatter count one of n blocks, and
// only AllGather's output holds all n of them.
enum class Layout { kFlat, kGather, kScatter };

// Runs `build` for every count, channel count, cut and ring order, and checks every rank's
// output region with `expect(rank, count, i)`. For n = 64 only the scrambled ring runs, to keep
// the suite quick (sanitizer builds included).
template <typename Build, typename Expect>
void sweep(int n, bool inPlace, Layout layout, Build build, Expect expect) {
  const std::size_t un = static_cast<std::size_t>(n);
  for (const auto& order : testRingOrders(n)) {
    if (n > 16 && order == testRingOrders(n)[0]) continue;
    for (Cut cut : kCuts) {
      // Per-block counts: a loop is one chunk, and "large" is scaled down as buffers hold n.
      const bool flat = layout == Layout::kFlat;
      const std::size_t loop = flat ? un * cut.chunk : cut.chunk;
      const std::size_t large = flat ? 1001 : 2 * (1001 / un) + 1;
      for (std::size_t count : testCounts(n, loop, large)) {
        for (int nch : {1, 2, 3}) {
          {
            SCOPED_TRACE(::testing::Message()
                         << "n=" << n << " count=" << count << " nch=" << nch
                         << " align=" << cut.align << " chunk=" << cut.chunk
                         << " inPlace=" << inPlace << " order[0]=" << order[0]);
            Sim sim(n);
            build(sim, order, count, nch, cut, inPlace);
            ASSERT_EQ(sim.run(), "");
            const std::size_t outCount = layout == Layout::kGather ? count * un : count;
            for (int r = 0; r < n; ++r) {
              const RankState& st = sim.rank(r);
              for (std::size_t i = 0; i < outCount; ++i) {
                ASSERT_EQ(st.mem[st.outBase + i], expect(r, count, i))
                    << "rank " << r << " i " << i;
              }
            }
          }
        }
      }
    }
  }
}

// Parameters: rank count, in place.
class RingSim : public ::testing::TestWithParam<std::tuple<int, bool>> {};

TEST_P(RingSim, AllReduce) {
  const auto [n, inPlace] = GetParam();
  sweep(n, inPlace, Layout::kFlat, buildAllReduce,
        [n = n](int, std::size_t, std::size_t i) { return sumOver(n, i); });
}

TEST_P(RingSim, AllGather) {
  const auto [n, inPlace] = GetParam();
  sweep(n, inPlace, Layout::kGather, buildAllGather, [](int, std::size_t count, std::size_t i) {
    return inputValue(int(i / count), i % count);
  });
}

TEST_P(RingSim, ReduceScatter) {
  const auto [n, inPlace] = GetParam();
  sweep(n, inPlace, Layout::kScatter, buildReduceScatter,
        [n = n](int r, std::size_t rc, std::size_t i) {
          return sumOver(n, static_cast<std::size_t>(r) * rc + i);
        });
}

INSTANTIATE_TEST_SUITE_P(Ranks, RingSim,
                         ::testing::Combine(::testing::ValuesIn(kRankCounts), ::testing::Bool()),
                         [](const auto& info) {
                           return "n" + std::to_string(std::get<0>(info.param)) +
                                  (std::get<1>(info.param) ? "_inplace" : "");
                         });

TEST(Ring, PositionsOfAPermutation) {
  for (int n : kRankCounts) {
    for (const auto& order : testRingOrders(n)) {
      ASSERT_TRUE(isRingOrder(order.data(), n));
      std::vector<int> seen(static_cast<std::size_t>(n), 0);
      for (int pos = 0; pos < n; ++pos) {
        const int r = order[pos];
        ++seen[static_cast<std::size_t>(r)];
        EXPECT_EQ(ringPosition(order.data(), n, r), pos);
        EXPECT_EQ(ringNext(order.data(), n, r), order[(pos + 1) % n]);
        EXPECT_EQ(ringPrev(order.data(), n, ringNext(order.data(), n, r)), r);
      }
      for (int count : seen) EXPECT_EQ(count, 1);  // every rank exactly once
    }
  }
  const int dup[] = {0, 1, 1}, outOfRange[] = {0, 3, 1};
  EXPECT_FALSE(isRingOrder(dup, 3));
  EXPECT_FALSE(isRingOrder(outOfRange, 3));
  EXPECT_EQ(ringPosition(dup, 3, 2), -1);
}

// The exact primitive sequence of NCCL's runRing, for n = 5.
TEST(Ring, AllReduceSequenceMatchesNccl) {
  const std::vector<Prim> want = {
      Prim::kSend,           Prim::kRecvReduceSend,     Prim::kRecvReduceSend,
      Prim::kRecvReduceSend, Prim::kRecvReduceCopySend, Prim::kRecvCopySend,
      Prim::kRecvCopySend,   Prim::kRecvCopySend,       Prim::kRecv};
  ASSERT_EQ(ringAllReduceStepCount(5), 9);
  for (int s = 0; s < 9; ++s) {
    const RingStep step = ringAllReduceStep(5, 2, s);
    EXPECT_EQ(step.prim, want[static_cast<std::size_t>(s)]) << s;
    EXPECT_EQ(step.chunk, ((2 - 1 - s) % 5 + 5) % 5) << s;
  }
  EXPECT_EQ(ringAllReduceStep(5, 2, 4).chunk, 2);  // the turning point finishes chunk == pos
  EXPECT_EQ(ringAllReduceStep(1, 0, 0).prim, Prim::kCopy);
  EXPECT_EQ(ringAllReduceStep(1, 0, 0, true).prim, Prim::kNone);
}

// Whatever a rank sends at step k is what the next rank expects at step k + 1, and each
// rank's sends equal its receives in number: the walk needs no other coordination.
TEST(Ring, StepsMatchAcrossNeighbours) {
  for (int n : kRankCounts) {
    if (n == 1) continue;
    const auto order = testRingOrders(n)[1];
    for (int pos = 0; pos < n; ++pos) {
      const int nextPos = (pos + 1) % n;
      for (int s = 0; s + 1 < ringAllReduceStepCount(n); ++s) {
        const RingStep mine = ringAllReduceStep(n, pos, s),
                       theirs = ringAllReduceStep(n, nextPos, s + 1);
        ASSERT_TRUE(primSends(mine.prim) && primRecvs(theirs.prim));
        EXPECT_EQ(mine.chunk, theirs.chunk);
      }
      for (int s = 0; s + 1 < n; ++s) {
        EXPECT_EQ(ringAllGatherStep(order.data(), n, pos, s, false).chunk,
                  ringAllGatherStep(order.data(), n, nextPos, s + 1, false).chunk);
        EXPECT_EQ(ringReduceScatterStep(order.data(), n, pos, s, false).chunk,
                  ringReduceScatterStep(order.data(), n, nextPos, s + 1, false).chunk);
      }
      // ReduceScatter ends on the rank's own block; AllGather starts from it.
      EXPECT_EQ(ringReduceScatterStep(order.data(), n, pos, n - 1, false).chunk, order[pos]);
      EXPECT_EQ(ringAllGatherStep(order.data(), n, pos, 0, false).chunk, order[pos]);
    }
  }
}

// The simulator must be able to fail: a rank that forgets its own contribution, or two steps
// run out of order, are caught.
TEST(Ring, SimulatorCatchesBrokenSchedules) {
  const std::vector<int> order = {0, 1, 2, 3};
  Sim dropped(4);
  buildAllReduce(dropped, order, 16, 1, Cut{1, 4}, false);
  for (Op& op : dropped.rank(2).program) {
    if (op.prim == Prim::kRecvReduceCopySend) op.prim = Prim::kRecvCopySend;
  }
  ASSERT_EQ(dropped.run(), "");
  bool wrong = false;
  for (std::size_t i = 0; i < 16; ++i) wrong |= dropped.rank(0).mem[16 + i] != sumOver(4, i);
  EXPECT_TRUE(wrong);

  Sim swapped(4);
  buildAllReduce(swapped, order, 16, 1, Cut{1, 4}, false);
  std::swap(swapped.rank(1).program[1], swapped.rank(1).program[2]);
  EXPECT_NE(swapped.run(), "");
}

}  // namespace
}  // namespace loom::algo::test
