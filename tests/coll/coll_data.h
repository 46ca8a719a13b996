// Typed test data for the collective tests: deterministic inputs that are small integers, and
// expected results computed exactly, as bit patterns of the element type.
//
// Why the results cannot depend on the order of reduction: every input is an integer, and its
// range is chosen per type and op so that every partial sum or product is exactly
// representable (fp8 e5m2 sums of 0/±1 over 8 ranks, e4m3 of ±2, bf16 of ±31, fp16 of ±255;
// integer sums stay in range). Products use {1, 2} (and -1 for signed types): at most three 2s
// reach any element. Avg is the exact sum divided once by nranks: C truncation for integers,
// (float)sum / (float)nranks rounded to the element type (nearest even) for floats, double for
// float64. Min and max use any in-range value, including the full width of integer types.
//
// Header only and free of GoogleTest, so the rank-process binary can use it too.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "loom/loom.h"

namespace loom::colltest {

// Our own op names: the two PreMulSum flavours differ in where the scalar lives.
enum class Op { kSum, kProd, kMax, kMin, kAvg, kPreMulImm, kPreMulDev };

inline const char* opName(Op op) {
  static const char* names[] = {"sum", "prod", "max", "min", "avg", "premul_imm", "premul_dev"};
  return names[static_cast<int>(op)];
}

inline const std::vector<Op>& allOps() {
  static const std::vector<Op> ops{Op::kSum, Op::kProd,      Op::kMax,      Op::kMin,
                                   Op::kAvg, Op::kPreMulImm, Op::kPreMulDev};
  return ops;
}

inline const std::vector<loomDataType_t>& allTypes() {
  static const std::vector<loomDataType_t> types{
      loomInt8,    loomUint8,   loomInt32,   loomUint32,   loomInt64,      loomUint64,
      loomFloat16, loomFloat32, loomFloat64, loomBfloat16, loomFloat8e4m3, loomFloat8e5m2};
  return types;
}

struct TypeInfo {
  const char* name;
  size_t size;
  bool isFloat;
  bool isSigned;
  int64_t sumRange;  // |input| bound for sum, avg and PreMulSum
  int64_t floatMax;  // |input| bound for min/max and copies of float types
};

inline const TypeInfo& typeInfo(loomDataType_t t) {
  static const TypeInfo table[] = {
      {"int8", 1, false, true, 15, 0},
      {"uint8", 1, false, false, 31, 0},
      {"int32", 4, false, true, int64_t{1} << 27, 0},
      {"uint32", 4, false, false, int64_t{1} << 28, 0},
      {"int64", 8, false, true, int64_t{1} << 59, 0},
      {"uint64", 8, false, false, int64_t{1} << 60, 0},
      {"float16", 2, true, true, 255, 2048},
      {"float32", 4, true, true, int64_t{1} << 20, int64_t{1} << 24},
      {"float64", 8, true, true, int64_t{1} << 49, int64_t{1} << 53},
      {"bfloat16", 2, true, true, 31, 256},
      {"float8e4m3", 1, true, true, 2, 16},
      {"float8e5m2", 1, true, true, 1, 8},
  };
  return table[static_cast<int>(t)];
}

// Rounds v to nearest even in a binary float format with eBits exponent and mBits mantissa
// bits (IEEE-style bias, subnormals). Values must be finite and in range.
inline uint64_t encodeMini(double v, int eBits, int mBits) {
  uint64_t sign = std::signbit(v) ? uint64_t{1} << (eBits + mBits) : 0;
  double a = std::fabs(v);
  if (a == 0) return sign;
  const int bias = (1 << (eBits - 1)) - 1;
  int k = 0;
  std::frexp(a, &k);  // a = f * 2^k, f in [0.5, 1)
  int e = std::max(k - 1, 1 - bias);
  double n = std::ldexp(a, mBits - e);  // significand in units of the last place, exact
  double fl = std::floor(n);
  double diff = n - fl;
  if (diff > 0.5 || (diff == 0.5 && std::fmod(fl, 2.0) != 0)) fl += 1;
  auto r = static_cast<uint64_t>(fl);
  if (r == (uint64_t{1} << (mBits + 1))) {
    r >>= 1;
    ++e;
  }
  if (r < (uint64_t{1} << mBits)) return sign | r;  // subnormal
  return sign | (static_cast<uint64_t>(e + bias) << mBits) | (r - (uint64_t{1} << mBits));
}

// The bit pattern of the real number v in type t (v exact or rounded to nearest even).
inline uint64_t encodeReal(loomDataType_t t, double v) {
  switch (t) {
    case loomFloat16:
      return encodeMini(v, 5, 10);
    case loomBfloat16:
      return encodeMini(v, 8, 7);
    case loomFloat8e4m3:
      return encodeMini(v, 4, 3);
    case loomFloat8e5m2:
      return encodeMini(v, 5, 2);
    case loomFloat32: {
      auto f = static_cast<float>(v);
      uint32_t b;
      std::memcpy(&b, &f, 4);
      return b;
    }
    default: {
      uint64_t b;
      std::memcpy(&b, &v, 8);
      return b;
    }
  }
}

// The bit pattern of integer v in type t: two's complement truncation for integer types.
inline uint64_t encodeValue(loomDataType_t t, int64_t v) {
  const TypeInfo& info = typeInfo(t);
  if (!info.isFloat) {
    uint64_t u = static_cast<uint64_t>(v);
    return info.size == 8 ? u : u & ((uint64_t{1} << (8 * info.size)) - 1);
  }
  return encodeReal(t, static_cast<double>(v));
}

inline void storeBits(void* p, size_t size, uint64_t bits) { std::memcpy(p, &bits, size); }
inline uint64_t loadBits(const void* p, size_t size) {
  uint64_t bits = 0;
  std::memcpy(&bits, p, size);
  return bits;
}

inline uint64_t mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Input of `rank` at element `idx` for reductions with `op` (copies use Op::kMax's values).
// For integer min/max the value is the raw word, reinterpreted by the type's width.
inline int64_t inputValue(loomDataType_t t, Op op, int rank, uint64_t idx, uint32_t salt) {
  const TypeInfo& info = typeInfo(t);
  uint64_t h = mix(idx * 0x100000001B3ull + (static_cast<uint64_t>(rank) << 48) +
                   (static_cast<uint64_t>(salt) << 32));
  switch (op) {
    case Op::kProd: {
      int64_t v = (idx + rank) % 3 == 0 ? 2 : 1;
      return info.isSigned && h % 5 == 0 ? -v : v;
    }
    case Op::kMax:
    case Op::kMin: {
      if (info.isFloat) {
        int64_t m = info.floatMax;
        return static_cast<int64_t>(h % static_cast<uint64_t>(2 * m + 1)) - m;
      }
      switch (info.size) {
        case 1:
          return info.isSigned ? int64_t{static_cast<int8_t>(h)} : int64_t{static_cast<uint8_t>(h)};
        case 4:
          return info.isSigned ? int64_t{static_cast<int32_t>(h)}
                               : int64_t{static_cast<uint32_t>(h)};
        default:
          return static_cast<int64_t>(h);  // uint64: the raw word (compared unsigned)
      }
    }
    default: {
      int64_t range = info.sumRange;
      if (!info.isFloat && (op == Op::kPreMulImm || op == Op::kPreMulDev)) range /= 2;
      if (!info.isSigned) return static_cast<int64_t>(h % static_cast<uint64_t>(range + 1));
      return static_cast<int64_t>(h % static_cast<uint64_t>(2 * range + 1)) - range;
    }
  }
}

// The bit pattern that reducing value(0) .. value(nranks - 1) with `op` must give.
template <typename ValueOf>
uint64_t expectedReduce(loomDataType_t t, Op op, int nranks, ValueOf value) {
  const TypeInfo& info = typeInfo(t);
  int64_t acc = value(0);
  if (op == Op::kPreMulImm || op == Op::kPreMulDev) acc *= 2;
  for (int r = 1; r < nranks; ++r) {
    int64_t v = value(r);
    switch (op) {
      case Op::kProd:  // wrapping, as unsigned arithmetic: exact modulo 2^width
        acc = static_cast<int64_t>(static_cast<uint64_t>(acc) * static_cast<uint64_t>(v));
        break;
      case Op::kMax:
      case Op::kMin: {
        bool less = (!info.isFloat && !info.isSigned)
                        ? static_cast<uint64_t>(v) < static_cast<uint64_t>(acc)
                        : v < acc;
        bool greater = v != acc && !less;
        if ((op == Op::kMin && less) || (op == Op::kMax && greater)) acc = v;
        break;
      }
      case Op::kPreMulImm:
      case Op::kPreMulDev:
        v *= 2;
        [[fallthrough]];
      default:
        acc = static_cast<int64_t>(static_cast<uint64_t>(acc) + static_cast<uint64_t>(v));
    }
  }
  if (op != Op::kAvg) return encodeValue(t, acc);
  if (!info.isFloat) {
    if (info.isSigned) return encodeValue(t, acc / nranks);
    return encodeValue(t, static_cast<int64_t>(static_cast<uint64_t>(acc) / nranks));
  }
  if (t == loomFloat64) return encodeReal(t, static_cast<double>(acc) / nranks);
  float q = static_cast<float>(acc) / static_cast<float>(nranks);
  return encodeReal(t, static_cast<double>(q));
}

// A buffer of `bytes` at byte offset `offset` from a 16-byte boundary, with poisoned guard bytes
// on both sides (and poisoned contents until filled), so overruns and stray writes show.
class Buffer {
 public:
  static constexpr uint8_t kPoison = 0xA5;
  static constexpr size_t kGuard = 64;

  Buffer() = default;
  Buffer(size_t bytes, size_t offset)
      : bytes_(bytes), offset_(offset), store_(2 * kGuard + offset + bytes, kPoison) {}
  uint8_t* data() { return store_.data() + kGuard + offset_; }
  const uint8_t* data() const { return store_.data() + kGuard + offset_; }
  size_t bytes() const { return bytes_; }
  // "" or a description of the first guard byte that changed.
  std::string checkGuards() const {
    for (size_t i = 0; i < kGuard + offset_; ++i)
      if (store_[i] != kPoison)
        return "byte " + std::to_string(i) + " before the buffer was overwritten";
    for (size_t i = kGuard + offset_ + bytes_; i < store_.size(); ++i)
      if (store_[i] != kPoison)
        return "byte " + std::to_string(i - kGuard - offset_ - bytes_) +
               " after the buffer was overwritten";
    return "";
  }

 private:
  size_t bytes_ = 0;
  size_t offset_ = 0;
  std::vector<uint8_t> store_;
};

inline std::string hex(uint64_t v) {
  char text[24];
  std::snprintf(text, sizeof(text), "0x%llx", static_cast<unsigned long long>(v));
  return text;
}

// Compares `count` elements at p with want(i); "" or the first mismatch and how many there are.
template <typename Want>
std::string compareElements(loomDataType_t t, const uint8_t* p, size_t count, Want want,
                            const std::string& where) {
  const size_t size = typeInfo(t).size;
  size_t bad = 0;
  std::string first;
  for (size_t i = 0; i < count; ++i) {
    uint64_t got = loadBits(p + i * size, size), expect = want(i);
    if (got == expect) continue;
    if (bad++ == 0)
      first =
          where + " element " + std::to_string(i) + ": got " + hex(got) + ", want " + hex(expect);
  }
  if (bad == 0) return "";
  return first + " (" + std::to_string(bad) + " of " + std::to_string(count) + " wrong)";
}

}  // namespace loom::colltest
