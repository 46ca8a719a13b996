// Point-to-point and groups: a ring posted in every order (send first, receive first, mixed by
// rank, shuffled), from a thread per rank and from one thread; all pairs in one group; sends to
// oneself; several messages to one peer in one group (matched in order); mixed collectives in
// one group; over shared memory and TCP.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <random>

#include "tests/coll/coll_harness.h"

namespace loom::colltest {
namespace {

// One message src -> dst, with its own buffers.
struct Msg {
  Msg(int src, int dst, loomDataType_t type, size_t count, uint32_t salt, size_t offset)
      : src(src), dst(dst), type(type), count(count), salt(salt) {
    size_t bytes = count * typeInfo(type).size;
    send = Buffer(bytes, offset);
    recv = Buffer(bytes, offset == 0 ? 0 : offset + 2);
    for (size_t i = 0; i < count; ++i) storeBits(send.data() + i * elem(), elem(), value(i));
  }
  size_t elem() const { return typeInfo(type).size; }
  uint64_t value(size_t i) const {
    return encodeValue(type, inputValue(type, Op::kMax, src, i, salt));
  }
  std::string verify() const {
    std::string where = "message " + std::to_string(src) + "->" + std::to_string(dst) + " " +
                        typeInfo(type).name + " count " + std::to_string(count) + ":";
    std::string err = send.checkGuards() + recv.checkGuards();
    if (err.empty())
      err = compareElements(
          type, recv.data(), count, [&](size_t i) { return value(i); }, "recvbuff");
    if (err.empty())
      err = compareElements(
          type, send.data(), count, [&](size_t i) { return value(i); }, "sendbuff changed:");
    return err.empty() ? "" : where + " " + err;
  }
  int src, dst;
  loomDataType_t type;
  size_t count;
  uint32_t salt;
  Buffer send, recv;
};

struct Post {
  int msg;
  bool isSend;
};

using Msgs = std::vector<std::unique_ptr<Msg>>;

loomResult_t post(const Msgs& msgs, const Post& p, const CommSet& comms, loomStream_t stream) {
  Msg& m = *msgs[p.msg];
  if (p.isSend) return loomSend(m.send.data(), m.count, m.type, m.dst, comms[m.src], stream);
  return loomRecv(m.recv.data(), m.count, m.type, m.src, comms[m.dst], stream);
}

int rankOf(const Msgs& msgs, const Post& p) {
  return p.isSend ? msgs[p.msg]->src : msgs[p.msg]->dst;
}

// Posts every rank's operations inside one group per rank (a thread each), or all of them in
// one group from this thread in the order given, or (streams) in one group on host streams.
void exchange(CommSet& comms, const Msgs& msgs, const std::vector<Post>& order, Style style) {
  const int n = comms.size();
  if (style == Style::kThreads) {
    std::vector<std::string> errors(n);
    test::runThreads(n, [&](int r) {
      loomGroupStart();
      for (const Post& p : order) {
        if (rankOf(msgs, p) != r) continue;
        if (post(msgs, p, comms, nullptr) != loomSuccess) errors[r] += loomGetLastError(comms[r]);
      }
      if (loomGroupEnd() != loomSuccess) errors[r] += loomGetLastError(nullptr);
    });
    for (int r = 0; r < n; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
  } else {
    ASSERT_LOOM_OK(loomGroupStart());
    for (const Post& p : order) {
      loomStream_t s = style == Style::kStreams ? comms.stream(rankOf(msgs, p)) : nullptr;
      EXPECT_EQ(post(msgs, p, comms, s), loomSuccess) << loomGetLastError(nullptr);
    }
    ASSERT_LOOM_OK(loomGroupEnd());
    if (style == Style::kStreams)
      for (int r = 0; r < n; ++r) ASSERT_LOOM_OK(loomStreamSynchronize(comms.stream(r)));
  }
  for (const auto& m : msgs) EXPECT_EQ(m->verify(), "");
}

enum class Order { kSendFirst, kRecvFirst, kByRankParity, kShuffled };

// A ring: rank r sends to r + 1 and receives from r - 1, all types, several counts.
void ring(CommSet& comms, Order order, Style style, std::vector<size_t> counts) {
  const int n = comms.size();
  std::mt19937 rng(1234);
  uint32_t salt = 0;
  for (loomDataType_t t : allTypes()) {
    for (size_t count : counts) {
      Msgs msgs;
      std::vector<Post> posts;
      for (int r = 0; r < n; ++r) {
        ++salt;
        msgs.push_back(std::make_unique<Msg>(r, (r + 1) % n, t, count, salt, salt % 3));
        posts.push_back({r, true});
      }
      for (int r = 0; r < n; ++r) {
        // rank r receives message r - 1; its recv goes before or after its send
        Post recv{(r + n - 1) % n, false};
        bool recvFirst = order == Order::kRecvFirst || (order == Order::kByRankParity && r % 2);
        if (recvFirst)
          posts.insert(posts.begin() + 2 * r, recv);
        else
          posts.insert(posts.begin() + 2 * r + 1, recv);
      }
      if (order == Order::kShuffled) std::shuffle(posts.begin(), posts.end(), rng);
      exchange(comms, msgs, posts, style);
      if (::testing::Test::HasFailure()) return;
    }
  }
}

class RingRanks : public ::testing::TestWithParam<int> {};

TEST_P(RingRanks, EveryOrderThreads) {
  CommSet comms(GetParam());
  ASSERT_TRUE(comms.ok());
  for (Order o : {Order::kSendFirst, Order::kRecvFirst, Order::kByRankParity, Order::kShuffled})
    ring(comms, o, Style::kThreads, {0, 1, 7, 4099});
}

TEST_P(RingRanks, ShuffledOneThreadGroup) {
  CommSet comms(GetParam());
  ASSERT_TRUE(comms.ok());
  ring(comms, Order::kShuffled, Style::kGroup, {1, 7, 4099});
  ring(comms, Order::kRecvFirst, Style::kGroup, {0, 301});
}

INSTANTIATE_TEST_SUITE_P(Shm, RingRanks, ::testing::Values(1, 2, 3, 4, 8), ranksName);

TEST(Ring, SocketEveryOrder) {
  CommSet comms(3, Transport::kSocket);
  ASSERT_TRUE(comms.ok());
  ring(comms, Order::kSendFirst, Style::kThreads, {0, 7, 4099});
  ring(comms, Order::kShuffled, Style::kGroup, {1, 301});
}

TEST(Ring, OnHostStreamsFromOneThread) {
  CommSet comms(4);
  ASSERT_TRUE(comms.ok());
  ring(comms, Order::kShuffled, Style::kStreams, {1, 7, 4099});
}

TEST(Ring, LargeOddCount) {
  CommSet comms(3);
  ASSERT_TRUE(comms.ok());
  Msgs msgs;
  std::vector<Post> posts;
  for (int r = 0; r < 3; ++r) {
    msgs.push_back(std::make_unique<Msg>(r, (r + 1) % 3, loomFloat32, 1000003, r, r));
    posts.push_back({r, true});
    posts.push_back({(r + 2) % 3, false});
  }
  exchange(comms, msgs, posts, Style::kThreads);
}

// Several messages to one peer in one group, an empty one between two others (torch's
// all_gather_coalesced with an empty input): they are matched in order. The empty ones take no
// part in the order, so the third must not overtake the first; repeated, since overtaking
// needs the first slot to land between the two receives' polls.
TEST(Ring, EmptyMessageBetweenTwoToOnePeer) {
  CommSet comms(2);
  ASSERT_TRUE(comms.ok());
  for (int iter = 0; iter < 300 && !::testing::Test::HasFailure(); ++iter) {
    Msgs msgs;
    std::vector<Post> posts;
    const size_t counts[] = {3, 0, 7, 0};
    for (int r = 0; r < 2; ++r)
      for (size_t count : counts) {
        msgs.push_back(std::make_unique<Msg>(r, 1 - r, loomInt8, count, iter + r, 0));
        posts.push_back({static_cast<int>(msgs.size()) - 1, iter % 2 == 0});
      }
    for (int m = 0; m < static_cast<int>(msgs.size()); ++m) posts.push_back({m, iter % 2 != 0});
    exchange(comms, msgs, posts, Style::kThreads);
  }
}

// nccl-tests' in-place send/recv: each rank sends a buffer to the next and receives the
// previous rank's data into the same buffer, in one group. The send must not be read in place
// by the peer while the receive overwrites it (single-copy steps are off for such a send).
TEST(Ring, SendAndReceiveInTheSameBuffer) {
  for (int n : {2, 3, 4}) {
    for (bool sendFirst : {true, false}) {
      CommSet comms(n);
      ASSERT_TRUE(comms.ok());
      const size_t count = 300007;  // many slots of every size
      auto value = [](int rank, size_t i) {
        return static_cast<float>((i * 7 + rank * 13) % 4093);
      };
      std::vector<std::vector<float>> buf(n, std::vector<float>(count));
      for (int r = 0; r < n; ++r)
        for (size_t i = 0; i < count; ++i) buf[r][i] = value(r, i);
      test::runThreads(n, [&](int r) {
        float* b = buf[r].data();
        ASSERT_LOOM_OK(loomGroupStart());
        if (sendFirst)
          ASSERT_LOOM_OK(loomSend(b, count, loomFloat32, (r + 1) % n, comms[r], nullptr));
        ASSERT_LOOM_OK(loomRecv(b, count, loomFloat32, (r + n - 1) % n, comms[r], nullptr));
        if (!sendFirst)
          ASSERT_LOOM_OK(loomSend(b, count, loomFloat32, (r + 1) % n, comms[r], nullptr));
        ASSERT_LOOM_OK(loomGroupEnd());
      });
      for (int r = 0; r < n; ++r) {
        const int from = (r + n - 1) % n;
        size_t wrong = 0;
        for (size_t i = 0; i < count; ++i) wrong += buf[r][i] != value(from, i);
        EXPECT_EQ(wrong, 0u) << n << " ranks, rank " << r
                             << (sendFirst ? " send first" : " recv first");
      }
    }
  }
}

// A send and a receive of one group that overlap at different offsets have no safe order:
// refused with loomInvalidUsage and a message, on every rank that posts them.
TEST(Ring, SendAndReceiveOverlappingAtAnOffsetIsRefused) {
  CommSet comms(2);
  ASSERT_TRUE(comms.ok());
  std::vector<std::vector<float>> buf(2, std::vector<float>(1000, 1.0f));
  std::vector<loomResult_t> results(2);
  test::runThreads(2, [&](int r) {
    float* b = buf[r].data();
    ASSERT_LOOM_OK(loomGroupStart());
    ASSERT_LOOM_OK(loomSend(b, 500, loomFloat32, 1 - r, comms[r], nullptr));
    ASSERT_LOOM_OK(loomRecv(b + 100, 500, loomFloat32, 1 - r, comms[r], nullptr));
    results[r] = loomGroupEnd();
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(results[r], loomInvalidUsage) << "rank " << r;
    EXPECT_TRUE(test::contains(loomGetLastError(comms[r]), "overlap"))
        << loomGetLastError(comms[r]);
  }
  // Nothing was sent: the communicators still work.
  test::runThreads(2, [&](int r) {
    ASSERT_LOOM_OK(
        loomAllReduce(buf[r].data(), buf[r].data(), 1000, loomFloat32, loomSum, comms[r], nullptr));
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(buf[r][999], 2.0f);
  }
}

// Every rank sends a different message to every other rank (and to itself), in one group,
// each rank posting in its own shuffled order.
void allPairs(CommSet& comms, bool self, loomDataType_t type, size_t count) {
  const int n = comms.size();
  Msgs msgs;
  std::vector<Post> posts;
  for (int s = 0; s < n; ++s) {
    for (int d = 0; d < n; ++d) {
      if (s == d && !self) continue;
      int i = static_cast<int>(msgs.size());
      msgs.push_back(std::make_unique<Msg>(s, d, type, count + s + 2 * d, 16 * s + d, i % 4));
      posts.push_back({i, true});
      posts.push_back({i, false});
    }
  }
  std::mt19937 rng(99);
  std::shuffle(posts.begin(), posts.end(), rng);
  exchange(comms, msgs, posts, Style::kThreads);
}

TEST(AllPairs, OneGroupPerRank) {
  CommSet comms(5);
  ASSERT_TRUE(comms.ok());
  for (loomDataType_t t : {loomUint8, loomFloat16, loomInt32, loomFloat64}) {
    allPairs(comms, false, t, 7);
    allPairs(comms, false, t, 1001);
  }
}

TEST(AllPairs, SocketOneGroupPerRank) {
  CommSet comms(4, Transport::kSocket);
  ASSERT_TRUE(comms.ok());
  allPairs(comms, false, loomInt64, 5);
  allPairs(comms, false, loomBfloat16, 3001);
}

TEST(AllPairs, IncludingSendsToSelf) {
  CommSet comms(3);
  ASSERT_TRUE(comms.ok());
  allPairs(comms, true, loomFloat32, 1);
  allPairs(comms, true, loomInt8, 513);
}

// Several messages between the same two ranks in one group are matched in posting order:
// different counts make a mismatch visible.
TEST(SamePeer, SeveralMessagesMatchedInOrder) {
  CommSet comms(3);
  ASSERT_TRUE(comms.ok());
  const size_t counts[] = {5, 0, 1000, 3, 70001};
  // Messages 0-4 go 0 -> 2, messages 5-9 go 2 -> 0, each direction in this order.
  auto make = [&](uint32_t salt) {
    Msgs msgs;
    for (int i = 0; i < 10; ++i) {
      int src = i < 5 ? 0 : 2;
      msgs.push_back(
          std::make_unique<Msg>(src, 2 - src, loomInt32, counts[i % 5], salt + i, i % 3));
    }
    return msgs;
  };
  // Rank 0 interleaves its sends and receives; rank 2 posts its receives first.
  std::vector<Post> posts;
  for (int i = 0; i < 5; ++i) {
    posts.push_back({i, true});
    posts.push_back({5 + i, false});
  }
  for (int i = 0; i < 5; ++i) posts.push_back({i, false});
  for (int i = 5; i < 10; ++i) posts.push_back({i, true});
  exchange(comms, make(10), posts, Style::kThreads);
  exchange(comms, make(20), posts, Style::kGroup);
}

// Without a group: rank 0 sends then receives, rank 1 receives then sends.
TEST(SamePeer, UngroupedPingPong) {
  CommSet comms(2);
  ASSERT_TRUE(comms.ok());
  Msg ping(0, 1, loomFloat64, 100003, 1, 0), pong(1, 0, loomFloat64, 100003, 2, 1);
  std::vector<loomResult_t> res(4, loomInternalError);
  test::runThreads(2, [&](int r) {
    if (r == 0) {
      res[0] = loomSend(ping.send.data(), ping.count, ping.type, 1, comms[0], nullptr);
      res[1] = loomRecv(pong.recv.data(), pong.count, pong.type, 1, comms[0], nullptr);
    } else {
      res[2] = loomRecv(ping.recv.data(), ping.count, ping.type, 0, comms[1], nullptr);
      res[3] = loomSend(pong.send.data(), pong.count, pong.type, 0, comms[1], nullptr);
    }
  });
  for (loomResult_t r : res) EXPECT_EQ(r, loomSuccess);
  EXPECT_EQ(ping.verify(), "");
  EXPECT_EQ(pong.verify(), "");
}

}  // namespace
}  // namespace loom::colltest
