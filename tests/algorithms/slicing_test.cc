// Channel slices and pipeline chunks cover [0, count) exactly once, in order, aligned.
#include "algorithms/slicing.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "tests/algorithms/sim.h"

namespace loom::algo::test {
namespace {

const std::vector<std::size_t> kAligns = {1, 2, 4, 16};

std::vector<std::size_t> sliceCounts() {
  return {0, 1, 2, 3, 5, 15, 16, 17, 63, 64, 65, 100, 1000, 4099};
}

TEST(Slicing, ChannelSlicesTileTheRangeEvenlyAndAligned) {
  for (std::size_t count : sliceCounts()) {
    for (std::size_t align : kAligns) {
      for (int nch = 1; nch <= 5; ++nch) {
        SCOPED_TRACE(::testing::Message() << count << " " << align << " " << nch);
        std::size_t next = 0, smallest = count, largest = 0;
        for (int ch = 0; ch < nch; ++ch) {
          const Range s = channelSlice(count, nch, ch, align);
          EXPECT_EQ(s.offset, next);  // contiguous, no gap, no overlap
          EXPECT_EQ(s.offset % align, 0u);
          next = s.end();
          smallest = std::min(smallest, s.count);
          largest = std::max(largest, s.count);
        }
        EXPECT_EQ(next, count);
        EXPECT_LE(largest - smallest, align);  // as even as alignment allows
      }
    }
  }
}

TEST(Slicing, SplitEvenKeepsTheOffsetOfTheWhole) {
  const Range half1 = splitEven(Range{0, 37}, 2, 1, 4);
  EXPECT_EQ(half1, (Range{20, 17}));  // 9 units: 5 + 4; the tail of 1 goes to the last part
  const Range sub = splitEven(half1, 3, 2, 4);
  EXPECT_EQ(sub.offset % 4, 0u);
  EXPECT_EQ(sub.end(), half1.end());
}

// Ring loops: chunks of every loop tile the slice in chunk order, each at most `chunk` long
// and aligned; a full loop has nranks chunks of exactly `chunk`.
TEST(Slicing, RingChunksTileTheSlice) {
  for (int n : kRankCounts) {
    for (std::size_t align : kAligns) {
      const std::size_t chunk = 2 * align;
      for (std::size_t count : testCounts(n, static_cast<std::size_t>(n) * chunk)) {
        for (int nch : {1, 2, 3}) {
          SCOPED_TRACE(::testing::Message() << n << " " << align << " " << count << " " << nch);
          std::size_t next = 0;
          for (int ch = 0; ch < nch; ++ch) {
            const Range slice = channelSlice(count, nch, ch, align);
            const std::size_t loops = ringLoopCount(slice, n, chunk);
            EXPECT_EQ(loops == 0, slice.empty());
            for (std::size_t loop = 0; loop < loops; ++loop) {
              const bool full = (loop + 1) * static_cast<std::size_t>(n) * chunk <= slice.count;
              for (int c = 0; c < n; ++c) {
                const Range r = ringChunk(slice, n, chunk, align, loop, c);
                EXPECT_EQ(r.offset, next);
                EXPECT_LE(r.count, chunk);
                if (!r.empty()) {
                  EXPECT_EQ(r.offset % align, 0u);
                }
                if (full) {
                  EXPECT_EQ(r.count, chunk);
                }
                next = r.end();
              }
            }
          }
          EXPECT_EQ(next, count);
        }
      }
    }
  }
}

// The partial loop spreads its tail over the ring; which chunks end up empty is pinned down.
TEST(Slicing, SmallCountsLeaveTrailingChunksEmpty) {
  const Range slice{0, 3};  // count < nranks: one element for each of the first three chunks
  for (int c = 0; c < 5; ++c) {
    EXPECT_EQ(ringChunk(slice, 5, 8, 1, 0, c).count, c < 3 ? 1u : 0u) << c;
  }
  // 21 elements, 4 ranks, chunk 8, align 4: a chunk of roundUp(ceil(21/4), 4) = 8.
  EXPECT_EQ(ringChunk(Range{0, 21}, 4, 8, 4, 0, 2), (Range{16, 5}));
  EXPECT_TRUE(ringChunk(Range{0, 21}, 4, 8, 4, 0, 3).empty());
  // 70 elements, 4 ranks, chunk 16: a full loop of 64, then 6 left spread as 2+2+2+0.
  EXPECT_EQ(ringLoopCount(Range{0, 70}, 4, 16), 2u);
  EXPECT_EQ(ringChunk(Range{0, 70}, 4, 16, 1, 1, 0), (Range{64, 2}));
  EXPECT_TRUE(ringChunk(Range{0, 70}, 4, 16, 1, 1, 3).empty());
  EXPECT_EQ(ringLoopCount(Range{0, 0}, 4, 16), 0u);
}

TEST(Slicing, PipelineChunksTileTheSlice) {
  for (std::size_t count : sliceCounts()) {
    for (std::size_t chunk : {1, 3, 8, 64}) {
      const Range slice{5, count};
      std::size_t next = slice.offset;
      const std::size_t loops = pipelineLoopCount(slice, chunk);
      for (std::size_t loop = 0; loop < loops; ++loop) {
        const Range r = pipelineChunk(slice, chunk, loop);
        EXPECT_EQ(r.offset, next);
        EXPECT_GE(r.count, 1u);  // pipeline pieces are never empty
        EXPECT_LE(r.count, chunk);
        next = r.end();
      }
      EXPECT_EQ(next, slice.end()) << count << " " << chunk;
    }
  }
}

}  // namespace
}  // namespace loom::algo::test
