// The nccl-tests loop for other libraries (Open MPI, Gloo), so their numbers come out in the
// same table, from the same sizes, data and checks as loom's: one rank per process, the
// library running the collective on host buffers.
#ifndef LOOM_PERF_HARNESS_BASELINE_H_
#define LOOM_PERF_HARNESS_BASELINE_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "perf/harness/collectives.h"
#include "perf/harness/options.h"
#include "perf/harness/team.h"

namespace loomperf {

class Baseline {
 public:
  virtual ~Baseline() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // The rest of this rank's "#  Rank" line, e.g. "Open MPI 4.1.4".
  virtual std::string describe() const = 0;
  // Barrier, result combination and rank lines, over the library itself.
  virtual ProcessGroup& group() = 0;
  // Empty if the library can run this collective, type and op; else why not.
  virtual std::string supports(const CollSpec& spec, loomDataType_t type, Op op) const = 0;
  // One call. In place, the input sits where nccl-tests puts it inside `recv`.
  virtual void run(const CollSpec& spec, const void* send, void* recv, const CollCounts& c,
                   loomDataType_t type, Op op, int root, bool inPlace) = 0;
  // Whether calls may move through the buffers as loom's do (BufferShift). A library that
  // binds an algorithm object to a buffer's address says no: one object per offset would be
  // set up inside the timed loop.
  virtual bool movesThroughBuffers(const CollSpec&) const { return true; }
  // Where rank rank()'s result starts, in bytes from recv (nccl-tests' layout unless the
  // library's own in-place form differs).
  virtual size_t resultOffset(const CollSpec&, const CollCounts& c, size_t ts, bool inPlace) const {
    return inPlace ? c.recvInplaceOffset * ts * rank() : 0;
  }
};

// What the baseline binaries take beyond nccl-tests' flags.
struct BaselineArgs {
  std::string coll = "all_reduce";  // --coll
  std::string algo;                 // --algo (library-specific, e.g. Gloo's ring)
};

using BaselineFactory =
    std::function<std::unique_ptr<Baseline>(const BaselineArgs&, int* argc, char*** argv)>;

// Parses --coll, --algo and nccl-tests' flags, makes the library's ranks and runs the sweep.
// Exit status as the *_perf binaries.
int baselineMain(int argc, char** argv, const std::string& program, const BaselineFactory& make);

}  // namespace loomperf

#endif  // LOOM_PERF_HARNESS_BASELINE_H_
