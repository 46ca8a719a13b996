# The CPU anchors perf/compare measures loom against beside Open MPI: Intel MPI and MPICH, from
# PyPI into one prefix (perf/baselines/install_anchors). Each gets mpi_coll_perf built from the
# same source as the Open MPI baseline, compiled against that MPI's mpi.h and linked to its
# libmpi (found by path, so Debian's Open MPI that find_package(MPI) picks is never mixed in):
# build/perf/impi_coll_perf and build/perf/mpich_coll_perf. Without the prefix nothing is added.
set(LOOM_PERF_ANCHORS "/opt/loom-anchors" CACHE PATH
    "prefix of the Intel MPI and MPICH anchors (perf/baselines/install_anchors)")

set(loom_perf_anchor_names)
foreach(anchor IN ITEMS impi mpich)
  set(root "${LOOM_PERF_ANCHORS}/${anchor}")
  if(EXISTS "${root}/include/mpi.h" AND EXISTS "${root}/lib/libmpi.so")
    list(APPEND loom_perf_anchor_names ${anchor})
  endif()
endforeach()

if(loom_perf_anchor_names)
  # The harness without MPI: its launcher's MPI part is Open MPI's, which an anchor binary must
  # not link (same function names, other ABI). The baselines start their MPI themselves.
  get_target_property(loom_perf_harness_sources loom_perf_harness SOURCES)
  list(FILTER loom_perf_harness_sources EXCLUDE REGEX "launch_(no)?mpi\\.cc$")
  add_library(loom_perf_harness_nompi STATIC ${loom_perf_harness_sources}
              harness/launch_nompi.cc)
  target_include_directories(loom_perf_harness_nompi PUBLIC ${PROJECT_SOURCE_DIR})
  target_link_libraries(loom_perf_harness_nompi PUBLIC loom Threads::Threads)
  target_compile_options(loom_perf_harness_nompi PRIVATE ${loom_warnings})
  foreach(anchor IN LISTS loom_perf_anchor_names)
    set(root "${LOOM_PERF_ANCHORS}/${anchor}")
    add_executable(${anchor}_coll_perf baselines/mpi_coll_perf.cc)
    target_include_directories(${anchor}_coll_perf BEFORE PRIVATE "${root}/include")
    target_link_libraries(${anchor}_coll_perf PRIVATE loom_perf_harness_nompi
                          "${root}/lib/libmpi.so")
    target_compile_definitions(${anchor}_coll_perf PRIVATE MPICH_SKIP_MPICXX=1)
    target_compile_options(${anchor}_coll_perf PRIVATE ${loom_warnings})
    set_target_properties(${anchor}_coll_perf PROPERTIES BUILD_RPATH "${root}/lib")
  endforeach()
  message(STATUS "perf anchors in ${LOOM_PERF_ANCHORS}: ${loom_perf_anchor_names}")
endif()
