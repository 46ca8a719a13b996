// Reductions as functors, shared by the CPU loops and the CUDA kernels (host + device).
//
// Every functor works on an accumulator type Acc: float for the 16- and 8-bit float types
// (each input is widened exactly, the result is rounded once per output element), the
// element type itself otherwise. Interface:
//   explicit Func(const ReduceScalar&)   reads the op's scalar, if it has one
//   Acc operator()(Acc a, Acc b)         combines the running value a with the next source b
//   Acc preOp(Acc x), kHasPreOp          applied to the sources named in preOpOnSource
//   Acc postOp(Acc x), kHasPostOp        applied to the result when ReduceCopyArgs::postOp
//
// Semantics that callers can rely on:
//   - Integer sum/prod/premul wrap modulo 2^bits, signed types included: the arithmetic is
//     done in the unsigned type, so there is no undefined behaviour.
//   - Floating-point sum/prod/premul/div: a NaN result is always the canonical quiet NaN
//     (0x7fc00000 in float; see quietNaN), the one way to get the same bits on every path.
//   - Min/max propagate NaN (the first NaN in source order wins, with its payload), so
//     corrupted data stays visible instead of being silently dropped as fmin/fmax would.
//     Otherwise, on equality (e.g. -0 vs +0) the earlier source wins.
//   - A single source without pre/post-op is copied bit for bit (float32/64, integers; the
//     small float types pass through float, which quiets a signalling NaN).
//   - Integer SumPostDiv truncates towards zero (C division), like NCCL's integer average.
//   - No FMA contraction anywhere: x*s+acc is rounded twice on every CPU ISA and on the GPU
//     (the CPU files build with -ffp-contract=off; device code uses the _rn intrinsics), so
//     all paths give the same bits.
#pragma once

#include <stdint.h>

#include <type_traits>

#include "src/kernels/datatype_traits.h"
#include "src/kernels/reduce_copy_args.h"

