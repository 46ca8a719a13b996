// The ib transport's data path over the software NIC, a TEST DOUBLE (tests/softnic) that
// libloom_softnic.so provides behind the libibverbs ABI: loom loads it with LOOM_IBVERBS_LIB
// through the same dlopen path as the real library. Ranks are threads of this process; the
// multi-process runs are ctest entries of the collective tests (transports_tests.cmake).
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "loom/loom.h"
#include "src/comm/comm.h"
#include "tests/test_util.h"
#include "tests/transports/transport_test_util.h"
#include "transports/ib/ib_devices.h"
#include "transports/ib/ib_mr_cache.h"
#include "transports/registry.h"

namespace loom::transport::ib {
namespace {

using loom::test::contains;
using loom::test::ScopedEnv;

class IbSoftnic : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(IbDevices::instance().usable()) << IbDevices::instance().reason();
  }
  ScopedEnv lib_{"LOOM_IBVERBS_LIB", LOOM_SOFTNIC_LIB};
  ScopedEnv transport_{"LOOM_TRANSPORT", "ib"};
  ScopedEnv timeout_{"LOOM_TIMEOUT", "60"};  // a rank that fails must not leave others waiting
};

// Every rank sends to the next and receives from the previous on two channels, every byte and
// tag checked (the shared transport exercise of ring_test.cc).
void ringExchange(int nranks, uint64_t steps) {
  ScopedEnv buffsize("LOOM_BUFFSIZE", "65536");
  std::vector<loomComm_t> comms = loom::test::initThreads(nranks, loom::test::makeId());
  std::vector<std::string> errors(nranks);
  loom::test::runThreads(nranks, [&](int r) {
    try {
      auto& comm = *static_cast<Comm*>(comms[r]);
      std::vector<ConnectionRequest> requests = test::ringRequests(comm, 2);
      Connections conns = connectAll(comm, requests, /*batchTag=*/1);
      for (const char* name : conns.sendTransport) EXPECT_STREQ(name, "ib");
      for (const char* name : conns.recvTransport) EXPECT_STREQ(name, "ib");
      errors[r] = test::exchange(comm, requests, conns, steps);
    } catch (const std::exception& e) {
      errors[r] = e.what();
    }
  });
  for (int r = 0; r < nranks; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
  loom::test::finalizeAndDestroy(comms);
}

TEST_F(IbSoftnic, RingOfTwo) { ringExchange(2, 1000); }
TEST_F(IbSoftnic, RingOfThree) { ringExchange(3, 1000); }
TEST_F(IbSoftnic, RingOfFour) { ringExchange(4, 500); }

// An idle receiver sleeps on the completion channel's fd (armWait, then WaitSet::sleep) and the
// sender's write wakes it: the sleep ends long before its limit, with the step there.
TEST_F(IbSoftnic, AnIdleReceiverSleepsUntilTheStepArrives) {
  std::vector<loomComm_t> comms = loom::test::initThreads(2, loom::test::makeId());
  std::atomic<bool> asleep{false};
  std::vector<std::string> errors(2);
  loom::test::runThreads(2, [&](int r) {
    try {
      auto& comm = *static_cast<Comm*>(comms[r]);
      Connections conns = connectAll(comm, {ConnectionRequest{1 - r, 0, r == 0}}, 1);
      if (r == 1) {
        RecvConnection& recv = *conns.recvs[0];
        WaitSet set;
        set.clear();
        ASSERT_EQ(recv.armWait(set), WaitArm::kArmed);
        asleep = true;
        const auto start = std::chrono::steady_clock::now();
        set.sleep(std::chrono::seconds(100));
        set.lower();
        // Only a lost wakeup takes anywhere near the limit.
        EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(50));
        size_t bytes = 0;
        const void* data = nullptr;
        for (int i = 0; i < 1000000 && data == nullptr; ++i) {
          recv.progress();
          data = recv.tryReceive(&bytes);
        }
        ASSERT_NE(data, nullptr);
        EXPECT_EQ(bytes, 100u);
        EXPECT_EQ(static_cast<const uint8_t*>(data)[99], 42);
        recv.release();
      } else {
        SendConnection& send = *conns.sends[0];
        while (!asleep) std::this_thread::yield();
        void* slot = send.tryAcquire();
        ASSERT_NE(slot, nullptr);
        std::memset(slot, 42, 100);
        send.post(100);
        while (!send.drained()) send.progress();
      }
    } catch (const std::exception& e) {
      errors[r] = e.what();
    }
  });
  for (int r = 0; r < 2; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
  loom::test::finalizeAndDestroy(comms);
}

// AllReduce (sum) of rank-dependent small integers in float and int32, exact whatever the
// order of the additions; in place, from `alloc`'s buffers when given.
void allReduce(int nranks, size_t count, bool useMemAlloc, bool registerBuffers,
               std::vector<std::string>* errors) {
  const std::vector<loomComm_t> comms = loom::test::initThreads(nranks, loom::test::makeId());
  errors->assign(nranks, "");
  loom::test::runThreads(nranks, [&](int r) {
    float* data = nullptr;
    std::vector<float> own;
    if (useMemAlloc) {
      void* p = nullptr;
      ASSERT_EQ(loomMemAlloc(&p, count * sizeof(float)), loomSuccess);
      data = static_cast<float*>(p);
    } else {
      own.resize(count);
      data = own.data();
    }
    void* handle = nullptr;
    if (registerBuffers) {
      ASSERT_EQ(loomCommRegister(comms[r], data, count * sizeof(float), &handle), loomSuccess);
    }
    for (size_t i = 0; i < count; ++i) data[i] = static_cast<float>((i % 97) + r);
    const loomResult_t rc =
        loomAllReduce(data, data, count, loomFloat32, loomSum, comms[r], nullptr);
    // This rank's buffer is still registered (it is freed below): a step went zero-copy.
    if ((useMemAlloc || registerBuffers) && liveRegistrations() == 0)
      (*errors)[r] = "no step went zero-copy from the registered buffer";
    if (rc != loomSuccess) {
      (*errors)[r] = strCat("allreduce (", rc, "): ", loomGetLastError(comms[r]));
    } else {
      const float ranks = static_cast<float>(nranks * (nranks - 1) / 2);
      for (size_t i = 0; i < count; ++i) {
        const float want = static_cast<float>((i % 97) * nranks) + ranks;
        if (data[i] != want) {
          (*errors)[r] = strCat("element ", i, " is ", data[i], ", expected ", want);
          break;
        }
      }
    }
    if (registerBuffers) {
      EXPECT_EQ(loomCommDeregister(comms[r], handle), loomSuccess);
    }
    if (useMemAlloc) {
      EXPECT_EQ(loomMemFree(data), loomSuccess);
    }
  });
  loom::test::finalizeAndDestroy(comms);
}

TEST_F(IbSoftnic, AllReduceIsExactOnTwoToFourRanks) {
  for (int nranks : {2, 3, 4}) {
    for (size_t count : {size_t{1}, size_t{1000}, size_t{1} << 20}) {
      std::vector<std::string> errors;
      allReduce(nranks, count, false, false, &errors);
      for (int r = 0; r < nranks; ++r)
        EXPECT_EQ(errors[r], "") << nranks << " ranks, " << count << " floats, rank " << r;
    }
  }
}

TEST_F(IbSoftnic, MemAllocBuffersGoZeroCopyAndAreDeregisteredOnFree) {
  std::vector<std::string> errors;
  allReduce(2, size_t{4} << 20, /*useMemAlloc=*/true, false, &errors);
  for (const std::string& e : errors) EXPECT_EQ(e, "");
  EXPECT_EQ(liveRegistrations(), 0u) << "loomMemFree leaves no registration behind";
}

TEST_F(IbSoftnic, RegisteredBuffersGoZeroCopy) {
  std::vector<std::string> errors;
  allReduce(3, size_t{4} << 20, false, /*registerBuffers=*/true, &errors);
  for (const std::string& e : errors) EXPECT_EQ(e, "");
  EXPECT_EQ(liveRegistrations(), 0u) << "loomCommDeregister leaves no registration behind";
}

// Faults of the software NIC reach every rank as an error, not a hang: `spec` is injected
// after a first AllReduce set up the connections (or before it when `beforeSetup`); each rank
// must fail with `code` and one of them name `status`.
void expectFault(const char* spec, const char* status, loomResult_t code = loomRemoteError,
                 bool beforeSetup = false) {
  void* lib = dlopen(LOOM_SOFTNIC_LIB, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(lib, nullptr) << dlerror();
  auto inject = reinterpret_cast<int (*)(const char*)>(dlsym(lib, "loom_softnic_inject"));
  ASSERT_NE(inject, nullptr);
  const std::vector<loomComm_t> comms = loom::test::initThreads(2, loom::test::makeId());
  std::vector<loomResult_t> results(2);
  std::vector<std::string> errors(2);
  for (int round = 0; round < 2; ++round) {
    if (beforeSetup && round == 0) {
      ASSERT_EQ(inject(spec), 0) << spec;
    }
    if (!beforeSetup && round == 1) {
      ASSERT_EQ(inject(spec), 0) << spec;
    }
    loom::test::runThreads(2, [&](int r) {
      std::vector<float> data(1 << 16, 1.0f);
      results[r] = loomAllReduce(data.data(), data.data(), data.size(), loomFloat32, loomSum,
                                 comms[r], nullptr);
      errors[r] = loomGetLastError(comms[r]);
    });
    if (beforeSetup) break;
    if (round == 0) {
      for (int r = 0; r < 2; ++r) ASSERT_EQ(results[r], loomSuccess) << errors[r];
    }
  }
  bool named = false;
  for (int r = 0; r < 2; ++r) {
    if (code == loomRemoteError) {
      EXPECT_EQ(results[r], loomRemoteError) << "rank " << r << ": " << errors[r];
    } else
      EXPECT_NE(results[r], loomSuccess) << "rank " << r;
    named |= contains(errors[r], status);
  }
  EXPECT_TRUE(named) << "no rank names " << status << ": " << errors[0] << " | " << errors[1];
  inject("clear");
  for (loomComm_t c : comms) loomCommAbort(c);
}

TEST_F(IbSoftnic, RetryExceededIsARemoteError) { expectFault("retry_exceeded@0", "retry"); }
TEST_F(IbSoftnic, QpFatalIsARemoteError) { expectFault("qp_fatal@0", "rank"); }
TEST_F(IbSoftnic, PortDownIsARemoteError) { expectFault("port_down", "port"); }
TEST_F(IbSoftnic, RegistrationFailureFailsSetup) {
  expectFault("reg_fail@0", "registering a ring", loomSystemError, /*beforeSetup=*/true);
}

// Discovery against the software NIC's devices and ports (each test is its own process, so
// discovery runs anew with the environment set here).
class IbSoftnicDevices : public ::testing::Test {
 protected:
  ScopedEnv lib_{"LOOM_IBVERBS_LIB", LOOM_SOFTNIC_LIB};
  ScopedEnv devices_{"SOFTNIC_DEVICES", "softnic0,softnic1"};
  ScopedEnv ports_{"SOFTNIC_PORTS", "2"};
};

TEST_F(IbSoftnicDevices, EveryActivePortByDefault) {
  const IbDevices& d = IbDevices::instance();
  ASSERT_EQ(d.ports().size(), 4u) << d.reason();
  EXPECT_EQ(d.ports()[3].describe(), "softnic1:2 (RoCE, GID index 0)");
}

TEST_F(IbSoftnicDevices, HcaFilterChoosesPorts) {
  ScopedEnv hca("LOOM_IB_HCA", "^softnic0,softnic1:2");
  const IbDevices& d = IbDevices::instance();
  ASSERT_EQ(d.ports().size(), 1u) << d.reason();
  EXPECT_EQ(d.ports()[0].deviceName, "softnic1");
  EXPECT_EQ(d.ports()[0].port, 1);
  EXPECT_FALSE(d.ports()[0].infiniband);
}

TEST_F(IbSoftnicDevices, AFilterThatMatchesNothingSaysSo) {
  ScopedEnv hca("LOOM_IB_HCA", "=softnic");
  EXPECT_FALSE(IbDevices::instance().usable());
  EXPECT_TRUE(contains(IbDevices::instance().reason(), "softnic1:2 (not in LOOM_IB_HCA)"))
      << IbDevices::instance().reason();
}

TEST_F(IbSoftnicDevices, PortsDownAreNamed) {
  ScopedEnv down("SOFTNIC_PORT_STATE", "down");
  EXPECT_FALSE(IbDevices::instance().usable());
  EXPECT_TRUE(contains(IbDevices::instance().reason(), "softnic0:1 (down)"))
      << IbDevices::instance().reason();
}

TEST_F(IbSoftnicDevices, NoDevice) {
  ScopedEnv none("SOFTNIC_DEVICES", "");
  EXPECT_FALSE(IbDevices::instance().usable());
  EXPECT_TRUE(contains(IbDevices::instance().reason(), "finds no RDMA device"))
      << IbDevices::instance().reason();
}

TEST_F(IbSoftnicDevices, GidIndexFromTheEnvironment) {
  ScopedEnv gid("LOOM_IB_GID_INDEX", "3");  // the soft NIC has one GID, at index 0
  EXPECT_FALSE(IbDevices::instance().usable());
  EXPECT_TRUE(contains(IbDevices::instance().reason(), "no GID at index 3"))
      << IbDevices::instance().reason();
}

}  // namespace
}  // namespace loom::transport::ib
