# Wire fuzzers (tests/fuzz): mutated bootstrap and connection-setup messages fed to loom's
# parsers in process (loom_wire_fuzz) and to live listeners beside a running job
# (loom_net_fuzz). Included from tests/CMakeLists.txt. The short runs are CI tests; the full
# runs are in docs/testing.md.
set(loom_fuzz_dir ${CMAKE_CURRENT_SOURCE_DIR}/fuzz)

add_executable(loom_wire_fuzz ${loom_fuzz_dir}/wire_fuzz.cc)
target_link_libraries(loom_wire_fuzz PRIVATE loom_static)
target_compile_options(loom_wire_fuzz PRIVATE ${loom_warnings})

add_test(NAME wire_fuzz_short COMMAND loom_wire_fuzz --inputs 50000 --seed 1)
set_tests_properties(wire_fuzz_short PROPERTIES TIMEOUT 600
  ENVIRONMENT "LOOM_SOCKET_IFNAME=lo;LOOM_DEBUG=NONE")

add_executable(loom_net_fuzz ${loom_fuzz_dir}/net_fuzz.cc ${CMAKE_CURRENT_SOURCE_DIR}/test_util.cc)
target_link_libraries(loom_net_fuzz PRIVATE loom_static GTest::gtest)
target_compile_options(loom_net_fuzz PRIVATE ${loom_warnings})
target_compile_definitions(loom_net_fuzz PRIVATE
  LOOM_TEST_RANK_BINARY="$<TARGET_FILE:loom_test_rank>")

add_test(NAME net_fuzz_short COMMAND loom_net_fuzz --frames 3000 --seed 1)
set_tests_properties(net_fuzz_short PROPERTIES TIMEOUT 600
  ENVIRONMENT "LOOM_SOCKET_IFNAME=lo;LOOM_DEBUG=NONE;LOOM_TIMEOUT=60")
