// The C API of the data path: collectives, point-to-point, groups, host streams and events,
// custom reduction ops. Each call is validated here, then run at once (NULL stream), enqueued
// on its host stream, or kept until loomGroupEnd.
#include <cstring>
#include <map>
#include <memory>
#include <string_view>
#include <vector>

#include "loom/loom.h"
#include "src/api/api_guard.h"
#include "src/comm/comm.h"
#include "src/comm/comm_registry.h"
#include "src/comm/flight_recorder.h"
#include "src/exec/cpu/executor.h"
#include "src/exec/device_executor.h"
#include "src/exec/host_stream.h"
#include "src/kernels/datatype_traits.h"
#include "src/kernels/reduce_copy_dispatch.h"
#include "src/plan/coll.h"
#include "src/plan/planner.h"

using namespace loom;

namespace {

struct PendingOp {
  CollOp op;
  std::shared_ptr<HostStream> stream;  // null: run on the thread that ends the group
};

// A group belongs to the thread that started it, as in NCCL.
struct GroupState {
  int depth = 0;
  std::vector<PendingOp> ops;
  loomResult_t firstError = loomSuccess;
};
thread_local GroupState tlsGroup;

template <typename T>
ReduceScalar scalarFrom(const void* p) {
  T v;
  std::memcpy(&v, p, sizeof(v));
  ReduceScalar s;
  if constexpr (std::is_integral_v<T>) {
    s.i = static_cast<int64_t>(v);
    s.f = static_cast<double>(v);
  } else if constexpr (std::is_floating_point_v<T>) {
    s.f = static_cast<double>(v);
  } else {
    s.f = static_cast<double>(v.toFloat());  // float16, bfloat16, float8
  }
  return s;
}

// Reads a scalar of `type` at `p` as the kernels' ReduceScalar.
ReduceScalar readScalar(loomDataType_t type, const void* p) {
  switch (type) {
#define LOOM_DATATYPE(e, Type, name) \
  case e:                            \
    return scalarFrom<Type>(p);
#include "src/kernels/datatype_table.def"
    default:
      throw InvalidArgument(strCat("datatype ", static_cast<int>(type), " is not valid"));
  }
}

// The kernels' op for the user's: avg is sum then one division by nranks for every type
// (exact whenever the sum divides, and no overflow of a pre-scaled fp16 input).
void resolveReduction(CollOp& op, loomRedOp_t userOp) {
  if (const Comm::CustomOp* custom = op.comm->customOp(userOp)) {
    op.reduce = ReduceOpKind::kPreMulSum;
    if (custom->pointer != nullptr) {
      op.deviceScalar = custom->pointer;
    } else {
      op.scalar = readScalar(custom->type, custom->value.data());
    }
  } else {
    op.reduce = reduceOpKindFor(userOp, op.type);
    if (userOp == loomAvg) op.scalar = averageScalar(op.comm->nranks());
  }
}

// Scalars "on the device" (host memory for CPU communicators) are read as the op runs.
void readLateScalar(CollOp& op) {
  if (op.deviceScalar != nullptr) op.scalar = readScalar(op.type, op.deviceScalar);
}
void readLateScalars(std::vector<CollOp>& ops) {
  for (CollOp& op : ops) readLateScalar(op);
}

// What the flight recorder keeps of a call (src/comm/flight_recorder.h).
CallShape shapeOf(const CollOp& op, bool grouped) {
  CallShape shape;
  shape.kind = collName(op.kind);
  shape.type = dataTypeName(op.type);
  if (op.kind == CollKind::kAllReduce || op.kind == CollKind::kReduce ||
      op.kind == CollKind::kReduceScatter)
    shape.op = reduceOpKindName(op.reduce);
  shape.count = op.count;
  if (op.kind == CollKind::kBroadcast || op.kind == CollKind::kReduce) shape.root = op.root;
  if (op.kind == CollKind::kSend || op.kind == CollKind::kRecv) shape.peer = op.peer;
  shape.grouped = grouped;
  return shape;
}

// A call's end (Comm::finishCall). A device executor's calls end on their streams and it
// records them there; here only their failures to be enqueued.
void finishRecord(Comm& comm, uint64_t seq, loomResult_t result) {
  if (!executorOf(comm).hostStreams()) {
    if (result == loomSuccess) return;
    comm.flightRecorder().start(seq);  // it failed while it was being enqueued
  }
  comm.finishCall(seq, result);
}

// Runs `run` (which runs the calls `ops`) between the flight recorder's start and finish of
// each call; a call that throws fails them all, as the executor fails them.
// A device executor may take the calls out of `ops`, so the calls' ends are noted first.
template <typename Run>
void recorded(std::vector<CollOp>& ops, Run&& run) {
  if (ops.empty()) return;
  std::vector<std::pair<std::shared_ptr<Comm>, uint64_t>> calls;
  calls.reserve(ops.size());
  for (const CollOp& op : ops) {
    if (executorOf(*op.comm).hostStreams()) op.comm->flightRecorder().start(op.seq);
    calls.emplace_back(op.comm, op.seq);
  }
  const auto finishAll = [&](loomResult_t result) {
    for (const auto& [comm, seq] : calls) finishRecord(*comm, seq, result);
  };
  try {
    run();
  } catch (const Error& e) {
    finishAll(e.code());
    throw;
  } catch (...) {
    finishAll(loomInternalError);
    throw;
  }
  finishAll(loomSuccess);
}

// A group's calls run on their communicators' executor: one device per group. Checked before
// any of them is queued, so a refused group runs nothing.
void requireOneDevice(const std::vector<PendingOp>& pending) {
  if (pending.empty()) return;
  const std::string_view device = executorOf(*pending.front().op.comm).device();
  for (const PendingOp& p : pending)
    LOOM_ENFORCE(std::string_view(executorOf(*p.op.comm).device()) == device, InvalidUsage,
                 "a group mixes ", device, " and ", executorOf(*p.op.comm).device(),
                 " communicators; put the calls of each device in a group of their own");
}

void runOn(std::vector<CollOp>& ops) {
  if (!ops.empty()) executorOf(*ops.front().comm).run(ops);
}

// Runs a group's operations: those on host streams are enqueued there (one item per stream);
// the others go to their executor from this thread, which runs them here (CPU) or enqueues
// them on their device streams (CUDA), once for the whole group.
void runNow(std::vector<PendingOp>& pending) {
  requireOneDevice(pending);
  std::map<HostStream*, std::vector<CollOp>> byStream;
  std::vector<CollOp> now;
  std::map<HostStream*, std::shared_ptr<HostStream>> streams;
  for (PendingOp& p : pending) {
    if (p.stream) {
      streams[p.stream.get()] = p.stream;
      byStream[p.stream.get()].push_back(std::move(p.op));
    } else {
      now.push_back(std::move(p.op));
    }
  }
  for (auto& [raw, ops] : byStream) {
    raw->enqueue([ops = std::move(ops)]() mutable {
      recorded(ops, [&] {
        readLateScalars(ops);
        runOn(ops);
      });
    });
  }
  recorded(now, [&] {
    readLateScalars(now);
    runOn(now);
  });
}

// One call outside a group, the latency-critical case: on the NULL stream, its flight-record
// entry was made running when it was issued; on a host stream, when its item started.
// `op` keeps its communicator alive until the call is recorded as finished (a loomCommAbort on
// another thread may drop the registry's reference meanwhile): the executor leaves it in place.
void runOneNow(CollOp& op) {
  Comm& comm = *op.comm;
  const uint64_t seq = op.seq;
  try {
    readLateScalar(op);
    executorOf(comm).runOne(op);
  } catch (const Error& e) {
    finishRecord(comm, seq, e.code());
    throw;
  } catch (...) {
    finishRecord(comm, seq, loomInternalError);
    throw;
  }
  finishRecord(comm, seq, loomSuccess);
}

loomResult_t submit(const char* function, loomComm_t handle, CollOp op, loomRedOp_t userOp,
                    loomStream_t streamHandle) {
  return guarded(function, handle, [&] {
    op.comm = findComm(handle);
    validateCollOp(op, userOp);
    bool reduces = op.kind == CollKind::kAllReduce || op.kind == CollKind::kReduce ||
                   op.kind == CollKind::kReduceScatter;
    if (reduces) resolveReduction(op, userOp);
    // Chosen once per call; bad LOOM_ALGO / LOOM_PROTO values fail here, before any peer is
    // involved.
    choosePlan(op);
    // The stream belongs to the device: an executor without host streams takes the call (or
    // its group) with its cudaStream_t as it is (the CUDA stub refuses it).
    const bool hostStreams = executorOf(*op.comm).hostStreams();
    std::shared_ptr<HostStream> stream;
    if (hostStreams && streamHandle != nullptr) {
      stream = findStream(streamHandle);
      LOOM_ENFORCE(&stream->comm() == op.comm.get(), InvalidArgument, function,
                   ": the stream belongs to another communicator; create one per "
                   "communicator with loomStreamCreate");
    }
    // Numbered once nothing here can refuse the call: every rank numbers the same calls.
    Comm& comm = *op.comm;
    op.seq = comm.nextOpNumber();
    FlightRecorder& recorder = comm.flightRecorder();
    const bool grouped = tlsGroup.depth > 0;
    const uint64_t now = FlightRecorder::ticks();
    if (recorder.enabled())
      recorder.issue(op.seq, shapeOf(op, grouped), hostStreams && !grouped && stream == nullptr,
                     now);
    comm.calls().issue(op.seq, collName(op.kind), op.count, static_cast<int>(op.type),
                       op.kind == CollKind::kSend || op.kind == CollKind::kRecv ? op.peer : op.root,
                       now);
    if (!hostStreams) op.deviceStream = static_cast<void*>(streamHandle);
    if (grouped) {
      tlsGroup.ops.push_back(PendingOp{std::move(op), std::move(stream)});
      return loomSuccess;
    }
    if (!hostStreams || stream == nullptr) {
      runOneNow(op);
      return loomSuccess;
    }
    // One call on a host stream: one item that owns the op. Small calls are dominated by
    // this path, so it allocates only the item (runNow's per-stream maps cost more).
    stream->enqueue([op = std::move(op)]() mutable {
      op.comm->flightRecorder().start(op.seq);
      runOneNow(op);
    });
    return loomSuccess;
  });
}

CollOp makeOp(CollKind kind, const void* sendbuff, void* recvbuff, size_t count,
              loomDataType_t type) {
  CollOp op;
  op.kind = kind;
  op.sendbuff = sendbuff;
  op.recvbuff = recvbuff;
  op.count = count;
  op.type = type;
  return op;
}

}  // namespace

