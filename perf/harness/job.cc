#include "perf/harness/job.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "perf/harness/device.h"

extern char** environ;

namespace loomperf {
namespace {

// Every communicator of this process, for aborting on a failure: a failed rank must not leave
// its peers waiting. Written before the benchmark threads start, read-only after.
std::vector<loomComm_t> gComms;

// The preamble's line for simulated devices, so no figure of such a run is taken for a GPU's.
constexpr const char* kSimulatedNote =
    "LOOM_CUDA_SIM=1: the devices are simulated on the CPU (loom's test double of CUDA). Results "
    "are checked as on a GPU; times and bandwidths say nothing about GPUs.";

std::string hostName() {
  char host[256] = "localhost";
  gethostname(host, sizeof host - 1);
  return host;
}

// Creates this process's communicators, one helper thread per rank: loomCommInitRank blocks
// until every rank has arrived, so one thread cannot create several in turn.
void initRanks(Job& job, const loomUniqueId& id) {
  std::vector<std::thread> threads;
  for (size_t i = 0; i < job.ranks.size(); ++i) {
    threads.emplace_back([&, i] {
      Rank& r = job.ranks[i];
      loomConfig_t cfg = LOOM_CONFIG_INITIALIZER;
      cfg.blocking = job.o.blocking ? 1 : 0;  // nccl-tests' -z also picks the config's blocking
      if (job.cuda) {
        cfg.device = r.device;
        cudaUse(r.device);
      }
      // Called first: the check needs the communicator the call writes.
      loomResult_t res = loomCommInitRankConfig(&r.comm, job.nranks, id, r.rank, &cfg);
      check(res, r.comm, "loomCommInitRankConfig");
      if (job.launch.mode == LaunchMode::kEnv) {
        int color = i == 0 ? 0 : LOOM_SPLIT_NOCOLOR;
        loomConfig_t ctrlCfg = LOOM_CONFIG_INITIALIZER;
        ctrlCfg.device = LOOM_DEVICE_CPU;  // the results travel in host memory
        check(loomCommSplit(r.comm, color, job.launch.proc, &r.ctrl, &ctrlCfg), r.comm,
              "loomCommSplit");
      }
      if (job.cuda)
        cudaRankSetup(job, r);
      else if (!job.o.streamNull)
        check(loomStreamCreate(r.comm, &r.stream), r.comm, "loomStreamCreate");
    });
  }
  for (auto& t : threads) t.join();
}

void destroyRanks(std::vector<Rank>& ranks, bool cuda) {
  std::vector<std::thread> threads;
  for (Rank& r : ranks) {
    threads.emplace_back([&r, cuda] {
      if (cuda)
        cudaRankTeardown(r);
      else if (r.stream != nullptr)
        check(loomStreamDestroy(r.stream), r.comm, "loomStreamDestroy");
      if (r.ctrl != nullptr) {
        check(loomCommFinalize(r.ctrl), r.ctrl, "loomCommFinalize");
        loomCommDestroy(r.ctrl);
      }
      check(loomCommFinalize(r.comm), r.comm, "loomCommFinalize");
      loomCommDestroy(r.comm);
      if (r.memAlloc) {
        check(loomMemFree(r.send), nullptr, "loomMemFree");
        check(loomMemFree(r.recv), nullptr, "loomMemFree");
      } else {
        std::free(r.send);
        std::free(r.recv);
      }
      std::free(r.want);
    });
  }
  for (auto& t : threads) t.join();
}

// Each process's rank lines, gathered in rank order for the preamble.
std::vector<std::string> rankLines(const Job& job, ProcessGroup& group) {
  std::string mine;
  for (const Rank& r : job.ranks) {
    const std::string how = " (" + job.launch.source + ")";
    if (job.cuda)
      mine += rankLine(r.rank, 0, static_cast<int>(getpid()), hostName(), r.device,
                       cudaBusId(r.device), cudaRankInfo(job.simulated) + how);
    else
      mine += rankLine(r.rank, 0, static_cast<int>(getpid()), hostName(), LOOM_DEVICE_CPU, "cpu",
                       "loom CPU communicator, host memory" + how);
  }
  std::vector<std::string> lines;
  for (const std::string& text : group.allGather(mine)) {
    for (size_t pos = 0; pos < text.size();) {
      size_t end = text.find('\n', pos);
      if (end == std::string::npos) end = text.size() - 1;
      lines.push_back(text.substr(pos, end - pos + 1));
      pos = end + 1;
    }
  }
  return lines;
}

}  // namespace

char* allocTouched(size_t bytes, bool hugePages) {
  // One allocation at the largest size, touched once here: first-touch page faults would
  // otherwise land in the measured loop.
  const size_t align = hugePages ? size_t{2} << 20 : 4096;
  size_t rounded = std::max<size_t>((bytes + align - 1) / align * align, align);
  auto* p = static_cast<char*>(std::aligned_alloc(align, rounded));
  if (p == nullptr) {
    std::fprintf(stderr, "loom perf: cannot allocate %zu bytes; lower -e\n", rounded);
    std::exit(2);
  }
  // Before the first touch, so the pages are huge from the start (no khugepaged wait).
  if (hugePages && madvise(p, rounded, MADV_HUGEPAGE) != 0)
    std::fprintf(stderr, "# --huge_pages: madvise(MADV_HUGEPAGE) failed (%s); small pages\n",
                 std::strerror(errno));
  std::memset(p, 0, rounded);
  return p;
}

char* memAllocTouched(size_t bytes) {
  void* p = nullptr;
  const size_t rounded = std::max<size_t>(bytes, 4096);
  check(loomMemAlloc(&p, rounded), nullptr, "loomMemAlloc");
  std::memset(p, 0, rounded);
  return static_cast<char*>(p);
}

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

void fail(const char* what, const std::string& message) {
  std::fprintf(stderr, "%s: Test failure in %s: %s\n", hostName().c_str(), what, message.c_str());
  std::printf("# error: %s failed: %s\n", what, message.c_str());
  abortAndExit(gComms);
}

int runJob(int argc, char** argv, const std::string& program, const JobHooks& hooks) {
  setlinebuf(stdout);
  Job job;
  job.program = program;
  std::string error;
  switch (parseOptions(argc, argv, &job.o, &error)) {
    case ParseStatus::kHelp:
      std::printf("%s", usage(program.c_str()).c_str());
      return 0;
    case ParseStatus::kError:
      std::fprintf(stderr, "%s: %s\n", program.c_str(), error.c_str());
      return 2;
    case ParseStatus::kRun:
      break;
  }
  const Options& o = job.o;
  job.cuda = o.device == "cuda";
  if (!job.cuda && o.cudaGraphLaunches > 0)
    std::fprintf(stderr, "# -G (CUDA graphs) has no meaning on CPU; ignored\n");
  if (job.cuda) error = validateCudaOptions(o, o.nThreads * o.nGpus);
  if (error.empty() && hooks.validate) error = hooks.validate(o);
  if (!error.empty()) {
    std::fprintf(stderr, "%s: %s\n", program.c_str(), error.c_str());
    return 2;
  }

  Launch& l = job.launch;
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
  job.nranks = l.nprocs * perProc;
  if (job.cuda) {
    // After the launch is known (MPI_Init may set up the process's devices), before any
    // communicator: without a device the run stops here with one message.
    CudaProbe probe = probeCuda();
    if (!probe.error.empty()) {
      std::fprintf(stderr, "%s: %s\n", program.c_str(), probe.error.c_str());
      return 1;
    }
    job.simulated = probe.simulated;
    job.deviceCount = probe.devices;
  }
  if (o.root >= job.nranks) {
    std::fprintf(stderr, "%s: -r %d: root must be below the number of ranks (%d), or -1\n",
                 program.c_str(), o.root, job.nranks);
    return 2;
  }

  // The unique id: derived from LOOM_COMM_ID by every process, or made by process 0 and
  // broadcast over MPI.
  loomUniqueId id{};
  if (l.mode != LaunchMode::kMpi || l.proc == 0)
    check(loomGetUniqueId(&id), nullptr, "loomGetUniqueId");
  if (l.mode == LaunchMode::kMpi) mpiBroadcast(&id, sizeof id);

  job.isMain = l.proc == 0;
  Reporter reporter(job.isMain);
  reporter.openJson(o.jsonPath, argc, argv, environ);
  job.reporter = &reporter;

  job.ranks.resize(perProc);
  for (int i = 0; i < perProc; ++i) {
    Rank& r = job.ranks[i];
    r.rank = l.proc * perProc + i;
    const bool huge = o.hugePages != 0;
    if (job.cuda) {
      // Device buffers come with the communicator (cudaRankSetup); expectations stay on the host.
      r.device = cudaDeviceOfRank(l.localProc, perProc, i, job.deviceCount);
      if (o.check) r.want = allocTouched(o.maxBytes, huge);
      continue;
    }
    r.memAlloc = o.localRegister != 0;
    r.send = r.memAlloc ? memAllocTouched(o.maxBytes) : allocTouched(o.maxBytes, huge);
    r.recv = r.memAlloc ? memAllocTouched(o.maxBytes) : allocTouched(o.maxBytes, huge);
    if (o.check) r.want = allocTouched(o.maxBytes, huge);
  }
  initRanks(job, id);
  for (Rank& r : job.ranks) {
    gComms.push_back(r.comm);
    if (r.ctrl != nullptr) gComms.push_back(r.ctrl);
  }
  if (l.mode == LaunchMode::kEnv) group = makeLoomProcessGroup(job.ranks[0].ctrl);
  if (!group) group = makeSingleProcessGroup();

  reporter.preamble(program, o, rankLines(job, *group), job.simulated ? kSimulatedNote : "");
  ThreadTeam team(o.nThreads, group.get());
  Watchdog dog(o.timeoutSec, o.nThreads);
  dog.watch(gComms);
  job.team = &team;
  job.dog = &dog;
  if (hooks.begin) hooks.begin(job);

  std::vector<int64_t> errors(o.nThreads, 0);
  std::vector<std::thread> workers;
  for (int t = 1; t < o.nThreads; ++t)
    workers.emplace_back([&, t] { errors[t] = hooks.thread(job, t); });
  errors[0] = hooks.thread(job, 0);  // the main thread is thread 0: the one that may call MPI
  for (auto& w : workers) w.join();

  if (hooks.end) hooks.end(job, errors[0]);
  reporter.finish("");
  destroyRanks(job.ranks, job.cuda);
  gComms.clear();
  if (l.mode == LaunchMode::kMpi) mpiFinish();
  return errors[0] ? 1 : 0;
}

}  // namespace loomperf
