// Unit tests of loom's wire formats (unique id, root registration and reply) and of the
// sockets and authenticated listener underneath the bootstrap, on loopback only.
//
// The refusal tests count refused connections through loom::testing; they rely on being the
// only listeners refusing in this process while they run (ctest runs each test alone).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "src/base/error.h"
#include "src/bootstrap/bootstrap_root.h"
#include "src/bootstrap/unique_id.h"
#include "src/net/auth_listener.h"
#include "src/net/socket.h"
#include "src/net/test_hooks.h"
#include "tests/test_util.h"

namespace loom {
namespace {

using namespace std::chrono_literals;

// Generous: loopback transfers take microseconds; these only stop a broken test from hanging.
Deadline soon() { return Deadline::after(10s); }

using test::contains;
using test::messageOf;

SocketAddress loopback0() { return SocketAddress::parse("127.0.0.1:0"); }

Secret secretOf(uint8_t first) {
  Secret s;
  for (size_t i = 0; i < s.size(); ++i) s[i] = static_cast<uint8_t>(first + i * 7);
  return s;
}

// Two ends of one loopback TCP connection.
struct SocketPair {
  Socket client;
  Socket server;
};

SocketPair connectedPair() {
  Socket listener = Socket::listen(loopback0());
  SocketPair pair;
  pair.client = Socket::connect(listener.localAddress(), soon(), nullptr, true);
  for (int i = 0; i < 1000 && !pair.server.valid(); ++i) {
    pair.server = listener.tryAccept();
    if (!pair.server.valid()) std::this_thread::sleep_for(5ms);
  }
  EXPECT_TRUE(pair.server.valid()) << "the loopback connection was never accepted";
  return pair;
}

// ---- unique id ----------------------------------------------------------------------------

// Byte offsets of the packed id (see unique_id.cc): magic(4) version(2) flags(2) family(2)
// port(2) scope(4) addr(16) secret(16).
constexpr size_t kIdVersionAt = 4, kIdFlagsAt = 6, kIdFamilyAt = 8, kIdPortAt = 10;

void putU16(loomUniqueId& id, size_t at, uint16_t value) {
  value = htons(value);
  std::memcpy(id.internal + at, &value, 2);
}

UniqueIdContents sampleContents(const std::string& root, bool atRank0) {
  UniqueIdContents c;
  c.root = SocketAddress::parse(root);
  c.secret = randomSecret();
  c.rootAtRank0 = atRank0;
  return c;
}

TEST(UniqueId, RoundTripIpv4) {
  UniqueIdContents in = sampleContents("10.1.2.3:4567", false);
  UniqueIdContents out = unpackUniqueId(packUniqueId(in));
  EXPECT_EQ(out.root.family(), AF_INET);
  EXPECT_EQ(out.root.length, sizeof(sockaddr_in));
  EXPECT_EQ(out.root.port(), 4567);
  EXPECT_EQ(out.root.toString(), "10.1.2.3:4567");
  EXPECT_EQ(out.secret, in.secret);
  EXPECT_FALSE(out.rootAtRank0);
}

TEST(UniqueId, RoundTripIpv6WithRootAtRank0) {
  UniqueIdContents in = sampleContents("[2001:db8::42]:65535", true);
  reinterpret_cast<sockaddr_in6*>(&in.root.storage)->sin6_scope_id = 3;
  UniqueIdContents out = unpackUniqueId(packUniqueId(in));
  EXPECT_EQ(out.root.family(), AF_INET6);
  EXPECT_EQ(out.root.length, sizeof(sockaddr_in6));
  EXPECT_EQ(out.root.port(), 65535);
  EXPECT_EQ(reinterpret_cast<const sockaddr_in6*>(&out.root.storage)->sin6_scope_id, 3u);
  EXPECT_EQ(std::memcmp(&reinterpret_cast<const sockaddr_in6*>(&out.root.storage)->sin6_addr,
                        &reinterpret_cast<const sockaddr_in6*>(&in.root.storage)->sin6_addr, 16),
            0);
  EXPECT_EQ(out.secret, in.secret);
  EXPECT_TRUE(out.rootAtRank0);
}

TEST(UniqueId, PackIsDeterministicAndZeroPadded) {
  UniqueIdContents in = sampleContents("127.0.0.1:9", false);
  loomUniqueId a = packUniqueId(in), b = packUniqueId(in);
  EXPECT_EQ(std::memcmp(&a, &b, sizeof(a)), 0);
  // Everything after the secret (offset 48) is zero, so ids compare as bytes.
  for (size_t i = 48; i < LOOM_UNIQUE_ID_BYTES; ++i) EXPECT_EQ(a.internal[i], 0) << i;
}

TEST(UniqueId, GarbageIsInvalidArgument) {
  const loomUniqueId good = packUniqueId(sampleContents("127.0.0.1:5000", false));
  ASSERT_NO_THROW(unpackUniqueId(good));

  loomUniqueId zeros;
  std::memset(&zeros, 0, sizeof(zeros));
  EXPECT_TRUE(contains(messageOf<InvalidArgument>([&] { unpackUniqueId(zeros); }), "magic"));

  std::mt19937 rng(12345);
  for (int trial = 0; trial < 20; ++trial) {
    loomUniqueId random;
    for (char& c : random.internal) c = static_cast<char>(rng());
    EXPECT_THROW(unpackUniqueId(random), InvalidArgument) << "trial " << trial;
  }

  loomUniqueId flippedMagic = good;
  flippedMagic.internal[0] ^= 0x01;
  EXPECT_TRUE(contains(messageOf<InvalidArgument>([&] { unpackUniqueId(flippedMagic); }), "magic"));

  for (uint16_t version : {0, 2, 0xffff}) {
    loomUniqueId badVersion = good;
    putU16(badVersion, kIdVersionAt, version);
    EXPECT_TRUE(
        contains(messageOf<InvalidArgument>([&] { unpackUniqueId(badVersion); }), "version"))
        << version;
  }

  for (uint16_t flags : {2, 0x8000, 3}) {
    loomUniqueId badFlags = good;
    putU16(badFlags, kIdFlagsAt, flags);
    EXPECT_TRUE(contains(messageOf<InvalidArgument>([&] { unpackUniqueId(badFlags); }), "flags"))
        << flags;
  }

  loomUniqueId port0 = good;
  putU16(port0, kIdPortAt, 0);
  EXPECT_TRUE(contains(messageOf<InvalidArgument>([&] { unpackUniqueId(port0); }), "port 0"));

  for (uint16_t family : {0, AF_UNIX, 99}) {
    loomUniqueId badFamily = good;
    putU16(badFamily, kIdFamilyAt, family);
    EXPECT_TRUE(contains(messageOf<InvalidArgument>([&] { unpackUniqueId(badFamily); }), "family"))
        << family;
  }
}

TEST(UniqueId, Secrets) {
  Secret a = randomSecret(), b = randomSecret();
  EXPECT_NE(a, b);
  EXPECT_FALSE(secretsEqual(a, b));
  EXPECT_TRUE(secretsEqual(a, a));

  Secret d1 = derivedSecret("host:1234", "");
  EXPECT_EQ(d1, derivedSecret("host:1234", ""));
  EXPECT_TRUE(secretsEqual(d1, derivedSecret("host:1234", "")));
  EXPECT_NE(d1, derivedSecret("host:1235", ""));
  EXPECT_NE(d1, derivedSecret("host:1234", "s3cret"));
  EXPECT_NE(derivedSecret("host:1234", "s3cret"), derivedSecret("host:1234", "s3creT"));
  // The separator keeps "id + secret" from colliding with a shifted split.
  EXPECT_NE(derivedSecret("ab", "c"), derivedSecret("a", "bc"));

  Secret c = a;
  EXPECT_TRUE(secretsEqual(a, c));
  c.front() ^= 1;
  EXPECT_FALSE(secretsEqual(a, c));
  c = a;
  c.back() ^= 0x80;
  EXPECT_FALSE(secretsEqual(a, c));
}

// ---- root registration and reply ----------------------------------------------------------

TEST(RootWire, RegistrationRoundTrip) {
  RootRegistration in{SocketAddress::parse("127.0.0.1:4321"), (int64_t{1} << 40) | 7};
  RootRegistration out = decodeRegistration(encodeRegistration(in));
  EXPECT_EQ(out.listener.toString(), "127.0.0.1:4321");
  EXPECT_EQ(out.listener.length, sizeof(sockaddr_in));
  EXPECT_EQ(out.timeoutMs, in.timeoutMs);

  RootRegistration in6{SocketAddress::parse("[::1]:17"), 5000};
  out = decodeRegistration(encodeRegistration(in6));
  EXPECT_EQ(out.listener.toString(), "[::1]:17");
  EXPECT_EQ(out.timeoutMs, 5000);

  std::vector<char> bytes = encodeRegistration(in);
  bytes.resize(bytes.size() - 1);
  EXPECT_THROW(decodeRegistration(bytes), RemoteError);
  EXPECT_THROW(decodeRegistration({}), RemoteError);
}

TEST(RootWire, SuccessReplyRoundTrip) {
  SocketPair pair = connectedPair();
  RootReply in;
  in.listeners = {SocketAddress::parse("127.0.0.1:1000"), SocketAddress::parse("[::1]:2000"),
                  SocketAddress::parse("10.0.0.7:3000")};
  std::vector<char> bytes = encodeReply(in);
  pair.server.sendAll(bytes.data(), bytes.size(), soon(), nullptr);
  RootReply out = receiveReply(pair.client, soon(), nullptr);
  EXPECT_EQ(out.status, loomSuccess);
  EXPECT_EQ(out.message, "");
  ASSERT_EQ(out.listeners.size(), 3u);
  EXPECT_EQ(out.listeners[0].toString(), "127.0.0.1:1000");
  EXPECT_EQ(out.listeners[1].toString(), "[::1]:2000");
  EXPECT_EQ(out.listeners[2].toString(), "10.0.0.7:3000");
}

TEST(RootWire, ErrorRepliesRoundTrip) {
  SocketPair pair = connectedPair();
  RootReply timeout;
  timeout.status = loomTimeout;
  timeout.message = "2 of 4 ranks never reached the rendezvous: missing rank(s) 1, 3";
  RootReply mismatch;
  mismatch.status = loomInvalidArgument;
  mismatch.message = "";
  for (const RootReply& in : {timeout, mismatch}) {
    std::vector<char> bytes = encodeReply(in);
    pair.server.sendAll(bytes.data(), bytes.size(), soon(), nullptr);
  }
  RootReply out = receiveReply(pair.client, soon(), nullptr);
  EXPECT_EQ(out.status, loomTimeout);
  EXPECT_EQ(out.message, timeout.message);
  EXPECT_TRUE(out.listeners.empty());
  out = receiveReply(pair.client, soon(), nullptr);
  EXPECT_EQ(out.status, loomInvalidArgument);
  EXPECT_EQ(out.message, "");
}

TEST(RootWire, OversizedReplyIsRemoteError) {
  SocketPair pair = connectedPair();
  uint32_t size = htonl(kMaxBootstrapPayload + 1);
  pair.server.sendAll(&size, 4, soon(), nullptr);
  EXPECT_THROW(receiveReply(pair.client, soon(), nullptr), RemoteError);
}

// ---- AuthListener -------------------------------------------------------------------------

Hello makeHello(HelloKind kind, const Secret& secret, int rank, int nranks, uint32_t tag,
                uint32_t payloadBytes) {
  Hello h;
  h.kind = kind;
  h.secret = secret;
  h.rank = rank;
  h.nranks = nranks;
  h.tag = tag;
  h.payloadBytes = payloadBytes;
  return h;
}

// Where the header holds payloadBytes, its last field: magic(4) version(2) kind(2) secret(16)
// rank(4) nranks(4) tag(4) payloadBytes(4).
constexpr size_t kHelloPayloadBytesAt = 36;

// The kHelloBytes that sendHello writes for `hello` (payload not included), captured from a
// loopback connection so the test does not restate the encoder.
std::vector<uint8_t> helloBytes(Hello hello) {
  uint32_t announced = hello.payloadBytes;
  hello.payloadBytes = 0;
  SocketPair pair = connectedPair();
  sendHello(pair.client, hello, nullptr, soon(), nullptr);
  std::vector<uint8_t> bytes(kHelloBytes);
  pair.server.recvAll(bytes.data(), bytes.size(), soon(), nullptr);
  uint32_t net = htonl(announced);
  std::memcpy(bytes.data() + kHelloPayloadBytesAt, &net, 4);
  return bytes;
}

// Leaves a non-zero pattern in the stack below the caller's frame, where the next call's
// locals will live.
__attribute__((noinline)) void scribbleStack() {
  volatile uint8_t scribble[1 << 16];
  for (size_t i = 0; i < sizeof(scribble); ++i) scribble[i] = static_cast<uint8_t>(0xa5 ^ i);
  (void)scribble[0];
}

// Polls `listener` until `done()` or `iterations` polls of 20 ms; returns every connection the
// listener admitted meanwhile.
template <typename Done>
std::vector<IncomingConnection> pollUntil(AuthListener& listener, Done&& done, int iterations) {
  std::vector<IncomingConnection> admitted;
  for (int i = 0; i < iterations && !done(); ++i) {
    if (std::optional<IncomingConnection> c = listener.poll(20)) admitted.push_back(std::move(*c));
  }
  return admitted;
}

TEST(HelloWire, HeaderHasNoUninitializedBytes) {
  const Hello hello = makeHello(HelloKind::kRegister, secretOf(3), 5, 9, 0x01020304, 0);
  SocketPair pair = connectedPair();
  scribbleStack();
  sendHello(pair.client, hello, nullptr, soon(), nullptr);
  std::vector<uint8_t> bytes(kHelloBytes);
  pair.server.recvAll(bytes.data(), bytes.size(), soon(), nullptr);
  uint32_t tag;
  std::memcpy(&tag, bytes.data() + kHelloPayloadBytesAt - 4, 4);
  EXPECT_EQ(ntohl(tag), 0x01020304u);
  // Bytes past the last field are padding: they must be zero, not leftover stack memory sent
  // to whoever is at the other end.
  for (size_t i = kHelloPayloadBytesAt + 4; i < kHelloBytes; ++i)
    EXPECT_EQ(bytes[i], 0) << "header byte " << i << " of " << kHelloBytes;
}

class AuthListenerTest : public ::testing::Test {
 protected:
  AuthListenerTest() : secret_(secretOf(11)), listener_(loopback0(), secret_, "test listener") {}

