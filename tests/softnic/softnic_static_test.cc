// TEST DOUBLE tests: the in-process soft NIC (loom_softnic_static). The test binary defines no
// ibv_* symbol; it reaches every verb through loom_softnic_lookup(), the way a function table
// filled by name does, and the data path through context->ops, the way verbs.h's inlines do.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <infiniband/verbs.h>

#include <cstring>
#include <vector>

#include "softnic_api.h"

namespace {

template <class F>
F verb(const char* name) {
  void* fn = loom_softnic_lookup(name);
  EXPECT_NE(fn, nullptr) << name;
  return reinterpret_cast<F>(fn);
}

struct Verbs {
  decltype(&ibv_get_device_list) getDeviceList =
      verb<decltype(getDeviceList)>("ibv_get_device_list");
  decltype(&ibv_free_device_list) freeDeviceList =
      verb<decltype(freeDeviceList)>("ibv_free_device_list");
  decltype(&ibv_open_device) openDevice = verb<decltype(openDevice)>("ibv_open_device");
  decltype(&ibv_query_gid) queryGid = verb<decltype(queryGid)>("ibv_query_gid");
  decltype(&ibv_alloc_pd) allocPd = verb<decltype(allocPd)>("ibv_alloc_pd");
  decltype(&ibv_reg_mr_iova2) regMr = verb<decltype(regMr)>("ibv_reg_mr_iova2");
  decltype(&ibv_create_cq) createCq = verb<decltype(createCq)>("ibv_create_cq");
  decltype(&ibv_create_qp) createQp = verb<decltype(createQp)>("ibv_create_qp");
  decltype(&ibv_modify_qp) modifyQp = verb<decltype(modifyQp)>("ibv_modify_qp");
};

struct Side {
  ibv_context* ctx;
  ibv_pd* pd;
  ibv_cq* cq;
  ibv_qp* qp;
  ibv_mr* mr;
  ibv_gid gid;
  std::vector<char> buf = std::vector<char>(4096);
};

Side makeSide(const Verbs& v, ibv_device* dev) {
  Side s{};
  s.ctx = v.openDevice(dev);
  s.pd = v.allocPd(s.ctx);
  s.cq = v.createCq(s.ctx, 64, nullptr, nullptr, 0);
  s.mr = v.regMr(s.pd, s.buf.data(), s.buf.size(), uintptr_t(s.buf.data()),
                 IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  ibv_qp_init_attr init{};
  init.send_cq = s.cq;
  init.recv_cq = s.cq;
  init.qp_type = IBV_QPT_RC;
  init.cap.max_send_wr = 16;
  init.cap.max_recv_wr = 16;
  init.cap.max_send_sge = 1;
  init.cap.max_recv_sge = 1;
  s.qp = v.createQp(s.pd, &init);
  v.queryGid(s.ctx, 1, 0, &s.gid);
  return s;
}

void bringUp(const Verbs& v, Side& s, const Side& peer) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
  ASSERT_EQ(
      v.modifyQp(s.qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS),
      0);
  a = {};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = IBV_MTU_1024;
  a.dest_qp_num = peer.qp->qp_num;
  a.ah_attr.is_global = 1;
  a.ah_attr.grh.dgid = peer.gid;
  a.ah_attr.port_num = 1;
  ASSERT_EQ(v.modifyQp(s.qp, &a,
                       IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                           IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER),
            0);
  a = {};
  a.qp_state = IBV_QPS_RTS;
  a.timeout = 14;
  a.retry_cnt = 7;
  a.rnr_retry = 7;
  ASSERT_EQ(v.modifyQp(s.qp, &a,
                       IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                           IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC),
            0);
}

int pollOne(ibv_cq* cq, ibv_wc* wc) {
  for (int i = 0; i < 1000000; ++i) {
    int n = cq->context->ops.poll_cq(cq, 1, wc);
    if (n != 0) return n;
  }
  return 0;
}

TEST(SoftnicStatic, WriteWithImmThroughTheLookupTableAndContextOps) {
  Verbs v;
  int n = 0;
  ibv_device** list = v.getDeviceList(&n);
  ASSERT_EQ(n, 1);
  Side a = makeSide(v, list[0]);
  Side b = makeSide(v, list[0]);
  v.freeDeviceList(list);
  ASSERT_NE(a.qp, nullptr);
  ASSERT_NE(b.qp, nullptr);
  bringUp(v, a, b);
  bringUp(v, b, a);
  ibv_recv_wr rwr{};
  rwr.wr_id = 11;
  ibv_recv_wr* rbad = nullptr;
  ASSERT_EQ(b.ctx->ops.post_recv(b.qp, &rwr, &rbad), 0);
  std::memcpy(a.buf.data(), "static", 7);
  ibv_sge sge{uint64_t(uintptr_t(a.buf.data())), 7, a.mr->lkey};
  ibv_send_wr wr{};
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.imm_data = htonl(99);
  wr.wr.rdma.remote_addr = uint64_t(uintptr_t(b.buf.data()));
  wr.wr.rdma.rkey = b.mr->rkey;
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(a.ctx->ops.post_send(a.qp, &wr, &bad), 0);
  ibv_wc wc{};
  ASSERT_EQ(pollOne(b.cq, &wc), 1);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc.wr_id, 11u);
  EXPECT_EQ(ntohl(wc.imm_data), 99u);
  EXPECT_STREQ(b.buf.data(), "static");
  ASSERT_EQ(pollOne(a.cq, &wc), 1);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
}

}  // namespace
