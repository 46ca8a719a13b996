// The tuner's model of GPU ranks: what a ring hop costs over each kind of GPU link (same GPU,
// NVLink, PCIe P2P, through the CPU) and over the network, and how many channels fill a link.
//
// Per channel (one thread block driving one ring) and per hop, by path class:
//   class          channel GB/s  hop us (LL / Simple)  where from
//   same GPU            25          0.4 / 2.0         a channel is one SM; an SM's share of HBM
//                                                    (H100 SXM 3.35 TB/s / 132 SMs, A100 80GB
//                                                    2.0 TB/s / 108 SMs: 19-25 GB/s). NCCL has
//                                                    no figure (it refuses two ranks per GPU):
//                                                    hops are taken under NVLink's, since the
//                                                    flag stays in one GPU's L2; calibrate with
//                                                    tools/gpu_check.sh
//   NVLink              20          0.6 / 3.4         NCCL topo.h SM80_NVLINK_BW 20 (a channel
//                                                    per NVLink); NCCL tuning.cc hwLat, NVLink
//                                                    ring row
//   PCIe (PIX, PHB,     12          1.0 / 5.7         NCCL topo.h PCI_BW 12 (Gen3 x16 as a
//   SYS and the rest)                                 channel moves it); hwLat, PCI ring row
//   network             12          4.0 / 8.0         NCCL topo.h NET_BW 12 per channel; the
//                                                    node's NICs together bound all channels
// A channel never moves more than its link: channel GB/s is min(the figure, the link's own).
// LL carries 4 data bytes in every 8, so its rate is half of Simple's (llShare 0.5).
#pragma once

#include <vector>

#include "src/topo/node_topology.h"
#include "src/topo/system.h"
#include "src/tune/cluster_model.h"

namespace loom::tune {

// Simple and LL over one GPU link; `flows` ranks share the link's total.
LinkParams gpuLinkParams(const topo::Link& link, int flows);

// How many channels it takes to fill `link` (its bandwidth / one channel's), 1 to 16.
int channelsToFill(const topo::Link& link);

// The cluster model of the GPU ranks of `system` on the ring `order` (topo::searchRing):
// inside a node the ring's slowest hop (shared by the ranks of one GPU), between nodes the
// NICs the ranks of a node leave by; channels from 1 to what fills the slower of the two.
ClusterModel gpuModel(const topo::System& system, const std::vector<int>& order);

// For a communicator: when every rank of `system` drives a GPU, `m` takes the GPU links
// inside its nodes (gpuModel's intra and call overheads) and keeps the rest (the network of
// the transports in use, its channel count). Returns false, `m` unchanged, otherwise.
bool useGpuLinksInside(ClusterModel& m, const topo::System& system, const std::vector<int>& order);

// A cluster of `nodes` copies of `node`, `ranksPerGpu` ranks on each of its GPUs (for
// loom-topo --tune and tests): its System and ring search, then gpuModel.
ClusterModel modelForGpuNode(const topo::NodeTopology& node, int nodes, int ranksPerGpu);

}  // namespace loom::tune
