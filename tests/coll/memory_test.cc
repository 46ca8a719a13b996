// Nothing grows per call: after a warm-up, thousands of collectives of mixed sizes, kinds,
// protocols and algorithms leave the process's resident memory where it was (connections and
// their buffers are made once; page faults cost ~10 us per page here, so a data path that
// allocated or touched new memory per call would be both slow and visible in RSS).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <vector>

#include "loom/loom.h"
#include "tests/test_util.h"

namespace loom::colltest {
namespace {

long residentKiB() {
  long pages = 0, resident = 0;
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return -1;
  const int n = std::fscanf(f, "%ld %ld", &pages, &resident);
  std::fclose(f);
  return n == 2 ? resident * (sysconf(_SC_PAGESIZE) / 1024) : -1;
}

// Rounds of every kind at sizes from 8 B to 1 MiB (LL, tree and ring, one and several slots).
void rounds(loomComm_t comm, int nranks, float* in, float* out, int count) {
  const size_t sizes[] = {2, 3, 100, 4099, 65536, 262144};
  for (int i = 0; i < count; ++i) {
    const size_t n = sizes[i % 6];
    ASSERT_LOOM_OK(loomAllReduce(in, out, n, loomFloat32, loomSum, comm, nullptr));
    if (i % 4 == 0) ASSERT_LOOM_OK(loomAllGather(in, out, n / nranks, loomFloat32, comm, nullptr));
    if (i % 4 == 1) ASSERT_LOOM_OK(loomBroadcast(in, out, n, loomFloat32, 0, comm, nullptr));
    if (i % 4 == 2)
      ASSERT_LOOM_OK(loomReduceScatter(in, out, n / nranks, loomFloat32, loomMax, comm, nullptr));
  }
}

TEST(Memory, ResidentMemoryDoesNotGrowPerCall) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "AddressSanitizer keeps freed memory in quarantine, so resident memory grows "
                  "with any allocation; the plain build checks this";
#endif
  const int n = 3;
  std::vector<loomComm_t> comms = test::initThreads(n, test::makeId());
  const size_t maxCount = 262144;
  std::vector<std::vector<float>> in(n, std::vector<float>(maxCount, 1.0f));
  std::vector<std::vector<float>> out(n, std::vector<float>(maxCount, 0.0f));
  long before = 0;
  test::runThreads(n, [&](int r) { rounds(comms[r], n, in[r].data(), out[r].data(), 100); });
  before = residentKiB();
  test::runThreads(n, [&](int r) { rounds(comms[r], n, in[r].data(), out[r].data(), 10000); });
  const long after = residentKiB();
  ASSERT_GT(before, 0);
  // A little slack for the allocator's thread caches; a per-call leak of even one page per
  // call would add 40 MiB here.
  EXPECT_LE(after - before, 512) << "resident memory grew from " << before << " KiB to " << after
                                 << " KiB over 10000 rounds";
  EXPECT_EQ(out[0][0], 3.0f);  // the last call: an AllReduce (sum) of ones over 3 ranks
  test::finalizeAndDestroy(comms);
}

}  // namespace
}  // namespace loom::colltest
