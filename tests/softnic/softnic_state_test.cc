// TEST DOUBLE tests: the soft NIC's QP state machine, attribute masks, posting rules and object
// lifetimes, against what the IB spec and libibverbs require of an RC QP.
#include <gtest/gtest.h>

#include "softnic_test_util.h"

namespace softnic::test {
namespace {

ibv_qp_state stateOf(ibv_qp* qp) {
  ibv_qp_attr a{};
  ibv_qp_init_attr init{};
  EXPECT_EQ(ibv_query_qp(qp, &a, IBV_QP_STATE, &init), 0);
  return a.qp_state;
}

TEST(SoftnicStateMachine, RejectsSkippedStatesAndWrongMasks) {
  Endpoint a, b;
  ibv_qp_attr attr{};
  // RESET -> RTR skips INIT.
  attr.qp_state = IBV_QPS_RTR;
  EXPECT_EQ(ibv_modify_qp(a.qp, &attr, IBV_QP_STATE), EINVAL);
  // RESET -> INIT without the port.
  attr = {};
  attr.qp_state = IBV_QPS_INIT;
  attr.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
  EXPECT_EQ(ibv_modify_qp(a.qp, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_ACCESS_FLAGS),
            EINVAL);
  // RESET -> INIT with an attribute INIT does not take.
  attr.port_num = 1;
  EXPECT_EQ(ibv_modify_qp(a.qp, &attr,
                          IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS |
                              IBV_QP_SQ_PSN),
            EINVAL);
  // A port the device does not have.
  attr.port_num = 2;
  EXPECT_EQ(ibv_modify_qp(a.qp, &attr,
                          IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS),
            EINVAL);
  EXPECT_EQ(stateOf(a.qp), IBV_QPS_RESET);
  ASSERT_EQ(toInit(a.qp, IBV_ACCESS_REMOTE_WRITE), 0);
  EXPECT_EQ(stateOf(a.qp), IBV_QPS_INIT);
  // INIT -> RTS skips RTR.
  EXPECT_EQ(toRts(a.qp, 0, 14, 7, 7), EINVAL);
  // INIT -> RTR without the minimum RNR timer.
  attr = {};
  attr.qp_state = IBV_QPS_RTR;
  attr.path_mtu = IBV_MTU_1024;
  attr.dest_qp_num = b.qpn();
  attr.ah_attr.is_global = 1;
  attr.ah_attr.grh.dgid = b.gid;
  attr.ah_attr.port_num = 1;
  EXPECT_EQ(ibv_modify_qp(a.qp, &attr,
                          IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                              IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC),
            EINVAL);
  // RoCE: an address vector without the GRH has no destination.
  attr.ah_attr.is_global = 0;
  EXPECT_EQ(ibv_modify_qp(a.qp, &attr,
                          IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                              IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER),
            EINVAL);
  EXPECT_EQ(stateOf(a.qp), IBV_QPS_INIT);
  ASSERT_EQ(toRtr(a.qp, b.gid, b.qpn(), 5, 12), 0);
  // RTR -> RTS without the retry count.
  attr = {};
  attr.qp_state = IBV_QPS_RTS;
  EXPECT_EQ(ibv_modify_qp(a.qp, &attr,
                          IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RNR_RETRY |
                              IBV_QP_MAX_QP_RD_ATOMIC),
            EINVAL);
  // A retry count past 7.
  EXPECT_EQ(toRts(a.qp, 0, 14, 8, 7), EINVAL);
  ASSERT_EQ(toRts(a.qp, 9, 14, 6, 5), 0);
  ibv_qp_attr q{};
  ibv_qp_init_attr init{};
  ASSERT_EQ(ibv_query_qp(a.qp, &q, IBV_QP_STATE, &init), 0);
  EXPECT_EQ(q.qp_state, IBV_QPS_RTS);
  EXPECT_EQ(q.dest_qp_num, b.qpn());
  EXPECT_EQ(q.rq_psn, 5u);
  EXPECT_EQ(q.sq_psn, 9u);
  EXPECT_EQ(q.retry_cnt, 6);
  EXPECT_EQ(q.rnr_retry, 5);
  EXPECT_EQ(q.min_rnr_timer, 12);
  EXPECT_EQ(init.qp_type, IBV_QPT_RC);
  EXPECT_EQ(a.qp->state, IBV_QPS_RTS);
  // RTS -> RTS may change the RNR timer, not the destination.
  attr = {};
  attr.min_rnr_timer = 3;
  EXPECT_EQ(ibv_modify_qp(a.qp, &attr, IBV_QP_MIN_RNR_TIMER), 0);
  EXPECT_EQ(ibv_modify_qp(a.qp, &attr, IBV_QP_DEST_QPN), EINVAL);
  // CUR_STATE must tell the truth.
  attr.cur_qp_state = IBV_QPS_RTR;
  EXPECT_EQ(ibv_modify_qp(a.qp, &attr, IBV_QP_CUR_STATE | IBV_QP_MIN_RNR_TIMER), EINVAL);
  // Any state -> RESET, then the whole way up again.
  attr = {};
  attr.qp_state = IBV_QPS_RESET;
  ASSERT_EQ(ibv_modify_qp(a.qp, &attr, IBV_QP_STATE), 0);
  EXPECT_EQ(stateOf(a.qp), IBV_QPS_RESET);
  EXPECT_EQ(connectTo(a, b.gid, b.qpn()), 0);
}

TEST(SoftnicStateMachine, PostingFollowsTheState) {
  Endpoint a, b;
  EXPECT_EQ(postRecv(a, 1), EINVAL);  // RESET takes no receive
  ASSERT_EQ(toInit(a.qp, 0), 0);
  EXPECT_EQ(postRecv(a, 1), 0);                                              // INIT does
  EXPECT_EQ(postWrite(a, 1, 0, 8, b.addr(), b.mr->rkey, false, 0), EINVAL);  // sends need RTS
  ASSERT_EQ(toRtr(a.qp, b.gid, b.qpn(), 0, 1), 0);
  EXPECT_EQ(postWrite(a, 1, 0, 8, b.addr(), b.mr->rkey, false, 0), EINVAL);
  ibv_send_wr wr{};
  wr.opcode = IBV_WR_ATOMIC_CMP_AND_SWP;  // not offered: the device reports IBV_ATOMIC_NONE
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(toRts(a.qp, 0, 14, 7, 7), 0);
  EXPECT_EQ(ibv_post_send(a.qp, &wr, &bad), EINVAL);
  EXPECT_EQ(bad, &wr);
}

TEST(SoftnicStateMachine, ErrorStateFlushesEveryOutstandingRequest) {
  Endpoint a, b;
  ASSERT_EQ(connectPair(a, b), 0);
  for (int i = 0; i < 3; ++i) ASSERT_EQ(postRecv(b, uint64_t(i)), 0);
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_ERR;
  ASSERT_EQ(ibv_modify_qp(b.qp, &attr, IBV_QP_STATE), 0);
  ASSERT_EQ(postRecv(b, 3), 0);  // posting in ERR is allowed and flushes at once
  auto got = pollFor(b.cq, 4);
  ASSERT_EQ(got.size(), 4u);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(got[i].wr_id, uint64_t(i));
    EXPECT_EQ(got[i].status, IBV_WC_WR_FLUSH_ERR);
  }
}

TEST(SoftnicStateMachine, PsnMismatchLooksLikeASilentPeer) {
  Endpoint a, b;
  QpParams pa;
  pa.sqPsn = 100;
  pa.retry = 1;
  QpParams pb;
  pb.rqPsn = 200;  // not what a sends with: the responder drops every packet
  ASSERT_EQ(connectPair(a, b, pa, pb), 0);
  ASSERT_EQ(postWrite(a, 1, 0, 8, b.addr(), b.mr->rkey, false, 0), 0);
  auto got = pollFor(a.cq, 1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].status, IBV_WC_RETRY_EXC_ERR);
  EXPECT_EQ(stateOf(a.qp), IBV_QPS_ERR);
}