namespace loom {
inline namespace LOOM_ISA_NAMESPACE {

template <typename T>
using AccT = typename std::conditional<kIsSmallFloat<T>, float, T>::type;

template <typename T>
LOOM_HOST_DEVICE LOOM_INLINE AccT<T> toAcc(T x) {
  if constexpr (kIsSmallFloat<T>) {
    return x.toFloat();
  } else {
    return x;
  }
}

template <typename T>
LOOM_HOST_DEVICE LOOM_INLINE T fromAcc(AccT<T> x) {
  if constexpr (kIsSmallFloat<T>) {
    return T::fromFloat(x);
  } else {
    return x;
  }
}

// Integer arithmetic in the unsigned type of the promoted operands (int8 -> unsigned int):
// wraps, never overflows a signed type, never promotes back to int.
template <typename A>
using WrapType = std::make_unsigned_t<decltype(A() + A())>;

// The canonical quiet NaN (positive, payload 0). Which NaN an arithmetic operation returns
// differs between CPUs (x86 keeps the first operand's payload, and a compiler may swap the
// operands of a commutative operation) and GPUs (which return their own canonical NaN), so
// arithmetic here replaces every NaN result with this one to give the same bits everywhere.
template <typename A>
LOOM_HOST_DEVICE LOOM_INLINE A quietNaN() {
#if defined(__CUDA_ARCH__)
  if constexpr (std::is_same_v<A, float>) {
    return __uint_as_float(0x7fc00000u);
  } else {
    return __longlong_as_double(0x7ff8000000000000ll);
  }
#else
  if constexpr (std::is_same_v<A, float>) {
    return __builtin_nanf("");
  } else {
    return __builtin_nan("");
  }
#endif
}

template <typename A>
LOOM_HOST_DEVICE LOOM_INLINE A canonicalNaN(A x) {
  return x != x ? quietNaN<A>() : x;
}

template <typename A>
LOOM_HOST_DEVICE LOOM_INLINE A addOp(A a, A b) {
  if constexpr (std::is_integral_v<A>) {
    return static_cast<A>(static_cast<WrapType<A>>(a) + static_cast<WrapType<A>>(b));
  } else {
#if defined(__CUDA_ARCH__)
    if constexpr (std::is_same_v<A, float>) return canonicalNaN(__fadd_rn(a, b));
    if constexpr (std::is_same_v<A, double>) return canonicalNaN(__dadd_rn(a, b));
#endif
    return canonicalNaN(a + b);
  }
}

template <typename A>
LOOM_HOST_DEVICE LOOM_INLINE A mulOp(A a, A b) {
  if constexpr (std::is_integral_v<A>) {
    return static_cast<A>(static_cast<WrapType<A>>(a) * static_cast<WrapType<A>>(b));
  } else {
#if defined(__CUDA_ARCH__)
    if constexpr (std::is_same_v<A, float>) return canonicalNaN(__fmul_rn(a, b));
    if constexpr (std::is_same_v<A, double>) return canonicalNaN(__dmul_rn(a, b));
#endif
    return canonicalNaN(a * b);
  }
}

template <typename A>
LOOM_HOST_DEVICE LOOM_INLINE A minOp(A a, A b) {
  if constexpr (std::is_floating_point_v<A>) {
    return a != a ? a : (b != b ? b : (b < a ? b : a));
  } else {
    return b < a ? b : a;
  }
}

template <typename A>
LOOM_HOST_DEVICE LOOM_INLINE A maxOp(A a, A b) {
  if constexpr (std::is_floating_point_v<A>) {
    return a != a ? a : (b != b ? b : (b > a ? b : a));
  } else {
    return b > a ? b : a;
  }
}

// The op's scalar as an accumulator value: a double rounds once to Acc (float for the small
// types); an integer wraps to the element type.
template <typename A>
LOOM_HOST_DEVICE LOOM_INLINE A scalarAs(const ReduceScalar& s) {
  if constexpr (std::is_integral_v<A>) {
    return static_cast<A>(static_cast<uint64_t>(s.i));
  } else {
    return static_cast<A>(s.f);
  }
}

// Base for the ops without pre- or post-op.
template <typename T>
struct FuncBase {
  using Acc = AccT<T>;
  static constexpr bool kHasPreOp = false;
  static constexpr bool kHasPostOp = false;
  LOOM_HOST_DEVICE Acc preOp(Acc x) const { return x; }
  LOOM_HOST_DEVICE Acc postOp(Acc x) const { return x; }
};

#define LOOM_DEFINE_BINARY_FUNC(Name, fn)                                                \
  template <typename T>                                                                  \
  struct Name : FuncBase<T> {                                                            \
    using Acc = AccT<T>;                                                                 \
    LOOM_HOST_DEVICE explicit Name(const ReduceScalar&) {}                               \
    LOOM_HOST_DEVICE LOOM_INLINE Acc operator()(Acc a, Acc b) const { return fn(a, b); } \
  }

LOOM_DEFINE_BINARY_FUNC(FuncSum, addOp);
LOOM_DEFINE_BINARY_FUNC(FuncProd, mulOp);
LOOM_DEFINE_BINARY_FUNC(FuncMin, minOp);
LOOM_DEFINE_BINARY_FUNC(FuncMax, maxOp);
#undef LOOM_DEFINE_BINARY_FUNC

// Sum of inputs each multiplied by a scalar: user PreMulSum ops (loomRedOpCreatePreMulSum). The
// scalar applies to the local input before it enters the ring; peers' data already has it.
template <typename T>
struct FuncPreMulSum : FuncBase<T> {
  using Acc = AccT<T>;
  static constexpr bool kHasPreOp = true;
  Acc scale;
  LOOM_HOST_DEVICE explicit FuncPreMulSum(const ReduceScalar& s) : scale(scalarAs<Acc>(s)) {}
  LOOM_HOST_DEVICE LOOM_INLINE Acc preOp(Acc x) const { return mulOp(x, scale); }
  LOOM_HOST_DEVICE LOOM_INLINE Acc operator()(Acc a, Acc b) const { return addOp(a, b); }
};

// Sum, then a division of the final result: average (divisor n) for every type. Floating-point
// types divide by the scalar's `f`, integer types by its `i`.
template <typename T>
struct FuncSumPostDiv : FuncBase<T> {
  using Acc = AccT<T>;
  static constexpr bool kHasPostOp = true;
  Acc divisor;         // floating-point types
  int64_t divisorInt;  // integer types; >= 1, checked by the dispatcher
  LOOM_HOST_DEVICE explicit FuncSumPostDiv(const ReduceScalar& s)
      : divisor(scalarAs<Acc>(s)), divisorInt(s.i) {}
  LOOM_HOST_DEVICE LOOM_INLINE Acc operator()(Acc a, Acc b) const { return addOp(a, b); }
  LOOM_HOST_DEVICE LOOM_INLINE Acc postOp(Acc x) const {
    // Divide in 64 bits: the divisor may not fit the element type, and the quotient of a
    // value by a positive divisor always fits back.
    if constexpr (std::is_integral_v<Acc> && std::is_signed_v<Acc>) {
      return static_cast<Acc>(static_cast<int64_t>(x) / divisorInt);
    } else if constexpr (std::is_integral_v<Acc>) {
      return static_cast<Acc>(static_cast<uint64_t>(x) / static_cast<uint64_t>(divisorInt));
    } else {
#if defined(__CUDA_ARCH__)
      if constexpr (std::is_same_v<Acc, float>) return canonicalNaN(__fdiv_rn(x, divisor));
      if constexpr (std::is_same_v<Acc, double>) return canonicalNaN(__ddiv_rn(x, divisor));
#endif
      return canonicalNaN(x / divisor);
    }
  }
};

// reduceOpHasPreOp and reduceOpHasPostOp (reduce_copy_args.h) name the same ops as the traits.
#define LOOM_REDUCE_OP(kind, Func, name)                                              \
  static_assert(reduceOpHasPreOp(ReduceOpKind::kind) == Func<float>::kHasPreOp &&     \
                    reduceOpHasPostOp(ReduceOpKind::kind) == Func<float>::kHasPostOp, \
                "reduceOpHasPreOp / reduceOpHasPostOp disagree with " name "'s traits");
#include "src/kernels/reduce_op_table.def"

}  // namespace LOOM_ISA_NAMESPACE
}  // namespace loom
