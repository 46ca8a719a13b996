// Sleeping instead of spinning (transports/wait.h): a doorbell wakes its sleeper, a waiter
// sleeping on several wakes for any one of them, and every connection kind arms only when it
// really has nothing to do and reports kReady as soon as its peer posted or released.
#include "transports/wait.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "src/comm/comm.h"
#include "tests/test_util.h"
#include "transports/registry.h"

namespace loom::transport::test {
namespace {

using loom::test::ScopedEnv;
using std::chrono::seconds;

// The sleeper re-checks its condition after arming, as the executor does; a lost wakeup would
// leave it asleep for the whole limit, which the test's own timeout would report as a hang.
void sleepUntil(std::atomic<bool>& flag, Doorbell* bells, int nbells) {
  WaitSet set;
  while (!flag.load(std::memory_order_acquire)) {
    set.clear();
    for (int i = 0; i < nbells; ++i) set.arm(bells[i]);
    if (!flag.load(std::memory_order_acquire)) set.sleep(seconds(60));
    set.lower();
  }
}

TEST(WaitSet, DoorbellWakesItsSleeper) {
  for (int round = 0; round < 200; ++round) {
    Doorbell bell;
    std::atomic<bool> flag{false};
    std::thread sleeper([&] { sleepUntil(flag, &bell, 1); });
    if (round % 2 == 0) std::this_thread::yield();  // ring before and after the sleep starts
    flag.store(true, std::memory_order_release);
    ringDoorbell(bell);
    sleeper.join();
    EXPECT_EQ(bell.asleep.load(), 0u);
  }
}

TEST(WaitSet, AnyOfSeveralDoorbellsWakes) {
  for (int which = 0; which < 3; ++which) {
    Doorbell bells[3];
    std::atomic<bool> flag{false};
    std::thread sleeper([&] { sleepUntil(flag, bells, 3); });
    flag.store(true, std::memory_order_release);
    ringDoorbell(bells[which]);
    sleeper.join();
  }
}

TEST(WaitSet, RingingWithNobodyAsleepDoesNotTouchTheWord) {
  Doorbell bell;
  ringDoorbell(bell);
  EXPECT_EQ(bell.word.load(), 0u);  // the fast path: one fence and one load, no syscall
}

TEST(WaitSet, EmptySetSleepsBriefly) {
  WaitSet set;
  set.clear();
  EXPECT_TRUE(set.empty());
  set.sleep(seconds(60));  // nothing to wake it: it must only nap
}

struct ArmCase {
  const char* transport;
  Protocol protocol;
};

class ConnectionArm : public ::testing::TestWithParam<ArmCase> {};

// Rank 0 sends to rank 1. A receiver with nothing to read arms; once the sender posts it is
// ready. A sender with every slot in flight arms; once the receiver releases one it is ready.
TEST_P(ConnectionArm, ArmsOnlyWhenThereIsNothingToDo) {
  ScopedEnv transport("LOOM_TRANSPORT", GetParam().transport);
  ScopedEnv timeout("LOOM_TIMEOUT", "60");
  const Protocol protocol = GetParam().protocol;
  std::vector<loomComm_t> comms = loom::test::initThreads(2, loom::test::makeId());
  Connections conns[2];
  loom::test::runThreads(2, [&](int r) {
    auto& comm = *static_cast<Comm*>(comms[r]);
    conns[r] = connectAll(comm, {{1 - r, 5, r == 0, protocol}}, 1);
  });
  SendConnection& send = *conns[0].sends.at(0);
  RecvConnection& recv = *conns[1].recvs.at(0);
  WaitSet set;
  size_t bytes = 0;
  recv.progress();
  ASSERT_EQ(recv.tryReceive(&bytes), nullptr);
  set.clear();
  EXPECT_EQ(recv.armWait(set), WaitArm::kArmed);
  set.lower();
  // Fill every slot.
  for (int i = 0; i < kSlots; ++i) {
    void* slot = send.tryAcquire();
    ASSERT_NE(slot, nullptr) << "slot " << i;
    std::memset(slot, i, 8);
    send.post(8, 7);
    while (!send.drained()) {
      send.progress();
      recv.progress();
    }
  }
  // The receiver has data now, whatever it last saw.
  const void* data = nullptr;
  for (int tries = 0; data == nullptr && tries < 1000000; ++tries) {
    recv.progress();
    set.clear();
    const WaitArm state = recv.armWait(set);
    set.lower();
    if (state == WaitArm::kReady) data = recv.tryReceive(&bytes);
  }
  ASSERT_NE(data, nullptr);
  EXPECT_EQ(bytes, 8u);
  // The sender has no free slot until the receiver releases one.
  ASSERT_EQ(send.tryAcquire(), nullptr);
  set.clear();
  EXPECT_EQ(send.armWait(set, false), WaitArm::kArmed);
  set.lower();
  recv.release();
  set.clear();
  EXPECT_EQ(send.armWait(set, false), WaitArm::kReady);
  set.lower();
  EXPECT_NE(send.tryAcquire(), nullptr);
  conns[0] = Connections{};
  conns[1] = Connections{};
  loom::test::finalizeAndDestroy(comms);
}

INSTANTIATE_TEST_SUITE_P(Transports, ConnectionArm,
                         ::testing::Values(ArmCase{"shm", Protocol::kSimple},
                                           ArmCase{"shm", Protocol::kLL}),
                         [](const auto& info) {
                           return std::string(info.param.transport) +
                                  (info.param.protocol == Protocol::kLL ? "_ll" : "_simple");
                         });

}  // namespace
}  // namespace loom::transport::test
