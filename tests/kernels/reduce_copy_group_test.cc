// reduceCopyGroup, the CUDA executor's reduction (16-byte packs shared by a group of
// threads), gives the bits of the per-element definition (reduceCopyElement) for every
// type x op: random bit patterns, any source count, every element offset from a 16-byte
// boundary shared by all operands (packs after a head) and offsets that differ (element by
// element), group sizes that do and do not divide the pack count, nothing written outside.
// The group's threads run one after another here, as the simulated CUDA runtime runs them.
#include "src/kernels/reduce_copy_group.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "tests/kernels/kernel_test_util.h"

namespace loom {
namespace {

struct Layout {
  size_t srcOffset;  // bytes past a 64-byte boundary, every source
  size_t dstOffset;  // the same for every destination
};

template <typename T, typename Op>
void compareGroup(const Op& op, ReduceCopyArgs args, const std::vector<T>& expected,
                  const std::vector<std::vector<T>>& src, Layout layout, size_t threads) {
  const size_t bytes = args.count * sizeof(T);
  std::vector<test::GuardedBuffer> in, out;
  for (int s = 0; s < args.nsrc; ++s) {
    in.emplace_back(bytes, layout.srcOffset);
    if (bytes != 0) std::memcpy(in.back().data(), src[s].data(), bytes);
    args.src[s] = in.back().data();
  }
  for (int d = 0; d < args.ndst; ++d) {
    out.emplace_back(bytes, layout.dstOffset);
    args.dst[d] = out.back().data();
  }
  for (size_t t = 0; t < threads; ++t) reduceCopyGroup<T>(op, args, t, threads);
  for (int d = 0; d < args.ndst; ++d) {
    const long long bad = test::firstMismatch<T>(
        out[d].data(), reinterpret_cast<const unsigned char*>(expected.data()), args.count);
    ASSERT_EQ(bad, -1) << "dst[" << d << "] differs at element " << bad << " (nsrc " << args.nsrc
                       << ", count " << args.count << ", offsets " << layout.srcOffset << "/"
                       << layout.dstOffset << ", " << threads << " threads)";
    ASSERT_TRUE(out[d].guardsIntact())
        << "count " << args.count << ", offsets " << layout.srcOffset << "/" << layout.dstOffset;
  }
}

template <typename T, typename Op>
void checkCount(size_t count, uint64_t seed) {
  std::mt19937_64 rng(seed);
  ReduceCopyArgs args;
  args.nsrc = 1 + static_cast<int>(rng() % kMaxSources);
  args.ndst = 1 + static_cast<int>(rng() % 2);
  args.count = count;
  args.scalar = ReduceScalar{1.0 / 3.0, static_cast<int64_t>(1 + rng() % 9)};
  args.preOpOnSource = static_cast<uint32_t>(rng());
  args.postOp = rng() % 2;
  std::vector<std::vector<T>> src(args.nsrc, std::vector<T>(count));
  for (auto& s : src)
    for (T& x : s) x = test::randomValue<T>(rng);

  const Op op(args.scalar);
  ReduceCopyArgs typed = args;  // the definition, from aligned typed vectors
  for (int s = 0; s < args.nsrc; ++s) typed.src[s] = src[s].data();
  std::vector<T> expected(count);
  for (size_t i = 0; i < count; ++i) expected[i] = reduceCopyElement<T>(op, typed, i);

  for (size_t threads : {size_t{1}, size_t{3}, size_t{32}}) {
    for (size_t offset = 0; offset < 2 * kPackBytes; offset += sizeof(T)) {
      compareGroup<T>(op, args, expected, src, Layout{offset, offset}, threads);  // packs
      if (testing::Test::HasFatalFailure()) return;
    }
    compareGroup<T>(op, args, expected, src, Layout{0, sizeof(T)}, threads);  // one by one
    if (testing::Test::HasFatalFailure()) return;
  }
}

class ReduceCopyGroupTest
    : public testing::TestWithParam<std::tuple<loomDataType_t, ReduceOpKind>> {};

TEST_P(ReduceCopyGroupTest, BitIdenticalToTheDefinition) {
  const auto [type, op] = GetParam();
  test::visitDataType(type, [&]<typename T>() {
    uint64_t seed = 5000 * static_cast<uint64_t>(type) + static_cast<uint64_t>(op);
    switch (op) {
#define LOOM_REDUCE_OP(kind, Func, name)                                      \
  case ReduceOpKind::kind:                                                    \
    for (size_t count : {0, 1, 2, 3, 7, 15, 16, 17, 31, 33, 64, 100, 4099}) { \
      checkCount<T, Func<T>>(count, seed++);                                  \
      if (HasFatalFailure()) return;                                          \
    }                                                                         \
    break;
#include "src/kernels/reduce_op_table.def"
      default:
        FAIL();
    }
  });
}

INSTANTIATE_TEST_SUITE_P(AllTypesAndOps, ReduceCopyGroupTest,
                         testing::Combine(testing::ValuesIn(test::allDataTypes()),
                                          testing::ValuesIn(test::allOpKinds())),
                         [](const auto& info) {
                           return test::caseName(std::get<0>(info.param), std::get<1>(info.param));
                         });

// The head before the first 16-byte boundary is the same number of elements for every
// operand, or the whole count where operands sit at different offsets.
TEST(ReduceCopyGroup, ElementsBeforePacks) {
  alignas(64) static unsigned char buffer[256];
  ReduceCopyArgs args;
  args.nsrc = 2;
  args.ndst = 1;
  args.count = 100;
  args.src[0] = buffer + 4;
  args.src[1] = buffer + 68;
  args.dst[0] = buffer + 132;
  EXPECT_EQ(elementsBeforePacks(args, 4), 3u);  // 12 bytes to the boundary
  args.dst[0] = buffer + 128;
  EXPECT_EQ(elementsBeforePacks(args, 4), 100u);
  args.dst[0] = buffer + 132;
  args.count = 2;
  EXPECT_EQ(elementsBeforePacks(args, 4), 2u);  // fewer elements than the head
  args.src[0] = buffer + 64;
  args.src[1] = buffer + 128;
  args.dst[0] = buffer + 192;
  EXPECT_EQ(elementsBeforePacks(args, 8), 0u);
}

}  // namespace
}  // namespace loom
