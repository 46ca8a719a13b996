#include "perf/harness/runner.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "perf/harness/launch.h"
#include "perf/harness/options.h"
#include "perf/harness/report.h"
#include "perf/harness/team.h"
#include "perf/harness/watchdog.h"

extern char** environ;

namespace loomperf {
namespace {

using Clock = std::chrono::steady_clock;

// Every communicator of this process, for aborting on a failure: a failed rank must not leave
// its peers waiting. Written before the benchmark threads start, read-only after.
std::vector<loomComm_t> gComms;

std::string hostName() {
  char host[256] = "localhost";
  gethostname(host, sizeof host - 1);
  return host;
}

// Waits out loomInProgress (non-blocking communicators, -z 0), then fails loudly: message,
// abort, exit 1, as nccl-tests' NCCLCHECK does.
void check(loomResult_t r, loomComm_t comm, const char* what) {
  while (r == loomInProgress && comm != nullptr) {
    std::this_thread::yield();
    if (loomCommGetAsyncError(comm, &r) != loomSuccess) break;
  }
  if (r == loomSuccess) return;
  std::fprintf(stderr, "%s: Test loom failure in %s: '%s : %s'\n", hostName().c_str(), what,
               loomGetErrorString(r), loomGetLastError(comm));
  std::printf("# error: %s failed: %s : %s\n", what, loomGetErrorString(r), loomGetLastError(comm));
  abortAndExit(gComms);
}

struct Rank {
  int rank = 0;
  loomComm_t comm = nullptr;
  loomComm_t ctrl = nullptr;  // env launches: one rank per process, for the results
  loomStream_t stream = nullptr;
  char* send = nullptr;
  char* recv = nullptr;
  char* want = nullptr;
  bool checked = false;  // whether `want` holds an expectation for the current run
};

char* allocTouched(size_t bytes) {
  // One allocation at the largest size, touched once here: first-touch page faults would
  // otherwise land in the measured loop.
  size_t rounded = std::max<size_t>((bytes + 4095) / 4096 * 4096, 4096);
  auto* p = static_cast<char*>(std::aligned_alloc(4096, rounded));
  if (p == nullptr) {
    std::fprintf(stderr, "loom perf: cannot allocate %zu bytes; lower -e\n", rounded);
    std::exit(2);
  }
  std::memset(p, 0, rounded);
  return p;
}

// One benchmark thread: a slice of nGpus ranks, driven together (in groups when > 1).
class BenchThread {
 public:
  BenchThread(const CollSpec& spec, const Options& o, int thread, Rank* ranks, int nranks,
              ThreadTeam& team, Reporter* reporter, Watchdog& dog)
      : spec_(spec),
        o_(o),
        t_(thread),
        ranks_(ranks),
        nranks_(nranks),
        team_(team),
        rep_(reporter),
        dog_(dog) {}

  void run() {
    std::vector<Op> ops = spec_.hasOp ? o_.ops : std::vector<Op>{Op::kSum};
    std::vector<int> roots;
    if (!spec_.hasRoot)
      roots = {-1};
    else if (o_.root == -1)
      for (int r = 0; r < nranks_; ++r) roots.push_back(r);
    else
      roots = {o_.root};
    for (loomDataType_t type : o_.types)
      for (Op op : ops)
        for (int root : roots) timeTest(type, op, root);
    errors_ = team_.sum(t_, errors_);
  }

  int64_t errors() const { return errors_; }
  double avgBusBw() const { return bwCount_ ? bwSum_ / bwCount_ : 0; }

 private:
  void setup(size_t bytes) {
    ts_ = typeInfo(type_).size;
    counts_ = spec_.counts(bytes / ts_, nranks_);
  }
  size_t sendBytes() const { return counts_.sendCount * ts_; }
  size_t recvBytes() const { return counts_.recvCount * ts_; }
  CallSite site(const Rank& r) const { return {r.rank, nranks_, root_ < 0 ? 0 : root_}; }

