#include "perf/harness/data_pattern.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace loomperf {
namespace {

// A non-negative integer as a small IEEE-style float with `mbits` mantissa bits and exponent
// bias `bias`. Only exact values reach here, so no rounding is needed; zero is all zero bits.
uint32_t encodeMiniFloat(double v, int mbits, int bias) {
  if (v == 0) return 0;
  int ex = 0;
  double m = std::frexp(v, &ex);  // v = m * 2^ex, m in [0.5, 1)
  int e = ex - 1;
  double frac = m * 2 - 1;  // in [0, 1)
  auto mant = static_cast<uint32_t>(std::llround(frac * (1u << mbits)));
  return (static_cast<uint32_t>(e + bias) << mbits) | mant;
}

// Inputs never exceed this; large enough to vary, small enough to keep fills cheap.
constexpr uint64_t kMaxModulus = 251;

}  // namespace

void encodeValue(loomDataType_t type, double v, void* dst) {
  switch (type) {
    case loomInt8: {
      auto x = static_cast<int8_t>(v);
      std::memcpy(dst, &x, 1);
      break;
    }
    case loomUint8: {
      auto x = static_cast<uint8_t>(v);
      std::memcpy(dst, &x, 1);
      break;
    }
    case loomInt32: {
      auto x = static_cast<int32_t>(v);
      std::memcpy(dst, &x, 4);
      break;
    }
    case loomUint32: {
      auto x = static_cast<uint32_t>(v);
      std::memcpy(dst, &x, 4);
      break;
    }
    case loomInt64: {
      auto x = static_cast<int64_t>(v);
      std::memcpy(dst, &x, 8);
      break;
    }
    case loomUint64: {
      auto x = static_cast<uint64_t>(v);
      std::memcpy(dst, &x, 8);
      break;
    }
    case loomFloat16: {
      auto x = static_cast<uint16_t>(encodeMiniFloat(v, 10, 15));
      std::memcpy(dst, &x, 2);
      break;
    }
    case loomFloat32: {
      auto x = static_cast<float>(v);
      std::memcpy(dst, &x, 4);
      break;
    }
    case loomFloat64:
      std::memcpy(dst, &v, 8);
      break;
    case loomBfloat16: {
      auto f = static_cast<float>(v);
      uint32_t bits;
      std::memcpy(&bits, &f, 4);
      auto x = static_cast<uint16_t>(bits >> 16);  // exact values have zero low bits
      std::memcpy(dst, &x, 2);
      break;
    }
    case loomFloat8e4m3: {
      auto x = static_cast<uint8_t>(encodeMiniFloat(v, 3, 7));
      std::memcpy(dst, &x, 1);
      break;
    }
    case loomFloat8e5m2: {
      auto x = static_cast<uint8_t>(encodeMiniFloat(v, 2, 15));
      std::memcpy(dst, &x, 1);
      break;
    }
    default:
      break;
  }
}

double mulSumScalar(int rank) { return 1 + (rank % 2); }

Pattern::Pattern(loomDataType_t type, Op op, int nranks, uint64_t seed)
    : type_(type), op_(op), nranks_(std::max(nranks, 1)), seed_(seed) {
  const double bound = typeInfo(type).maxExact;
  const double n = nranks_;
  double m = bound + 1;  // max and min never grow a value
  switch (op) {
    case Op::kSum:
      m = std::floor(bound / n) + 1;  // n * (m - 1) <= bound
      break;
    case Op::kMulSum:
      m = std::floor(bound / (2 * n)) + 1;  // scalars are 1 or 2
      break;
    case Op::kAvg:
      // The last rank tops the sum up to a multiple of n (adding at most n - 1), so the
      // division is exact: (n - 1) * m <= bound.
      m = nranks_ > 1 ? std::floor(bound / (n - 1)) : bound + 1;
      break;
    default:
      break;
  }
  modulus_ = static_cast<uint64_t>(std::clamp(m, 1.0, static_cast<double>(kMaxModulus)));
}

uint64_t Pattern::base(int rank, size_t index) const {
  return (index * 13 + static_cast<uint64_t>(rank) * 7 + seed_) % modulus_;
}

double Pattern::input(int rank, size_t index) const {
  switch (op_) {
    case Op::kProd:
      // One rank contributes 2, every other 1: the product is 2 in any order and any type.
      return (index + seed_) % nranks_ == static_cast<uint64_t>(rank) ? 2 : 1;
    case Op::kAvg:
      if (rank == nranks_ - 1 && nranks_ > 1) {
        uint64_t s = 0;
        for (int r = 0; r < nranks_ - 1; ++r) s += base(r, index);
        return static_cast<double>((nranks_ - s % nranks_) % nranks_);
      }
      return static_cast<double>(base(rank, index));
    default:
      return static_cast<double>(base(rank, index));
  }
}

double Pattern::reduced(size_t index) const {
  if (op_ == Op::kProd) return 2;
  double acc = input(0, index) * (op_ == Op::kMulSum ? mulSumScalar(0) : 1);
  for (int r = 1; r < nranks_; ++r) {
    double v = input(r, index);
    switch (op_) {
      case Op::kMax:
        acc = std::max(acc, v);
        break;
      case Op::kMin:
        acc = std::min(acc, v);
        break;
      case Op::kMulSum:
        acc += v * mulSumScalar(r);
        break;
      default:
        acc += v;
        break;
    }
  }
  return op_ == Op::kAvg ? acc / nranks_ : acc;
}

void Pattern::fillInput(int rank, size_t first, size_t count, void* dst) const {
  const size_t es = typeInfo(type_).size;
  auto* out = static_cast<char*>(dst);
  for (size_t i = 0; i < count; ++i) encodeValue(type_, input(rank, first + i), out + i * es);
}

void Pattern::fillReduced(size_t first, size_t count, void* dst) const {
  const size_t es = typeInfo(type_).size;
  auto* out = static_cast<char*>(dst);
  for (size_t i = 0; i < count; ++i) encodeValue(type_, reduced(first + i), out + i * es);
}

void poison(void* buf, size_t bytes) { std::memset(buf, kPoisonByte, bytes); }

int64_t countWrong(const void* got, const void* want, size_t count, size_t elemSize) {
  const auto* g = static_cast<const unsigned char*>(got);
  const auto* w = static_cast<const unsigned char*>(want);
  // Whole-buffer memcmp first: the common, correct case costs one pass.
  if (std::memcmp(g, w, count * elemSize) == 0) return 0;
  int64_t wrong = 0;
  for (size_t i = 0; i < count; ++i)
    wrong += std::memcmp(g + i * elemSize, w + i * elemSize, elemSize) != 0;
  return wrong;
}

}  // namespace loomperf
