// Soak: random collectives and point-to-point calls with exact checks, over rank processes
// and every transport, with communicators split and destroyed along the way.
//
//   loom_soak [--calls N] [--ranks R] [--seed S] [--transports shm,socket]
//
// For each transport (LOOM_TRANSPORT) it runs R rank processes (3 to 5) that draw the same
// random sequence from the seed: kind (all-reduce, broadcast, reduce, all-gather,
// reduce-scatter, all-to-all, a ring of sends and receives, two all-reduces in one group),
// type, op, count (0, 1, odd and large ones), root, in place or not, unaligned buffers,
// blocking or on a host stream, and now and then a split into 1 to 3 colors whose children run
// a stretch of calls and are destroyed. Inputs are small integers (tests/coll/coll_data.h), so
// every result is exact whatever the reduction order. The closing line counts calls, wrong
// results and errors; exit 0 only when both are 0.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "loom/loom.h"
#include "tests/coll/coll_data.h"
#include "tests/test_util.h"
#include "tests/tool_args.h"

namespace loom::soak {
namespace {

using colltest::Buffer;
using colltest::Op;

enum Kind {
  kAllReduce,
  kBroadcast,
  kReduce,
  kAllGather,
  kReduceScatter,
  kAllToAll,
  kRing,
  kGroupedAllReduce,
  kKinds
};
const char* kKindNames[] = {"allreduce",     "broadcast", "reduce", "allgather",
                            "reducescatter", "alltoall",  "ring",   "grouped_allreduce"};

// One communicator the rank works on, with its host stream.
struct Member {
  loomComm_t comm = nullptr;
  loomStream_t stream = nullptr;
  int rank = 0, nranks = 1;
};

class Rank {
 public:
  Rank(uint64_t seed, const Member& world) : rng_(seed), world_(world) {}

  // Runs `calls` calls; returns false at the first error (the ranks cannot stay in step).
  bool run(uint64_t calls) {
    Member current = world_;
    uint64_t childLeft = 0;
    for (uint64_t i = 0; i < calls; ++i) {
      if (childLeft == 0 && current.comm != world_.comm) {
        if (!leave(current)) return false;
        current = world_;
      } else if (current.comm == world_.comm && rng_() % 150 == 0) {
        if (!split(current)) return false;
        childLeft = 20 + rng_() % 80;
      }
      if (childLeft > 0) --childLeft;
      ++calls_;
      if (!one(current, static_cast<uint32_t>(i))) return false;
    }
    if (current.comm != world_.comm) return leave(current);
    return true;
  }

  uint64_t calls() const { return calls_; }
  uint64_t wrong() const { return wrong_; }
  const std::string& firstWrong() const { return firstWrong_; }
  const std::string& error() const { return error_; }

 private:
  bool check(loomResult_t r, const char* what, loomComm_t comm) {
    if (r == loomSuccess) return true;
    error_ = std::string(what) + ": " + loomGetErrorString(r) + ": " + loomGetLastError(comm);
    return false;
  }

  // Every rank draws the colors of all world ranks, so they agree on who is where.
  bool split(Member& m) {
    const int colors = 1 + static_cast<int>(rng_() % 3);
    std::vector<int> color(world_.nranks), key(world_.nranks);
    for (int r = 0; r < world_.nranks; ++r) {
      color[r] = static_cast<int>(rng_() % colors);
      key[r] = static_cast<int>(rng_() % 7);
    }
    Member child;
    ++calls_;
    if (!check(
            loomCommSplit(world_.comm, color[world_.rank], key[world_.rank], &child.comm, nullptr),
            "loomCommSplit", world_.comm))
      return false;
    loomCommUserRank(child.comm, &child.rank);
    loomCommCount(child.comm, &child.nranks);
    int expected = 0;
    for (int r = 0; r < world_.nranks; ++r) expected += color[r] == color[world_.rank];
    if (child.nranks != expected) note("split", "child has " + std::to_string(child.nranks));
    if (!check(loomStreamCreate(child.comm, &child.stream), "loomStreamCreate", child.comm))
      return false;
    m = child;
    return true;
  }

  bool leave(Member& child) {
    if (!check(loomStreamDestroy(child.stream), "loomStreamDestroy", child.comm)) return false;
    if (!check(loomCommFinalize(child.comm), "loomCommFinalize", child.comm)) return false;
    return check(loomCommDestroy(child.comm), "loomCommDestroy", nullptr);
  }

