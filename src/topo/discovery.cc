// Loading hwloc topologies: from this machine or from XML, with clear errors, cached per
// process. Reading loom's description out of them is in hwloc_reader.cc.
#include "src/topo/discovery.h"

#include <hwloc.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>

#include "src/base/error.h"
#include "src/base/logging.h"
#include "src/topo/xml_tree.h"

namespace loom::topo {
namespace {

using TopologyPtr = std::shared_ptr<hwloc_topology>;

TopologyPtr newTopology() {
  hwloc_topology_t raw = nullptr;
  if (hwloc_topology_init(&raw) != 0) throwSystemError("hwloc_topology_init", errno);
  TopologyPtr topology(raw, hwloc_topology_destroy);
  // Without this no PCI or OS devices appear, even from XML; "important" keeps GPUs, NICs and
  // the bridges above them and skips the rest, which keeps discovery fast.
  hwloc_topology_set_io_types_filter(raw, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
  // Plugins loom does not need: the Linux backend finds PCI devices in sysfs by itself, and
  // the libpciaccess plugin leaks memory on every load (LeakSanitizer sees it in each rank);
  // OpenCL and GL devices are not what loom looks for, and loading their libraries is slow.
  for (const char* plugin : {"pci", "opencl", "gl"})
    hwloc_topology_set_components(raw, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, plugin);
  return topology;
}

// The version attribute of the <topology> root, or "" when there is none.
std::string xmlVersion(const std::string& xml, size_t rootAt) {
  size_t end = xml.find('>', rootAt);
  std::string tag = xml.substr(rootAt, end == std::string::npos ? std::string::npos : end - rootAt);
  size_t v = tag.find("version=\"");
  if (v == std::string::npos) return "";
  v += 9;
  return tag.substr(v, tag.find('"', v) - v);
}

// hwloc's own messages about bad XML go to stderr; these checks give the common reasons in
// the exception itself, with what to do.
void precheckXml(const std::string& xml, const std::string& name) {
  LOOM_ENFORCE(!xml.empty(), InvalidArgument, "topology file '", name,
               "' is empty; give an hwloc XML file (lstopo --of xml FILE) or an NCCL topology "
               "file");
  size_t root = xml.find("<topology");
  LOOM_ENFORCE(root != std::string::npos, InvalidArgument, "topology file '", name,
               "' has no <topology> element (hwloc XML) nor a <system> root (NCCL's topology "
               "XML); write one with lstopo --of xml FILE, or NCCL_TOPO_DUMP_FILE");
  std::string version = xmlVersion(xml, root);
  LOOM_ENFORCE(version.empty() || std::atoi(version.c_str()) < 3, InvalidArgument,
               "topology file '", name, "' is hwloc XML version ", version, ", which this hwloc (",
               HWLOC_VERSION,
               ") cannot import (it reads versions 1.x and 2.x); export it again with an hwloc "
               "2.x lstopo");
}

}  // namespace

std::string LoadedTopology::exportXml() const {
  if (!hwloc_) return ncclXml_;
  char* buffer = nullptr;
  int length = 0;
  if (hwloc_topology_export_xmlbuffer(hwloc_.get(), &buffer, &length, 0) != 0)
    throwSystemError("hwloc_topology_export_xmlbuffer", errno);
  std::string xml(buffer, length > 0 ? static_cast<size_t>(length - 1) : 0);  // drops the \0
  hwloc_free_xmlbuffer(hwloc_.get(), buffer);
  return xml;
}

std::shared_ptr<const LoadedTopology> loadXmlText(const std::string& xml, const std::string& name) {
  std::string root = xmlRootName(xml);
  if (root == "system") {
    NodeTopology node = describeNcclXml(*parseXml(xml, name), name);
    return std::make_shared<LoadedTopology>(xml, std::move(node));
  }
  precheckXml(xml, name);
  TopologyPtr topology = newTopology();
  // hwloc wants the length including the terminating NUL.
  if (hwloc_topology_set_xmlbuffer(topology.get(), xml.c_str(), static_cast<int>(xml.size() + 1)) !=
      0) {
    int err = errno;
    throw InvalidArgument(strCat("topology file '", name, "' is not valid hwloc XML: hwloc says ",
                                 std::strerror(err),
                                 " (its parser printed the details on stderr)"));
  }
  if (hwloc_topology_load(topology.get()) != 0) {
    int err = errno;
    throw InvalidArgument(
        strCat("topology file '", name, "' could not be loaded: hwloc_topology_load failed with ",
               std::strerror(err), " (its parser printed the details on stderr)"));
  }
  NodeTopology node = describe(topology.get(), name);
  return std::make_shared<LoadedTopology>(std::move(topology), std::move(node));
}

std::shared_ptr<const LoadedTopology> loadXmlFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    int err = errno;
    throw InvalidArgument(strCat("cannot open topology file '", path, "': ", std::strerror(err),
                                 "; check LOOM_TOPO_FILE or the path given"));
  }
  std::ostringstream text;
  text << in.rdbuf();
  return loadXmlText(text.str(), path);
}

std::shared_ptr<const LoadedTopology> discoverThisMachine() {
  TopologyPtr topology = newTopology();
  if (hwloc_topology_load(topology.get()) != 0) throwSystemError("hwloc_topology_load", errno);
  NodeTopology node = describe(topology.get(), "this machine");
  return std::make_shared<LoadedTopology>(std::move(topology), std::move(node));
}

std::shared_ptr<const LoadedTopology> loadCached(const std::string& xmlFile) {
  // One load per process and file: hwloc's PCI scan is the slow part of init. Failures are
  // not cached, so a fixed file is picked up by the next communicator.
  static std::mutex mutex;
  static std::map<std::string, std::shared_ptr<const LoadedTopology>> cache;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = cache.find(xmlFile);
  if (it != cache.end()) return it->second;
  auto loaded = xmlFile.empty() ? discoverThisMachine() : loadXmlFile(xmlFile);
  cache.emplace(xmlFile, loaded);
  return loaded;
}

}  // namespace loom::topo
