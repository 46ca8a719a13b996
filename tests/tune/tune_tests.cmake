# Tests of src/tune and the topology-aware algorithms: pure unit tests (ring order, trees over
# nodes). Included from tests/CMakeLists.txt.
add_executable(loom_tune_tests
  ${CMAKE_CURRENT_LIST_DIR}/ring_order_test.cc)
target_link_libraries(loom_tune_tests PRIVATE loom_static GTest::gtest_main)
target_compile_options(loom_tune_tests PRIVATE ${loom_warnings})
gtest_discover_tests(loom_tune_tests DISCOVERY_TIMEOUT 60)
