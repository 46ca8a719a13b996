// reduceCopy for every type x op, built with -mavx2 -mfma -mf16c (kernels.cmake): Haswell and
// later, Zen. Symbols live in loom::isa_avx2 (see host_device.h); the dispatcher only calls
// them after checking the CPU.
#if !defined(__AVX2__) || !defined(__FMA__) || !defined(__F16C__)
#error "reduce_copy_avx2.cc needs -mavx2 -mfma -mf16c (set in src/kernels/kernels.cmake)"
#endif
#define LOOM_ISA_NAMESPACE isa_avx2
#include "src/kernels/reduce_copy.h"

namespace loom {
constinit const ReduceCopyTable kReduceCopyTableAvx2 = makeReduceCopyTable();
}  // namespace loom
