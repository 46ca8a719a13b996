// TEST DOUBLE tests: the errors an RC transport must turn into failures. Violations a real NIC
// detects (keys, bounds, rights, RNR, lengths) and the faults the soft NIC injects on request
// (retry exceeded, QP fatal, registration failure, no dma-buf, port down).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>

#include "softnic_api.h"
#include "softnic_test_util.h"

namespace softnic::test {
namespace {

class SoftnicFault : public ::testing::Test {
 protected:
  void TearDown() override { EXPECT_EQ(loom_softnic_inject("clear"), 0); }
};

// Reads one async event, waiting at most timeoutMs; false when none came.
bool nextAsyncEvent(ibv_context* ctx, ibv_async_event* event, int timeoutMs = 10000) {
  pollfd p{ctx->async_fd, POLLIN, 0};
  if (poll(&p, 1, timeoutMs) != 1) return false;
  if (ibv_get_async_event(ctx, event) != 0) return false;
  ibv_ack_async_event(event);
  return true;
}

ibv_wc_status writeStatus(Endpoint& a, uint64_t remoteAddr, uint32_t rkey, uint32_t len = 64) {
  EXPECT_EQ(postWrite(a, 1, 0, len, remoteAddr, rkey, false, 0), 0);
  auto got = pollFor(a.cq, 1);
  return got.size() == 1 ? got[0].status : IBV_WC_GENERAL_ERR;
}

TEST_F(SoftnicFault, WrongRkeyIsARemoteAccessErrorOnBothSides) {
  Endpoint a, b;
  ASSERT_EQ(connectPair(a, b), 0);
  EXPECT_EQ(writeStatus(a, b.addr(), b.mr->lkey), IBV_WC_REM_ACCESS_ERR);  // lkey is no rkey
  ibv_async_event event{};
  ASSERT_TRUE(nextAsyncEvent(b.ctx, &event));
  EXPECT_EQ(event.event_type, IBV_EVENT_QP_ACCESS_ERR);
  EXPECT_EQ(event.element.qp, b.qp);
  // Both QPs are now in error: what follows is flushed.
  ASSERT_EQ(postWrite(a, 2, 0, 8, b.addr(), b.mr->rkey, false, 0), 0);
  auto got = pollFor(a.cq, 1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].status, IBV_WC_WR_FLUSH_ERR);
  EXPECT_EQ(got[0].wr_id, 2u);
}

TEST_F(SoftnicFault, WriteOutOfBoundsIsARemoteAccessError) {
  Endpoint a, b(4096);
  ASSERT_EQ(connectPair(a, b), 0);
  EXPECT_EQ(writeStatus(a, b.addr(4096 - 32), b.mr->rkey), IBV_WC_REM_ACCESS_ERR);
}

TEST_F(SoftnicFault, WriteWithoutTheRemoteWriteRightIsARemoteAccessError) {
  Endpoint a, b(4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
  ASSERT_EQ(connectPair(a, b), 0);
  EXPECT_EQ(writeStatus(a, b.addr(), b.mr->rkey), IBV_WC_REM_ACCESS_ERR);
}

TEST_F(SoftnicFault, WriteToAQpWithoutRemoteWriteAccessIsARemoteAccessError) {
  Endpoint a, b;
  QpParams pb;
  pb.access = IBV_ACCESS_REMOTE_READ;
  ASSERT_EQ(connectPair(a, b, {}, pb), 0);
  EXPECT_EQ(writeStatus(a, b.addr(), b.mr->rkey), IBV_WC_REM_ACCESS_ERR);
}

TEST_F(SoftnicFault, WrongLkeyIsALocalProtectionError) {
  Endpoint a, b;
  ASSERT_EQ(connectPair(a, b), 0);
  ibv_sge sge{a.addr(), 8, a.mr->rkey};
  ibv_send_wr wr{};
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.wr.rdma.remote_addr = b.addr();
  wr.wr.rdma.rkey = b.mr->rkey;
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(ibv_post_send(a.qp, &wr, &bad), 0);
  auto got = pollFor(a.cq, 1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].status, IBV_WC_LOC_PROT_ERR);
}

TEST_F(SoftnicFault, NoReceivePostedExhaustsTheRnrRetries) {
  Endpoint a, b;
  QpParams pa;
  pa.rnrRetry = 2;
  ASSERT_EQ(connectPair(a, b, pa), 0);
  ASSERT_EQ(postWrite(a, 1, 0, 8, b.addr(), b.mr->rkey, true, 5), 0);
  auto got = pollFor(a.cq, 1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].status, IBV_WC_RNR_RETRY_EXC_ERR);
  // The data of an RNR-refused write with immediate never lands.
  EXPECT_EQ(b.buf[0], 0);
}

