// CPU only: moving a tile of elements between memory (any alignment) and an accumulator
// array. The generic versions are plain loops that compilers vectorise; where the file is
// built with F16C or AVX-512, Float16 uses the hardware conversions, which round to nearest
// even exactly like HalfFormat::fromFloat (the tests compare all three on every ISA).
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "src/base/cpu_arch.h"
#include "src/kernels/reduce_ops.h"

#if LOOM_CPU_X86 && (defined(__F16C__) || defined(__AVX512F__) || defined(__SSE2__))
#include <immintrin.h>
#endif

namespace loom {
inline namespace LOOM_ISA_NAMESPACE {

// memcpy compiles to a single (unaligned) load or store and keeps misaligned buffers free of
// undefined behaviour.
template <typename T>
LOOM_INLINE T loadAt(const unsigned char* p, size_t j) {
  T v;
  memcpy(&v, p + j * sizeof(T), sizeof(T));
  return v;
}

template <typename T>
LOOM_INLINE void storeAt(unsigned char* p, size_t j, T v) {
  memcpy(p + j * sizeof(T), &v, sizeof(T));
}

// Copies n bytes from `in` to p (any alignment of either) with non-temporal stores for p's
// aligned middle: no read-for-ownership of p's lines, and they do not evict useful ones.
// Unfenced: streamFence() before publishing. (reduceCopy streams its tiles with it, and the
// dispatcher's streamCopy is it plus the fence.)
LOOM_INLINE void streamBytes(unsigned char* p, const unsigned char* in, size_t n) {
#if LOOM_CPU_X86 && defined(__AVX2__)
  constexpr size_t kVec = 32;
#elif LOOM_CPU_X86 && defined(__SSE2__)
  constexpr size_t kVec = 16;
#else
  constexpr size_t kVec = 0;
#endif
  if constexpr (kVec == 0) {
    memcpy(p, in, n);
  } else {
    size_t head = (kVec - reinterpret_cast<uintptr_t>(p) % kVec) % kVec;
    if (head > n) head = n;
    memcpy(p, in, head);
    size_t j = head;
    for (; j + kVec <= n; j += kVec) {
#if LOOM_CPU_X86 && defined(__AVX2__)
      _mm256_stream_si256(reinterpret_cast<__m256i*>(p + j),
                          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + j)));
#elif LOOM_CPU_X86 && defined(__SSE2__)
      _mm_stream_si128(reinterpret_cast<__m128i*>(p + j),
                       _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + j)));
#endif
    }
    memcpy(p + j, in + j, n - j);
  }
}

// Orders streamed stores before the stores that publish them (a posted slot, a flag).
LOOM_INLINE void streamFence() {
#if LOOM_CPU_X86 && defined(__SSE2__)
  _mm_sfence();
#endif
}

// Whether loadTile/storeTile have a hardware path for T here; the reduce loop then converts a
// whole tile first instead of converting element by element inside the reduction.
template <typename T>
inline constexpr bool kHasTileConvert = false;

template <typename T>
LOOM_INLINE void loadTileScalar(const unsigned char* p, AccT<T>* out, size_t n) {
  for (size_t j = 0; j < n; ++j) out[j] = toAcc(loadAt<T>(p, j));
}

template <typename T>
LOOM_INLINE void storeTileScalar(const AccT<T>* in, unsigned char* p, size_t n) {
  for (size_t j = 0; j < n; ++j) storeAt<T>(p, j, fromAcc<T>(in[j]));
}

template <typename T>
LOOM_INLINE void loadTile(const unsigned char* p, AccT<T>* out, size_t n) {
  loadTileScalar<T>(p, out, n);
}

template <typename T>
LOOM_INLINE void storeTile(const AccT<T>* in, unsigned char* p, size_t n) {
  storeTileScalar<T>(in, p, n);
}

#if LOOM_CPU_X86 && (defined(__F16C__) || defined(__AVX512F__))
template <>
inline constexpr bool kHasTileConvert<Float16> = true;

template <>
LOOM_INLINE void loadTile<Float16>(const unsigned char* p, float* out, size_t n) {
  size_t j = 0;
#if defined(__AVX512F__)
  for (; j + 16 <= n; j += 16) {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 2 * j));
    // maskz: the unmasked form trips GCC 12's -Wmaybe-uninitialized in its own header.
    _mm512_storeu_ps(out + j, _mm512_maskz_cvtph_ps(0xffff, h));
  }
#else
  for (; j + 8 <= n; j += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 2 * j));
    _mm256_storeu_ps(out + j, _mm256_cvtph_ps(h));
  }
#endif
  loadTileScalar<Float16>(p + 2 * j, out + j, n - j);
}

template <>
LOOM_INLINE void storeTile<Float16>(const float* in, unsigned char* p, size_t n) {
  size_t j = 0;
#if defined(__AVX512F__)
  for (; j + 16 <= n; j += 16) {
    const __m256i h = _mm512_maskz_cvtps_ph(0xffff, _mm512_loadu_ps(in + j),
                                            _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p + 2 * j), h);
  }
#else
  for (; j + 8 <= n; j += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(in + j), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p + 2 * j), h);
  }
#endif
  storeTileScalar<Float16>(in + j, p + 2 * j, n - j);
}
#endif

}  // namespace LOOM_ISA_NAMESPACE
}  // namespace loom
