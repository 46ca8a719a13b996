# Transport tests: included from tests/CMakeLists.txt. Ranks run as threads of the test binary
# and as processes of loom_transport_test_rank, which the tests spawn.
set(loom_transport_test_dir ${CMAKE_CURRENT_LIST_DIR})

add_executable(loom_transport_test_rank
  ${loom_transport_test_dir}/transport_rank_main.cc
  ${loom_transport_test_dir}/transport_test_util.cc
  ${loom_transport_test_dir}/../test_util.cc)
target_link_libraries(loom_transport_test_rank PRIVATE loom_static GTest::gtest)
target_compile_options(loom_transport_test_rank PRIVATE ${loom_warnings})
target_compile_definitions(loom_transport_test_rank PRIVATE
  LOOM_TEST_RANK_BINARY="$<TARGET_FILE:loom_transport_test_rank>")

add_executable(loom_transport_tests
  ${loom_transport_test_dir}/kill_test.cc
  ${loom_transport_test_dir}/ll_test.cc
  ${loom_transport_test_dir}/ring_test.cc
  ${loom_transport_test_dir}/process_test.cc
  ${loom_transport_test_dir}/setup_test.cc
  ${loom_transport_test_dir}/shm_segment_test.cc
  ${loom_transport_test_dir}/socket_send_test.cc
  ${loom_transport_test_dir}/wait_test.cc
  ${loom_transport_test_dir}/transport_test_util.cc
  ${loom_transport_test_dir}/../test_util.cc)
target_link_libraries(loom_transport_tests PRIVATE loom_static GTest::gtest_main)
target_compile_options(loom_transport_tests PRIVATE ${loom_warnings})
target_compile_definitions(loom_transport_tests PRIVATE
  LOOM_TEST_RANK_BINARY="$<TARGET_FILE:loom_transport_test_rank>")
add_dependencies(loom_transport_tests loom_transport_test_rank)
gtest_discover_tests(loom_transport_tests
  PROPERTIES ENVIRONMENT "LOOM_SOCKET_IFNAME=lo" TIMEOUT 120
  DISCOVERY_TIMEOUT 60)
