# The GPU check (docs/gpu-check.md). Included from the top-level CMakeLists.txt.
#   loom_gpu_cases   its collective cases and their CPU-vs-CUDA comparison, plain C++ in every
#                    build: the simulated runtime's tests use them too
#   loom_gpu_check   the program whose subcommands are tools/gpu_check.sh's phases (CUDA
#                    builds only)
add_library(loom_gpu_cases STATIC ${CMAKE_CURRENT_LIST_DIR}/coll_cases.cc)
target_link_libraries(loom_gpu_cases PUBLIC loom_static)
target_compile_options(loom_gpu_cases PRIVATE ${loom_warnings})

if(LOOM_WITH_CUDA)
  add_executable(loom_gpu_check
    ${CMAKE_CURRENT_LIST_DIR}/main.cc
    ${CMAKE_CURRENT_LIST_DIR}/kernel_check.cc
    ${CMAKE_CURRENT_LIST_DIR}/coll_check.cc
    ${CMAKE_CURRENT_LIST_DIR}/stream_check.cc
    ${CMAKE_CURRENT_LIST_DIR}/device_kernels.cu)
  target_link_libraries(loom_gpu_check PRIVATE loom_gpu_cases)
  target_compile_options(loom_gpu_check PRIVATE $<$<COMPILE_LANGUAGE:CXX>:${loom_warnings}>
    $<$<COMPILE_LANGUAGE:CUDA>:${loom_cuda_flags}>)
endif()
