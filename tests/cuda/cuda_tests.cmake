# Tests of the device-runtime seam (src/cuda) and CUDA communicators. Included from
# tests/CMakeLists.txt. Two binaries, since the process's runtime is chosen once, from the
# environment, which each binary's main() sets:
#   loom_cuda_tests      the real runtime on this machine (no GPU: it reports none, and CUDA
#                        communicators are refused with a message)
#   loom_cuda_sim_tests  the simulated runtime (LOOM_CUDA_SIM=1, two devices): a test double
#                        of CUDA, and CUDA communicators on it
add_executable(loom_cuda_tests
  ${CMAKE_CURRENT_LIST_DIR}/cudart_main.cc
  ${CMAKE_CURRENT_LIST_DIR}/cudart_runtime_test.cc
  ${PROJECT_SOURCE_DIR}/tests/test_util.cc)
target_link_libraries(loom_cuda_tests PRIVATE loom_static GTest::gtest)
target_compile_options(loom_cuda_tests PRIVATE ${loom_warnings})
target_compile_definitions(loom_cuda_tests PRIVATE
  LOOM_TEST_RANK_BINARY="$<TARGET_FILE:loom_test_rank>")
gtest_discover_tests(loom_cuda_tests
  PROPERTIES ENVIRONMENT "LOOM_SOCKET_IFNAME=lo" TIMEOUT 120
  DISCOVERY_TIMEOUT 60)

add_executable(loom_cuda_sim_tests
  ${CMAKE_CURRENT_LIST_DIR}/sim_main.cc
  ${CMAKE_CURRENT_LIST_DIR}/sim_runtime_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/cuda_comm_sim_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/cuda_ipc_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/cuda_executor_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/sim_group_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/sim_proxy_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/sim_gdr_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/two_hosts.cc
  ${PROJECT_SOURCE_DIR}/tests/transports/transport_test_util.cc
  ${PROJECT_SOURCE_DIR}/tests/test_util.cc)
target_link_libraries(loom_cuda_sim_tests PRIVATE loom_gpu_cases GTest::gtest)
target_compile_options(loom_cuda_sim_tests PRIVATE ${loom_warnings})
target_compile_definitions(loom_cuda_sim_tests PRIVATE
  LOOM_TEST_RANK_BINARY="$<TARGET_FILE:loom_test_rank>"
  LOOM_TOPO_FIXTURES="${PROJECT_SOURCE_DIR}/tests/topo/fixtures")
# GPU ranks on two hosts over the ib transport run on the software NIC (tests/softnic).
if(LOOM_WITH_IBVERBS AND EXISTS ${CMAKE_CURRENT_LIST_DIR}/../softnic/CMakeLists.txt)
  target_compile_definitions(loom_cuda_sim_tests PRIVATE
    LOOM_SOFTNIC_LIB="$<TARGET_FILE:loom_softnic>")
  add_dependencies(loom_cuda_sim_tests loom_softnic)
endif()
gtest_discover_tests(loom_cuda_sim_tests
  PROPERTIES ENVIRONMENT "LOOM_SOCKET_IFNAME=lo" TIMEOUT 120 DISCOVERY_TIMEOUT 60)

# The prepared GPU check's dry run (tools/gpu_check.sh): its phases that need no GPU, under
# the simulated runtime, so the script and loom_gpu_check stay working between GPU loans.
if(TARGET loom_gpu_check)
  add_test(NAME gpu_check_dry_run
    COMMAND bash ${PROJECT_SOURCE_DIR}/tools/gpu_check.sh --dry-run ${CMAKE_BINARY_DIR})
  set_tests_properties(gpu_check_dry_run PROPERTIES
    ENVIRONMENT "LOOM_SOCKET_IFNAME=lo" TIMEOUT 900)
endif()
