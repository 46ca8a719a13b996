// The stream phase's producer and consumer kernels, and their host twins for the simulated
// runtime. Launched through the device-runtime seam like loom's own kernels, so the phase is
// the same code on a GPU and on the simulated one.
#include <cuda_runtime.h>

#include <cstddef>
#include <functional>

#include "tools/gpu_check/gpu_check.h"

namespace loom::gpucheck {
namespace {

constexpr unsigned kThreads = 256;

__host__ __device__ inline float pattern(float value, size_t i) {
  return value * static_cast<float>(1 + i % 8);
}

__global__ void fillKernel(float* data, size_t count, float value) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride)
    data[i] = pattern(value, i);
}

__global__ void verifyKernel(const float* data, size_t count, float expect, unsigned* errors) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  unsigned wrong = 0;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride)
    wrong += data[i] != pattern(expect, i);
  if (wrong != 0) atomicAdd(errors, wrong);
}

std::function<void()> fillTwin(cuda::Dim3, cuda::Dim3, void** args) {
  float* data = *static_cast<float**>(args[0]);
  const size_t count = *static_cast<size_t*>(args[1]);
  const float value = *static_cast<float*>(args[2]);
  return [=] {
    for (size_t i = 0; i < count; ++i) data[i] = pattern(value, i);
  };
}

std::function<void()> verifyTwin(cuda::Dim3, cuda::Dim3, void** args) {
  const float* data = *static_cast<const float**>(args[0]);
  const size_t count = *static_cast<size_t*>(args[1]);
  const float expect = *static_cast<float*>(args[2]);
  unsigned* errors = *static_cast<unsigned**>(args[3]);
  return [=] {
    for (size_t i = 0; i < count; ++i) *errors += data[i] != pattern(expect, i);
  };
}

cuda::Dim3 gridFor(size_t count) {
  const size_t blocks = (count + kThreads - 1) / kThreads;
  return cuda::Dim3{static_cast<unsigned>(blocks == 0 ? 1 : blocks < 1024 ? blocks : 1024)};
}

}  // namespace

void registerKernelTwins() {
  runtime().registerHostKernel(reinterpret_cast<const void*>(&fillKernel), &fillTwin);
  runtime().registerHostKernel(reinterpret_cast<const void*>(&verifyKernel), &verifyTwin);
}

void launchFill(float* data, size_t count, float value, cuda::Stream stream) {
  void* args[] = {&data, &count, &value};
  runtime().launchKernel(reinterpret_cast<const void*>(&fillKernel), gridFor(count),
                         cuda::Dim3{kThreads}, args, 0, stream);
}

void launchVerify(const float* data, size_t count, float expect, unsigned* errors,
                  cuda::Stream stream) {
  void* args[] = {&data, &count, &expect, &errors};
  runtime().launchKernel(reinterpret_cast<const void*>(&verifyKernel), gridFor(count),
                         cuda::Dim3{kThreads}, args, 0, stream);
}

}  // namespace loom::gpucheck
