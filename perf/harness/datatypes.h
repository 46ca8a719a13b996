// The datatypes and reduction ops the benchmarks know, with nccl-tests' names ("float",
// "bfloat16", "f8e4m3", "sum", "mulsum"...), so -d and -o accept what nccl-tests accepts.
#ifndef LOOM_PERF_HARNESS_DATATYPES_H_
#define LOOM_PERF_HARNESS_DATATYPES_H_

#include <cstddef>
#include <span>
#include <string_view>

#include "loom/loom.h"

namespace loomperf {

struct TypeInfo {
  loomDataType_t type;
  const char* name;  // nccl-tests' name
  size_t size;       // bytes per element
  // Largest M such that every integer 0..M is exact in the type: the data patterns keep every
  // partial result at or below it, so sums are exact in any order.
  double maxExact;
};

// Every type in nccl-tests' order (the order of `-d all`).
std::span<const TypeInfo> allTypes();
const TypeInfo& typeInfo(loomDataType_t type);
// nullptr when the name is unknown.
const TypeInfo* typeByName(std::string_view name);

// Reduction ops as nccl-tests numbers them; kMulSum stands for a PreMulSum op created per call.
enum class Op { kSum = 0, kProd = 1, kMax = 2, kMin = 3, kAvg = 4, kMulSum = 5 };
inline constexpr int kNumOps = 6;
const char* opName(Op op);  // "sum", "prod", "max", "min", "avg", "mulsum"
// False when the name is unknown.
bool opByName(std::string_view name, Op* op);

}  // namespace loomperf

#endif  // LOOM_PERF_HARNESS_DATATYPES_H_
