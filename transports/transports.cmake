# Transports: included from the top-level CMakeLists.txt once loom_sources is defined.
list(APPEND loom_sources
  transports/cuda_ipc/cuda_ipc_transport.cc
  transports/proxy/proxy_connection.cc
  transports/registry.cc
  transports/slot_ring.cc
  transports/shm/device_mapping.cc
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
# The ibverbs transport: built against verbs.h only; libibverbs is dlopen'ed at run time.
if(LOOM_WITH_IBVERBS)
  list(APPEND loom_sources
    transports/ib/ib_async.cc
    transports/ib/ib_connection.cc
    transports/ib/ib_devices.cc
    transports/ib/ib_gdr.cc
    transports/ib/ib_hca_filter.cc
    transports/ib/ib_mr_cache.cc
    transports/ib/ib_qp.cc
    transports/ib/ib_transport.cc
    transports/ib/ib_verbs.cc
  )
endif()
