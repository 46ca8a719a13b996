// Dispatcher of the CPU reduceCopy: argument checks, then one indexed call into the table of
// the active ISA. Only this file runs checks and throws; the per-ISA files stay free of
// anything (std::string, exceptions) that could be emitted out of line with ISA flags.
#include <atomic>
#include <cstdint>

#include "src/base/cpu_arch.h"
#include "src/base/error.h"
#include "src/kernels/datatype_traits.h"
#include "src/kernels/reduce_copy_dispatch.h"
#include "src/kernels/reduce_copy_isa.h"
#include "src/kernels/tile_convert.h"

namespace loom {
namespace {

const ReduceCopyTable* tableFor(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::kGeneric:
      return &kReduceCopyTableGeneric;
#if LOOM_CPU_X86_64
    case CpuIsa::kAvx2:
      return &kReduceCopyTableAvx2;
    case CpuIsa::kAvx512:
      return &kReduceCopyTableAvx512;
#endif
    default:
      return nullptr;
  }
}

bool isValidIsa(CpuIsa isa) {
  return static_cast<int>(isa) >= 0 && static_cast<int>(isa) <= static_cast<int>(CpuIsa::kAvx512);
}

// The process-wide choice. The CPU's features are a property of the process, so this is the
// one piece of global state here; it is resolved once (first use), not per call.
std::atomic<CpuIsa>& activeIsa() {
  static std::atomic<CpuIsa> isa{bestCpuIsa()};
  return isa;
}

bool rangesPartiallyOverlap(const void* a, const void* b, size_t bytes) {
  const auto x = reinterpret_cast<uintptr_t>(a);
  const auto y = reinterpret_cast<uintptr_t>(b);
  return x != y && x < y + bytes && y < x + bytes;
}

}  // namespace

const char* cpuIsaName(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::kGeneric:
      return "generic";
    case CpuIsa::kAvx2:
      return "avx2";
    case CpuIsa::kAvx512:
      return "avx512";
  }
  return "unknown";
}

bool cpuSupports(CpuIsa isa) {
  if (!isValidIsa(isa) || tableFor(isa) == nullptr) return false;
#if LOOM_CPU_X86_64
  // libgcc's checks include the OS part (XGETBV): the kernel saves the wide registers.
  __builtin_cpu_init();
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                    __builtin_cpu_supports("f16c");
  switch (isa) {
    case CpuIsa::kAvx2:
      return avx2;
    case CpuIsa::kAvx512:
      return avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vl");
    default:
      break;
  }
#endif
  return isa == CpuIsa::kGeneric;
}

CpuIsa bestCpuIsa() {
  for (CpuIsa isa : {CpuIsa::kAvx512, CpuIsa::kAvx2}) {
    if (cpuSupports(isa)) return isa;
  }
  return CpuIsa::kGeneric;
}

CpuIsa activeCpuIsa() { return activeIsa().load(std::memory_order_relaxed); }

void setCpuIsaForTesting(CpuIsa isa) {
  LOOM_ENFORCE(isValidIsa(isa), InvalidArgument, "setCpuIsaForTesting: unknown CPU ISA value ",
               static_cast<int>(isa), " (valid: 0 = generic, 1 = avx2, 2 = avx512)");
  LOOM_ENFORCE(cpuSupports(isa), InvalidArgument, "setCpuIsaForTesting: this CPU (or build) ",
               "cannot run the ", cpuIsaName(isa), " variant of reduceCopy; the best it has is ",
               cpuIsaName(bestCpuIsa()));
  activeIsa().store(isa, std::memory_order_relaxed);
}

const char* reduceOpKindName(ReduceOpKind op) {
  switch (op) {
#define LOOM_REDUCE_OP(kind, Func, name) \
  case ReduceOpKind::kind:               \
    return name;
#include "src/kernels/reduce_op_table.def"
    default:
      return nullptr;
  }
}

ReduceOpKind reduceOpKindFor(loomRedOp_t op, loomDataType_t /*type*/) {
  switch (op) {
    case loomSum:
      return ReduceOpKind::kSum;
    case loomProd:
      return ReduceOpKind::kProd;
    case loomMax:
      return ReduceOpKind::kMax;
    case loomMin:
      return ReduceOpKind::kMin;
    case loomAvg:
      return ReduceOpKind::kSumPostDiv;
    default:
      break;
  }
  throw InvalidArgument(strCat("invalid reduction op ", static_cast<int>(op),
                               " (valid: 0 = sum, 1 = prod, 2 = max, 3 = min, 4 = avg)"));
}

