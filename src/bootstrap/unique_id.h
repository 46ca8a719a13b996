// What the 128 opaque bytes of a loomUniqueId hold: a magic, the rendezvous root's address and
// the job's secret. Packed field by field in network order so any two builds agree.
#pragma once

#include <array>
#include <cstdint>

#include "loom/loom.h"
#include "src/net/secret.h"
#include "src/net/socket.h"

namespace loom {

struct UniqueIdContents {
  SocketAddress root;
  Secret secret{};
  // Set when the id came from LOOM_COMM_ID: nobody listens yet, rank 0 starts the root in
  // loomCommInitRank.
  bool rootAtRank0 = false;
};

loomUniqueId packUniqueId(const UniqueIdContents& contents);
// Throws InvalidArgument when the bytes are not a loom id of this version.
UniqueIdContents unpackUniqueId(const loomUniqueId& id);

}  // namespace loom
