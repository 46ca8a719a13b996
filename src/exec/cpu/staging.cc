#include "src/exec/cpu/staging.h"

namespace loom {
namespace {

struct StagingRegion {
  MemRegion region;
  ~StagingRegion() {
    if (region.base != 0) freeRegion(reinterpret_cast<void*>(region.base));
  }
};

}  // namespace

const MemRegion* threadStagingRegion(size_t bytes) {
  thread_local StagingRegion staging;
  MemRegion& r = staging.region;
  if (r.base != 0 && r.size >= bytes) return &r;
  if (r.base != 0) {
    freeRegion(reinterpret_cast<void*>(r.base));
    r = MemRegion{};
  }
  // Whole powers of two from 64 KiB: calls that grow a little at a time replace it seldom.
  size_t size = size_t{64} << 10;
  while (size < bytes) size *= 2;
  r = allocRegion(size);
  return &r;
}

}  // namespace loom