  void startColl(bool inPlace, int iter) {
    // Move through the buffer from one iteration to the next, as nccl-tests does, so caches
    // do not flatter the repeated calls.
    size_t total = std::max(sendBytes(), recvBytes());
    size_t steps = total ? o_.maxBytes / total : 1;
    size_t shift = steps ? total * (iter % steps) : 0;
    dog_.busy(t_, spec_.name);
    if (o_.nGpus > 1) check(loomGroupStart(), nullptr, "loomGroupStart");
    for (int g = 0; g < o_.nGpus; ++g) {
      Rank& r = ranks_[g];
      char* recv = r.recv + shift;
      const char* send = inPlace ? recv + counts_.sendInplaceOffset * ts_ * r.rank : r.send + shift;
      char* out = inPlace ? recv + counts_.recvInplaceOffset * ts_ * r.rank : recv;
      loomRedOp_t op = static_cast<loomRedOp_t>(op_);
      if (op_ == Op::kMulSum) {
        alignas(8) unsigned char scalar[8] = {};
        encodeValue(type_, mulSumScalar(r.rank), scalar);
        check(loomRedOpCreatePreMulSum(&op, scalar, type_, loomScalarHostImmediate, r.comm), r.comm,
              "loomRedOpCreatePreMulSum");
      }
      check(spec_.run(send, out, counts_.paramCount, type_, op, site(r), r.comm, r.stream), r.comm,
            spec_.name);
      if (op_ == Op::kMulSum) check(loomRedOpDestroy(op, r.comm), r.comm, "loomRedOpDestroy");
    }
    if (o_.nGpus > 1) check(loomGroupEnd(), ranks_[0].comm, "loomGroupEnd");
    dog_.idle(t_);
    if (o_.blocking) {
      complete();
      team_.barrier(t_);
    }
  }

  void complete() {
    dog_.busy(t_, "loomStreamSynchronize");
    for (int g = 0; g < o_.nGpus; ++g)
      if (ranks_[g].stream != nullptr)
        check(loomStreamSynchronize(ranks_[g].stream), ranks_[g].comm, "loomStreamSynchronize");
    dog_.idle(t_);
  }

  // Poisons the result area, writes each rank's input where the call reads it and the
  // expected result beside it.
  void initData(bool inPlace, uint64_t seed) {
    Pattern p(type_, op_, nranks_, seed);
    for (int g = 0; g < o_.nGpus; ++g) {
      Rank& r = ranks_[g];
      poison(r.recv, std::max(sendBytes(), recvBytes()));
      char* input = inPlace ? r.recv + counts_.sendInplaceOffset * ts_ * r.rank : r.send;
      spec_.fillInput(p, site(r), counts_, input);
      r.checked = o_.check > 0 && spec_.fillExpected(p, site(r), counts_, r.want);
    }
  }

  int64_t checkData(bool inPlace) {
    int64_t wrong = 0;
    for (int g = 0; g < o_.nGpus; ++g) {
      Rank& r = ranks_[g];
      if (!r.checked) continue;
      const char* got = inPlace ? r.recv + counts_.recvInplaceOffset * ts_ * r.rank : r.recv;
      wrong += countWrong(got, r.want, counts_.recvCount, ts_);
    }
    return wrong;
  }

  void benchTime(bool inPlace) {
    if (o_.check) initData(inPlace, 99);
    startColl(inPlace, 0);  // one call to synchronise the ranks before the clock starts
    complete();
    team_.barrier(t_);

    auto t0 = Clock::now();
    for (int iter = 0; iter < o_.iters; ++iter) {
      if (o_.aggIters > 1) check(loomGroupStart(), nullptr, "loomGroupStart");
      for (int a = 0; a < o_.aggIters; ++a) startColl(inPlace, iter * o_.aggIters + a);
      if (o_.aggIters > 1) check(loomGroupEnd(), ranks_[0].comm, "loomGroupEnd");
    }
    double cpuSec = std::chrono::duration<double>(Clock::now() - t0).count();
    complete();
    double sec = std::chrono::duration<double>(Clock::now() - t0).count();
    const double calls = static_cast<double>(o_.iters) * o_.aggIters;
    sec = team_.combine(t_, (o_.reportCputime ? cpuSec : sec) / calls,
                        static_cast<TimeReport>(o_.average));
    Bandwidth bw = spec_.bandwidth(counts_.paramCount, ts_, sec, nranks_);
    team_.barrier(t_);

    int64_t wrong = 0;
    for (int c = 0; c < o_.check; ++c) {
      initData(inPlace, ++seed_);
      startColl(inPlace, 0);
      complete();
      int64_t local = checkData(inPlace);
      if (local) ++errors_;
      wrong = team_.sum(t_, local);
      if (wrong) break;
    }
    if (rep_ != nullptr)
      rep_->rowBody(sec * 1e6, bw.alg, bw.bus, o_.check > 0, wrong, o_.reportCputime != 0,
                    !inPlace);
    bwSum_ += bw.bus;
    ++bwCount_;
  }

  void warmup(size_t bytes) {
    setup(bytes);
    for (int w = 0; w < o_.warmupIters; ++w) startColl(false, w);
    complete();
  }

