// Low-precision floating-point element types, usable on host and device: IEEE binary16
// (Float16), bfloat16 (BFloat16), and the two OCP FP8 formats (Float8E4M3, Float8E5M2).
// Each holds its raw bits; arithmetic happens in float (see reduce_ops.h).
//
// Conversions are pure integer code so that the scalar CPU path, the vectorised CPU paths and
// CUDA device code produce the same bits (CPU files may use F16C for Float16, which the tests
// prove bit-identical). Conversion rules:
//   - to float: exact. A signalling NaN comes back quiet (as F16C and IEEE conversions do).
//   - from float: round to nearest, ties to even; -0 stays -0; subnormal results are produced
//     (no flush to zero); float subnormals are far below every target's range and become +-0
//     (except for bfloat16, which shares float's exponent range and rounds them normally).
//   - NaN stays NaN with its sign: quiet bit set, payload truncated (Float16, BFloat16,
//     Float8E5M2); Float8E4M3 has one NaN per sign (0x7f / 0xff).
//   - overflow: Float16, BFloat16 and Float8E5M2 round to +-infinity (IEEE). Float8E4M3 has
//     no infinity and saturates to +-448, including for +-inf inputs: the "satfinite"
//     convention of CUDA's __nv_cvt_float_to_fp8(..., __NV_SATFINITE, __NV_E4M3) and of FP8
//     training recipes, so that one large reduction result cannot turn into a NaN.
#pragma once

#include <stdint.h>
#include <string.h>

#include "src/kernels/host_device.h"

namespace loom {
inline namespace LOOM_ISA_NAMESPACE {

LOOM_HOST_DEVICE LOOM_INLINE uint32_t floatToBits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
#endif
}

LOOM_HOST_DEVICE LOOM_INLINE float bitsToFloat(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
#endif
}

// A binary format with kExp exponent bits and kMan mantissa bits, IEEE bias, at most 16 bits.
// kHasInf: the all-ones exponent encodes inf/NaN (IEEE); otherwise only the all-ones pattern
// is NaN and overflow saturates (OCP e4m3fn).
template <int kExp, int kMan, bool kHasInf>
struct SmallFloatFormat {
  static constexpr int kBias = (1 << (kExp - 1)) - 1;
  static constexpr uint32_t kSignShift = kExp + kMan;
  static constexpr uint32_t kExpMask = ((1u << kExp) - 1) << kMan;
  static constexpr uint32_t kManMask = (1u << kMan) - 1;
  static constexpr uint32_t kQuietBit = 1u << (kMan - 1);
  // Largest finite magnitude: below the inf/NaN exponent, or just below the NaN pattern.
  static constexpr uint32_t kMaxFinite = kHasInf ? kExpMask - 1 : kExpMask | (kManMask - 1);
  static constexpr uint32_t kNaN = kHasInf ? kExpMask | kQuietBit : kExpMask | kManMask;

  LOOM_HOST_DEVICE static uint32_t fromFloat(float f) {
    const uint32_t x = floatToBits(f);
    const uint32_t sign = (x >> 31) << kSignShift;
    const uint32_t ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) {  // NaN: keep the top payload bits, force quiet
      return sign | (kHasInf ? kNaN | ((ax >> (23 - kMan)) & kManMask) : kNaN);
    }
    // Smallest float that is normal in the target: exponent field 1.
    constexpr uint32_t kMinNormal = uint32_t(127 - kBias + 1) << 23;
    uint32_t r;
    if (ax >= kMinNormal) {
      // Rebias the exponent, then round the mantissa to kMan bits (ties to even). A carry out
      // of the mantissa correctly bumps the exponent, up to inf / past the max when too big.
      const uint32_t v = ax - (uint32_t(127 - kBias) << 23);
      constexpr uint32_t kShift = 23 - kMan;
      r = (v + ((1u << (kShift - 1)) - 1) + ((v >> kShift) & 1)) >> kShift;
      if (ax == 0x7f800000u) r = kHasInf ? kExpMask : kMaxFinite;
    } else if (ax < 0x00800000u) {
      r = 0;  // float zero or subnormal: far below the target's smallest subnormal
    } else {
      // Subnormal target: shift the full significand (with its implicit 1) so that its units
      // are the target's smallest subnormal, rounding ties to even. Rounding up to the
      // smallest normal needs no special case: its encoding is the next integer.
      const uint32_t m = (ax & 0x7fffffu) | 0x800000u;
      const uint32_t e = ax >> 23;  // biased float exponent, 1..(127 - kBias)
      uint32_t shift = (23 - kMan) + (127 - kBias + 1) - e;
      if (shift > 31) shift = 31;
      const uint32_t half = 1u << (shift - 1);
      const uint32_t rem = m & ((1u << shift) - 1);
      r = m >> shift;
      if (rem > half || (rem == half && (r & 1))) ++r;
    }
    if (kHasInf) {
      if (r > kExpMask) r = kExpMask;  // far beyond the range: the exponent overflowed
    } else if (r > kMaxFinite) {
      r = kMaxFinite;  // saturate (satfinite)
    }
    return sign | r;
  }

