// Executors are chosen from the communicator's device (src/core/device_executor.h). A CUDA
// communicator cannot be made on a machine without a GPU, so the executors are checked here
// directly: the CPU one takes host streams, the CUDA one refuses every call with a message
// that says why and what to do instead.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "loom/loom.h"
#include "src/core/device_executor.h"
#include "src/core/error.h"

namespace loom {
namespace {

TEST(Executor, ChosenFromTheDevice) {
  EXPECT_STREQ(makeExecutor(LOOM_DEVICE_CPU)->device(), "cpu");
  EXPECT_TRUE(makeExecutor(LOOM_DEVICE_CPU)->hostStreams());
  EXPECT_STREQ(makeExecutor(0)->device(), "cuda");
  EXPECT_FALSE(makeExecutor(0)->hostStreams());
}

TEST(Executor, CudaCommunicatorsRefuseCallsClearly) {
  auto cuda = makeExecutor(1);
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
