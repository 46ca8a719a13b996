// Collectives between ranks in separate processes (loom_coll_rank), over shared memory and
// over TCP: every rank checks its results and reports "ok"; a rank killed mid-call makes the
// others fail.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "src/base/strings.h"
#include "tests/test_util.h"

namespace loom::colltest {
namespace {

test::RankProcess spawnCollRank(const std::vector<std::string>& args,
                                const std::vector<std::string>& env) {
  return test::spawnProcess(LOOM_COLL_RANK_BINARY, args, env);
}

// Runs `scenario` on nranks processes with the transport; every one must print "ok".
void runProcesses(const std::string& scenario, int nranks, const std::string& transport) {
  const std::string cmaLog = strCat(::testing::TempDir(), "loom-cma-", getpid());
  loomUniqueId id = test::makeId();  // the rendezvous root lives in this process
  std::vector<std::string> env{"LOOM_SOCKET_IFNAME=lo"};
  if (getenv("LOOM_TIMEOUT") == nullptr) env.push_back("LOOM_TIMEOUT=60");
  if (transport == "socket") env.push_back("LOOM_TRANSPORT=socket");
  // Every call's output written with streaming stores (large calls only by default).
  if (transport == "shmstream") env.push_back("LOOM_STREAM_STORE_THRESHOLD=1");
  // Every step's slots written with streaming stores, the outputs not (shm_way_policy.h).
  if (transport == "slotstream") env.push_back("LOOM_SHM_STREAM_SLOTS=1");
  // Every step of 32 KiB or more walks 8 pages at once through the slots (shm_way_policy.h).
  if (transport == "pagewalk") env.push_back("LOOM_SHM_PAGE_WALK=1");
  // "cmapolicy": shared memory as it ships, CMA chosen by the default policy (auto). Not named
  // after shm, so that the soft-NIC run of the *shm* cases (LOOM_TRANSPORT=ib) leaves it out.
  if (transport == "cma") {
    // Every step pulled with process_vm_readv, over many small slots.
    env.insert(env.end(),
               {"LOOM_SHM_CMA_THRESHOLD=1", "LOOM_SHM_CMA_MODE=always", "LOOM_BUFFSIZE=65536",
                "LOOM_DEBUG=INFO", "LOOM_DEBUG_SUBSYS=SHM", "LOOM_DEBUG_FILE=" + cmaLog + ".%p"});
  }
  std::vector<test::RankProcess> procs;
  for (int r = 0; r < nranks; ++r) {
    procs.push_back(spawnCollRank(
        {scenario, std::to_string(nranks), std::to_string(r), test::idToHex(id)}, env));
  }
  for (int r = 0; r < nranks; ++r) {
    if (procs[r].pid < 0) continue;
    std::string out;
    std::optional<int> code = test::waitRank(procs[r], 120000, &out);
    ASSERT_TRUE(code.has_value()) << "rank " << r << " did not finish in 120 s: " << out;
    EXPECT_EQ(*code, 0) << scenario << " rank " << r << " of " << nranks << " over " << transport
                        << ": " << out;
    EXPECT_NE(out.find("ok"), std::string::npos) << out;
    // Every rank pulled some of the repeated shifts from its previous rank (with a CPU per
    // rank: with more ranks than CPUs only Broadcast and AllGather pull, shm_way_policy.h).
    if (scenario == "ring-repeated" && std::thread::hardware_concurrency() >= unsigned(nranks)) {
      EXPECT_EQ(out.find("cma-reads 0\n"), std::string::npos) << out;
    }
    // The fast path of the exchange pulled too, as LOOM_SHM_CMA_MODE=always says: each of the
    // 20 out-of-place calls pulled its peer's input (in place the send copies), but the first,
    // which makes the connections and may send before the receiver's CMA probe has answered
    // (transports/shm/direct_read.h); and the calls after the first took the fast path.
    if (scenario == "exchange-repeated" && transport == "cma") {
      unsigned long long reads = 0, fast = 0;
      const size_t at = out.find("cma-reads ");
      ASSERT_NE(at, std::string::npos) << out;
      ASSERT_EQ(std::sscanf(out.c_str() + at, "cma-reads %llu fast %llu", &reads, &fast), 2);
      EXPECT_GE(reads, 19u) << out;
      EXPECT_GE(fast, 39u) << out;
    }
    if (transport == "cma") {
      // The pair really used CMA (the receiver's probe may refuse it): its log says so.
      const std::string log = strCat(cmaLog, ".", procs[r].pid);
      std::ifstream file(log);
      std::string text((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
      EXPECT_NE(text.find("this rank pulls with CMA"), std::string::npos) << log << ": " << text;
      std::remove(log.c_str());
    }
  }
}

using Param = std::tuple<std::string, int, std::string>;  // scenario, nranks, transport

class CollProcesses : public ::testing::TestWithParam<Param> {};

TEST_P(CollProcesses, EveryRankGetsTheRightResult) {
  auto [scenario, nranks, transport] = GetParam();
  runProcesses(scenario, nranks, transport);
}

std::string paramName(const ::testing::TestParamInfo<Param>& info) {
  std::string name = std::get<0>(info.param) + "_n" + std::to_string(std::get<1>(info.param)) +
                     "_" + std::get<2>(info.param);
  for (char& ch : name)
    if (ch == '-') ch = '_';
  return name;
}

INSTANTIATE_TEST_SUITE_P(
    Scenarios, CollProcesses,
    ::testing::Combine(::testing::Values("allreduce", "allgather", "broadcast", "alltoall", "ring"),
                       ::testing::Values(3, 4), ::testing::Values("shm", "socket")),
    paramName);

INSTANTIATE_TEST_SUITE_P(Everything, CollProcesses,
                         ::testing::Values(Param{"all", 2, "shm"}, Param{"all", 5, "socket"},
                                           Param{"all", 2, "cma"}, Param{"all", 3, "cma"},
                                           Param{"all", 3, "shmstream"},
                                           Param{"all", 2, "slotstream"},
                                           Param{"all", 2, "pagewalk"},
                                           Param{"all", 3, "slotstream"}),
                         paramName);

// Send/Recv groups under the default CMA policy (auto, which pulls some calls of its warm-up
// whichever way is faster): their calls are timed and pulled like single calls, and every
// result is right either way.
INSTANTIATE_TEST_SUITE_P(P2pGroupPulls, CollProcesses,
                         ::testing::Values(Param{"ring-repeated", 2, "cmapolicy"}), paramName);

// The exchange's fast path pulls where the way policy says so (LOOM_SHM_CMA_MODE=always).
INSTANTIATE_TEST_SUITE_P(ExchangeNowPulls, CollProcesses,
                         ::testing::Values(Param{"exchange-repeated", 2, "cma"}), paramName);

// Receives posted before sends on other host streams of one communicator, beside an AllReduce.
INSTANTIATE_TEST_SUITE_P(StreamP2p, CollProcesses,
                         ::testing::Combine(::testing::Values("streams-p2p"),
                                            ::testing::Values(2, 3),
                                            ::testing::Values("shm", "socket")),
                         paramName);

// A rank killed in the middle of a stream of AllReduces (small: the exchange's fast path over
// shared memory, recursive doubling over TCP; large: the ring, the general path): every other
// rank's call fails with an error that says a peer is gone, well before LOOM_TIMEOUT, instead
// of hanging. The same while every rank waits on host streams for receives posted before
// its sends (streams-until-error).
using KillParam = std::tuple<std::string, std::string>;  // scenario, transport
class PeerKilledDuringAllReduce : public ::testing::TestWithParam<KillParam> {};

TEST_P(PeerKilledDuringAllReduce, OthersFailInsteadOfHanging) {
  const auto& [scenario, transport] = GetParam();
  const int n = 4, victim = 2;
  loomUniqueId id = test::makeId();
  std::vector<std::string> env{"LOOM_SOCKET_IFNAME=lo", "LOOM_TIMEOUT=60"};
  if (transport == "socket") env.push_back("LOOM_TRANSPORT=socket");
  std::vector<test::RankProcess> procs;
  for (int r = 0; r < n; ++r)
    procs.push_back(
        spawnCollRank({scenario, std::to_string(n), std::to_string(r), test::idToHex(id)}, env));
  std::string victimOut;
  ASSERT_TRUE(test::waitForLine(procs[victim], "running", 60000, &victimOut)) << victimOut;
  ASSERT_EQ(kill(procs[victim].pid, SIGKILL), 0);
  EXPECT_EQ(test::waitRank(procs[victim], 30000), std::optional<int>(128 + SIGKILL));
  for (int r = 0; r < n; ++r) {
    if (r == victim) continue;
    std::string out;
    const std::optional<int> code = test::waitRank(procs[r], 45000, &out);
    ASSERT_TRUE(code.has_value()) << "rank " << r << " hung after rank " << victim
                                  << " was killed: " << out;
    EXPECT_EQ(*code, 10 + loomRemoteError) << "rank " << r << ": " << out;
    // "rank 2 is gone ... (did it exit or crash?)", or the same of a rank that failed first.
    EXPECT_NE(out.find("exit"), std::string::npos) << out;
  }
}

std::string killName(const ::testing::TestParamInfo<KillParam>& info) {
  std::string name = std::get<0>(info.param) + "_" + std::get<1>(info.param);
  for (char& ch : name)
    if (ch == '-') ch = '_';
  return name;
}

INSTANTIATE_TEST_SUITE_P(Transports, PeerKilledDuringAllReduce,
                         ::testing::Combine(::testing::Values("until-error", "until-error-large",
                                                              "streams-until-error"),
                                            ::testing::Values("shm", "socket")),
                         killName);

}  // namespace
}  // namespace loom::colltest
