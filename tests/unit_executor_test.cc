// Executors are chosen from the communicator's device (src/exec/device_executor.h). A CUDA
// communicator cannot be initialised on a machine without a GPU, so its executor is made here
// for a communicator that is constructed only: the CPU one takes host streams, the CUDA one
// refuses every call with a message that says why and what to do instead.
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

TEST(Executor, CudaCommunicatorsRefuseCallsClearly) {
  auto cuda = makeExecutor(*constructedOn(1));
  CollOp op;
  op.kind = CollKind::kAllGather;
  try {
    cuda->runOne(CollOp(op));
    FAIL() << "the CUDA executor ran a call";
  } catch (const InvalidUsage& e) {
    EXPECT_EQ(e.code(), loomInvalidUsage);
    const std::string what = e.what();
    EXPECT_NE(what.find("AllGather on a CUDA communicator"), std::string::npos) << what;
    EXPECT_NE(what.find("LOOM_DEVICE_CPU"), std::string::npos) << what;
  }
  std::vector<CollOp> group{op, op};
  EXPECT_THROW(cuda->run(group), InvalidUsage);
  std::vector<CollOp> none;
  EXPECT_NO_THROW(cuda->run(none));  // an empty group asks nothing of the device
}

}  // namespace
}  // namespace loom
