# Soak (tests/soak): random collectives and point-to-point calls with exact checks over rank
# processes and every transport. Included from tests/CMakeLists.txt. The short run is a CI
# test; the full one (loom_soak --calls 10000) is in docs/testing.md.
add_executable(loom_soak ${CMAKE_CURRENT_SOURCE_DIR}/soak/soak.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/test_util.cc)
target_link_libraries(loom_soak PRIVATE loom_static GTest::gtest)
target_compile_options(loom_soak PRIVATE ${loom_warnings})
target_compile_definitions(loom_soak PRIVATE
  LOOM_TEST_RANK_BINARY="$<TARGET_FILE:loom_test_rank>")

add_test(NAME soak_short COMMAND loom_soak --calls 600 --ranks 3 --seed 1)
set_tests_properties(soak_short PROPERTIES TIMEOUT 900
  ENVIRONMENT "LOOM_SOCKET_IFNAME=lo;LOOM_TIMEOUT=120")
