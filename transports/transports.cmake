# Transports: included from the top-level CMakeLists.txt once loom_sources is defined.
list(APPEND loom_sources
  transports/registry.cc
  transports/slot_ring.cc
  transports/shm/direct_read.cc
  transports/shm/fd_passing.cc
  transports/shm/fd_server.cc
  transports/shm/ll_connection.cc
  transports/shm/registered_read.cc
  transports/shm/shm_segment.cc
  transports/shm/shm_transport.cc
  transports/socket/socket_connection.cc
  transports/socket/socket_transport.cc
  transports/wait.cc
)
