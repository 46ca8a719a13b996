// Unit tests of the harness's data patterns and checker: encodings of every type, exactness
// of every op for every type and rank count, and the wrong-element count.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "perf/harness/data_pattern.h"

namespace loomperf {
namespace {

template <typename T>
T encoded(loomDataType_t type, double v) {
  T out{};
  encodeValue(type, v, &out);
  return out;
}

TEST(PerfData, EncodingsOfSmallIntegers) {
  EXPECT_EQ(encoded<uint16_t>(loomFloat16, 1), 0x3c00);
  EXPECT_EQ(encoded<uint16_t>(loomFloat16, 2048), 0x6800);
  EXPECT_EQ(encoded<uint16_t>(loomFloat16, 3), 0x4200);
  EXPECT_EQ(encoded<uint16_t>(loomBfloat16, 1), 0x3f80);
  EXPECT_EQ(encoded<uint16_t>(loomBfloat16, 3), 0x4040);
  EXPECT_EQ(encoded<uint8_t>(loomFloat8e4m3, 1), 0x38);
  EXPECT_EQ(encoded<uint8_t>(loomFloat8e4m3, 16), 0x58);
  EXPECT_EQ(encoded<uint8_t>(loomFloat8e4m3, 3), 0x44);
  EXPECT_EQ(encoded<uint8_t>(loomFloat8e5m2, 1), 0x3c);
  EXPECT_EQ(encoded<uint8_t>(loomFloat8e5m2, 6), 0x46);
  EXPECT_EQ(encoded<uint16_t>(loomFloat16, 0), 0);
  EXPECT_EQ(encoded<float>(loomFloat32, 7), 7.0f);
  EXPECT_EQ(encoded<int8_t>(loomInt8, 100), 100);
  EXPECT_EQ(encoded<uint64_t>(loomUint64, 12345), 12345u);
}

// Every partial result of every op must stay an exact integer of the type.
TEST(PerfData, EveryPatternStaysExact) {
  for (const TypeInfo& t : allTypes()) {
    for (int op = 0; op < kNumOps; ++op) {
      for (int n : {1, 2, 3, 4, 7, 8, 16}) {
        Pattern p(t.type, static_cast<Op>(op), n, 42);
        for (size_t i = 0; i < 300; ++i) {
          double partial = 0, maxInput = 0;
          for (int r = 0; r < n; ++r) {
            double v = p.input(r, i);
            ASSERT_GE(v, 0);
            ASSERT_EQ(v, static_cast<double>(static_cast<int64_t>(v)));
            maxInput = std::max(maxInput, v);
            partial += v * (op == static_cast<int>(Op::kMulSum) ? mulSumScalar(r) : 1);
          }
          double red = p.reduced(i);
          ASSERT_LE(red, t.maxExact) << t.name << " op " << op << " n " << n;
          ASSERT_EQ(red, static_cast<double>(static_cast<int64_t>(red)))
              << t.name << " op " << op << " n " << n << " (avg must divide exactly)";
          if (op == static_cast<int>(Op::kSum) || op == static_cast<int>(Op::kMulSum) ||
              op == static_cast<int>(Op::kAvg)) {
            ASSERT_LE(partial, t.maxExact) << t.name << " op " << op << " n " << n;
          }
          ASSERT_LE(maxInput, t.maxExact);
        }
      }
    }
  }
}

TEST(PerfData, RanksAndSeedsDiffer) {
  Pattern a(loomFloat32, Op::kSum, 4, 1), b(loomFloat32, Op::kSum, 4, 2);
  int rankDiff = 0, seedDiff = 0;
  for (size_t i = 0; i < 100; ++i) {
    rankDiff += a.input(0, i) != a.input(1, i);
    seedDiff += a.input(0, i) != b.input(0, i);
  }
  EXPECT_GT(rankDiff, 90);
  EXPECT_GT(seedDiff, 90);
}

TEST(PerfData, ReducedMatchesOps) {
  Pattern mx(loomInt32, Op::kMax, 3, 7), pr(loomInt32, Op::kProd, 3, 7);
  for (size_t i = 0; i < 50; ++i) {
    EXPECT_EQ(mx.reduced(i), std::max({mx.input(0, i), mx.input(1, i), mx.input(2, i)}));
    EXPECT_EQ(pr.reduced(i), pr.input(0, i) * pr.input(1, i) * pr.input(2, i));
  }
}

TEST(PerfData, CheckerCountsWrongElements) {
  Pattern p(loomFloat16, Op::kSum, 2, 3);
  std::vector<uint16_t> want(64), got(64);
  p.fillReduced(0, 64, want.data());
  got = want;
  EXPECT_EQ(countWrong(got.data(), want.data(), 64, 2), 0);
  got[5] ^= 1;
  got[63] ^= 0x8000;
  EXPECT_EQ(countWrong(got.data(), want.data(), 64, 2), 2);
  // Poison never looks like a result.
  poison(got.data(), got.size() * 2);
  EXPECT_EQ(countWrong(got.data(), want.data(), 64, 2), 64);
}

}  // namespace
}  // namespace loomperf