TEST(SoftnicStateMachine, WrongDestinationQpLooksLikeASilentPeer) {
  Endpoint a, b, c;
  QpParams p;
  p.retry = 0;
  ASSERT_EQ(connectTo(a, b.gid, b.qpn(), p), 0);
  ASSERT_EQ(connectTo(b, c.gid, c.qpn()), 0);  // b expects c, so it drops what a sends
  ASSERT_EQ(postWrite(a, 1, 0, 8, b.addr(), b.mr->rkey, false, 0), 0);
  auto got = pollFor(a.cq, 1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].status, IBV_WC_RETRY_EXC_ERR);
}

TEST(SoftnicObjects, InUseObjectsRefuseToGoAndKeysAreChecked) {
  Endpoint a;
  EXPECT_EQ(ibv_destroy_cq(a.cq), EBUSY);                 // the QP uses it
  EXPECT_EQ(ibv_dealloc_pd(a.pd), EBUSY);                 // the MR and QP use it
  EXPECT_EQ(ibv_destroy_comp_channel(a.channel), EBUSY);  // the CQ uses it
  EXPECT_EQ(ibv_close_device(a.ctx), EBUSY);
  EXPECT_NE(a.mr->lkey, a.mr->rkey);
  char buf[64];
  // Remote write without local write is invalid in verbs.
  errno = 0;
  EXPECT_EQ(ibv_reg_mr(a.pd, buf, sizeof(buf), IBV_ACCESS_REMOTE_WRITE), nullptr);
  EXPECT_EQ(errno, EINVAL);
  ibv_qp_init_attr init{};
  init.send_cq = a.cq;
  init.recv_cq = a.cq;
  init.qp_type = IBV_QPT_UD;
  init.cap.max_send_wr = 1;
  EXPECT_EQ(ibv_create_qp(a.pd, &init), nullptr);
}

}  // namespace
}  // namespace softnic::test
