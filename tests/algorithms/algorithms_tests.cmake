# Pure unit tests of algorithms/ (rank arithmetic and schedules), run in an in-memory
# simulator with no network. Included from tests/CMakeLists.txt.
add_executable(loom_algorithm_tests
  ${CMAKE_CURRENT_LIST_DIR}/alltoall_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/chain_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/doubling_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/ring_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/slicing_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/tree_test.cc
)
target_link_libraries(loom_algorithm_tests PRIVATE loom_static GTest::gtest_main)
target_compile_options(loom_algorithm_tests PRIVATE ${loom_warnings})
gtest_discover_tests(loom_algorithm_tests DISCOVERY_TIMEOUT 60)

# The headers must stay C++17 and constexpr, for nvcc: compile a check at that standard.
add_library(loom_algorithms_cxx17_check OBJECT ${CMAKE_CURRENT_LIST_DIR}/cxx17_check.cc)
set_target_properties(loom_algorithms_cxx17_check PROPERTIES CXX_STANDARD 17)
target_include_directories(loom_algorithms_cxx17_check PRIVATE ${PROJECT_SOURCE_DIR})
target_compile_options(loom_algorithms_cxx17_check PRIVATE ${loom_warnings})
add_dependencies(loom_algorithm_tests loom_algorithms_cxx17_check)
