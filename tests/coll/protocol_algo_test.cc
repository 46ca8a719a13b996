// Every protocol and algorithm choice, forced, on the same checks as the default sweeps: LL
// for large calls and Simple for small ones (which the defaults never pick), and the double
// binary tree for large AllReduces and 2 ranks (which the default never picks).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <string>
#include <vector>

#include "src/comm/comm.h"
#include "src/comm/comm_registry.h"
#include "src/plan/plan.h"
#include "src/plan/planner.h"
#include "src/plan/planner_state.h"
#include "tests/coll/coll_harness.h"
#include "tests/test_util.h"

namespace loom::colltest {
namespace {

struct Forced {
  const char* proto;  // LOOM_PROTO
  const char* algo;   // LOOM_ALGO ("" leaves the default)
};

class ForcedChoices : public ::testing::TestWithParam<std::tuple<Forced, int>> {};

TEST_P(ForcedChoices, AllReduceEveryTypeAndOp) {
  auto [forced, nranks] = GetParam();
  test::ScopedEnv proto("LOOM_PROTO", forced.proto);
  std::optional<test::ScopedEnv> algo;
  if (forced.algo[0] != '\0') algo.emplace("LOOM_ALGO", forced.algo);
  Matrix m;
  m.counts = {1, 7, 5003};  // 5003 x 8 bytes spans several LL slots
  m.salt = 700 + nranks;
  checkMatrix(nranks, Transport::kDefault, m);
}

TEST_P(ForcedChoices, OtherCollectivesFloat32AndInt8) {
  auto [forced, nranks] = GetParam();
  test::ScopedEnv proto("LOOM_PROTO", forced.proto);
  std::optional<test::ScopedEnv> algo;
  if (forced.algo[0] != '\0') algo.emplace("LOOM_ALGO", forced.algo);
  for (Kind kind :
       {Kind::kAllGather, Kind::kReduceScatter, Kind::kBroadcast, Kind::kReduce, Kind::kAlltoAll}) {
    Matrix m;
    m.kind = kind;
    m.types = {loomFloat32, loomInt8};
    m.ops = {Op::kSum, Op::kMax};
    m.counts = {1, 3001};
    m.salt = 800 + nranks;
    checkMatrix(nranks, Transport::kDefault, m);
  }
}

std::string forcedName(const ::testing::TestParamInfo<std::tuple<Forced, int>>& info) {
  const Forced& f = std::get<0>(info.param);
  return std::string(f.proto) + (f.algo[0] ? std::string("_") + f.algo : "") + "_" +
         std::to_string(std::get<1>(info.param)) + "ranks";
}

INSTANTIATE_TEST_SUITE_P(
    Forced, ForcedChoices,
    ::testing::Combine(::testing::Values(Forced{"ll", ""}, Forced{"simple", ""},
                                         Forced{"ll", "tree"}, Forced{"simple", "tree"},
                                         Forced{"ll", "ring"}, Forced{"simple", "ring"},
                                         Forced{"simple", "exchange"}, Forced{"ll", "exchange"},
                                         Forced{"simple", "doubling"}, Forced{"ll", "doubling"}),
                       ::testing::Values(2, 3, 7)),
    forcedName);

// Ranks that each fold the same inputs must get the same bits even where the op is not
// symmetric: max/min of +0 and -0, sums of NaNs with different payloads. Every algorithm, an
// even and an odd number of ranks.
TEST(AlgorithmsAgree, EveryRankGetsTheSameBits) {
  for (int nranks : {2, 3, 5}) {
    for (const char* algo : {"exchange", "ring", "tree", "doubling"}) {
      test::ScopedEnv force("LOOM_ALGO", algo);
      CommSet comms(nranks);
      ASSERT_TRUE(comms.ok());
      std::vector<std::array<float, 4>> inputs(nranks), out(nranks);
      for (int r = 0; r < nranks; ++r) {
        const uint32_t nan = 0x7fc00001 + r;  // a different payload per rank
        float payload;
        std::memcpy(&payload, &nan, 4);
        inputs[r] = {r % 2 ? -0.0f : +0.0f, r % 2 ? +0.0f : -0.0f, payload, 1.0f + r};
      }
      for (loomRedOp_t op : {loomMax, loomMin, loomSum}) {
        test::runThreads(nranks, [&](int r) {
          out[r].fill(42.0f);
          ASSERT_LOOM_OK(loomAllReduce(inputs[r].data(), out[r].data(), 4, loomFloat32, op,
                                       comms[r], nullptr));
        });
        for (int r = 1; r < nranks; ++r)
          EXPECT_EQ(std::memcmp(out[0].data(), out[r].data(), sizeof(out[0])), 0)
              << algo << " op " << op << " rank " << r << " of " << nranks;
        EXPECT_EQ(out[0][3], op == loomSum   ? nranks * (nranks + 1) / 2.0f
                             : op == loomMax ? static_cast<float>(nranks)
                                             : 1.0f)
            << algo << " op " << op;
      }
    }
  }
}

// The default AllReduce for small calls: recursive doubling where every link is a network link
// and there are more than 2 ranks (while steps x bytes <= LOOM_DOUBLING_THRESHOLD), the
// exchange over shared memory and for 2 ranks.
TEST(DefaultChoice, DoublingOverTheNetworkOnly) {
  auto algorithm = [](const CommSet& comms, size_t bytes) {
    return plannerState(*findComm(comms[0])).choose(CollKind::kAllReduce, bytes).algorithm;
  };
  {
    CommSet tcp(4, Transport::kShmDisabled);
    ASSERT_TRUE(tcp.ok());
    EXPECT_EQ(algorithm(tcp, 8), Algorithm::kDoubling);
    EXPECT_EQ(algorithm(tcp, 512 << 10), Algorithm::kDoubling);  // 2 rounds x 512 KiB
    EXPECT_NE(algorithm(tcp, (512 << 10) + 1), Algorithm::kDoubling);
  }
  {
    CommSet socket(3, Transport::kSocket);  // 1 round + the extra rank in and out: 3 steps
    ASSERT_TRUE(socket.ok());
    EXPECT_EQ(algorithm(socket, (1 << 20) / 3), Algorithm::kDoubling);
    EXPECT_NE(algorithm(socket, (1 << 20) / 3 + 1), Algorithm::kDoubling);
  }
  {
    CommSet shm(4);
    ASSERT_TRUE(shm.ok());
    EXPECT_EQ(algorithm(shm, 8), Algorithm::kExchange);
  }
  {
    CommSet pair(2, Transport::kShmDisabled);
    ASSERT_TRUE(pair.ok());
    EXPECT_EQ(algorithm(pair, 8), Algorithm::kExchange);
  }
  {
    test::ScopedEnv never("LOOM_DOUBLING_THRESHOLD", "0");
    CommSet tcp(4, Transport::kShmDisabled);
    ASSERT_TRUE(tcp.ok());
    EXPECT_EQ(algorithm(tcp, 8), Algorithm::kExchange);
  }
}

// The exchange's bound on (n-1)^2 x bytes: 256 KiB between threads of one process (128 KiB
// between processes of one host, planner_state.cc), LOOM_EXCHANGE_THRESHOLD where it is set.
TEST(DefaultChoice, ExchangeBoundBetweenThreads) {
  auto algorithm = [](const CommSet& comms, size_t bytes) {
    return plannerState(*findComm(comms[0])).choose(CollKind::kAllReduce, bytes).algorithm;
  };
  {
    CommSet pair(2);
    ASSERT_TRUE(pair.ok());
    EXPECT_FALSE(plannerState(*findComm(pair[0])).processesShareMemory());
    EXPECT_EQ(algorithm(pair, 256 << 10), Algorithm::kExchange);
    EXPECT_NE(algorithm(pair, (256 << 10) + 1), Algorithm::kExchange);
  }
  {
    test::ScopedEnv bound("LOOM_EXCHANGE_THRESHOLD", "65536");
    CommSet three(3);
    ASSERT_TRUE(three.ok());
    EXPECT_EQ(algorithm(three, 16 << 10), Algorithm::kExchange);  // 2^2 x 16 KiB
    EXPECT_NE(algorithm(three, (16 << 10) + 1), Algorithm::kExchange);
  }
}

// NCCL users write NCCL_PROTO=LL and NCCL_ALGO=Ring: the overrides are case-insensitive.
TEST(ForcedChoices, OverridesIgnoreCase) {
  test::ScopedEnv proto("LOOM_PROTO", "LL");
  test::ScopedEnv algo("LOOM_ALGO", "Exchange");
  Matrix m;
  m.types = {loomFloat32};
  m.ops = {Op::kSum};
  m.counts = {1, 1000};
  m.salt = 901;
  checkMatrix(3, Transport::kDefault, m);
}

// Streaming stores start where a call's working set (about 6x its larger buffer per rank on the
// host) outgrows the last-level cache, never below 4 MiB; LOOM_STREAM_STORE_THRESHOLD overrides.
// Threads of one process read each other's buffers directly, so the exchange between them is
// one step, not pieces.
TEST(DefaultChoice, StreamStoresWhereTheCallOutgrowsTheCache) {
  long cache = sysconf(_SC_LEVEL3_CACHE_SIZE);
  if (cache <= 0) cache = sysconf(_SC_LEVEL2_CACHE_SIZE);
  const size_t expected = std::max<size_t>(size_t{4} << 20, cache > 0 ? cache / 12 : 0);
  {
    CommSet pair(2);
    ASSERT_TRUE(pair.ok());
    const PlannerState& state = plannerState(*findComm(pair[0]));
    EXPECT_EQ(state.streamStoreMinBytes(), expected) << "last-level cache " << cache;
    EXPECT_FALSE(state.processesShareMemory());
  }
  for (const char* value : {"0", "12345"}) {
    test::ScopedEnv env("LOOM_STREAM_STORE_THRESHOLD", value);
    CommSet pair(2);
    ASSERT_TRUE(pair.ok());
    EXPECT_EQ(plannerState(*findComm(pair[0])).streamStoreMinBytes(), std::stoul(value));
  }
}

// The exchange stages its sends only between processes: threads of one process read the
// sender's buffer in place (AllGather), or fold from the slot the in-place send copies into,
// so a staging copy would be one copy too many.
TEST(ForcedChoicesPlan, ExchangeStagesNothingBetweenThreads) {
  test::ScopedEnv force("LOOM_ALGO", "exchange");
  constexpr int kRanks = 3;
  constexpr size_t kCount = 1 << 16;
  CommSet comms(kRanks);
  ASSERT_TRUE(comms.ok());
  std::vector<std::vector<float>> in(kRanks, std::vector<float>(kCount, 1.0f));
  std::vector<std::vector<float>> out(kRanks, std::vector<float>(kCount * kRanks));
  test::runThreads(kRanks, [&](int r) {  // makes the connections the plans bind to
    ASSERT_LOOM_OK(
        loomAllGather(in[r].data(), out[r].data(), kCount, loomFloat32, comms[r], nullptr));
    ASSERT_LOOM_OK(
        loomAllReduce(in[r].data(), in[r].data(), kCount, loomFloat32, loomSum, comms[r], nullptr));
  });
  for (CollKind kind : {CollKind::kAllGather, CollKind::kAllReduce}) {
    CollOp op;
    op.kind = kind;
    op.comm = findComm(comms[0]);
    op.sendbuff = in[0].data();
    op.recvbuff = kind == CollKind::kAllReduce ? in[0].data() : out[0].data();  // in place
    op.count = kCount;
    choosePlan(op);
    ASSERT_EQ(op.algorithm, Algorithm::kExchange) << collName(kind);
    Plan plan;
    buildPlan(op, 1, plan);
    ASSERT_FALSE(plan.tasks.empty());
    for (const TaskPlan& t : plan.tasks) EXPECT_FALSE(t.stagesSends) << t.label.str();
  }
}

// The communicator reads its overrides once, at init: a value it does not know fails init
// with a message naming the variable, not some later call.
TEST(ForcedChoicesErrors, UnknownProtocolOrAlgorithmFailsInit) {
  const std::pair<const char*, const char*> cases[] = {
      {"LOOM_PROTO", "carrier-pigeon"},   {"LOOM_ALGO", "telepathy"},
      {"LOOM_LL_THRESHOLD", "-5"},        {"LOOM_EXCHANGE_THRESHOLD", "-1"},
      {"LOOM_DOUBLING_THRESHOLD", "-3"},  {"LOOM_STREAM_STORE_THRESHOLD", "-2"},
      {"LOOM_SHM_CMA_MODE", "sometimes"}, {"LOOM_SHM_STREAM_SLOTS", "yes"}};
  for (const auto& [name, value] : cases) {
    test::ScopedEnv env(name, value);
    loomComm_t comms[2] = {};
    int devices[2] = {LOOM_DEVICE_CPU, LOOM_DEVICE_CPU};
    EXPECT_EQ(loomCommInitAll(comms, 2, devices), loomInvalidArgument) << name;
    EXPECT_NE(std::string(loomGetLastError(nullptr)).find(name), std::string::npos)
        << loomGetLastError(nullptr);
  }
}

}  // namespace
}  // namespace loom::colltest