  Socket connectClient() {
    Socket s = Socket::connect(listener_.address(), soon(), nullptr, true);
    return s;
  }

  // Sends `bytes` from a new client (closing it afterwards when `closeAfter`), then checks the
  // listener refuses exactly that one connection and admits nothing; unless closed, the client
  // then sees the connection end.
  void expectRefused(const std::vector<uint8_t>& bytes, bool closeAfter) {
    const uint64_t before = testing::refusedConnectionCount();
    Socket client = connectClient();
    client.sendAll(bytes.data(), bytes.size(), soon(), nullptr);
    if (closeAfter) client.close();
    std::vector<IncomingConnection> admitted = pollUntil(
        listener_, [&] { return testing::refusedConnectionCount() > before; }, 500);
    // A few more polls: a second refusal or a late admission would show up here.
    for (int i = 0; i < 5; ++i) {
      if (std::optional<IncomingConnection> c = listener_.poll(10))
        admitted.push_back(std::move(*c));
    }
    EXPECT_TRUE(admitted.empty()) << "the listener admitted a bad connection";
    EXPECT_EQ(testing::refusedConnectionCount(), before + 1);
    if (!closeAfter) {
      char byte;
      std::string msg = messageOf<RemoteError>([&] { client.recvAll(&byte, 1, soon(), nullptr); });
      EXPECT_FALSE(msg.empty());
    }
  }

