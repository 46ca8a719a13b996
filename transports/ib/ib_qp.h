// One reliable-connected queue pair with its completion queue and completion channel: the
// verbs objects of one direction of one ib connection, owned together (RAII) and brought up
// RESET -> INIT -> RTR -> RTS with the attributes below.
//
// Attributes. They follow the values large InfiniBand and RoCE deployments run with (NCCL's
// defaults): ack timeout 20 (4.096 us x 2^20, about 4 s per try), 7 retries, RNR retry 7
// (retry forever: a receiver always has receives posted, so RNR only means it is slow),
// minimum RNR timer 12 (0.64 ms), one outstanding RDMA read or atomic (loom posts none), path
// MTU the smaller of the two ports' active MTUs, GRH with hop limit 255 on RoCE.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <string>

#include "transports/ib/ib_devices.h"
#include "transports/wait.h"

namespace loom::transport::ib {

// How the peer reaches this queue pair: what each side sends in its setup blob.
struct QpAddress {
  uint32_t qpn = 0;
  uint32_t psn = 0;  // first packet sequence number (24 bits)
  uint16_t lid = 0;
  uint8_t infiniband = 1;  // link layer: 1 InfiniBand (LID), 0 Ethernet (GID)
  uint8_t mtu = 0;         // ibv_mtu
  uint8_t gid[16] = {};
};

class QueuePair {
 public:
  // Creates the channel, CQ (sendDepth + recvDepth entries) and QP on `port`. `link` names the
  // connection in errors. Throws SystemError when the device refuses.
  QueuePair(const IbPort& port, int sendDepth, int recvDepth, std::string link);
  ~QueuePair();
  QueuePair(const QueuePair&) = delete;
  QueuePair& operator=(const QueuePair&) = delete;

  QpAddress address() const;
  void toInit();
  void toRtr(const QpAddress& remote);
  void toRts();
  // Moves the QP to the error state, which makes the NIC stop every work request in flight.
  void toError();

  // Posts `n` receives without buffers: each takes one write with immediate.
  void postReceives(int n);
  // One RDMA write with immediate, signaled, of `nsge` pieces to (remoteAddr, rkey).
  void writeWithImm(ibv_sge* sge, int nsge, uint64_t remoteAddr, uint32_t rkey, uint32_t imm,
                    uint64_t wrId);
  // One RDMA write without immediate, unsignaled: it takes no receive at the peer and gives no
  // completion here. It must be followed by a signaled work request, whose completion frees
  // its place in the send queue too.
  void write(ibv_sge* sge, int nsge, uint64_t remoteAddr, uint32_t rkey);
  // Polls up to `n` completions; a failed one throws RemoteError naming the link, the status
  // and `peer`. Returns how many were polled.
  int poll(ibv_wc* wc, int n, int peer);
  // For armWait: acknowledges the channel's pending events and asks for the next one. The
  // caller polls once more afterwards (a completion may have come before the request).
  void armNotify(WaitSet& set);
  // Throws RemoteError when a fatal event of this QP or its port was reported (ib_async.h).
  void checkFatal(int peer) const;
  // After poll() threw: whether the completion failed by this side's own fault (a local error
  // status, or a fatal event of this QP or its port), which no peer's exit explains.
  bool failedHere() const { return failedHere_; }

  const std::string& link() const { return link_; }

 private:
  void destroy();
  const IbPort& port_;
  std::string link_;
  ibv_comp_channel* channel_ = nullptr;
  ibv_cq* cq_ = nullptr;
  ibv_qp* qp_ = nullptr;
  uint32_t psn_ = 0;
  ibv_mtu mtu_ = IBV_MTU_1024;
  bool failedHere_ = false;
};

}  // namespace loom::transport::ib
