// p2p_vs_coll: loom's native AllReduce, AllGather, Broadcast, ReduceScatter and AlltoAll
// against the same operations composed from loomSend/loomRecv inside groups (ring and direct,
// see harness/p2p_compose.h), with every result checked. One row per collective and size:
// time and busbw of each, and the composed busbw over the native one.
//
//   p2p_vs_coll -t 4 -b 8 -e 64M -f 4
//
// Same flags and launch modes as the *_perf binaries; out of place only, sum only.
#include <cstdio>
#include <string>
#include <vector>

#include "perf/harness/job.h"
#include "perf/harness/measure.h"
#include "perf/harness/p2p_compose.h"

namespace loomperf {
namespace {

constexpr const char* kCollectives[] = {"all_reduce", "all_gather", "broadcast", "reduce_scatter",
                                        "alltoall"};

void header(Reporter& rep) {
  rep.line(
      "# Native collectives against the same operation from loomSend/loomRecv in groups.\n"
      "# ring: n-1 neighbour steps (broadcast: pipelined chain); direct: one group with every "
      "peer.\n"
      "# ratio = composed busbw / native busbw (above 1: the composition is faster).\n#\n");
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "# %13s  %10s  %10s  %6s  %8s  %6s  %8s  %6s  %6s  %8s  %6s  %6s  %6s\n",
                "collective", "size", "count", "type", "native", "busbw", "ring", "busbw", "ratio",
                "direct", "busbw", "ratio", "#wrong");
  rep.line(buf);
  std::snprintf(buf, sizeof buf,
                "# %13s  %10s  %10s  %6s  %8s  %6s  %8s  %6s  %6s  %8s  %6s  %6s  %6s\n", "", "(B)",
                "(elements)", "", "(us)", "(GB/s)", "(us)", "(GB/s)", "", "(us)", "(GB/s)", "", "");
  rep.line(buf);
}

std::string ratio(double a, double b) { return b > 0 ? floatStr(a / b, 6) : "   N/A"; }

int64_t runThread(Job& job, int t, double* avgNative) {
  const Options& o = job.o;
  Measurer m(job, t);
  const bool printer = t == 0 && job.isMain;
  int64_t errors = 0;
  double bwSum = 0;
  int bwCount = 0;
  for (loomDataType_t type : o.types) {
    for (const char* name : kCollectives) {
      const CollSpec* native = collSpecByName(name);
      const CollSpec* variants[3] = {native, &composedSpec(name, Composition::kRing),
                                     &composedSpec(name, Composition::kDirect)};
      for (const CollSpec* v : variants) {
        m.select(*v, type, Op::kSum, native->hasRoot ? o.root : -1);
        job.team->barrier(t);
        m.warmup(o.maxBytes);
        m.warmup(o.minBytes);
      }
      for (size_t size = o.minBytes; size <= o.maxBytes;) {
        Measurement r[3];
        for (int i = 0; i < 3; ++i) {
          m.select(*variants[i], type, Op::kSum, native->hasRoot ? o.root : -1);
          r[i] = m.measure(size, false);
          errors += r[i].failedHere;
        }
        bwSum += r[0].bw.bus;
        ++bwCount;
        if (printer) {
          CollCounts c = m.counts(size);
          size_t ts = typeInfo(type).size;
          char buf[512];
          std::snprintf(buf, sizeof buf,
                        "%15s  %10zu  %10zu  %6s  %8s  %6s  %8s  %6s  %6s  %8s  %6s  %6s  %6lld\n",
                        name, std::max(c.sendCount, c.recvCount) * ts, c.paramCount,
                        typeInfo(type).name, floatStr(r[0].seconds * 1e6, 8).c_str(),
                        floatStr(r[0].bw.bus, 6).c_str(), floatStr(r[1].seconds * 1e6, 8).c_str(),
                        floatStr(r[1].bw.bus, 6).c_str(), ratio(r[1].bw.bus, r[0].bw.bus).c_str(),
                        floatStr(r[2].seconds * 1e6, 8).c_str(), floatStr(r[2].bw.bus, 6).c_str(),
                        ratio(r[2].bw.bus, r[0].bw.bus).c_str(),
                        static_cast<long long>(r[0].wrong + r[1].wrong + r[2].wrong));
          job.reporter->line(buf);
        }
        size_t next = o.stepFactor > 1 ? size * o.stepFactor : size + o.stepBytes;
        if (next <= size) break;
        size = next;
      }
    }
  }
  if (t == 0) *avgNative = bwCount ? bwSum / bwCount : 0;
  return job.team->sum(t, errors);
}

}  // namespace
}  // namespace loomperf

int main(int argc, char** argv) {
  using namespace loomperf;
  double avgNative = 0;
  JobHooks hooks;
  hooks.validate = [](const Options& o) -> std::string {
    if (o.device != "cpu")
      return "--device " + o.device +
             ": the composed collectives reduce on the host, so p2p_vs_coll runs on host memory "
             "only; the *_perf binaries take --device cuda";
    if (o.nGpus != 1)
      return "-g must be 1: a composed ring waits for each step, which one thread driving "
             "several ranks cannot do; use -t for more ranks";
    if (o.aggIters != 1) return "-m must be 1 (composed calls cannot be aggregated in a group)";
    for (loomDataType_t t : o.types)
      if (!composedSupports(t))
        return std::string("-d ") + typeInfo(t).name +
               ": the composed reductions add int8..uint64, float and double only";
    return "";
  };
  hooks.begin = [](Job& job) { header(*job.reporter); };
  hooks.thread = [&](Job& job, int t) { return runThread(job, t, &avgNative); };
  hooks.end = [&](Job& job, int64_t errors) {
    job.reporter->footer(errors, avgNative, job.program);
  };
  return runJob(argc, argv, "p2p_vs_coll", hooks);
}
