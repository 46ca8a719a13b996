#include "perf/harness/runner.h"

#include <algorithm>
#include <string_view>
#include <vector>

#include "perf/harness/job.h"
#include "perf/harness/measure.h"

namespace loomperf {
namespace {

// nccl-tests' TimeTest for one type, op and root: warm up at the largest and smallest size,
// then one row per size (out of place, then in place), for -N cycles.
void timeTest(Job& job, int t, Measurer& m, const CollSpec& spec, loomDataType_t type, Op op,
              int root, int64_t* errors, double* bwSum, int* bwCount) {
  const Options& o = job.o;
  Reporter* rep = t == 0 && job.isMain ? job.reporter : nullptr;
  m.select(spec, type, op, root);
  job.team->barrier(t);
  m.warmup(o.maxBytes);
  m.warmup(o.minBytes);
  for (int cycle = 0; o.runCycles == 0 || cycle < o.runCycles; ++cycle) {
    for (size_t size = o.minBytes; size <= o.maxBytes;) {
      CollCounts c = m.counts(size);
      size_t ts = typeInfo(type).size;
      if (rep != nullptr)
        rep->rowStart(std::max(c.sendCount, c.recvCount) * ts, c.paramCount, typeInfo(type).name,
                      spec.hasOp ? opName(op) : "none", root);
      for (bool inPlace : {false, true}) {
        Measurement r = m.measure(size, inPlace);
        *errors += r.failedHere;
        *bwSum += r.bw.bus;
        ++*bwCount;
        if (rep != nullptr)
          rep->rowBody(r.seconds * 1e6, r.bw.alg, r.bw.bus, o.check > 0, r.wrong,
                       o.reportCputime != 0, !inPlace);
      }
      if (rep != nullptr) rep->rowEnd(o.iters * o.aggIters, spec.name);
      size_t next = o.stepFactor > 1 ? size * o.stepFactor : size + o.stepBytes;
      if (next <= size) break;  // -b 0 with a factor would never grow
      size = next;
    }
  }
}

}  // namespace

int benchMain(int argc, char** argv, const CollSpec& spec) {
  double avgBusBw = 0;
  JobHooks hooks;
  hooks.begin = [](Job& job) { job.reporter->tableHeader(job.o.reportCputime != 0); };
  hooks.thread = [&](Job& job, int t) -> int64_t {
    const Options& o = job.o;
    std::vector<Op> ops = spec.hasOp ? o.ops : std::vector<Op>{Op::kSum};
    std::vector<int> roots;
    if (!spec.hasRoot)
      roots = {-1};
    else if (o.root == -1)
      for (int r = 0; r < job.nranks; ++r) roots.push_back(r);
    else
      roots = {o.root};
    Measurer m(job, t);
    int64_t errors = 0;
    double bwSum = 0;
    int bwCount = 0;
    for (loomDataType_t type : o.types)
      for (Op op : ops)
        for (int root : roots) timeTest(job, t, m, spec, type, op, root, &errors, &bwSum, &bwCount);
    if (t == 0) avgBusBw = bwCount ? bwSum / bwCount : 0;
    return job.team->sum(t, errors);
  };
  hooks.end = [&](Job& job, int64_t errors) {
    job.reporter->footer(errors, avgBusBw, job.program);
  };
  return runJob(argc, argv, std::string(spec.name) + "_perf", hooks);
}

}  // namespace loomperf
