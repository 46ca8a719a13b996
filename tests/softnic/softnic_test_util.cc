// TEST DOUBLE tests: verbs helpers shared by the soft NIC's tests and its peer process.
#include "softnic_test_util.h"

#include <chrono>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <thread>

namespace softnic::test {

ibv_device* firstDevice() {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  ibv_device* dev = (list != nullptr && n > 0) ? list[0] : nullptr;
  ibv_free_device_list(list);  // the soft NIC's devices outlive the list
  return dev;
}

Endpoint::Endpoint(size_t bytes, int mrAccess, int cqe) : buf(bytes, 0) {
  ctx = ibv_open_device(firstDevice());
  pd = ibv_alloc_pd(ctx);
  channel = ibv_create_comp_channel(ctx);
  cq = ibv_create_cq(ctx, cqe, this, channel, 0);
  mr = ibv_reg_mr(pd, buf.data(), buf.size(), mrAccess);
  ibv_qp_init_attr init{};
  init.send_cq = cq;
  init.recv_cq = cq;
  init.qp_type = IBV_QPT_RC;
  init.cap.max_send_wr = 1024;
  init.cap.max_recv_wr = 1024;
  init.cap.max_send_sge = 4;
  init.cap.max_recv_sge = 4;
  init.cap.max_inline_data = 64;
  qp = ibv_create_qp(pd, &init);
  ibv_query_gid(ctx, 1, 0, &gid);
}

Endpoint::~Endpoint() {
  if (qp != nullptr) ibv_destroy_qp(qp);
  if (mr != nullptr) ibv_dereg_mr(mr);
  if (cq != nullptr) ibv_destroy_cq(cq);
  if (channel != nullptr) ibv_destroy_comp_channel(channel);
  if (pd != nullptr) ibv_dealloc_pd(pd);
  if (ctx != nullptr) ibv_close_device(ctx);
}

int toInit(ibv_qp* qp, int access) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.pkey_index = 0;
  a.port_num = 1;
  a.qp_access_flags = access;
  return ibv_modify_qp(qp, &a,
                       IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
}

int toRtr(ibv_qp* qp, const ibv_gid& dgid, uint32_t destQpn, uint32_t rqPsn, int minRnrTimer) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = IBV_MTU_4096;
  a.dest_qp_num = destQpn;
  a.rq_psn = rqPsn;
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = uint8_t(minRnrTimer);
  a.ah_attr.is_global = 1;
  a.ah_attr.grh.dgid = dgid;
  a.ah_attr.grh.sgid_index = 0;
  a.ah_attr.grh.hop_limit = 1;
  a.ah_attr.port_num = 1;
  return ibv_modify_qp(qp, &a,
                       IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                           IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
}

int toRts(ibv_qp* qp, uint32_t sqPsn, int timeout, int retry, int rnrRetry) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RTS;
  a.sq_psn = sqPsn;
  a.timeout = uint8_t(timeout);
  a.retry_cnt = uint8_t(retry);
  a.rnr_retry = uint8_t(rnrRetry);
  a.max_rd_atomic = 1;
  return ibv_modify_qp(qp, &a,
                       IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                           IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC);
}

int connectTo(Endpoint& self, const ibv_gid& dgid, uint32_t destQpn, const QpParams& p) {
  if (int rc = toInit(self.qp, p.access)) return rc;
  if (int rc = toRtr(self.qp, dgid, destQpn, p.rqPsn, p.minRnrTimer)) return rc;
  return toRts(self.qp, p.sqPsn, p.timeout, p.retry, p.rnrRetry);
}

int connectPair(Endpoint& a, Endpoint& b, const QpParams& pa, const QpParams& pb) {
  if (int rc = connectTo(a, b.gid, b.qpn(), pa)) return rc;
  return connectTo(b, a.gid, a.qpn(), pb);
}

std::vector<ibv_wc> pollFor(ibv_cq* cq, size_t n, int timeoutMs) {
  std::vector<ibv_wc> got;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeoutMs);
  while (got.size() < n && std::chrono::steady_clock::now() < deadline) {
    ibv_wc wc[16];
    int k = ibv_poll_cq(cq, 16, wc);
    if (k < 0) break;
    got.insert(got.end(), wc, wc + k);
    if (k == 0) std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return got;
}

int postRecv(Endpoint& ep, uint64_t wrId, size_t offset, uint32_t length) {
  ibv_sge sge{ep.addr(offset), length, ep.mr->lkey};
  ibv_recv_wr wr{};
  wr.wr_id = wrId;
  wr.sg_list = &sge;
  wr.num_sge = length > 0 ? 1 : 0;
  ibv_recv_wr* bad = nullptr;
  return ibv_post_recv(ep.qp, &wr, &bad);
}

int postWrite(Endpoint& from, uint64_t wrId, size_t offset, uint32_t length, uint64_t remoteAddr,
              uint32_t rkey, bool withImm, uint32_t imm, bool signaled) {
  ibv_sge sge{from.addr(offset), length, from.mr->lkey};
  ibv_send_wr wr{};
  wr.wr_id = wrId;
  wr.sg_list = &sge;
  wr.num_sge = length > 0 ? 1 : 0;
  wr.opcode = withImm ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE;
  wr.send_flags = signaled ? IBV_SEND_SIGNALED : 0;
  wr.imm_data = imm;
  wr.wr.rdma.remote_addr = remoteAddr;
  wr.wr.rdma.rkey = rkey;
  ibv_send_wr* bad = nullptr;
  return ibv_post_send(from.qp, &wr, &bad);
}

std::string describe(const Endpoint& ep) {
  std::ostringstream out;
  char hex[3];
  for (uint8_t b : ep.gid.raw) {
    std::snprintf(hex, sizeof(hex), "%02x", b);
    out << hex;
  }
  out << ' ' << ep.qpn() << ' ' << ep.addr() << ' ' << ep.mr->rkey;
  return out.str();
}

bool parse(const std::string& line, ibv_gid* gid, uint32_t* qpn, uint64_t* addr, uint32_t* rkey) {
  std::istringstream in(line);
  std::string hex;
  if (!(in >> hex >> *qpn >> *addr >> *rkey) || hex.size() != 32) return false;
  for (int i = 0; i < 16; ++i) gid->raw[i] = uint8_t(std::stoul(hex.substr(2 * i, 2), nullptr, 16));
  return true;
}

}  // namespace softnic::test