  Secret secret_;
  AuthListener listener_;
};

TEST_F(AuthListenerTest, ListensOnLoopbackWithAPort) {
  EXPECT_TRUE(listener_.address().isLoopback());
  EXPECT_NE(listener_.address().port(), 0);
  EXPECT_FALSE(listener_.poll(0).has_value());
}

TEST_F(AuthListenerTest, AdmitsValidHelloWithPayload) {
  const uint64_t before = testing::refusedConnectionCount();
  Socket client = connectClient();
  const std::string payload = "hello, root";
  Hello hello =
      makeHello(HelloKind::kRegister, secret_, 3, 8, 77, static_cast<uint32_t>(payload.size()));
  sendHello(client, hello, payload.data(), soon(), nullptr);

  std::vector<IncomingConnection> got;
  for (int i = 0; i < 500 && got.empty(); ++i) {
    if (std::optional<IncomingConnection> c = listener_.poll(20)) got.push_back(std::move(*c));
  }
  ASSERT_EQ(got.size(), 1u);
  IncomingConnection& c = got[0];
  EXPECT_EQ(c.hello.kind, HelloKind::kRegister);
  EXPECT_EQ(c.hello.rank, 3);
  EXPECT_EQ(c.hello.nranks, 8);
  EXPECT_EQ(c.hello.tag, 77u);
  EXPECT_EQ(c.hello.payloadBytes, payload.size());
  EXPECT_TRUE(secretsEqual(c.hello.secret, secret_));
  EXPECT_EQ(std::string(c.payload.begin(), c.payload.end()), payload);
  EXPECT_EQ(c.socket.peerName(), "rank 3");
  EXPECT_EQ(testing::refusedConnectionCount(), before);

  // The admitted socket is the client's connection, usable both ways.
  const char ping[] = "ping";
  client.sendAll(ping, 4, soon(), nullptr);
  char buf[4];
  c.socket.recvAll(buf, 4, soon(), nullptr);
  EXPECT_EQ(std::string(buf, 4), "ping");
}

TEST_F(AuthListenerTest, AdmitsHellosWithoutPayload) {
  Socket a = connectClient(), b = connectClient();
  sendHello(a, makeHello(HelloKind::kRing, secret_, 0, 2, 0, 0), nullptr, soon(), nullptr);
  sendHello(b, makeHello(HelloKind::kMessage, secret_, 1, 2, 9, 0), nullptr, soon(), nullptr);
  std::vector<IncomingConnection> got;
  for (int i = 0; i < 500 && got.size() < 2; ++i) {
    if (std::optional<IncomingConnection> c = listener_.poll(20)) got.push_back(std::move(*c));
  }
  ASSERT_EQ(got.size(), 2u);
  if (got[0].hello.rank != 0) std::swap(got[0], got[1]);
  EXPECT_EQ(got[0].hello.kind, HelloKind::kRing);
  EXPECT_EQ(got[1].hello.kind, HelloKind::kMessage);
  EXPECT_EQ(got[1].hello.tag, 9u);
  EXPECT_TRUE(got[0].payload.empty());
  EXPECT_TRUE(got[1].payload.empty());
}

TEST_F(AuthListenerTest, RefusesRanksOutsideTheCommunicatorOnceKnown) {
  listener_.expectRanks(4);
  expectRefused(helloBytes(makeHello(HelloKind::kMessage, secret_, 4, 4, 1, 0)), false);
  expectRefused(helloBytes(makeHello(HelloKind::kMessage, secret_, -1, 4, 1, 0)), false);
  expectRefused(helloBytes(makeHello(HelloKind::kData, secret_, 1, 5, 1, 0)), false);
  expectRefused(helloBytes(makeHello(HelloKind::kRegister, secret_, 1, 4, 0, 0)), false);
  // A rank of the communicator is still admitted.
  Socket ok = connectClient();
  sendHello(ok, makeHello(HelloKind::kRing, secret_, 3, 4, 0, 0), nullptr, soon(), nullptr);
  IncomingConnection c =
      listener_.waitFor([](const Hello& h) { return h.rank == 3; }, soon(), nullptr, "rank 3");
  EXPECT_EQ(c.hello.kind, HelloKind::kRing);
}

TEST_F(AuthListenerTest, AdmittedMessagesHoldNoSocket) {
  Socket client = connectClient();
  sendHello(client, makeHello(HelloKind::kMessage, secret_, 1, 2, 9, 1), "M", soon(), nullptr);
  IncomingConnection c =
      listener_.waitFor([](const Hello& h) { return h.tag == 9; }, soon(), nullptr, "tag 9");
  EXPECT_EQ(std::string(c.payload.begin(), c.payload.end()), "M");
  EXPECT_FALSE(c.socket.valid());
}

TEST_F(AuthListenerTest, RefusesWrongSecret) {
  expectRefused(helloBytes(makeHello(HelloKind::kRegister, secretOf(12), 0, 2, 0, 0)), false);
}

TEST_F(AuthListenerTest, RefusesGarbage) {
  std::string http = "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
  http.resize(64, ' ');
  ASSERT_GE(http.size(), kHelloBytes);
  expectRefused(std::vector<uint8_t>(http.begin(), http.end()), false);
}

TEST_F(AuthListenerTest, RefusesTruncatedHeader) {
  std::vector<uint8_t> bytes = helloBytes(makeHello(HelloKind::kRegister, secret_, 0, 2, 0, 0));
  bytes.resize(20);
  expectRefused(bytes, true);
}

TEST_F(AuthListenerTest, RefusesTruncatedPayload) {
  std::vector<uint8_t> bytes = helloBytes(makeHello(HelloKind::kMessage, secret_, 0, 2, 0, 100));
  bytes.insert(bytes.end(), 10, 'x');  // 10 of the 100 announced bytes
  expectRefused(bytes, true);
}

TEST_F(AuthListenerTest, RefusesOversizedPayload) {
  expectRefused(
      helloBytes(makeHello(HelloKind::kMessage, secret_, 0, 2, 0, kMaxBootstrapPayload + 1)),
      false);
}

TEST_F(AuthListenerTest, AcceptsPayloadOfExactlyTheLimitAnnounced) {
  // The limit itself is allowed: the header is accepted and the listener waits for the payload.
  const uint64_t before = testing::refusedConnectionCount();
  Socket client = connectClient();
  std::vector<uint8_t> bytes =
      helloBytes(makeHello(HelloKind::kMessage, secret_, 0, 2, 0, kMaxBootstrapPayload));
  client.sendAll(bytes.data(), bytes.size(), soon(), nullptr);
  for (int i = 0; i < 10; ++i) EXPECT_FALSE(listener_.poll(10).has_value());
  EXPECT_EQ(testing::refusedConnectionCount(), before);
}

TEST_F(AuthListenerTest, RefusesUnknownKind) {
  expectRefused(helloBytes(makeHello(static_cast<HelloKind>(9), secret_, 0, 2, 0, 0)), false);
  expectRefused(helloBytes(makeHello(static_cast<HelloKind>(0), secret_, 0, 2, 0, 0)), false);
}

TEST_F(AuthListenerTest, RefusesBadWireVersion) {
  std::vector<uint8_t> bytes = helloBytes(makeHello(HelloKind::kRegister, secret_, 0, 2, 0, 0));
  bytes[5] ^= 0x40;  // the version follows the 4-byte magic
  expectRefused(bytes, false);
}

TEST_F(AuthListenerTest, SlowClientDoesNotDelayValidOne) {
  const uint64_t before = testing::refusedConnectionCount();
  // The slow client trickles a valid Hello one byte per 50 ms but holds back its last byte
  // until released, so it is certainly still pending when the valid client arrives.
  std::vector<uint8_t> slowBytes = helloBytes(makeHello(HelloKind::kData, secret_, 2, 4, 5, 0));
  std::atomic<size_t> slowSent{0};
  std::atomic<bool> release{false};
  std::atomic<bool> slowFailed{false};
  std::thread slow([&] {
    try {
      Socket s = connectClient();
      for (size_t i = 0; i + 1 < slowBytes.size(); ++i) {
        s.sendAll(&slowBytes[i], 1, soon(), nullptr);
        ++slowSent;
        if (release) break;
        std::this_thread::sleep_for(50ms);
      }
      for (int i = 0; i < 2000 && !release; ++i) std::this_thread::sleep_for(5ms);
      size_t from = slowSent;
      s.sendAll(&slowBytes[from], slowBytes.size() - from, soon(), nullptr);
      // Keep the connection open until the listener has admitted it.
      char byte;
      s.recvAll(&byte, 1, soon(), nullptr);
    } catch (const std::exception&) {
      slowFailed = true;
    }
  });

  // Let the listener accept the slow client and read its first bytes.
  std::vector<IncomingConnection> admitted = pollUntil(
      listener_, [&] { return slowSent >= 3; }, 500);
  EXPECT_TRUE(admitted.empty());

  Socket fast = connectClient();
  sendHello(fast, makeHello(HelloKind::kMessage, secret_, 1, 4, 5, 0), nullptr, soon(), nullptr);
  std::optional<IncomingConnection> fastConn;
  for (int i = 0; i < 500 && !fastConn; ++i) fastConn = listener_.poll(20);
  ASSERT_TRUE(fastConn.has_value()) << "the valid client was not admitted";
  EXPECT_EQ(fastConn->hello.rank, 1);
  EXPECT_LT(slowSent.load(), slowBytes.size());  // the slow one is still pending
  EXPECT_EQ(testing::refusedConnectionCount(), before);

  // Released, the slow client completes its Hello and is admitted too: it was kept, not dropped.
  release = true;
  std::optional<IncomingConnection> slowConn;
  for (int i = 0; i < 500 && !slowConn; ++i) slowConn = listener_.poll(20);
  ASSERT_TRUE(slowConn.has_value());
  EXPECT_EQ(slowConn->hello.rank, 2);
  char byte = 1;
  slowConn->socket.sendAll(&byte, 1, soon(), nullptr);
  slow.join();
  EXPECT_FALSE(slowFailed);
  EXPECT_EQ(testing::refusedConnectionCount(), before);
}

TEST_F(AuthListenerTest, WaitForStashesOthers) {
  Socket a = connectClient();
  sendHello(a, makeHello(HelloKind::kMessage, secret_, 0, 2, 1, 1), "A", soon(), nullptr);
  // Nothing with tag 2 yet: this wait times out, having read (and kept) A meanwhile.
  EXPECT_THROW(listener_.waitFor([](const Hello& h) { return h.tag == 2; }, Deadline::after(300ms),
                                 nullptr, "tag 2"),
               TimeoutError);
  Socket b = connectClient();
  sendHello(b, makeHello(HelloKind::kMessage, secret_, 1, 2, 2, 1), "B", soon(), nullptr);

  IncomingConnection gotB =
      listener_.waitFor([](const Hello& h) { return h.tag == 2; }, soon(), nullptr, "tag 2");
  EXPECT_EQ(gotB.hello.rank, 1);
  EXPECT_EQ(std::string(gotB.payload.begin(), gotB.payload.end()), "B");
  IncomingConnection gotA =
      listener_.waitFor([](const Hello& h) { return h.tag == 1; }, soon(), nullptr, "tag 1");
  EXPECT_EQ(gotA.hello.rank, 0);
  EXPECT_EQ(std::string(gotA.payload.begin(), gotA.payload.end()), "A");
  // Both were handed out once: nothing is left.
  EXPECT_FALSE(listener_.poll(50).has_value());
}

TEST_F(AuthListenerTest, WaitForExpiredDeadlineTimesOut) {
  Deadline expired = Deadline::after(1ms);
  std::this_thread::sleep_for(5ms);
  ASSERT_TRUE(expired.expired());
  std::string msg = messageOf<TimeoutError>([&] {
    listener_.waitFor([](const Hello&) { return true; }, expired, nullptr, "the unit test");
  });
  EXPECT_TRUE(contains(msg, "the unit test")) << msg;
}

TEST_F(AuthListenerTest, WaitForAbortedIsInvalidUsage) {
  Interrupt abort;
  abort.abortLocally();
  std::string msg = messageOf<InvalidUsage>([&] {
    listener_.waitFor([](const Hello&) { return true; }, soon(), &abort, "the unit test");
  });
  EXPECT_TRUE(contains(msg, "abort")) << msg;
}

// ---- the root against impossible registrations ---------------------------------------------

TEST(RootWire, BadRegistrationsAreRefusedAndMalformedOnesThrow) {
  RootRegistration reg{SocketAddress::parse("127.0.0.1:4321"), 5000};
  std::vector<char> bytes = encodeRegistration(reg);
  bytes.push_back(0);  // trailing bytes
  EXPECT_THROW(decodeRegistration(bytes), RemoteError);
  reg.timeoutMs = -1;
  EXPECT_THROW(decodeRegistration(encodeRegistration(reg)), RemoteError);
  reg.timeoutMs = kMaxRootTimeoutMs + 1;
  EXPECT_THROW(decodeRegistration(encodeRegistration(reg)), RemoteError);
  // An unknown status or an absurd rank count in a reply.
  RootReply reply;
  reply.status = static_cast<loomResult_t>(loomNumResults);
  reply.message = "x";
  std::vector<char> framed = encodeReply(reply);
  EXPECT_THROW(decodeReplyBody(std::vector<char>(framed.begin() + 4, framed.end())), RemoteError);
  std::vector<char> body{0, 0, 0, 0, 0x7f, 0, 0, 0};  // success, 2^31 ranks, no addresses
  EXPECT_THROW(decodeReplyBody(body), RemoteError);
}

TEST(RootWire, ImpossibleFirstRegistrationIsAnsweredAloneAndTheRootGoesOn) {
  const Secret secret = randomSecret();
  SocketAddress root = startBootstrapRoot(SocketAddress::parse("127.0.0.1:0"), secret);
  std::vector<char> payload =
      encodeRegistration(RootRegistration{SocketAddress::parse("127.0.0.1:4321"), 5000});
  for (int nranks : {-1, 0, INT32_MAX}) {
    Socket s = Socket::connect(root, soon(), nullptr, true);
    sendHello(s,
              makeHello(HelloKind::kRegister, secret, 0, nranks, 0,
                        static_cast<uint32_t>(payload.size())),
              payload.data(), soon(), nullptr);
    RootReply r = receiveReply(s, soon(), nullptr);
    EXPECT_EQ(r.status, loomInvalidArgument) << nranks;
  }
  // A real one-rank job still gets its answer from the same root.
  Socket s = Socket::connect(root, soon(), nullptr, true);
  sendHello(s,
            makeHello(HelloKind::kRegister, secret, 0, 1, 0, static_cast<uint32_t>(payload.size())),
            payload.data(), soon(), nullptr);
  RootReply r = receiveReply(s, soon(), nullptr);
  EXPECT_EQ(r.status, loomSuccess) << r.message;
  ASSERT_EQ(r.listeners.size(), 1u);
  EXPECT_EQ(r.listeners[0].toString(), "127.0.0.1:4321");
}

// ---- Socket -------------------------------------------------------------------------------

TEST(Socket, ConnectToClosedPortFailsByItsDeadline) {
  SocketAddress nobody = SocketAddress::parse(strCat("127.0.0.1:", test::freePort()));
  try {
    Socket s = Socket::connect(nobody, Deadline::after(300ms), nullptr, true);
    ADD_FAILURE() << "connected to " << nobody.toString() << " where nobody listens";
  } catch (const SystemError& e) {
    EXPECT_TRUE(contains(e.what(), nobody.toString())) << e.what();
  } catch (const TimeoutError& e) {
    EXPECT_TRUE(contains(e.what(), nobody.toString())) << e.what();
  }
}

TEST(Socket, ConnectWithoutRetryFailsAtOnceWhenRefused) {
  SocketAddress nobody = SocketAddress::parse(strCat("127.0.0.1:", test::freePort()));
  // A never-ending deadline: only the immediate refusal can end this call.
  try {
    Socket s = Socket::connect(nobody, Deadline::never(), nullptr, false);
    ADD_FAILURE() << "connected to " << nobody.toString() << " where nobody listens";
  } catch (const SystemError& e) {
    EXPECT_TRUE(contains(e.what(), "refused")) << e.what();
  }
}

TEST(Socket, ConnectHonoursAbort) {
  SocketAddress nobody = SocketAddress::parse(strCat("127.0.0.1:", test::freePort()));
  Interrupt abort;
  abort.abortLocally();
  EXPECT_THROW(Socket::connect(nobody, Deadline::never(), &abort, true), InvalidUsage);
}

TEST(Socket, SendRecvAllBothWaysAtOnce) {
  SocketPair pair = connectedPair();
  const size_t size = 1 << 20;
  std::vector<uint8_t> fromClient(size), fromServer(size), atClient(size), atServer(size);
  for (size_t i = 0; i < size; ++i) {
    fromClient[i] = static_cast<uint8_t>(i * 31 + 7);
    fromServer[i] = static_cast<uint8_t>(i * 17 + 3);
  }
  // Both ends send 1 MiB before either reads anything else: more than the socket buffers hold,
  // so this only finishes if sendRecvAll progresses both directions together.
  std::thread other([&] {
    sendRecvAll(pair.server, fromServer.data(), size, pair.server, atServer.data(), size,
                Deadline::after(60s), nullptr);
  });
  sendRecvAll(pair.client, fromClient.data(), size, pair.client, atClient.data(), size,
              Deadline::after(60s), nullptr);
  other.join();
  EXPECT_TRUE(atClient == fromServer);
  EXPECT_TRUE(atServer == fromClient);
}

TEST(Socket, RecvAllAfterPeerClosesIsRemoteError) {
  SocketPair pair = connectedPair();
  pair.server.sendAll("abcd", 4, soon(), nullptr);
  pair.server.close();
  char buf[10];
  std::string msg =
      messageOf<RemoteError>([&] { pair.client.recvAll(buf, sizeof(buf), soon(), nullptr); });
  EXPECT_TRUE(contains(msg, "4 of 10")) << msg;
  EXPECT_EQ(std::string(buf, 4), "abcd");
}

TEST(Socket, RecvAllTimesOutWithoutData) {
  SocketPair pair = connectedPair();
  char buf[4];
  EXPECT_THROW(pair.client.recvAll(buf, sizeof(buf), Deadline::after(100ms), nullptr),
               TimeoutError);
}

TEST(Socket, SendAfterPeerClosesIsRemoteError) {
  SocketPair pair = connectedPair();
  pair.server.close();
  std::vector<char> big(1 << 20, 'x');
  // The first segments may be buffered; the reset then fails a later send.
  EXPECT_THROW(
      {
        for (int i = 0; i < 64; ++i) pair.client.sendAll(big.data(), big.size(), soon(), nullptr);
      },
      RemoteError);
}

}  // namespace
}  // namespace loom
