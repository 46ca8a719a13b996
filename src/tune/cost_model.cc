#include "src/tune/cost_model.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace loom::tune {
namespace {

const ProtoCost& cost(const LinkParams& l, Proto p) { return p == Proto::kLL ? l.ll : l.simple; }

// Rate of one flow with `channels` channels when `flows` flows share the link.
double rateGBs(const LinkParams& l, Proto p, int channels, int flows) {
  const double total = p == Proto::kLL ? l.totalGBs * l.llShare : l.totalGBs;
  return std::min(channels * cost(l, p).channelGBs, total / std::max(1, flows));
}

int ceilLog2(int n) {
  int d = 0;
  while ((1 << d) < n) ++d;
  return d;
}

// bytes (B) at GB/s -> microseconds.
double transferUs(double bytes, double gbs) { return gbs > 0 ? bytes / (gbs * 1e3) : 0; }

}  // namespace

const char* algoName(Algo a) {
  switch (a) {
    case Algo::kRing:
      return "ring";
    case Algo::kTree:
      return "tree";
    case Algo::kHier:
      return "hier";
  }
  return "?";
}

const char* protoName(Proto p) { return p == Proto::kLL ? "ll" : "simple"; }

double Choice::busGBs() const {
  if (timeUs <= 0 || nranks < 2) return 0;
  return 2.0 * (nranks - 1) / nranks * bytes / (timeUs * 1e3);
}

bool applies(const ClusterModel& m, Algo a) {
  switch (a) {
    case Algo::kRing:
      return true;
    case Algo::kTree:
      return m.nranks() > 2;
    case Algo::kHier:
      return m.nodes > 1 && m.ranksPerNode > 1 && m.uniform;
  }
  return false;
}

double predictUs(const ClusterModel& m, Algo a, Proto p, int c, double bytes) {
  if (!applies(m, a)) return std::numeric_limits<double>::infinity();
  const int n = m.nranks(), N = m.nodes, L = m.ranksPerNode;
  const double latIntra = cost(m.intra, p).latencyUs, latInter = cost(m.inter, p).latencyUs;
  // Every rank of a node moves data over shared memory at once.
  const double intraRate = rateGBs(m.intra, p, c, L);
  double t = m.opOverheadUs + c * m.channelOverheadUs;
  switch (a) {
    case Algo::kRing: {
      if (n == 1) return t;
      const int hops = 2 * (n - 1);
      const double interShare = N > 1 ? static_cast<double>(N) / n : 0.0;
      t += hops * (interShare * latInter + (1 - interShare) * latIntra);
      // One crossing per node per channel: the c channels of the ring share the NICs.
      const double rate = N > 1 ? std::min(intraRate, rateGBs(m.inter, p, c, 1)) : intraRate;
      return t + transferUs(2.0 * (n - 1) / n * bytes, rate);
    }
    case Algo::kTree: {
      const int interDepth = N > 1 ? ceilLog2(N) : 0;
      const int intraDepth = N > 1 ? L - 1 : ceilLog2(n);
      t += 2.0 * (interDepth * latInter + intraDepth * latIntra);
      // Two trees leave each node (one per half of the data), up and down.
      const double rate = N > 1 ? std::min(intraRate, rateGBs(m.inter, p, c, 2)) : intraRate;
      return t + transferUs(bytes, rate / 2);
    }
    case Algo::kHier: {
      const double local = (L - 1) * latIntra + transferUs((L - 1.0) / L * bytes, intraRate);
      // L rings, one per local rank, share the node's NICs.
      const double net = 2.0 * (N - 1) * latInter +
                         transferUs(2.0 * (N - 1) / N * bytes / L, rateGBs(m.inter, p, c, L));
      return t + 2 * local + net;
    }
  }
  return t;
}

Choice best(const ClusterModel& m, double bytes, const std::vector<Algo>& algos,
            const std::vector<Proto>& protos) {
  const std::vector<Algo> allAlgos{Algo::kRing, Algo::kTree, Algo::kHier};
  const std::vector<Proto> allProtos{Proto::kSimple, Proto::kLL};
  Choice out;
  out.timeUs = std::numeric_limits<double>::infinity();
  out.bytes = bytes;
  out.nranks = m.nranks();
  for (Algo a : algos.empty() ? allAlgos : algos) {
    if (!applies(m, a)) continue;
    for (Proto p : protos.empty() ? allProtos : protos) {
      for (int c = std::max(1, m.channelsMin); c <= std::max(m.channelsMin, m.channelsMax); ++c) {
        const double t = predictUs(m, a, p, c, bytes);
        // Strictly better only: ties keep the earlier (simpler) candidate, fewer channels.
        if (t < out.timeUs) {
          out.algo = a;
          out.proto = p;
          out.channels = c;
          out.timeUs = t;
        }
      }
    }
  }
  return out;
}

}  // namespace loom::tune
