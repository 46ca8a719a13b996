// One collective or point-to-point call, as the executor sees it: what to move, between which
// buffers, with which reduction. Built and validated by the C API (coll_api.cc), then run at
// once (NULL stream), on a host stream, or with the rest of its group.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "loom/loom.h"
#include "src/kernels/reduce_copy_args.h"
#include "transports/transport.h"

namespace loom {

class Comm;

enum class CollKind {
  kAllReduce,
  kBroadcast,
  kReduce,
  kAllGather,
  kReduceScatter,
  kAlltoAll,
  kSend,
  kRecv
};

const char* collName(CollKind kind);

// How a call is carried out; chosen once per call by the planner's rules (planner.h).
enum class Algorithm { kRing, kTree, kChain, kDirect, kHier, kExchange, kDoubling };

struct CollOp {
  CollKind kind = CollKind::kAllReduce;
  std::shared_ptr<Comm> comm;
  const void* sendbuff = nullptr;
  void* recvbuff = nullptr;
  size_t count =
      0;  // per rank (AllGather: sendcount; ReduceScatter: recvcount; AlltoAll: per peer)
  loomDataType_t type = loomFloat32;
  ReduceOpKind reduce = ReduceOpKind::kSum;  // for reductions
  ReduceScalar scalar;                       // PreMulSum factor or SumPostDiv divisor
  const void* deviceScalar = nullptr;        // loomScalarDevice: read when the op runs
  int root = 0;                              // Broadcast, Reduce
  int peer = -1;                             // Send, Recv
  Algorithm algorithm = Algorithm::kRing;    // set at submission (choosePlan)
  transport::Protocol protocol = transport::Protocol::kSimple;  // likewise
  // The communicator's number for the call (Comm::nextOpNumber), given at submission: messages
  // ("AllReduce #12") and the flight recorder name it by this.
  uint64_t seq = 0;
  // Set by the executor for a Send whose buffer a receive of the same group overwrites (an
  // in-place send/recv): its data must be copied out, not read in place by the peer.
  bool inputOverwritten = false;
  // A CUDA communicator's call: its cudaStream_t (nullptr: the legacy default stream).
  void* deviceStream = nullptr;
};

// Checks every argument against the communicator (types, ops, roots, peers, null buffers with
// count > 0); throws InvalidArgument with a message naming the argument and its value.
void validateCollOp(const CollOp& op, loomRedOp_t userOp);

// The larger of this rank's input and output buffers in bytes: count x the datatype's size,
// times the rank count where one side holds a block per rank (AllGather's output,
// ReduceScatter's input, both of AlltoAll's). Assumes validateCollOp passed (no overflow).
size_t largestBufferBytes(const CollOp& op);

// What every rank must agree on for a collective (kind, count, datatype, op, root), hashed to
// 32 bits and stamped on every slot it sends; 0 for point-to-point, where only sizes must match.
// Per-rank values (buffers, a PreMulSum's scalar) are left out.
uint32_t collSignature(const CollOp& op);
// "AllReduce(count 16, float32, sum)" for messages.
std::string describeCall(const CollOp& op);

}  // namespace loom
