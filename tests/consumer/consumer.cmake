# Registers the install_consumer test: install this build into a scratch prefix, then build and
# run tests/consumer against it through find_package(loom) and through pkg-config.
# Included from tests/CMakeLists.txt; it needs the whole build done, as ctest runs after it.
add_test(NAME install_consumer
  COMMAND bash ${PROJECT_SOURCE_DIR}/tests/consumer/run_consumer_test.sh
    ${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR} ${CMAKE_CURRENT_BINARY_DIR}/consumer_work)
# The consumer is built with this build's cmake, generator and C compiler.
set_tests_properties(install_consumer PROPERTIES
  TIMEOUT 300
  ENVIRONMENT "LOOM_SOCKET_IFNAME=lo;CMAKE_COMMAND=${CMAKE_COMMAND};CMAKE_GENERATOR=${CMAKE_GENERATOR};CC=${CMAKE_C_COMPILER}")
