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

# The ib transport: its pure parts, and how it behaves where it cannot run (no library, no
# RDMA support in the kernel). The data path runs over the software NIC (tests/softnic).
if(LOOM_WITH_IBVERBS)
  add_executable(loom_ib_tests
    ${loom_transport_test_dir}/ib_fallback_test.cc
    ${loom_transport_test_dir}/ib_unit_test.cc
    ${loom_transport_test_dir}/../test_util.cc)
  target_link_libraries(loom_ib_tests PRIVATE loom_static GTest::gtest_main)
  target_include_directories(loom_ib_tests PRIVATE ${LOOM_IBVERBS_INCLUDE_DIR})
  target_compile_options(loom_ib_tests PRIVATE ${loom_warnings})
  target_compile_definitions(loom_ib_tests PRIVATE
    LOOM_TEST_RANK_BINARY="$<TARGET_FILE:loom_test_rank>")
  gtest_discover_tests(loom_ib_tests
    PROPERTIES ENVIRONMENT "LOOM_SOCKET_IFNAME=lo" TIMEOUT 120
    DISCOVERY_TIMEOUT 60)
endif()
# No file but the verbs interface calls an ibv_ function.
add_test(NAME ib_verbs_only_in_table
  COMMAND ${loom_transport_test_dir}/ib_verbs_grep.sh ${PROJECT_SOURCE_DIR})

# The ib data path over the software NIC (a test double from tests/softnic, loaded through
# LOOM_IBVERBS_LIB like libibverbs): ranks as threads here, as processes in the collective
# tests below.
if(LOOM_WITH_IBVERBS AND EXISTS ${CMAKE_CURRENT_LIST_DIR}/../softnic/CMakeLists.txt)
  add_executable(loom_ib_softnic_tests
    ${loom_transport_test_dir}/ib_softnic_test.cc
    ${loom_transport_test_dir}/transport_test_util.cc
    ${loom_transport_test_dir}/../test_util.cc)
  target_link_libraries(loom_ib_softnic_tests PRIVATE loom_static GTest::gtest_main
    ${CMAKE_DL_LIBS})
  target_include_directories(loom_ib_softnic_tests PRIVATE ${LOOM_IBVERBS_INCLUDE_DIR})
  target_compile_options(loom_ib_softnic_tests PRIVATE ${loom_warnings})
  target_compile_definitions(loom_ib_softnic_tests PRIVATE
    LOOM_TEST_RANK_BINARY="$<TARGET_FILE:loom_transport_test_rank>"
    LOOM_SOFTNIC_LIB="$<TARGET_FILE:loom_softnic>")
  add_dependencies(loom_ib_softnic_tests loom_softnic)
  gtest_discover_tests(loom_ib_softnic_tests
    PROPERTIES ENVIRONMENT "LOOM_SOCKET_IFNAME=lo" TIMEOUT 300 LABELS softnic
    DISCOVERY_TIMEOUT 60)

  # The same table filled from the software NIC linked in (loom_softnic_lookup), not dlopen'ed:
  # its own binary, so the two copies of the test double never meet in one process.
  add_executable(loom_ib_inprocess_tests
    ${loom_transport_test_dir}/ib_inprocess_test.cc
    ${loom_transport_test_dir}/transport_test_util.cc
    ${loom_transport_test_dir}/../test_util.cc)
  target_link_libraries(loom_ib_inprocess_tests PRIVATE loom_static loom_softnic_static
    GTest::gtest_main)
  target_compile_options(loom_ib_inprocess_tests PRIVATE ${loom_warnings})
  target_compile_definitions(loom_ib_inprocess_tests PRIVATE
    LOOM_TEST_RANK_BINARY="$<TARGET_FILE:loom_transport_test_rank>")
  gtest_discover_tests(loom_ib_inprocess_tests
    PROPERTIES ENVIRONMENT "LOOM_SOCKET_IFNAME=lo" TIMEOUT 120 LABELS softnic
    DISCOVERY_TIMEOUT 60)

  # The collective suites with every pair forced onto ib over the software NIC: every
  # collective x type x op at 1-8 thread ranks, then rank processes (the "shm" cases, which
  # set no transport of their own, and a peer killed mid-AllReduce).
  set(loom_ib_env "LOOM_TRANSPORT=ib;LOOM_IBVERBS_LIB=$<TARGET_FILE:loom_softnic>"
    "LOOM_SOCKET_IFNAME=lo;LOOM_TIMEOUT=60")
  add_test(NAME ib_softnic_coll_threads COMMAND loom_coll_tests
    "--gtest_filter=Shm/AllReduceRanks.*:Shm/AllReduceGroupStyle.*:Shm/BroadcastRanks.*:Shm/ReduceRanks.*:Shm/GatherScatterRanks.*:Shm/RingRanks.*")
  add_test(NAME ib_softnic_coll_processes COMMAND loom_coll_tests
    "--gtest_filter=*CollProcesses.*shm*:Transports/PeerKilledDuringAllReduce.*shm*")
  set_tests_properties(ib_softnic_coll_threads ib_softnic_coll_processes PROPERTIES
    ENVIRONMENT "${loom_ib_env}" TIMEOUT 600 LABELS softnic)

  # The multi-host test (tests/netns: 3 namespaces x 2 rank processes, every collective and
  # AllReduce forced through hier, ring, tree and doubling) with every pair on ib, the soft
  # NICs bound to each namespace's veth.
  add_test(NAME netns_multihost_ib
    COMMAND ${CMAKE_CURRENT_LIST_DIR}/../netns/run_netns_test.sh
      $<TARGET_FILE:loom_coll_rank> $<TARGET_FILE:loom_netns_rank>)
  set_tests_properties(netns_multihost_ib PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 900
    RUN_SERIAL TRUE LABELS softnic
    ENVIRONMENT "LOOM_TRANSPORT=ib;LOOM_IBVERBS_LIB=$<TARGET_FILE:loom_softnic>;SOFTNIC_IFNAME=loomnet0")
endif()
