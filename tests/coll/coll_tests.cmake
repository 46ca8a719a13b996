# Collective tests (tests/coll): every collective x type x op x rank count on threads, groups
# and host streams, over shared memory and TCP, plus rank processes. Included from
# tests/CMakeLists.txt.
set(loom_coll_dir ${CMAKE_CURRENT_SOURCE_DIR}/coll)

# A rank of the multi-process collective tests.
add_executable(loom_coll_rank
  ${loom_coll_dir}/coll_rank_main.cc
  ${loom_coll_dir}/coll_case.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/test_util.cc)
target_link_libraries(loom_coll_rank PRIVATE loom_static GTest::gtest)

# A rank of the registered-memory (loomMemAlloc) tests.
add_executable(loom_registered_rank
  ${loom_coll_dir}/registered_rank_main.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/test_util.cc)
target_link_libraries(loom_registered_rank PRIVATE loom_static GTest::gtest)

add_executable(loom_coll_tests
  ${loom_coll_dir}/coll_case.cc
  ${loom_coll_dir}/coll_harness.cc
  ${loom_coll_dir}/allreduce_test.cc
  ${loom_coll_dir}/bcast_reduce_test.cc
  ${loom_coll_dir}/gather_scatter_test.cc
  ${loom_coll_dir}/p2p_group_test.cc
  ${loom_coll_dir}/group_test.cc
  ${loom_coll_dir}/stream_test.cc
  ${loom_coll_dir}/stream_p2p_test.cc
  ${loom_coll_dir}/coll_bad_input_test.cc
  ${loom_coll_dir}/process_coll_test.cc
  ${loom_coll_dir}/protocol_algo_test.cc
  ${loom_coll_dir}/fast_path_test.cc
  ${loom_coll_dir}/memory_test.cc
  ${loom_coll_dir}/binding_test.cc
  ${loom_coll_dir}/registered_test.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/test_util.cc)
target_link_libraries(loom_coll_tests PRIVATE loom_static GTest::gtest_main)
add_dependencies(loom_coll_tests loom_coll_rank loom_registered_rank loom_test_rank)

foreach(target loom_coll_rank loom_registered_rank loom_coll_tests)
  target_compile_options(${target} PRIVATE ${loom_warnings})
  target_compile_definitions(${target} PRIVATE
    LOOM_TEST_RANK_BINARY="$<TARGET_FILE:loom_test_rank>"
    LOOM_COLL_RANK_BINARY="$<TARGET_FILE:loom_coll_rank>"
    LOOM_REGISTERED_RANK_BINARY="$<TARGET_FILE:loom_registered_rank>")
endforeach()

gtest_discover_tests(loom_coll_tests
  PROPERTIES ENVIRONMENT "LOOM_SOCKET_IFNAME=lo" ENVIRONMENT_MODIFICATION "LOOM_TIMEOUT=set:60" TIMEOUT 300
  DISCOVERY_TIMEOUT 60)
