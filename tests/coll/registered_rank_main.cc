// One rank of the registered-memory tests (tests/coll/registered_test.cc): collectives between
// processes on buffers from loomMemAlloc, checked exactly, with the number of registered
// (single-copy, region-mapped) steps this process received printed for the driver to judge.
//
//   loom_registered_rank SCENARIO NRANKS RANK ID
//
// ID is the hex unique id, or "env" to derive it from LOOM_COMM_ID (runs by hand).
// Scenarios:
//   collectives  every collective x a few types x a small (ring) and a large (direct) count, in
//                place and out of place; prints "steps <kind> <small|large> <n>" per group
//   partial      a send whose buffer lies only half inside a region (ring), then one
//                inside the region (registered); prints "steps partial <n>" / "steps inside <n>"
//   refused      as collectives, after dropping to user nobody with rank 1 not dumpable: rank 0
//                may not take rank 1's fds and must fall back to the ring
//   staged       AllGather on plain heap buffers (no region), a small and a large count, in
//                place and out of place; run with LOOM_ALGO=exchange, the large blocks are
//                staged once into the sender's staging region and read from there; prints
//                "steps staged <small|large> <n>"
// Prints "ok" and exits 0 when every result is right; "skip <why>" and 0 when the scenario cannot
// run here; else "fail <what>" and 1.
#include <sys/mman.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "loom/loom.h"
#include "tests/coll/coll_data.h"
#include "tests/coll/rank_process.h"
#include "tests/test_util.h"
#include "transports/shm/registered_read.h"

