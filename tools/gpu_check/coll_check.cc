// The collectives phase: every collective on CUDA communicators whose ranks share device 0 as
// threads, against CPU communicators on the same inputs, bit for bit. Outputs start poisoned;
// inputs are small values whose sums and products are exact in any order, so the comparison
// holds whatever algorithm either side picks. LOOM_PROTO (set by the script) picks LL or
// Simple; AllReduce also runs with each LOOM_ALGO.
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "loom/loom.h"
#include "tools/gpu_check/coll_cases.h"
#include "tools/gpu_check/gpu_check.h"

namespace loom::gpucheck {
namespace {

constexpr const char* kAllReduceAlgos[] = {"", "ring", "tree", "hier", "exchange", "doubling"};

// Runs `cases` on CPU and CUDA communicators of `nranks` ranks, as threads; returns the
// mismatches and failed calls, or -1 when the communicators could not be made.
int runCases(int nranks, const std::vector<CollCase>& cases, const char* algo) {
  std::vector<loomComm_t> cpu(nranks), gpu(nranks);
  std::vector<int> devices(nranks, 0);
  if (loomCommInitAll(cpu.data(), nranks, nullptr) != loomSuccess ||
      loomCommInitAll(gpu.data(), nranks, devices.data()) != loomSuccess) {
    noteFailure("init of " + std::to_string(nranks) + " ranks: " + loomGetLastError(nullptr));
    return -1;
  }
  std::atomic<int> problems{0};
  std::vector<std::thread> threads;
  const std::string where = std::to_string(nranks) + " ranks, algo '" + algo + "'";
  for (int r = 0; r < nranks; ++r) {
    threads.emplace_back(
        [&, r] { problems += runRankCases(cases, r, nranks, cpu[r], gpu[r], where); });
  }
  for (std::thread& t : threads) t.join();
  for (loomComm_t c : cpu) loomCommDestroy(c);
  for (loomComm_t c : gpu) loomCommDestroy(c);
  return problems.load();
}

}  // namespace

int collectives(const Options& options) {
  const char* proto = std::getenv("LOOM_PROTO");
  const std::string label =
      std::string("collectives") + (proto && *proto ? std::string("-") + proto : "");
  int problems = 0;
  size_t ran = 0;
  for (int nranks : options.ranks) {
    // Every collective with the tuner's algorithm; AllReduce again with each forced one.
    for (const char* algo : kAllReduceAlgos) {
      const bool all = *algo == '\0';
      const std::vector<CollCase> cases = collCases(options.counts, options.largeCounts, all);
      if (all) {
        unsetenv("LOOM_ALGO");
      } else {
        setenv("LOOM_ALGO", algo, 1);
      }
      const int found = runCases(nranks, cases, algo);
      std::printf("%d ranks, algo '%s': %zu cases, %s\n", nranks, all ? "auto" : algo, cases.size(),
                  found < 0 ? "no communicators" : (std::to_string(found) + " failed").c_str());
      std::fflush(stdout);
      if (found < 0) return report(label.c_str(), Verdict::kFail, firstFailure());
      ran += cases.size();
      problems += found;
    }
    unsetenv("LOOM_ALGO");
  }
  if (problems != 0)
    return report(label.c_str(), Verdict::kFail,
                  std::to_string(problems) + " of " + std::to_string(ran) +
                      " cases failed; first: " + firstFailure());
  return report(label.c_str(), Verdict::kPass,
                std::to_string(ran) + " cases at " + std::to_string(options.ranks.size()) +
                    " rank counts, all bit-identical to CPU communicators");
}

}  // namespace loom::gpucheck
