// Unit tests of the executor's waiting policy (src/exec/cpu/backoff.h): a thread whose waits keep
// outlasting the spin phase yields at once, a probe that finds spinning works again restores
// it, and an oversubscribed host always yields without learning anything.
#include <gtest/gtest.h>

#include <chrono>

#include "src/exec/cpu/backoff.h"

namespace loom {
namespace {

using std::chrono::microseconds;

transport::WaitArm nothingToArm(transport::WaitSet&) { return transport::WaitArm::kReady; }

// Idle rounds until the backoff itself has seen `length` pass (it reads the clock every few
// rounds: a test clock could run out between two of its reads, e.g. when the thread is
// descheduled, and the wait would not count as long).
void idleFor(Backoff& backoff, microseconds length) {
  while (backoff.waited() < length) backoff.idle(nothingToArm);
}

// One wait of at least `length`, then progress.
void longWait(Backoff& backoff, microseconds length) {
  idleFor(backoff, length);
  backoff.reset();
}

// A wait that ends after one round.
void shortWait(Backoff& backoff) {
  backoff.idle(nothingToArm);
  backoff.reset();
}

TEST(Backoff, YieldsAtOnceAfterWaitsOutlastTheSpinPhaseAndProbesBack) {
  tlsWaitHistory = WaitHistory{};
  Backoff backoff;
  const microseconds longer = Backoff::kSpin * 5;
  for (int i = 0; i < 3; ++i) longWait(backoff, longer);
  EXPECT_FALSE(tlsWaitHistory.yieldFirst);
  EXPECT_EQ(tlsWaitHistory.spunInVain, 3);
  shortWait(backoff);  // spinning worked: the streak starts over
  EXPECT_EQ(tlsWaitHistory.spunInVain, 0);
  for (int i = 0; i < 4; ++i) longWait(backoff, longer);
  EXPECT_TRUE(tlsWaitHistory.yieldFirst);
  // Short waits while yielding first prove nothing (they yielded); every 32nd wait spins.
  for (int i = 0; i < 31; ++i) shortWait(backoff);
  EXPECT_TRUE(tlsWaitHistory.yieldFirst);
  shortWait(backoff);  // the probe ends within the spin phase
  EXPECT_FALSE(tlsWaitHistory.yieldFirst);
  EXPECT_EQ(tlsWaitHistory.spunInVain, 0);
}

TEST(Backoff, AProbeThatSpinsInVainKeepsYieldingFirst) {
  tlsWaitHistory = WaitHistory{};
  Backoff backoff;
  for (int i = 0; i < 4; ++i) longWait(backoff, Backoff::kSpin * 5);
  ASSERT_TRUE(tlsWaitHistory.yieldFirst);
  for (int i = 0; i < 31; ++i) shortWait(backoff);
  longWait(backoff, Backoff::kSpin * 5);  // the probe: spinning still does not pay
  EXPECT_TRUE(tlsWaitHistory.yieldFirst);
}

TEST(Backoff, OversubscribedAlwaysYieldsAndLearnsNothing) {
  tlsWaitHistory = WaitHistory{};
  {
    Backoff backoff;
    backoff.yieldAtOnce(true);
    for (int i = 0; i < 8; ++i) longWait(backoff, Backoff::kSpin * 5);
  }
  EXPECT_FALSE(tlsWaitHistory.yieldFirst);
  EXPECT_EQ(tlsWaitHistory.spunInVain, 0);
}

TEST(Backoff, AWaitStillOpenWhenTheBackoffEndsIsCounted) {
  tlsWaitHistory = WaitHistory{};
  for (int i = 0; i < 4; ++i) {
    Backoff backoff;  // as in one call of the fast path: the call returns while waiting ended
    idleFor(backoff, Backoff::kSpin * 5);
  }
  EXPECT_TRUE(tlsWaitHistory.yieldFirst);
  tlsWaitHistory = WaitHistory{};
}

}  // namespace
}  // namespace loom
