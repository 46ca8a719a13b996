# Tests of src/tune and the topology-aware algorithms: pure unit tests (ring order, trees over
# nodes, the cost model) and rank processes on fake hosts (LOOM_HOSTID). Included from
# tests/CMakeLists.txt after coll/coll_tests.cmake (it runs loom_coll_rank).
add_executable(loom_tune_tests
  ${CMAKE_CURRENT_LIST_DIR}/ring_order_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/cost_model_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/gpu_ring_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/hier_process_test.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/test_util.cc)
target_link_libraries(loom_tune_tests PRIVATE loom_static GTest::gtest_main)
target_compile_options(loom_tune_tests PRIVATE ${loom_warnings})
target_compile_definitions(loom_tune_tests PRIVATE
  LOOM_TEST_RANK_BINARY="$<TARGET_FILE:loom_test_rank>"
  LOOM_TOPO_FIXTURES="${CMAKE_CURRENT_SOURCE_DIR}/topo/fixtures"
  LOOM_COLL_RANK_BINARY="$<TARGET_FILE:loom_coll_rank>")
add_dependencies(loom_tune_tests loom_coll_rank)
gtest_discover_tests(loom_tune_tests
  PROPERTIES ENVIRONMENT "LOOM_SOCKET_IFNAME=lo" TIMEOUT 300 DISCOVERY_TIMEOUT 60)
