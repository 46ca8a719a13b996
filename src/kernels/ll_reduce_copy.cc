#include "src/kernels/ll_reduce_copy.h"

#include <cstring>

#include "src/kernels/datatype_traits.h"
#include "src/kernels/ll_words.h"
#include "src/kernels/reduce_copy_dispatch.h"

namespace loom {
namespace {

const uint64_t* wordsAt(const void* p, size_t byteOffset) {
  return static_cast<const uint64_t*>(p) + byteOffset / kLLBytesPerWord;
}
uint64_t* wordsAt(void* p, size_t byteOffset) {
  return static_cast<uint64_t*>(p) + byteOffset / kLLBytesPerWord;
}

}  // namespace

void reduceCopyLL(loomDataType_t type, ReduceOpKind op, const ReduceCopyArgs& args,
                  const LLOperands& ll, bool copyOnly) {
  validateReduceCopy(type, op, args);
  const size_t esize = dataTypeSize(type);
  // Tiles start on whole words and whole elements (element sizes divide the tile).
  static_assert(kLLTileBytes % (8 * kLLBytesPerWord) == 0);
  const size_t bytes = args.count * esize;
  int plainDst = -1;  // the first destination in plain bytes: LL ones are packed from it
  for (int d = 0; d < args.ndst && plainDst < 0; ++d)
    if (((ll.dstMask >> d) & 1u) == 0) plainDst = d;
  alignas(64) unsigned char gathered[kMaxSources][kLLTileBytes];
  alignas(64) unsigned char result[kLLTileBytes];
  for (size_t off = 0; off < bytes; off += kLLTileBytes) {
    const size_t n = bytes - off < kLLTileBytes ? bytes - off : kLLTileBytes;
    unsigned char* tile =
        plainDst >= 0 ? static_cast<unsigned char*>(args.dst[plainDst]) + off : result;
    const unsigned char* from = tile;  // the tile's result, in plain bytes
    if (copyOnly) {
      from = static_cast<const unsigned char*>(args.src[0]) + off;
      if (ll.srcMask & 1u) {
        llUnpack(tile, wordsAt(args.src[0], off), n);
        from = tile;
      }
      for (int d = 0; d < args.ndst; ++d) {
        auto* dst = static_cast<unsigned char*>(args.dst[d]) + off;
        if (((ll.dstMask >> d) & 1u) == 0 && dst != from) std::memcpy(dst, from, n);
      }
    } else {
      ReduceCopyArgs t = args;
      t.count = n / esize;
      for (int s = 0; s < args.nsrc; ++s) {
        if ((ll.srcMask >> s) & 1u) {
          llUnpack(gathered[s], wordsAt(args.src[s], off), n);
          t.src[s] = gathered[s];
        } else {
          t.src[s] = static_cast<const unsigned char*>(args.src[s]) + off;
        }
      }
      t.ndst = 0;
      for (int d = 0; d < args.ndst; ++d)
        if (((ll.dstMask >> d) & 1u) == 0)
          t.dst[t.ndst++] = static_cast<unsigned char*>(args.dst[d]) + off;
      if (t.ndst == 0) t.dst[t.ndst++] = result;
      reduceCopyValidated(type, op, t);  // the pieces of a call validated above
    }
    for (int d = 0; d < args.ndst; ++d)
      if ((ll.dstMask >> d) & 1u) llPack(wordsAt(args.dst[d], off), from, n, ll.dstFlag[d]);
  }
}

}  // namespace loom
