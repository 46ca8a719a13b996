// Helpers of the kernel tests: run a template for a run-time type, random values with the
// float types' special ones, buffers with guard bytes at any byte offset, and iteration over
// the CPU ISA variants this machine runs.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <iterator>
#include <random>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "loom/loom.h"
#include "src/kernels/datatype_traits.h"
#include "src/kernels/reduce_copy_dispatch.h"

namespace loom::test {

// Calls fn.template operator()<T>() with the C++ type of `type`.
template <typename Fn>
void visitDataType(loomDataType_t type, Fn&& fn) {
  switch (type) {
#define LOOM_DATATYPE(e, Type, name) \
  case e:                            \
    fn.template operator()<Type>();  \
    return;
#include "src/kernels/datatype_table.def"
    default:
      FAIL() << "no such data type " << static_cast<int>(type);
  }
}

inline std::vector<loomDataType_t> allDataTypes() {
  std::vector<loomDataType_t> types;
  for (int t = 0; t < loomNumTypes; ++t) types.push_back(static_cast<loomDataType_t>(t));
  return types;
}

inline std::vector<ReduceOpKind> allOpKinds() {
  std::vector<ReduceOpKind> ops;
  for (int o = 0; o < kNumReduceOps; ++o) ops.push_back(static_cast<ReduceOpKind>(o));
  return ops;
}

inline std::vector<CpuIsa> supportedIsas() {
  std::vector<CpuIsa> isas;
  for (CpuIsa isa : kAllCpuIsas) {
    if (cpuSupports(isa)) isas.push_back(isa);
  }
  return isas;
}

// Restores the best ISA when a test that switched it ends.
class IsaGuard {
 public:
  IsaGuard() = default;
  IsaGuard(const IsaGuard&) = delete;
  IsaGuard& operator=(const IsaGuard&) = delete;
  ~IsaGuard() { setCpuIsaForTesting(bestCpuIsa()); }
};

// `bytes` of payload starting `offset` bytes past a 64-byte boundary, surrounded by guard
// bytes that checkGuards() verifies were not written.
class GuardedBuffer {
 public:
  static constexpr size_t kGuard = 64;
  static constexpr unsigned char kGuardByte = 0xcd;

  GuardedBuffer(size_t bytes, size_t offset)
      : bytes_(bytes), storage_(bytes + 2 * kGuard + offset + 64, kGuardByte) {
    auto base = reinterpret_cast<uintptr_t>(storage_.data());
    begin_ = ((base + kGuard + 63) & ~uintptr_t{63}) - base + offset;
  }
  unsigned char* data() { return storage_.data() + begin_; }
  size_t bytes() const { return bytes_; }

  bool guardsIntact() const {
    for (size_t i = 0; i < storage_.size(); ++i) {
      if ((i < begin_ || i >= begin_ + bytes_) && storage_[i] != kGuardByte) return false;
    }
    return true;
  }

 private:
  size_t bytes_;
  std::vector<unsigned char> storage_;
  size_t begin_ = 0;
};

template <typename T>
T loadElem(const unsigned char* p, size_t i) {
  T v;
  std::memcpy(&v, p + i * sizeof(T), sizeof(T));
  return v;
}

template <typename T>
void storeElem(unsigned char* p, size_t i, T v) {
  std::memcpy(p + i * sizeof(T), &v, sizeof(T));
}

// Index of the first differing element of two arrays of `count` T, or -1.
template <typename T>
long long firstMismatch(const unsigned char* a, const unsigned char* b, size_t count) {
  if (count == 0 || std::memcmp(a, b, count * sizeof(T)) == 0) return -1;
  for (size_t i = 0; i < count; ++i) {
    if (std::memcmp(a + i * sizeof(T), b + i * sizeof(T), sizeof(T)) != 0) {
      return static_cast<long long>(i);
    }
  }
  return -1;
}

// Random bits; for float and double, one value in four is a special one (random bits rarely
// hit them in 32 or 64 bits; the 8- and 16-bit types hit them often enough on their own).
template <typename T>
T randomValue(std::mt19937_64& rng) {
  uint64_t bits = rng();
  if constexpr (std::is_same_v<T, float>) {
    static constexpr uint32_t kSpecial[] = {0x00000000, 0x80000000, 0x7f800000, 0xff800000,
                                            0x7fc00000, 0xffc00001, 0x7f800001, 0x00000001,
                                            0x807fffff, 0x00800000, 0x7f7fffff, 0x3f800000};
    if (bits % 4 == 0) bits = kSpecial[(bits >> 8) % std::size(kSpecial)];
  } else if constexpr (std::is_same_v<T, double>) {
    static constexpr uint64_t kSpecial[] = {
        0, 1ull << 63,         0x7ff0000000000000, 0xfff8000000000000, 0x7ff0000000000001,
        1, 0x000fffffffffffff, 0x3ff0000000000000, 0x7fefffffffffffff};
    if (bits % 4 == 0) bits = kSpecial[(bits >> 8) % std::size(kSpecial)];
  }
  T v;
  std::memcpy(&v, &bits, sizeof v);
  return v;
}

inline std::string caseName(loomDataType_t type, ReduceOpKind op) {
  return std::string(dataTypeName(type)) + "_" + reduceOpKindName(op);
}

}  // namespace loom::test
