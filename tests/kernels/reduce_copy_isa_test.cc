// Every CPU ISA variant of reduceCopy gives the same bits as the per-element definition
// (reduceCopyElement, the code the CUDA kernel runs) on random data: random bit patterns,
// so NaN, infinities, subnormals and -0 of the float types included, inexact scalars, every
// type x op, any source count, misaligned buffers, in place, and with crossCorePages (the walk
// 8 pages at once) over whole blocks and a tail.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <limits>
#include <random>
#include <vector>

#include "src/base/error.h"
#include "src/kernels/reduce_copy.h"
#include "src/kernels/reduce_copy_dispatch.h"
#include "tests/kernels/kernel_test_util.h"

namespace loom {
namespace {

// A pair step (two sources, neither pre- nor post-op) takes reduceCopy's pair path, which walks
// 8 pages at once with crossCorePages; any other step of 2 or more sources (`nsrc`, random pre-
// and post-ops) takes the accumulator tile, which the executor flags alike and which must stay
// right with the flag. `inPlace` reduces into the first source, as a ring step does into its
// output.
struct IsaCase {
  bool pair = false;
  bool inPlace = false;
  int nsrc = 0;  // 0: 1 to kMaxSources at random
};

template <typename T>
void compareIsas(ReduceOpKind op, size_t count, uint64_t seed, IsaCase shape = {}) {
  std::mt19937_64 rng(seed);
  const int nsrc = shape.pair       ? 2
                   : shape.nsrc > 0 ? shape.nsrc
                                    : 1 + static_cast<int>(rng() % kMaxSources);
  std::vector<std::vector<T>> src(nsrc, std::vector<T>(count));
  for (auto& s : src) {
    for (T& x : s) x = test::randomValue<T>(rng);
  }
  ReduceCopyArgs args;
  args.nsrc = nsrc;
  args.ndst = 2;
  args.count = count;
  args.scalar = ReduceScalar{1.0 / 3.0, static_cast<int64_t>(1 + rng() % 9)};
  args.preOpOnSource = shape.pair ? 0 : static_cast<uint32_t>(rng());
  args.postOp = shape.pair ? false : rng() % 2;
  for (int s = 0; s < nsrc; ++s) args.src[s] = src[s].data();

  // The definition, element by element (aligned typed pointers).
  std::vector<T> expected(count);
  switch (op) {
#define LOOM_REDUCE_OP(kind, Func, name)                                 \
  case ReduceOpKind::kind:                                               \
    for (size_t i = 0; i < count; ++i) {                                 \
      expected[i] = reduceCopyElement<T>(Func<T>(args.scalar), args, i); \
    }                                                                    \
    break;
#include "src/kernels/reduce_op_table.def"
    default:
      FAIL();
  }

  // Each ISA, from misaligned copies of the sources into misaligned destinations.
  std::vector<test::GuardedBuffer> in, out;
  for (int s = 0; s < nsrc; ++s) {
    in.emplace_back(count * sizeof(T), 3);
    std::memcpy(in.back().data(), src[s].data(), count * sizeof(T));
    args.src[s] = in.back().data();
  }
  for (int d = 0; d < 2; ++d) out.emplace_back(count * sizeof(T), 5);
  args.dst[0] = out[0].data();
  args.dst[1] = out[1].data();
  // Every way of writing: plain stores, streaming ones (misaligned heads and tails) to every
  // destination, and to one of the two only (a slot streamed, the output not, or the reverse);
  // both walks: page by page, and 8 pages at once.
  for (CpuIsa isa : test::supportedIsas()) {
    for (uint32_t stream : {0u, ~0u, 1u, 2u}) {
      for (bool pages : {false, true}) {
        setCpuIsaForTesting(isa);
        args.streamDestinations = stream;
        args.crossCorePages = pages;
        std::memset(out[1].data(), 0, count * sizeof(T));
        if (shape.inPlace) {
          std::memcpy(out[0].data(), src[0].data(), count * sizeof(T));
          args.src[0] = out[0].data();
        } else {
          std::memset(out[0].data(), 0, count * sizeof(T));
        }
        reduceCopy(DataTypeOf<T>::kType, op, args);
        for (int d = 0; d < 2; ++d) {
          const long long bad = test::firstMismatch<T>(
              out[d].data(), reinterpret_cast<const unsigned char*>(expected.data()), count);
          ASSERT_EQ(bad, -1) << cpuIsaName(isa) << " streaming mask " << stream
                             << (pages ? " 8 pages at once" : "")
                             << (shape.inPlace ? " in place" : "") << " dst[" << d
                             << "] differs at element " << bad << " (nsrc " << nsrc << ", count "
                             << count << ")";
          ASSERT_TRUE(out[d].guardsIntact());
        }
      }
    }
  }
}

class ReduceCopyIsaTest : public testing::TestWithParam<std::tuple<loomDataType_t, ReduceOpKind>> {
};

TEST_P(ReduceCopyIsaTest, AllIsasBitIdenticalToDefinition) {
  const auto [type, op] = GetParam();
  test::IsaGuard restore;
  test::visitDataType(type, [&]<typename T>() {
    uint64_t seed = 1000 * static_cast<uint64_t>(type) + static_cast<uint64_t>(op);
    for (size_t count = 1; count <= 40; ++count) {
      compareIsas<T>(op, count, seed++);
      if (HasFatalFailure()) return;
    }
    for (int rep = 0; rep < 8; ++rep) {
      compareIsas<T>(op, 4099, seed++);  // several tiles and a tail
      if (HasFatalFailure()) return;
    }
    // Two whole 8-page blocks and a tail, out of place and in place: the pair path, and the
    // accumulator tile with two and with three sources.
    const size_t blocks = 2 * kCrossCoreBlockBytes / sizeof(T) + 37;
    for (bool inPlace : {false, true}) {
      compareIsas<T>(op, blocks, seed++, {.pair = true, .inPlace = inPlace});
      if (HasFatalFailure()) return;
      for (int nsrc : {2, 3}) {
        compareIsas<T>(op, blocks, seed++, {.inPlace = inPlace, .nsrc = nsrc});
        if (HasFatalFailure()) return;
      }
    }
  });
}

INSTANTIATE_TEST_SUITE_P(AllTypesAndOps, ReduceCopyIsaTest,
                         testing::Combine(testing::ValuesIn(test::allDataTypes()),
                                          testing::ValuesIn(test::allOpKinds())),
                         [](const auto& info) {
                           return test::caseName(std::get<0>(info.param), std::get<1>(info.param));
                         });

// streamCopy is a byte copy: every length around its 16- and 64-byte blocks, every
// misalignment of source and destination, nothing written outside.
TEST(StreamCopy, CopiesEveryByteAndNothingElse) {
  std::mt19937_64 rng(7);
  for (size_t bytes : {size_t{0}, size_t{1}, size_t{15}, size_t{16}, size_t{17}, size_t{63},
                       size_t{64}, size_t{65}, size_t{127}, size_t{200}, size_t{70001}}) {
    for (size_t srcOffset : {0, 1, 8, 13}) {
      for (size_t dstOffset = 0; dstOffset < 20; ++dstOffset) {
        test::GuardedBuffer src(bytes, srcOffset), dst(bytes, dstOffset);
        for (size_t i = 0; i < bytes; ++i) src.data()[i] = static_cast<unsigned char>(rng());
        streamCopy(dst.data(), src.data(), bytes);
        ASSERT_EQ(std::memcmp(dst.data(), src.data(), bytes), 0)
            << bytes << " bytes, offsets " << srcOffset << "/" << dstOffset;
        ASSERT_TRUE(dst.guardsIntact()) << bytes << " bytes, dst offset " << dstOffset;
      }
    }
  }
}

TEST(CpuIsa, DispatchSelectsSupportedVariants) {
  test::IsaGuard restore;
  EXPECT_TRUE(cpuSupports(CpuIsa::kGeneric));
  EXPECT_TRUE(cpuSupports(bestCpuIsa()));
  EXPECT_EQ(activeCpuIsa(), bestCpuIsa());
  for (CpuIsa isa : kAllCpuIsas) {
    if (cpuSupports(isa)) {
      setCpuIsaForTesting(isa);
      EXPECT_EQ(activeCpuIsa(), isa);
    } else {
      EXPECT_THROW(setCpuIsaForTesting(isa), InvalidArgument) << cpuIsaName(isa);
    }
  }
  EXPECT_THROW(setCpuIsaForTesting(static_cast<CpuIsa>(7)), InvalidArgument);
}

}  // namespace
}  // namespace loom
