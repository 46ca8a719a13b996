// init_perf: times communicator setup and teardown for N ranks run as threads of this process
// (-t N), the way nccl-tests time their collectives: warm-up iterations, then -n measured ones,
// reported as median and spread.
//
//   init_perf -t 4 -n 20 -w 2
//
// Columns: ranks, then median / min / max milliseconds of each phase as seen by rank 0:
// init (loomCommInitRank through the rendezvous), split (into two halves), finalize+destroy.
#include <getopt.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include "loom/loom.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Phases {
  double init = 0, split = 0, teardown = 0;
};

[[noreturn]] void die(const char* what, loomResult_t r, loomComm_t comm) {
  std::fprintf(stderr, "init_perf: %s failed: %s (%s)\n", what, loomGetErrorString(r),
               loomGetLastError(comm));
  std::exit(1);
}

double msSince(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

// One iteration: every rank inits, splits in two, finalizes and destroys both.
Phases runOnce(int nranks) {
  loomUniqueId id;
  loomResult_t r = loomGetUniqueId(&id);
  if (r != loomSuccess) die("loomGetUniqueId", r, nullptr);
  std::vector<Phases> phases(nranks);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < nranks; ++rank) {
    threads.emplace_back([&, rank] {
      Phases& p = phases[rank];
      auto t0 = Clock::now();
      loomComm_t comm;
      loomResult_t rc = loomCommInitRank(&comm, nranks, id, rank);
      if (rc != loomSuccess) die("loomCommInitRank", rc, nullptr);
      p.init = msSince(t0);
      t0 = Clock::now();
      loomComm_t half;
      rc = loomCommSplit(comm, rank % 2, rank, &half, nullptr);
      if (rc != loomSuccess) die("loomCommSplit", rc, comm);
      p.split = msSince(t0);
      t0 = Clock::now();
      if ((rc = loomCommFinalize(half)) != loomSuccess) die("loomCommFinalize", rc, half);
      if ((rc = loomCommDestroy(half)) != loomSuccess) die("loomCommDestroy", rc, half);
      if ((rc = loomCommFinalize(comm)) != loomSuccess) die("loomCommFinalize", rc, comm);
      if ((rc = loomCommDestroy(comm)) != loomSuccess) die("loomCommDestroy", rc, comm);
      p.teardown = msSince(t0);
    });
  }
  for (auto& t : threads) t.join();
  return phases[0];
}

void printStat(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  std::printf("  %9.3f %9.3f %9.3f", v[v.size() / 2], v.front(), v.back());
}

}  // namespace

int main(int argc, char** argv) {
  int threadsMin = 2, threadsMax = 0, iters = 20, warmup = 2;
  int opt;
  while ((opt = getopt(argc, argv, "t:T:n:w:h")) != -1) {
    switch (opt) {
      case 't':
        threadsMin = std::atoi(optarg);
        break;
      case 'T':
        threadsMax = std::atoi(optarg);
        break;
      case 'n':
        iters = std::atoi(optarg);
        break;
      case 'w':
        warmup = std::atoi(optarg);
        break;
      default:
        std::fprintf(stderr,
                     "usage: %s [-t ranks] [-T max ranks, doubling from -t] [-n iters] "
                     "[-w warmup]\n",
                     argv[0]);
        return opt == 'h' ? 0 : 2;
    }
  }
  if (threadsMax < threadsMin) threadsMax = threadsMin;
  if (threadsMin < 1 || iters < 1 || warmup < 0) {
    std::fprintf(stderr, "init_perf: -t, -n must be >= 1 and -w >= 0\n");
    return 2;
  }
  int version = 0;
  loomGetVersion(&version);
  std::printf("# loom init_perf: loom version %d.%d.%d, %d measured + %d warm-up iterations\n",
              version / 10000, version / 100 % 100, version % 100, iters, warmup);
  std::printf("# ranks run as threads of one process; times in ms (median, min, max) on rank 0\n");
  std::printf("#%6s  %29s  %29s  %29s\n", "ranks", "init (med min max)", "split (med min max)",
              "finalize+destroy");
  for (int n = threadsMin; n <= threadsMax; n *= 2) {
    for (int i = 0; i < warmup; ++i) runOnce(n);
    std::vector<double> init, split, teardown;
    for (int i = 0; i < iters; ++i) {
      Phases p = runOnce(n);
      init.push_back(p.init);
      split.push_back(p.split);
      teardown.push_back(p.teardown);
    }
    std::printf("%7d", n);
    printStat(init);
    printStat(split);
    printStat(teardown);
    std::printf("\n");
    std::fflush(stdout);
  }
  return 0;
}
