#include "src/tune/cluster_model.h"

namespace loom::tune {

// Shared memory on the reference machine (src/tune/README.md says how these were measured and
// how to measure them again): per-hop latency of the Simple protocol (head/tail counters,
// slots of LOOM_BUFFSIZE/8) and of LL (one flag per 8-byte word), one channel's copy rate,
// and the memory bandwidth all ranks of a host share.
constexpr ProtoCost kShmSimple{6.0, 3.0};
// LL's flags save Simple's tail-counter round trip, ~0.1 us a hop, and move data at 0.9 GB/s
// (half of every word is a flag): LL pays up to ~256-512 B (calibrate.sh; src/tune/README.md).
constexpr ProtoCost kShmLL{kShmSimple.latencyUs - 0.1, 0.9};
constexpr double kShmTotalGBs = 8.0;
// TCP between hosts: per-hop latency of a slot over a socket (a round of the kernel's
// loopback or a veth pair); one channel's 2 streams fill the link.
constexpr double kTcpLatencyUs = 40.0;
constexpr double kOpOverheadUs = 3.0;
constexpr double kChannelOverheadUs = 1.0;

ClusterModel defaultModel(int nodes, int ranksPerNode, double netGBs, int channels) {
  ClusterModel m;
  m.nodes = nodes;
  m.ranksPerNode = ranksPerNode;
  m.intra = LinkParams{kShmSimple, kShmLL, kShmTotalGBs, 0.5};
  const ProtoCost tcp{kTcpLatencyUs, netGBs};
  m.inter = LinkParams{tcp, tcp, netGBs};
  m.channelsMin = m.channelsMax = channels;
  m.opOverheadUs = kOpOverheadUs;
  m.channelOverheadUs = kChannelOverheadUs;
  return m;
}

ClusterModel gpuServerModel(int nodes) {
  ClusterModel m;
  m.nodes = nodes;
  m.ranksPerNode = 4;
  // NVLink: ~300 GB/s per GPU, a channel (one SM pair) ~20 GB/s; LL: half the rate, a third of
  // the latency.
  m.intra = LinkParams{ProtoCost{2.0, 20.0}, ProtoCost{0.6, 10.0}, 4 * 300.0, 0.5};
  // 4 NICs of 50 GB/s (400 Gbit/s): ~12 GB/s per channel, 200 GB/s per node.
  m.inter = LinkParams{ProtoCost{8.0, 12.0}, ProtoCost{4.0, 6.0}, 4 * 50.0};
  m.channelsMin = 1;
  m.channelsMax = 16;
  m.opOverheadUs = 5.0;
  m.channelOverheadUs = 0.2;
  return m;
}

}  // namespace loom::tune
