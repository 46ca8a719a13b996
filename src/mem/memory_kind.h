// What memory a region or a connection's buffers are, so the code that touches it knows
// whether it may: plain C++17, usable from host and device code alike.
#pragma once

#include <stdint.h>

namespace loom {

enum class MemoryKind : uint8_t {
  kHost = 0,        // host memory (memfds, shared-memory segments): CPU code
  kDevice = 1,      // GPU memory (CUDA IPC): device code
  kHostMapped = 2,  // host memory mapped into the GPU: both
};

}  // namespace loom
