// The LL word rules, in one place for every side that touches LL words: the shm connection
// that packs, checks and unpacks them (transports/shm/ll_connection.cc), and primitives that
// write and read the words straight in the ring through a connection's view
// (src/kernels/connection_view.h; a GPU kernel's threads).
//
// A word is 8 bytes, written and read with one 64-bit access: the low half carries 4 data
// bytes, the high half the flag of the step that wrote it. A word whose flag is the step's is
// valid by itself, so the receiver needs no counter and no fence.
//   - Flag of step s: uint32(s + 1). Never 0 on a slot's first use, so a zeroed ring is never
//     mistaken for data, and different from the flag of the step that used the slot before.
//   - A slot is kLLHeaderWords header words, then data words. Header word kLLCountWord holds
//     the step's byte count, kLLTagWord its tag, both under the step's flag. The sender writes
//     the data words first, then the tag word, then the count word: on TSO CPUs the data has
//     landed by the time the receiver sees the header, so it rarely finds a word missing;
//     elsewhere it checks each word's flag anyway.
//   - Step bytes go 4 per word in order; the last word of a step whose size is not a multiple
//     of 4 is padded with zero bytes.
//   - Refresh. A word past the byte count of recent steps keeps an old flag; to keep any such
//     word from matching again when the 32-bit flag wraps, the sender writes every data word of
//     a slot on the first nslots steps of each refreshSteps steps (llWordsToWrite).
// Little-endian hosts and devices only (x86-64, AArch64, CUDA), as the rest of loom.
// C++17 and host/device: nvcc compiles it.
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "src/kernels/connection_view.h"
#include "src/kernels/host_device.h"

