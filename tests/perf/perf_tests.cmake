# Tests of the benchmark harness (perf/harness) and smoke runs of every *_perf binary.
# Included from tests/CMakeLists.txt. Smoke runs check results (#wrong = 0, exit 0), never
# speed: they use small sizes and few iterations.
if(NOT LOOM_BUILD_PERF)
  return()
endif()
set(loom_perf_test_dir ${CMAKE_CURRENT_SOURCE_DIR}/perf)

add_executable(loom_perf_harness_tests
  ${loom_perf_test_dir}/harness_options_test.cc
  ${loom_perf_test_dir}/harness_collectives_test.cc
  ${loom_perf_test_dir}/harness_data_test.cc
  ${loom_perf_test_dir}/harness_report_test.cc
  ${loom_perf_test_dir}/harness_failure_test.cc)
target_link_libraries(loom_perf_harness_tests PRIVATE loom_perf_harness GTest::gtest_main)
target_compile_options(loom_perf_harness_tests PRIVATE ${loom_warnings})
gtest_discover_tests(loom_perf_harness_tests
  PROPERTIES ENVIRONMENT "LOOM_SOCKET_IFNAME=lo" ENVIRONMENT_MODIFICATION "LOOM_TIMEOUT=set:60" TIMEOUT 120
  DISCOVERY_TIMEOUT 60)