TEST_F(SoftnicFault, RnrWaitsForTheReceiveWhenRetriesAreInfinite) {
  Endpoint a, b;
  ASSERT_EQ(connectPair(a, b), 0);  // rnr_retry 7: retry forever
  ASSERT_EQ(postWrite(a, 1, 0, 8, b.addr(), b.mr->rkey, true, htonl(5)), 0);
  EXPECT_TRUE(pollFor(a.cq, 1, 100).empty());  // held back, not failed
  ASSERT_EQ(postRecv(b, 1), 0);
  auto got = pollFor(b.cq, 1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(ntohl(got[0].imm_data), 5u);
  auto sent = pollFor(a.cq, 1);
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].status, IBV_WC_SUCCESS);
}

TEST_F(SoftnicFault, SendLongerThanTheReceiveIsAnInvalidRequest) {
  Endpoint a, b;
  ASSERT_EQ(connectPair(a, b), 0);
  ASSERT_EQ(postRecv(b, 1, 0, 16), 0);
  ibv_sge sge{a.addr(), 32, a.mr->lkey};
  ibv_send_wr wr{};
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_SEND;
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(ibv_post_send(a.qp, &wr, &bad), 0);
  auto sent = pollFor(a.cq, 1);
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].status, IBV_WC_REM_INV_REQ_ERR);
  auto got = pollFor(b.cq, 1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].status, IBV_WC_LOC_LEN_ERR);
}

TEST_F(SoftnicFault, CqOverflowRaisesCqErr) {
  Endpoint a, b(1 << 16, kAllRemote, 2);  // b's CQ holds two completions
  ASSERT_EQ(connectPair(a, b), 0);
  for (int i = 0; i < 3; ++i) ASSERT_EQ(postRecv(b, uint64_t(i)), 0);
  for (int i = 0; i < 3; ++i)
    ASSERT_EQ(postWrite(a, uint64_t(i), 0, 8, b.addr(), b.mr->rkey, true, 0), 0);
  ibv_async_event event{};
  ASSERT_TRUE(nextAsyncEvent(b.ctx, &event));
  EXPECT_EQ(event.event_type, IBV_EVENT_CQ_ERR);
  EXPECT_EQ(event.element.cq, b.cq);
}

TEST_F(SoftnicFault, InjectedRetryExceededFailsTheNextSendAndFlushesTheRest) {
  Endpoint a, b;
  ASSERT_EQ(connectPair(a, b), 0);
  ASSERT_EQ(loom_softnic_inject("retry_exceeded@1"), 0);  // the second send fails
  for (int i = 0; i < 3; ++i)
    ASSERT_EQ(postWrite(a, uint64_t(i), 0, 8, b.addr(), b.mr->rkey, false, 0), 0);
  auto got = pollFor(a.cq, 3);
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(got[1].status, IBV_WC_RETRY_EXC_ERR);
  EXPECT_EQ(got[2].status, IBV_WC_WR_FLUSH_ERR);
}

TEST_F(SoftnicFault, InjectedQpFatalRaisesTheEventAndFailsTheRequest) {
  Endpoint a, b;
  ASSERT_EQ(connectPair(a, b), 0);
  ASSERT_EQ(loom_softnic_inject("qp_fatal"), 0);
  ASSERT_EQ(postWrite(a, 1, 0, 8, b.addr(), b.mr->rkey, false, 0), 0);
  ibv_async_event event{};
  ASSERT_TRUE(nextAsyncEvent(a.ctx, &event));
  EXPECT_EQ(event.event_type, IBV_EVENT_QP_FATAL);
  EXPECT_EQ(event.element.qp, a.qp);
  auto got = pollFor(a.cq, 1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].status, IBV_WC_FATAL_ERR);
  // One-shot: a fresh QP works.
  Endpoint c, d;
  ASSERT_EQ(connectPair(c, d), 0);
  EXPECT_EQ(writeStatus(c, d.addr(), d.mr->rkey), IBV_WC_SUCCESS);
}

