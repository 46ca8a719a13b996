// Every bad input to the public C API returns the documented result code with a message in
// loomGetLastError, and never crashes. Only loom.h is used, as an application would, plus the
// test helpers.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "loom/loom.h"
#include "tests/test_util.h"

namespace loom {
namespace {

using test::makeId;
using test::ScopedEnv;

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// The calling thread's last error, which must be set after any failure.
std::string lastError() {
  const char* msg = loomGetLastError(nullptr);
  EXPECT_NE(msg, nullptr);
  return msg != nullptr ? msg : "";
}

// Checks that `result` is `expected` and that the thread's last error is not empty; returns it.
std::string expectFailure(loomResult_t result, loomResult_t expected, const char* what) {
  EXPECT_EQ(result, expected) << what << ": " << loomGetErrorString(result) << ": "
                              << loomGetLastError(nullptr);
  std::string msg = lastError();
  EXPECT_FALSE(msg.empty()) << what << " left no message";
  return msg;
}

// A handle value that is never a live communicator, to check *comm is overwritten.
loomComm_t sentinel() { return reinterpret_cast<loomComm_t>(0x5a5a); }

loomUniqueId zeroId() {
  loomUniqueId id;
  std::memset(&id, 0, sizeof(id));
  return id;
}

loomUniqueId randomId(unsigned seed) {
  std::mt19937 rng(seed);
  loomUniqueId id;
  for (char& c : id.internal) c = static_cast<char>(rng());
  return id;
}

// Inits rank 0 of 1 with `config`, expecting `expected`; destroys a communicator that should
// not have been created.
std::string initWithConfig(loomConfig_t config, loomResult_t expected, const char* what) {
  loomComm_t comm = sentinel();
  loomResult_t r = loomCommInitRankConfig(&comm, 1, makeId(), 0, &config);
  std::string msg = expectFailure(r, expected, what);
  EXPECT_EQ(comm, nullptr) << what;
  if (r == loomSuccess && comm != nullptr && comm != sentinel()) loomCommDestroy(comm);
  return msg;
}

// ---- simple getters -----------------------------------------------------------------------

TEST(BadInput, NullOutPointersOfGetters) {
  expectFailure(loomGetVersion(nullptr), loomInvalidArgument, "loomGetVersion(NULL)");
  expectFailure(loomGetUniqueId(nullptr), loomInvalidArgument, "loomGetUniqueId(NULL)");
  int version = 0;
  EXPECT_EQ(loomGetVersion(&version), loomSuccess);
  EXPECT_EQ(version, LOOM_VERSION_CODE);
}

TEST(BadInput, ErrorStrings) {
  std::set<std::string> seen;
  for (int code = 0; code < loomNumResults; ++code) {
    const char* s = loomGetErrorString(static_cast<loomResult_t>(code));
    ASSERT_NE(s, nullptr) << code;
    EXPECT_GT(std::strlen(s), 0u) << code;
    EXPECT_TRUE(seen.insert(s).second) << "code " << code << " repeats '" << s << "'";
  }
  EXPECT_EQ(seen.size(), 9u);
  for (int code : {static_cast<int>(loomNumResults), 42, -1}) {
    const char* s = loomGetErrorString(static_cast<loomResult_t>(code));
    ASSERT_NE(s, nullptr) << code;
    EXPECT_GT(std::strlen(s), 0u);
  }
  EXPECT_NE(loomGetLastError(nullptr), nullptr);
}

// ---- loomCommInitRank ---------------------------------------------------------------------

TEST(BadInput, InitRankNullComm) {
  std::string msg =
      expectFailure(loomCommInitRank(nullptr, 1, zeroId(), 0), loomInvalidArgument, "comm NULL");
  EXPECT_TRUE(contains(msg, "comm")) << msg;
}

TEST(BadInput, InitRankBadNranksAndRank) {
  struct Case {
    int nranks, rank;
    const char* word;
  };
  for (const Case& c : {Case{0, 0, "nranks"}, Case{-3, 0, "nranks"}, Case{4, -1, "rank"},
                        Case{4, 4, "rank"}, Case{1, 1, "rank"}}) {
    loomComm_t comm = sentinel();
    std::string msg = expectFailure(loomCommInitRank(&comm, c.nranks, makeId(), c.rank),
                                    loomInvalidArgument, c.word);
    EXPECT_EQ(comm, nullptr) << "nranks " << c.nranks << " rank " << c.rank;
    EXPECT_TRUE(contains(msg, c.word)) << msg;
  }
}

TEST(BadInput, InitRankGarbageId) {
  std::vector<loomUniqueId> ids = {zeroId(), randomId(1), randomId(2), randomId(3)};
  for (size_t i = 0; i < ids.size(); ++i) {
    loomComm_t comm = sentinel();
    expectFailure(loomCommInitRank(&comm, 1, ids[i], 0), loomInvalidArgument, "garbage id");
    EXPECT_EQ(comm, nullptr) << "id " << i;
  }
  // A real id with one byte of its header changed is garbage too.
  loomUniqueId id = makeId();
  id.internal[1] ^= 0x10;
  loomComm_t comm = sentinel();
  expectFailure(loomCommInitRank(&comm, 1, id, 0), loomInvalidArgument, "corrupted id");
  EXPECT_EQ(comm, nullptr);
}

// ---- loomCommInitRankConfig ---------------------------------------------------------------

TEST(BadInput, ConfigBadHeader) {
  loomConfig_t config = LOOM_CONFIG_INITIALIZER;
  config.magic = 0x12345678;
  EXPECT_TRUE(contains(initWithConfig(config, loomInvalidArgument, "bad magic"), "magic"));

  for (unsigned version : {0u, 99u}) {
    config = LOOM_CONFIG_INITIALIZER;
    config.version = version;
    EXPECT_TRUE(contains(initWithConfig(config, loomInvalidArgument, "bad version"), "version"))
        << version;
  }

  for (size_t size : {size_t{0}, size_t{8}, sizeof(loomConfig_t) - 1}) {
    config = LOOM_CONFIG_INITIALIZER;
    config.size = size;
    EXPECT_TRUE(contains(initWithConfig(config, loomInvalidArgument, "small size"), "size"))
        << size;
  }
}

TEST(BadInput, ConfigBadFields) {
  loomConfig_t config = LOOM_CONFIG_INITIALIZER;
  config.blocking = 2;
  EXPECT_TRUE(contains(initWithConfig(config, loomInvalidArgument, "blocking 2"), "blocking"));

  config = LOOM_CONFIG_INITIALIZER;
  config.blocking = -1;
  initWithConfig(config, loomInvalidArgument, "blocking -1");

  config = LOOM_CONFIG_INITIALIZER;
  config.timeoutMs = -1;
  EXPECT_TRUE(contains(initWithConfig(config, loomInvalidArgument, "timeoutMs -1"), "timeoutMs"));

  config = LOOM_CONFIG_INITIALIZER;
  config.device = -5;
  EXPECT_TRUE(contains(initWithConfig(config, loomInvalidArgument, "device -5"), "device"));

  config = LOOM_CONFIG_INITIALIZER;
  config.name = "";
  EXPECT_TRUE(contains(initWithConfig(config, loomInvalidArgument, "name \"\""), "name"));

  std::string longName(300, 'n');
  config = LOOM_CONFIG_INITIALIZER;
  config.name = longName.c_str();
  initWithConfig(config, loomInvalidArgument, "name of 300 characters");
}

TEST(BadInput, ConfigCudaDeviceWithoutGpu) {
  loomConfig_t config = LOOM_CONFIG_INITIALIZER;
  config.device = 0;
#if defined(LOOM_HAVE_CUDA) && LOOM_HAVE_CUDA
  // Built with CUDA, on a machine without a GPU: the ordinal is out of range.
  std::string msg = initWithConfig(config, loomInvalidArgument, "device 0 without a GPU");
#else
  // Built without CUDA: asking for a GPU is a usage error, whatever the machine has.
  std::string msg = initWithConfig(config, loomInvalidUsage, "device 0 without CUDA");
#endif
  EXPECT_TRUE(contains(msg, "CUDA")) << msg;
}

TEST(BadInput, MalformedTimeoutEnvironment) {
  ScopedEnv env("LOOM_TIMEOUT", "abc");
  loomComm_t comm = sentinel();
  std::string msg =
      expectFailure(loomCommInitRank(&comm, 1, makeId(), 0), loomInvalidArgument, "LOOM_TIMEOUT");
  EXPECT_TRUE(contains(msg, "LOOM_TIMEOUT")) << msg;
  EXPECT_EQ(comm, nullptr);
}

TEST(BadInput, NegativeTimeoutEnvironment) {
  ScopedEnv env("LOOM_TIMEOUT", "-5");
  loomComm_t comm = sentinel();
  std::string msg =
      expectFailure(loomCommInitRank(&comm, 1, makeId(), 0), loomInvalidArgument, "LOOM_TIMEOUT");
  EXPECT_TRUE(contains(msg, "LOOM_TIMEOUT")) << msg;
  EXPECT_EQ(comm, nullptr);
}

TEST(BadInput, MalformedCommIdEnvironment) {
  for (const char* bad : {"nonsense", "host:99999", "127.0.0.1:0", "::1:5000"}) {
    ScopedEnv env("LOOM_COMM_ID", bad);
    loomUniqueId id;
    std::string msg = expectFailure(loomGetUniqueId(&id), loomInvalidArgument, bad);
    EXPECT_TRUE(contains(msg, bad)) << msg;
  }
}

// ---- calls on a communicator --------------------------------------------------------------

TEST(BadInput, CallsOnALiveThenDeadCommunicator) {
  loomComm_t comm = nullptr;
  ASSERT_LOOM_OK(loomCommInitRank(&comm, 1, makeId(), 0));
  ASSERT_NE(comm, nullptr);

  // Live: good calls work, bad arguments are refused.
  int count = -1, rank = -1, device = 7;
  loomResult_t async = loomInternalError;
  EXPECT_EQ(loomCommCount(comm, &count), loomSuccess);
  EXPECT_EQ(count, 1);
  EXPECT_EQ(loomCommUserRank(comm, &rank), loomSuccess);
  EXPECT_EQ(rank, 0);
  EXPECT_EQ(loomCommDevice(comm, &device), loomSuccess);
  EXPECT_EQ(device, LOOM_DEVICE_CPU);
  EXPECT_EQ(loomCommGetAsyncError(comm, &async), loomSuccess);
  EXPECT_EQ(async, loomSuccess);

  std::string msg = expectFailure(loomCommSplit(comm, 0, 0, nullptr, nullptr), loomInvalidArgument,
                                  "split newcomm NULL");
  EXPECT_TRUE(contains(msg, "newcomm")) << msg;
  // The communicator's own last error says the same.
  EXPECT_TRUE(contains(loomGetLastError(comm), "newcomm")) << loomGetLastError(comm);

  loomComm_t child = sentinel();
  msg = expectFailure(loomCommSplit(comm, -5, 0, &child, nullptr), loomInvalidArgument,
                      "split color -5");
  EXPECT_TRUE(contains(msg, "color")) << msg;
  EXPECT_EQ(child, nullptr);

  expectFailure(loomCommCount(comm, nullptr), loomInvalidArgument, "count NULL");
  expectFailure(loomCommUserRank(comm, nullptr), loomInvalidArgument, "rank NULL");
  expectFailure(loomCommDevice(comm, nullptr), loomInvalidArgument, "device NULL");
  expectFailure(loomCommGetAsyncError(comm, nullptr), loomInvalidArgument, "asyncError NULL");

  // The failures above did not break it.
  EXPECT_EQ(loomCommGetAsyncError(comm, &async), loomSuccess);
  EXPECT_EQ(async, loomSuccess);

  // Finalized: only loomCommDestroy may follow.
  ASSERT_EQ(loomCommFinalize(comm), loomSuccess) << loomGetLastError(comm);
  expectFailure(loomCommFinalize(comm), loomInvalidUsage, "second finalize");
  child = sentinel();
  expectFailure(loomCommSplit(comm, 0, 0, &child, nullptr), loomInvalidUsage,
                "split after finalize");
  EXPECT_EQ(child, nullptr);

  EXPECT_EQ(loomCommDestroy(comm), loomSuccess) << loomGetLastError(nullptr);

  // Destroyed: the handle is no longer a communicator.
  count = rank = -1;
  expectFailure(loomCommCount(comm, &count), loomInvalidArgument, "count after destroy");
  EXPECT_EQ(count, -1);
  expectFailure(loomCommUserRank(comm, &rank), loomInvalidArgument, "rank after destroy");
  expectFailure(loomCommDevice(comm, &device), loomInvalidArgument, "device after destroy");
  child = sentinel();
  expectFailure(loomCommSplit(comm, 0, 0, &child, nullptr), loomInvalidArgument,
                "split after destroy");
  EXPECT_EQ(child, nullptr);
  expectFailure(loomCommFinalize(comm), loomInvalidArgument, "finalize after destroy");
  expectFailure(loomCommDestroy(comm), loomInvalidArgument, "second destroy");
  expectFailure(loomCommGetAsyncError(comm, &async), loomInvalidArgument,
                "async error after destroy");
  EXPECT_NE(loomGetLastError(comm), nullptr);
}

TEST(BadInput, NullAndMadeUpHandles) {
  int count = 0;
  expectFailure(loomCommDestroy(nullptr), loomInvalidArgument, "destroy NULL");
  expectFailure(loomCommFinalize(nullptr), loomInvalidArgument, "finalize NULL");
  expectFailure(loomCommCount(nullptr, &count), loomInvalidArgument, "count NULL comm");
  EXPECT_EQ(loomCommAbort(nullptr), loomSuccess);  // as NCCL: aborting nothing succeeds

  loomComm_t madeUp = reinterpret_cast<loomComm_t>(0x1234);
  loomResult_t async;
  loomComm_t child = sentinel();
  expectFailure(loomCommCount(madeUp, &count), loomInvalidArgument, "count made-up");
  expectFailure(loomCommGetAsyncError(madeUp, &async), loomInvalidArgument, "async made-up");
  expectFailure(loomCommSplit(madeUp, 0, 0, &child, nullptr), loomInvalidArgument, "split made-up");
  expectFailure(loomCommFinalize(madeUp), loomInvalidArgument, "finalize made-up");
  expectFailure(loomCommDestroy(madeUp), loomInvalidArgument, "destroy made-up");
  expectFailure(loomCommAbort(madeUp), loomInvalidArgument, "abort made-up");
  EXPECT_NE(loomGetLastError(madeUp), nullptr);
}

// ---- ranks that disagree ------------------------------------------------------------------

// Runs rank `ranks[i]` of `nranks[i]` on thread i with one id and a 5 s deadline; returns each
// thread's result and message.
struct InitOutcome {
  loomResult_t result = loomInternalError;
  std::string message;
  loomComm_t comm = nullptr;
};
std::vector<InitOutcome> initDisagreeing(const std::vector<int>& nranks,
                                         const std::vector<int>& ranks) {
  loomUniqueId id = makeId();
  std::vector<InitOutcome> out(nranks.size());
  test::runThreads(static_cast<int>(nranks.size()), [&](int t) {
    loomConfig_t config = LOOM_CONFIG_INITIALIZER;
    config.timeoutMs = 5000;
    out[t].comm = sentinel();
    out[t].result = loomCommInitRankConfig(&out[t].comm, nranks[t], id, ranks[t], &config);
    out[t].message = loomGetLastError(nullptr);
  });
  for (InitOutcome& o : out) {
    if (o.result == loomSuccess && o.comm != nullptr) loomCommDestroy(o.comm);
  }
  return out;
}

TEST(BadInput, MismatchedNranks) {
  std::vector<InitOutcome> out = initDisagreeing({2, 3}, {0, 1});
  for (size_t t = 0; t < out.size(); ++t) {
    EXPECT_EQ(out[t].result, loomInvalidArgument) << "thread " << t << ": " << out[t].message;
    EXPECT_TRUE(contains(out[t].message, "nranks")) << out[t].message;
    EXPECT_EQ(out[t].comm, nullptr);
  }
}

TEST(BadInput, DuplicateRank) {
  std::vector<InitOutcome> out = initDisagreeing({2, 2}, {0, 0});
  for (size_t t = 0; t < out.size(); ++t) {
    EXPECT_EQ(out[t].result, loomInvalidArgument) << "thread " << t << ": " << out[t].message;
    EXPECT_TRUE(contains(out[t].message, "rank 0")) << out[t].message;
    EXPECT_EQ(out[t].comm, nullptr);
  }
}

// ---- loomCommInitAll ----------------------------------------------------------------------

TEST(BadInput, InitAllBadArguments) {
  expectFailure(loomCommInitAll(nullptr, 2, nullptr), loomInvalidArgument, "comms NULL");
  loomComm_t comms[2] = {sentinel(), sentinel()};
  expectFailure(loomCommInitAll(comms, 0, nullptr), loomInvalidArgument, "ndev 0");
  expectFailure(loomCommInitAll(comms, -1, nullptr), loomInvalidArgument, "ndev -1");
  const int devlist[2] = {LOOM_DEVICE_CPU, -7};
  std::string msg =
      expectFailure(loomCommInitAll(comms, 2, devlist), loomInvalidArgument, "device -7");
  EXPECT_TRUE(contains(msg, "-7")) << msg;
  EXPECT_EQ(comms[0], nullptr);
  EXPECT_EQ(comms[1], nullptr);
}

}  // namespace
}  // namespace loom
