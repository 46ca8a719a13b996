// TEST DOUBLE: the responder half of the soft NIC's RC transport (see qp.h). It runs on the
// server thread of the requester's connection, so one QP's requests are handled in order.
#include <unistd.h>

#include "qp.h"

namespace softnic {
namespace {

bool reply(int fd, const wire::Request& req, wire::Status status, uint8_t rnrTimer = 0) {
  wire::Response resp{};
  resp.status = status;
  resp.rnrTimer = rnrTimer;
  resp.psn = req.psn;
  return wire::writeFull(fd, &resp, sizeof(resp));
}

// Drains the payload the requester already sent, then answers with `status`.
bool refuse(int fd, const wire::Request& req, wire::Status status, uint8_t rnrTimer = 0) {
  if (wire::carriesPayload(req) && !wire::drain(fd, req.length)) return false;
  return reply(fd, req, status, rnrTimer);
}

}  // namespace

bool Qp::respond(uint32_t srcQpn, const wire::Request& req, int fd) {
  std::unique_lock<std::mutex> lock(mu);
  // A real responder silently drops what it must not take: not yet (or no longer) receiving,
  // a stranger QP, or a PSN out of sequence.
  if ((state != IBV_QPS_RTR && state != IBV_QPS_RTS) || stop || srcQpn != attr.dest_qp_num) {
    lock.unlock();
    return refuse(fd, req, wire::kDrop);
  }
  if (answeredOne && req.psn == ((expectedPsn - 1) & kPsnMask) && req.op != wire::kRead) {
    lock.unlock();  // a retransmission of what was done: acknowledge it again, do it once
    return refuse(fd, req, wire::kAck);
  }
  if (req.psn != expectedPsn) {
    lock.unlock();
    return refuse(fd, req, wire::kDrop);
  }
  bool consumesRecv = req.op == wire::kSend || req.hasImm;
  if (consumesRecv && rq.empty()) {
    uint8_t timer = attr.min_rnr_timer;
    lock.unlock();
    return refuse(fd, req, wire::kRnrNak, timer);
  }

  // Where the bytes go (or, for READ, come from), checked before any byte moves.
  std::vector<iovec> iov;
  ibv_wc_status recvError = IBV_WC_SUCCESS;
  wire::Status nak = wire::kAck;
  if (req.op == wire::kSend) {
    uint64_t left = req.length;
    std::lock_guard<std::mutex> devLock(dev->mu);
    for (const ibv_sge& s : rq.front().sges) {
      if (left == 0) break;
      uint32_t take = uint32_t(std::min<uint64_t>(left, s.length));
      Mr* mr = findMrLocked(dev, s.lkey, false, pd, s.addr, take, IBV_ACCESS_LOCAL_WRITE);
      if (mr == nullptr) {
        recvError = IBV_WC_LOC_PROT_ERR;
        nak = wire::kRemoteOp;
        break;
      }
      iov.push_back({mr->at(s.addr), take});
      left -= take;
    }
    if (left != 0 && recvError == IBV_WC_SUCCESS) {
      recvError = IBV_WC_LOC_LEN_ERR;
      nak = wire::kRemoteInvalid;
    }
  } else if (req.length > 0) {
    // Zero-length RDMA checks no key, as the IB spec says.
    int right = req.op == wire::kWrite ? IBV_ACCESS_REMOTE_WRITE : IBV_ACCESS_REMOTE_READ;
    std::lock_guard<std::mutex> devLock(dev->mu);
    Mr* mr = (attr.qp_access_flags & right)
                 ? findMrLocked(dev, req.rkey, true, pd, req.remoteAddr, req.length, right)
                 : nullptr;
    if (mr == nullptr)
      nak = wire::kRemoteAccess;
    else
      iov.push_back({mr->at(req.remoteAddr), req.length});
  }

  if (nak != wire::kAck) {
    if (recvError != IBV_WC_SUCCESS) {
      ibv_wc wc{};
      wc.wr_id = rq.front().wrId;
      wc.status = recvError;
      wc.opcode = IBV_WC_RECV;
      wc.qp_num = qpn();
      wc.src_qp = srcQpn;
      rq.pop_front();
      completeLocked(recvCq, wc);
    } else {
      ibv_async_event event{};
      event.event_type = IBV_EVENT_QP_ACCESS_ERR;
      event.element.qp = &shell.ibv;
      ctx->postAsync(event);
    }
    enterErrorLocked();
    lock.unlock();
    return refuse(fd, req, nak);
  }

  RecvWr recv;
  if (consumesRecv) {
    recv = std::move(rq.front());
    rq.pop_front();
  }
  uint64_t forEpoch = epoch;
  ++moving;
  lock.unlock();
  bool moved;
  if (req.op == wire::kRead) {
    wire::Response resp{};
    resp.status = wire::kAck;
    resp.psn = req.psn;
    resp.length = req.length;
    iov.insert(iov.begin(), {&resp, sizeof(resp)});
    lock.lock();
    if (epoch == forEpoch) expectedPsn = (expectedPsn + 1) & kPsnMask;
    lock.unlock();
    const bool sent = wire::writev(fd, iov);
    lock.lock();
    --moving;
    cv.notify_all();
    return sent;
  }
  moved = wire::readv(fd, iov);
  lock.lock();
  --moving;
  cv.notify_all();
  if (!moved) {
    // The requester vanished mid-message: the receive was not used, the PSN not consumed.
    if (consumesRecv && epoch == forEpoch) rq.push_front(std::move(recv));
    return false;
  }
  if (epoch == forEpoch) {
    expectedPsn = (expectedPsn + 1) & kPsnMask;
    answeredOne = true;
    if (consumesRecv) {
      ibv_wc wc{};
      wc.wr_id = recv.wrId;
      wc.status = IBV_WC_SUCCESS;
      wc.opcode = req.op == wire::kWrite ? IBV_WC_RECV_RDMA_WITH_IMM : IBV_WC_RECV;
      wc.byte_len = req.length;
      wc.qp_num = qpn();
      wc.src_qp = srcQpn;
      if (req.hasImm) {
        wc.wc_flags = IBV_WC_WITH_IMM;
        wc.imm_data = req.imm;
      }
      completeLocked(recvCq, wc, req.solicited != 0);
    }
  }
  lock.unlock();
  return reply(fd, req, wire::kAck);
}

}  // namespace softnic
