# loom-trace-merge on fixture dumps with known divergences (tests/tools/fixtures). Included
# from tests/CMakeLists.txt.
find_package(Python3 COMPONENTS Interpreter)
if(Python3_FOUND)
  add_test(NAME loom_trace_merge
    COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/tools/trace_merge_test.py
            ${PROJECT_BINARY_DIR}/loom-trace-merge ${CMAKE_CURRENT_SOURCE_DIR}/tools/fixtures)
  set_tests_properties(loom_trace_merge PROPERTIES TIMEOUT 60)
endif()
