// TEST DOUBLE: the requester half of the soft NIC's RC transport (see qp.h): the send queue's
// worker, the modelled timeouts and retries, and the injected send faults.
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>

#include "qp.h"

namespace softnic {
namespace {

// How long the requester waits for a response before it counts a lost try. It is far longer than
// the modelled timeout because the responder is a thread on a busy machine, not hardware; a dead
// peer still shows at once, since its kernel closes the connection.
constexpr int kResponseWaitMs = 5000;

enum class SendFault { kNone, kRetryExceeded, kQpFatal };

SendFault takeSendFault() {
  Faults& f = faults();
  std::lock_guard<std::mutex> lock(f.mu);
  long seen = f.sendsSeen++;
  if (f.retryExceededAfter >= 0 && seen >= f.retryExceededAfter) {
    f.retryExceededAfter = -1;
    return SendFault::kRetryExceeded;
  }
  if (f.qpFatalAfter >= 0 && seen >= f.qpFatalAfter) {
    f.qpFatalAfter = -1;
    return SendFault::kQpFatal;
  }
  return SendFault::kNone;
}

wire::Request makeRequest(const SendWr& wr, uint32_t psn, uint32_t length) {
  wire::Request r{};
  switch (wr.opcode) {
    case IBV_WR_RDMA_WRITE:
    case IBV_WR_RDMA_WRITE_WITH_IMM:
      r.op = wire::kWrite;
      break;
    case IBV_WR_RDMA_READ:
      r.op = wire::kRead;
      break;
    default:
      r.op = wire::kSend;
  }
  r.hasImm = wr.opcode == IBV_WR_SEND_WITH_IMM || wr.opcode == IBV_WR_RDMA_WRITE_WITH_IMM;
  r.solicited = (wr.flags & IBV_SEND_SOLICITED) != 0;
  r.psn = psn;
  r.imm = wr.imm;
  r.length = length;
  r.remoteAddr = wr.remoteAddr;
  r.rkey = wr.rkey;
  return r;
}

}  // namespace

int rnrTimerUs(int code) {
  // IB spec 9.7.5.2.8: code 0 is the longest (655.36 ms), 1..31 grow from 0.01 ms.
  static constexpr int kUs[32] = {655360, 10,    20,    30,     40,     60,     80,     120,
                                  160,    240,   320,   480,    640,    960,    1280,   1920,
                                  2560,   3840,  5120,  7680,   10240,  15360,  20480,  30720,
                                  40960,  61440, 81920, 122880, 163840, 245760, 327680, 491520};
  return kUs[code & 31];
}

namespace {

int timeoutMs(const Path& path) {
  // 4.096 us << timeout, where 0 means "wait forever"; capped so tests stay quick.
  int cap = maxWaitMs();
  if (path.timeout == 0 || path.timeout >= 31) return cap;
  double ms = 4.096e-3 * double(uint64_t(1) << path.timeout);
  return std::max(1, std::min(cap, int(ms)));
}

}  // namespace

bool Qp::pause(int ms, uint64_t forEpoch) {
  std::unique_lock<std::mutex> lock(mu);
  cv.wait_for(lock, std::chrono::milliseconds(ms), [&] { return epoch != forEpoch; });
  return epoch == forEpoch;
}

void Qp::closeConnection() {
  int fd = connFd.exchange(-1);
  if (fd >= 0) close(fd);
}

bool Qp::exchange(const Path& path, const wire::Request& req, const std::vector<iovec>& iov,
                  wire::Response* resp) {
  if (connFd.load() < 0) {
    int fd = wire::connectTo(path.remoteIpv4, path.remotePort, std::max(timeoutMs(path), 1000));
    if (fd < 0) return false;
    wire::Hello hello{wire::kHelloMagic, path.destQpn, qpn(), 0};
    if (!wire::writeFull(fd, &hello, sizeof(hello))) {
      close(fd);
      return false;
    }
    connFd.store(fd);
  }
  int fd = connFd.load();
  std::vector<iovec> out{{const_cast<wire::Request*>(&req), sizeof(req)}};
  if (req.op != wire::kRead) out.insert(out.end(), iov.begin(), iov.end());
  if (!wire::writev(fd, out) || !wire::waitReadable(fd, kResponseWaitMs) ||
      !wire::readFull(fd, resp, sizeof(*resp)))
    return false;
  if (req.op == wire::kRead && resp->status == wire::kAck)
    return resp->length == req.length && wire::readv(fd, iov);
  return true;
}

ibv_wc_status Qp::execute(const SendWr& wr, const Path& path, uint64_t forEpoch,
                          uint32_t* byteLen) {
  if (connEpoch != forEpoch) {  // a RESET since the last request: start a new connection
    closeConnection();
    connEpoch = forEpoch;
  }
  switch (takeSendFault()) {
    case SendFault::kRetryExceeded:
      return IBV_WC_RETRY_EXC_ERR;
    case SendFault::kQpFatal: {
      ibv_async_event event{};
      event.event_type = IBV_EVENT_QP_FATAL;
      event.element.qp = &shell.ibv;
      ctx->postAsync(event);
      return IBV_WC_FATAL_ERR;
    }
    case SendFault::kNone:
      break;
  }
  // The local side: inline bytes, or scatter/gather entries checked against their lkeys (a READ
  // writes into them, so it needs local write).
  std::vector<iovec> iov;
  uint64_t total = 0;
  if (!wr.inlineData.empty()) {
    iov.push_back({const_cast<char*>(wr.inlineData.data()), wr.inlineData.size()});
    total = wr.inlineData.size();
  } else if (!(wr.flags & IBV_SEND_INLINE)) {
    int need = wr.opcode == IBV_WR_RDMA_READ ? IBV_ACCESS_LOCAL_WRITE : 0;
    std::lock_guard<std::mutex> lock(dev->mu);
    for (const ibv_sge& s : wr.sges) {
      if (s.length == 0) continue;
      Mr* mr = findMrLocked(dev, s.lkey, false, pd, s.addr, s.length, need);
      if (mr == nullptr) return IBV_WC_LOC_PROT_ERR;
      iov.push_back({mr->at(s.addr), s.length});
      total += s.length;
    }
  }
  if (total > (uint64_t(1) << 31)) return IBV_WC_LOC_LEN_ERR;
  wire::Request req = makeRequest(wr, path.psn, uint32_t(total));
  int timeoutsLeft = path.retryCnt;
  int rnrLeft = path.rnrRetry;
  for (;;) {
    wire::Response resp{};
    bool answered = dev->portUp(path.port) && exchange(path, req, iov, &resp);
    if (!answered) closeConnection();
    if (!answered || resp.status == wire::kDrop) {
      if (timeoutsLeft-- <= 0) return IBV_WC_RETRY_EXC_ERR;
      if (!pause(timeoutMs(path), forEpoch)) return IBV_WC_WR_FLUSH_ERR;
      continue;
    }
    switch (resp.status) {
      case wire::kAck:
        *byteLen = uint32_t(total);
        return IBV_WC_SUCCESS;
      case wire::kRnrNak:
        if (path.rnrRetry != 7 && rnrLeft-- <= 0) return IBV_WC_RNR_RETRY_EXC_ERR;
        if (!pause(std::min(maxWaitMs(), std::max(1, rnrTimerUs(resp.rnrTimer) / 1000)), forEpoch))
          return IBV_WC_WR_FLUSH_ERR;
        continue;
      case wire::kRemoteAccess:
        return IBV_WC_REM_ACCESS_ERR;
      case wire::kRemoteInvalid:
        return IBV_WC_REM_INV_REQ_ERR;
      default:
        return IBV_WC_REM_OP_ERR;
    }
  }
}

void Qp::run() {
  for (;;) {
    SendWr wr;
    Path path;
    uint64_t forEpoch;
    {
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [&] {
        return stop || (!sq.empty() && (state == IBV_QPS_RTS || state == IBV_QPS_ERR));
      });
      if (stop) return;
      if (state == IBV_QPS_ERR) {
        flushSendQueueLocked();
        continue;
      }
      wr = sq.front();
      forEpoch = epoch;
      path.remoteIpv4 = remoteIpv4;
      path.remotePort = remotePort;
      path.destQpn = attr.dest_qp_num;
      path.psn = sqPsn;
      path.port = attr.port_num;
      path.timeout = attr.timeout;
      path.retryCnt = attr.retry_cnt;
      path.rnrRetry = attr.rnr_retry;
    }
    uint32_t byteLen = 0;
    ibv_wc_status status = execute(wr, path, forEpoch, &byteLen);
    std::lock_guard<std::mutex> lock(mu);
    if (epoch != forEpoch || stop || sq.empty()) continue;  // RESET or destroy voided it
    sq.pop_front();
    if (status == IBV_WC_SUCCESS) sqPsn = (sqPsn + 1) & kPsnMask;
    if (status != IBV_WC_SUCCESS || (wr.flags & IBV_SEND_SIGNALED)) {
      ibv_wc wc{};
      wc.wr_id = wr.wrId;
      wc.status = status;
      wc.opcode = wr.opcode == IBV_WR_RDMA_READ ? IBV_WC_RDMA_READ
                  : (wr.opcode == IBV_WR_RDMA_WRITE || wr.opcode == IBV_WR_RDMA_WRITE_WITH_IMM)
                      ? IBV_WC_RDMA_WRITE
                      : IBV_WC_SEND;
      wc.byte_len = wr.opcode == IBV_WR_RDMA_READ ? byteLen : 0;
      wc.qp_num = qpn();
      completeLocked(sendCq, wc);
    }
    if (status != IBV_WC_SUCCESS) enterErrorLocked();
  }
}

}  // namespace softnic
