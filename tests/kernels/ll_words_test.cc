// The LL word rules (src/kernels/ll_words.h) with exact values.
#include "src/kernels/ll_words.h"

#include <gtest/gtest.h>

#include <cstring>

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

TEST(LLWords, UnpackLandedCopiesWholeWordsUpToTheFirstMissing) {
  const uint64_t words[3] = {llWord(6, 0x04030201u), llWord(6, 0x08070605u), llWord(5, 0xffu)};
  unsigned char out[12] = {};
  EXPECT_EQ(llUnpackLanded(out, words, 0, 3, 6), 2u);
  const unsigned char expected[12] = {1, 2, 3, 4, 5, 6, 7, 8, 0, 0, 0, 0};
  EXPECT_EQ(std::memcmp(out, expected, sizeof out), 0);
  EXPECT_EQ(llUnpackLanded(out, words, 2, 3, 5), 3u);  // resumes at word 2, its own offset
  EXPECT_EQ(out[8], 0xff);
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

}  // namespace
}  // namespace loom
