// Bad arguments to the collectives, point-to-point, PreMulSum ops and groups return
// loomInvalidArgument (or loomInvalidUsage) with a message naming the argument, never crash,
// and leave the communicator usable.
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <string>

#include "tests/coll/coll_harness.h"

namespace loom::colltest {
namespace {

// Checks the code and that both the communicator's and the thread's last error mention `word`.
void expectBad(loomResult_t got, loomComm_t comm, const char* call, const std::string& word,
               loomResult_t want = loomInvalidArgument) {
  EXPECT_EQ(got, want) << call << ": " << loomGetLastError(comm);
  std::string threadMsg = loomGetLastError(nullptr);
  EXPECT_NE(threadMsg.find(word), std::string::npos)
      << call << ": the message should name " << word << ": " << threadMsg;
  if (comm != nullptr) {
    std::string commMsg = loomGetLastError(comm);
    EXPECT_FALSE(commMsg.empty()) << call << ": no last error on the communicator";
  }
}

class CollBadInput : public ::testing::Test {
 protected:
  CollBadInput() : comms_(2) {}
  void TearDown() override {
    // After all that, a correct AllReduce still works on both ranks.
    Case c;
    c.type = loomInt32;
    c.count = 9;
    if (comms_.ok()) {
      EXPECT_EQ(runCase(comms_, c, Style::kThreads).failure, "");
    }
  }
  loomComm_t c0() const { return comms_[0]; }