extern "C" {

LOOM_API loomResult_t loomAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                                    loomDataType_t datatype, loomRedOp_t op, loomComm_t comm,
                                    loomStream_t stream) {
  return submit("loomAllReduce", comm,
                makeOp(CollKind::kAllReduce, sendbuff, recvbuff, count, datatype), op, stream);
}

LOOM_API loomResult_t loomBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                                    loomDataType_t datatype, int root, loomComm_t comm,
                                    loomStream_t stream) {
  CollOp o = makeOp(CollKind::kBroadcast, sendbuff, recvbuff, count, datatype);
  o.root = root;
  return submit("loomBroadcast", comm, std::move(o), loomSum, stream);
}

LOOM_API loomResult_t loomReduce(const void* sendbuff, void* recvbuff, size_t count,
                                 loomDataType_t datatype, loomRedOp_t op, int root, loomComm_t comm,
                                 loomStream_t stream) {
  CollOp o = makeOp(CollKind::kReduce, sendbuff, recvbuff, count, datatype);
  o.root = root;
  return submit("loomReduce", comm, std::move(o), op, stream);
}

LOOM_API loomResult_t loomAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                                    loomDataType_t datatype, loomComm_t comm, loomStream_t stream) {
  return submit("loomAllGather", comm,
                makeOp(CollKind::kAllGather, sendbuff, recvbuff, sendcount, datatype), loomSum,
                stream);
}

