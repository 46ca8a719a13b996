// Topology discovery with hwloc: this machine (loaded once per process and cached, since init
// time matters) or a topology file (LOOM_TOPO_FILE, fixtures, `loom-topo --xml`), turned into
// a NodeTopology. A file is hwloc XML (root <topology>, read by hwloc) or NCCL's topology XML
// (root <system>, read by nccl_xml_reader.cc); its root element tells which.
//
// hwloc 2.9 traps handled here (see tests/topo/fixtures/README.md):
//  - I/O objects appear only with an I/O types filter, even from XML; we keep the important
//    ones (GPUs, NICs, bridges), which is also what keeps discovery fast.
//  - GPUs are found by their PCI vendor (0x10de) and class (0x0302 3D, 0x0300 VGA), because
//    some files store them as COPROC OS devices without a subtype, or not at all.
//  - hwloc_get_common_ancestor_obj() crashes on I/O objects: we record each device's chain of
//    PCI bridges and compare chains instead.
//  - The NVLink transitive closure zeroes direct links unless an NVSwitch is present, so it is
//    applied only then.
#pragma once

#include <memory>
#include <string>

#include "src/topo/node_topology.h"

struct hwloc_topology;

namespace loom::topo {

struct XmlElement;

// A loaded topology and what loom read from it: an hwloc topology, or the text of an NCCL
// topology file.
class LoadedTopology {
 public:
  LoadedTopology(std::shared_ptr<hwloc_topology> hwloc, NodeTopology node)
      : hwloc_(std::move(hwloc)), node_(std::move(node)) {}
  LoadedTopology(std::string ncclXml, NodeTopology node)
      : ncclXml_(std::move(ncclXml)), node_(std::move(node)) {}
  const NodeTopology& node() const { return node_; }
  // The topology as a file LOOM_TOPO_FILE and --xml load back: hwloc 2 XML, or the NCCL file's
  // own text.
  std::string exportXml() const;

 private:
  std::shared_ptr<hwloc_topology> hwloc_;  // null for an NCCL file
  std::string ncclXml_;
  NodeTopology node_;
};

// Loads a topology file, hwloc or NCCL XML. A missing, empty or malformed file, a newer hwloc
// format (hwloc 3) or a file of neither kind throws InvalidArgument naming the file and the
// reason (and the line, for NCCL files).
std::shared_ptr<const LoadedTopology> loadXmlFile(const std::string& path);
// The same from XML text already in memory; `name` is used in messages.
std::shared_ptr<const LoadedTopology> loadXmlText(const std::string& xml, const std::string& name);
// Discovers this machine. Throws SystemError when hwloc cannot.
std::shared_ptr<const LoadedTopology> discoverThisMachine();

// What a communicator uses: `xmlFile` when not empty, else this machine; either is loaded once
// per process (per file) and shared by every later caller.
std::shared_ptr<const LoadedTopology> loadCached(const std::string& xmlFile);

// Reads a NodeTopology out of a loaded hwloc topology (exposed for tests and tools).
NodeTopology describe(hwloc_topology* topology, const std::string& source);
// The same out of a parsed NCCL topology file (root <system>); `source` names it in messages.
NodeTopology describeNcclXml(const XmlElement& root, const std::string& source);

}  // namespace loom::topo
