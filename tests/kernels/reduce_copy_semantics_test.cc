// The documented corner cases of reduceCopy, on every CPU ISA: integer wrap-around (no
// undefined behaviour, so UBSan stays quiet), NaN propagation in min/max, average through
// PreMulSum / SumPostDiv, pre-op only on the listed sources, and the argument checks.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "src/base/error.h"
#include "tests/kernels/kernel_test_util.h"

namespace loom {
namespace {

// Runs one reduction of per-source vectors on every supported ISA and returns the outputs.
template <typename T>
std::vector<std::vector<T>> reduceOnEveryIsa(ReduceOpKind op, const std::vector<std::vector<T>>& in,
                                             ReduceScalar scalar = {}, uint32_t preMask = 0,
                                             bool postOp = false) {
  test::IsaGuard restore;
  std::vector<std::vector<T>> results;
  for (CpuIsa isa : test::supportedIsas()) {
    setCpuIsaForTesting(isa);
    std::vector<T> out(in[0].size());
    ReduceCopyArgs args;
    args.nsrc = static_cast<int>(in.size());
    args.ndst = 1;
    args.count = out.size();
    for (size_t s = 0; s < in.size(); ++s) args.src[s] = in[s].data();
    args.dst[0] = out.data();
    args.scalar = scalar;
    args.preOpOnSource = preMask;
    args.postOp = postOp;
    reduceCopy(DataTypeOf<T>::kType, op, args);
    results.push_back(out);
  }
  return results;
}

uint32_t bitsOf(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
float floatOf(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

TEST(ReduceCopySemantics, SignedSumAndProductWrap) {
  constexpr int32_t kMax32 = std::numeric_limits<int32_t>::max();
  constexpr int64_t kMin64 = std::numeric_limits<int64_t>::min();
  for (const auto& r : reduceOnEveryIsa<int32_t>(ReduceOpKind::kSum, {{kMax32, -5}, {1, -7}})) {
    EXPECT_EQ(r, (std::vector<int32_t>{std::numeric_limits<int32_t>::min(), -12}));
  }
  for (const auto& r : reduceOnEveryIsa<int64_t>(ReduceOpKind::kSum, {{kMin64}, {-1}})) {
    EXPECT_EQ(r[0], std::numeric_limits<int64_t>::max());
  }
  for (const auto& r : reduceOnEveryIsa<int8_t>(ReduceOpKind::kProd, {{16, -128}, {16, -1}})) {
    EXPECT_EQ(r, (std::vector<int8_t>{0, -128}));  // 256 wraps to 0; -(-128) wraps to -128
  }
  for (const auto& r : reduceOnEveryIsa<int32_t>(ReduceOpKind::kProd, {{kMax32}, {kMax32}})) {
    EXPECT_EQ(r[0], 1);  // (2^31 - 1)^2 = 1 mod 2^32
  }
  for (const auto& r : reduceOnEveryIsa<uint8_t>(ReduceOpKind::kSum, {{255}, {1}})) {
    EXPECT_EQ(r[0], 0);
  }
  // Pre-multiplication wraps too.
  for (const auto& r : reduceOnEveryIsa<int32_t>(ReduceOpKind::kPreMulSum, {{kMax32}, {0}},
                                                 ReduceScalar{1.0, 2}, 0x1)) {
    EXPECT_EQ(r[0], -2);
  }
}

TEST(ReduceCopySemantics, MinMaxPropagateTheFirstNaN) {
  const float nanA = floatOf(0x7fc00001);
  const float nanB = floatOf(0xffc00002);
  for (ReduceOpKind op : {ReduceOpKind::kMin, ReduceOpKind::kMax}) {
    const auto results =
        reduceOnEveryIsa<float>(op, {{1.0f, nanA, 2.0f, nanA}, {nanB, 3.0f, 5.0f, nanB}});
    for (const auto& r : results) {
      EXPECT_EQ(bitsOf(r[0]), 0xffc00002u);
      EXPECT_EQ(bitsOf(r[1]), 0x7fc00001u);
      EXPECT_EQ(r[2], op == ReduceOpKind::kMin ? 2.0f : 5.0f);
      EXPECT_EQ(bitsOf(r[3]), 0x7fc00001u);
    }
  }
  const double inf = std::numeric_limits<double>::infinity();
  for (const auto& r : reduceOnEveryIsa<double>(ReduceOpKind::kMax, {{-inf, 1}, {-1, inf}})) {
    EXPECT_EQ(r, (std::vector<double>{-1, inf}));
  }
}

TEST(ReduceCopySemantics, PreMulSumScalesOnlyListedSources) {
  // Ring step: source 0 is the local input (scaled here), source 1 arrived already scaled.
  for (const auto& r : reduceOnEveryIsa<float>(
           ReduceOpKind::kPreMulSum, {{8.0f, -4.0f}, {1.5f, 0.25f}}, ReduceScalar{0.25, 1}, 0x1)) {
    EXPECT_EQ(r, (std::vector<float>{3.5f, -0.75f}));
  }
}

TEST(ReduceCopySemantics, AverageOfFloatsDividesTheFinalSumOnce) {
  const ReduceOpKind op = reduceOpKindFor(loomAvg, loomFloat32);
  ASSERT_EQ(op, ReduceOpKind::kSumPostDiv);
  const std::vector<std::vector<float>> in = {{8.0f, -4.0f}, {1.5f, 0.25f}, {0.5f, 0.75f}};
  for (const auto& r : reduceOnEveryIsa<float>(op, in, averageScalar(4), 0, true)) {
    EXPECT_EQ(r, (std::vector<float>{2.5f, -0.75f}));
  }
  // Without postOp (an intermediate ring step) it is a plain sum; average has no pre-op, so
  // pre-op bits change nothing.
  for (const auto& r : reduceOnEveryIsa<float>(op, in, averageScalar(4), 0x7, false)) {
    EXPECT_EQ(r, (std::vector<float>{10.0f, -3.0f}));
  }
}

TEST(ReduceCopySemantics, AverageOfIntegersDividesOnceAndTruncates) {
  const ReduceOpKind op = reduceOpKindFor(loomAvg, loomInt32);
  ASSERT_EQ(op, ReduceOpKind::kSumPostDiv);
  const std::vector<std::vector<int32_t>> in = {{7, -7, 1}, {0, 0, 1}, {0, 0, 1}, {0, 0, 0}};
  for (const auto& r : reduceOnEveryIsa<int32_t>(op, in, averageScalar(4), 0, true)) {
    EXPECT_EQ(r, (std::vector<int32_t>{1, -1, 0}));  // C division truncates towards zero
  }
  // Without postOp (an intermediate ring step) it is a plain sum.
  for (const auto& r : reduceOnEveryIsa<int32_t>(op, in, averageScalar(4), 0, false)) {
    EXPECT_EQ(r, (std::vector<int32_t>{7, -7, 3}));
  }
  // A divisor wider than the type: the quotient is 0, not a wrapped divisor's quotient.
  for (const auto& r :
       reduceOnEveryIsa<int8_t>(op, {{100}, {27}}, ReduceScalar{1.0, 300}, 0, true)) {
    EXPECT_EQ(r[0], 0);
  }
}

TEST(ReduceCopySemantics, PublicOpsMapToKinds) {
  EXPECT_EQ(reduceOpKindFor(loomSum, loomInt8), ReduceOpKind::kSum);
  EXPECT_EQ(reduceOpKindFor(loomProd, loomFloat16), ReduceOpKind::kProd);
  EXPECT_EQ(reduceOpKindFor(loomMin, loomUint64), ReduceOpKind::kMin);
  EXPECT_EQ(reduceOpKindFor(loomMax, loomBfloat16), ReduceOpKind::kMax);
  EXPECT_EQ(reduceOpKindFor(loomAvg, loomFloat8e4m3), ReduceOpKind::kSumPostDiv);
  EXPECT_EQ(reduceOpKindFor(loomAvg, loomUint8), ReduceOpKind::kSumPostDiv);
  EXPECT_THROW(reduceOpKindFor(loomNumOps, loomFloat32), InvalidArgument);
  EXPECT_THROW(averageScalar(0), InvalidArgument);
}

TEST(ReduceCopySemantics, CopiesToEveryDestination) {
  test::IsaGuard restore;
  std::vector<uint64_t> src(1001);
  for (size_t i = 0; i < src.size(); ++i) src[i] = i * 0x9e3779b97f4a7c15ull;
  for (CpuIsa isa : test::supportedIsas()) {
    setCpuIsaForTesting(isa);
    std::vector<std::vector<uint64_t>> dst(kMaxDests, std::vector<uint64_t>(src.size()));
    ReduceCopyArgs args;
    args.nsrc = 1;
    args.ndst = kMaxDests;
    args.count = src.size();
    args.src[0] = src.data();
    for (int d = 0; d < kMaxDests; ++d) args.dst[d] = dst[d].data();
    reduceCopy(loomUint64, ReduceOpKind::kSum, args);
    for (const auto& out : dst) EXPECT_EQ(out, src) << cpuIsaName(isa);
  }
}

// Returns the InvalidArgument message of reduceCopy(type, op, args), or "" if none.
std::string errorOf(loomDataType_t type, ReduceOpKind op, const ReduceCopyArgs& args) {
  try {
    reduceCopy(type, op, args);
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "";
}

TEST(ReduceCopySemantics, RejectsBadArgumentsNamingThem) {
  std::vector<float> a(16), b(16);
  ReduceCopyArgs ok;
  ok.nsrc = 1;
  ok.ndst = 1;
  ok.count = 8;
  ok.src[0] = a.data();
  ok.dst[0] = b.data();
  EXPECT_EQ(errorOf(loomFloat32, ReduceOpKind::kSum, ok), "");

  EXPECT_NE(
      errorOf(static_cast<loomDataType_t>(12), ReduceOpKind::kSum, ok).find("invalid data type 12"),
      std::string::npos);
  EXPECT_NE(
      errorOf(static_cast<loomDataType_t>(-1), ReduceOpKind::kSum, ok).find("invalid data type -1"),
      std::string::npos);
  EXPECT_NE(errorOf(loomFloat32, static_cast<ReduceOpKind>(6), ok).find("invalid op kind 6"),
            std::string::npos);

  ReduceCopyArgs bad = ok;
  bad.nsrc = 0;
  EXPECT_NE(errorOf(loomFloat32, ReduceOpKind::kSum, bad).find("nsrc = 0"), std::string::npos);
  bad.nsrc = kMaxSources + 1;
  EXPECT_NE(errorOf(loomFloat32, ReduceOpKind::kSum, bad)
                .find("nsrc = " + std::to_string(kMaxSources + 1)),
            std::string::npos);
  bad = ok;
  bad.ndst = kMaxDests + 1;
  EXPECT_NE(
      errorOf(loomFloat32, ReduceOpKind::kSum, bad).find("ndst = " + std::to_string(kMaxDests + 1)),
      std::string::npos);
  bad = ok;
  bad.nsrc = 2;  // src[1] left null
  EXPECT_NE(errorOf(loomFloat32, ReduceOpKind::kSum, bad).find("src[1] is null"),
            std::string::npos);
  bad.count = 0;  // nothing to read: null is fine
  EXPECT_EQ(errorOf(loomFloat32, ReduceOpKind::kSum, bad), "");
  bad = ok;
  bad.dst[0] = a.data() + 1;  // overlaps src[0] by 7 elements
  EXPECT_NE(errorOf(loomFloat32, ReduceOpKind::kSum, bad).find("dst[0] partially overlaps src[0]"),
            std::string::npos);
  bad = ok;
  bad.ndst = 2;
  bad.dst[1] = b.data() + 4;
  EXPECT_NE(errorOf(loomFloat32, ReduceOpKind::kSum, bad).find("dst[1] partially overlaps dst[0]"),
            std::string::npos);
  bad = ok;
  bad.dst[0] = a.data();  // exactly in place: allowed
  EXPECT_EQ(errorOf(loomFloat32, ReduceOpKind::kSum, bad), "");
  bad = ok;
  bad.postOp = true;
  bad.scalar.i = 0;
  EXPECT_NE(errorOf(loomInt32, ReduceOpKind::kSumPostDiv, bad).find("divisor 0"),
            std::string::npos);
  bad.count = SIZE_MAX / 2;
  EXPECT_NE(errorOf(loomFloat32, ReduceOpKind::kSum, bad).find("overflows"), std::string::npos);
}

}  // namespace
}  // namespace loom
