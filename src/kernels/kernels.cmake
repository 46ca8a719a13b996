# Reduce/copy primitives (src/kernels). Included from the top-level CMakeLists.txt right
# after loom_sources is defined.
#
# The CPU loop is compiled once per instruction set; each file gets only its own -m flags, and
# the dispatcher (reduce_copy.cc) picks one at run time. -ffp-contract=off on all of them: an
# FMA would round x*s+acc once instead of twice and break bit-identical results across ISAs.
# The loops rely on auto-vectorisation, which GCC 12's -O2 ("very cheap" cost model) mostly
# refuses for loops of unknown length; the dynamic cost model vectorises them (no effect at
# -O0). 256-bit vectors in the AVX-512 file too (GCC's own tuning for AVX-512 servers): 512-bit
# ones are no faster on streams, slower on buffers that are not 64-byte aligned, and lower the
# clock on some Xeons. AVX-512 still brings masks and 32 registers.
set(loom_kernels_dir ${CMAKE_CURRENT_LIST_DIR})
set(loom_kernels_cpu_flags -ffp-contract=off -ftree-vectorize -fvect-cost-model=dynamic)
list(APPEND loom_sources
  ${loom_kernels_dir}/cross_core_copy.cc
  ${loom_kernels_dir}/reduce_copy.cc
  ${loom_kernels_dir}/reduce_copy_generic.cc)
set_source_files_properties(${loom_kernels_dir}/reduce_copy_generic.cc
  PROPERTIES COMPILE_OPTIONS "${loom_kernels_cpu_flags}")

# The AVX variants exist on x86-64 only; elsewhere (and with LOOM_FORCE_GENERIC_ARCH) the
# dispatcher has the generic table alone (LOOM_CPU_X86_64 in src/base/cpu_arch.h agrees).
if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64)$" AND NOT LOOM_FORCE_GENERIC_ARCH)
  list(APPEND loom_sources
    ${loom_kernels_dir}/reduce_copy_avx2.cc
    ${loom_kernels_dir}/reduce_copy_avx512.cc)
  set_source_files_properties(${loom_kernels_dir}/reduce_copy_avx2.cc
    PROPERTIES COMPILE_OPTIONS "-mavx2;-mfma;-mf16c;${loom_kernels_cpu_flags}")
  set_source_files_properties(${loom_kernels_dir}/reduce_copy_avx512.cc
    PROPERTIES COMPILE_OPTIONS
      "-mavx512f;-mavx512bw;-mavx512vl;-mavx2;-mfma;-mf16c;-mprefer-vector-width=256;${loom_kernels_cpu_flags}")
endif()

if(LOOM_WITH_CUDA)
  list(APPEND loom_sources ${loom_kernels_dir}/cuda/reduce_copy_instances.cu)
endif()
