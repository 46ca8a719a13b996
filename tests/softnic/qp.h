// TEST DOUBLE: a reliable-connected queue pair of the soft NIC.
//
// Requester side: a worker thread per QP runs the send queue in order, one work request at a
// time over the QP's own TCP connection, and models the RC transport's recovery: a silent or
// unreachable responder costs one transport timeout per try (retry_cnt tries, then
// IBV_WC_RETRY_EXC_ERR), an RNR NAK one RNR timer per try (rnr_retry tries, 7 = forever, then
// IBV_WC_RNR_RETRY_EXC_ERR). Responder side: respond() runs on the connection's server thread,
// checks state, source QP, PSN, keys, bounds and rights, and places the data.
// Any error puts the QP in IBV_QPS_ERR, which completes every outstanding request with
// IBV_WC_WR_FLUSH_ERR, as hardware does.
#pragma once

#include <atomic>
#include <thread>

#include "softnic.h"
#include "wire.h"

namespace softnic {

constexpr int kMaxQueueDepth = 16384;
constexpr int kMaxSge = 16;
constexpr int kMaxCqe = 1 << 20;
constexpr uint32_t kMaxInline = 256;
constexpr uint32_t kPsnMask = 0xffffff;

struct SendWr {
  uint64_t wrId = 0;
  ibv_wr_opcode opcode = IBV_WR_SEND;
  unsigned flags = 0;
  uint32_t imm = 0;
  uint64_t remoteAddr = 0;
  uint32_t rkey = 0;
  std::vector<ibv_sge> sges;
  std::vector<char> inlineData;
};

// What the requester needs of the QP's attributes for one work request, copied under the QP's
// lock so a concurrent ibv_modify_qp cannot change it mid-request.
struct Path {
  uint32_t remoteIpv4 = 0;
  uint16_t remotePort = 0;
  uint32_t destQpn = 0;
  uint32_t psn = 0;
  uint8_t port = 1;
  uint8_t timeout = 0;
  uint8_t retryCnt = 0;
  uint8_t rnrRetry = 0;
};

struct RecvWr {
  uint64_t wrId = 0;
  std::vector<ibv_sge> sges;
};

struct Qp {
  Shell<ibv_qp, Qp> shell{};
  Context* ctx = nullptr;
  Device* dev = nullptr;
  Pd* pd = nullptr;
  Cq* sendCq = nullptr;
  Cq* recvCq = nullptr;
  ibv_qp_init_attr init{};

  std::mutex mu;
  std::condition_variable cv;
  ibv_qp_state state = IBV_QPS_RESET;
  ibv_qp_attr attr{};
  std::deque<SendWr> sq;
  std::deque<RecvWr> rq;
  uint64_t epoch = 0;  // bumped by RESET and destroy: work in flight for an older epoch is void
  bool stop = false;
  uint32_t expectedPsn = 0;  // responder
  bool answeredOne = false;  // responder: expectedPsn - 1 was executed (a retry is a duplicate)
  // Responder calls moving bytes between a request's connection and registered memory, which
  // they do outside mu; destroy waits for them, so that, as on a real NIC, no byte of a region
  // is touched once the QP is gone (a retried READ's second response could otherwise read
  // memory the application freed after destroying the QP and deregistering it).
  int moving = 0;
  uint32_t remoteIpv4 = 0;  // from the RTR destination GID
  uint16_t remotePort = 0;

  uint32_t sqPsn = 0;  // requester: the next request's PSN

  // The requester's connection, owned by the worker thread (destroy only shuts it down).
  std::atomic<int> connFd{-1};
  uint64_t connEpoch = 0;
  std::thread worker;

  uint32_t qpn() const { return shell.ibv.qp_num; }
  void run();
  bool respond(uint32_t srcQpn, const wire::Request& req, int fd);

  // Moves to IBV_QPS_ERR: flushes the receive queue now, the send queue via the worker.
  void enterErrorLocked();
  void completeLocked(Cq* cq, const ibv_wc& wc, bool solicited = false);
  void flushSendQueueLocked();

 private:
  ibv_wc_status execute(const SendWr& wr, const Path& path, uint64_t epoch, uint32_t* byteLen);
  bool exchange(const Path& path, const wire::Request& req, const std::vector<iovec>& iov,
                wire::Response* resp);
  void closeConnection();
  // Sleeps up to ms, waking early when the work request is void (RESET, destroy).
  bool pause(int ms, uint64_t epoch);
};

// Answers a request for a QP this NIC does not have.
bool respondDrop(const wire::Request& req, int fd);
// Microseconds of an RNR timer code (IB spec table), as a NAK carries it.
int rnrTimerUs(int code);

}  // namespace softnic
