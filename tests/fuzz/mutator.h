// A small, self-contained byte mutator for the wire fuzzers (no libFuzzer needed): each
// input is a valid message with a few random edits of the kinds that break parsers: bit flips,
// random bytes, boundary integers written over a field, truncation, extension, and chunks
// moved or duplicated. Deterministic for a seed, so any failure reproduces from its index.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

namespace loom::fuzz {

class Mutator {
 public:
  explicit Mutator(uint64_t seed) : rng_(seed) {}

  uint64_t next() { return rng_(); }
  size_t below(size_t n) { return n == 0 ? 0 : static_cast<size_t>(rng_() % n); }
  bool chance(unsigned inN) { return below(inN) == 0; }

  // Applies 1 to 8 edits (sometimes none: valid inputs must keep passing too).
  template <typename Byte>
  void mutate(std::vector<Byte>& bytes, size_t maxBytes) {
    if (chance(16)) return;
    const size_t edits = 1 + below(8);
    for (size_t e = 0; e < edits; ++e) edit(bytes, maxBytes);
  }

 private:
  template <typename Byte>
  void edit(std::vector<Byte>& b, size_t maxBytes) {
    static constexpr uint32_t kInteresting[] = {0,
                                                1,
                                                2,
                                                3,
                                                4,
                                                7,
                                                8,
                                                15,
                                                16,
                                                40,
                                                127,
                                                128,
                                                255,
                                                256,
                                                4095,
                                                4096,
                                                65535,
                                                65536,
                                                0x7fff,
                                                0x8000,
                                                0xffff,
                                                16u << 20,
                                                (16u << 20) + 1,
                                                0x7fffffff,
                                                0x80000000u,
                                                0xfffffffeu,
                                                0xffffffffu};
    switch (below(9)) {
      case 0:  // flip a bit
        if (!b.empty()) b[below(b.size())] ^= static_cast<Byte>(1u << below(8));
        break;
      case 1:  // a random byte
        if (!b.empty()) b[below(b.size())] = static_cast<Byte>(next());
        break;
      case 2:  // a boundary integer, either byte order, over 1, 2 or 4 bytes
      {
        if (b.empty()) break;
        uint32_t v = kInteresting[below(std::size(kInteresting))];
        if (chance(2)) v = __builtin_bswap32(v);
        const size_t width = size_t{1} << below(3);
        const size_t at = below(b.size());
        for (size_t i = 0; i < width && at + i < b.size(); ++i)
          b[at + i] = static_cast<Byte>(v >> (8 * i));
        break;
      }
      case 3:  // truncate
        b.resize(below(b.size() + 1));
        break;
      case 4:  // append random bytes
      {
        const size_t n = 1 + below(64);
        for (size_t i = 0; i < n && b.size() < maxBytes; ++i)
          b.push_back(static_cast<Byte>(next()));
        break;
      }
      case 5:  // erase a chunk
        if (!b.empty()) {
          const size_t at = below(b.size());
          const size_t n = 1 + below(std::min<size_t>(16, b.size() - at));
          b.erase(b.begin() + static_cast<long>(at), b.begin() + static_cast<long>(at + n));
        }
        break;
      case 6:  // insert a copy of a chunk elsewhere
        if (!b.empty() && b.size() < maxBytes) {
          const size_t from = below(b.size());
          const size_t n = 1 + below(std::min<size_t>(16, b.size() - from));
          std::vector<Byte> chunk(b.begin() + static_cast<long>(from),
                                  b.begin() + static_cast<long>(from + n));
          b.insert(b.begin() + static_cast<long>(below(b.size() + 1)), chunk.begin(), chunk.end());
          if (b.size() > maxBytes) b.resize(maxBytes);
        }
        break;
      case 7:  // zero a run
        if (!b.empty()) {
          const size_t at = below(b.size());
          const size_t n = 1 + below(std::min<size_t>(8, b.size() - at));
          std::fill(b.begin() + static_cast<long>(at), b.begin() + static_cast<long>(at + n), 0);
        }
        break;
      default:  // 0xff a run
        if (!b.empty()) {
          const size_t at = below(b.size());
          const size_t n = 1 + below(std::min<size_t>(8, b.size() - at));
          std::fill(b.begin() + static_cast<long>(at), b.begin() + static_cast<long>(at + n),
                    static_cast<Byte>(0xff));
        }
        break;
    }
  }

  std::mt19937_64 rng_;
};

}  // namespace loom::fuzz