namespace loom {
inline namespace LOOM_ISA_NAMESPACE {

inline constexpr size_t kLLBytesPerWord = 4;
inline constexpr size_t kLLHeaderWords = 8;  // one cache line; words 2..7 are padding
inline constexpr size_t kLLCountWord = 0;
inline constexpr size_t kLLTagWord = 1;

LOOM_HOST_DEVICE constexpr uint32_t llFlag(uint64_t step) {
  return static_cast<uint32_t>(step + 1);
}
LOOM_HOST_DEVICE constexpr uint64_t llWord(uint32_t flag, uint32_t data) {
  return (static_cast<uint64_t>(flag) << 32) | data;
}
LOOM_HOST_DEVICE constexpr uint32_t llFlagOf(uint64_t word) {
  return static_cast<uint32_t>(word >> 32);
}
LOOM_HOST_DEVICE constexpr uint32_t llDataOf(uint64_t word) { return static_cast<uint32_t>(word); }
// Data words a step of `bytes` carries.
LOOM_HOST_DEVICE constexpr size_t llWordsFor(size_t bytes) {
  return (bytes + kLLBytesPerWord - 1) / kLLBytesPerWord;
}
// Data words the sender writes for step `step` of `bytes` on a ring of `nslots` slots of
// `dataWords` words: all of them on refresh steps, else those that carry data.
LOOM_HOST_DEVICE constexpr size_t llWordsToWrite(uint64_t step, size_t bytes, uint64_t nslots,
                                                 size_t dataWords, uint64_t refreshSteps) {
  return step % refreshSteps < nslots ? dataWords : llWordsFor(bytes);
}

// One 64-bit store or load, relaxed: the flag in the word is the synchronisation.
LOOM_HOST_DEVICE LOOM_INLINE void llStore(uint64_t* word, uint64_t value) {
#if defined(__CUDA_ARCH__)
  *reinterpret_cast<volatile uint64_t*>(word) = value;
#else
  __atomic_store_n(word, value, __ATOMIC_RELAXED);
#endif
}
LOOM_HOST_DEVICE LOOM_INLINE uint64_t llLoad(const uint64_t* word) {
#if defined(__CUDA_ARCH__)
  return *reinterpret_cast<const volatile uint64_t*>(word);
#else
  return __atomic_load_n(word, __ATOMIC_RELAXED);
#endif
}

// Packs `bytes` from `src` into words (llWordsFor(bytes) of them) under `flag`.
LOOM_HOST_DEVICE LOOM_INLINE void llPack(uint64_t* words, const void* src, size_t bytes,
                                         uint32_t flag) {
  const auto* in = static_cast<const unsigned char*>(src);
  const size_t whole = bytes / kLLBytesPerWord;
  for (size_t w = 0; w < whole; ++w) {
    uint32_t v;
    memcpy(&v, in + kLLBytesPerWord * w, kLLBytesPerWord);
    llStore(words + w, llWord(flag, v));
  }
  if (const size_t rest = bytes % kLLBytesPerWord) {
    // Byte by byte (little-endian): a copy of a variable size would put `v` in memory, and a
    // GPU thread's memory is slow local memory.
    uint32_t v = 0;
    for (size_t b = 0; b < rest; ++b) v |= uint32_t(in[kLLBytesPerWord * whole + b]) << (8 * b);
    llStore(words + whole, llWord(flag, v));
  }
}

// The index of the first of words [from, n) whose flag is not `flag`, or n when all landed.
LOOM_HOST_DEVICE LOOM_INLINE size_t llLanded(const uint64_t* words, size_t from, size_t n,
                                             uint32_t flag) {
  for (; from < n; ++from)
    if (llFlagOf(llLoad(words + from)) != flag) break;
  return from;
}

// Checks and copies in one pass: the data of words [from, n) that carry `flag` into the same
// whole words of `dst` (word w at byte 4w), up to the first that does not; returns its index,
// or n when all have landed. `dst` has room for 4n bytes.
LOOM_HOST_DEVICE LOOM_INLINE size_t llUnpackLanded(void* dst, const uint64_t* words, size_t from,
                                                   size_t n, uint32_t flag) {
  auto* out = static_cast<unsigned char*>(dst);
  for (; from < n; ++from) {
    const uint64_t w = llLoad(words + from);
    if (llFlagOf(w) != flag) break;
    const uint32_t v = llDataOf(w);
    memcpy(out + kLLBytesPerWord * from, &v, kLLBytesPerWord);
  }
  return from;
}

// The data of words that have landed: `bytes` of them, into `dst`.
LOOM_HOST_DEVICE LOOM_INLINE void llUnpack(void* dst, const uint64_t* words, size_t bytes) {
  auto* out = static_cast<unsigned char*>(dst);
  const size_t whole = bytes / kLLBytesPerWord;
  for (size_t w = 0; w < whole; ++w) {
    const uint32_t v = llDataOf(llLoad(words + w));
    memcpy(out + kLLBytesPerWord * w, &v, kLLBytesPerWord);
  }
  if (const size_t rest = bytes % kLLBytesPerWord) {
    const uint32_t v = llDataOf(llLoad(words + whole));
    for (size_t b = 0; b < rest; ++b)
      out[kLLBytesPerWord * whole + b] = static_cast<unsigned char>(v >> (8 * b));
  }
}

// Slot of step `step` in a connection's ring, and its first data word.
LOOM_HOST_DEVICE LOOM_INLINE uint64_t* llSlot(const transport::LLRingView& ring, uint64_t step) {
  return ring.slots + (step % ring.nslots) * ring.slotStrideWords;
}
LOOM_HOST_DEVICE LOOM_INLINE uint64_t* llDataWords(const transport::LLRingView& ring,
                                                   uint64_t step) {
  return llSlot(ring, step) + ring.headerWords;
}

// The header of a slot, after its data words (see the order above).
LOOM_HOST_DEVICE LOOM_INLINE void llWriteHeader(uint64_t* slot, uint32_t flag, uint32_t bytes,
                                                uint32_t tag) {
  llStore(slot + kLLTagWord, llWord(flag, tag));
  llStore(slot + kLLCountWord, llWord(flag, bytes));
}
// True when both header words carry `flag`; then `bytes` and `tag` hold them.
LOOM_HOST_DEVICE LOOM_INLINE bool llReadHeader(const uint64_t* slot, uint32_t flag, uint32_t* bytes,
                                               uint32_t* tag) {
  const uint64_t count = llLoad(slot + kLLCountWord);
  const uint64_t t = llLoad(slot + kLLTagWord);
  if (llFlagOf(count) != flag || llFlagOf(t) != flag) return false;
  *bytes = llDataOf(count);
  *tag = llDataOf(t);
  return true;
}

}  // namespace LOOM_ISA_NAMESPACE
}  // namespace loom
