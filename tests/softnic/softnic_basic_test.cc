// TEST DOUBLE tests: the soft NIC's devices and its RC data path, two QPs of one process over
// loopback TCP, driven through plain libibverbs calls.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>

#include <cstring>
#include <memory>
#include <thread>

#include "softnic_api.h"
#include "softnic_test_util.h"

namespace softnic::test {
namespace {

TEST(SoftnicDevice, ListsTheConfiguredDeviceWithAnActiveRocePort) {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  ASSERT_NE(list, nullptr);
  ASSERT_EQ(n, 1);
  EXPECT_EQ(list[1], nullptr);
  EXPECT_STREQ(ibv_get_device_name(list[0]), "softnic0");
  EXPECT_NE(ibv_get_device_guid(list[0]), 0u);
  ibv_context* ctx = ibv_open_device(list[0]);
  ibv_free_device_list(list);
  ASSERT_NE(ctx, nullptr);
  ibv_device_attr dev{};
  ASSERT_EQ(ibv_query_device(ctx, &dev), 0);
  EXPECT_EQ(dev.phys_port_cnt, 1);
  ibv_port_attr port{};
  ASSERT_EQ(ibv_query_port(ctx, 1, &port), 0);  // verbs.h's inline, via verbs_context
  EXPECT_EQ(port.state, IBV_PORT_ACTIVE);
  EXPECT_EQ(port.link_layer, IBV_LINK_LAYER_ETHERNET);
  EXPECT_EQ(ibv_query_port(ctx, 2, &port), EINVAL);
  ibv_gid gid{};
  ASSERT_EQ(ibv_query_gid(ctx, 1, 0, &gid), 0);
  EXPECT_EQ(gid.raw[10], 0xff);
  EXPECT_EQ(gid.raw[11], 0xff);
  uint32_t ip;
  std::memcpy(&ip, &gid.raw[12], 4);
  EXPECT_EQ(ip, htonl(INADDR_LOOPBACK));
  EXPECT_NE(gid.raw[8] | gid.raw[9], 0);  // the wire's TCP port
  EXPECT_EQ(ibv_query_gid(ctx, 1, 1, &gid), EINVAL);
  ibv_gid_entry entry{};
  ASSERT_EQ(ibv_query_gid_ex(ctx, 1, 0, &entry, 0), 0);  // verbs.h inline over _ibv_query_gid_ex
  EXPECT_EQ(entry.gid_type, IBV_GID_TYPE_ROCE_V2);
  EXPECT_EQ(std::memcmp(&entry.gid, &gid, sizeof(gid)), 0);
  EXPECT_STREQ(ibv_wc_status_str(IBV_WC_RETRY_EXC_ERR), "transport retry counter exceeded");
  EXPECT_STREQ(ibv_event_type_str(IBV_EVENT_QP_FATAL), "local work queue catastrophic error");
  EXPECT_STREQ(ibv_port_state_str(IBV_PORT_ACTIVE), "PORT_ACTIVE");
  EXPECT_EQ(ibv_fork_init(), 0);
  EXPECT_EQ(ibv_close_device(ctx), 0);
}

// Messages of varied sizes, each at its own offset: every byte, immediate and length must arrive,
// and the receiver's completions must come in posting order.
TEST(SoftnicDataPath, WriteWithImmArrivesWholeAndInOrder) {
  constexpr int kMessages = 300;
  Endpoint a(kMessages * 1024), b(kMessages * 1024);
  ASSERT_EQ(connectPair(a, b), 0);
  for (int i = 0; i < kMessages; ++i) ASSERT_EQ(postRecv(b, 1000 + i), 0);
  for (size_t k = 0; k < a.buf.size(); ++k) a.buf[k] = char(k * 7 + 3);
  for (int i = 0; i < kMessages; ++i) {
    uint32_t len = uint32_t((i * 37) % 1025);
    ASSERT_EQ(postWrite(a, i, size_t(i) * 1024, len, b.addr(size_t(i) * 1024), b.mr->rkey, true,
                        htonl(uint32_t(i))),
              0);
  }
  auto sent = pollFor(a.cq, kMessages);
  ASSERT_EQ(sent.size(), size_t(kMessages));
  auto got = pollFor(b.cq, kMessages);
  ASSERT_EQ(got.size(), size_t(kMessages));
  for (int i = 0; i < kMessages; ++i) {
    uint32_t len = uint32_t((i * 37) % 1025);
    EXPECT_EQ(sent[i].status, IBV_WC_SUCCESS);
    EXPECT_EQ(sent[i].wr_id, uint64_t(i));
    EXPECT_EQ(sent[i].opcode, IBV_WC_RDMA_WRITE);
    ASSERT_EQ(got[i].status, IBV_WC_SUCCESS) << i;
    EXPECT_EQ(got[i].wr_id, uint64_t(1000 + i));
    EXPECT_EQ(got[i].opcode, IBV_WC_RECV_RDMA_WITH_IMM);
    EXPECT_TRUE(got[i].wc_flags & IBV_WC_WITH_IMM);
    EXPECT_EQ(ntohl(got[i].imm_data), uint32_t(i));
    EXPECT_EQ(got[i].byte_len, len);
    EXPECT_EQ(got[i].qp_num, b.qpn());
    EXPECT_EQ(got[i].src_qp, a.qpn());
    EXPECT_EQ(std::memcmp(&a.buf[size_t(i) * 1024], &b.buf[size_t(i) * 1024], len), 0) << i;
  }
}

TEST(SoftnicDataPath, ZeroByteWriteWithImmCarriesOnlyTheImmediate) {
  Endpoint a, b;
  ASSERT_EQ(connectPair(a, b), 0);
  ASSERT_EQ(postRecv(b, 7), 0);
  // No key is checked for zero bytes, as the IB spec says: rkey 0 is fine.
  ASSERT_EQ(postWrite(a, 1, 0, 0, 0, 0, true, htonl(42)), 0);
  auto got = pollFor(b.cq, 1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(got[0].byte_len, 0u);
  EXPECT_EQ(ntohl(got[0].imm_data), 42u);
  ASSERT_EQ(pollFor(a.cq, 1).size(), 1u);
}

TEST(SoftnicDataPath, UnsignaledWritesCompleteSilentlyAndInOrder) {
  Endpoint a, b;
  ASSERT_EQ(connectPair(a, b), 0);
  for (size_t k = 0; k < 4096; ++k) a.buf[k] = char(k);
  ASSERT_EQ(postWrite(a, 1, 0, 2048, b.addr(), b.mr->rkey, false, 0, false), 0);
  ASSERT_EQ(postWrite(a, 2, 2048, 2048, b.addr(2048), b.mr->rkey, false, 0, true), 0);
  auto sent = pollFor(a.cq, 2, 200);
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].wr_id, 2u);
  EXPECT_EQ(std::memcmp(a.buf.data(), b.buf.data(), 4096), 0);
}

TEST(SoftnicDataPath, SendScattersIntoTheReceiveEntries) {
  Endpoint a, b;
  ASSERT_EQ(connectPair(a, b), 0);
  ibv_sge rsge[2] = {{b.addr(100), 10, b.mr->lkey}, {b.addr(500), 100, b.mr->lkey}};
  ibv_recv_wr rwr{};
  rwr.wr_id = 5;
  rwr.sg_list = rsge;
  rwr.num_sge = 2;
  ibv_recv_wr* rbad = nullptr;
  ASSERT_EQ(ibv_post_recv(b.qp, &rwr, &rbad), 0);
  for (int k = 0; k < 64; ++k) a.buf[k] = char('a' + k % 26);
  ibv_sge ssge[2] = {{a.addr(0), 4, a.mr->lkey}, {a.addr(4), 20, a.mr->lkey}};
  ibv_send_wr swr{};
  swr.wr_id = 9;
  swr.sg_list = ssge;
  swr.num_sge = 2;
  swr.opcode = IBV_WR_SEND_WITH_IMM;
  swr.imm_data = htonl(3);
  swr.send_flags = IBV_SEND_SIGNALED;
  ibv_send_wr* sbad = nullptr;
  ASSERT_EQ(ibv_post_send(a.qp, &swr, &sbad), 0);
  auto got = pollFor(b.cq, 1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(got[0].opcode, IBV_WC_RECV);
  EXPECT_EQ(got[0].byte_len, 24u);
  EXPECT_EQ(ntohl(got[0].imm_data), 3u);
  EXPECT_EQ(std::memcmp(&b.buf[100], &a.buf[0], 10), 0);
  EXPECT_EQ(std::memcmp(&b.buf[500], &a.buf[10], 14), 0);
  auto sent = pollFor(a.cq, 1);
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].opcode, IBV_WC_SEND);
}

