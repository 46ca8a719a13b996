// Conversions of the small float types: hand-checked vectors (ties to even, overflow,
// subnormals, NaN, -0), every bit pattern to float, and float to each type against an
// independent reference (F16C hardware for float16; brute-force nearest search for bfloat16
// and the FP8 formats) on random floats and on every midpoint between neighbours.
#include "src/kernels/numeric_types.h"

#include <gtest/gtest.h>
#include <immintrin.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

namespace loom {
namespace {

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

// Floats worth testing around every value of a small type: the value, each midpoint to the
// next one and the floats just either side of it (where ties and overflow are decided).
template <typename T, typename Bits>
std::vector<float> edgeFloats(int nbits) {
  std::vector<float> out;
  for (uint32_t b = 0; b < (1u << nbits); ++b) {
    const float v = T::fromBits(static_cast<Bits>(b)).toFloat();
    const float next = T::fromBits(static_cast<Bits>(b + 1)).toFloat();
    if (!std::isfinite(v)) continue;
    out.push_back(v);
    if (std::isfinite(next) && std::signbit(next) == std::signbit(v)) {
      const float mid = static_cast<float>((double(v) + double(next)) / 2);
      out.insert(out.end(), {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 2 * mid)});
    }
  }
  std::mt19937 rng(42);
  for (int i = 0; i < (1 << 20); ++i) out.push_back(floatOf(rng()));
  for (uint32_t special : {0x7f800000u, 0xff800000u, 0x7f800001u, 0xffc12345u, 0x00000001u,
                           0x807fffffu, 0x7f7fffffu, 0xff7fffffu}) {
    out.push_back(floatOf(special));
  }
  return out;
}

// Reference float -> FP8: the positive code nearest to |f| (ties to the even code), with the
// sign put back. An IEEE format's infinity counts as one step past its largest finite value;
// e4m3 has no infinity, so values past 448 land on 448 (saturation).
template <typename T>
uint8_t nearestReference(float f, bool saturate) {
  const uint8_t sign = std::signbit(f) ? 0x80 : 0;
  const uint8_t maxCode = saturate ? 0x7e : 0x7b;
  if (std::isinf(f)) return sign | (saturate ? maxCode : 0x7c);
  const double x = std::fabs(double(f));
  uint8_t best = 0;
  double bestErr = INFINITY;
  for (uint32_t b = 0; b <= maxCode + (saturate ? 0u : 1u); ++b) {
    double v = T::fromBits(static_cast<uint8_t>(b)).toFloat();
    if (std::isinf(v))
      v = 2 * double(T::fromBits(maxCode).toFloat()) - double(T::fromBits(maxCode - 1).toFloat());
    const double err = std::fabs(v - x);
    if (err < bestErr || (err == bestErr && (b & 1) == 0)) {
      best = static_cast<uint8_t>(b);
      bestErr = err;
    }
  }
  return sign | best;
}

TEST(Float16, VectorsRoundToNearestEven) {
  auto h = [](float f) { return Float16::fromFloat(f).bits; };
  EXPECT_EQ(h(1.0f), 0x3c00);
  EXPECT_EQ(h(-2.0f), 0xc000);
  EXPECT_EQ(h(65504.0f), 0x7bff);
  EXPECT_EQ(h(65519.99f), 0x7bff);
  EXPECT_EQ(h(65520.0f), 0x7c00);  // tie between max and "65536": even, i.e. infinity
  EXPECT_EQ(h(1e10f), 0x7c00);
  EXPECT_EQ(h(-INFINITY), 0xfc00);
  EXPECT_EQ(h(-0.0f), 0x8000);
  EXPECT_EQ(h(floatOf(0x7fc00000)), 0x7e00);
  EXPECT_EQ(h(floatOf(0x7f800001)), 0x7e00);    // signalling NaN comes out quiet
  EXPECT_EQ(h(floatOf(0xffd00000)), 0xfe80);    // sign and top payload bits kept
  EXPECT_EQ(h(std::ldexp(1.0f, -24)), 0x0001);  // smallest subnormal
  EXPECT_EQ(h(std::ldexp(1.0f, -25)), 0x0000);  // tie with zero: even
  EXPECT_EQ(h(std::nextafter(std::ldexp(1.0f, -25), 1.0f)), 0x0001);
  EXPECT_EQ(h(std::ldexp(3.0f, -25)), 0x0002);         // tie between 1 and 2 ulps: even
  EXPECT_EQ(h(std::ldexp(1023.0f, -24)), 0x03ff);      // largest subnormal
  EXPECT_EQ(h(std::ldexp(2047.0f, -25)), 0x0400);      // rounds up into the smallest normal
  EXPECT_EQ(h(1.0f + std::ldexp(1.0f, -11)), 0x3c00);  // tie: stays on even 1.0
  EXPECT_EQ(h(1.0f + std::ldexp(3.0f, -11)), 0x3c02);  // tie: up to even
  EXPECT_EQ(h(floatOf(0x00000001)), 0x0000);
  EXPECT_EQ(h(floatOf(0x80000001)), 0x8000);
  EXPECT_EQ(Float16::fromBits(0x0001).toFloat(), std::ldexp(1.0f, -24));
  EXPECT_EQ(Float16::fromBits(0x7bff).toFloat(), 65504.0f);
  EXPECT_EQ(bitsOf(Float16::fromBits(0x8000).toFloat()), 0x80000000u);
}

__attribute__((target("f16c"))) float hardwareHalfToFloat(uint16_t h) { return _cvtsh_ss(h); }
__attribute__((target("f16c"))) uint16_t hardwareFloatToHalf(float f) {
  return static_cast<uint16_t>(_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT));
}

