// reduceCopy against an independent reference, for every type x op, on every CPU ISA variant
// this machine runs: nsrc {1,2,3,8} x ndst {1,2} x count {0,1,7,31} x layout (aligned, one
// element off, one byte off, in place on the first or the last destination), plus large odd
// counts of two and three sources.
//
// The data make every result exact and independent of the order of reduction: small
// integers (sums and products stay exact in float), factors and divisors that are powers of
// two for floating-point types. The reference computes in double / 64-bit integers and
// rounds once to the element type, as the contract says.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <type_traits>
#include <vector>

#include "src/kernels/reduce_ops.h"
#include "tests/kernels/kernel_test_util.h"

namespace loom {
namespace {

using test::GuardedBuffer;

// kInPlace: the first destination is the first source (an in-place step's output).
// kLastInPlace: the last destination is the last source, so it is written only after the
// other destinations are (reduceCopy copies them from the first a block at a time).
enum class Layout { kAligned, kElementOffset, kByteOffset, kInPlace, kLastInPlace };
constexpr Layout kLayouts[] = {Layout::kAligned, Layout::kElementOffset, Layout::kByteOffset,
                               Layout::kInPlace, Layout::kLastInPlace};
const char* layoutName(Layout l) {
  switch (l) {
    case Layout::kAligned:
      return "aligned";
    case Layout::kElementOffset:
      return "element-offset";
    case Layout::kByteOffset:
      return "byte-offset";
    case Layout::kInPlace:
      return "in-place";
    case Layout::kLastInPlace:
      return "last-in-place";
  }
  return "?";
}

// The exact value v as a T (v is always representable where it is used).
template <typename T>
T fromDouble(double v) {
  if constexpr (kIsSmallFloat<T>) {
    return T::fromFloat(static_cast<float>(v));
  } else if constexpr (std::is_integral_v<T>) {
    // Wraps modulo 2^bits like the kernels (well defined in C++20).
    return static_cast<T>(static_cast<int64_t>(v));
  } else {
    return static_cast<T>(v);
  }
}

template <typename T>
double toDouble(T x) {
  if constexpr (kIsSmallFloat<T>) {
    return x.toFloat();
  } else {
    return static_cast<double>(x);
  }
}

constexpr ReduceScalar kFloatScalar{0.5, 3};  // premul factor 0.5 / 3; kDivisor for postdiv
constexpr ReduceScalar kDivScalar{4.0, 3};

uint32_t preMaskFor(int nsrc) { return (nsrc % 2 ? 0xa5u : 0x5au) & ((1u << nsrc) - 1); }

// Inputs (as exact small integers) for one op: ranges keep every partial result exact.
template <typename T>
double randomInput(ReduceOpKind op, std::mt19937& rng) {
  constexpr bool kUnsigned = std::is_unsigned_v<T>;
  auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  switch (op) {
    case ReduceOpKind::kProd: {
      static constexpr int kSigned[] = {-2, -1, 1, 2, 0, 1, -1, 2};
      return kUnsigned ? uniform(0, 3) : kSigned[uniform(0, 7)];
    }
    case ReduceOpKind::kMin:
    case ReduceOpKind::kMax:  // any value of T: round-trip so that it is exact
      return toDouble(fromDouble<T>(kUnsigned ? uniform(0, 200) : uniform(-100, 100)));
    case ReduceOpKind::kPreMulSum:  // even, so x * 0.5 stays an integer
      return kUnsigned ? 2 * uniform(0, 3) : 2 * uniform(-3, 3);
    default:
      return kUnsigned ? uniform(0, 6) : uniform(-3, 3);
  }
}

// The expected output element from exact inputs.
template <typename T>
T reference(ReduceOpKind op, const std::vector<double>& in, uint32_t preMask) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    U acc = static_cast<U>(static_cast<int64_t>(in[0]));
    for (size_t s = 0; s < in.size(); ++s) {
      U x = static_cast<U>(static_cast<int64_t>(in[s]));
      if (op == ReduceOpKind::kPreMulSum && ((preMask >> s) & 1)) x = U(x * U(kFloatScalar.i));
      if (s == 0) {
        acc = x;
      } else if (op == ReduceOpKind::kProd) {
        acc = U(acc * x);
      } else if (op == ReduceOpKind::kMin) {
        acc = static_cast<T>(x) < static_cast<T>(acc) ? x : acc;
      } else if (op == ReduceOpKind::kMax) {
        acc = static_cast<T>(x) > static_cast<T>(acc) ? x : acc;
      } else {
        acc = U(acc + x);
      }
    }
    T result = static_cast<T>(acc);
    if (op == ReduceOpKind::kSumPostDiv) result = static_cast<T>(result / T(kDivScalar.i));
    return result;
  } else {
    double acc = 0;
    for (size_t s = 0; s < in.size(); ++s) {
      double x = in[s];
      if (op == ReduceOpKind::kPreMulSum && ((preMask >> s) & 1)) x *= kFloatScalar.f;
      if (s == 0) {
        acc = x;
      } else if (op == ReduceOpKind::kProd) {
        acc *= x;
      } else if (op == ReduceOpKind::kMin) {
        acc = x < acc ? x : acc;
      } else if (op == ReduceOpKind::kMax) {
        acc = x > acc ? x : acc;
      } else {
        acc += x;
      }
    }
    if (op == ReduceOpKind::kSumPostDiv) acc /= kDivScalar.f;
    return fromDouble<T>(acc);
  }
}