TEST_F(SoftnicFault, InjectedRegistrationFailure) {
  Endpoint a;
  static char buf[4096];
  ASSERT_EQ(loom_softnic_inject("reg_fail@1"), 0);
  ibv_mr* first = ibv_reg_mr(a.pd, buf, 1024, IBV_ACCESS_LOCAL_WRITE);
  ASSERT_NE(first, nullptr);
  errno = 0;
  EXPECT_EQ(ibv_reg_mr(a.pd, buf + 1024, 1024, IBV_ACCESS_LOCAL_WRITE), nullptr);
  EXPECT_EQ(errno, ENOMEM);
  EXPECT_EQ(ibv_reg_mr(a.pd, buf + 2048, 1024, IBV_ACCESS_LOCAL_WRITE), nullptr);
  ASSERT_EQ(loom_softnic_inject("clear"), 0);
  ibv_mr* later = ibv_reg_mr(a.pd, buf + 2048, 1024, IBV_ACCESS_LOCAL_WRITE);
  EXPECT_NE(later, nullptr);
  ibv_dereg_mr(later);
  ibv_dereg_mr(first);
}

TEST_F(SoftnicFault, DmabufRegistrationWorksUntilNoDmabufIsInjected) {
  Endpoint a, b;
  ASSERT_EQ(connectPair(a, b), 0);
  int fd = memfd_create("softnic-dmabuf", MFD_CLOEXEC);
  ASSERT_GE(fd, 0);
  // The soft NIC reaches a dma-buf region at its iova, as simulated device memory is placed.
  static char device[4096];
  ibv_mr* mr = ibv_reg_dmabuf_mr(b.pd, 0, sizeof(device), uint64_t(uintptr_t(device)), fd,
                                 IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  ASSERT_NE(mr, nullptr);
  std::memcpy(a.buf.data(), "to device", 10);
  EXPECT_EQ(writeStatus(a, uint64_t(uintptr_t(device)), mr->rkey, 10), IBV_WC_SUCCESS);
  EXPECT_STREQ(device, "to device");
  ibv_dereg_mr(mr);
  ASSERT_EQ(loom_softnic_inject("no_dmabuf"), 0);
  errno = 0;
  EXPECT_EQ(ibv_reg_dmabuf_mr(b.pd, 0, sizeof(device), uint64_t(uintptr_t(device)), fd,
                              IBV_ACCESS_LOCAL_WRITE),
            nullptr);
  EXPECT_EQ(errno, EOPNOTSUPP);
  close(fd);
}

TEST_F(SoftnicFault, PortDownRaisesPortErrAndSendsExceedTheirRetries) {
  Endpoint a, b;
  QpParams pa;
  pa.retry = 2;
  ASSERT_EQ(connectPair(a, b, pa), 0);
  ASSERT_EQ(loom_softnic_set_port_state("softnic0", 1, 0), 0);
  ibv_async_event event{};
  ASSERT_TRUE(nextAsyncEvent(a.ctx, &event));
  EXPECT_EQ(event.event_type, IBV_EVENT_PORT_ERR);
  EXPECT_EQ(event.element.port_num, 1);
  ibv_port_attr port{};
  ASSERT_EQ(ibv_query_port(a.ctx, 1, &port), 0);
  EXPECT_EQ(port.state, IBV_PORT_DOWN);
  EXPECT_EQ(writeStatus(a, b.addr(), b.mr->rkey), IBV_WC_RETRY_EXC_ERR);
  ASSERT_EQ(loom_softnic_inject("clear"), 0);  // all ports up again
  ASSERT_TRUE(nextAsyncEvent(a.ctx, &event));
  EXPECT_EQ(event.event_type, IBV_EVENT_PORT_ACTIVE);
  EXPECT_EQ(loom_softnic_inject("no_such_fault"), EINVAL);
  EXPECT_EQ(loom_softnic_set_port_state("nonic", 1, 0), ENODEV);
}

}  // namespace
}  // namespace softnic::test
