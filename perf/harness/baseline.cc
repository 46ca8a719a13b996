#include "perf/harness/baseline.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "perf/harness/job.h"
#include "perf/harness/report.h"

extern char** environ;

namespace loomperf {
namespace {

using Clock = std::chrono::steady_clock;

// Takes "--name value" out of argv, so nccl-tests' parser sees only its own flags.
bool takeFlag(int* argc, char** argv, const char* name, std::string* value) {
  for (int i = 1; i + 1 < *argc; ++i) {
    if (std::strcmp(argv[i], name) != 0) continue;
    *value = argv[i + 1];
    for (int j = i; j + 2 <= *argc; ++j) argv[j] = argv[j + 2];
    *argc -= 2;
    return true;
  }
  return false;
}

struct Sweep {
  const Options& o;
  Baseline& b;
  const CollSpec& spec;
  Reporter* rep;
  char *send, *recv, *want;
  int64_t errors = 0;
  double bwSum = 0;
  int bwCount = 0;
  uint64_t seed = 100;

  void place(const CollCounts& c, size_t ts, loomDataType_t type, Op op, int root, bool inPlace,
             uint64_t s, bool* checked) {
    Pattern p(type, op, b.size(), s);
    CallSite site{b.rank(), b.size(), root < 0 ? 0 : root};
    poison(recv, std::max(c.sendCount, c.recvCount) * ts);
    char* input = inPlace ? recv + c.sendInplaceOffset * ts * b.rank() : send;
    spec.fillInput(p, site, c, input);
    *checked = spec.fillExpected(p, site, c, want);
  }

