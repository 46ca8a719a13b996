// reduceCopyGroup<T, Op>: reduceCopy shared by a group of threads (a CUDA block, or one host
// thread on the simulated runtime), with 16-byte loads and stores.
//
// Thread t of n does the 16-byte packs t, t + n, t + 2n, ... so that a warp reads 512
// consecutive bytes of each source per instruction. Within a pack every element is computed
// as reduceCopyElement() computes it (reduce_copy.h): same operations, same order, so the
// bits agree with the CPU executor. Packs need every source and destination at the same
// offset from a 16-byte boundary; the elements before the first boundary and after the last
// whole pack go one by one. Pointers that differ in that offset go one by one throughout.
// C++17 and host/device: nvcc compiles it.
#pragma once

#include <stddef.h>
#include <stdint.h>

#if !defined(__CUDA_ARCH__)
#include <string.h>
#endif

#include "src/kernels/reduce_copy.h"

namespace loom {
inline namespace LOOM_ISA_NAMESPACE {

inline constexpr size_t kPackBytes = 16;

// 16 bytes of elements, moved as one 128-bit load or store on a GPU.
template <typename T>
struct alignas(kPackBytes) Pack {
  static constexpr int kElements = static_cast<int>(kPackBytes / sizeof(T));
  T e[kElements];
};

template <typename T>
LOOM_HOST_DEVICE LOOM_INLINE Pack<T> loadPack(const void* p) {
  Pack<T> pack;
#if defined(__CUDA_ARCH__)
  *reinterpret_cast<uint4*>(&pack) = *static_cast<const uint4*>(p);
#else
  memcpy(&pack, p, kPackBytes);
#endif
  return pack;
}

template <typename T>
LOOM_HOST_DEVICE LOOM_INLINE void storePack(void* p, const Pack<T>& pack) {
#if defined(__CUDA_ARCH__)
  *static_cast<uint4*>(p) = *reinterpret_cast<const uint4*>(&pack);
#else
  memcpy(p, &pack, kPackBytes);
#endif
}

// Pack `w` of every operand, each operand starting at `first` elements in.
template <typename T, typename Op>
LOOM_HOST_DEVICE LOOM_INLINE void reduceCopyPack(const Op& op, const ReduceCopyArgs& args,
                                                 size_t first, size_t w) {
  constexpr int kN = Pack<T>::kElements;
  const size_t at = first * sizeof(T) + w * kPackBytes;
  typename Op::Acc acc[kN];
  Pack<T> in = loadPack<T>(static_cast<const unsigned char*>(args.src[0]) + at);
  bool pre = false;
  if constexpr (Op::kHasPreOp) pre = args.preOpOnSource & 1u;
  LOOM_UNROLL
  for (int j = 0; j < kN; ++j) {
    acc[j] = toAcc(in.e[j]);
    if constexpr (Op::kHasPreOp) {
      if (pre) acc[j] = op.preOp(acc[j]);
    }
  }
  for (int s = 1; s < args.nsrc; ++s) {
    in = loadPack<T>(static_cast<const unsigned char*>(args.src[s]) + at);
    if constexpr (Op::kHasPreOp) pre = (args.preOpOnSource >> s) & 1u;
    LOOM_UNROLL
    for (int j = 0; j < kN; ++j) {
      typename Op::Acc x = toAcc(in.e[j]);
      if constexpr (Op::kHasPreOp) {
        if (pre) x = op.preOp(x);
      }
      acc[j] = op(acc[j], x);
    }
  }
  Pack<T> out;
  LOOM_UNROLL
  for (int j = 0; j < kN; ++j) {
    if constexpr (Op::kHasPostOp) {
      if (args.postOp) acc[j] = op.postOp(acc[j]);
    }
    out.e[j] = fromAcc<T>(acc[j]);
  }
  for (int d = 0; d < args.ndst; ++d)
    storePack<T>(static_cast<unsigned char*>(args.dst[d]) + at, out);
}

// Elements [begin, end) one by one, thread t of n taking begin + t, begin + t + n, ...
template <typename T, typename Op>
LOOM_HOST_DEVICE LOOM_INLINE void reduceCopyElements(const Op& op, const ReduceCopyArgs& args,
                                                     size_t begin, size_t end, size_t thread,
                                                     size_t threads) {
  for (size_t i = begin + thread; i < end; i += threads) {
    const T value = reduceCopyElement<T>(op, args, i);
    for (int d = 0; d < args.ndst; ++d) static_cast<T*>(args.dst[d])[i] = value;
  }
}

// The elements before the first 16-byte boundary, the same for every operand, or
// args.count where the operands are not at the same offset from a boundary.
LOOM_HOST_DEVICE inline size_t elementsBeforePacks(const ReduceCopyArgs& args, size_t size) {
  const uintptr_t offset = reinterpret_cast<uintptr_t>(args.src[0]) % kPackBytes;
  for (int s = 1; s < args.nsrc; ++s)
    if (reinterpret_cast<uintptr_t>(args.src[s]) % kPackBytes != offset) return args.count;
  for (int d = 0; d < args.ndst; ++d)
    if (reinterpret_cast<uintptr_t>(args.dst[d]) % kPackBytes != offset) return args.count;
  if (offset % size != 0) return args.count;  // not element-aligned: the caller's error
  const size_t head = offset == 0 ? 0 : (kPackBytes - offset) / size;
  return head < args.count ? head : args.count;
}

// This thread's share of reduceCopy(args) in a group of `threads`; every thread of the group
// calls it with the same args. Pointers are element-aligned, as for reduceCopyElement.
template <typename T, typename Op>
LOOM_HOST_DEVICE inline void reduceCopyGroup(const Op& op, const ReduceCopyArgs& args,
                                             size_t thread, size_t threads) {
  constexpr size_t kN = Pack<T>::kElements;
  const size_t head = elementsBeforePacks(args, sizeof(T));
  const size_t packs = (args.count - head) / kN;
  reduceCopyElements<T>(op, args, 0, head, thread, threads);
  for (size_t w = thread; w < packs; w += threads) reduceCopyPack<T>(op, args, head, w);
  reduceCopyElements<T>(op, args, head + packs * kN, args.count, thread, threads);
}

}  // namespace LOOM_ISA_NAMESPACE
}  // namespace loom
