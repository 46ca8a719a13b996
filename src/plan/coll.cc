#include "src/plan/coll.h"

#include "src/base/error.h"
#include "src/comm/comm.h"
#include "src/comm/device.h"
#include "src/kernels/datatype_traits.h"
#include "src/kernels/reduce_copy_dispatch.h"

namespace loom {

const char* collName(CollKind kind) {
  switch (kind) {
    case CollKind::kAllReduce:
      return "AllReduce";
    case CollKind::kBroadcast:
      return "Broadcast";
    case CollKind::kReduce:
      return "Reduce";
    case CollKind::kAllGather:
      return "AllGather";
    case CollKind::kReduceScatter:
      return "ReduceScatter";
    case CollKind::kAlltoAll:
      return "AlltoAll";
    case CollKind::kSend:
      return "Send";
    case CollKind::kRecv:
      return "Recv";
  }
  return "?";
}

uint32_t collSignature(const CollOp& op) {
  if (op.kind == CollKind::kSend || op.kind == CollKind::kRecv) return 0;
  // A multiply-xorshift mix per field (every call computes it: a byte-wise hash cost more than
  // the rest of a small call's bookkeeping). Only equality across ranks matters.
  uint64_t h = 0x9e3779b97f4a7c15ull;
  auto mix = [&h](uint64_t v) {
    h = (h ^ v) * 0xff51afd7ed558ccdull;
    h ^= h >> 32;
  };
  mix(static_cast<uint64_t>(op.kind));
  mix(op.count);
  mix(static_cast<uint64_t>(op.type) | static_cast<uint64_t>(op.reduce) << 32);
  if (op.kind == CollKind::kBroadcast || op.kind == CollKind::kReduce)
    mix(static_cast<uint64_t>(static_cast<int64_t>(op.root)));
  return static_cast<uint32_t>(h ^ (h >> 29)) | 1u;
}

std::string describeCall(const CollOp& op) {
  std::string out = strCat(collName(op.kind), "(count ", op.count, ", ",
                           dataTypeName(op.type) ? dataTypeName(op.type) : "?");
  if (op.kind == CollKind::kAllReduce || op.kind == CollKind::kReduce ||
      op.kind == CollKind::kReduceScatter)
    out += strCat(", ", reduceOpKindName(op.reduce) ? reduceOpKindName(op.reduce) : "?");
  if (op.kind == CollKind::kBroadcast || op.kind == CollKind::kReduce)
    out += strCat(", root ", op.root);
  return out + ")";
}

namespace {

// Blocks, one per rank, in the larger of a rank's buffers.
size_t blocksPerBuffer(const CollOp& op) {
  const bool perRank = op.kind == CollKind::kAllGather || op.kind == CollKind::kReduceScatter ||
                       op.kind == CollKind::kAlltoAll;
  return perRank ? static_cast<size_t>(op.comm->nranks()) : 1;
}

}  // namespace

size_t largestBufferBytes(const CollOp& op) {
  return op.count * dataTypeSize(op.type) * blocksPerBuffer(op);
}

void validateCollOp(const CollOp& op, loomRedOp_t userOp) {
  const char* name = collName(op.kind);
  Comm& c = *op.comm;
  c.requireReady(name);
  LOOM_ENFORCE(isValidDataType(op.type), InvalidArgument, name, ": datatype ",
               static_cast<int>(op.type), " is not a loomDataType_t (0 to ", loomNumTypes - 1, ")");
  const int n = c.nranks(), me = c.rank();
  const bool reduces = op.kind == CollKind::kAllReduce || op.kind == CollKind::kReduce ||
                       op.kind == CollKind::kReduceScatter;
  if (reduces) {
    bool builtin = static_cast<int>(userOp) >= 0 && static_cast<int>(userOp) < loomNumOps;
    LOOM_ENFORCE(builtin || c.customOp(userOp) != nullptr, InvalidArgument, name, ": op ",
                 static_cast<int>(userOp),
                 " is neither a built-in loomRedOp_t nor a live op from "
                 "loomRedOpCreatePreMulSum on this communicator");
    if (const Comm::CustomOp* custom = c.customOp(userOp)) {
      LOOM_ENFORCE(custom->type == op.type, InvalidArgument, name,
                   ": the PreMulSum op was created for datatype ", dataTypeName(custom->type),
                   " but the call uses ", dataTypeName(op.type));
    }
  }
  if (op.kind == CollKind::kBroadcast || op.kind == CollKind::kReduce) {
    LOOM_ENFORCE(op.root >= 0 && op.root < n, InvalidArgument, name, ": root ", op.root,
                 " is out of range for ", n, " ranks");
  }
  if (op.kind == CollKind::kSend || op.kind == CollKind::kRecv) {
    LOOM_ENFORCE(op.peer >= 0 && op.peer < n, InvalidArgument, name, ": peer ", op.peer,
                 " is out of range for ", n, " ranks");
  }
  // Whole-buffer sizes must fit in size_t.
  const size_t elem = dataTypeSize(op.type);
  const size_t blocks = blocksPerBuffer(op);
  size_t largest = 0;  // a multiply, where a bound by division costs two divides every call
  LOOM_ENFORCE(!__builtin_mul_overflow(op.count, elem * blocks, &largest), InvalidArgument, name,
               ": count ", op.count, " makes the buffers larger than memory can be");
  if (op.count == 0) return;
  bool needSend = op.kind != CollKind::kRecv && !(op.kind == CollKind::kBroadcast && me != op.root);
  bool needRecv = op.kind != CollKind::kSend && !(op.kind == CollKind::kReduce && me != op.root);
  LOOM_ENFORCE(!needSend || op.sendbuff != nullptr, InvalidArgument, name,
               ": sendbuff is NULL but count is ", op.count);
  LOOM_ENFORCE(!needRecv || op.recvbuff != nullptr, InvalidArgument, name,
               ": recvbuff is NULL but count is ", op.count);
  if (c.device() != LOOM_DEVICE_CPU) {
    // A CUDA communicator's buffers must be memory its device reaches, checked by pointer
    // attributes over each buffer's whole extent.
    const size_t bytes = op.count * elem;
    const bool gathers = op.kind == CollKind::kAllGather || op.kind == CollKind::kAlltoAll;
    const bool scatters = op.kind == CollKind::kReduceScatter || op.kind == CollKind::kAlltoAll;
    if (needSend)
      checkCudaBuffer(c.device(), op.sendbuff, scatters ? bytes * blocks : bytes, name, "sendbuff");
    if (needRecv)
      checkCudaBuffer(c.device(), op.recvbuff, gathers ? bytes * blocks : bytes, name, "recvbuff");
  }
}

}  // namespace loom
