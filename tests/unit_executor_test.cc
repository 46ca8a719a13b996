// Executors are chosen from the communicator's device (src/exec/device_executor.h). A CUDA
// communicator cannot be initialised on a machine without a GPU, so its executor is made here
// for a communicator that is constructed only: the CPU one takes host streams, the CUDA one
// launches on the device's streams (tests/cuda/cuda_executor_test.cc runs it).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "loom/loom.h"
#include "src/base/error.h"
#include "src/comm/comm.h"
#include "src/comm/comm_registry.h"
#include "src/exec/device_executor.h"

namespace loom {
namespace {

std::unique_ptr<Comm> constructedOn(int device) {
  CommOptions options;
  options.device = device;
  return std::make_unique<Comm>(options, 0, 1);
}

TEST(Executor, ChosenFromTheDevice) {
  loomComm_t comm = nullptr;
  int devices[1] = {LOOM_DEVICE_CPU};
  ASSERT_EQ(loomCommInitAll(&comm, 1, devices), loomSuccess);
  EXPECT_STREQ(executorOf(*findComm(comm)).device(), "cpu");
  EXPECT_TRUE(executorOf(*findComm(comm)).hostStreams());
  EXPECT_EQ(loomCommDestroy(comm), loomSuccess);
  EXPECT_STREQ(makeExecutor(*constructedOn(0))->device(), "cuda");
  EXPECT_FALSE(makeExecutor(*constructedOn(0))->hostStreams());
}

TEST(Executor, NotThereBeforeInit) {
  // A constructed communicator has no executor yet: asking is a clear error, not a crash.
  EXPECT_THROW(executorOf(*constructedOn(LOOM_DEVICE_CPU)), InvalidUsage);
}

TEST(Executor, AnEmptyGroupAsksNothingOfTheDevice) {
  // The executor refers to its communicator, which outlives it as it does inside the library.
  auto comm = constructedOn(1);
  auto cuda = makeExecutor(*comm);
  std::vector<CollOp> none;
  EXPECT_NO_THROW(cuda->run(none));
}

}  // namespace
}  // namespace loom
