// crossCoreCopy: the same bytes as memcpy for sizes around its block (0, 1, a line, a page,
// one block exactly, one block and a byte, several blocks and an odd tail), at aligned and odd
// offsets of source and destination, with nothing written outside the destination.
#include "src/kernels/cross_core_copy.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "tests/kernels/kernel_test_util.h"

namespace loom {
namespace {

using test::GuardedBuffer;

constexpr size_t kSizes[] = {0,
                             1,
                             63,
                             64,
                             4096,
                             kCrossCoreBlockBytes - 1,
                             kCrossCoreBlockBytes,
                             kCrossCoreBlockBytes + 1,
                             3 * kCrossCoreBlockBytes + 4096 + 37};
constexpr size_t kOffsets[] = {0, 1, 8, 33};

TEST(CrossCoreCopy, CopiesEveryByteAndNothingElse) {
  for (size_t bytes : kSizes) {
    for (size_t srcOffset : kOffsets) {
      for (size_t dstOffset : kOffsets) {
        SCOPED_TRACE(testing::Message() << bytes << " bytes, source offset " << srcOffset
                                        << ", destination offset " << dstOffset);
        GuardedBuffer src(bytes, srcOffset), dst(bytes, dstOffset);
        // A byte pattern whose period (251, prime) is no divisor of a line or a page, so a byte
        // copied from the wrong line or page differs.
        for (size_t i = 0; i < bytes; ++i) src.data()[i] = static_cast<unsigned char>(i % 251);
        crossCoreCopy(dst.data(), src.data(), bytes);
        for (size_t i = 0; i < bytes; ++i) {
          ASSERT_EQ(dst.data()[i], static_cast<unsigned char>(i % 251)) << "byte " << i;
        }
        EXPECT_TRUE(dst.guardsIntact());
        EXPECT_TRUE(src.guardsIntact());
      }
    }
  }
}

}  // namespace
}  // namespace loom