LOOM_API loomResult_t loomReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                        loomDataType_t datatype, loomRedOp_t op, loomComm_t comm,
                                        loomStream_t stream) {
  return submit("loomReduceScatter", comm,
                makeOp(CollKind::kReduceScatter, sendbuff, recvbuff, recvcount, datatype), op,
                stream);
}

LOOM_API loomResult_t loomAlltoAll(const void* sendbuff, void* recvbuff, size_t count,
                                   loomDataType_t datatype, loomComm_t comm, loomStream_t stream) {
  return submit("loomAlltoAll", comm,
                makeOp(CollKind::kAlltoAll, sendbuff, recvbuff, count, datatype), loomSum, stream);
}

LOOM_API loomResult_t loomSend(const void* sendbuff, size_t count, loomDataType_t datatype,
                               int peer, loomComm_t comm, loomStream_t stream) {
  CollOp o = makeOp(CollKind::kSend, sendbuff, nullptr, count, datatype);
  o.peer = peer;
  return submit("loomSend", comm, std::move(o), loomSum, stream);
}

LOOM_API loomResult_t loomRecv(void* recvbuff, size_t count, loomDataType_t datatype, int peer,
                               loomComm_t comm, loomStream_t stream) {
  CollOp o = makeOp(CollKind::kRecv, nullptr, recvbuff, count, datatype);
  o.peer = peer;
  return submit("loomRecv", comm, std::move(o), loomSum, stream);
}

LOOM_API loomResult_t loomGroupStart(void) {
  ++tlsGroup.depth;
  return loomSuccess;
}

namespace {

// The communicator a group's failure is reported on (its last error, the hang report): the
// one every call of the outermost group uses, else none.
const loomComm* groupComm() {
  if (tlsGroup.depth != 1 || tlsGroup.ops.empty()) return nullptr;
  const Comm* first = tlsGroup.ops.front().op.comm.get();
  for (const PendingOp& p : tlsGroup.ops)
    if (p.op.comm.get() != first) return nullptr;
  return first;
}

}  // namespace

