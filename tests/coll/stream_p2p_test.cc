// Independent operations on different streams (and threads) of one communicator progress
// together (progress_engine.h): every rank posts its receives before its sends, on another
// stream or thread; sends and receives spread over many streams, posted and waited for in
// random order; point-to-point beside a collective on a third stream. 2 and 3 ranks, over
// shared memory and TCP; every received element is checked.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "tests/coll/coll_harness.h"

namespace loom::colltest {
namespace {

// Element i of message k from src to dst: every message has its own values.
int32_t valueOf(int src, int dst, int k, size_t i) {
  uint32_t v = static_cast<uint32_t>(src + 1) * 1000003u ^ static_cast<uint32_t>(dst + 1) * 7919u ^
               static_cast<uint32_t>(k + 1) * 104729u ^ static_cast<uint32_t>(i) * 2654435761u;
  return static_cast<int32_t>(v);
}

// One message src -> dst, the k-th on its connection.
struct Message {
  Message(int src, int dst, int k, size_t count)
      : src(src), dst(dst), k(k), send(count), recv(count, -1) {
    for (size_t i = 0; i < count; ++i) send[i] = valueOf(src, dst, k, i);
  }
  std::string verify() const {
    for (size_t i = 0; i < recv.size(); ++i) {
      if (recv[i] != valueOf(src, dst, k, i) || send[i] != valueOf(src, dst, k, i))
        return "message " + std::to_string(src) + "->" + std::to_string(dst) + " #" +
               std::to_string(k) + " element " + std::to_string(i) + " of " +
               std::to_string(recv.size()) + ": got " + std::to_string(recv[i]);
    }
    return "";
  }
  loomResult_t postSend(const CommSet& comms, loomStream_t s) {
    return loomSend(send.data(), send.size(), loomInt32, dst, comms[src], s);
  }
  loomResult_t postRecv(const CommSet& comms, loomStream_t s) {
    return loomRecv(recv.data(), recv.size(), loomInt32, src, comms[dst], s);
  }
  int src, dst, k;
  std::vector<int32_t> send, recv;
};

// Host streams of every rank, destroyed before the communicators.
class Streams {
 public:
  Streams(const CommSet& comms, int perRank) : perRank_(perRank) {
    for (int r = 0; r < comms.size(); ++r) {
      for (int s = 0; s < perRank; ++s) {
        loomStream_t stream = nullptr;
        EXPECT_EQ(loomStreamCreate(comms[r], &stream), loomSuccess);
        streams_.push_back(stream);
      }
    }
  }
  ~Streams() {
    for (loomStream_t s : streams_) EXPECT_EQ(loomStreamDestroy(s), loomSuccess);
  }
  loomStream_t at(int rank, int index) const { return streams_[rank * perRank_ + index]; }
  void synchronizeAll() const {
    for (loomStream_t s : streams_) EXPECT_EQ(loomStreamSynchronize(s), loomSuccess);
  }