TEST(Float16, EveryPatternMatchesF16cAndRoundTrips) {
  if (!__builtin_cpu_supports("f16c")) GTEST_SKIP() << "no F16C on this CPU";
  for (uint32_t b = 0; b < 65536; ++b) {
    const float f = Float16::fromBits(static_cast<uint16_t>(b)).toFloat();
    ASSERT_EQ(bitsOf(f), bitsOf(hardwareHalfToFloat(static_cast<uint16_t>(b)))) << std::hex << b;
    const bool isNan = (b & 0x7c00) == 0x7c00 && (b & 0x3ff);
    ASSERT_EQ(Float16::fromFloat(f).bits, isNan ? (b | 0x200) : b) << std::hex << b;
  }
}

TEST(Float16, FromFloatMatchesF16c) {
  if (!__builtin_cpu_supports("f16c")) GTEST_SKIP() << "no F16C on this CPU";
  for (float f : edgeFloats<Float16, uint16_t>(16)) {
    ASSERT_EQ(Float16::fromFloat(f).bits, hardwareFloatToHalf(f)) << std::hex << bitsOf(f);
  }
}

// Reference bfloat16 rounding: the nearer of the two candidates, ties to even.
uint16_t bfloat16Reference(float f) {
  const uint32_t x = bitsOf(f);
  if (std::isnan(f)) return static_cast<uint16_t>((x >> 16) | 0x40);
  const uint32_t lo = x & 0xffff0000u;
  const double down = std::fabs(double(floatOf(lo)));
  const double up = (lo & 0x7fffffffu) == 0x7f7f0000u ? std::ldexp(1.0, 128)
                                                      : std::fabs(double(floatOf(lo + 0x10000)));
  const double ax = std::fabs(double(f));
  const bool roundUp = ax - down > up - ax || (ax - down == up - ax && ((lo >> 16) & 1));
  return static_cast<uint16_t>((lo >> 16) + (roundUp ? 1 : 0));
}

TEST(BFloat16, VectorsAndReference) {
  auto b = [](uint32_t x) { return BFloat16::fromFloat(floatOf(x)).bits; };
  EXPECT_EQ(b(0x3f800000), 0x3f80);
  EXPECT_EQ(b(0x3f808000), 0x3f80);  // tie, even below
  EXPECT_EQ(b(0x3f818000), 0x3f82);  // tie, odd below: up
  EXPECT_EQ(b(0x3f808001), 0x3f81);
  EXPECT_EQ(b(0x7f7fffff), 0x7f80);  // overflows to infinity
  EXPECT_EQ(b(0x7f7f7fff), 0x7f7f);
  EXPECT_EQ(b(0xff800000), 0xff80);
  EXPECT_EQ(b(0x7f800001), 0x7fc0);  // quiet NaN
  EXPECT_EQ(b(0x80000000), 0x8000);
  EXPECT_EQ(b(0x00008000), 0x0000);  // subnormal tie: even (zero)
  EXPECT_EQ(b(0x00018000), 0x0002);
  EXPECT_EQ(b(0x807fffff), 0x8080);  // largest subnormal rounds up to the smallest normal
  for (uint32_t x = 0; x < 65536; ++x) {
    const float f = BFloat16::fromBits(static_cast<uint16_t>(x)).toFloat();
    const bool isNan = (x & 0x7f80) == 0x7f80 && (x & 0x7f);
    ASSERT_EQ(bitsOf(f), isNan ? (x << 16) | 0x00400000u : x << 16) << std::hex << x;
  }
  std::mt19937 rng(7);
  for (int i = 0; i < (1 << 22); ++i) {
    uint32_t x = rng();
    if (i % 4 == 0) x = (x & 0xffff0000u) | 0x8000u;  // a tie
    ASSERT_EQ(b(x), bfloat16Reference(floatOf(x))) << std::hex << x;
  }
}