  void measure(size_t bytes, loomDataType_t type, Op op, int root, bool inPlace) {
    const size_t ts = typeInfo(type).size;
    const CollCounts c = spec.counts(bytes / ts, b.size());
    bool checked = false;
    place(c, ts, type, op, root, inPlace, 99, &checked);
    b.run(spec, send, recv, c, type, op, root, inPlace);
    b.group().barrier();
    // As loom's calls move (measure.cc), where the library allows it.
    const BufferShift shift =
        b.movesThroughBuffers(spec) ? BufferShift(c, ts, o.maxBytes) : BufferShift();
    auto t0 = Clock::now();
    for (int i = 0; i < o.iters; ++i) {
      const size_t at = shift.at(i);
      b.run(spec, send + at, recv + at, c, type, op, root, inPlace);
    }
    double sec = std::chrono::duration<double>(Clock::now() - t0).count() / o.iters;
    // -a as in nccl-tests (one thread per process here).
    Combine how = o.average == 2 ? Combine::kMin : o.average == 3 ? Combine::kMax : Combine::kSum;
    double v = o.average == 0 ? (b.rank() == 0 ? sec : 0) : sec;
    b.group().allReduce(&v, 1, how);
    if (o.average == 1) v /= b.size();
    Bandwidth bw = spec.bandwidth(c.paramCount, ts, v, b.size());
    int64_t wrong = 0;
    for (int k = 0; k < o.check; ++k) {
      place(c, ts, type, op, root, inPlace, ++seed, &checked);
      b.run(spec, send, recv, c, type, op, root, inPlace);
      int64_t local =
          checked ? countWrong(recv + b.resultOffset(spec, c, ts, inPlace), want, c.recvCount, ts)
                  : 0;
      errors += local > 0;
      wrong = local;
      b.group().allReduce(&wrong, 1);
      if (wrong) break;
    }
    bwSum += bw.bus;
    ++bwCount;
    if (rep) rep->rowBody(v * 1e6, bw.alg, bw.bus, o.check > 0, wrong, false, !inPlace);
  }
};

}  // namespace

int baselineMain(int argc, char** argv, const std::string& program, const BaselineFactory& make) {
  setlinebuf(stdout);
  BaselineArgs args;
  takeFlag(&argc, argv, "--coll", &args.coll);
  takeFlag(&argc, argv, "--algo", &args.algo);
  const CollSpec* spec = collSpecByName(args.coll);
  if (spec == nullptr) {
    std::fprintf(stderr,
                 "%s: --coll %s: use all_reduce, all_gather, reduce_scatter, broadcast, reduce, "
                 "alltoall\n",
                 program.c_str(), args.coll.c_str());
    return 2;
  }
  Options o;
  std::string error;
  switch (parseOptions(argc, argv, &o, &error)) {
    case ParseStatus::kHelp:
      std::printf("%s\t[--coll <collective>] [--algo <library algorithm>]\n",
                  usage(program.c_str()).c_str());
      return 0;
    case ParseStatus::kError:
      std::fprintf(stderr, "%s: %s\n", program.c_str(), error.c_str());
      return 2;
    case ParseStatus::kRun:
      break;
  }
  if (o.device != "cpu") {
    std::fprintf(stderr, "%s: --device %s: the baselines run on host memory only\n",
                 program.c_str(), o.device.c_str());
    return 2;
  }
  if (o.nThreads != 1 || o.nGpus != 1) {
    std::fprintf(stderr, "%s: one rank per process: launch N processes instead of -t/-g\n",
                 program.c_str());
    return 2;
  }
  std::unique_ptr<Baseline> b = make(args, &argc, &argv);
  std::vector<Op> ops = spec->hasOp ? o.ops : std::vector<Op>{Op::kSum};
  for (loomDataType_t t : o.types)
    for (Op op : ops)
      if (std::string why = b->supports(*spec, t, op); !why.empty()) {
        if (b->rank() == 0) std::fprintf(stderr, "%s: %s\n", program.c_str(), why.c_str());
        return 2;
      }
  const bool isMain = b->rank() == 0;
  Reporter rep(isMain);
  rep.openJson(o.jsonPath, argc, argv, environ);
  char host[256] = "localhost";
  gethostname(host, sizeof host - 1);
  std::vector<std::string> lines = b->group().allGather(rankLine(
      b->rank(), 0, static_cast<int>(getpid()), host, LOOM_DEVICE_CPU, "cpu", b->describe()));
  rep.preamble(program + " --coll " + args.coll, o, lines);
  rep.tableHeader(false);

  Sweep s{o,
          *b,
          *spec,
          isMain ? &rep : nullptr,
          allocTouched(o.maxBytes, o.hugePages != 0),
          allocTouched(o.maxBytes, o.hugePages != 0),
          allocTouched(o.maxBytes, o.hugePages != 0)};
  std::vector<int> roots;
  if (!spec->hasRoot)
    roots = {-1};
  else if (o.root == -1)
    for (int r = 0; r < b->size(); ++r) roots.push_back(r);
  else
    roots = {o.root};
  for (loomDataType_t type : o.types) {
    for (Op op : ops) {
      for (int root : roots) {
        for (size_t w : {o.maxBytes, o.minBytes}) {
          const size_t ts = typeInfo(type).size;
          CollCounts c = spec->counts(w / ts, b->size());
          const BufferShift shift =
              b->movesThroughBuffers(*spec) ? BufferShift(c, ts, o.maxBytes) : BufferShift();
          for (int i = 0; i < o.warmupIters; ++i)
            b->run(*spec, s.send + shift.at(i), s.recv + shift.at(i), c, type, op, root, false);
        }
        for (size_t size = o.minBytes; size <= o.maxBytes;) {
          const size_t ts = typeInfo(type).size;
          CollCounts c = spec->counts(size / ts, b->size());
          if (isMain)
            rep.rowStart(std::max(c.sendCount, c.recvCount) * ts, c.paramCount, typeInfo(type).name,
                         spec->hasOp ? opName(op) : "none", root);
          s.measure(size, type, op, root, false);
          s.measure(size, type, op, root, true);
          if (isMain) rep.rowEnd(o.iters, spec->name);
          size_t next = o.stepFactor > 1 ? size * o.stepFactor : size + o.stepBytes;
          if (next <= size) break;
          size = next;
        }
      }
    }
  }
  int64_t errors = s.errors;
  b->group().allReduce(&errors, 1);
  rep.footer(errors, s.bwCount ? s.bwSum / s.bwCount : 0, program);
  rep.finish("");
  std::free(s.send);
  std::free(s.recv);
  std::free(s.want);
  b.reset();
  return errors ? 1 : 0;
}

}  // namespace loomperf
