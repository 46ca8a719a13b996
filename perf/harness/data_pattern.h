// Order-independent test data, checked bit-exactly (the approach of nccl-tests' "verifiable"
// data, written afresh). Every input is a small non-negative integer chosen so that each sum,
// product, max, min or average of the inputs, and every partial result on the way, is an
// exactly representable integer in the datatype. Any reduction order then gives the same bits,
// so results are compared with memcmp, element by element, with no tolerance.
#ifndef LOOM_PERF_HARNESS_DATA_PATTERN_H_
#define LOOM_PERF_HARNESS_DATA_PATTERN_H_

#include <cstddef>
#include <cstdint>

#include "loom/loom.h"
#include "perf/harness/datatypes.h"

namespace loomperf {

// Writes `value` (a small non-negative integer, exact in `type`) as one element of `type`.
void encodeValue(loomDataType_t type, double value, void* dst);

// The scalar rank `rank` multiplies its input by for the mulsum op.
double mulSumScalar(int rank);

class Pattern {
 public:
  // `seed` changes the data between runs, so a stale result from an earlier run is not mistaken
  // for a correct one.
  Pattern(loomDataType_t type, Op op, int nranks, uint64_t seed);

  // Rank `rank`'s input at element `index` (index counts from the start of the logical buffer,
  // so blocks of AllGather/AlltoAll keep their identity).
  double input(int rank, size_t index) const;
  // The op over every rank's input at `index`.
  double reduced(size_t index) const;

  void fillInput(int rank, size_t first, size_t count, void* dst) const;
  void fillReduced(size_t first, size_t count, void* dst) const;

  // Inputs lie in [0, modulus()); exposed for tests.
  uint64_t modulus() const { return modulus_; }
  size_t elemSize() const { return typeInfo(type_).size; }

 private:
  uint64_t base(int rank, size_t index) const;

  loomDataType_t type_;
  Op op_;
  int nranks_;
  uint64_t seed_;
  uint64_t modulus_;
};

// The byte poison() writes.
constexpr int kPoisonByte = 0xA5;

// Fills `bytes` with a value no pattern produces (negative in every signed and float type,
// huge in unsigned ones), so an element the collective forgot to write shows up as wrong.
void poison(void* buf, size_t bytes);

// Number of elements of `elemSize` bytes that differ between got and want.
int64_t countWrong(const void* got, const void* want, size_t count, size_t elemSize);

}  // namespace loomperf

#endif  // LOOM_PERF_HARNESS_DATA_PATTERN_H_
