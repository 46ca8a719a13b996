# Topology: hwloc discovery, NCCL topology files, the node description ranks exchange, path
# classes, the system view.
list(APPEND loom_sources
  src/topo/node_topology.cc
  src/topo/discovery.cc
  src/topo/hwloc_reader.cc
  src/topo/nccl_xml_reader.cc
  src/topo/xml_tree.cc
  src/topo/path_class.cc
  src/topo/ring_search.cc
  src/topo/system.cc
  src/topo/system_exchange.cc
)
