// main() of loom_cuda_sim_tests: every test of this binary runs on the simulated runtime with
// two devices. Set here rather than through ctest's ENVIRONMENT, since gtest_discover_tests
// (CMake 3.25) keeps only the first of several variables.
#include <gtest/gtest.h>

#include <cstdlib>

int main(int argc, char** argv) {
  setenv("LOOM_CUDA_SIM", "1", 1);
  setenv("LOOM_CUDA_SIM_DEVICES", "2", 1);
  setenv("LOOM_DEBUG", "WARN", 0);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
