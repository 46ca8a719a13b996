// How torch tensors and reduce ops travel through loom's C API.
//
// A tensor crosses as (pointer, element count, loomDataType_t). Three cases need a mapping:
//  - bool is sent as uint8; for reductions SUM becomes MAX and PRODUCT becomes MIN, which are
//    the logical or / and on 0 and 1;
//  - complex is sent as pairs of its real type, which is exact for the ops that act on each
//    part alone (SUM, AVG, PREMUL_SUM with a real factor); the others are refused;
//  - types loom has no arithmetic for (int16, uint16, ...) are sent as bytes by the
//    operations that only move data, and refused by reductions.
// torch's ReduceOp numbering differs from loom's, so every op is mapped by name.
#pragma once

#include <exception>
#include <string>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include "loom/loom.h"

namespace loom_torch {

// A dtype as Python writes it ("torch.int16"), for messages.
std::string dtypeName(at::ScalarType s);

// A tensor's memory as loom sees it.
struct Wire {
  void* data = nullptr;
  size_t count = 0;  // in elements of `type`
  loomDataType_t type = loomUint8;
};

// For operations that only move data: every dtype works, as bytes where loom has no type.
Wire moveWire(const at::Tensor& t);

// For reductions: the loom type and op, and the factor of PREMUL_SUM. Throws a clear error for
// combinations loom cannot reduce exactly (BAND/BOR/BXOR, complex MIN, int16 ...).
struct Reduction {
  Wire wire;
  loomRedOp_t op = loomSum;
  bool preMulSum = false;
  at::Tensor factor;  // one element of wire.type, for PREMUL_SUM
};
Reduction reduceWire(const at::Tensor& t, const c10d::ReduceOp& op, const char* opName);

// Creates the PREMUL_SUM op for `comm` around a call and destroys it after: loom reads a
// host-immediate scalar when the operation is submitted, so destroying it after the call is
// safe even for a queued operation.
class ScopedRedOp {
 public:
  ScopedRedOp(const Reduction& r, loomComm_t comm);
  ~ScopedRedOp();
  loomRedOp_t op() const { return op_; }

 private:
  loomComm_t comm_;
  loomRedOp_t op_;
  bool created_ = false;
};

// Refuses what loom cannot take: CUDA tensors in this build, sparse tensors, other devices.
void checkTensor(const at::Tensor& t, const char* opName);

// The DistBackendError that reaches Python for a failed loom call, with loom's own message.
[[noreturn]] void throwLoomError(loomResult_t r, loomComm_t comm, const std::string& what);
std::exception_ptr loomError(loomResult_t r, loomComm_t comm, const std::string& what);
std::exception_ptr backendError(const std::string& message);

// Throws throwLoomError(...) unless `r` is loomSuccess.
inline void check(loomResult_t r, loomComm_t comm, const char* what) {
  if (r != loomSuccess) throwLoomError(r, comm, what);
}

}  // namespace loom_torch
