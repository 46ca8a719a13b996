// The CPU variants of reduceCopy, one per instruction set, as tables of function pointers
// indexed [loomDataType_t][ReduceOpKind]. Each table is defined by its own file
// (reduce_copy_{generic,avx2,avx512}.cc, built with that ISA's flags); only the dispatcher
// (reduce_copy.cc) reads them, after checking that the CPU runs that ISA.
#pragma once

#include "loom/loom.h"
#include "src/base/cpu_arch.h"
#include "src/kernels/reduce_copy_args.h"

namespace loom {

using ReduceCopyFn = void (*)(const ReduceCopyArgs&);

struct ReduceCopyTable {
  ReduceCopyFn fn[loomNumTypes][kNumReduceOps];
};

extern const ReduceCopyTable kReduceCopyTableGeneric;
#if LOOM_CPU_X86_64
extern const ReduceCopyTable kReduceCopyTableAvx2;
extern const ReduceCopyTable kReduceCopyTableAvx512;
#endif

}  // namespace loom