  void note(const char* what, const std::string& detail) {
    if (wrong_++ == 0) firstWrong_ = std::string(what) + ": " + detail;
  }

  size_t drawCount() {
    switch (rng_() % 8) {
      case 0:
        return 0;
      case 1:
        return 1;
      case 2:
        return 2 + rng_() % 15;
      case 3:
        return 1 + rng_() % 100000;
      default:
        return 1 + rng_() % 3000;
    }
  }

  bool one(const Member& m, uint32_t salt) {
    const Kind kind = static_cast<Kind>(rng_() % kKinds);
    const loomDataType_t type = colltest::allTypes()[rng_() % colltest::allTypes().size()];
    static const Op kOps[] = {Op::kSum, Op::kProd, Op::kMax, Op::kMin, Op::kAvg};
    const Op op = kOps[rng_() % 5];
    const loomRedOp_t redOp = static_cast<loomRedOp_t>(static_cast<int>(op));
    const size_t count = drawCount();
    const int root = static_cast<int>(rng_() % m.nranks);
    const bool inPlace = rng_() % 3 == 0;
    const size_t offset = rng_() % 4 == 0 ? 1 + rng_() % 15 : 0;
    const bool onStream = rng_() % 2 == 0;
    const size_t size = colltest::typeInfo(type).size;
    const int n = m.nranks, r = m.rank;
    loomStream_t stream = onStream ? m.stream : nullptr;
    auto in = [&](int rank, uint64_t idx, Op o) {
      return colltest::inputValue(type, o, rank, idx, salt);
    };
    auto fill = [&](uint8_t* p, size_t elems, int rank, uint64_t first, Op o) {
      for (size_t i = 0; i < elems; ++i)
        colltest::storeBits(p + i * size, size,
                            colltest::encodeValue(type, in(rank, first + i, o)));
    };
    auto reduced = [&](uint64_t idx) {
      return colltest::expectedReduce(type, op, n, [&](int rank) { return in(rank, idx, op); });
    };
    auto copied = [&](int rank, uint64_t idx) {
      return colltest::encodeValue(type, in(rank, idx, Op::kMax));
    };
    // Sizes of the send and receive buffers, in elements.
    size_t sendElems = count, recvElems = count;
    if (kind == kAllGather) recvElems = count * n;
    if (kind == kReduceScatter) sendElems = count * n;
    if (kind == kAllToAll) sendElems = recvElems = count * n;
    Buffer send(sendElems * size, offset), recv(recvElems * size, offset);
    uint8_t* sendPtr = send.data();
    uint8_t* recvPtr = recv.data();
    // In place: the send data sits where NCCL's conventions put it inside recvbuff.
    const bool place = inPlace && kind != kRing && kind != kAllToAll && kind != kGroupedAllReduce;
    if (place) {
      if (kind == kAllGather)
        sendPtr = recvPtr + static_cast<size_t>(r) * count * size;
      else if (kind == kReduceScatter)
        recvPtr = sendPtr + static_cast<size_t>(r) * count * size;
      else
        sendPtr = recvPtr;
    }
    // Inputs.
    const Op inputOp =
        kind == kBroadcast || kind == kAllGather || kind == kAllToAll || kind == kRing ? Op::kMax
                                                                                       : op;
    if (kind == kReduceScatter || kind == kAllToAll)
      fill(sendPtr, sendElems, r, 0, inputOp);
    else
      fill(sendPtr, count, r, kind == kAllGather ? static_cast<uint64_t>(r) * count : 0, inputOp);
    // For all-gather the element index is global: rank q's block holds indices q*count + i.

    const char* name = kKindNames[kind];
    loomResult_t res = loomSuccess;
    switch (kind) {
      case kAllReduce:
        res = loomAllReduce(sendPtr, recvPtr, count, type, redOp, m.comm, stream);
        break;
      case kBroadcast:
        res = loomBroadcast(sendPtr, recvPtr, count, type, root, m.comm, stream);
        break;
      case kReduce:
        res = loomReduce(sendPtr, recvPtr, count, type, redOp, root, m.comm, stream);
        break;
      case kAllGather:
        res = loomAllGather(sendPtr, recvPtr, count, type, m.comm, stream);
        break;
      case kReduceScatter:
        res = loomReduceScatter(sendPtr, recvPtr, count, type, redOp, m.comm, stream);
        break;
      case kAllToAll:
        res = loomAlltoAll(sendPtr, recvPtr, count, type, m.comm, stream);
        break;
      case kRing:
        loomGroupStart();
        loomSend(sendPtr, count, type, (r + 1) % n, m.comm, stream);
        loomRecv(recvPtr, count, type, (r + n - 1) % n, m.comm, stream);
        res = loomGroupEnd();
        break;
      case kGroupedAllReduce: {
        loomGroupStart();
        loomAllReduce(sendPtr, recvPtr, count, type, redOp, m.comm, stream);
        // The second reads the first's input again, into a buffer of its own.
        second_ = Buffer(count * size, offset);
        loomAllReduce(sendPtr, second_.data(), count, type, redOp, m.comm, stream);
        res = loomGroupEnd();
        break;
      }
      default:
        break;
    }
    if (!check(res, name, m.comm)) return false;
    if (onStream && !check(loomStreamSynchronize(m.stream), "loomStreamSynchronize", m.comm))
      return false;

    // Checks.
    std::string where = std::string(name) + " " + colltest::typeInfo(type).name + " " +
                        colltest::opName(op) + " count " + std::to_string(count) + " call " +
                        std::to_string(salt);
    std::string bad;
    switch (kind) {
      case kAllReduce:
      case kGroupedAllReduce:
        bad = colltest::compareElements(type, recvPtr, count, reduced, where);
        if (bad.empty() && kind == kGroupedAllReduce)
          bad = colltest::compareElements(type, second_.data(), count, reduced, where + " (2nd)");
        break;
      case kBroadcast:
        bad = colltest::compareElements(
            type, recvPtr, count, [&](uint64_t i) { return copied(root, i); }, where);
        break;
      case kReduce:
        if (r == root) bad = colltest::compareElements(type, recvPtr, count, reduced, where);
        break;
      case kAllGather:
        bad = colltest::compareElements(
            type, recvPtr, count * n,
            [&](uint64_t i) { return copied(static_cast<int>(i / (count ? count : 1)), i); },
            where);
        break;
      case kReduceScatter:
        bad = colltest::compareElements(
            type, recvPtr, count,
            [&](uint64_t i) { return reduced(static_cast<uint64_t>(r) * count + i); }, where);
        break;
      case kAllToAll:
        // Block q of my receive buffer is block r of rank q's send buffer.
        bad = colltest::compareElements(
            type, recvPtr, count * n,
            [&](uint64_t i) {
              const int q = static_cast<int>(i / (count ? count : 1));
              return copied(q, static_cast<uint64_t>(r) * count + i % (count ? count : 1));
            },
            where);
        break;
      case kRing:
        bad = colltest::compareElements(
            type, recvPtr, count, [&](uint64_t i) { return copied((r + n - 1) % n, i); }, where);
        break;
      default:
        break;
    }
    if (bad.empty()) bad = send.checkGuards();
    if (bad.empty()) bad = recv.checkGuards();
    if (!bad.empty()) note(name, bad);
    return true;
  }

