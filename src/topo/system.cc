// The system view: nodes from host hashes, each rank's place on its node, and the link between
// every pair of ranks.
#include "src/topo/system.h"

#include <algorithm>
#include <cstdio>

#include "src/base/strings.h"

namespace loom::topo {

System::System(const std::vector<RankDescription>& ranks) {
  std::vector<uint64_t> hosts;
  ranks_.resize(ranks.size());
  for (size_t r = 0; r < ranks.size(); ++r) {
    const RankDescription& d = ranks[r];
    auto it = std::find(hosts.begin(), hosts.end(), d.hostHash);
    if (it == hosts.end()) {
      hosts.push_back(d.hostHash);
      nodes_.push_back(d.node);  // the lowest rank of a host describes it
      it = hosts.end() - 1;
    }
    RankPlace& place = ranks_[r];
    place.node = static_cast<int>(it - hosts.begin());
    place.pid = d.pid;
    const NodeTopology& node = nodes_[place.node];
    place.numa = d.numa >= 0 && d.numa < static_cast<int>(node.numaNodes.size()) ? d.numa : -1;
    place.package = place.numa >= 0 ? node.numaNodes[place.numa].package : -1;
    place.gpu = d.gpu >= 0 && d.gpu < static_cast<int>(node.gpus.size()) ? d.gpu : -1;
    if (place.gpu >= 0) {
      place.nic = pairGpusWithNics(node)[place.gpu];
      if (place.package < 0) place.package = node.gpus[place.gpu].where.package;
    } else {
      place.nic = nearestNic(node, place.numa, place.package);
    }
  }
  size_t n = ranks_.size();
  links_.resize(n * n);
  for (size_t a = 0; a < n; ++a)
    for (size_t b = 0; b < n; ++b)
      links_[a * n + b] = rankLink(static_cast<int>(a), static_cast<int>(b));
}

// For a CPU rank: an RDMA NIC on its NUMA node, else on its package, else any (plain NICs
// only when the node has no RDMA NIC).
int System::nearestNic(const NodeTopology& node, int numa, int package) const {
  bool anyRdma =
      std::any_of(node.nics.begin(), node.nics.end(), [](const Nic& x) { return x.rdma(); });
  int best = -1, bestScore = 3;
  for (size_t i = 0; i < node.nics.size(); ++i) {
    const Nic& nic = node.nics[i];
    if (anyRdma && !nic.rdma()) continue;
    int score = numa >= 0 && nic.where.numa == numa            ? 0
                : package >= 0 && nic.where.package == package ? 1
                                                               : 2;
    if (score < bestScore) {
      bestScore = score;
      best = static_cast<int>(i);
    }
  }
  return best;
}

Link System::rankLink(int a, int b) const {
  const RankPlace& pa = ranks_[a];
  const RankPlace& pb = ranks_[b];
  if (pa.node != pb.node) {
    // Between nodes the slower of the two NICs bounds the pair.
    auto nicBw = [&](const RankPlace& p) {
      const NodeTopology& node = nodes_[p.node];
      return p.nic >= 0 ? nicBandwidthGBps(node.nics[p.nic]) : 1.25;
    };
    Link link = nominalLink(PathClass::kNetwork);
    link.bandwidthGBps = std::min(nicBw(pa), nicBw(pb));
    return link;
  }
  const NodeTopology& node = nodes_[pa.node];
  if (a == b) return nominalLink(PathClass::kSameProcess);
  // GPU ranks move device memory: ranks sharing a GPU copy inside it, whatever their process.
  if (pa.gpu >= 0 && pb.gpu >= 0) {
    if (pa.gpu == pb.gpu) return nominalLink(PathClass::kSameGpu);
    return devicePath(node, {Endpoint::kGpu, pa.gpu}, {Endpoint::kGpu, pb.gpu});
  }
  if (pa.pid == pb.pid) return nominalLink(PathClass::kSameProcess);
  // Host memory between processes: where they run decides.
  if (pa.numa >= 0 && pa.numa == pb.numa) return nominalLink(PathClass::kSameNuma);
  if (pa.numa < 0 || pb.numa < 0) {
    return nominalLink(node.numaNodes.size() <= 1 ? PathClass::kSameNuma : PathClass::kCrossSocket);
  }
  return nominalLink(pa.package == pb.package ? PathClass::kSameSocket : PathClass::kCrossSocket);
}

std::string formatMatrix(const std::vector<std::string>& names,
                         const std::vector<std::vector<std::string>>& cells) {
  size_t width = 4;
  for (const std::string& s : names) width = std::max(width, s.size());
  for (const auto& row : cells)
    for (const std::string& s : row) width = std::max(width, s.size());
  auto pad = [&](const std::string& s) { return s + std::string(width + 2 - s.size(), ' '); };
  std::string out = pad("");
  for (const std::string& s : names) out += pad(s);
  while (!out.empty() && out.back() == ' ') out.pop_back();
  out += "\n";
  for (size_t r = 0; r < cells.size(); ++r) {
    std::string line = pad(names[r]);
    for (const std::string& s : cells[r]) line += pad(s);
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  return out;
}

std::string System::describe() const {
  std::string out =
      strCat("loom system: ", nodes_.size(), " node(s), ", ranks_.size(), " rank(s)\n");
  for (size_t n = 0; n < nodes_.size(); ++n) {
    const NodeTopology& node = nodes_[n];
    std::string members;
    for (size_t r = 0; r < ranks_.size(); ++r)
      if (ranks_[r].node == static_cast<int>(n)) members += strCat(" ", r);
    out += strCat("node ", n, ": host '", node.hostName, "' from ", node.source, ": ",
                  node.packages.size(), " socket(s), ", node.numaNodes.size(), " NUMA node(s), ",
                  node.cores, " cores, ", node.gpus.size(), " GPU(s), ", node.nics.size(),
                  " NIC(s); ranks", members, "\n");
  }
  for (size_t r = 0; r < ranks_.size(); ++r) {
    const RankPlace& p = ranks_[r];
    const NodeTopology& node = nodes_[p.node];
    out +=
        strCat("rank ", r, ": node ", p.node, ", pid ", p.pid, ", NUMA ",
               p.numa >= 0 ? std::to_string(node.numaNodes[p.numa].osIndex) : "?", ", socket ",
               p.package >= 0 ? std::to_string(p.package) : "?", ", ",
               p.gpu >= 0 ? strCat("GPU", p.gpu, " (", node.gpus[p.gpu].where.busId, ")") : "CPU",
               ", NIC ", p.nic >= 0 ? node.nics[p.nic].name : "none", "\n");
  }
  std::vector<std::string> names;
  std::vector<std::vector<std::string>> cells(ranks_.size());
  for (size_t a = 0; a < ranks_.size(); ++a) {
    names.push_back(strCat("r", a));
    for (size_t b = 0; b < ranks_.size(); ++b) {
      const Link& l = link(static_cast<int>(a), static_cast<int>(b));
      cells[a].push_back(a == b ? "X" : pathClassLabel(l.cls));
    }
  }
  out += "path classes between ranks:\n" + formatMatrix(names, cells);
  for (int c = 0; c < kPathClassCount; ++c) {
    Link l = nominalLink(static_cast<PathClass>(c));
    char line[128];
    std::snprintf(line, sizeof line, "  %-5s %-13s %6.1f GB/s %5.1f us (nominal)\n",
                  pathClassLabel(l.cls), pathClassName(l.cls), l.bandwidthGBps, l.latencyUs);
    out += line;
  }
  return out;
}

}  // namespace loom::topo
