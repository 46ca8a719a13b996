// The ib transport where it cannot run: no library, no RDMA support in the kernel (this
// machine's libibverbs answers ENOSYS), LOOM_IB_DISABLE. canConnect is false with a reason,
// the default choice falls back to the other transports, and LOOM_TRANSPORT=ib fails with
// loomInvalidArgument quoting the reason. Each test runs in its own process (device discovery
// happens once per process).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "loom/loom.h"
#include "tests/test_util.h"
#include "transports/ib/ib_devices.h"
#include "transports/ib/ib_transport.h"

namespace loom::transport::ib {
namespace {

using test::contains;

// Two thread ranks init and run one AllReduce of 1000 floats; returns each rank's first
// failure ("" when all went well) and checks the sums when it went well.
std::vector<std::string> allReduceTwoRanks() {
  const loomUniqueId id = test::makeId();
  std::vector<std::string> errors(2);
  std::vector<loomComm_t> comms(2, nullptr);
  test::runThreads(2, [&](int r) {
    if (loomCommInitRank(&comms[r], 2, id, r) != loomSuccess) {
      errors[r] = strCat("init: ", loomGetLastError(nullptr));
      return;
    }
    std::vector<float> data(1000, static_cast<float>(r + 1));
    const loomResult_t rc = loomAllReduce(data.data(), data.data(), data.size(), loomFloat32,
                                          loomSum, comms[r], nullptr);
    if (rc != loomSuccess) {
      errors[r] = strCat("allreduce (", rc, "): ", loomGetLastError(comms[r]));
      return;
    }
    for (float v : data) EXPECT_EQ(v, 3.0f);
  });
  // Only once both ranks have their own result: an abort would otherwise be what the slower
  // one reports.
  const bool failed = !errors[0].empty() || !errors[1].empty();
  for (loomComm_t comm : comms) {
    if (comm == nullptr) continue;
    if (failed) {
      EXPECT_EQ(loomCommAbort(comm), loomSuccess);
    }
  }
  if (!failed) test::finalizeAndDestroy(comms);
  return errors;
}

TEST(IbFallback, ThisMachinesLibraryGivesAReasonOrAPort) {
  const IbDevices& devs = IbDevices::instance();
  const topo::PathClass path = topo::PathClass::kNetwork;
  RankInfo a, b;
  IbTransport t;
  EXPECT_EQ(t.canConnect(PeerPair{a, b, path}), devs.usable());
  if (devs.usable())
    GTEST_SKIP() << "this machine has an RDMA port: " << devs.ports()[0].describe();
  EXPECT_FALSE(devs.reason().empty());
  EXPECT_EQ(t.whyNot(PeerPair{a, b, path}), devs.reason());
}

TEST(IbFallback, DefaultChoiceIsUnchangedWithoutAPort) {
  if (IbDevices::instance().usable()) GTEST_SKIP() << "this machine has an RDMA port";
  test::ScopedEnv noShm("LOOM_SHM_DISABLE", "1");  // the pair now needs a wire transport
  for (const std::string& e : allReduceTwoRanks()) EXPECT_EQ(e, "");
}

TEST(IbFallback, ForcedIbQuotesTheReason) {
  if (IbDevices::instance().usable()) GTEST_SKIP() << "this machine has an RDMA port";
  test::ScopedEnv forced("LOOM_TRANSPORT", "ib");
  for (const std::string& e : allReduceTwoRanks()) {
    EXPECT_TRUE(contains(e, "LOOM_TRANSPORT=ib cannot connect")) << e;
    EXPECT_TRUE(contains(e, IbDevices::instance().reason())) << e;
    EXPECT_TRUE(contains(e, strCat("(", static_cast<int>(loomInvalidArgument), ")")) ||
                contains(e, "init:"))
        << e;
  }
}

TEST(IbFallback, MissingLibrary) {
  test::ScopedEnv lib("LOOM_IBVERBS_LIB", "/nonexistent/libibverbs.so.1");
  test::ScopedEnv forced("LOOM_TRANSPORT", "ib");
  EXPECT_FALSE(IbDevices::instance().usable());
  EXPECT_TRUE(contains(IbDevices::instance().reason(), "cannot load /nonexistent"))
      << IbDevices::instance().reason();
  for (const std::string& e : allReduceTwoRanks())
    EXPECT_TRUE(contains(e, "cannot load /nonexistent/libibverbs.so.1")) << e;
}

TEST(IbFallback, DisabledNeverLoadsTheLibrary) {
  test::ScopedEnv off("LOOM_IB_DISABLE", "1");
  EXPECT_FALSE(IbDevices::instance().usable());
  EXPECT_TRUE(contains(IbDevices::instance().reason(), "LOOM_IB_DISABLE=1"));
}

TEST(IbFallback, RegisterWithoutADeviceSucceeds) {
  const std::vector<loomComm_t> comms = test::initThreads(1, test::makeId());
  std::vector<char> buffer(1 << 20);
  void* handle = nullptr;
  ASSERT_EQ(loomCommRegister(comms[0], buffer.data(), buffer.size(), &handle), loomSuccess)
      << loomGetLastError(comms[0]);
  EXPECT_NE(handle, nullptr);
  EXPECT_EQ(loomCommDeregister(comms[0], handle), loomSuccess);
  EXPECT_EQ(loomCommDeregister(comms[0], handle), loomInvalidArgument);
  EXPECT_EQ(loomCommRegister(comms[0], nullptr, 10, &handle), loomInvalidArgument);
  EXPECT_EQ(loomCommRegister(comms[0], buffer.data(), 10, nullptr), loomInvalidArgument);
  test::finalizeAndDestroy(comms);
}

}  // namespace
}  // namespace loom::transport::ib
