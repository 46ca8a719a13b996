// reduceCopy<T, Op>: N sources -> M destinations in one pass, the primitive under every
// reduce/copy step of every collective (a copy is a Sum with one source).
//
// What one output element is, on every path (CPU of any ISA, CUDA):
//   acc = pre_0(src[0][i]);  acc = op(acc, pre_s(src[s][i])) for s = 1..nsrc-1 in order;
//   if (postOp) acc = op.postOp(acc);  dst[d][i] = round(acc) for every d
// where pre_s is op.preOp when bit s of preOpOnSource is set and identity otherwise.
// reduceCopyElement spells this out per element (the CUDA kernel uses it as is); the CPU
// version below computes exactly the same, a tile at a time, so that the compiler vectorises
// each step. Same operations in the same order, so the bits agree across all paths.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include <type_traits>

#include "src/kernels/reduce_copy_args.h"
#include "src/kernels/reduce_ops.h"

namespace loom {
inline namespace LOOM_ISA_NAMESPACE {

template <typename T, typename Op>
LOOM_HOST_DEVICE LOOM_INLINE typename Op::Acc reduceSource(const Op& op, const ReduceCopyArgs& args,
                                                           int s, size_t i) {
  typename Op::Acc x = toAcc(static_cast<const T*>(args.src[s])[i]);
  if constexpr (Op::kHasPreOp) {
    if ((args.preOpOnSource >> s) & 1u) x = op.preOp(x);
  }
  return x;
}

// One output element; pointers must be element-aligned (the CPU loop below has no such rule).
template <typename T, typename Op>
LOOM_HOST_DEVICE LOOM_INLINE T reduceCopyElement(const Op& op, const ReduceCopyArgs& args,
                                                 size_t i) {
  typename Op::Acc acc = reduceSource<T>(op, args, 0, i);
  for (int s = 1; s < args.nsrc; ++s) acc = op(acc, reduceSource<T>(op, args, s, i));
  if constexpr (Op::kHasPostOp) {
    if (args.postOp) acc = op.postOp(acc);
  }
  return fromAcc<T>(acc);
}

}  // namespace LOOM_ISA_NAMESPACE
}  // namespace loom

#if !defined(__CUDACC__)
#include "src/kernels/cross_core_copy.h"
#include "src/kernels/reduce_copy_isa.h"
#include "src/kernels/tile_convert.h"

