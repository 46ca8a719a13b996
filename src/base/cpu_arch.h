// What CPU family this file is compiled for, and the hint a spin loop gives the CPU while it
// polls. Code that needs x86 (pause, the AVX2/AVX-512 reduceCopy variants, streaming stores)
// asks LOOM_CPU_X86 / LOOM_CPU_X86_64 instead of the compiler's macros, so that one CMake
// option, LOOM_FORCE_GENERIC_ARCH, makes every such place take its portable branch on an x86
// machine too: CI builds the library that way to keep the aarch64 (Grace) and other builds
// compiling without a cross compiler.
#pragma once

#if defined(LOOM_FORCE_GENERIC_ARCH) && LOOM_FORCE_GENERIC_ARCH
#define LOOM_CPU_X86 0
#define LOOM_CPU_X86_64 0
#define LOOM_CPU_AARCH64 0
#elif defined(__x86_64__)
#define LOOM_CPU_X86 1
#define LOOM_CPU_X86_64 1
#define LOOM_CPU_AARCH64 0
#elif defined(__i386__)
#define LOOM_CPU_X86 1
#define LOOM_CPU_X86_64 0
#define LOOM_CPU_AARCH64 0
#elif defined(__aarch64__)
#define LOOM_CPU_X86 0
#define LOOM_CPU_X86_64 0
#define LOOM_CPU_AARCH64 1
#else
#define LOOM_CPU_X86 0
#define LOOM_CPU_X86_64 0
#define LOOM_CPU_AARCH64 0
#endif

namespace loom {

// One round of a spin-wait. x86's pause and AArch64's yield tell the core that this thread
// only polls: a sibling hardware thread gets the core's resources, and leaving the loop does
// not flush the pipeline on a memory-order misprediction. Elsewhere a compiler barrier at
// least makes the loop read memory again each round.
inline void cpuPause() {
#if LOOM_CPU_X86
  __builtin_ia32_pause();
#elif LOOM_CPU_AARCH64
  asm volatile("yield" ::: "memory");
#else
  asm volatile("" ::: "memory");
#endif
}

}  // namespace loom
