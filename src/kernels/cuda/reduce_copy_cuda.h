// reduceCopy on CUDA device memory: the same per-element math as the CPU path
// (reduce_copy.h), one grid-stride kernel per type x op. Only with LOOM_WITH_CUDA.
#pragma once

#if defined(LOOM_HAVE_CUDA) && LOOM_HAVE_CUDA
#include <cuda_runtime.h>

#include "loom/loom.h"
#include "src/kernels/reduce_copy_args.h"

namespace loom {

// Enqueues reduceCopy on `stream` and returns at once. Pointers are device pointers (or
// mapped/managed memory) aligned to the element size. Validates like the CPU path
// (InvalidArgument); throws CudaError when the launch fails.
void reduceCopyCuda(loomDataType_t type, ReduceOpKind op, const ReduceCopyArgs& args,
                    cudaStream_t stream);

}  // namespace loom
#endif