  void timeTest(loomDataType_t type, Op op, int root) {
    type_ = type;
    op_ = op;
    root_ = root;
    team_.barrier(t_);
    warmup(o_.maxBytes);
    warmup(o_.minBytes);
    for (int cycle = 0; o_.runCycles == 0 || cycle < o_.runCycles; ++cycle) {
      for (size_t size = o_.minBytes; size <= o_.maxBytes;) {
        setup(size);
        if (rep_ != nullptr)
          rep_->rowStart(std::max(sendBytes(), recvBytes()), counts_.paramCount,
                         typeInfo(type).name, spec_.hasOp ? opName(op) : "none", root);
        benchTime(false);
        benchTime(true);
        if (rep_ != nullptr) rep_->rowEnd(o_.iters * o_.aggIters, spec_.name);
        size_t next = o_.stepFactor > 1 ? size * o_.stepFactor : size + o_.stepBytes;
        if (next <= size) break;  // -b 0 with a factor would never grow
        size = next;
      }
    }
  }

  const CollSpec& spec_;
  const Options& o_;
  int t_;
  Rank* ranks_;
  int nranks_;
  ThreadTeam& team_;
  Reporter* rep_;  // thread 0 of process 0 only
  Watchdog& dog_;
  loomDataType_t type_ = loomFloat32;
  Op op_ = Op::kSum;
  int root_ = -1;
  size_t ts_ = 4;
  CollCounts counts_;
  uint64_t seed_ = 100;
  int64_t errors_ = 0;
  double bwSum_ = 0;
  int bwCount_ = 0;
};

// Creates this process's communicators, one helper thread per rank: loomCommInitRank blocks
// until every rank has arrived, so one thread cannot create several in turn.
void initRanks(std::vector<Rank>& ranks, int nranks, const loomUniqueId& id, const Options& o,
               const Launch& l) {
  std::vector<std::thread> threads;
  for (size_t i = 0; i < ranks.size(); ++i) {
    threads.emplace_back([&, i] {
      Rank& r = ranks[i];
      loomConfig_t cfg = LOOM_CONFIG_INITIALIZER;
      cfg.blocking = o.blocking ? 1 : 0;  // nccl-tests' -z also picks the config's blocking
      loomResult_t res = loomCommInitRankConfig(&r.comm, nranks, id, r.rank, &cfg);
      check(res, r.comm, "loomCommInitRankConfig");
      if (l.mode == LaunchMode::kEnv) {
        int color = i == 0 ? 0 : LOOM_SPLIT_NOCOLOR;
        loomConfig_t ctrlCfg = LOOM_CONFIG_INITIALIZER;
        check(loomCommSplit(r.comm, color, l.proc, &r.ctrl, &ctrlCfg), r.comm, "loomCommSplit");
      }
      if (!o.streamNull) check(loomStreamCreate(r.comm, &r.stream), r.comm, "loomStreamCreate");
    });
  }
  for (auto& t : threads) t.join();
}

void destroyRanks(std::vector<Rank>& ranks) {
  std::vector<std::thread> threads;
  for (Rank& r : ranks) {
    threads.emplace_back([&r] {
      if (r.stream != nullptr) check(loomStreamDestroy(r.stream), r.comm, "loomStreamDestroy");
      if (r.ctrl != nullptr) {
        check(loomCommFinalize(r.ctrl), r.ctrl, "loomCommFinalize");
        loomCommDestroy(r.ctrl);
      }
      check(loomCommFinalize(r.comm), r.comm, "loomCommFinalize");
      loomCommDestroy(r.comm);
      std::free(r.send);
      std::free(r.recv);
      std::free(r.want);
    });
  }
  for (auto& t : threads) t.join();
}

}  // namespace

int benchMain(int argc, char** argv, const CollSpec& spec) {
  setlinebuf(stdout);
  const std::string program = std::string(spec.name) + "_perf";
  Options o;
  std::string error;
  switch (parseOptions(argc, argv, &o, &error)) {
    case ParseStatus::kHelp:
      std::printf("%s", usage(program.c_str()).c_str());
      return 0;
    case ParseStatus::kError:
      std::fprintf(stderr, "%s: %s\n", program.c_str(), error.c_str());
      return 2;
    case ParseStatus::kRun:
      break;
  }
  if (o.device == "cuda") {
    std::fprintf(stderr,
                 "%s: --device cuda: loom has no CUDA data path yet (CUDA communicators are not "
                 "implemented), so there is nothing to measure on a GPU. Run with --device cpu "
                 "(the default).\n",
                 program.c_str());
    return 2;
  }

  Launch l;
  if (!detectLaunch([](const char* n) { return std::getenv(n); }, mpiBuilt(), &l, &error)) {
    std::fprintf(stderr, "%s: %s\n", program.c_str(), error.c_str());
    return 2;
  }
  std::unique_ptr<ProcessGroup> group;
  if (l.mode == LaunchMode::kMpi) group = mpiStart(&argc, &argv, &l);
  if (l.mode == LaunchMode::kEnv && std::getenv("LOOM_COMM_ID") == nullptr) {
    std::fprintf(stderr,
                 "%s: launched by %s (rank %d of %d) but LOOM_COMM_ID is not set. Set "
                 "LOOM_COMM_ID=host:port to the same value on every rank (host: where rank 0 "
                 "runs), e.g. LOOM_COMM_ID=$MASTER_ADDR:29500.\n",
                 program.c_str(), l.source.c_str(), l.proc, l.nprocs);
    return 2;
  }
  const int perProc = o.nThreads * o.nGpus;
  const int nranks = l.nprocs * perProc;
  if (spec.hasRoot && o.root >= nranks) {
    std::fprintf(stderr, "%s: -r %d: root must be below the number of ranks (%d), or -1\n",
                 program.c_str(), o.root, nranks);
    return 2;
  }

  // The unique id: derived from LOOM_COMM_ID by every process, or made by process 0 and
  // broadcast over MPI.
  loomUniqueId id{};
  if (l.mode != LaunchMode::kMpi || l.proc == 0)
    check(loomGetUniqueId(&id), nullptr, "loomGetUniqueId");
  if (l.mode == LaunchMode::kMpi) mpiBroadcast(&id, sizeof id);

  const bool isMain = l.proc == 0;
  Reporter reporter(isMain);
  reporter.openJson(o.jsonPath, argc, argv, environ);

  std::vector<Rank> ranks(perProc);
  for (int i = 0; i < perProc; ++i) {
    ranks[i].rank = l.proc * perProc + i;
    ranks[i].send = allocTouched(o.maxBytes);
    ranks[i].recv = allocTouched(o.maxBytes);
    if (o.check) ranks[i].want = allocTouched(o.maxBytes);
  }
  initRanks(ranks, nranks, id, o, l);
  for (Rank& r : ranks) {
    gComms.push_back(r.comm);
    if (r.ctrl != nullptr) gComms.push_back(r.ctrl);
  }
  if (l.mode == LaunchMode::kEnv) group = makeLoomProcessGroup(ranks[0].ctrl);
  if (!group) group = makeSingleProcessGroup();

  std::string lines;
  for (const Rank& r : ranks)
    lines += rankLine(r.rank, 0, static_cast<int>(getpid()), hostName(), LOOM_DEVICE_CPU, "cpu",
                      "loom CPU communicator, host memory (" + l.source + ")");
  std::string allLines;
  for (const std::string& s : group->allGather(lines)) allLines += s;
  std::vector<std::string> lineList;
  for (size_t pos = 0; pos < allLines.size();) {
    size_t end = allLines.find('\n', pos);
    if (end == std::string::npos) end = allLines.size() - 1;
    lineList.push_back(allLines.substr(pos, end - pos + 1));
    pos = end + 1;
  }
  reporter.preamble(program, o, lineList);
  reporter.tableHeader(o.reportCputime != 0);

  ThreadTeam team(o.nThreads, group.get());
  Watchdog dog(o.timeoutSec, o.nThreads);
  dog.watch(gComms);
  std::vector<std::unique_ptr<BenchThread>> benches;
  for (int t = 0; t < o.nThreads; ++t)
    benches.push_back(std::make_unique<BenchThread>(spec, o, t, &ranks[t * o.nGpus], nranks, team,
                                                    t == 0 && isMain ? &reporter : nullptr, dog));
  std::vector<std::thread> workers;
  for (int t = 1; t < o.nThreads; ++t) workers.emplace_back([&, t] { benches[t]->run(); });
  benches[0]->run();  // the main thread is thread 0: the one that may call MPI
  for (auto& w : workers) w.join();

  const int64_t errors = benches[0]->errors();
  reporter.footer(errors, benches[0]->avgBusBw(), program);
  reporter.finish("");
  destroyRanks(ranks);
  gComms.clear();
  if (l.mode == LaunchMode::kMpi) mpiFinish();
  return errors ? 1 : 0;
}

}  // namespace loomperf
