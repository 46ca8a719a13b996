# Tests of the reduce/copy primitives (src/kernels): conversions, reduceCopy on every CPU ISA
# variant this machine runs, and crossCoreCopy. Included from tests/CMakeLists.txt.
add_executable(loom_kernel_tests
  ${CMAKE_CURRENT_LIST_DIR}/cross_core_copy_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/ll_words_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/numeric_types_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/reduce_copy_group_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/reduce_copy_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/reduce_copy_isa_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/reduce_copy_semantics_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/step_operands_test.cc)
target_link_libraries(loom_kernel_tests PRIVATE loom_static GTest::gtest_main)
# The tests compute the per-element definition themselves; like the kernels, without FMA
# contraction (it would only matter if the whole build targets an FMA-capable -march).
target_compile_options(loom_kernel_tests PRIVATE ${loom_warnings} -ffp-contract=off)
gtest_discover_tests(loom_kernel_tests PROPERTIES TIMEOUT 300 DISCOVERY_TIMEOUT 60)
