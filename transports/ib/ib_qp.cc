#include "transports/ib/ib_qp.h"

#include <fcntl.h>

#include <cerrno>
#include <cstring>
#include <random>

#include "src/base/error.h"
#include "transports/ib/ib_async.h"
#include "transports/ib/ib_verbs.h"

namespace loom::transport::ib {
namespace {

constexpr uint8_t kTimeout = 20;
constexpr uint8_t kRetryCount = 7;
constexpr uint8_t kRnrRetry = 7;
constexpr uint8_t kMinRnrTimer = 12;
constexpr uint8_t kHopLimit = 255;

uint32_t randomPsn() {
  static thread_local std::mt19937 gen{std::random_device{}()};
  return gen() & 0xffffff;
}

}  // namespace

QueuePair::QueuePair(const IbPort& port, int sendDepth, int recvDepth, std::string link)
    : port_(port), link_(std::move(link)), psn_(randomPsn()), mtu_(port.mtu) {
  const Verbs& v = verbs();
  const IbDevice& dev = IbDevices::instance().devices().at(port.device);
  try {
    channel_ = v.createCompChannel(dev.context);
    if (channel_ == nullptr)
      throwSystemError(strCat(link_, ": creating a completion channel"), errno);
    const int flags = fcntl(channel_->fd, F_GETFL);
    if (flags < 0 || fcntl(channel_->fd, F_SETFL, flags | O_NONBLOCK) != 0)
      throwSystemError(strCat(link_, ": making the completion channel non-blocking"), errno);
    cq_ = v.createCq(dev.context, sendDepth + recvDepth, nullptr, channel_, 0);
    if (cq_ == nullptr) throwSystemError(strCat(link_, ": creating a completion queue"), errno);
    ibv_qp_init_attr init{};
    init.send_cq = cq_;
    init.recv_cq = cq_;
    init.qp_type = IBV_QPT_RC;
    init.cap.max_send_wr = sendDepth;
    init.cap.max_recv_wr = recvDepth;
    init.cap.max_send_sge = 2;
    init.cap.max_recv_sge = 1;
    qp_ = v.createQp(dev.pd, &init);
    if (qp_ == nullptr) throwSystemError(strCat(link_, ": creating an RC queue pair"), errno);
  } catch (...) {
    destroy();
    throw;
  }
}

QueuePair::~QueuePair() { destroy(); }

void QueuePair::destroy() {
  const Verbs& v = verbs();
  if (qp_ != nullptr) {
    forgetQp(qp_->qp_num);
    v.destroyQp(qp_);
    qp_ = nullptr;
  }
  if (cq_ != nullptr) {
    v.destroyCq(cq_);
    cq_ = nullptr;
  }
  if (channel_ != nullptr) {
    v.destroyCompChannel(channel_);
    channel_ = nullptr;
  }
}

QpAddress QueuePair::address() const {
  QpAddress a;
  a.qpn = qp_->qp_num;
  a.psn = psn_;
  a.lid = port_.lid;
  a.infiniband = port_.infiniband ? 1 : 0;
  a.mtu = static_cast<uint8_t>(port_.mtu);
  std::memcpy(a.gid, port_.gid.raw, sizeof(a.gid));
  return a;
}

void QueuePair::toInit() {
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_INIT;
  attr.pkey_index = 0;
  attr.port_num = static_cast<uint8_t>(port_.port);
  attr.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
  const int rc = verbs().modifyQp(
      qp_, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
  if (rc != 0) throwSystemError(strCat(link_, ": moving the queue pair to INIT"), rc);
}

void QueuePair::toRtr(const QpAddress& remote) {
  LOOM_ENFORCE(remote.infiniband == (port_.infiniband ? 1 : 0), InvalidArgument, link_,
               ": one end is on an InfiniBand port and the other on RoCE (", port_.describe(),
               " here); choose ports of one fabric with LOOM_IB_HCA");
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_RTR;
  mtu_ = static_cast<ibv_mtu>(std::min<int>(port_.mtu, remote.mtu));
  attr.path_mtu = mtu_;
  attr.dest_qp_num = remote.qpn;
  attr.rq_psn = remote.psn;
  attr.max_dest_rd_atomic = 1;
  attr.min_rnr_timer = kMinRnrTimer;
  attr.ah_attr.port_num = static_cast<uint8_t>(port_.port);
  attr.ah_attr.sl = 0;
  if (port_.infiniband) {
    attr.ah_attr.dlid = remote.lid;
  } else {
    attr.ah_attr.is_global = 1;
    std::memcpy(attr.ah_attr.grh.dgid.raw, remote.gid, sizeof(remote.gid));
    attr.ah_attr.grh.sgid_index = static_cast<uint8_t>(port_.gidIndex);
    attr.ah_attr.grh.hop_limit = kHopLimit;
  }
  const int rc =
      verbs().modifyQp(qp_, &attr,
                       IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                           IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
  if (rc != 0) throwSystemError(strCat(link_, ": moving the queue pair to RTR"), rc);
}

void QueuePair::toRts() {
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_RTS;
  attr.sq_psn = psn_;
  attr.timeout = kTimeout;
  attr.retry_cnt = kRetryCount;
  attr.rnr_retry = kRnrRetry;
  attr.max_rd_atomic = 1;
  const int rc = verbs().modifyQp(qp_, &attr,
                                  IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                                      IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
  if (rc != 0) throwSystemError(strCat(link_, ": moving the queue pair to RTS"), rc);
}

void QueuePair::toError() {
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_ERR;
  verbs().modifyQp(qp_, &attr, IBV_QP_STATE);  // best effort: the connection is dead anyway
}

void QueuePair::postReceives(int n) {
  for (int i = 0; i < n; ++i) {
    ibv_recv_wr wr{};
    ibv_recv_wr* bad = nullptr;
    wr.wr_id = 0;
    wr.num_sge = 0;
    const int rc = verbs().postRecv(qp_, &wr, &bad);
    if (rc != 0) throwSystemError(strCat(link_, ": posting a receive"), rc);
  }
}

void QueuePair::writeWithImm(ibv_sge* sge, int nsge, uint64_t remoteAddr, uint32_t rkey,
                             uint32_t imm, uint64_t wrId) {
  ibv_send_wr wr{};
  ibv_send_wr* bad = nullptr;
  wr.wr_id = wrId;
  wr.sg_list = sge;
  wr.num_sge = nsge;
  wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.imm_data = imm;  // opaque to the NIC: both ends read it in host order
  wr.wr.rdma.remote_addr = remoteAddr;
  wr.wr.rdma.rkey = rkey;
  const int rc = verbs().postSend(qp_, &wr, &bad);
  if (rc != 0) throwSystemError(strCat(link_, ": posting an RDMA write"), rc);
}

void QueuePair::write(ibv_sge* sge, int nsge, uint64_t remoteAddr, uint32_t rkey) {
  ibv_send_wr wr{};
  ibv_send_wr* bad = nullptr;
  wr.sg_list = sge;
  wr.num_sge = nsge;
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.wr.rdma.remote_addr = remoteAddr;
  wr.wr.rdma.rkey = rkey;
  const int rc = verbs().postSend(qp_, &wr, &bad);
  if (rc != 0) throwSystemError(strCat(link_, ": posting an RDMA write"), rc);
}

namespace {

// Statuses of this side's own faults; the others (retries exceeded, flushed, the remote's
// refusals) may come from a peer that stopped answering.
bool localStatus(ibv_wc_status s) {
  switch (s) {
    case IBV_WC_LOC_LEN_ERR:
    case IBV_WC_LOC_QP_OP_ERR:
    case IBV_WC_LOC_EEC_OP_ERR:
    case IBV_WC_LOC_PROT_ERR:
    case IBV_WC_LOC_ACCESS_ERR:
    case IBV_WC_LOC_RDD_VIOL_ERR:
    case IBV_WC_MW_BIND_ERR:
    case IBV_WC_FATAL_ERR:
      return true;
    default:
      return false;
  }
}

}  // namespace

int QueuePair::poll(ibv_wc* wc, int n, int peer) {
  const Verbs& v = verbs();
  const int got = v.pollCq(cq_, n, wc);
  if (got < 0) throw RemoteError(strCat(link_, ": polling the completion queue failed"));
  for (int i = 0; i < got; ++i) {
    if (wc[i].status == IBV_WC_SUCCESS) continue;
    pollAsyncEvents();
    const std::string fatal = fatalEventFor(qp_->qp_num, port_.device, port_.port);
    failedHere_ = !fatal.empty() || localStatus(wc[i].status);
    throw RemoteError(strCat(link_, ": work completion failed with ", v.statusText(wc[i].status),
                             ", vendor error ", wc[i].vendor_err,
                             fatal.empty() ? "" : strCat(" after ", fatal), ". Rank ", peer,
                             " may have exited, or the RDMA link to it failed"));
  }
  return got;
}

void QueuePair::armNotify(WaitSet& set) {
  const Verbs& v = verbs();
  ibv_cq* cq = nullptr;
  void* context = nullptr;
  unsigned events = 0;
  while (v.getCqEvent(channel_, &cq, &context) == 0) ++events;  // the fd is non-blocking
  if (events > 0) v.ackCqEvents(cq_, events);
  const int rc = v.reqNotifyCq(cq_, 0);
  if (rc != 0) throwSystemError(strCat(link_, ": asking for completion events"), rc);
  set.addFd(channel_->fd, POLLIN);
}

void QueuePair::checkFatal(int peer) const {
  pollAsyncEvents();
  const std::string fatal = fatalEventFor(qp_->qp_num, port_.device, port_.port);
  LOOM_ENFORCE(fatal.empty(), RemoteError, link_, ": ", fatal, ". The connection to rank ", peer,
               " is lost");
}

}  // namespace loom::transport::ib
