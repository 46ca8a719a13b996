#include "src/kernels/cross_core_copy.h"

#include <cstring>

namespace loom {

void crossCoreCopy(void* dst, const void* src, size_t bytes) {
  auto* to = static_cast<unsigned char*>(dst);
  const auto* from = static_cast<const unsigned char*>(src);
  size_t done = 0;
  for (; done + kCrossCoreBlockBytes <= bytes; done += kCrossCoreBlockBytes) {
    for (size_t line = 0; line < kCrossCorePageBytes; line += kCrossCoreLineBytes) {
      for (size_t page = 0; page < kCrossCorePages; ++page) {
        const size_t at = done + page * kCrossCorePageBytes + line;
        // A fixed size: a few vector moves, inlined.
        std::memcpy(to + at, from + at, kCrossCoreLineBytes);
      }
    }
  }
  if (done < bytes) std::memcpy(to + done, from + done, bytes - done);
}

}  // namespace loom