# Smoke runs: each binary at 2 ranks, as threads (-t 2) and as processes launched the torchrun
# way (RANK/WORLD_SIZE/LOOM_COMM_ID), and under mpirun when MPI was found; the checker parses
# the table (and the -J JSON for thread runs).
find_package(Python3 COMPONENTS Interpreter)
find_program(LOOM_MPIRUN NAMES mpirun)
if(Python3_FOUND)
  set(loom_perf_check ${loom_perf_test_dir}/check_perf_run.py)
  set(loom_perf_small -b 8 -e 64K -f 4 -w 1 -n 2)
  foreach(coll IN LISTS LOOM_PERF_COLLECTIVES)
    add_test(NAME perf_smoke_threads_${coll}
      COMMAND ${Python3_EXECUTABLE} ${loom_perf_check} --mode threads --ranks 2 --json
        -- $<TARGET_FILE:${coll}_perf> ${loom_perf_small})
    add_test(NAME perf_smoke_env_${coll}
      COMMAND ${Python3_EXECUTABLE} ${loom_perf_check} --mode env --ranks 2
        -- $<TARGET_FILE:${coll}_perf> ${loom_perf_small})
    set(loom_perf_smoke_tests perf_smoke_threads_${coll} perf_smoke_env_${coll})
    if(LOOM_PERF_HAVE_MPI AND LOOM_MPIRUN)
      add_test(NAME perf_smoke_mpi_${coll}
        COMMAND ${Python3_EXECUTABLE} ${loom_perf_check} --mode mpi --ranks 2
          --mpirun ${LOOM_MPIRUN} -- $<TARGET_FILE:${coll}_perf> ${loom_perf_small})
      list(APPEND loom_perf_smoke_tests perf_smoke_mpi_${coll})
      list(APPEND loom_perf_mpirun_tests perf_smoke_mpi_${coll})
    endif()
    set_tests_properties(${loom_perf_smoke_tests} PROPERTIES
      ENVIRONMENT "LOOM_SOCKET_IFNAME=lo;LOOM_TIMEOUT=60" TIMEOUT 180)
  endforeach()
  # Every type and op, every root, 2 threads x 2 ranks each (groups), blocking, NULL streams.
  add_test(NAME perf_smoke_all_types_ops
    COMMAND ${Python3_EXECUTABLE} ${loom_perf_check} --mode threads --ranks 2
      -- $<TARGET_FILE:all_reduce_perf> -g 2 -d all -o all -b 4 -e 4K -f 8 -w 1 -n 1)
  add_test(NAME perf_smoke_reduce_every_root
    COMMAND ${Python3_EXECUTABLE} ${loom_perf_check} --mode threads --ranks 3
      -- $<TARGET_FILE:reduce_perf> -r -1 -o all -d all -b 64 -e 1K -f 16 -w 0 -n 1 -z 1 -y 1 -m 2)
  set_tests_properties(perf_smoke_all_types_ops perf_smoke_reduce_every_root PROPERTIES
    ENVIRONMENT "LOOM_SOCKET_IFNAME=lo;LOOM_TIMEOUT=60" TIMEOUT 300)
  # -R 1: buffers from loomMemAlloc, 2 processes, sizes up to several single-copy steps.
  add_test(NAME perf_smoke_env_register
    COMMAND ${Python3_EXECUTABLE} ${loom_perf_check} --mode env --ranks 2
      -- $<TARGET_FILE:all_reduce_perf> -R 1 -b 8 -e 4M -f 32 -w 1 -n 2)
  set_tests_properties(perf_smoke_env_register PROPERTIES
    ENVIRONMENT "LOOM_SOCKET_IFNAME=lo;LOOM_TIMEOUT=60;LOOM_BUFFSIZE=1048576" TIMEOUT 300)
  # Native against composed collectives, checked, at 3 ranks (uneven blocks) and 2 processes.
  add_test(NAME perf_smoke_p2p_vs_coll_threads
    COMMAND ${Python3_EXECUTABLE} ${loom_perf_check} --mode threads --ranks 3 --format p2p
      -- $<TARGET_FILE:p2p_vs_coll> -b 8 -e 256K -f 32 -w 1 -n 2)
  add_test(NAME perf_smoke_p2p_vs_coll_env
    COMMAND ${Python3_EXECUTABLE} ${loom_perf_check} --mode env --ranks 2 --format p2p
      -- $<TARGET_FILE:p2p_vs_coll> -b 8 -e 256K -f 32 -w 1 -n 2)
  set_tests_properties(perf_smoke_p2p_vs_coll_threads perf_smoke_p2p_vs_coll_env PROPERTIES
    ENVIRONMENT "LOOM_SOCKET_IFNAME=lo;LOOM_TIMEOUT=60" TIMEOUT 300)
  # The machine's limits docs/performance.md quotes, and perf/compare itself at one small size
  # (its table and ratios; Open MPI and Gloo columns where they are built).
  add_test(NAME perf_smoke_host_limits COMMAND $<TARGET_FILE:host_limits> 8)
  string(CONCAT loom_host_limits_tail
    "at once: [0-9.]+ GB/s each direction[\r\n]+"
    "two opposite loopback TCP streams, one thread per process, 2 connections: [0-9.]+ GB/s "
    "each direction[\r\n]+memory traffic of two processes copying 64 MiB at once: [0-9.]+ GB/s "
    "\\(reads \\+ writes\\)[\r\n]+"
    "one copy from another process \\(process_vm_readv of 1 MiB, 4 KiB pages\\): [0-9.]+ GB/s")
  set_tests_properties(perf_smoke_host_limits PROPERTIES TIMEOUT 120
    PASS_REGULAR_EXPRESSION "${loom_host_limits_tail}")
  # The per-line costs perf/model/medium_model reads: every kind at every size (the CMA pull
  # only where the kernel lets a process read its child).
  add_test(NAME perf_smoke_host_limits_lines COMMAND $<TARGET_FILE:host_limits> --lines)
  string(CONCAT loom_host_lines_tail
    "line_read_from_peer_ns_2048k [0-9.]+[\r\n]+line_write_after_peer_ns_2048k [0-9.]+[\r\n]+"
    "line_memcpy_to_peer_ns_2048k [0-9.]+[\r\n]+line_memcpy_from_peer_ns_2048k [0-9.]+[\r\n]+"
    "line_reduce_from_peer_ns_2048k [0-9.]+[\r\n]+line_copy_local_ns_2048k [0-9.]+[\r\n]+"
    "(line_cma_pull_ns_2048k [0-9.]+[\r\n]+)?line_stream_to_peer_ns_2048k [0-9.]+[\r\n]+"
    "line_memcpy_streamed_ns_2048k [0-9.]+[\r\n]+line_reduce_streamed_ns_2048k [0-9.]+[\r\n]+"
    "cache_line_round_trip_after_ns [0-9]+")
  set_tests_properties(perf_smoke_host_limits_lines PROPERTIES TIMEOUT 120
    PASS_REGULAR_EXPRESSION "${loom_host_lines_tail}")
  # The model's pricing on fixed constants and runs (tests/perf/model_fixture/README.md works
  # each line out by hand): `cpus` is the fixture host's CPU count.
  function(loom_model_predict_test name cpus expected)
    set(lines lines.json)
    set(runs runs.csv)
    if(ARGC GREATER 3)
      set(lines ${ARGV3})
    endif()
    if(ARGC GREATER 4)
      set(runs ${ARGV4})
    endif()
    set(fixture ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/model_fixture)
    add_test(NAME ${name}
      COMMAND ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/perf/model/medium_model predict
        --cpus ${cpus} --sizes 1M --runs ${fixture}/${runs} --constants ${fixture}/${lines})
    set_tests_properties(${name} PROPERTIES TIMEOUT 60
      PASS_REGULAR_EXPRESSION "${expected}" FAIL_REGULAR_EXPRESSION "Traceback")
  endfunction()
  # A 2-rank AllReduce of 1 MiB (loom 162.4 us, Intel MPI 113.6): a CPU per rank, so the ring
  # goes in 4 pieces, as the planner cuts them.
  loom_model_predict_test(perf_model_predict 2
    "all_reduce  2    1M   far \\|     162\\.4     150\\.0 \\[ 1\\]   \\+8% \\|      113\\.6     150\\.0 \\[ 1\\]  -24% \\| call 0\\.5 sync 6\\.3 peer 155\\.6 local 0\\.0")
  # The same call with both ranks on one CPU: every line at the 2 MiB turn's price (the CPU
  # keeps 4 MiB in use), the peer's lines at a local copy's (it shares the CPU's cache), the
  # data terms doubled (loom 222.6 us, Intel MPI 304.1).
  loom_model_predict_test(perf_model_predict_shared_cpu 1
    "all_reduce  2    1M   far \\|     222\\.6     150\\.0 \\[ 1\\]  \\+48% \\|      304\\.1     150\\.0 \\[ 1\\] \\+103% \\| call 0\\.5 sync 0\\.9 peer 221\\.2 local 0\\.0")
  # The 2-rank AllReduce of 1 MiB with near and far runs, and line costs sampled in each
  # state: each state is priced with its own (near: loom 80.1 us, far: 162.4 as above).
  loom_model_predict_test(perf_model_predict_states 2
    "far \\|     162\\.4     150\\.0 \\[ 1\\]   \\+8% .*near \\|      80\\.1      80\\.0 \\[ 1\\]   \\+0% \\|       56\\.7      80\\.0 \\[ 1\\]  -29% \\| call 0\\.2 sync 2\\.1 peer 77\\.8"
    lines_states.json runs_states.csv)
  # The 2-rank AllReduce of 1 MiB where host_limits measured streamed lines too: the way
  # policy keeps the fastest way, and the streamed ring (loom 64.1 us) is cheaper than the ring.
  loom_model_predict_test(perf_model_predict_streamed 2
    "all_reduce  2    1M   far \\|      64\\.1     150\\.0 \\[ 1\\]  -57% \\|      113\\.6     150\\.0 \\[ 1\\]  -24% \\| call 0\\.5 sync 6\\.3 peer 57\\.3 local 0\\.0"
    lines_streamed.json)
  # A 2-rank AllGather of 1 MiB, a CPU per rank: the pull policy keeps the faster way, and
  # pulling each block into the output (loom 41.5 us) is cheaper than the ring's two copies.
  loom_model_predict_test(perf_model_predict_pulled 2
    "all_gather  2    1M   far \\|      41\\.5     150\\.0 \\[ 1\\]  -72% \\|       52\\.7     150\\.0 \\[ 1\\]  -65% \\| call 0\\.5 sync 0\\.0 peer 24\\.6 local 16\\.4")
  # A 4-rank AllGather of 1 MiB on 2 CPUs: one exchange with staged sends, a third of the
  # peers on the rank's own CPU (loom 174.8 us, Intel MPI 215.5).
  loom_model_predict_test(perf_model_predict_staged_exchange 2
    "all_gather  4    1M   far \\|     174\\.8     150\\.0 \\[ 1\\]  \\+17% \\|      215\\.5     150\\.0 \\[ 1\\]  \\+44% \\| call 2\\.0 sync 0\\.8 peer 122\\.9 local 49\\.2")
  # Not in sanitizer builds: there mpi_coll_perf aborts at exit under mpirun with vader (LSan
  # with abort_on_error, inside Open MPI's teardown), which says nothing about loom.
  if(NOT LOOM_SANITIZE)
    add_test(NAME perf_smoke_compare
      COMMAND ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/perf/compare
        --build ${PROJECT_BINARY_DIR} --colls all_reduce --ranks 2 --transports shm
        --sizes 8,64K --repeats 1 --small-iters 50)
    set_tests_properties(perf_smoke_compare PROPERTIES TIMEOUT 300
      PASS_REGULAR_EXPRESSION "## all_reduce, 2 ranks, shm"
      FAIL_REGULAR_EXPRESSION "Traceback;failed")
  endif()
  # The baselines perf/compare measures against, checked the same way.
  set(loom_perf_baseline_tests)
  if(TARGET mpi_coll_perf AND LOOM_MPIRUN)
    foreach(coll all_reduce all_gather reduce_scatter broadcast alltoall)
      add_test(NAME perf_smoke_mpi_coll_${coll}
        COMMAND ${Python3_EXECUTABLE} ${loom_perf_check} --mode mpi --ranks 2
          --mpirun ${LOOM_MPIRUN} -- $<TARGET_FILE:mpi_coll_perf> --coll ${coll} ${loom_perf_small})
      list(APPEND loom_perf_baseline_tests perf_smoke_mpi_coll_${coll})
      list(APPEND loom_perf_mpirun_tests perf_smoke_mpi_coll_${coll})
    endforeach()
  endif()
  if(TARGET gloo_coll_perf)
    foreach(coll all_reduce all_gather reduce_scatter broadcast alltoall)
      add_test(NAME perf_smoke_gloo_coll_${coll}
        COMMAND ${Python3_EXECUTABLE} ${loom_perf_check} --mode env --ranks 3
          -- $<TARGET_FILE:gloo_coll_perf> --coll ${coll} ${loom_perf_small})
      list(APPEND loom_perf_baseline_tests perf_smoke_gloo_coll_${coll})
    endforeach()
    add_test(NAME perf_smoke_gloo_coll_all_reduce_hd
      COMMAND ${Python3_EXECUTABLE} ${loom_perf_check} --mode env --ranks 3
        -- $<TARGET_FILE:gloo_coll_perf> --coll all_reduce --algo halving_doubling
           ${loom_perf_small})
    list(APPEND loom_perf_baseline_tests perf_smoke_gloo_coll_all_reduce_hd)
  endif()
  if(loom_perf_baseline_tests)
    set_tests_properties(${loom_perf_baseline_tests} PROPERTIES
      ENVIRONMENT "LOOM_SOCKET_IFNAME=lo;LOOM_TIMEOUT=60" TIMEOUT 180)
  endif()
  # perf/plot draws a chart from a real -J report.
  find_program(LOOM_GNUPLOT NAMES gnuplot)
  if(LOOM_GNUPLOT)
    add_test(NAME perf_plot_from_json
      COMMAND bash -c "set -e; d=$(mktemp -d); trap 'rm -rf $d' EXIT; \
        $<TARGET_FILE:all_reduce_perf> -t 2 -b 8 -e 64K -f 8 -w 1 -n 2 -J $d/run.json >/dev/null; \
        ${PROJECT_SOURCE_DIR}/perf/plot $d/run.json -o $d/chart.png --title smoke; \
        test -s $d/chart.png && head -c 8 $d/chart.png | grep -q PNG")
    set_tests_properties(perf_plot_from_json PROPERTIES
      ENVIRONMENT "LOOM_SOCKET_IFNAME=lo;LOOM_TIMEOUT=60" TIMEOUT 120)
  endif()
  # --device cuda without a device (no driver here; CUDA_VISIBLE_DEVICES hides any GPU) fails
  # with one message, never a crash.
  add_test(NAME perf_device_cuda_refused
    COMMAND ${Python3_EXECUTABLE} ${loom_perf_check} --expect-refusal "no CUDA device found"
      -- $<TARGET_FILE:all_reduce_perf> --device cuda -t 2)
  set_tests_properties(perf_device_cuda_refused PROPERTIES
    ENVIRONMENT "LOOM_SOCKET_IFNAME=lo;LOOM_CUDA_SIM=0;CUDA_VISIBLE_DEVICES=-1" TIMEOUT 60)
  # --device cuda on loom's simulated devices (LOOM_CUDA_SIM=1: a test double of CUDA on the
  # CPU, so these check results, never speed): buffers, streams and event timing through the
  # device-runtime seam. 4 ranks as threads on 2 devices (two ranks per device); 2 processes of
  # 2 ranks sharing one device; -g 2 groups with every type and op. sendrecv, gather and
  # scatter are loomSend/loomRecv in a group, which runs once on its streams.
  set(loom_perf_cuda_sim_env "LOOM_SOCKET_IFNAME=lo;LOOM_TIMEOUT=60;LOOM_CUDA_SIM=1")
  set(loom_perf_cuda_sim_tests)
  foreach(coll all_reduce all_gather reduce_scatter broadcast reduce alltoall sendrecv gather
      scatter)
    add_test(NAME perf_cuda_sim_threads_${coll}
      COMMAND ${Python3_EXECUTABLE} ${loom_perf_check} --mode threads --ranks 4 --json
        -- $<TARGET_FILE:${coll}_perf> --device cuda ${loom_perf_small})
    set_tests_properties(perf_cuda_sim_threads_${coll} PROPERTIES
      ENVIRONMENT "${loom_perf_cuda_sim_env};LOOM_CUDA_SIM_DEVICES=2")
    list(APPEND loom_perf_cuda_sim_tests perf_cuda_sim_threads_${coll})
  endforeach()
  add_test(NAME perf_cuda_sim_env_all_reduce
    COMMAND ${Python3_EXECUTABLE} ${loom_perf_check} --mode env --ranks 2
      -- $<TARGET_FILE:all_reduce_perf> --device cuda -t 2 ${loom_perf_small})
  set_tests_properties(perf_cuda_sim_env_all_reduce PROPERTIES
    ENVIRONMENT "${loom_perf_cuda_sim_env};LOOM_CUDA_SIM_DEVICES=1")
  add_test(NAME perf_cuda_sim_groups_all_types_ops
    COMMAND ${Python3_EXECUTABLE} ${loom_perf_check} --mode threads --ranks 2
      -- $<TARGET_FILE:all_reduce_perf> --device cuda -g 2 -d all -o all -b 4 -e 4K -f 8 -w 1 -n 1)
  set_tests_properties(perf_cuda_sim_groups_all_types_ops PROPERTIES
    ENVIRONMENT "${loom_perf_cuda_sim_env};LOOM_CUDA_SIM_DEVICES=2")
  add_test(NAME perf_cuda_sim_groups_sendrecv
    COMMAND ${Python3_EXECUTABLE} ${loom_perf_check} --mode threads --ranks 2
      -- $<TARGET_FILE:sendrecv_perf> --device cuda -g 2 -b 4 -e 1M -f 16 -w 1 -n 2)
  set_tests_properties(perf_cuda_sim_groups_sendrecv PROPERTIES
    ENVIRONMENT "${loom_perf_cuda_sim_env};LOOM_CUDA_SIM_DEVICES=2")
  list(APPEND loom_perf_cuda_sim_tests perf_cuda_sim_env_all_reduce
    perf_cuda_sim_groups_all_types_ops perf_cuda_sim_groups_sendrecv)
  set_tests_properties(${loom_perf_cuda_sim_tests} PROPERTIES TIMEOUT 180)
endif()

# Two mpirun at once race on Open MPI's session directory (/tmp/ompi.<host>.<uid>: one removes
# it while the other creates its pid directory in it), so they never run side by side.
if(loom_perf_mpirun_tests)
  set_tests_properties(${loom_perf_mpirun_tests} PROPERTIES RESOURCE_LOCK mpirun)
endif()
