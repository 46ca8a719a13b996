// The LL word rules (src/kernels/ll_words.h) with exact values, and reduceCopyLL
// (src/kernels/ll_reduce_copy.h) against the plain reduceCopy on the same data.
#include "src/kernels/ll_words.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "src/kernels/ll_reduce_copy.h"
#include "src/kernels/reduce_copy_dispatch.h"

namespace loom {
namespace {

TEST(LLWords, FlagOfStepIsStepPlusOneAndWraps) {
  EXPECT_EQ(llFlag(0), 1u);
  EXPECT_EQ(llFlag(41), 42u);
  EXPECT_EQ(llFlag(0xfffffffeull), 0xffffffffu);
  EXPECT_EQ(llFlag(0xffffffffull), 0u);  // only after 2^32 - 1 steps
  EXPECT_EQ(llFlag(0x100000000ull), 1u);
}

TEST(LLWords, WordIsFlagHighDataLow) {
  EXPECT_EQ(llWord(0x11223344u, 0xa1b2c3d4u), 0x11223344a1b2c3d4ull);
  EXPECT_EQ(llFlagOf(0x11223344a1b2c3d4ull), 0x11223344u);
  EXPECT_EQ(llDataOf(0x11223344a1b2c3d4ull), 0xa1b2c3d4u);
  EXPECT_EQ(llWordsFor(0), 0u);
  EXPECT_EQ(llWordsFor(1), 1u);
  EXPECT_EQ(llWordsFor(4), 1u);
  EXPECT_EQ(llWordsFor(5), 2u);
}

TEST(LLWords, PackPutsFourBytesPerWordAndPadsTheLastWithZeros) {
  const unsigned char bytes[6] = {0x01, 0x02, 0x03, 0x04, 0x05, 0x06};
  uint64_t words[3] = {7, 7, 7};
  llPack(words, bytes, sizeof bytes, 9);
  EXPECT_EQ(words[0], 0x0000000904030201ull);
  EXPECT_EQ(words[1], 0x0000000900000605ull);
  EXPECT_EQ(words[2], 7u);  // past the step: untouched
  unsigned char back[6] = {};
  llUnpack(back, words, sizeof back);
  EXPECT_EQ(std::memcmp(back, bytes, sizeof bytes), 0);
}

TEST(LLWords, LandedStopsAtTheFirstWordWithAnotherFlag) {
  const uint64_t words[4] = {llWord(3, 0), llWord(3, 1), llWord(2, 2), llWord(3, 3)};
  EXPECT_EQ(llLanded(words, 0, 4, 3), 2u);
  EXPECT_EQ(llLanded(words, 3, 4, 3), 4u);  // resumes where the caller says
  EXPECT_EQ(llLanded(words, 0, 0, 3), 0u);
  EXPECT_EQ(llLanded(words, 0, 4, 4), 0u);
}

TEST(LLWords, HeaderIsCountThenTagUnderTheStepsFlag) {
  uint64_t slot[kLLHeaderWords] = {};
  llWriteHeader(slot, 5, 4096, 0xdeadbeefu);
  EXPECT_EQ(slot[kLLCountWord], 0x0000000500001000ull);
  EXPECT_EQ(slot[kLLTagWord], 0x00000005deadbeefull);
  uint32_t bytes = 0, tag = 0;
  ASSERT_TRUE(llReadHeader(slot, 5, &bytes, &tag));
  EXPECT_EQ(bytes, 4096u);
  EXPECT_EQ(tag, 0xdeadbeefu);
  EXPECT_FALSE(llReadHeader(slot, 6, &bytes, &tag));
  slot[kLLTagWord] = llWord(4, 0);  // a tag left by an older step
  EXPECT_FALSE(llReadHeader(slot, 5, &bytes, &tag));
}

TEST(LLWords, RefreshWritesEverySlotWordOnTheFirstStepsOfEachRound) {
  constexpr uint64_t kRound = 1024, kSlotsInRing = 8;
  constexpr size_t kData = 1024;
  for (uint64_t step : {0ull, 7ull, 1024ull, 1031ull, 5ull * 1024 + 3})
    EXPECT_EQ(llWordsToWrite(step, 5, kSlotsInRing, kData, kRound), kData) << step;
  for (uint64_t step : {8ull, 1023ull, 1032ull})
    EXPECT_EQ(llWordsToWrite(step, 5, kSlotsInRing, kData, kRound), 2u) << step;
  EXPECT_EQ(llWordsToWrite(9, 0, kSlotsInRing, kData, kRound), 0u);
}

TEST(LLWords, SlotAddressingFollowsTheView) {
  uint64_t ring[3 * 20] = {};
  uint64_t step = 4;
  transport::LLRingView view;
  view.slots = ring;
  view.nslots = 3;
  view.slotStrideWords = 20;
  view.headerWords = 8;
  view.dataWords = 12;
  view.step = &step;
  EXPECT_EQ(llSlot(view, 0), ring);
  EXPECT_EQ(llSlot(view, 4), ring + 20);
  EXPECT_EQ(llDataWords(view, 5), ring + 40 + 8);
}

// A float32 sum of an LL source and a plain one, into a plain output and an LL slot, over
// several tiles and a partial last word; the same bits as reduceCopy on plain copies.
TEST(ReduceCopyLL, ReducesFromWordsAndPacksIntoWords) {
  for (size_t count : {size_t{0}, size_t{1}, size_t{3}, kLLTileBytes / 4 + 5}) {
    std::vector<float> a(count), b(count), expected(count), out(count, -1.0f);
    for (size_t i = 0; i < count; ++i) {
      a[i] = 0.25f * static_cast<float>(i) + 1.0f;
      b[i] = -0.5f * static_cast<float>(i % 7);
    }
    std::vector<uint64_t> inWords(llWordsFor(count * 4) + 1, 0), outWords(inWords.size(), 0);
    llPack(inWords.data(), a.data(), count * 4, 3);
    ReduceCopyArgs plain;
    plain.nsrc = 2;
    plain.src[0] = a.data();
    plain.src[1] = b.data();
    plain.ndst = 1;
    plain.dst[0] = expected.data();
    plain.count = count;
    reduceCopy(loomFloat32, ReduceOpKind::kSum, plain);

    ReduceCopyArgs args = plain;
    args.src[0] = inWords.data();
    args.ndst = 2;
    args.dst[0] = out.data();
    args.dst[1] = outWords.data();
    LLOperands ll;
    ll.markSource(args, inWords.data());
    ll.markDest(args, outWords.data(), 8);
    EXPECT_EQ(ll.srcMask, 1u);
    EXPECT_EQ(ll.dstMask, 2u);
    reduceCopyLL(loomFloat32, ReduceOpKind::kSum, args, ll, /*copyOnly=*/false);
    EXPECT_EQ(std::memcmp(out.data(), expected.data(), count * 4), 0) << count;
    for (size_t w = 0; w < llWordsFor(count * 4); ++w) {
      uint32_t v;
      std::memcpy(&v, reinterpret_cast<const char*>(expected.data()) + 4 * w, 4);
      ASSERT_EQ(outWords[w], llWord(8, v)) << count << " word " << w;
    }
    EXPECT_EQ(outWords[llWordsFor(count * 4)], 0u);  // nothing past the step
  }
}

// A copy moves bytes: an odd count of int8 from words into words (a relay step), bit-exact.
TEST(ReduceCopyLL, CopiesWordsToWordsWithTheDestinationsFlag) {
  const size_t count = 2 * kLLTileBytes + 3;
  std::vector<unsigned char> data(count);
  for (size_t i = 0; i < count; ++i) data[i] = static_cast<unsigned char>(i * 37 + 1);
  std::vector<uint64_t> in(llWordsFor(count)), out(llWordsFor(count)), expected(in.size());
  llPack(in.data(), data.data(), count, 11);
  llPack(expected.data(), data.data(), count, 12);
  ReduceCopyArgs args;
  args.nsrc = 1;
  args.src[0] = in.data();
  args.ndst = 1;
  args.dst[0] = out.data();
  args.count = count;
  LLOperands ll;
  ll.markSource(args, in.data());
  ll.markDest(args, out.data(), 12);
  reduceCopyLL(loomInt8, ReduceOpKind::kSum, args, ll, /*copyOnly=*/true);
  EXPECT_EQ(out, expected);
}

}  // namespace
}  // namespace loom
