// The CUDA reduceCopy: a grid-stride kernel per type x op, instantiated from the same tables
// (datatype_table.def, reduce_op_table.def) and computing each element with the same code
// (reduceCopyElement) as the CPU path. Built as C++17 by nvcc.
#include <cuda_runtime.h>

#include <cstdint>

#include "src/base/error.h"
#include "src/cuda/runtime.h"
#include "src/kernels/cuda/reduce_copy_cuda.h"
#include "src/kernels/reduce_copy.h"
#include "src/kernels/reduce_copy_dispatch.h"

namespace loom {
inline namespace LOOM_ISA_NAMESPACE {

constexpr int kReduceCopyThreads = 256;

template <typename T, typename Op>
__global__ void __launch_bounds__(kReduceCopyThreads) reduceCopyKernel(ReduceCopyArgs args) {
  const Op op(args.scalar);
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < args.count; i += stride) {
    const T value = reduceCopyElement<T>(op, args, i);
    for (int d = 0; d < args.ndst; ++d) static_cast<T*>(args.dst[d])[i] = value;
  }
}

// The kernels of one element type, indexed by ReduceOpKind.
template <typename T>
struct ReduceCopyKernels {
  static const void* const kFns[kNumReduceOps];
};

template <typename T>
const void* const ReduceCopyKernels<T>::kFns[kNumReduceOps] = {
#define LOOM_REDUCE_OP(kind, Func, name) \
  reinterpret_cast<const void*>(&reduceCopyKernel<T, Func<T>>),
#include "src/kernels/reduce_op_table.def"
};

// Explicit instantiation: every type (and through kFns every op) of the table.
#define LOOM_DATATYPE(e, Type, name) template struct ReduceCopyKernels<Type>;
#include "src/kernels/datatype_table.def"

const void* reduceCopyKernelFor(loomDataType_t type, ReduceOpKind op) {
  switch (type) {
#define LOOM_DATATYPE(e, Type, name) \
  case e:                            \
    return ReduceCopyKernels<Type>::kFns[static_cast<int>(op)];
#include "src/kernels/datatype_table.def"
    default:
      return nullptr;
  }
}

}  // namespace LOOM_ISA_NAMESPACE

void reduceCopyCuda(loomDataType_t type, ReduceOpKind op, const ReduceCopyArgs& args,
                    cudaStream_t stream) {
  validateReduceCopy(type, op, args);
  if (args.count == 0) return;
  const size_t size = dataTypeSize(type);
  for (int s = 0; s < args.nsrc; ++s) {
    LOOM_ENFORCE(reinterpret_cast<uintptr_t>(args.src[s]) % size == 0, InvalidArgument,
                 "reduceCopyCuda: src[", s, "] is not aligned to its element size ", size);
  }
  for (int d = 0; d < args.ndst; ++d) {
    LOOM_ENFORCE(reinterpret_cast<uintptr_t>(args.dst[d]) % size == 0, InvalidArgument,
                 "reduceCopyCuda: dst[", d, "] is not aligned to its element size ", size);
  }
  // Enough blocks to fill any current GPU several times over; the grid-stride loop covers
  // the rest, and small counts launch only the blocks they need.
  const size_t blocksNeeded = (args.count + kReduceCopyThreads - 1) / kReduceCopyThreads;
  const unsigned blocks = static_cast<unsigned>(blocksNeeded < 4096 ? blocksNeeded : 4096);
  ReduceCopyArgs copy = args;
  void* params[] = {&copy};
  cuda::deviceRuntime().launchKernel(reduceCopyKernelFor(type, op), cuda::Dim3{blocks},
                                     cuda::Dim3{kReduceCopyThreads}, params, 0, stream);
}

}  // namespace loom