TEST(SoftnicDataPath, InlineSendNeedsNoKeyAndCopiesAtPost) {
  Endpoint a, b;
  ASSERT_EQ(connectPair(a, b), 0);
  ASSERT_EQ(postRecv(b, 1, 0, 64), 0);
  char local[16] = "inline payload";
  ibv_sge sge{uint64_t(uintptr_t(local)), sizeof(local), 0};
  ibv_send_wr wr{};
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_SEND;
  wr.send_flags = IBV_SEND_INLINE | IBV_SEND_SIGNALED;
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(ibv_post_send(a.qp, &wr, &bad), 0);
  std::memset(local, 'x', sizeof(local));
  auto got = pollFor(b.cq, 1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].byte_len, 16u);
  EXPECT_STREQ(b.buf.data(), "inline payload");
}

TEST(SoftnicDataPath, ReadFetchesRemoteBytes) {
  Endpoint a, b;
  ASSERT_EQ(connectPair(a, b), 0);
  for (int k = 0; k < 1000; ++k) b.buf[2000 + k] = char(k * 13);
  ibv_sge sge{a.addr(10), 1000, a.mr->lkey};
  ibv_send_wr wr{};
  wr.wr_id = 77;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_READ;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = b.addr(2000);
  wr.wr.rdma.rkey = b.mr->rkey;
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(ibv_post_send(a.qp, &wr, &bad), 0);
  auto got = pollFor(a.cq, 1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(got[0].opcode, IBV_WC_RDMA_READ);
  EXPECT_EQ(got[0].byte_len, 1000u);
  EXPECT_EQ(std::memcmp(&a.buf[10], &b.buf[2000], 1000), 0);
}

TEST(SoftnicDataPath, ResetAndReconnectStartsAFreshConnection) {
  Endpoint a, b;
  ASSERT_EQ(connectPair(a, b), 0);
  ASSERT_EQ(postWrite(a, 1, 0, 8, b.addr(), b.mr->rkey, false, 0), 0);
  ASSERT_EQ(pollFor(a.cq, 1).size(), 1u);
  ibv_qp_attr reset{};
  reset.qp_state = IBV_QPS_RESET;
  ASSERT_EQ(ibv_modify_qp(a.qp, &reset, IBV_QP_STATE), 0);
  ASSERT_EQ(ibv_modify_qp(b.qp, &reset, IBV_QP_STATE), 0);
  QpParams p;
  p.sqPsn = p.rqPsn = 0xfffffe;  // the 24-bit PSN wraps within the next writes
  ASSERT_EQ(connectPair(a, b, p, p), 0);
  for (int i = 0; i < 4; ++i) {
    a.buf[i] = char('w' + i);
    ASSERT_EQ(postWrite(a, uint64_t(10 + i), size_t(i), 1, b.addr(size_t(i)), b.mr->rkey, false, 0),
              0);
  }
  auto got = pollFor(a.cq, 4);
  ASSERT_EQ(got.size(), 4u);
  for (const ibv_wc& wc : got) EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  EXPECT_EQ(std::memcmp(b.buf.data(), "wxyz", 4), 0);
}

// Six QP pairs driven from six threads at once: each pair's messages arrive whole and in order.
TEST(SoftnicDataPath, ConcurrentPairsKeepTheirOwnOrder) {
  constexpr int kPairs = 6;
  constexpr int kMessages = 200;
  std::vector<std::unique_ptr<Endpoint>> from, to;
  for (int p = 0; p < kPairs; ++p) {
    from.push_back(std::make_unique<Endpoint>(kMessages * 64));
    to.push_back(std::make_unique<Endpoint>(kMessages * 64));
    ASSERT_EQ(connectPair(*from[p], *to[p]), 0);
    for (int i = 0; i < kMessages; ++i) ASSERT_EQ(postRecv(*to[p], uint64_t(i)), 0);
  }
  std::vector<std::thread> threads;
  for (int p = 0; p < kPairs; ++p)
    threads.emplace_back([&, p] {
      Endpoint& a = *from[p];
      Endpoint& b = *to[p];
      for (size_t k = 0; k < a.buf.size(); ++k) a.buf[k] = char(k + p);
      for (int i = 0; i < kMessages; ++i)
        postWrite(a, uint64_t(i), size_t(i) * 64, 64, b.addr(size_t(i) * 64), b.mr->rkey, true,
                  uint32_t(i), i % 16 == 15);
    });
  for (auto& t : threads) t.join();
  for (int p = 0; p < kPairs; ++p) {
    auto got = pollFor(to[p]->cq, kMessages);
    ASSERT_EQ(got.size(), size_t(kMessages));
    for (int i = 0; i < kMessages; ++i) {
      EXPECT_EQ(got[i].status, IBV_WC_SUCCESS);
      EXPECT_EQ(got[i].wr_id, uint64_t(i));
      EXPECT_EQ(got[i].imm_data, uint32_t(i));
    }
    EXPECT_EQ(from[p]->buf, to[p]->buf);
    EXPECT_EQ(pollFor(from[p]->cq, kMessages / 16).size(), size_t(kMessages / 16));
  }
}

bool readable(int fd, int timeoutMs) {
  pollfd p{fd, POLLIN, 0};
  return poll(&p, 1, timeoutMs) == 1;
}

TEST(SoftnicCompChannel, FdTurnsReadableOnlyWhenArmedAndACompletionArrives) {
  Endpoint a, b;
  ASSERT_EQ(connectPair(a, b), 0);
  int fd = b.channel->fd;
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  ibv_cq* cq = nullptr;
  void* cqContext = nullptr;
  EXPECT_EQ(ibv_get_cq_event(b.channel, &cq, &cqContext), -1);
  EXPECT_EQ(errno, EAGAIN);

  // Unarmed: the completion lands in the CQ, the fd stays quiet.
  ASSERT_EQ(postRecv(b, 1), 0);
  ASSERT_EQ(postWrite(a, 1, 0, 8, b.addr(), b.mr->rkey, true, 1), 0);
  ASSERT_EQ(pollFor(b.cq, 1).size(), 1u);
  EXPECT_FALSE(readable(fd, 50));

  // Armed: the next completion raises exactly one event, then the CQ is disarmed again.
  ASSERT_EQ(ibv_req_notify_cq(b.cq, 0), 0);
  EXPECT_FALSE(readable(fd, 0));
  ASSERT_EQ(postRecv(b, 2), 0);
  ASSERT_EQ(postRecv(b, 3), 0);
  ASSERT_EQ(postWrite(a, 2, 0, 8, b.addr(), b.mr->rkey, true, 2), 0);
  ASSERT_EQ(postWrite(a, 3, 0, 8, b.addr(), b.mr->rkey, true, 3), 0);
  ASSERT_TRUE(readable(fd, 10000));
  ASSERT_EQ(ibv_get_cq_event(b.channel, &cq, &cqContext), 0);
  EXPECT_EQ(cq, b.cq);
  EXPECT_EQ(cqContext, &b);
  ibv_ack_cq_events(cq, 1);
  EXPECT_EQ(pollFor(b.cq, 2).size(), 2u);
  EXPECT_FALSE(readable(fd, 50));
  EXPECT_EQ(pollFor(a.cq, 3).size(), 3u);
}

TEST(SoftnicCompChannel, SolicitedOnlyArmIgnoresUnsolicitedMessages) {
  Endpoint a, b;
  ASSERT_EQ(connectPair(a, b), 0);
  ASSERT_EQ(ibv_req_notify_cq(b.cq, 1), 0);
  ASSERT_EQ(postRecv(b, 1), 0);
  ASSERT_EQ(postWrite(a, 1, 0, 8, b.addr(), b.mr->rkey, true, 1), 0);
  ASSERT_EQ(pollFor(b.cq, 1).size(), 1u);
  EXPECT_FALSE(readable(b.channel->fd, 50));
  ASSERT_EQ(postRecv(b, 2), 0);
  ibv_send_wr wr{};
  wr.opcode = IBV_WR_SEND;
  wr.send_flags = IBV_SEND_SOLICITED;
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(ibv_post_send(a.qp, &wr, &bad), 0);
  EXPECT_TRUE(readable(b.channel->fd, 10000));
}

}  // namespace
}  // namespace softnic::test