// One configuration on the active ISA.
template <typename T>
void runCase(ReduceOpKind op, int nsrc, int ndst, size_t count, Layout layout, uint32_t seed) {
  std::mt19937 rng(seed);
  const size_t bytes = count * sizeof(T);
  const size_t offset = layout == Layout::kElementOffset ? sizeof(T)
                        : layout == Layout::kByteOffset  ? 1
                                                         : 0;
  std::vector<GuardedBuffer> src, dst;
  for (int s = 0; s < nsrc; ++s) src.emplace_back(bytes, offset);
  for (int d = 0; d < ndst; ++d) dst.emplace_back(bytes, offset);
  const uint32_t preMask = preMaskFor(nsrc);

  std::vector<unsigned char> expected(bytes);
  std::vector<double> in(nsrc);
  for (size_t i = 0; i < count; ++i) {
    for (int s = 0; s < nsrc; ++s) {
      in[s] = randomInput<T>(op, rng);
      test::storeElem(src[s].data(), i, fromDouble<T>(in[s]));
    }
    test::storeElem(expected.data(), i, reference<T>(op, in, preMask));
  }

  ReduceCopyArgs args;
  args.nsrc = nsrc;
  args.ndst = ndst;
  args.count = count;
  for (int s = 0; s < nsrc; ++s) args.src[s] = src[s].data();
  for (int d = 0; d < ndst; ++d) args.dst[d] = dst[d].data();
  if (layout == Layout::kInPlace) args.dst[0] = src[0].data();
  if (layout == Layout::kLastInPlace) args.dst[ndst - 1] = src[nsrc - 1].data();
  args.scalar = op == ReduceOpKind::kSumPostDiv ? kDivScalar : kFloatScalar;
  args.preOpOnSource = preMask;
  args.postOp = true;
  reduceCopy(DataTypeOf<T>::kType, op, args);

  for (int d = 0; d < ndst; ++d) {
    const auto* out = static_cast<const unsigned char*>(args.dst[d]);
    const long long bad = test::firstMismatch<T>(out, expected.data(), count);
    ASSERT_EQ(bad, -1) << "dst[" << d << "] element " << bad << " is "
                       << toDouble(test::loadElem<T>(out, bad)) << ", expected "
                       << toDouble(test::loadElem<T>(expected.data(), bad));
    ASSERT_TRUE(dst[d].guardsIntact()) << "dst[" << d << "] written out of bounds";
  }
  for (int s = 1; s < nsrc; ++s) ASSERT_TRUE(src[s].guardsIntact());
}

class ReduceCopyExactTest
    : public testing::TestWithParam<std::tuple<loomDataType_t, ReduceOpKind>> {};

TEST_P(ReduceCopyExactTest, MatchesReferenceOnEveryIsa) {
  const auto [type, op] = GetParam();
  test::IsaGuard restore;
  test::visitDataType(type, [&]<typename T>() {
    for (CpuIsa isa : test::supportedIsas()) {
      setCpuIsaForTesting(isa);
      uint32_t seed = 1;
      for (int nsrc : {1, 2, 3, 8}) {
        for (int ndst : {1, 2}) {
          for (size_t count : {0, 1, 7, 31}) {
            for (Layout layout : kLayouts) {
              SCOPED_TRACE(testing::Message()
                           << cpuIsaName(isa) << " nsrc=" << nsrc << " ndst=" << ndst
                           << " count=" << count << " " << layoutName(layout));
              runCase<T>(op, nsrc, ndst, count, layout, seed++);
              if (HasFatalFailure()) return;
            }
          }
        }
      }
      // Large and odd: many tiles, a ragged tail, misaligned by one byte.
      SCOPED_TRACE(testing::Message() << cpuIsaName(isa) << " large count");
      runCase<T>(op, 3, 2, 1000003, Layout::kByteOffset, 99);
      if (HasFatalFailure()) return;
      // Two sources (the direct path for ops without pre- or post-op), over many copy blocks.
      for (Layout layout : {Layout::kAligned, Layout::kInPlace, Layout::kLastInPlace}) {
        SCOPED_TRACE(testing::Message() << "two sources, " << layoutName(layout));
        runCase<T>(op, 2, 3, 100003, layout, 100);
        if (HasFatalFailure()) return;
      }
    }
  });
}

INSTANTIATE_TEST_SUITE_P(AllTypesAndOps, ReduceCopyExactTest,
                         testing::Combine(testing::ValuesIn(test::allDataTypes()),
                                          testing::ValuesIn(test::allOpKinds())),
                         [](const auto& info) {
                           return test::caseName(std::get<0>(info.param), std::get<1>(info.param));
                         });

}  // namespace
}  // namespace loom
