// A rank of the network-namespace test (run_netns_test.sh), and its timing driver:
//
//   loom_netns_rank id                         print the hex id that LOOM_COMM_ID gives
//   loom_netns_rank time NRANKS RANK ID BYTES:ITERS...
//
// `time` runs float32 sum AllReduces of BYTES per rank, one warm-up then ITERS timed one by
// one, checks the last result, and rank 0 prints one line per size:
//   allreduce 67108864 B  algo hier  time 123456.7 us  busbw 0.108 GB/s  (mean 123999.1 us)
// time: the median call (the slowest rank's); busbw = 2(n-1)/n x bytes / time, NCCL's.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <string>
#include <vector>

#include "loom/loom.h"
#include "tests/test_util.h"

namespace {

[[noreturn]] void fail(const std::string& what) {
  std::printf("fail %s\n", what.c_str());
  std::fflush(stdout);
  std::exit(1);
}

void check(loomResult_t r, const char* what, loomComm_t comm) {
  if (r != loomSuccess) fail(std::string(what) + ": " + loomGetLastError(comm));
}

void timeOne(loomComm_t comm, int n, int rank, size_t bytes, int iters) {
  const size_t count = bytes / sizeof(float);
  std::vector<float> in(count), out(count);
  // Small integers: exact in float32 whatever the order of the additions.
  for (size_t i = 0; i < count; ++i) in[i] = static_cast<float>((i + rank) % 7);
  check(loomAllReduce(in.data(), out.data(), count, loomFloat32, loomSum, comm, nullptr), "warm-up",
        comm);
  float sync = 0;
  check(loomAllReduce(&sync, &sync, 1, loomFloat32, loomSum, comm, nullptr), "sync", comm);
  // Per-call times; the median is what the tuner is compared with (robust on a shared
  // machine), the mean is what a user waits on average.
  std::vector<double> times;
  for (int i = 0; i < iters; ++i) {
    const auto start = std::chrono::steady_clock::now();
    check(loomAllReduce(in.data(), out.data(), count, loomFloat32, loomSum, comm, nullptr),
          "allreduce", comm);
    times.push_back(
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
            .count());
  }
  double mean = std::accumulate(times.begin(), times.end(), 0.0) / iters;
  std::sort(times.begin(), times.end());
  double us = times[times.size() / 2];
  for (size_t i = 0; i < count; ++i) {
    float want = 0;
    for (int r = 0; r < n; ++r) want += static_cast<float>((i + r) % 7);
    if (out[i] != want) fail("wrong result at element " + std::to_string(i));
  }
  double both[2] = {us, mean};  // the slowest rank's
  check(loomAllReduce(both, both, 2, loomFloat64, loomMax, comm, nullptr), "max time", comm);
  us = both[0];
  mean = both[1];
  if (rank == 0) {
    const char* algo = std::getenv("LOOM_ALGO");
    const double bus = 2.0 * (n - 1) / n * static_cast<double>(bytes) / (us * 1e3);
    std::printf("allreduce %zu B  algo %s  time %.1f us  busbw %.4f GB/s  (mean %.1f us)\n", bytes,
                algo != nullptr && algo[0] ? algo : "tuner", us, bus, mean);
    std::fflush(stdout);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "id" && argc == 2) {
    loomUniqueId id;
    check(loomGetUniqueId(&id), "loomGetUniqueId", nullptr);
    std::printf("%s\n", loom::test::idToHex(id).c_str());
    return 0;
  }
  if (mode != "time" || argc < 6) {
    std::fprintf(stderr, "usage: %s id | time NRANKS RANK ID BYTES:ITERS...\n", argv[0]);
    return 2;
  }
  const int n = std::atoi(argv[2]), rank = std::atoi(argv[3]);
  loomComm_t comm = nullptr;
  check(loomCommInitRank(&comm, n, loom::test::idFromHex(argv[4]), rank), "init", nullptr);
  for (int i = 5; i < argc; ++i) {
    const std::string spec = argv[i];
    const size_t colon = spec.find(':');
    if (colon == std::string::npos) fail("bad size spec " + spec + " (want BYTES:ITERS)");
    timeOne(comm, n, rank, std::stoull(spec.substr(0, colon)), std::stoi(spec.substr(colon + 1)));
  }
  check(loomCommFinalize(comm), "finalize", comm);
  check(loomCommDestroy(comm), "destroy", nullptr);
  if (rank == 0) std::printf("ok\n");
  return 0;
}