TEST(Float8, EveryPatternToFloatIsExact) {
  for (uint32_t b = 0; b < 256; ++b) {
    const double sign = (b & 0x80) ? -1 : 1;
    {  // e4m3: bias 7, no infinity, S.1111.111 is NaN
      const int e = (b >> 3) & 0xf, m = b & 7;
      const float f = Float8E4M3::fromBits(static_cast<uint8_t>(b)).toFloat();
      if (e == 15 && m == 7) {
        EXPECT_TRUE(std::isnan(f)) << b;
      } else {
        EXPECT_EQ(f, sign * (e == 0 ? std::ldexp(m, -9) : std::ldexp(8 + m, e - 10))) << b;
      }
    }
    {  // e5m2: IEEE-like, bias 15
      const int e = (b >> 2) & 0x1f, m = b & 3;
      const float f = Float8E5M2::fromBits(static_cast<uint8_t>(b)).toFloat();
      if (e == 31) {
        EXPECT_TRUE(m ? std::isnan(f) : f == float(sign * INFINITY)) << b;
      } else {
        EXPECT_EQ(f, sign * (e == 0 ? std::ldexp(m, -16) : std::ldexp(4 + m, e - 17))) << b;
      }
    }
  }
  EXPECT_EQ(Float8E4M3::fromBits(0x7e).toFloat(), 448.0f);
  EXPECT_EQ(Float8E5M2::fromBits(0x7b).toFloat(), 57344.0f);
}

TEST(Float8E4M3, VectorsSaturate) {
  auto q = [](float f) { return Float8E4M3::fromFloat(f).bits; };
  EXPECT_EQ(q(1.0f), 0x38);
  EXPECT_EQ(q(448.0f), 0x7e);
  EXPECT_EQ(q(464.0f), 0x7e);  // would round to the NaN pattern: saturates
  EXPECT_EQ(q(1e9f), 0x7e);
  EXPECT_EQ(q(INFINITY), 0x7e);  // satfinite
  EXPECT_EQ(q(-INFINITY), 0xfe);
  EXPECT_EQ(q(NAN), 0x7f);
  EXPECT_EQ(q(-NAN), 0xff);
  EXPECT_EQ(q(-0.0f), 0x80);
  EXPECT_EQ(q(std::ldexp(1.0f, -9)), 0x01);
  EXPECT_EQ(q(std::ldexp(1.0f, -10)), 0x00);   // tie with zero: even
  EXPECT_EQ(q(std::ldexp(3.0f, -10)), 0x02);   // tie between 1 and 2 ulps: even
  EXPECT_EQ(q(1.0625f), 0x38);                 // tie: even (1.0)
  EXPECT_EQ(q(1.1875f), 0x3a);                 // tie: even (1.25)
  EXPECT_EQ(q(std::ldexp(15.0f, -10)), 0x08);  // rounds up into the smallest normal
}

TEST(Float8E5M2, VectorsOverflowToInfinity) {
  auto q = [](float f) { return Float8E5M2::fromFloat(f).bits; };
  EXPECT_EQ(q(1.0f), 0x3c);
  EXPECT_EQ(q(57344.0f), 0x7b);
  EXPECT_EQ(q(61439.0f), 0x7b);
  EXPECT_EQ(q(61440.0f), 0x7c);  // tie between max and the next step: even, infinity
  EXPECT_EQ(q(-INFINITY), 0xfc);
  EXPECT_EQ(q(NAN), 0x7e);
  EXPECT_EQ(q(-0.0f), 0x80);
  EXPECT_EQ(q(std::ldexp(1.0f, -16)), 0x01);
  EXPECT_EQ(q(std::ldexp(1.0f, -17)), 0x00);
  EXPECT_EQ(q(1.125f), 0x3c);  // tie: even
  EXPECT_EQ(q(1.375f), 0x3e);  // tie: even
}

template <typename T>
void checkAgainstNearest(bool saturate) {
  for (float f : edgeFloats<T, uint8_t>(8)) {
    const uint8_t got = T::fromFloat(f).bits;
    if (std::isnan(f)) {
      ASSERT_TRUE(std::isnan(T::fromBits(got).toFloat())) << std::hex << bitsOf(f);
      ASSERT_EQ(got >> 7, bitsOf(f) >> 31);
      continue;
    }
    ASSERT_EQ(got, nearestReference<T>(f, saturate)) << f << " " << std::hex << bitsOf(f);
  }
}

TEST(Float8E4M3, FromFloatIsNearestEven) { checkAgainstNearest<Float8E4M3>(true); }
TEST(Float8E5M2, FromFloatIsNearestEven) { checkAgainstNearest<Float8E5M2>(false); }

}  // namespace
}  // namespace loom
