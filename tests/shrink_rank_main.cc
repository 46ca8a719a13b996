// One rank of the loomCommShrink process tests (tests/shrink_test.cc):
//
//   loom_shrink_rank NRANKS RANK ID EXCLUDED abort|default
//
// Runs AllReduces until one fails (the test kills rank EXCLUDED, after this rank printed
// "running"), then shrinks the communicator without EXCLUDED (with LOOM_SHRINK_ABORT or
// LOOM_SHRINK_DEFAULT: the parent has failed, so both stop its calls) and checks
// exact AllReduce, AllGather and Broadcast results on the new one. Prints "ok" and exits 0, or
// prints "fail <code> <message>" and exits 10 + the loomResult_t code.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "loom/loom.h"
#include "tests/test_util.h"

namespace {

[[noreturn]] void fail(loomResult_t code, const std::string& what) {
  std::printf("fail %d %s\n", static_cast<int>(code), what.c_str());
  std::fflush(stdout);
  std::exit(10 + static_cast<int>(code));
}

void check(loomResult_t r, const std::string& what, loomComm_t comm) {
  if (r != loomSuccess) fail(r, what + ": " + loomGetLastError(comm));
}

void expectEq(int64_t got, int64_t want, const std::string& what) {
  if (got != want)
    fail(loomInternalError,
         what + ": got " + std::to_string(got) + ", want " + std::to_string(want));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 6) {
    std::fprintf(stderr, "usage: %s NRANKS RANK ID EXCLUDED abort|default\n", argv[0]);
    return 2;
  }
  const int n = std::atoi(argv[1]), rank = std::atoi(argv[2]), excluded = std::atoi(argv[4]);
  loomUniqueId id = loom::test::idFromHex(argv[3]);
  loomComm_t comm = nullptr;
  check(loomCommInitRank(&comm, n, id, rank), "loomCommInitRank", nullptr);

  std::vector<int32_t> in(8, 1), out(8);
  for (int call = 1;; ++call) {
    const loomResult_t r =
        loomAllReduce(in.data(), out.data(), in.size(), loomInt32, loomSum, comm, nullptr);
    if (r != loomSuccess) {
      std::printf("failed %d\n", static_cast<int>(r));
      break;
    }
    if (call == 200) {
      std::printf("running\n");
      std::fflush(stdout);
    }
  }

  loomComm_t shrunk = nullptr;
  const int flags = std::string(argv[5]) == "abort" ? LOOM_SHRINK_ABORT : LOOM_SHRINK_DEFAULT;
  check(loomCommShrink(comm, &excluded, 1, &shrunk, nullptr, flags), "loomCommShrink", comm);
  check(loomCommDestroy(comm), "loomCommDestroy(parent)", nullptr);
  const int m = n - 1, me = rank < excluded ? rank : rank - 1;
  int count = -1, newRank = -1;
  check(loomCommCount(shrunk, &count), "loomCommCount", shrunk);
  check(loomCommUserRank(shrunk, &newRank), "loomCommUserRank", shrunk);
  expectEq(count, m, "count");
  expectEq(newRank, me, "rank");

  // Integers: the sums are exact whatever the reduction order.
  const size_t elems = 100000;
  std::vector<int32_t> mine(elems), sum(elems);
  for (size_t i = 0; i < elems; ++i) mine[i] = (me + 1) * static_cast<int32_t>(i % 1000 + 1);
  check(loomAllReduce(mine.data(), sum.data(), elems, loomInt32, loomSum, shrunk, nullptr),
        "loomAllReduce", shrunk);
  const int32_t ranksSum = m * (m + 1) / 2;
  for (size_t i = 0; i < elems; ++i)
    expectEq(sum[i], ranksSum * static_cast<int32_t>(i % 1000 + 1), "AllReduce element");

  const size_t block = 7;
  std::vector<int32_t> part(block), all(block * static_cast<size_t>(m));
  for (size_t i = 0; i < block; ++i) part[i] = me * 100 + static_cast<int32_t>(i);
  check(loomAllGather(part.data(), all.data(), block, loomInt32, shrunk, nullptr), "loomAllGather",
        shrunk);
  for (int r = 0; r < m; ++r)
    for (size_t i = 0; i < block; ++i)
      expectEq(all[r * block + i], r * 100 + static_cast<int32_t>(i), "AllGather element");

  std::vector<int32_t> b(block, me == m - 1 ? 42 : -1);
  check(loomBroadcast(b.data(), b.data(), block, loomInt32, m - 1, shrunk, nullptr),
        "loomBroadcast", shrunk);
  for (int32_t v : b) expectEq(v, 42, "Broadcast element");

  check(loomCommFinalize(shrunk), "loomCommFinalize", shrunk);
  check(loomCommDestroy(shrunk), "loomCommDestroy", nullptr);
  std::printf("ok\n");
  return 0;
}