namespace loom {
inline namespace LOOM_ISA_NAMESPACE {

// Elements per tile: the accumulators of one tile (<= 4 KiB) stay in L1 while every source
// is folded in, so each source byte is read from memory once and each output written once.
inline constexpr size_t kReduceTile = 512;

// Bytes of the first destination written before they are copied to the others (a peer's send
// slot, say) in one memcpy: long runs of stores into lines another core holds go faster than a
// tile's worth at a time between the reduction's reads.
inline constexpr size_t kCopyBlock = 16 * 1024;

// acc[j] = op(acc[j], pre(src[j])) over one tile.
template <typename T, typename Op, bool kPre>
LOOM_INLINE void accumulateTile(const Op& op, const unsigned char* src, AccT<T>* acc,
                                AccT<T>* scratch, size_t n) {
  if constexpr (kHasTileConvert<T>) {
    loadTile<T>(src, scratch, n);
    for (size_t j = 0; j < n; ++j) acc[j] = op(acc[j], kPre ? op.preOp(scratch[j]) : scratch[j]);
  } else {
    for (size_t j = 0; j < n; ++j) {
      const AccT<T> x = toAcc(loadAt<T>(src, j));
      acc[j] = op(acc[j], kPre ? op.preOp(x) : x);
    }
  }
}

// dst = op(a, b) over one tile of a type that is its own accumulator, straight from memory to
// memory. A destination may be exactly a or b (in place): element j is read before it is
// written and no other element depends on it, which is what ivdep tells the compiler.
template <typename T, typename Op>
LOOM_INLINE void reducePairTile(const Op& op, const unsigned char* a, const unsigned char* b,
                                unsigned char* dst, size_t n) {
#if defined(__clang__)
#pragma clang loop vectorize(assume_safety)
#elif defined(__GNUC__)
#pragma GCC ivdep
#endif
  for (size_t j = 0; j < n; ++j)
    storeAt<T>(dst, j, fromAcc<T>(op(toAcc(loadAt<T>(a, j)), toAcc(loadAt<T>(b, j)))));
}

// The pair path over whole blocks of kCrossCorePages pages, one line of each page in turn: a line
// another core holds costs a wait, and 8 pages walked at once overlap more of those waits than
// a walk page by page (cross_core_copy.h). Each block is then copied on to the other
// destinations in one run, as the tile path does (kCopyBlock). Returns the elements done: every
// whole block.
template <typename T, typename Op>
size_t reducePairPages(const Op& op, const ReduceCopyArgs& args) {
  constexpr size_t kBlock = kCrossCoreBlockBytes / sizeof(T);
  const auto* a = static_cast<const unsigned char*>(args.src[0]);
  const auto* b = static_cast<const unsigned char*>(args.src[1]);
  auto* dst0 = static_cast<unsigned char*>(args.dst[0]);
  size_t base = 0;
  for (; base + kBlock <= args.count; base += kBlock) {
    for (size_t line = 0; line < kCrossCorePageBytes; line += kCrossCoreLineBytes) {
      for (size_t page = 0; page < kCrossCorePages; ++page) {
        const size_t at = base * sizeof(T) + page * kCrossCorePageBytes + line;
        // A line's length the compiler cannot see: with it, it would unroll the line's loop
        // into scalar code, or into vector code behind an overlap check that in place fails;
        // as a run-time length it is the tile path's vector loop.
        size_t n = kCrossCoreLineBytes / sizeof(T);
        asm("" : "+r"(n));
        reducePairTile<T>(op, a + at, b + at, dst0 + at, n);
      }
    }
    const size_t from = base * sizeof(T);
    for (int d = 1; d < args.ndst; ++d) {
      auto* dst = static_cast<unsigned char*>(args.dst[d]) + from;
      if (dst != dst0 + from) memcpy(dst, dst0 + from, kCrossCoreBlockBytes);
    }
  }
  return base;
}

// The CPU primitive. Arguments are validated by the dispatcher (reduce_copy.cc): this code
// runs in per-ISA files and must not call anything that could be emitted out of line.
template <typename T, typename Op>
void reduceCopy(const ReduceCopyArgs& args) {
  using Acc = AccT<T>;
  const Op op(args.scalar);
  alignas(64) Acc acc[kReduceTile];
  alignas(64) Acc scratch[kHasTileConvert<T> ? kReduceTile : 1];
  // Two sources that need neither pre- nor post-op (every step of a sum, min, max or product
  // over float, double or integers) skip the accumulator tile: one pass, no L1 round trip.
  bool pair = false;
  if constexpr (std::is_same_v<Acc, T>) {
    pair = args.nsrc == 2 && args.streamDestinations == 0 &&
           !(Op::kHasPreOp && (args.preOpOnSource & 3u) != 0) && !(Op::kHasPostOp && args.postOp);
  }
  const auto* dst0 = static_cast<unsigned char*>(args.dst[0]);
  // Only the pair path walks: the accumulator tile, run a line at a time over 8 pages, lost
  // more to its conversions and short loops than the walk saves (2 processes, AllReduce in
  // place, 128 KiB-1 MiB: bfloat16 0.84-0.87x, half 0.67-0.72x).
  const size_t start = pair && args.crossCorePages ? reducePairPages<T>(op, args) : 0;
  size_t copied = start;  // elements already in every destination, not only the first
  for (size_t base = start; base < args.count; base += kReduceTile) {
    const size_t n = args.count - base < kReduceTile ? args.count - base : kReduceTile;
    const size_t offset = base * sizeof(T);
    if (pair) {
      reducePairTile<T>(op, static_cast<const unsigned char*>(args.src[0]) + offset,
                        static_cast<const unsigned char*>(args.src[1]) + offset,
                        static_cast<unsigned char*>(args.dst[0]) + offset, n);
    } else {
      loadTile<T>(static_cast<const unsigned char*>(args.src[0]) + offset, acc, n);
      if constexpr (Op::kHasPreOp) {
        if (args.preOpOnSource & 1u) {
          for (size_t j = 0; j < n; ++j) acc[j] = op.preOp(acc[j]);
        }
      }
      for (int s = 1; s < args.nsrc; ++s) {
        const unsigned char* src = static_cast<const unsigned char*>(args.src[s]) + offset;
        if (Op::kHasPreOp && ((args.preOpOnSource >> s) & 1u)) {
          accumulateTile<T, Op, Op::kHasPreOp>(op, src, acc, scratch, n);
        } else {
          accumulateTile<T, Op, false>(op, src, acc, scratch, n);
        }
      }
      if constexpr (Op::kHasPostOp) {
        if (args.postOp) {
          for (size_t j = 0; j < n; ++j) acc[j] = op.postOp(acc[j]);
        }
      }
      // Every source of this tile has been read, so a destination equal to a source is safe.
      if (args.streamDestinations != 0) {
        // Converted in L1 first, then streamed out to the destinations that stream and copied
        // to the others.
        alignas(64) unsigned char staged[kReduceTile * sizeof(T)];
        storeTile<T>(acc, staged, n);
        for (int d = 0; d < args.ndst; ++d) {
          unsigned char* dst = static_cast<unsigned char*>(args.dst[d]) + offset;
          if ((args.streamDestinations >> d) & 1u) {
            streamBytes(dst, staged, n * sizeof(T));
          } else {
            memcpy(dst, staged, n * sizeof(T));
          }
        }
        continue;
      }
      storeTile<T>(acc, static_cast<unsigned char*>(args.dst[0]) + offset, n);
    }
    // The other destinations copy the first a block at a time. A destination equal to a
    // source gets the block only after every source of the block has been read.
    const size_t end = base + n;
    if (args.ndst > 1 && (end - copied >= kCopyBlock / sizeof(T) || end == args.count)) {
      const size_t from = copied * sizeof(T), bytes = (end - copied) * sizeof(T);
      for (int d = 1; d < args.ndst; ++d) {
        unsigned char* dst = static_cast<unsigned char*>(args.dst[d]) + from;
        if (dst != dst0 + from) memcpy(dst, dst0 + from, bytes);
      }
      copied = end;
    }
  }
  if (args.streamDestinations != 0) streamFence();
}

template <typename T>
constexpr void fillReduceCopyRow(ReduceCopyFn (&row)[kNumReduceOps]) {
#define LOOM_REDUCE_OP(kind, Func, name) \
  row[static_cast<int>(ReduceOpKind::kind)] = &reduceCopy<T, Func<T>>;
#include "src/kernels/reduce_op_table.def"
}

// Every type x op of this ISA; evaluated at compile time by each reduce_copy_<isa>.cc.
constexpr ReduceCopyTable makeReduceCopyTable() {
  ReduceCopyTable table{};
#define LOOM_DATATYPE(e, Type, name) fillReduceCopyRow<Type>(table.fn[e]);
#include "src/kernels/datatype_table.def"
  return table;
}

}  // namespace LOOM_ISA_NAMESPACE
}  // namespace loom
#endif  // !__CUDACC__
