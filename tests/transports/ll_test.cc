// The LL protocol (shm/ll_connection.h) between ranks as threads: rings of LL connections,
// Simple and LL connections between the same ranks at once, LL requests over socket, the
// connection's own contract (flow control, tags, repeated tryReceive, misuse) and protocol
// agreement at setup. Between processes: process_test.cc (StreamsSimpleAndLLBetweenProcesses).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>

#include "src/base/error.h"
#include "src/comm/comm.h"
#include "src/kernels/ll_words.h"
#include "tests/test_util.h"
#include "tests/transports/transport_test_util.h"
#include "transports/registry.h"
#include "transports/shm/ll_connection.h"

namespace loom::transport::test {
namespace {

using loom::test::ScopedEnv;

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// Runs `body(comm, rank)` on `n` ranks as threads; returns each rank's error ("" if none).
template <typename Body>
std::vector<std::string> onRanks(int n, Body body) {
  std::vector<loomComm_t> comms = loom::test::initThreads(n, loom::test::makeId());
  std::vector<std::string> errors(n);
  loom::test::runThreads(n, [&](int r) {
    try {
      body(*static_cast<Comm*>(comms[r]), r);
    } catch (const std::exception& e) {
      errors[r] = e.what();
    }
  });
  loom::test::finalizeAndDestroy(comms);
  return errors;
}

struct LLCase {
  const char* transport;  // LOOM_TRANSPORT
  int nranks;
  bool mixed;  // Simple on channels 0 and 1 beside LL on 2 and 3
};

std::string llCaseName(const ::testing::TestParamInfo<LLCase>& info) {
  const LLCase& c = info.param;
  return strCat(c.transport, c.mixed ? "_mixed" : "_ll", "_n", c.nranks);
}

void PrintTo(const LLCase& c, std::ostream* out) {
  *out << "LOOM_TRANSPORT=" << c.transport << ", " << c.nranks << " ranks"
       << (c.mixed ? ", Simple and LL" : ", LL");
}

class LLRing : public ::testing::TestWithParam<LLCase> {};

// 1000 steps of every size from 0 to slotBytes on each connection, every byte and tag checked,
// the window exactly kSlots deep (exchange).
TEST_P(LLRing, StreamsEveryByte) {
  const LLCase& c = GetParam();
  ScopedEnv transport("LOOM_TRANSPORT", c.transport);
  ScopedEnv buffsize("LOOM_BUFFSIZE", "65536");
  ScopedEnv timeout("LOOM_TIMEOUT", "60");
  const bool shm = std::string(c.transport) == "shm";
  std::vector<std::string> errors = onRanks(c.nranks, [&](Comm& comm, int) {
    std::vector<ConnectionRequest> requests = ringRequests(comm, 2, Protocol::kLL, 2);
    if (c.mixed) {
      for (const ConnectionRequest& r : ringRequests(comm, 2)) requests.push_back(r);
    }
    Connections conns = connectAll(comm, requests, /*batchTag=*/1);
    for (size_t i = 0; i < conns.sends.size(); ++i) {
      EXPECT_STREQ(conns.sendTransport[i], c.transport);
      EXPECT_STREQ(conns.recvTransport[i], c.transport);
      // The first requests are LL: shm gives them LL slots, socket its own (LOOM_BUFFSIZE).
      const bool ll = shm && i < 2;
      EXPECT_EQ(conns.sends[i]->slotBytes(), ll ? shm::kLLSlotBytes : 8192u) << i;
      EXPECT_EQ(conns.recvs[i]->slotBytes(), ll ? shm::kLLSlotBytes : 8192u) << i;
    }
    std::string error = exchange(comm, requests, conns, 1000);
    if (!error.empty()) throw std::runtime_error(error);
  });
  for (int r = 0; r < c.nranks; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
}

INSTANTIATE_TEST_SUITE_P(Transports, LLRing,
                         ::testing::Values(LLCase{"shm", 2, false}, LLCase{"shm", 3, false},
                                           LLCase{"shm", 5, false}, LLCase{"shm", 2, true},
                                           LLCase{"shm", 3, true}, LLCase{"socket", 2, false},
                                           LLCase{"socket", 3, true}),
                         llCaseName);

// One LL connection, rank 0 -> rank 1, driven step by step from the test thread.
class LLPair : public ::testing::Test {
 protected:
  void SetUp() override {
    comms_ = loom::test::initThreads(2, loom::test::makeId());
    std::vector<Connections> conns(2);
    loom::test::runThreads(2, [&](int r) {
      conns[r] = connectAll(comm(r), {{1 - r, 0, r == 0, Protocol::kLL}}, 4);
    });
    ASSERT_EQ(conns[0].sends.size(), 1u);
    ASSERT_EQ(conns[1].recvs.size(), 1u);
    send_ = std::move(conns[0].sends[0]);
    recv_ = std::move(conns[1].recvs[0]);
  }
  void TearDown() override {
    send_.reset();
    recv_.reset();
    loom::test::finalizeAndDestroy(comms_);
  }
  Comm& comm(int r) { return *static_cast<Comm*>(comms_[r]); }

  ScopedEnv transport_{"LOOM_TRANSPORT", "shm"};
  ScopedEnv timeout_{"LOOM_TIMEOUT", "60"};
  std::vector<loomComm_t> comms_;
  std::unique_ptr<SendConnection> send_;
  std::unique_ptr<RecvConnection> recv_;
};

TEST_F(LLPair, FlowControlTagsAndRepeatedReceive) {
  size_t bytes = 0;
  uint32_t tag = 0;
  EXPECT_EQ(recv_->tryReceive(&bytes, &tag), nullptr);  // a zeroed segment holds no step
  for (uint64_t step = 0; step < kSlots; ++step) {
    void* slot = send_->tryAcquire();
    ASSERT_NE(slot, nullptr) << step;
    size_t n = stepBytes(send_->slotBytes(), 0, 0, step);
    fillStep(slot, n, 0, 0, step);
    send_->post(n, stepTag(0, 0, step));
  }
  EXPECT_EQ(send_->tryAcquire(), nullptr);  // kSlots in flight
  EXPECT_TRUE(send_->drained());
  for (uint64_t step = 0; step < 3 * kSlots; ++step) {
    const void* data = recv_->tryReceive(&bytes, &tag);
    ASSERT_NE(data, nullptr) << step;
    // Until release, the same step again.
    size_t again = 0;
    EXPECT_EQ(recv_->tryReceive(&again), data);
    EXPECT_EQ(again, bytes);
    ASSERT_EQ(bytes, stepBytes(recv_->slotBytes(), 0, 0, step));
    EXPECT_EQ(tag, stepTag(0, 0, step));
    EXPECT_EQ(checkStep(data, bytes, 0, 0, step), "");
    recv_->release();
    // Each release frees exactly one slot.
    const uint64_t next = step + kSlots;
    void* slot = send_->tryAcquire();
    ASSERT_NE(slot, nullptr) << step;
    size_t n = stepBytes(send_->slotBytes(), 0, 0, next);
    fillStep(slot, n, 0, 0, next);
    send_->post(n, stepTag(0, 0, next));
    EXPECT_EQ(send_->tryAcquire(), nullptr) << step;
  }
}

TEST_F(LLPair, MisuseIsAnError) {
  EXPECT_THROW(send_->post(1), InternalError);  // no tryAcquire
  ASSERT_NE(send_->tryAcquire(), nullptr);
  EXPECT_THROW(send_->post(shm::kLLSlotBytes + 1), InvalidArgument);
  EXPECT_THROW(recv_->release(), InternalError);  // no tryReceive
}

// A full slot arrives whole, with its tag; the slot's next use, not posted yet, is not
// mistaken for data although every word of the previous step is still there.
TEST_F(LLPair, NothingBeyondThePostedSteps) {
  void* slot = send_->tryAcquire();
  ASSERT_NE(slot, nullptr);
  std::memset(slot, 0xab, shm::kLLSlotBytes);
  send_->post(shm::kLLSlotBytes, 7);
  size_t bytes = 0;
  uint32_t tag = 0;
  const auto* data = static_cast<const uint8_t*>(recv_->tryReceive(&bytes, &tag));
  ASSERT_NE(data, nullptr);
  EXPECT_EQ(bytes, shm::kLLSlotBytes);
  EXPECT_EQ(tag, 7u);
  EXPECT_EQ(data[0], 0xab);
  EXPECT_EQ(data[shm::kLLSlotBytes - 1], 0xab);
  recv_->release();
  EXPECT_EQ(recv_->tryReceive(&bytes, &tag), nullptr);
}

// Both sides describe the same ring through view(); a step written through the sender's view
// and published with postWritten() arrives through tryReceive, a posted one lands in the
// receiver's view, one word missing keeps it from being received, and the steps advance.
TEST_F(LLPair, ViewsDescribeTheRingAndCarrySteps) {
  const ConnectionView* sv = send_->view();
  const ConnectionView* rv = recv_->view();
  ASSERT_NE(sv, nullptr);
  ASSERT_NE(rv, nullptr);
  EXPECT_EQ(sv->protocol, Protocol::kLL);
  EXPECT_EQ(sv->memory, MemoryKind::kHost);
  EXPECT_EQ(sv->ll.nslots, static_cast<uint32_t>(kSlots));
  EXPECT_EQ(sv->ll.dataWords, shm::kLLSlotBytes / 4);
  EXPECT_EQ(sv->ll.headerWords, kLLHeaderWords);
  EXPECT_EQ(sv->ll.slotStrideWords * 8, shm::kLLSlotRawBytes);
  EXPECT_EQ(sv->ll.refreshSteps, shm::kLLRefreshSteps);
  EXPECT_EQ(*sv->ll.step, 0u);
  EXPECT_EQ(*rv->ll.step, 0u);
  EXPECT_EQ(*rv->ll.head, 0u);

  // Step 0 through the sender's view, 5 bytes: two words.
  const unsigned char five[5] = {1, 2, 3, 4, 5};
  ASSERT_NE(send_->tryAcquire(), nullptr);
  llPack(llDataWords(sv->ll, 0), five, sizeof five, llFlag(0));
  send_->postWritten(sizeof five, 77);
  EXPECT_EQ(*sv->ll.step, 1u);
  size_t bytes = 0;
  uint32_t tag = 0;
  const auto* got = static_cast<const unsigned char*>(recv_->tryReceive(&bytes, &tag));
  ASSERT_NE(got, nullptr);
  EXPECT_EQ(bytes, sizeof five);
  EXPECT_EQ(tag, 77u);
  EXPECT_EQ(std::memcmp(got, five, sizeof five), 0);
  recv_->release();
  EXPECT_EQ(*rv->ll.step, 1u);
  EXPECT_EQ(*rv->ll.head, 1u);

  // Step 1 posted from plain bytes, read as words in the receiver's view.
  void* slot = send_->tryAcquire();
  ASSERT_NE(slot, nullptr);
  std::memcpy(slot, five, sizeof five);
  send_->post(sizeof five, 78);
  const auto* words = static_cast<const uint64_t*>(recv_->tryReceiveInView(&bytes, &tag));
  ASSERT_EQ(words, llDataWords(rv->ll, 1));
  EXPECT_EQ(tag, 78u);
  EXPECT_EQ(words[0], llWord(llFlag(1), 0x04030201u));
  EXPECT_EQ(words[1], llWord(llFlag(1), 0x05u));
  recv_->release();

  // Step 2 with its second word not yet landed: not received until it has.
  ASSERT_NE(send_->tryAcquire(), nullptr);
  uint64_t* out = llDataWords(sv->ll, 2);
  llPack(out, five, sizeof five, llFlag(2));
  const uint64_t second = out[1];
  send_->postWritten(sizeof five, 79);
  out[1] = llWord(llFlag(1), 0);
  EXPECT_EQ(recv_->tryReceiveInView(&bytes, &tag), nullptr);
  transport::WaitSet set;
  EXPECT_EQ(recv_->armWait(set), WaitArm::kArmed);
  set.lower();
  out[1] = second;
  EXPECT_EQ(recv_->tryReceiveInView(&bytes, &tag), llDataWords(rv->ll, 2));
  recv_->release();
}

// Both ends must ask for the same protocol: the sender sees the mismatch and says so, and the
// receiver hears its reason.
TEST(LLSetup, ProtocolMismatchFailsOnBothSides) {
  ScopedEnv transport("LOOM_TRANSPORT", "shm");
  ScopedEnv timeout("LOOM_TIMEOUT", "60");
  std::vector<std::string> errors = onRanks(2, [&](Comm& comm, int r) {
    connectAll(comm, {{1 - r, 0, r == 0, r == 0 ? Protocol::kLL : Protocol::kSimple}}, 5);
  });
  EXPECT_PRED2(contains, errors[0], "rank 1 asked for the Simple protocol and rank 0 for LL");
  EXPECT_PRED2(contains, errors[1], "rank 1 asked for the Simple protocol and rank 0 for LL");
  EXPECT_PRED2(contains, errors[1], "rank 0 failed to set up");
}

// The protocol is not part of a connection's identity: Simple and LL on one channel collide.
TEST(LLSetup, SimpleAndLLNeedDistinctChannels) {
  ScopedEnv timeout("LOOM_TIMEOUT", "60");
  std::vector<std::string> errors = onRanks(2, [&](Comm& comm, int r) {
    if (r == 0) connectAll(comm, {{1, 0, true}, {1, 0, true, Protocol::kLL}}, 6);
  });
  EXPECT_PRED2(contains, errors[0], "duplicate connection request");
}

// As for Simple, LL rings are memfds: no name exists in /dev/shm.
TEST(LLSetup, NoNameExistsInDevShm) {
  ScopedEnv transport("LOOM_TRANSPORT", "shm");
  ScopedEnv timeout("LOOM_TIMEOUT", "60");
  const long pid = getpid();
  std::vector<std::string> errors = onRanks(3, [&](Comm& comm, int) {
    Connections conns = connectAll(comm, ringRequests(comm, 2, Protocol::kLL), 3);
    comm.bootstrap().barrier();  // every rank is past setup
    if (!devShmNamesOf(pid).empty()) throw std::runtime_error("a name exists in /dev/shm");
    if (ringMemfdsOf(pid) == 0) throw std::runtime_error("no ring memfd while connected");
  });
  for (int r = 0; r < 3; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
  EXPECT_EQ(devShmNamesOf(pid), std::vector<std::string>{});
}

}  // namespace
}  // namespace loom::transport::test
