# The multi-host test: 3 "hosts" as network namespaces on a bridge, links rate-limited with
# tbf, 2 rank processes per host numbered interleaved (run_netns_test.sh). Needs root and
# `ip netns`; skipped (exit 77) otherwise. Included from tests/CMakeLists.txt.
add_executable(loom_netns_rank
  ${CMAKE_CURRENT_LIST_DIR}/netns_rank.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/test_util.cc)
target_link_libraries(loom_netns_rank PRIVATE loom_static GTest::gtest)
target_compile_options(loom_netns_rank PRIVATE ${loom_warnings})
target_compile_definitions(loom_netns_rank PRIVATE
  LOOM_TEST_RANK_BINARY="$<TARGET_FILE:loom_test_rank>")

add_test(NAME netns_multihost
  COMMAND ${CMAKE_CURRENT_LIST_DIR}/run_netns_test.sh
    $<TARGET_FILE:loom_coll_rank> $<TARGET_FILE:loom_netns_rank>)
set_tests_properties(netns_multihost PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 900 RUN_SERIAL TRUE)
