#include "src/exec/cpu/staging.h"

#include "src/base/error.h"
#include "src/base/logging.h"

namespace loom {
namespace {

struct StagingRegion {
  MemRegion region;
  size_t refusedBytes = 0;  // a request of this many bytes or more failed: not tried again
  ~StagingRegion() {
    if (region.base == 0) return;
    try {
      freeRegion(reinterpret_cast<void*>(region.base));
    } catch (const Error&) {  // a destructor must not throw; the pages go with the process
    }
  }
};

}  // namespace

const MemRegion* threadStagingRegion(size_t bytes) {
  thread_local StagingRegion staging;
  MemRegion& r = staging.region;
  if (r.base != 0 && r.size >= bytes) return &r;
  if (staging.refusedBytes != 0 && bytes >= staging.refusedBytes) return nullptr;
  if (r.base != 0) {
    freeRegion(reinterpret_cast<void*>(r.base));
    r = MemRegion{};
  }
  // Whole powers of two from 64 KiB: calls that grow a little at a time replace it seldom.
  size_t size = size_t{64} << 10;
  while (size < bytes) size *= 2;
  try {
    r = allocRegion(size);
  } catch (const Error& e) {
    // Staging only saves copies: without it the call fills each peer's slot.
    staging.refusedBytes = bytes;
    LOOM_INFO(kLogShm, "no staging region of ", size, " bytes (", e.what(),
              "); this thread's calls of that size copy into each peer's slot");
    return nullptr;
  }
  return &r;
}

}  // namespace loom