  LOOM_HOST_DEVICE static float toFloat(uint32_t h) {
    const uint32_t sign = (h >> kSignShift) << 31;
    const uint32_t e = (h & kExpMask) >> kMan;
    uint32_t m = h & kManMask;
    if (e == 0) {
      if (m == 0) return bitsToFloat(sign);
      // Subnormal: normalise the significand; every target subnormal is a normal float.
      int exp = 1 - kBias + 127;
      while (!(m & (1u << kMan))) {
        m <<= 1;
        --exp;
      }
      return bitsToFloat(sign | (uint32_t(exp) << 23) | ((m & kManMask) << (23 - kMan)));
    }
    if (kHasInf && e == (kExpMask >> kMan)) {
      if (m == 0) return bitsToFloat(sign | 0x7f800000u);
      return bitsToFloat(sign | 0x7fc00000u | (m << (23 - kMan)));
    }
    if (!kHasInf && (h & (kExpMask | kManMask)) == kNaN) return bitsToFloat(sign | 0x7fc00000u);
    return bitsToFloat(sign | ((e - kBias + 127) << 23) | (m << (23 - kMan)));
  }
};

using HalfFormat = SmallFloatFormat<5, 10, true>;
using E4M3Format = SmallFloatFormat<4, 3, false>;
using E5M2Format = SmallFloatFormat<5, 2, true>;

// bfloat16 is the top half of a float: to-float is a shift; from-float rounds the low 16 bits
// away (ties to even). Branch-free so that compilers vectorise it. Subnormals round like any
// other value (no flush), unlike AVX512-BF16's vcvtneps2bf16, which is therefore not used.
LOOM_HOST_DEVICE LOOM_INLINE uint16_t bfloat16FromFloat(float f) {
  const uint32_t x = floatToBits(f);
  const uint32_t rounded = (x + 0x7fffu + ((x >> 16) & 1)) >> 16;
  const uint32_t quietNan = (x >> 16) | 0x40u;
  return uint16_t((x & 0x7fffffffu) > 0x7f800000u ? quietNan : rounded);
}

LOOM_HOST_DEVICE LOOM_INLINE float bfloat16ToFloat(uint16_t b) {
  const uint32_t x = uint32_t(b) << 16;
  const bool isNan = (x & 0x7fffffffu) > 0x7f800000u;
  return bitsToFloat(isNan ? x | 0x00400000u : x);
}

// The element types. Trivial, 1 or 2 bytes, no implicit conversions: code says which
// rounding it wants by calling fromFloat.
#define LOOM_DEFINE_SMALL_FLOAT(Name, Storage, ToFloat, FromFloat)   \
  struct Name {                                                      \
    Storage bits;                                                    \
    LOOM_HOST_DEVICE static Name fromBits(Storage b) {               \
      Name r;                                                        \
      r.bits = b;                                                    \
      return r;                                                      \
    }                                                                \
    LOOM_HOST_DEVICE static Name fromFloat(float f) {                \
      return fromBits(static_cast<Storage>(FromFloat(f)));           \
    }                                                                \
    LOOM_HOST_DEVICE float toFloat() const { return ToFloat(bits); } \
  };                                                                 \
  static_assert(sizeof(Name) == sizeof(Storage), #Name " must be its raw bits")

LOOM_DEFINE_SMALL_FLOAT(Float16, uint16_t, HalfFormat::toFloat, HalfFormat::fromFloat);
LOOM_DEFINE_SMALL_FLOAT(BFloat16, uint16_t, bfloat16ToFloat, bfloat16FromFloat);
LOOM_DEFINE_SMALL_FLOAT(Float8E4M3, uint8_t, E4M3Format::toFloat, E4M3Format::fromFloat);
LOOM_DEFINE_SMALL_FLOAT(Float8E5M2, uint8_t, E5M2Format::toFloat, E5M2Format::fromFloat);
#undef LOOM_DEFINE_SMALL_FLOAT

}  // namespace LOOM_ISA_NAMESPACE
}  // namespace loom