namespace {

using namespace loom::colltest;

enum class Kind { kAllReduce, kBroadcast, kReduce, kAllGather, kReduceScatter, kAlltoAll };
const char* kKindNames[] = {"allreduce", "broadcast",     "reduce",
                            "allgather", "reducescatter", "alltoall"};

uint64_t registeredSteps() { return loom::transport::shm::registeredStepsReceived(); }

// Small non-negative integers: exact in every tested type, sums of up to 3 ranks included.
int64_t value(int rank, size_t idx, uint32_t salt) {
  return static_cast<int64_t>((idx * 7 + static_cast<size_t>(rank) * 13 + salt) % 21);
}

struct Regions {
  char* send = nullptr;
  char* recv = nullptr;
  size_t bytes = 0;
};

// One collective on region memory (at `offset` bytes into each region); checks every element.
void runCase(Kind kind, loomDataType_t t, loomRedOp_t op, size_t count, bool inPlace, size_t offset,
             const Regions& regions, loomComm_t comm, int n, int rank, uint32_t salt) {
  const size_t elem = typeInfo(t).size;
  const int root = static_cast<int>(salt % n);
  // Elements of the send and receive buffers in NCCL's layouts.
  size_t sendCount = count, recvCount = count;
  if (kind == Kind::kAllGather) recvCount = count * n;
  if (kind == Kind::kReduceScatter) sendCount = count * n;
  if (kind == Kind::kAlltoAll) sendCount = recvCount = count * n;
  if (offset + std::max(sendCount, recvCount) * elem > regions.bytes) fail("regions too small");
  char* recv = regions.recv + offset;
  char* send = regions.send + offset;
  if (inPlace) {
    send = recv;
    if (kind == Kind::kAllGather) send = recv + rank * count * elem;
    if (kind == Kind::kReduceScatter) recv = send + rank * count * elem;
  }
  std::memset(regions.recv, 0xA5, regions.bytes);  // poison whatever is not sent
  for (size_t i = 0; i < sendCount; ++i)
    storeBits(send + i * elem, elem, encodeValue(t, value(rank, i, salt)));
  auto combine = [&](size_t idx) {  // the reduction of send element idx over every rank
    int64_t acc = 0;                // values are >= 0: a start for max too
    for (int r = 0; r < n; ++r)
      acc = op == loomMax ? std::max(acc, value(r, idx, salt)) : acc + value(r, idx, salt);
    return encodeValue(t, acc);
  };
  switch (kind) {
    case Kind::kAllReduce:
      check(loomAllReduce(send, recv, count, t, op, comm, nullptr), "loomAllReduce", comm);
      break;
    case Kind::kBroadcast:
      check(loomBroadcast(send, recv, count, t, root, comm, nullptr), "loomBroadcast", comm);
      break;
    case Kind::kReduce:
      check(loomReduce(send, recv, count, t, op, root, comm, nullptr), "loomReduce", comm);
      break;
    case Kind::kAllGather:
      check(loomAllGather(send, recv, count, t, comm, nullptr), "loomAllGather", comm);
      break;
    case Kind::kReduceScatter:
      check(loomReduceScatter(send, recv, count, t, op, comm, nullptr), "loomReduceScatter", comm);
      break;
    case Kind::kAlltoAll:
      check(loomAlltoAll(send, recv, count, t, comm, nullptr), "loomAlltoAll", comm);
      break;
  }
  if (kind == Kind::kReduce && rank != root) return;  // recvbuff is not written there
  for (size_t i = 0; i < recvCount; ++i) {
    uint64_t want = 0;
    switch (kind) {
      case Kind::kAllReduce:
      case Kind::kReduce:
        want = combine(i);
        break;
      case Kind::kBroadcast:
        want = encodeValue(t, value(root, i, salt));
        break;
      case Kind::kAllGather:
        want = encodeValue(t, value(static_cast<int>(i / count), i % count, salt));
        break;
      case Kind::kReduceScatter:
        want = combine(rank * count + i);
        break;
      case Kind::kAlltoAll:  // block p came from rank p's block `rank`
        want = encodeValue(t, value(static_cast<int>(i / count), rank * count + i % count, salt));
        break;
    }
    const uint64_t got = loadBits(recv + i * elem, elem);
    if (got != want) {
      fail(std::string(kKindNames[static_cast<int>(kind)]) + " " + typeInfo(t).name + " count " +
           std::to_string(count) + (inPlace ? " in place" : " out of place") + " rank " +
           std::to_string(rank) + ": element " + std::to_string(i) + " is " + hex(got) +
           ", expected " + hex(want));
    }
  }
}

// Small steps (under the single-copy minimum) and large ones (several slots of LOOM_BUFFSIZE).
constexpr size_t kSmallCount = 600;
constexpr size_t kLargeCount = 200003;

void collectives(loomComm_t comm, int n, int rank) {
  Regions regions;
  regions.bytes = kLargeCount * n * 8 + 8192;
  check(loomMemAlloc(reinterpret_cast<void**>(&regions.send), regions.bytes), "loomMemAlloc",
        nullptr);
  check(loomMemAlloc(reinterpret_cast<void**>(&regions.recv), regions.bytes), "loomMemAlloc",
        nullptr);
  const loomDataType_t types[] = {loomFloat32, loomInt32, loomFloat64, loomBfloat16, loomUint8};
  uint32_t salt = 1;
  for (int k = 0; k < 6; ++k) {
    const Kind kind = static_cast<Kind>(k);
    for (size_t count : {kSmallCount, kLargeCount}) {
      const uint64_t before = registeredSteps();
      for (loomDataType_t t : types) {
        for (bool inPlace : {false, true}) {
          const loomRedOp_t op = salt % 2 ? loomSum : loomMax;
          // Offset inside the region (an element's worth past a page) on every other call.
          const size_t offset = salt % 3 == 0 ? 4096 + typeInfo(t).size : 0;
          runCase(kind, t, op, count, inPlace, offset, regions, comm, n, rank, salt++);
        }
      }
      std::printf("steps %s %s %llu\n", kKindNames[k], count == kSmallCount ? "small" : "large",
                  static_cast<unsigned long long>(registeredSteps() - before));
    }
  }
  check(loomMemFree(regions.send), "loomMemFree", nullptr);
  check(loomMemFree(regions.recv), "loomMemFree", nullptr);
}

// AllGather between buffers outside any region: whatever arrives registered was staged.
void staged(loomComm_t comm, int n, int rank) {
  std::vector<char> send(kLargeCount * n * 8 + 8192), recv(send.size());
  Regions plain{send.data(), recv.data(), send.size()};
  const loomDataType_t types[] = {loomFloat32, loomFloat64, loomUint8};
  uint32_t salt = 101;
  for (size_t count : {kSmallCount, kLargeCount}) {
    const uint64_t before = registeredSteps();
    for (loomDataType_t t : types) {
      for (bool inPlace : {false, true}) {
        const size_t offset = salt % 3 == 0 ? typeInfo(t).size : 0;  // unaligned now and then
        runCase(Kind::kAllGather, t, loomSum, count, inPlace, offset, plain, comm, n, rank, salt++);
      }
    }
    std::printf("steps staged %s %llu\n", count == kSmallCount ? "small" : "large",
                static_cast<unsigned long long>(registeredSteps() - before));
  }
}

// Rank 0 sends to rank 1 in one step: first from a buffer only half inside a region (the ring),
// then from inside the region (registered).
void partial(loomComm_t comm, int rank) {
  constexpr size_t kBytes = 128 * 1024, kBelow = 64 * 1024;
  // rank 0's straddling buffer: 64 KiB of plain memory mapped right next to the region, so the
  // buffer is valid memory only partly inside the region. A region whose neighbours are both
  // taken (mappings are packed top-down) is kept aside and another one tried.
  auto mapAt = [](char* at) {
    void* p = mmap(at, kBelow, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    if (p != MAP_FAILED && p != at) munmap(p, kBelow);  // kernels before 4.17: a hint only
    return p == at;
  };
  char* region = nullptr;
  char* straddle = nullptr;
  std::vector<char*> crowded;
  for (int attempt = 0; attempt < 16; ++attempt) {
    check(loomMemAlloc(reinterpret_cast<void**>(&region), kBytes), "loomMemAlloc", nullptr);
    if (rank != 0) break;
    if (mapAt(region - kBelow)) {
      straddle = region - kBelow;
      break;
    }
    if (mapAt(region + kBytes)) {
      straddle = region + kBytes - kBelow;
      break;
    }
    crowded.push_back(region);
  }
  for (char* r : crowded) check(loomMemFree(r), "loomMemFree", nullptr);
  if (rank == 0 && straddle == nullptr)
    fail("no free address range next to any of 16 regions for the straddling buffer");
  std::vector<char> got(kBytes);
  auto exchange = [&](const char* src) {
    if (rank == 0) {
      for (size_t i = 0; i < kBytes; ++i) const_cast<char*>(src)[i] = static_cast<char>(i * 31 + 7);
      check(loomSend(src, kBytes, loomUint8, 1, comm, nullptr), "loomSend", comm);
    } else {
      check(loomRecv(got.data(), kBytes, loomUint8, 0, comm, nullptr), "loomRecv", comm);
      for (size_t i = 0; i < kBytes; ++i)
        if (got[i] != static_cast<char>(i * 31 + 7)) fail("byte " + std::to_string(i) + " wrong");
    }
  };
  // Registered steps start once the receiver's verdict reached the sender (setup, phase 3):
  // a first send and a barrier make sure it has, so the ring below is the region check's doing.
  auto barrier = [&] {
    int one = 1, sum = 0;
    check(loomAllReduce(&one, &sum, 1, loomInt32, loomSum, comm, nullptr), "barrier", comm);
  };
  exchange(region);
  barrier();
  uint64_t before = registeredSteps();
  exchange(straddle);
  std::printf("steps partial %llu\n", static_cast<unsigned long long>(registeredSteps() - before));
  barrier();
  before = registeredSteps();
  exchange(region);
  std::printf("steps inside %llu\n", static_cast<unsigned long long>(registeredSteps() - before));
  check(loomMemFree(region), "loomMemFree", nullptr);
}

// Drops root to user nobody; rank 1 stays not dumpable (so rank 0, without CAP_SYS_PTRACE, may
// not take its fds), rank 0 dumpable again (so rank 1 may take rank 0's).
bool dropPrivileges(int rank) {
  if (geteuid() != 0) return false;
  if (setgid(65534) != 0 || setuid(65534) != 0) return false;
  return prctl(PR_SET_DUMPABLE, rank == 0 ? 1 : 0) == 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: %s SCENARIO NRANKS RANK ID\n", argv[0]);
    return 2;
  }
  const std::string scenario = argv[1];
  const int n = std::atoi(argv[2]), rank = std::atoi(argv[3]);
  if (scenario == "refused" && !dropPrivileges(rank)) {
    std::printf("skip cannot become user nobody (not root?)\n");
    return 0;
  }
  loomUniqueId id{};
  if (std::string(argv[4]) == "env")  // by hand: every rank derives it from LOOM_COMM_ID
    check(loomGetUniqueId(&id), "loomGetUniqueId", nullptr);
  else
    id = loom::test::idFromHex(argv[4]);
  loomComm_t comm = nullptr;
  check(loomCommInitRank(&comm, n, id, rank), "loomCommInitRank", nullptr);
  if (scenario == "collectives" || scenario == "refused") {
    collectives(comm, n, rank);
  } else if (scenario == "partial") {
    partial(comm, rank);
  } else if (scenario == "staged") {
    staged(comm, n, rank);
  } else {
    fail("unknown scenario " + scenario);
  }
  check(loomCommFinalize(comm), "loomCommFinalize", comm);
  check(loomCommDestroy(comm), "loomCommDestroy", nullptr);
  std::printf("ok\n");
  return 0;
}
