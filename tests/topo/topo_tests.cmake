# Topology tests (tests/topo): every fixture of a real server loads with the right devices,
# pairing and NVLink matrix; bad files give clear errors; communicators expose the system view;
# loom-topo prints it. Included from tests/CMakeLists.txt.
set(loom_topo_dir ${CMAKE_CURRENT_SOURCE_DIR}/topo)

# A rank of the multi-process topology test.
add_executable(loom_topo_rank ${loom_topo_dir}/topo_rank_main.cc ${CMAKE_CURRENT_SOURCE_DIR}/test_util.cc)
target_link_libraries(loom_topo_rank PRIVATE loom_static GTest::gtest)
target_compile_options(loom_topo_rank PRIVATE ${loom_warnings})
target_compile_definitions(loom_topo_rank PRIVATE
  LOOM_TEST_RANK_BINARY="$<TARGET_FILE:loom_test_rank>")

add_executable(loom_topo_tests
  ${loom_topo_dir}/fixture_test.cc
  ${loom_topo_dir}/load_error_test.cc
  ${loom_topo_dir}/nccl_xml_test.cc
  ${loom_topo_dir}/path_class_test.cc
  ${loom_topo_dir}/comm_topo_test.cc
  ${loom_topo_dir}/process_topo_test.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/test_util.cc)
target_link_libraries(loom_topo_tests PRIVATE loom_static GTest::gtest_main)
target_compile_options(loom_topo_tests PRIVATE ${loom_warnings})
target_compile_definitions(loom_topo_tests PRIVATE
  LOOM_TEST_RANK_BINARY="$<TARGET_FILE:loom_test_rank>"
  LOOM_TOPO_FIXTURES="${loom_topo_dir}/fixtures"
  LOOM_TOPO_RANK_BINARY="$<TARGET_FILE:loom_topo_rank>")
add_dependencies(loom_topo_tests loom_test_rank loom_topo_rank)
gtest_discover_tests(loom_topo_tests
  PROPERTIES ENVIRONMENT "LOOM_SOCKET_IFNAME=lo" ENVIRONMENT_MODIFICATION "LOOM_TIMEOUT=set:60" TIMEOUT 120
  DISCOVERY_TIMEOUT 60)

# The tool on a fixture: devices, matrix, legend and pairing lines.
add_test(NAME loom_topo_tool_xml
  COMMAND bash ${loom_topo_dir}/check_loom_topo.sh $<TARGET_FILE:loom-topo> ${loom_topo_dir}/fixtures)
