// reduceCopy for every type x op, built with AVX-512 F/BW/VL (kernels.cmake): Skylake-SP and
// later, Zen 4. Symbols live in loom::isa_avx512 (see host_device.h); the dispatcher only
// calls them after checking the CPU.
#if !defined(__AVX512F__) || !defined(__AVX512BW__) || !defined(__AVX512VL__)
#error "reduce_copy_avx512.cc needs -mavx512f -mavx512bw -mavx512vl (see kernels.cmake)"
#endif
#define LOOM_ISA_NAMESPACE isa_avx512
#include "src/kernels/reduce_copy.h"

namespace loom {
constinit const ReduceCopyTable kReduceCopyTableAvx512 = makeReduceCopyTable();
}  // namespace loom
