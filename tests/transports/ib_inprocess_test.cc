// The verbs table filled in-process from the software NIC's lookup function (a TEST DOUBLE,
// tests/softnic, linked statically: no library is loaded) instead of dlopen: the same fill
// routine, the other source. A ring of two thread ranks then runs over it.
#include <gtest/gtest.h>

#include "loom/loom.h"
#include "softnic_api.h"
#include "src/comm/comm.h"
#include "tests/test_util.h"
#include "tests/transports/transport_test_util.h"
#include "transports/ib/ib_devices.h"
#include "transports/ib/ib_verbs.h"
#include "transports/registry.h"

namespace loom::transport::ib {
namespace {

TEST(IbInProcess, LookupFilledTableCarriesARing) {
  // Before anything asks for the process's table (each test is its own process).
  Verbs table = fillVerbs([](const char* name, const char*) { return loom_softnic_lookup(name); },
                          "in-process software NIC");
  ASSERT_TRUE(table.usable()) << table.error;
  useVerbsForTest(std::move(table));
  ASSERT_TRUE(IbDevices::instance().usable()) << IbDevices::instance().reason();

  loom::test::ScopedEnv transport("LOOM_TRANSPORT", "ib");
  loom::test::ScopedEnv buffsize("LOOM_BUFFSIZE", "65536");
  loom::test::ScopedEnv timeout("LOOM_TIMEOUT", "60");
  std::vector<loomComm_t> comms = loom::test::initThreads(2, loom::test::makeId());
  std::vector<std::string> errors(2);
  loom::test::runThreads(2, [&](int r) {
    try {
      auto& comm = *static_cast<Comm*>(comms[r]);
      std::vector<ConnectionRequest> requests = test::ringRequests(comm, 1);
      Connections conns = connectAll(comm, requests, /*batchTag=*/1);
      for (const char* name : conns.sendTransport) EXPECT_STREQ(name, "ib");
      errors[r] = test::exchange(comm, requests, conns, 300);
    } catch (const std::exception& e) {
      errors[r] = e.what();
    }
  });
  for (int r = 0; r < 2; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
  loom::test::finalizeAndDestroy(comms);
}

}  // namespace
}  // namespace loom::transport::ib
