#include "tools/gpu_check/coll_cases.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <exception>
#include <mutex>
#include <random>

#include "src/cuda/runtime.h"
#include "src/kernels/datatype_traits.h"
#include "src/kernels/numeric_types.h"

namespace loom::gpucheck {
namespace {

bool reduces(CollKind c) {
  return c == CollKind::kAllReduce || c == CollKind::kReduceScatter || c == CollKind::kReduce;
}

void putValue(loomDataType_t t, unsigned char* at, int v) {
  const float half = static_cast<float>(v) * 0.5f;
  switch (t) {
    case loomFloat32:
      std::memcpy(at, &half, 4);
      return;
    case loomFloat64: {
      const double d = half;
      std::memcpy(at, &d, 8);
      return;
    }
    case loomFloat16: {
      const uint16_t b = Float16::fromFloat(half).bits;
      std::memcpy(at, &b, 2);
      return;
    }
    case loomBfloat16: {
      const uint16_t b = BFloat16::fromFloat(half).bits;
      std::memcpy(at, &b, 2);
      return;
    }
    case loomFloat8e4m3:
      *at = Float8E4M3::fromFloat(half).bits;
      return;
    case loomFloat8e5m2:
      *at = Float8E5M2::fromFloat(static_cast<float>((v > 0) - (v < 0))).bits;
      return;
    default: {  // integers: two's complement, little-endian, sign-extended
      const int64_t x = v;
      std::memcpy(at, &x, dataTypeSize(t));
    }
  }
}

std::mutex failureMutex;
std::string firstFailureText;
int failuresPrinted = 0;

}  // namespace

void noteFailure(const std::string& what) {
  std::lock_guard<std::mutex> lock(failureMutex);
  if (firstFailureText.empty()) firstFailureText = what;
  if (failuresPrinted++ < 10) std::printf("FAILED %s\n", what.c_str());
}

std::string firstFailure() {
  std::lock_guard<std::mutex> lock(failureMutex);
  return firstFailureText;
}

const std::vector<loomDataType_t> kAllDataTypes = {
#define LOOM_DATATYPE(e, Type, name) e,
#include "src/kernels/datatype_table.def"
};

std::vector<CollCase> collCases(const std::vector<size_t>& counts,
                                const std::vector<size_t>& largeCounts, bool allCollectives) {
  std::vector<CollCase> cases;
  const loomRedOp_t ops[] = {loomSum, loomProd, loomMax, loomMin, loomAvg};
  for (CollKind coll : {CollKind::kAllReduce, CollKind::kAllGather, CollKind::kReduceScatter,
                        CollKind::kBroadcast, CollKind::kReduce, CollKind::kAlltoAll}) {
    if (!allCollectives && coll != CollKind::kAllReduce) continue;
    for (loomDataType_t type : kAllDataTypes)
      for (loomRedOp_t op : ops) {
        if (!reduces(coll) && op != loomSum) continue;
        for (size_t count : counts)
          for (bool inPlace : {false, true}) {
            if (coll == CollKind::kAlltoAll && inPlace) continue;
            cases.push_back({coll, type, op, count, inPlace});
          }
      }
    for (size_t count : largeCounts)
      for (loomDataType_t type : {loomFloat32, loomBfloat16})
        cases.push_back({coll, type, loomSum, count, false});
  }
  return cases;
}

std::string describe(const CollCase& c) {
  return std::string(collName(c.coll)) + " " + dataTypeName(c.type) + " op " +
         std::to_string(c.op) + " count " + std::to_string(c.count) +
         (c.inPlace ? " in place" : " out of place");
}

CaseBuffers bufferBytes(const CollCase& c, int nranks) {
  const size_t b = c.count * dataTypeSize(c.type);
  CaseBuffers out;
  switch (c.coll) {
    case CollKind::kAllGather:
      out = {b, b * nranks, 0};
      break;
    case CollKind::kReduceScatter:
      out = {b * nranks, b, 0};
      break;
    case CollKind::kAlltoAll:
      out = {b * nranks, b * nranks, 0};
      break;
    default:
      out = {b, b, 0};
  }
  if (c.inPlace) {
    out.recv = std::max(out.send, out.recv);
    out.input = out.recv;
    out.send = 0;
  } else {
    out.input = out.send;
  }
  return out;
}

std::vector<unsigned char> caseInput(const CollCase& c, size_t bytes, int rank, size_t k) {
  std::mt19937 gen(static_cast<unsigned>(k * 131 + rank));
  std::vector<unsigned char> out(bytes);
  const size_t size = dataTypeSize(c.type);
  for (size_t i = 0; i < bytes / size; ++i) {
    const int v = isFloatingDataType(c.type) ? static_cast<int>(gen() % 5) - 2
                                             : static_cast<int>(gen() % 7) - 3;
    putValue(c.type, out.data() + i * size, v);
  }
  return out;
}

loomResult_t callCollective(const CollCase& c, unsigned char* send, unsigned char* recv, int rank,
                            loomComm_t comm, void* stream) {
  auto s = static_cast<loomStream_t>(stream);
  const size_t b = c.count * dataTypeSize(c.type);
  switch (c.coll) {
    case CollKind::kAllReduce:
      return loomAllReduce(c.inPlace ? recv : send, recv, c.count, c.type, c.op, comm, s);
    case CollKind::kAllGather:
      return loomAllGather(c.inPlace ? recv + rank * b : send, recv, c.count, c.type, comm, s);
    case CollKind::kReduceScatter:
      return loomReduceScatter(c.inPlace ? recv : send, c.inPlace ? recv + rank * b : recv, c.count,
                               c.type, c.op, comm, s);
    case CollKind::kBroadcast:
      return loomBroadcast(c.inPlace ? recv : send, recv, c.count, c.type, 0, comm, s);
    case CollKind::kReduce:
      return loomReduce(c.inPlace ? recv : send, recv, c.count, c.type, c.op, 0, comm, s);
    case CollKind::kAlltoAll:
      return loomAlltoAll(send, recv, c.count, c.type, comm, s);
    case CollKind::kSend:
    case CollKind::kRecv:
      break;  // no case makes them
  }
  return loomInternalError;
}

int runRankCases(const std::vector<CollCase>& cases, int rank, int nranks, loomComm_t cpu,
                 loomComm_t gpu, const std::string& where) {
  int problems = 0;
  auto complain = [&](const CollCase& c, const std::string& what) {
    ++problems;
    noteFailure(where + " rank " + std::to_string(rank) + ": " + describe(c) + ": " + what);
  };
  cuda::DeviceRuntime& rt = cuda::deviceRuntime();
  int device = 0;
  loomCommDevice(gpu, &device);
  rt.setDevice(device);  // this thread's current device, as CUDA code would set it
  cuda::Stream stream = rt.streamCreate();
  for (size_t k = 0; k < cases.size(); ++k) {
    const CollCase& c = cases[k];
    const CaseBuffers sizes = bufferBytes(c, nranks);
    const std::vector<unsigned char> in = caseInput(c, sizes.input, rank, k);
    std::vector<unsigned char> hostSend(sizes.send), hostRecv(sizes.recv, 0x5a);
    if (!in.empty())
      std::memcpy(c.inPlace ? hostRecv.data() : hostSend.data(), in.data(), in.size());
    if (callCollective(c, hostSend.data(), hostRecv.data(), rank, cpu, nullptr) != loomSuccess) {
      complain(c, std::string("CPU call: ") + loomGetLastError(nullptr));
      break;
    }
    auto* devSend = static_cast<unsigned char*>(rt.malloc(std::max<size_t>(sizes.send, 1)));
    auto* devRecv = static_cast<unsigned char*>(rt.malloc(std::max<size_t>(sizes.recv, 1)));
    rt.memsetAsync(devRecv, 0x5a, sizes.recv, stream);
    if (!in.empty()) rt.memcpyAsync(c.inPlace ? devRecv : devSend, in.data(), in.size(), stream);
    const loomResult_t result = callCollective(c, devSend, devRecv, rank, gpu, stream);
    const std::string callError = result == loomSuccess ? "" : loomGetLastError(nullptr);
    std::vector<unsigned char> out(sizes.recv);
    if (result == loomSuccess) rt.memcpyAsync(out.data(), devRecv, sizes.recv, stream);
    std::string streamError;
    try {
      rt.streamSynchronize(stream);
    } catch (const std::exception& e) {
      streamError = e.what();
    }
    rt.free(devSend);
    rt.free(devRecv);
    if (!callError.empty() || !streamError.empty()) {
      complain(c, callError.empty() ? "stream: " + streamError : "CUDA call: " + callError);
      break;
    }
    if (out != hostRecv) complain(c, "differs from the CPU communicator's result");
  }
  rt.streamDestroy(stream);
  return problems;
}

}  // namespace loom::gpucheck
