// Shared by every kernel header: the host/device marker and the per-ISA namespace.
//
// Why a per-ISA namespace: the CPU reduce loop is compiled three times, by files built with
// different -m flags (generic, AVX2, AVX-512). Every inline function and template those files
// share (conversions, functors, the loop itself) is emitted as a weak symbol; if the three
// copies had the same mangled name the linker would keep one of them, possibly the AVX-512
// one, for every caller, and the "generic" path would crash on older CPUs. So everything
// inline in src/kernels lives in `loom::LOOM_ISA_NAMESPACE`, an inline namespace: code names
// it as `loom::Float16`, but each ISA file (which defines LOOM_ISA_NAMESPACE before including
// anything) gets symbols of its own. Plain data shared across files (ReduceCopyArgs) stays
// outside it, and ISA files call no std:: templates that could be emitted out of line.
// This header must stay C++17-clean: nvcc compiles it.
#pragma once

#if defined(__CUDACC__)
#define LOOM_HOST_DEVICE __host__ __device__
#else
#define LOOM_HOST_DEVICE
#endif

// Force inlining where a call per element would defeat vectorisation.
#if defined(__CUDACC__)
#define LOOM_INLINE __forceinline__
#else
#define LOOM_INLINE inline __attribute__((always_inline))
#endif

// Unrolls a loop of constant trip count in device code (registers, not local memory); host
// compilers decide for themselves.
#if defined(__CUDACC__)
#define LOOM_UNROLL _Pragma("unroll")
#else
#define LOOM_UNROLL
#endif

// CUDA files get a namespace of their own too: nvcc's host pass sees different definitions
// (LOOM_HOST_DEVICE, __forceinline__) of the same inline functions.
#if !defined(LOOM_ISA_NAMESPACE) && defined(__CUDACC__)
#define LOOM_ISA_NAMESPACE isa_cuda
#elif !defined(LOOM_ISA_NAMESPACE)
#define LOOM_ISA_NAMESPACE isa_default
#endif
