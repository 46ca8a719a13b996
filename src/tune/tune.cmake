# src/tune: the topology-aware ring/tree layout of a communicator and the alpha-beta tuner
# that picks AllReduce's algorithm, protocol and channels. Included from the top-level
# CMakeLists.txt right after loom_sources is defined.
list(APPEND loom_sources
  ${CMAKE_CURRENT_LIST_DIR}/cluster_model.cc
  ${CMAKE_CURRENT_LIST_DIR}/comm_topology.cc
  ${CMAKE_CURRENT_LIST_DIR}/cost_model.cc
  ${CMAKE_CURRENT_LIST_DIR}/decision_table.cc
  ${CMAKE_CURRENT_LIST_DIR}/gpu_model.cc
  ${CMAKE_CURRENT_LIST_DIR}/node_model.cc)

# Decision tables for simulated clusters (a development tool, not installed).
add_executable(loom-tune-table ${CMAKE_CURRENT_LIST_DIR}/loom_tune_table.cc)
target_link_libraries(loom-tune-table PRIVATE loom_static)