  std::mt19937_64 rng_;
  Member world_;
  Buffer second_;
  uint64_t calls_ = 0, wrong_ = 0;
  std::string firstWrong_, error_;
};

int rankMain(int rank, int nranks, const std::string& idHex, uint64_t seed, uint64_t calls) {
  Member world;
  world.rank = rank;
  world.nranks = nranks;
  auto result = [](uint64_t c, uint64_t w, uint64_t e) {
    std::printf("RESULT calls %llu wrong %llu errors %llu\n", static_cast<unsigned long long>(c),
                static_cast<unsigned long long>(w), static_cast<unsigned long long>(e));
    std::fflush(stdout);
  };
  if (loomCommInitRank(&world.comm, nranks, test::idFromHex(idHex), rank) != loomSuccess ||
      loomStreamCreate(world.comm, &world.stream) != loomSuccess) {
    std::printf("init: %s\n", loomGetLastError(world.comm));
    result(0, 0, 1);
    return 1;
  }
  Rank soak(seed, world);
  const bool ok = soak.run(calls);
  if (!soak.error().empty()) std::printf("error: %s\n", soak.error().c_str());
  if (!soak.firstWrong().empty()) std::printf("wrong: %s\n", soak.firstWrong().c_str());
  uint64_t errors = ok ? 0 : 1;
  if (ok) {
    errors += loomStreamDestroy(world.stream) != loomSuccess;
    errors += loomCommFinalize(world.comm) != loomSuccess;
  }
  loomCommDestroy(world.comm);
  result(soak.calls(), soak.wrong(), errors);
  return errors == 0 && soak.wrong() == 0 ? 0 : 1;
}

int parentMain(int argc, char** argv) {
  const uint64_t calls = loom::test::argValue(argc, argv, "--calls", 10000);
  const int nranks = static_cast<int>(loom::test::argValue(argc, argv, "--ranks", 3));
  const uint64_t seed = loom::test::argValue(argc, argv, "--seed", 1);
  std::vector<std::string> transports;
  std::stringstream list(loom::test::argString(argc, argv, "--transports", "shm,socket"));
  for (std::string t; std::getline(list, t, ',');) transports.push_back(t);
  if (nranks < 2 || nranks > 8 || transports.empty()) {
    std::fprintf(stderr, "loom_soak: give --ranks 2 to 8 and at least one transport\n");
    return 2;
  }
  char exe[4096];
  const ssize_t len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (len <= 0) return 2;
  exe[len] = '\0';
  const auto start = std::chrono::steady_clock::now();
  uint64_t total = 0, wrong = 0, errors = 0;
  std::string perTransport;
  for (size_t t = 0; t < transports.size(); ++t) {
    // The calls are shared out over the transports; each run has a seed of its own.
    const uint64_t mine = calls / transports.size() + (t < calls % transports.size() ? 1 : 0);
    loomUniqueId id;
    if (loomGetUniqueId(&id) != loomSuccess) return 2;
    std::vector<test::RankProcess> ranks;
    for (int r = 0; r < nranks; ++r)
      ranks.push_back(test::spawnProcess(
          exe,
          {"--rank", std::to_string(r), "--ranks", std::to_string(nranks), "--id",
           test::idToHex(id), "--seed", std::to_string(seed + t), "--calls", std::to_string(mine)},
          {"LOOM_TRANSPORT=" + transports[t]}));
    uint64_t runCalls = 0;
    for (int r = 0; r < nranks; ++r) {
      std::string out;
      std::optional<int> code = test::waitRank(ranks[r], 1800000, &out);
      unsigned long long c = 0, w = 0, e = 0;
      const size_t at = out.find("RESULT ");
      if (at == std::string::npos ||
          std::sscanf(out.c_str() + at, "RESULT calls %llu wrong %llu errors %llu", &c, &w, &e) !=
              3) {
        e = 1;
      }
      if (!code || *code != 0 || w != 0 || e != 0)
        std::fprintf(stderr, "loom_soak: %s rank %d (exit %d):\n%s", transports[t].c_str(), r,
                     code ? *code : -1, out.c_str());
      if (!code || (*code != 0 && e == 0 && w == 0)) e = 1;
      if (r == 0) runCalls = c;
      wrong += w;
      errors += e;
    }
    total += runCalls;
    perTransport +=
        (perTransport.empty() ? "" : ", ") + transports[t] + " " + std::to_string(runCalls);
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("loom_soak: seed %llu, %d ranks: %llu calls (%s), %llu wrong, %llu errors, %.1f s\n",
              static_cast<unsigned long long>(seed), nranks, static_cast<unsigned long long>(total),
              perTransport.c_str(), static_cast<unsigned long long>(wrong),
              static_cast<unsigned long long>(errors), seconds);
  return wrong == 0 && errors == 0 ? 0 : 1;
}

}  // namespace
}  // namespace loom::soak

int main(int argc, char** argv) {
  using namespace loom::soak;
  if (loom::test::wantsHelp(argc, argv)) {
    std::printf(
        "usage: loom_soak [--calls N] [--ranks R] [--seed S] [--transports shm,socket]\n"
        "Runs N random collective and point-to-point calls (default 10000, shared out over\n"
        "the transports) with exact checks on R rank processes (default 3), splitting and\n"
        "destroying communicators along the way. Prints calls, wrong results and errors.\n");
    return 0;
  }
  const std::string rank = loom::test::argString(argc, argv, "--rank", "");
  if (!rank.empty())
    return rankMain(std::atoi(rank.c_str()),
                    static_cast<int>(loom::test::argValue(argc, argv, "--ranks", 3)),
                    loom::test::argString(argc, argv, "--id", ""),
                    loom::test::argValue(argc, argv, "--seed", 1),
                    loom::test::argValue(argc, argv, "--calls", 0));
  return parentMain(argc, argv);
}
