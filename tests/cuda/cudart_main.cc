// main() of loom_cuda_tests: the real runtime, whatever the caller's environment says (see
// sim_main.cc for why not ctest's ENVIRONMENT).
#include <gtest/gtest.h>

#include <cstdlib>

int main(int argc, char** argv) {
  setenv("LOOM_CUDA_SIM", "0", 1);
  setenv("LOOM_DEBUG", "WARN", 0);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