LOOM_API loomResult_t loomGroupEnd(void) {
  return guarded("loomGroupEnd", groupComm(), [&] {
    LOOM_ENFORCE(tlsGroup.depth > 0, InvalidUsage,
                 "loomGroupEnd without a matching loomGroupStart on this thread");
    if (--tlsGroup.depth > 0) return loomSuccess;
    std::vector<PendingOp> ops = std::move(tlsGroup.ops);
    tlsGroup.ops.clear();
    runNow(ops);
    return loomSuccess;
  });
}

LOOM_API loomResult_t loomRedOpCreatePreMulSum(loomRedOp_t* op, void* scalar,
                                               loomDataType_t datatype,
                                               loomScalarResidence_t residence, loomComm_t comm) {
  return guarded("loomRedOpCreatePreMulSum", comm, [&] {
    LOOM_ENFORCE(op != nullptr, InvalidArgument, "op (the output pointer) is NULL");
    LOOM_ENFORCE(scalar != nullptr, InvalidArgument, "scalar is NULL");
    LOOM_ENFORCE(isValidDataType(datatype), InvalidArgument, "datatype ",
                 static_cast<int>(datatype), " is not a loomDataType_t");
    LOOM_ENFORCE(residence == loomScalarDevice || residence == loomScalarHostImmediate,
                 InvalidArgument, "residence ", static_cast<int>(residence),
                 " is neither loomScalarDevice nor loomScalarHostImmediate");
    std::shared_ptr<Comm> c = findComm(comm);
    Comm::CustomOp custom{datatype, {}, nullptr};
    if (residence == loomScalarHostImmediate) {
      auto* bytes = static_cast<const unsigned char*>(scalar);
      custom.value.assign(bytes, bytes + dataTypeSize(datatype));
    } else {
      custom.pointer = scalar;  // CPU communicators: "device" memory is host memory
    }
    *op = c->addCustomOp(std::move(custom));
    return loomSuccess;
  });
}

LOOM_API loomResult_t loomRedOpDestroy(loomRedOp_t op, loomComm_t comm) {
  return guarded("loomRedOpDestroy", comm, [&] {
    findComm(comm)->removeCustomOp(op);
    return loomSuccess;
  });
}

LOOM_API loomResult_t loomStreamCreate(loomComm_t comm, loomStream_t* stream) {
  return guarded("loomStreamCreate", comm, [&] {
    LOOM_ENFORCE(stream != nullptr, InvalidArgument, "stream (the output pointer) is NULL");
    *stream = nullptr;
    std::shared_ptr<Comm> c = findComm(comm);
    c->requireReady("loomStreamCreate");
    LOOM_ENFORCE(c->device() == LOOM_DEVICE_CPU, InvalidUsage,
                 "loomStreamCreate: host streams are for CPU communicators; a CUDA "
                 "communicator takes a cudaStream_t");
    auto s = std::make_shared<HostStream>(c);
    cpuExecutorOf(*c).addStream(s);
    *stream = registerStream(std::move(s));
    return loomSuccess;
  });
}

LOOM_API loomResult_t loomStreamDestroy(loomStream_t stream) {
  return guarded("loomStreamDestroy", nullptr, [&] {
    std::shared_ptr<HostStream> s = unregisterStream(stream);
    return s->wait(s->enqueued());
  });
}

LOOM_API loomResult_t loomStreamQuery(loomStream_t stream) {
  return guarded("loomStreamQuery", nullptr, [&] {
    std::shared_ptr<HostStream> s = findStream(stream);
    return s->query(s->enqueued());
  });
}

LOOM_API loomResult_t loomStreamSynchronize(loomStream_t stream) {
  return guarded("loomStreamSynchronize", nullptr, [&] {
    std::shared_ptr<HostStream> s = findStream(stream);
    return s->wait(s->enqueued());
  });
}

LOOM_API loomResult_t loomEventCreate(loomEvent_t* event) {
  return guarded("loomEventCreate", nullptr, [&] {
    LOOM_ENFORCE(event != nullptr, InvalidArgument, "event (the output pointer) is NULL");
    *event = registerEvent(std::make_shared<HostEvent>());
    return loomSuccess;
  });
}

LOOM_API loomResult_t loomEventRecord(loomEvent_t event, loomStream_t stream) {
  return guarded("loomEventRecord", nullptr, [&] {
    std::shared_ptr<HostEvent> e = findEvent(event);
    e->record(findStream(stream));
    return loomSuccess;
  });
}

LOOM_API loomResult_t loomEventQuery(loomEvent_t event) {
  return guarded("loomEventQuery", nullptr, [&] { return findEvent(event)->query(); });
}

LOOM_API loomResult_t loomEventSynchronize(loomEvent_t event) {
  return guarded("loomEventSynchronize", nullptr, [&] { return findEvent(event)->wait(); });
}

LOOM_API loomResult_t loomEventDestroy(loomEvent_t event) {
  return guarded("loomEventDestroy", nullptr, [&] {
    unregisterEvent(event);
    return loomSuccess;
  });
}

}  // extern "C"
