# algorithms/: rank arithmetic and collective schedules (ring, chain, double binary tree,
# pairwise). Header-only and pure, so host code and CUDA kernels include the same files; they
# are reached as "algorithms/<name>.h" through the project root on the include path, and there
# is nothing to compile here. Included from the top-level CMakeLists.txt; this list is for
# IDEs and for anyone who wants to install or lint the headers.
set(loom_algorithm_headers
  ${CMAKE_CURRENT_LIST_DIR}/alltoall.h
  ${CMAKE_CURRENT_LIST_DIR}/chain.h
  ${CMAKE_CURRENT_LIST_DIR}/doubling.h
  ${CMAKE_CURRENT_LIST_DIR}/hierarchical.h
  ${CMAKE_CURRENT_LIST_DIR}/primitives.h
  ${CMAKE_CURRENT_LIST_DIR}/ring.h
  ${CMAKE_CURRENT_LIST_DIR}/ring_order.h
  ${CMAKE_CURRENT_LIST_DIR}/slicing.h
  ${CMAKE_CURRENT_LIST_DIR}/tree.h
  ${CMAKE_CURRENT_LIST_DIR}/walker.h
)
