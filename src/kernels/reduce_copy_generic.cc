// reduceCopy for every type x op, built for the baseline x86-64 (or any other) CPU: the
// fallback that runs everywhere. Symbols live in loom::isa_generic (see host_device.h).
#define LOOM_ISA_NAMESPACE isa_generic
#include "src/kernels/reduce_copy.h"

namespace loom {
constinit const ReduceCopyTable kReduceCopyTableGeneric = makeReduceCopyTable();
}  // namespace loom