  CommSet comms_;
  float a_[16] = {};
  float b_[16] = {};
};

TEST_F(CollBadInput, NullBuffersWithCount) {
  loomComm_t c = c0();
  expectBad(loomAllReduce(nullptr, b_, 4, loomFloat32, loomSum, c, nullptr), c, "AllReduce",
            "sendbuff");
  expectBad(loomAllReduce(a_, nullptr, 4, loomFloat32, loomSum, c, nullptr), c, "AllReduce",
            "recvbuff");
  expectBad(loomBroadcast(nullptr, b_, 4, loomFloat32, 0, c, nullptr), c, "Broadcast (root)",
            "sendbuff");
  expectBad(loomBroadcast(a_, nullptr, 4, loomFloat32, 1, c, nullptr), c, "Broadcast", "recvbuff");
  expectBad(loomReduce(nullptr, b_, 4, loomFloat32, loomSum, 1, c, nullptr), c, "Reduce",
            "sendbuff");
  expectBad(loomReduce(a_, nullptr, 4, loomFloat32, loomSum, 0, c, nullptr), c, "Reduce (root)",
            "recvbuff");
  expectBad(loomAllGather(nullptr, b_, 4, loomFloat32, c, nullptr), c, "AllGather", "sendbuff");
  expectBad(loomAllGather(a_, nullptr, 4, loomFloat32, c, nullptr), c, "AllGather", "recvbuff");
  expectBad(loomReduceScatter(nullptr, b_, 4, loomFloat32, loomSum, c, nullptr), c, "ReduceScatter",
            "sendbuff");
  expectBad(loomReduceScatter(a_, nullptr, 4, loomFloat32, loomSum, c, nullptr), c, "ReduceScatter",
            "recvbuff");
  expectBad(loomAlltoAll(nullptr, b_, 4, loomFloat32, c, nullptr), c, "AlltoAll", "sendbuff");
  expectBad(loomAlltoAll(a_, nullptr, 4, loomFloat32, c, nullptr), c, "AlltoAll", "recvbuff");
  expectBad(loomSend(nullptr, 4, loomFloat32, 1, c, nullptr), c, "Send", "sendbuff");
  expectBad(loomRecv(nullptr, 4, loomFloat32, 1, c, nullptr), c, "Recv", "recvbuff");
}

TEST_F(CollBadInput, InvalidDatatype) {
  loomComm_t c = c0();
  auto bad = static_cast<loomDataType_t>(99);
  expectBad(loomAllReduce(a_, b_, 4, bad, loomSum, c, nullptr), c, "AllReduce", "datatype");
  expectBad(loomBroadcast(a_, b_, 4, bad, 0, c, nullptr), c, "Broadcast", "datatype");
  expectBad(loomReduce(a_, b_, 4, bad, loomSum, 0, c, nullptr), c, "Reduce", "datatype");
  expectBad(loomAllGather(a_, b_, 4, bad, c, nullptr), c, "AllGather", "datatype");
  expectBad(loomReduceScatter(a_, b_, 4, bad, loomSum, c, nullptr), c, "ReduceScatter", "datatype");
  expectBad(loomAlltoAll(a_, b_, 4, bad, c, nullptr), c, "AlltoAll", "datatype");
  expectBad(loomSend(a_, 4, bad, 1, c, nullptr), c, "Send", "datatype");
  expectBad(loomRecv(b_, 4, static_cast<loomDataType_t>(-1), 1, c, nullptr), c, "Recv", "datatype");
}

TEST_F(CollBadInput, InvalidOp) {
  loomComm_t c = c0();
  for (int op : {77, -1, static_cast<int>(loomNumOps)}) {
    auto bad = static_cast<loomRedOp_t>(op);
    expectBad(loomAllReduce(a_, b_, 4, loomFloat32, bad, c, nullptr), c, "AllReduce", "op");
    expectBad(loomReduce(a_, b_, 4, loomFloat32, bad, 0, c, nullptr), c, "Reduce", "op");
    expectBad(loomReduceScatter(a_, b_, 2, loomFloat32, bad, c, nullptr), c, "ReduceScatter", "op");
  }
}

TEST_F(CollBadInput, RootAndPeerOutOfRange) {
  loomComm_t c = c0();
  for (int bad : {-1, 2, 1000}) {
    expectBad(loomBroadcast(a_, b_, 4, loomFloat32, bad, c, nullptr), c, "Broadcast", "root");
    expectBad(loomReduce(a_, b_, 4, loomFloat32, loomSum, bad, c, nullptr), c, "Reduce", "root");
    expectBad(loomSend(a_, 4, loomFloat32, bad, c, nullptr), c, "Send", "peer");
    expectBad(loomRecv(b_, 4, loomFloat32, bad, c, nullptr), c, "Recv", "peer");
  }
}

TEST_F(CollBadInput, NullCommunicator) {
  EXPECT_EQ(loomAllReduce(a_, b_, 4, loomFloat32, loomSum, nullptr, nullptr), loomInvalidArgument);
  EXPECT_STRNE(loomGetLastError(nullptr), "");
  EXPECT_EQ(loomSend(a_, 4, loomFloat32, 0, nullptr, nullptr), loomInvalidArgument);
  EXPECT_STRNE(loomGetLastError(nullptr), "");
}

TEST_F(CollBadInput, StreamOfAnotherCommunicator) {
  loomComm_t c = c0();
  loomStream_t other = comms_.stream(1);
  expectBad(loomAllReduce(a_, b_, 4, loomFloat32, loomSum, c, other), c, "AllReduce", "stream");
  expectBad(loomAllGather(a_, b_, 4, loomFloat32, c, other), c, "AllGather", "stream");
  expectBad(loomSend(a_, 4, loomFloat32, 1, c, other), c, "Send", "stream");
}

TEST_F(CollBadInput, DestroyedOrForeignPreMulSumOp) {
  loomComm_t c = c0();
  float two = 2;
  loomRedOp_t op;
  ASSERT_LOOM_OK(loomRedOpCreatePreMulSum(&op, &two, loomFloat32, loomScalarHostImmediate, c));
  // Made for float32: another datatype is refused.
  expectBad(loomAllReduce(a_, b_, 4, loomInt32, op, c, nullptr), c, "AllReduce", "datatype");
  // Made on rank 0's communicator only: rank 1's does not know it.
  expectBad(loomAllReduce(a_, b_, 4, loomFloat32, op, comms_[1], nullptr), comms_[1],
            "AllReduce on another communicator", "op");
  ASSERT_LOOM_OK(loomRedOpDestroy(op, c));
  expectBad(loomAllReduce(a_, b_, 4, loomFloat32, op, c, nullptr), c, "AllReduce", "op");
  expectBad(loomRedOpDestroy(op, c), c, "loomRedOpDestroy twice", "op");
  expectBad(loomRedOpDestroy(loomSum, c), c, "loomRedOpDestroy(loomSum)", "op");
  expectBad(loomRedOpCreatePreMulSum(&op, nullptr, loomFloat32, loomScalarHostImmediate, c), c,
            "PreMulSum without scalar", "scalar");
  expectBad(loomRedOpCreatePreMulSum(&op, &two, static_cast<loomDataType_t>(99),
                                     loomScalarHostImmediate, c),
            c, "PreMulSum bad type", "datatype");
}

TEST_F(CollBadInput, GroupEndWithoutStart) {
  EXPECT_EQ(loomGroupEnd(), loomInvalidUsage);
  EXPECT_STRNE(loomGetLastError(nullptr), "");
  // Balanced groups (even empty ones) are fine afterwards.
  ASSERT_LOOM_OK(loomGroupStart());
  ASSERT_LOOM_OK(loomGroupEnd());
}

TEST_F(CollBadInput, BadCallInsideGroupIsReportedAtTheCall) {
  loomComm_t c = c0();
  ASSERT_LOOM_OK(loomGroupStart());
  expectBad(loomAllReduce(nullptr, b_, 4, loomFloat32, loomSum, c, nullptr), c, "AllReduce",
            "sendbuff");
  loomResult_t end = loomGroupEnd();
  EXPECT_TRUE(end == loomSuccess || end == loomInvalidArgument) << end;
}

TEST_F(CollBadInput, CountTooLargeForMemory) {
  loomComm_t c = c0();
  expectBad(loomAllGather(a_, b_, SIZE_MAX / 2, loomFloat32, c, nullptr), c, "AllGather", "count");
}

TEST_F(CollBadInput, DestroyedStreamAndNullOutputs) {
  loomStream_t s = nullptr;
  ASSERT_LOOM_OK(loomStreamCreate(c0(), &s));
  ASSERT_LOOM_OK(loomStreamDestroy(s));
  EXPECT_EQ(loomStreamQuery(s), loomInvalidArgument);
  EXPECT_STRNE(loomGetLastError(nullptr), "");
  EXPECT_EQ(loomStreamCreate(c0(), nullptr), loomInvalidArgument);
  EXPECT_EQ(loomEventCreate(nullptr), loomInvalidArgument);
}

// DESIGN: a rank that calls a different count, type or root than its peers gets a clear error,
// not corrupted data. So at least one rank must fail, and a rank that reports success must
// hold the right result (`resultOk`). The communicators are aborted afterwards.
void expectMismatchFails(const std::function<loomResult_t(int rank, loomComm_t comm)>& call,
                         const std::function<bool(int rank)>& resultOk) {
  test::ScopedEnv timeout("LOOM_TIMEOUT", "15");
  std::vector<loomComm_t> comms(2, nullptr);
  ASSERT_LOOM_OK(loomCommInitAll(comms.data(), 2, nullptr));
  std::vector<loomResult_t> results(2, loomSuccess);
  std::vector<std::string> messages(2);
  test::runThreads(2, [&](int r) {
    results[r] = call(r, comms[r]);
    messages[r] = loomGetLastError(comms[r]);
  });
  EXPECT_FALSE(results[0] == loomSuccess && results[1] == loomSuccess)
      << "both ranks accepted mismatched calls";
  for (int r = 0; r < 2; ++r) {
    if (results[r] == loomSuccess) {
      EXPECT_TRUE(resultOk(r)) << "rank " << r << " reported success with a wrong result";
    } else {
      EXPECT_FALSE(messages[r].empty()) << "rank " << r;
    }
  }
  for (loomComm_t c : comms) EXPECT_EQ(loomCommAbort(c), loomSuccess);
}

TEST(CollMismatch, DifferentCounts) {
  std::vector<float> a(64, 1);
  std::vector<std::vector<float>> b(2, std::vector<float>(64, 0));
  expectMismatchFails(
      [&](int r, loomComm_t c) {
        return loomAllReduce(a.data(), b[r].data(), r == 0 ? 16 : 17, loomFloat32, loomSum, c,
                             nullptr);
      },
      [&](int r) {
        for (int i = 0; i < (r == 0 ? 16 : 17); ++i)
          if (b[r][i] != 2.0f) return false;
        return true;
      });
}

TEST(CollMismatch, DifferentDatatypes) {
  std::vector<float> a(64, 1);
  std::vector<std::vector<float>> b(2, std::vector<float>(64, 0));
  expectMismatchFails(
      [&](int r, loomComm_t c) {
        return loomAllReduce(a.data(), b[r].data(), 16, r == 0 ? loomFloat32 : loomInt32, loomSum,
                             c, nullptr);
      },
      [](int) { return false; });
}

TEST(CollMismatch, DifferentRoots) {
  // Every rank names itself root: every rank only sends, so nobody can notice during the call
  // (no rank receives anything). The data it sent is stamped with that call's signature, so
  // the next call on the same connections fails with a clear error instead of consuming it.
  test::ScopedEnv timeout("LOOM_TIMEOUT", "15");
  std::vector<loomComm_t> comms(2, nullptr);
  ASSERT_LOOM_OK(loomCommInitAll(comms.data(), 2, nullptr));
  std::vector<std::vector<float>> a(2, std::vector<float>(64, 1));
  std::vector<loomResult_t> first(2), second(2);
  std::vector<std::string> messages(2);
  test::runThreads(2, [&](int r) {
    first[r] = loomBroadcast(a[r].data(), a[r].data(), 16, loomFloat32, r, comms[r], nullptr);
    second[r] =
        loomAllReduce(a[r].data(), a[r].data(), 16, loomFloat32, loomSum, comms[r], nullptr);
    messages[r] = loomGetLastError(comms[r]);
  });
  // Each rank receives in the AllReduce and finds its peer's stale Broadcast slot.
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(second[r], loomRemoteError) << messages[r];
    EXPECT_NE(messages[r].find("different call"), std::string::npos) << messages[r];
  }
  for (loomComm_t c : comms) EXPECT_EQ(loomCommAbort(c), loomSuccess);
}

}  // namespace
}  // namespace loom::colltest
