// reduceCopy on host memory for run-time types and ops: validates the arguments, then runs
// the type x op instantiation compiled for the best instruction set this CPU has. The ISA is
// picked once per process (a CPU does not change); tests may switch it to compare variants.
// C++17-clean: the CUDA launcher shares the validation.
#pragma once

#include "loom/loom.h"
#include "src/kernels/reduce_copy_args.h"

namespace loom {

// The CPU variants, slowest first.
enum class CpuIsa : int {
  kGeneric = 0,  // baseline x86-64 (SSE2), or whatever the target's baseline is
  kAvx2 = 1,     // AVX2 + FMA + F16C
  kAvx512 = 2,   // AVX-512 F/BW/VL (+ F16C)
};
inline constexpr CpuIsa kAllCpuIsas[] = {CpuIsa::kGeneric, CpuIsa::kAvx2, CpuIsa::kAvx512};

const char* cpuIsaName(CpuIsa isa);  // "generic", "avx2", "avx512"
bool cpuSupports(CpuIsa isa);        // built in and runnable on this CPU and OS
CpuIsa bestCpuIsa();
CpuIsa activeCpuIsa();
// Makes every later reduceCopy use `isa`. Throws InvalidArgument when the CPU lacks it.
void setCpuIsaForTesting(CpuIsa isa);

const char* reduceOpKindName(ReduceOpKind op);  // "sum", ...; nullptr when out of range

// The internal op for a public one. loomAvg is kSumPostDiv for every type: the sum, then one
// division by n of the final result (a post-op), exact whenever the sum is a multiple of n.
// `type` is not used: each public op has one kind for all types. Throws InvalidArgument for a
// value outside loomRedOp_t.
ReduceOpKind reduceOpKindFor(loomRedOp_t op, loomDataType_t type);
// The scalar for loomAvg over n ranks: the divisor n.
ReduceScalar averageScalar(int nranks);

// Throws InvalidArgument naming the culprit: type or op out of range; nsrc or ndst out of
// range; a null pointer (when count > 0); a destination partially overlapping a source or
// another destination; an integer SumPostDiv divisor below 1; a byte size that overflows.
void validateReduceCopy(loomDataType_t type, ReduceOpKind op, const ReduceCopyArgs& args);

// Host memory, synchronous, single thread. See reduce_copy.h for what it computes.
void reduceCopy(loomDataType_t type, ReduceOpKind op, const ReduceCopyArgs& args);

// The instantiation reduceCopy(type, op, ...) runs on this CPU, called without reduceCopy's
// checks: for a caller that runs many steps of one shape whose arguments are right by
// construction (the CPU executor's cached plans), where the checks would cost as much as an
// 8-byte step. Throws InvalidArgument for a type or op out of range.
using ReduceCopyKernel = void (*)(const ReduceCopyArgs&);
ReduceCopyKernel reduceCopyKernel(loomDataType_t type, ReduceOpKind op);

// memcpy whose stores to `dst` are non-temporal (no read-for-ownership, no cache pollution),
// fenced before it returns; a plain memcpy where the CPU has no such stores. Bit-exact. For
// large calls (ReduceCopyArgs::streamDestinations).
void streamCopy(void* dst, const void* src, size_t bytes);

}  // namespace loom
