// TEST DOUBLE: the soft NIC's QP verbs: create, the RESET->INIT->RTR->RTS state machine with
// the attribute masks the IB spec requires for RC, posting, and destruction.
#include "qp.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "verbs_impl.h"

namespace softnic {
namespace {

// Required and optional attribute masks per RC transition (IB spec, table "QP state transition
// properties"), beyond IBV_QP_STATE.
struct Transition {
  ibv_qp_state from;
  ibv_qp_state to;
  int required;
  int optional;
};

constexpr int kPathOpt = IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX;
constexpr Transition kTransitions[] = {
    {IBV_QPS_RESET, IBV_QPS_INIT, IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS, 0},
    {IBV_QPS_INIT, IBV_QPS_INIT, 0, IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS},
    {IBV_QPS_INIT, IBV_QPS_RTR,
     IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
         IBV_QP_MIN_RNR_TIMER,
     kPathOpt},
    {IBV_QPS_RTR, IBV_QPS_RTS,
     IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC,
     IBV_QP_CUR_STATE | IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_MIN_RNR_TIMER |
         IBV_QP_PATH_MIG_STATE},
    {IBV_QPS_RTS, IBV_QPS_RTS, 0,
     IBV_QP_CUR_STATE | IBV_QP_ACCESS_FLAGS | IBV_QP_ALT_PATH | IBV_QP_PATH_MIG_STATE |
         IBV_QP_MIN_RNR_TIMER},
};

bool maskAllowed(ibv_qp_state from, ibv_qp_state to, int mask) {
  int extra = mask & ~IBV_QP_STATE;
  if (to == IBV_QPS_RESET || to == IBV_QPS_ERR) return (mask & IBV_QP_STATE) && extra == 0;
  for (const Transition& t : kTransitions) {
    if (t.from != from || t.to != to) continue;
    return (extra & t.required) == t.required && (extra & ~(t.required | t.optional)) == 0;
  }
  return false;
}

// Checks the values the mask names; EINVAL for anything a real RoCE NIC would refuse.
int checkValues(Qp* qp, const ibv_qp_attr& a, int mask) {
  Device* dev = qp->dev;
  if ((mask & IBV_QP_PORT) && (a.port_num < 1 || a.port_num > dev->numPorts)) return EINVAL;
  if ((mask & IBV_QP_PKEY_INDEX) && a.pkey_index != 0) return EINVAL;
  if ((mask & IBV_QP_PATH_MTU) && (a.path_mtu < IBV_MTU_256 || a.path_mtu > IBV_MTU_4096))
    return EINVAL;
  if (mask & IBV_QP_AV) {
    uint32_t ip = 0;
    uint16_t port = 0;
    // RoCE needs the GRH: the destination is the GID, there is no LID routing.
    if (!a.ah_attr.is_global || a.ah_attr.grh.sgid_index != 0 ||
        !decodeGid(a.ah_attr.grh.dgid, &ip, &port))
      return EINVAL;
    if (a.ah_attr.port_num != 0 && a.ah_attr.port_num > dev->numPorts) return EINVAL;
  }
  if ((mask & IBV_QP_DEST_QPN) && a.dest_qp_num > 0xffffff) return EINVAL;
  if ((mask & IBV_QP_RETRY_CNT) && a.retry_cnt > 7) return EINVAL;
  if ((mask & IBV_QP_RNR_RETRY) && a.rnr_retry > 7) return EINVAL;
  if ((mask & IBV_QP_TIMEOUT) && a.timeout > 31) return EINVAL;
  if ((mask & IBV_QP_MIN_RNR_TIMER) && a.min_rnr_timer > 31) return EINVAL;
  if ((mask & IBV_QP_MAX_QP_RD_ATOMIC) && a.max_rd_atomic > 16) return EINVAL;
  if ((mask & IBV_QP_MAX_DEST_RD_ATOMIC) && a.max_dest_rd_atomic > 16) return EINVAL;
  return 0;
}

// Copies the attributes the mask names into the QP's record.
void applyAttrs(ibv_qp_attr& to, const ibv_qp_attr& a, int mask) {
  if (mask & IBV_QP_PKEY_INDEX) to.pkey_index = a.pkey_index;
  if (mask & IBV_QP_PORT) to.port_num = a.port_num;
  if (mask & IBV_QP_ACCESS_FLAGS) to.qp_access_flags = a.qp_access_flags;
  if (mask & IBV_QP_AV) to.ah_attr = a.ah_attr;
  if (mask & IBV_QP_PATH_MTU) to.path_mtu = a.path_mtu;
  if (mask & IBV_QP_DEST_QPN) to.dest_qp_num = a.dest_qp_num;
  if (mask & IBV_QP_RQ_PSN) to.rq_psn = a.rq_psn & kPsnMask;
  if (mask & IBV_QP_MAX_DEST_RD_ATOMIC) to.max_dest_rd_atomic = a.max_dest_rd_atomic;
  if (mask & IBV_QP_MIN_RNR_TIMER) to.min_rnr_timer = a.min_rnr_timer;
  if (mask & IBV_QP_SQ_PSN) to.sq_psn = a.sq_psn & kPsnMask;
  if (mask & IBV_QP_TIMEOUT) to.timeout = a.timeout;
  if (mask & IBV_QP_RETRY_CNT) to.retry_cnt = a.retry_cnt;
  if (mask & IBV_QP_RNR_RETRY) to.rnr_retry = a.rnr_retry;
  if (mask & IBV_QP_MAX_QP_RD_ATOMIC) to.max_rd_atomic = a.max_rd_atomic;
  if (mask & IBV_QP_PATH_MIG_STATE) to.path_mig_state = a.path_mig_state;
}

bool supported(ibv_wr_opcode op) {
  return op == IBV_WR_SEND || op == IBV_WR_SEND_WITH_IMM || op == IBV_WR_RDMA_WRITE ||
         op == IBV_WR_RDMA_WRITE_WITH_IMM || op == IBV_WR_RDMA_READ;
}

ibv_wc_opcode sendOpcode(ibv_wr_opcode op) {
  switch (op) {
    case IBV_WR_RDMA_WRITE:
    case IBV_WR_RDMA_WRITE_WITH_IMM:
      return IBV_WC_RDMA_WRITE;
    case IBV_WR_RDMA_READ:
      return IBV_WC_RDMA_READ;
    default:
      return IBV_WC_SEND;
  }
}

}  // namespace

void Qp::completeLocked(Cq* cq, const ibv_wc& wc, bool solicited) {
  if (stop) return;  // destroyed: the CQ may be gone
  cq->push(wc, solicited);
}

void Qp::flushSendQueueLocked() {
  while (!sq.empty()) {
    ibv_wc wc{};
    wc.wr_id = sq.front().wrId;
    wc.status = IBV_WC_WR_FLUSH_ERR;
    wc.opcode = sendOpcode(sq.front().opcode);
    wc.qp_num = qpn();
    completeLocked(sendCq, wc);
    sq.pop_front();
  }
}

void Qp::enterErrorLocked() {
  state = IBV_QPS_ERR;
  shell.ibv.state = IBV_QPS_ERR;
  while (!rq.empty()) {
    ibv_wc wc{};
    wc.wr_id = rq.front().wrId;
    wc.status = IBV_WC_WR_FLUSH_ERR;
    wc.opcode = IBV_WC_RECV;
    wc.qp_num = qpn();
    completeLocked(recvCq, wc);
    rq.pop_front();
  }
  cv.notify_all();
}

ibv_qp* createQp(ibv_pd* pdHandle, ibv_qp_init_attr* init) {
  if (init->qp_type != IBV_QPT_RC || init->srq != nullptr || init->send_cq == nullptr ||
      init->recv_cq == nullptr) {
    errno = init->qp_type != IBV_QPT_RC || init->srq != nullptr ? EOPNOTSUPP : EINVAL;
    return nullptr;
  }
  ibv_qp_cap& cap = init->cap;
  if (cap.max_send_wr > kMaxQueueDepth || cap.max_recv_wr > kMaxQueueDepth ||
      cap.max_send_sge > kMaxSge || cap.max_recv_sge > kMaxSge ||
      cap.max_inline_data > kMaxInline) {
    errno = EINVAL;
    return nullptr;
  }
  cap.max_send_wr = std::max(cap.max_send_wr, 1u);
  cap.max_recv_wr = std::max(cap.max_recv_wr, 1u);
  auto qp = std::make_shared<Qp>();
  qp->shell.obj = qp.get();
  qp->pd = ownerOf<Pd>(pdHandle);
  qp->ctx = qp->pd->ctx;
  qp->dev = qp->ctx->dev;
  qp->sendCq = ownerOf<Cq>(init->send_cq);
  qp->recvCq = ownerOf<Cq>(init->recv_cq);
  qp->init = *init;
  ibv_qp& q = qp->shell.ibv;
  q.context = pdHandle->context;
  q.qp_context = init->qp_context;
  q.pd = pdHandle;
  q.send_cq = init->send_cq;
  q.recv_cq = init->recv_cq;
  q.state = IBV_QPS_RESET;
  q.qp_type = IBV_QPT_RC;
  pthread_mutex_init(&q.mutex, nullptr);
  pthread_cond_init(&q.cond, nullptr);
  {
    std::lock_guard<std::mutex> lock(qp->dev->mu);
    q.qp_num = qp->dev->nextQpn++ & kPsnMask;
    q.handle = q.qp_num;
    qp->dev->qps[q.qp_num] = qp;
  }
  qp->pd->users++;
  qp->sendCq->users++;
  qp->recvCq->users++;
  qp->worker = std::thread([raw = qp.get()] { raw->run(); });
  return &q;
}

int modifyQp(ibv_qp* handle, ibv_qp_attr* a, int mask) {
  Qp* qp = ownerOf<Qp>(handle);
  std::lock_guard<std::mutex> lock(qp->mu);
  ibv_qp_state from = qp->state;
  ibv_qp_state to = (mask & IBV_QP_STATE) ? a->qp_state : from;
  if ((mask & IBV_QP_CUR_STATE) && a->cur_qp_state != from) return EINVAL;
  if (!maskAllowed(from, to, mask)) return EINVAL;
  if (int rc = checkValues(qp, *a, mask)) return rc;
  applyAttrs(qp->attr, *a, mask);
  if (mask & IBV_QP_AV) decodeGid(a->ah_attr.grh.dgid, &qp->remoteIpv4, &qp->remotePort);
  if (from == IBV_QPS_INIT && to == IBV_QPS_RTR) {
    qp->expectedPsn = qp->attr.rq_psn;
    qp->answeredOne = false;
  }
  if (from == IBV_QPS_RTR && to == IBV_QPS_RTS) qp->sqPsn = qp->attr.sq_psn;
  if (to == IBV_QPS_ERR) {
    qp->enterErrorLocked();
    return 0;
  }
  if (to == IBV_QPS_RESET) {
    // RESET forgets everything, outstanding work included, without completions.
    qp->sq.clear();
    qp->rq.clear();
    qp->epoch++;
    qp->attr = ibv_qp_attr{};
  }
  qp->state = to;
  handle->state = to;
  qp->cv.notify_all();
  return 0;
}

int queryQp(ibv_qp* handle, ibv_qp_attr* a, int mask, ibv_qp_init_attr* init) {
  (void)mask;  // everything is cheap to report
  Qp* qp = ownerOf<Qp>(handle);
  std::lock_guard<std::mutex> lock(qp->mu);
  *a = qp->attr;
  a->qp_state = qp->state;
  a->cur_qp_state = qp->state;
  a->cap = qp->init.cap;
  if (init != nullptr) *init = qp->init;
  return 0;
}

int destroyQp(ibv_qp* handle) {
  Qp* qp = ownerOf<Qp>(handle);
  std::shared_ptr<Qp> keep;
  {
    std::lock_guard<std::mutex> lock(qp->dev->mu);
    auto it = qp->dev->qps.find(qp->qpn());
    keep = it->second;
    qp->dev->qps.erase(it);
  }
  {
    std::unique_lock<std::mutex> lock(qp->mu);
    qp->stop = true;
    qp->epoch++;
    qp->cv.notify_all();
    // A responder call that already passed its checks finishes moving its bytes first.
    qp->cv.wait(lock, [qp] { return qp->moving == 0; });
  }
  int fd = qp->connFd.load();
  if (fd >= 0) shutdown(fd, SHUT_RDWR);  // unblocks a worker waiting on the responder
  qp->worker.join();
  fd = qp->connFd.exchange(-1);
  if (fd >= 0) close(fd);
  qp->pd->users--;
  qp->sendCq->users--;
  qp->recvCq->users--;
  pthread_mutex_destroy(&handle->mutex);
  pthread_cond_destroy(&handle->cond);
  return 0;  // `keep` frees the QP unless a server thread still holds it mid-request
}

int postSend(ibv_qp* handle, ibv_send_wr* wr, ibv_send_wr** bad) {
  Qp* qp = ownerOf<Qp>(handle);
  std::lock_guard<std::mutex> lock(qp->mu);
  for (; wr != nullptr; wr = wr->next) {
    int rc = 0;
    if (qp->state != IBV_QPS_RTS && qp->state != IBV_QPS_ERR)
      rc = EINVAL;
    else if (!supported(wr->opcode) || wr->num_sge < 0 ||
             wr->num_sge > int(qp->init.cap.max_send_sge))
      rc = EINVAL;
    else if (qp->sq.size() >= qp->init.cap.max_send_wr)
      rc = ENOMEM;
    SendWr w;
    if (rc == 0) {
      w.wrId = wr->wr_id;
      w.opcode = wr->opcode;
      w.flags = wr->send_flags;
      if (qp->init.sq_sig_all) w.flags |= IBV_SEND_SIGNALED;
      w.imm = wr->imm_data;
      w.remoteAddr = wr->wr.rdma.remote_addr;
      w.rkey = wr->wr.rdma.rkey;
      w.sges.assign(wr->sg_list, wr->sg_list + wr->num_sge);
      if (wr->send_flags & IBV_SEND_INLINE) {
        // Inline data is copied now, so the caller may reuse the buffer and needs no lkey.
        if (wr->opcode == IBV_WR_RDMA_READ) rc = EINVAL;
        for (const ibv_sge& s : w.sges) {
          if (w.inlineData.size() + s.length > qp->init.cap.max_inline_data) {
            rc = EINVAL;
            break;
          }
          auto* p = reinterpret_cast<const char*>(s.addr);
          w.inlineData.insert(w.inlineData.end(), p, p + s.length);
        }
      }
    }
    if (rc != 0) {
      *bad = wr;
      return rc;
    }
    qp->sq.push_back(std::move(w));
  }
  qp->cv.notify_all();
  return 0;
}

int postRecv(ibv_qp* handle, ibv_recv_wr* wr, ibv_recv_wr** bad) {
  Qp* qp = ownerOf<Qp>(handle);
  std::lock_guard<std::mutex> lock(qp->mu);
  for (; wr != nullptr; wr = wr->next) {
    int rc = 0;
    if (qp->state == IBV_QPS_RESET)
      rc = EINVAL;
    else if (wr->num_sge < 0 || wr->num_sge > int(qp->init.cap.max_recv_sge))
      rc = EINVAL;
    else if (qp->rq.size() >= qp->init.cap.max_recv_wr)
      rc = ENOMEM;
    if (rc != 0) {
      *bad = wr;
      return rc;
    }
    RecvWr r;
    r.wrId = wr->wr_id;
    r.sges.assign(wr->sg_list, wr->sg_list + wr->num_sge);
    qp->rq.push_back(std::move(r));
  }
  if (qp->state == IBV_QPS_ERR) qp->enterErrorLocked();  // flushes what was just posted
  return 0;
}

}  // namespace softnic