 private:
  int perRank_;
  std::vector<loomStream_t> streams_;
};

using Param = std::tuple<int, Transport>;

std::string paramName(const ::testing::TestParamInfo<Param>& info) {
  return "n" + std::to_string(std::get<0>(info.param)) + "_" +
         transportName(std::get<1>(info.param));
}

// Counts from one element to several steps of the point-to-point slots.
size_t countFor(int src, int dst, int k) {
  static const size_t counts[] = {1, 257, 4099, 70001, 300007};
  return counts[(src * 3 + dst + k) % 5];
}

void expectAll(const std::vector<std::unique_ptr<Message>>& msgs) {
  for (const auto& m : msgs) EXPECT_EQ(m->verify(), "");
}

class StreamP2p : public ::testing::TestWithParam<Param> {};

// Every rank posts a receive from every peer on stream 0 before any send (stream 1): with one
// operation per communicator at a time, each rank's receive would hold it while its send waited.
TEST_P(StreamP2p, EveryRankPostsItsReceivesFirst) {
  const auto [n, transport] = GetParam();
  CommSet comms(n, transport);
  ASSERT_TRUE(comms.ok());
  Streams streams(comms, 2);
  std::vector<std::unique_ptr<Message>> msgs;
  for (int src = 0; src < n; ++src)
    for (int dst = 0; dst < n; ++dst)
      if (src != dst) msgs.push_back(std::make_unique<Message>(src, dst, 0, countFor(src, dst, 4)));
  for (auto& m : msgs) ASSERT_LOOM_OK(m->postRecv(comms, streams.at(m->dst, 0)));
  for (auto& m : msgs) ASSERT_LOOM_OK(m->postSend(comms, streams.at(m->src, 1)));
  streams.synchronizeAll();
  expectAll(msgs);
}

// The same from two threads per rank on the NULL stream: one receives, then the other sends.
TEST_P(StreamP2p, ReceivingAndSendingThreadsOfOneCommunicator) {
  const auto [n, transport] = GetParam();
  CommSet comms(n, transport);
  ASSERT_TRUE(comms.ok());
  for (int round = 0; round < 3; ++round) {
    std::vector<std::unique_ptr<Message>> msgs;
    for (int src = 0; src < n; ++src)
      for (int dst = 0; dst < n; ++dst)
        if (src != dst)
          msgs.push_back(std::make_unique<Message>(src, dst, round, countFor(src, dst, round)));
    std::vector<std::string> errors(2 * n);
    test::runThreads(2 * n, [&](int t) {
      const int rank = t % n;
      const bool receives = t < n;  // the receiving threads start first
      for (auto& m : msgs) {
        if ((receives ? m->dst : m->src) != rank) continue;
        loomResult_t r = receives ? m->postRecv(comms, nullptr) : m->postSend(comms, nullptr);
        if (r != loomSuccess) errors[t] += loomGetLastError(comms[rank]);
      }
    });
    for (const std::string& e : errors) EXPECT_EQ(e, "");
    expectAll(msgs);
  }
}

// Each connection (peer and direction) of each rank on a stream of its own, picked at random;
// the posts interleaved at random (a connection's messages stay in their order on both ends);
// an event after every post, waited for in random order, its message checked at once.
TEST_P(StreamP2p, ManyStreamsRandomPostingAndWaitingOrder) {
  const auto [n, transport] = GetParam();
  constexpr int kPerConnection = 5;
  CommSet comms(n, transport);
  ASSERT_TRUE(comms.ok());
  const int connections = 2 * (n - 1);  // per rank
  Streams streams(comms, connections);
  std::mt19937 rng(1234 + n);
  // Per rank: its connections (peer, sends?) in a random order of its streams.
  struct Post {
    int rank, peer;
    bool send;
    int stream;
  };
  std::vector<Post> lanes;
  for (int r = 0; r < n; ++r) {
    std::vector<int> order(connections);
    for (int i = 0; i < connections; ++i) order[i] = i;
    std::shuffle(order.begin(), order.end(), rng);
    int i = 0;
    for (int p = 0; p < n; ++p) {
      if (p == r) continue;
      lanes.push_back({r, p, true, order[i++]});
      lanes.push_back({r, p, false, order[i++]});
    }
  }
  std::vector<int> sequence;  // lane indices, each kPerConnection times, shuffled
  for (size_t l = 0; l < lanes.size(); ++l)
    for (int k = 0; k < kPerConnection; ++k) sequence.push_back(static_cast<int>(l));
  std::shuffle(sequence.begin(), sequence.end(), rng);
  // messages[(src, dst, k)]: both ends refer to one Message.
  auto index = [&](int src, int dst, int k) { return (src * n + dst) * kPerConnection + k; };
  std::vector<std::unique_ptr<Message>> msgs(n * n * kPerConnection);
  for (int s = 0; s < n; ++s)
    for (int d = 0; d < n; ++d)
      for (int k = 0; k < kPerConnection; ++k)
        if (s != d) msgs[index(s, d, k)] = std::make_unique<Message>(s, d, k, countFor(s, d, k));
  struct Mark {
    loomEvent_t event;
    Message* msg;
    bool recv;
  };
  std::vector<Mark> marks;
  std::vector<int> next(lanes.size(), 0);
  for (int l : sequence) {
    const Post& p = lanes[l];
    const int k = next[l]++;
    loomStream_t s = streams.at(p.rank, p.stream);
    Message* m =
        p.send ? msgs[index(p.rank, p.peer, k)].get() : msgs[index(p.peer, p.rank, k)].get();
    ASSERT_LOOM_OK(p.send ? m->postSend(comms, s) : m->postRecv(comms, s));
    loomEvent_t e = nullptr;
    ASSERT_LOOM_OK(loomEventCreate(&e));
    ASSERT_LOOM_OK(loomEventRecord(e, s));
    marks.push_back({e, m, !p.send});
  }
  std::shuffle(marks.begin(), marks.end(), rng);
  for (const Mark& mark : marks) {
    ASSERT_LOOM_OK(loomEventSynchronize(mark.event));
    if (mark.recv) {
      EXPECT_EQ(mark.msg->verify(), "");
    }
  }
  for (const Mark& mark : marks) EXPECT_EQ(loomEventDestroy(mark.event), loomSuccess);
  streams.synchronizeAll();
  for (const auto& m : msgs)
    if (m) {
      EXPECT_EQ(m->verify(), "");
    }
}

// Receives on stream 0, sends on stream 1, and AllReduces on stream 2 posted between them: the
// collective runs beside the point-to-point traffic and every result is exact.
TEST_P(StreamP2p, BesideACollectiveOnAThirdStream) {
  const auto [n, transport] = GetParam();
  CommSet comms(n, transport);
  ASSERT_TRUE(comms.ok());
  Streams streams(comms, 3);
  const size_t reduceCounts[] = {1, 4099, 300007};
  std::vector<std::vector<int32_t>> reduced(n * 3);
  std::vector<std::unique_ptr<Message>> msgs;
  for (int src = 0; src < n; ++src)
    for (int dst = 0; dst < n; ++dst)
      if (src != dst) msgs.push_back(std::make_unique<Message>(src, dst, 1, countFor(src, dst, 1)));
  for (auto& m : msgs) ASSERT_LOOM_OK(m->postRecv(comms, streams.at(m->dst, 0)));
  for (int c = 0; c < 3; ++c) {
    for (int r = 0; r < n; ++r) {
      std::vector<int32_t>& buf = reduced[r * 3 + c];
      buf.resize(reduceCounts[c]);
      for (size_t i = 0; i < buf.size(); ++i) buf[i] = valueOf(r, c, 9, i) % 1000;
      ASSERT_LOOM_OK(loomAllReduce(buf.data(), buf.data(), buf.size(), loomInt32, loomSum, comms[r],
                                   streams.at(r, 2)));
    }
  }
  for (auto& m : msgs) ASSERT_LOOM_OK(m->postSend(comms, streams.at(m->src, 1)));
  streams.synchronizeAll();
  expectAll(msgs);
  for (int c = 0; c < 3; ++c) {
    for (int r = 0; r < n; ++r) {
      const std::vector<int32_t>& buf = reduced[r * 3 + c];
      for (size_t i = 0; i < buf.size(); ++i) {
        int32_t want = 0;
        for (int q = 0; q < n; ++q) want += valueOf(q, c, 9, i) % 1000;
        ASSERT_EQ(buf[i], want) << "AllReduce " << c << " rank " << r << " element " << i;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Transports, StreamP2p,
                         ::testing::Combine(::testing::Values(2, 3),
                                            ::testing::Values(Transport::kDefault,
                                                              Transport::kSocket)),
                         paramName);

}  // namespace
}  // namespace loom::colltest
