// The topology exchange at communicator init. Each rank contributes its node description as a
// variable-sized blob: one allGather of sizes, then one of blobs padded to the largest.
#include "src/topo/system_exchange.h"

#include <hwloc.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <thread>

#include "src/base/env.h"
#include "src/base/error.h"
#include "src/base/logging.h"
#include "src/bootstrap/bootstrap.h"

namespace loom::topo {
namespace {

// Loads LOOM_TOPO_FILE or this machine; nullptr (and the reason) when that fails.
std::shared_ptr<const LoadedTopology> loadLocal(std::string* reason) {
  std::string file = envString(EnvVar::LOOM_TOPO_FILE);
  try {
    return loadCached(file);
  } catch (const Error& e) {
    *reason = e.what();
    if (!file.empty())
      LOOM_WARN(kLogGraph, "LOOM_TOPO_FILE ignored: ", e.what(), "; using a minimal topology");
    else
      LOOM_INFO(kLogGraph, "topology discovery failed (", e.what(), "); using a minimal topology");
    return nullptr;
  }
}

std::vector<RankDescription> exchange(Bootstrap& bootstrap, const RankDescription& mine) {
  int nranks = bootstrap.nranks();
  int rank = bootstrap.rank();
  std::vector<uint8_t> blob = serialize(mine.node);
  struct Header {
    uint64_t hostHash;
    uint64_t blobSize;
    int32_t pid;
    int32_t device;
    int32_t numa;
    int32_t gpu;
  };
  std::vector<Header> headers(nranks);
  headers[rank] = Header{mine.hostHash, blob.size(), mine.pid, mine.device, mine.numa, mine.gpu};
  bootstrap.allGather(headers.data(), sizeof(Header));
  size_t maxSize = 0;
  for (const Header& h : headers) maxSize = std::max<size_t>(maxSize, h.blobSize);
  std::vector<uint8_t> blobs(maxSize * nranks);
  std::copy(blob.begin(), blob.end(), blobs.begin() + maxSize * rank);
  bootstrap.allGather(blobs.data(), maxSize);
  std::vector<RankDescription> all(nranks);
  for (int r = 0; r < nranks; ++r) {
    const Header& h = headers[r];
    all[r].hostHash = h.hostHash;
    all[r].pid = h.pid;
    all[r].device = h.device;
    all[r].numa = h.numa;
    all[r].gpu = h.gpu;
    all[r].node = r == rank ? mine.node : deserialize(blobs.data() + maxSize * r, h.blobSize);
  }
  return all;
}

std::string hostName() {
  char name[256] = {0};
  gethostname(name, sizeof name - 1);
  return name;
}

void writeDump(const LoadedTopology* loaded, const System& system, int rank) {
  std::string path =
      Logger::expandFilePattern(envString(EnvVar::LOOM_TOPO_DUMP_FILE), hostName(), getpid());
  std::ofstream out(path, std::ios::trunc);
  out << dumpText(loaded, system);
  out.close();
  if (!out)
    LOOM_WARN(kLogGraph, "cannot write LOOM_TOPO_DUMP_FILE '", path, "'; check the directory");
  else
    LOOM_INFO(kLogGraph, "rank ", rank, " wrote its topology to ", path);
}

}  // namespace

NodeTopology fallbackTopology(const std::string& reason) {
  NodeTopology node;
  node.hostName = hostName();
  node.source = "fallback (" + reason + ")";
  int cpus = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  node.cores = node.pus = cpus;
  std::string all = cpus > 1 ? strCat("0-", cpus - 1) : "0";
  node.packages.push_back(Package{0, all, cpus});
  node.numaNodes.push_back(NumaNode{0, 0, all, 0});
  return node;
}

int currentNuma(const NodeTopology& node) {
  cpu_set_t affinity;
  CPU_ZERO(&affinity);
  if (sched_getaffinity(0, sizeof affinity, &affinity) == 0) {
    hwloc_bitmap_t bound = hwloc_bitmap_alloc();
    hwloc_bitmap_t numa = hwloc_bitmap_alloc();
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
      if (CPU_ISSET(cpu, &affinity)) hwloc_bitmap_set(bound, static_cast<unsigned>(cpu));
    int found = -1;
    for (size_t i = 0; i < node.numaNodes.size() && found < 0; ++i) {
      if (hwloc_bitmap_list_sscanf(numa, node.numaNodes[i].cpuset.c_str()) == 0 &&
          hwloc_bitmap_isincluded(bound, numa))
        found = static_cast<int>(i);
    }
    hwloc_bitmap_free(numa);
    hwloc_bitmap_free(bound);
    if (found >= 0) return found;
  }
  return node.numaOfCpu(sched_getcpu());
}

std::string dumpText(const LoadedTopology* loaded, const System& system) {
  std::string view = system.describe();
  // "--" may not appear inside an XML comment.
  for (size_t at = 0; (at = view.find("--", at)) != std::string::npos;) view.replace(at, 2, "- ");
  std::string text = loaded ? loaded->exportXml() : std::string();
  return text + "<!-- loom system view\n" + view + "-->\n";
}

System discoverSystem(Bootstrap& bootstrap, uint64_t hostHash, int device) {
  std::string reason;
  std::shared_ptr<const LoadedTopology> loaded = loadLocal(&reason);
  RankDescription mine;
  mine.hostHash = hostHash;
  mine.pid = static_cast<int32_t>(getpid());
  mine.device = device;
  mine.node = loaded ? loaded->node() : fallbackTopology(reason);
  mine.numa = currentNuma(mine.node);
  // Only this process knows its CUDA_VISIBLE_DEVICES, so the rank resolves its GPU itself.
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  mine.gpu = mine.node.gpuForCudaDevice(device, visible ? visible : "");
  std::vector<RankDescription> all = exchange(bootstrap, mine);
  System system(all);
  int rank = bootstrap.rank();
  const RankPlace& me = system.rank(rank);
  const NodeTopology& node = system.nodes()[me.node];
  LOOM_INFO(kLogGraph, "topology: ", system.nodes().size(), " node(s); this node (", node.source,
            ") has ", node.gpus.size(), " GPU(s), ", node.nics.size(), " NIC(s), ",
            node.numaNodes.size(), " NUMA node(s); rank on NUMA ",
            me.numa >= 0 ? std::to_string(node.numaNodes[me.numa].osIndex) : "?");
  if (rank == 0) LOOM_TRACE(kLogGraph, system.describe());
  if (envIsSet(EnvVar::LOOM_TOPO_DUMP_FILE)) {
    // One file per process: the lowest rank of this process writes it, for the first
    // communicator only (usually the world), so that later splits do not replace it.
    bool lowest = true;
    for (int r = 0; r < rank; ++r)
      if (all[r].hostHash == hostHash && all[r].pid == mine.pid) lowest = false;
    static std::atomic<bool> written{false};
    if (lowest && !written.exchange(true)) writeDump(loaded.get(), system, rank);
  }
  return system;
}

}  // namespace loom::topo
