// reduceCopy where some operands are LL words in a connection's ring instead of plain bytes
// (ll_words.h): the primitive reads a received step straight from the slot it landed in and
// writes the step it sends straight into the peer's slot, with no staging buffer on either
// side of the connection.
//
// How. The step goes a tile at a time (kLLTileBytes of data, in L1): every LL source's tile
// of data words is gathered into a tile buffer and the ordinary reduceCopy folds the tile
// (same per-element operations in the same order, so the bits are those of the plain path);
// its result is packed into every LL destination under that destination's flag as the tile is
// produced. A copy (no reduction, no pre/post-op) moves bytes only, bit-exact like the plain
// path's memcpy. The caller has checked that every word of an LL source has landed
// (RecvConnection::tryReceiveInView) and publishes the LL destinations afterwards
// (SendConnection::postWritten).
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "loom/loom.h"
#include "src/kernels/reduce_copy_args.h"

namespace loom {

inline constexpr size_t kLLTileBytes = 1024;

// Which operands of a ReduceCopyArgs are LL words: bit s of srcMask, src[s] is the first data
// word of a landed step; bit d of dstMask, dst[d] is the first data word of a slot to fill
// under flag dstFlag[d].
struct LLOperands {
  uint32_t srcMask = 0;
  uint32_t dstMask = 0;
  uint32_t dstFlag[kMaxDests] = {};

  bool any() const { return (srcMask | dstMask) != 0; }
  // Marks the source at `words` (every source with that address) as LL words.
  void markSource(const ReduceCopyArgs& args, const void* words) {
    for (int s = 0; s < args.nsrc; ++s)
      if (args.src[s] == words) srcMask |= 1u << s;
  }
  // Marks the destination at `words` as LL words written under `flag`.
  void markDest(const ReduceCopyArgs& args, const void* words, uint32_t flag) {
    for (int d = 0; d < args.ndst; ++d) {
      if (args.dst[d] == words) {
        dstMask |= 1u << d;
        dstFlag[d] = flag;
      }
    }
  }
};

// `args` as for reduceCopy (reduce_copy_dispatch.h), count in elements of `type`; with
// `copyOnly`, src[0] is copied to every destination as bytes (nsrc must be 1).
void reduceCopyLL(loomDataType_t type, ReduceOpKind op, const ReduceCopyArgs& args,
                  const LLOperands& ll, bool copyOnly);

}  // namespace loom
