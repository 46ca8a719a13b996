#include "wire.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <optional>

namespace loom_torch {
namespace {

// loom's type for a real (non-complex, non-bool) dtype, if loom has one.
std::optional<loomDataType_t> loomType(at::ScalarType s) {
  switch (s) {
    case at::kChar:
      return loomInt8;
    case at::kByte:
      return loomUint8;
    case at::kInt:
      return loomInt32;
    case at::kUInt32:
      return loomUint32;
    case at::kLong:
      return loomInt64;
    case at::kUInt64:
      return loomUint64;
    case at::kHalf:
      return loomFloat16;
    case at::kFloat:
      return loomFloat32;
    case at::kDouble:
      return loomFloat64;
    case at::kBFloat16:
      return loomBfloat16;
    case at::kFloat8_e4m3fn:
      return loomFloat8e4m3;
    case at::kFloat8_e5m2:
      return loomFloat8e5m2;
    default:
      return std::nullopt;
  }
}

}  // namespace

std::string dtypeName(at::ScalarType s) {
  return "torch." + std::string(c10::getDtypeNames(s).first);  // the name Python users write
}

namespace {

const char* opName(c10d::ReduceOp::RedOpType op) {
  switch (op) {
    case c10d::ReduceOp::SUM:
      return "SUM";
    case c10d::ReduceOp::AVG:
      return "AVG";
    case c10d::ReduceOp::PRODUCT:
      return "PRODUCT";
    case c10d::ReduceOp::MIN:
      return "MIN";
    case c10d::ReduceOp::MAX:
      return "MAX";
    case c10d::ReduceOp::BAND:
      return "BAND";
    case c10d::ReduceOp::BOR:
      return "BOR";
    case c10d::ReduceOp::BXOR:
      return "BXOR";
    case c10d::ReduceOp::PREMUL_SUM:
      return "PREMUL_SUM";
    default:
      return "UNUSED";
  }
}

}  // namespace

Wire moveWire(const at::Tensor& t) {
  Wire w;
  w.data = t.data_ptr();
  if (auto type = loomType(t.scalar_type())) {
    w.type = *type;
    w.count = t.numel();
  } else {  // bool, complex, int16, ...: bytes are exact for copies
    w.type = loomUint8;
    w.count = t.numel() * t.element_size();
  }
  return w;
}

Reduction reduceWire(const at::Tensor& t, const c10d::ReduceOp& reduceOp, const char* what) {
  const auto op = reduceOp.op_;
  TORCH_CHECK_VALUE(
      op != c10d::ReduceOp::BAND && op != c10d::ReduceOp::BOR && op != c10d::ReduceOp::BXOR,
      "loom: ", what, " with ReduceOp.", opName(op),
      " is not supported: loom has no bitwise reductions. For bool tensors use "
      "ReduceOp.MAX (or) and ReduceOp.MIN (and).");
  Reduction r;
  r.wire.data = t.data_ptr();
  r.wire.count = t.numel();
  at::ScalarType real = t.scalar_type();
  if (t.scalar_type() == at::kBool) {
    TORCH_CHECK_VALUE(op != c10d::ReduceOp::AVG && op != c10d::ReduceOp::PREMUL_SUM, "loom: ", what,
                      " with ReduceOp.", opName(op), " is not defined for bool tensors");
    r.wire.type = loomUint8;
    // 0/1 values: MAX is "or" (what SUM means for bool), MIN is "and" (PRODUCT).
    r.op = (op == c10d::ReduceOp::SUM || op == c10d::ReduceOp::MAX) ? loomMax : loomMin;
    return r;
  }
  if (t.is_complex()) {
    TORCH_CHECK_VALUE(
        op == c10d::ReduceOp::SUM || op == c10d::ReduceOp::AVG || op == c10d::ReduceOp::PREMUL_SUM,
        "loom: ", what, " with ReduceOp.", opName(op), " is not defined for ", t.scalar_type(),
        " tensors (only SUM, AVG and PREMUL_SUM are)");
    real = c10::toRealValueType(t.scalar_type());
    r.wire.count *= 2;  // (real, imaginary) pairs
  }
  auto type = loomType(real);
  TORCH_CHECK_VALUE(type.has_value(), "loom: ", what, " cannot reduce ", dtypeName(t.scalar_type()),
                    " tensors: loom has no arithmetic for this type. Convert the tensor (for "
                    "example to torch.int32) or use an operation that only moves data.");
  r.wire.type = *type;
  switch (op) {
    case c10d::ReduceOp::SUM:
      r.op = loomSum;
      break;
    case c10d::ReduceOp::AVG:
      r.op = loomAvg;
      break;
    case c10d::ReduceOp::PRODUCT:
      r.op = loomProd;
      break;
    case c10d::ReduceOp::MIN:
      r.op = loomMin;
      break;
    case c10d::ReduceOp::MAX:
      r.op = loomMax;
      break;
    case c10d::ReduceOp::PREMUL_SUM: {
      auto* supplement = dynamic_cast<c10d::PreMulSumSupplement*>(reduceOp.supplement_.get());
      TORCH_CHECK_VALUE(supplement != nullptr, "loom: ", what,
                        " with PREMUL_SUM needs its factor; create the op with "
                        "torch.distributed._make_nccl_premul_sum(factor)");
      at::Tensor factor = supplement->tensor_factor.defined()
                              ? supplement->tensor_factor.detach().cpu().reshape({1})
                              : at::full({1}, supplement->double_factor, at::kDouble);
      TORCH_CHECK_VALUE(!factor.is_complex(), "loom: ", what,
                        " with PREMUL_SUM takes a real factor, not ",
                        dtypeName(factor.scalar_type()));
      r.factor = factor.to(real).reshape({1}).contiguous();
      r.preMulSum = true;
      break;
    }
    default:
      TORCH_CHECK_VALUE(false, "loom: ", what, ": ReduceOp ", static_cast<int>(op),
                        " is not a reduce op loom knows");
  }
  return r;
}

ScopedRedOp::ScopedRedOp(const Reduction& r, loomComm_t comm) : comm_(comm), op_(r.op) {
  if (!r.preMulSum) return;
  check(loomRedOpCreatePreMulSum(&op_, r.factor.data_ptr(), r.wire.type, loomScalarHostImmediate,
                                 comm),
        comm, "loomRedOpCreatePreMulSum");
  created_ = true;
}

ScopedRedOp::~ScopedRedOp() {
  if (created_) loomRedOpDestroy(op_, comm_);
}

void checkTensor(const at::Tensor& t, const char* what) {
  TORCH_CHECK_VALUE(t.defined(), "loom: ", what, " got an undefined tensor");
  TORCH_CHECK_VALUE(!t.is_cuda(), "loom: ", what,
                    " got a CUDA tensor, but CUDA communicators are not available in this "
                    "build of loom_torch yet; use CPU tensors (a 'cpu:loom,cuda:nccl' backend "
                    "string gives CUDA tensors to NCCL meanwhile)");
  TORCH_CHECK_VALUE(t.layout() == at::kStrided, "loom: ", what, " takes dense tensors, not ",
                    t.layout(), " ones");
  TORCH_CHECK_VALUE(t.is_cpu(), "loom: ", what, " takes CPU tensors, not ", t.device(), " ones");
}

std::exception_ptr backendError(const std::string& message) {
  try {
    C10_THROW_ERROR(DistBackendError, message);
  } catch (...) {
    return std::current_exception();
  }
}

std::exception_ptr loomError(loomResult_t r, loomComm_t comm, const std::string& what) {
  std::string detail = loomGetLastError(comm);
  if (detail.empty()) detail = loomGetLastError(nullptr);
  std::string message = "loom: " + what + " failed: " + loomGetErrorString(r);
  if (!detail.empty()) message += ": " + detail;
  return backendError(message);
}

void throwLoomError(loomResult_t r, loomComm_t comm, const std::string& what) {
  std::rethrow_exception(loomError(r, comm, what));
}

}  // namespace loom_torch
