// The collective cases of the GPU check: which calls, with which buffers and inputs, and how
// a rank runs them on a CPU and a CUDA communicator and compares the results. Shared by the
// check's thread and process phases and by the simulated runtime's tests
// (tests/cuda/cuda_executor_test.cc); plain C++ on the device-runtime seam, so it builds
// without CUDA too.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "loom/loom.h"
#include "src/plan/coll.h"

namespace loom::gpucheck {

// The collectives the cases call: CollKind's (src/plan/coll.h), point-to-point left out.
struct CollCase {
  CollKind coll;
  loomDataType_t type;
  loomRedOp_t op;
  size_t count;
  bool inPlace;
};

// Every collective x type x op (sum only for those that do not reduce) x count x in/out of
// place at `counts`; float32 and bfloat16 sums, out of place, at `largeCounts`. AllReduce
// alone unless `allCollectives`.
std::vector<CollCase> collCases(const std::vector<size_t>& counts,
                                const std::vector<size_t>& largeCounts, bool allCollectives);
std::string describe(const CollCase& c);

// Every datatype of the table (src/kernels/datatype_table.def), in its order.
extern const std::vector<loomDataType_t> kAllDataTypes;

// A rank's buffers (NCCL's sizes; in place the send buffer lies inside the receive one and
// `send` is 0) and the bytes of its input (in place: the whole receive buffer).
struct CaseBuffers {
  size_t send = 0;
  size_t recv = 0;
  size_t input = 0;
};
CaseBuffers bufferBytes(const CollCase& c, int nranks);

// Rank `rank`'s input for case `k`: small values (floats in {-1, -0.5, 0, 0.5, 1}, or
// {-1, 0, 1} for float8e5m2; integers in [-3, 3]) whose sums and products over up to 8 ranks
// are exact in every type, whatever the order.
std::vector<unsigned char> caseInput(const CollCase& c, size_t bytes, int rank, size_t k);

// The call on rank `rank`'s buffers, in place at NCCL's offsets into `recv`.
loomResult_t callCollective(const CollCase& c, unsigned char* send, unsigned char* recv, int rank,
                            loomComm_t comm, void* stream);

// Records a failure: printed (the first ten), and the first one kept for the phase's summary.
void noteFailure(const std::string& what);
std::string firstFailure();

// Rank `rank` of `nranks` runs every case on its CPU communicator (host buffers) and its CUDA
// one (device buffers of its current device, on a stream of its own), and compares the
// results bit for bit. Returns the failures, noted with `where`. Stops at a
// failed call: the ranks would no longer agree on the calls.
int runRankCases(const std::vector<CollCase>& cases, int rank, int nranks, loomComm_t cpu,
                 loomComm_t gpu, const std::string& where);

}  // namespace loom::gpucheck