ReduceScalar averageScalar(int nranks) {
  LOOM_ENFORCE(nranks >= 1, InvalidArgument, "average over ", nranks, " ranks: need at least 1");
  ReduceScalar s;
  s.f = nranks;
  s.i = nranks;
  return s;
}

void validateReduceCopy(loomDataType_t type, ReduceOpKind op, const ReduceCopyArgs& args) {
  LOOM_ENFORCE(isValidDataType(type), InvalidArgument, "reduceCopy: invalid data type ",
               static_cast<int>(type), " (valid: 0..", loomNumTypes - 1, ")");
  LOOM_ENFORCE(reduceOpKindName(op) != nullptr, InvalidArgument, "reduceCopy: invalid op kind ",
               static_cast<int>(op), " (valid: 0..", kNumReduceOps - 1, ")");
  LOOM_ENFORCE(args.nsrc >= 1 && args.nsrc <= kMaxSources, InvalidArgument,
               "reduceCopy: nsrc = ", args.nsrc, " is outside 1..", kMaxSources);
  LOOM_ENFORCE(args.ndst >= 1 && args.ndst <= kMaxDests, InvalidArgument,
               "reduceCopy: ndst = ", args.ndst, " is outside 1..", kMaxDests);
  const size_t size = dataTypeSize(type);
  LOOM_ENFORCE(args.count <= SIZE_MAX / size, InvalidArgument, "reduceCopy: count ", args.count,
               " of ", dataTypeName(type), " overflows the address space");
  LOOM_ENFORCE(!(!isFloatingDataType(type) && op == ReduceOpKind::kSumPostDiv && args.postOp &&
                 args.scalar.i < 1),
               InvalidArgument, "reduceCopy: integer sumpostdiv divisor ", args.scalar.i,
               " must be >= 1");
  if (args.count == 0) return;
  for (int s = 0; s < args.nsrc; ++s) {
    LOOM_ENFORCE(args.src[s] != nullptr, InvalidArgument, "reduceCopy: src[", s, "] is null");
  }
  const size_t bytes = args.count * size;
  for (int d = 0; d < args.ndst; ++d) {
    LOOM_ENFORCE(args.dst[d] != nullptr, InvalidArgument, "reduceCopy: dst[", d, "] is null");
    for (int s = 0; s < args.nsrc; ++s) {
      LOOM_ENFORCE(!rangesPartiallyOverlap(args.dst[d], args.src[s], bytes), InvalidArgument,
                   "reduceCopy: dst[", d, "] partially overlaps src[", s,
                   "]; buffers must be disjoint or identical (in place)");
    }
    for (int e = 0; e < d; ++e) {
      LOOM_ENFORCE(!rangesPartiallyOverlap(args.dst[d], args.dst[e], bytes), InvalidArgument,
                   "reduceCopy: dst[", d, "] partially overlaps dst[", e, "]");
    }
  }
}

void reduceCopy(loomDataType_t type, ReduceOpKind op, const ReduceCopyArgs& args) {
  validateReduceCopy(type, op, args);
  if (args.count == 0) return;
  tableFor(activeCpuIsa())->fn[type][static_cast<int>(op)](args);
}

void streamCopy(void* dst, const void* src, size_t bytes) {
  streamBytes(static_cast<unsigned char*>(dst), static_cast<const unsigned char*>(src), bytes);
  streamFence();
}

ReduceCopyKernel reduceCopyKernel(loomDataType_t type, ReduceOpKind op) {
  LOOM_ENFORCE(isValidDataType(type), InvalidArgument, "reduceCopy: invalid data type ",
               static_cast<int>(type), " (valid: 0..", loomNumTypes - 1, ")");
  LOOM_ENFORCE(reduceOpKindName(op) != nullptr, InvalidArgument, "reduceCopy: invalid op kind ",
               static_cast<int>(op), " (valid: 0..", kNumReduceOps - 1, ")");
  return tableFor(activeCpuIsa())->fn[type][static_cast<int>(op)];
}

}  // namespace loom
