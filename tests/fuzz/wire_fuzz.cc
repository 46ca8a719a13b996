// In-process fuzzer of everything loom parses from the wire during bootstrap and connection
// setup: the 40-byte Hello, the root's registration and reply, the unique id, the addresses
// they carry, and the transports' connect blobs and acknowledgements (through the Transport
// interface, as the registry drives it). Each input is a valid message with random edits
// (mutator.h); a parser must either accept it or throw loom's Error, never crash, hang or
// read out of bounds (build with -DLOOM_SANITIZE=address,undefined to see the last).
//
//   loom_wire_fuzz [--inputs N] [--seed S]
//
// Prints one closing line: inputs, rejected (threw Error), crashes 0, hangs 0, seconds. A
// crash aborts the process (the sanitizer's report names the stack); the index I of the input
// that crashed is printed first, and --seed S --inputs I+1 reproduces it.
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "src/base/error.h"
#include "src/bootstrap/bootstrap_root.h"
#include "src/bootstrap/unique_id.h"
#include "src/net/auth_listener.h"
#include "src/net/secret.h"
#include "tests/fuzz/mutator.h"
#include "tests/tool_args.h"
#include "transports/registry.h"
#include "transports/transport_setup.h"

extern "C" void __sanitizer_set_death_callback(void (*callback)()) __attribute__((weak));

namespace loom::fuzz {
namespace {

std::atomic<uint64_t> gCurrent{0};   // index of the input being parsed
std::atomic<uint64_t> gFinished{0};  // inputs done, for the hang watchdog
const char* gTarget = "";            // its target

void reportCrash() {
  std::fprintf(stderr, "loom_wire_fuzz: crashed on input %llu (target %s)\n",
               static_cast<unsigned long long>(gCurrent.load()), gTarget);
}

// A communicator as a transport sees it, with no data connections: a blob good enough to get
// that far has passed every check the transport makes of it.
class FakePeers final : public transport::Peers {
 public:
  FakePeers() {
    infos_[0] = RankInfo{1234, 0, LOOM_DEVICE_CPU, static_cast<int32_t>(getpid()), 0};
    infos_[1] = RankInfo{1234, 1, LOOM_DEVICE_CPU, static_cast<int32_t>(getpid()), 0};
  }
  int rank() const override { return 0; }
  int nranks() const override { return 2; }
  const RankInfo& rankInfo(int rank) const override { return infos_[rank & 1]; }
  topo::PathClass pathClass(int) const override { return topo::PathClass::kSameNuma; }
  void sendBlob(int, uint32_t, const void*, size_t) override { refuse(); }
  void recvBlob(int, uint32_t, void*, size_t) override { refuse(); }
  Socket connectData(int, uint32_t) override { refuse(); }
  Socket acceptData(int, uint32_t) override { refuse(); }

 private:
  [[noreturn]] static void refuse() {
    throw RemoteError("the fuzzer's fake peer has no bootstrap (blob was accepted)");
  }
  RankInfo infos_[2];
};

struct Counts {
  uint64_t inputs = 0, rejected = 0;
};

class Harness {
 public:
  // The secret comes from the seed too, so that a seed replays exactly the same inputs.
  explicit Harness(uint64_t seed) : m_(seed) {
    for (auto& byte : secret_) byte = static_cast<uint8_t>(m_.next());
  }

  // Runs input `index` of the sequence; the target rotates with the index.
  void runOne(uint64_t index) {
    static constexpr int kTargets = 7;
    const int target = static_cast<int>(index % kTargets);
    try {
      switch (target) {
        case 0:
          hello();
          break;
        case 1:
          registration();
          break;
        case 2:
          reply();
          break;
        case 3:
          uniqueId();
          break;
        case 4:
          blob("socket", transport::Protocol::kSimple);
          break;
        case 5:
          blob("shm", index % 2 ? transport::Protocol::kLL : transport::Protocol::kSimple);
          break;
        default:
          ack(index % 2 ? "shm" : "socket");
          break;
      }
    } catch (const Error&) {
      ++counts_[gTarget].rejected;
    }
  }

  const std::map<std::string, Counts>& counts() const { return counts_; }

 private:
  void begin(const char* target) {
    gTarget = target;
    ++counts_[target].inputs;
  }

  static SocketAddress someAddress(Mutator& m) {
    SocketAddress a = SocketAddress::parse(m.chance(2) ? "127.0.0.1:4242" : "[::1]:4242");
    return a;
  }
  // What the parsers hand on: an address must be safe to print and inspect whatever it holds.
  static void touch(const SocketAddress& a) {
    volatile size_t sink = a.toString().size() + static_cast<size_t>(a.isLoopback());
    (void)sink;
    if (a.family() == AF_INET || a.family() == AF_INET6) sink = static_cast<size_t>(a.port());
  }

  void hello() {
    begin("hello");
    Hello h{static_cast<HelloKind>(1 + m_.below(4)), m_.chance(4) ? Secret{} : secret_,
            static_cast<int32_t>(m_.below(8)),       8,
            static_cast<uint32_t>(m_.next()),        static_cast<uint32_t>(m_.below(4096))};
    std::vector<uint8_t> bytes = helloBytes(h);
    m_.mutate(bytes, 2 * kHelloBytes);
    bytes.resize(kHelloBytes);  // the listener always parses exactly 40 bytes
    Hello out;
    if (!parseHello(bytes.data(), secret_, &out).empty()) {
      ++counts_[gTarget].rejected;
    } else {
      // Admitted: its fields are what the listener and the root act on.
      const int k = static_cast<int>(out.kind);
      if (k < 1 || k > static_cast<int>(HelloKind::kControl) ||
          out.payloadBytes > kMaxBootstrapPayload)
        fail("parseHello admitted an invalid kind or payload size");
    }
  }
  static std::vector<uint8_t> helloBytes(const Hello& h) {
    std::vector<uint8_t> b(kHelloBytes);
    encodeHello(h, b.data());
    return b;
  }

  void registration() {
    begin("registration");
    RootRegistration r{someAddress(m_), static_cast<int64_t>(m_.below(1u << 20))};
    std::vector<char> bytes = encodeRegistration(r);
    m_.mutate(bytes, 512);
    RootRegistration out = decodeRegistration(bytes);
    if (out.listener.length > sizeof(out.listener.storage) || out.timeoutMs < 0)
      fail("decodeRegistration accepted an impossible registration");
    touch(out.listener);
  }

  void reply() {
    begin("reply");
    RootReply r;
    if (m_.chance(3)) {
      r.status = loomRemoteError;
      r.message = "rank 2 disconnected";
    } else {
      for (size_t i = 0, n = 1 + m_.below(6); i < n; ++i) r.listeners.push_back(someAddress(m_));
    }
    std::vector<char> framed = encodeReply(r);
    std::vector<char> body(framed.begin() + 4, framed.end());  // receiveReply reads the size
    m_.mutate(body, 4096);
    RootReply out = decodeReplyBody(body);
    for (const SocketAddress& a : out.listeners) touch(a);
  }

  void uniqueId() {
    begin("unique_id");
    UniqueIdContents c{someAddress(m_), secret_, m_.chance(2)};
    loomUniqueId id = packUniqueId(c);
    std::vector<char> bytes(id.internal, id.internal + sizeof(id.internal));
    m_.mutate(bytes, sizeof(id.internal));
    bytes.resize(sizeof(id.internal));
    std::memcpy(id.internal, bytes.data(), bytes.size());
    touch(unpackUniqueId(id).root);
  }

  transport::Transport& transportNamed(const std::string& name) {
    for (transport::Transport* t : transport::transports())
      if (name == t->name()) return *t;
    fail(("no transport named " + name).c_str());
  }

  transport::SetupContext context(transport::Protocol protocol) {
    transport::SetupContext ctx{peers_, 1, 0, 0};
    ctx.protocol = protocol;
    ctx.slotBytes = 64 << 10;
    return ctx;
  }

  // A receiver's valid phase-1 blob, created once per transport and protocol.
  struct Receiver {
    std::unique_ptr<transport::PendingRecv> pending;
    transport::ConnectBlob blob;
    std::unique_ptr<transport::SendConnection> sender;  // acks: the sender that made `ack`
    transport::ConnectBlob ack;
  };
  Receiver& receiver(const std::string& name, transport::Protocol protocol) {
    Receiver& r = receivers_[name + (protocol == transport::Protocol::kLL ? "/ll" : "/simple")];
    if (!r.pending) r.pending = transportNamed(name).setupRecv(context(protocol), &r.blob);
    return r;
  }

  void blob(const std::string& name, transport::Protocol protocol) {
    begin(name == "shm" ? (protocol == transport::Protocol::kLL ? "shm_ll_blob" : "shm_blob")
                        : "socket_blob");
    std::vector<uint8_t> bytes(std::begin(receiver(name, protocol).blob.bytes),
                               std::end(receiver(name, protocol).blob.bytes));
    m_.mutate(bytes, sizeof(transport::ConnectBlob::bytes));
    transport::ConnectBlob blob, ack;
    std::memcpy(blob.bytes, bytes.data(), std::min(bytes.size(), sizeof(blob.bytes)));
    transportNamed(name).connectSend(context(protocol), blob, &ack);
  }

  // A sender's acknowledgement, mutated, at the receiver's phase 3.
  void ack(const std::string& name) {
    begin(name == "shm" ? "shm_ack" : "socket_ack");
    Receiver& r = receivers_[name + "/ack"];
    if (!r.pending) {
      r.pending = transportNamed(name).setupRecv(context(transport::Protocol::kSimple), &r.blob);
      if (name == "shm") {
        // A real acknowledgement, from attaching to the receiver's segment.
        r.sender =
            transportNamed(name).connectSend(context(transport::Protocol::kSimple), r.blob, &r.ack);
      } else {
        // The socket sender connects its streams before it acknowledges; write its ack.
        uint32_t words[2] = {0x4c4d5341, 0};
        std::memcpy(&words[1], r.blob.bytes + 16, 4);
        std::memcpy(r.ack.bytes, words, sizeof(words));
      }
    }
    std::vector<uint8_t> bytes(std::begin(r.ack.bytes), std::end(r.ack.bytes));
    m_.mutate(bytes, sizeof(r.ack.bytes));
    transport::ConnectBlob ack;
    std::memcpy(ack.bytes, bytes.data(), std::min(bytes.size(), sizeof(ack.bytes)));
    // A pending receive is used up once it finishes; the next input sets up a fresh one.
    std::unique_ptr<transport::RecvConnection> c = r.pending->finish(ack);
    r.pending.reset();
    r.sender.reset();
  }

  [[noreturn]] static void fail(const char* what) {
    std::fprintf(stderr, "loom_wire_fuzz: input %llu: %s\n",
                 static_cast<unsigned long long>(gCurrent.load()), what);
    std::abort();
  }

  Mutator m_;
  Secret secret_{};
  FakePeers peers_;
  std::map<std::string, Receiver> receivers_;
  std::map<std::string, Counts> counts_;
};

}  // namespace
}  // namespace loom::fuzz

int main(int argc, char** argv) {
  using namespace loom::fuzz;
  if (loom::test::wantsHelp(argc, argv)) {
    std::printf(
        "usage: loom_wire_fuzz [--inputs N] [--seed S]\n"
        "Feeds N mutated bootstrap and connection-setup messages (default 50000) to loom's\n"
        "parsers in this process. Build with -DLOOM_SANITIZE=address,undefined. The full\n"
        "run of docs/testing.md: --inputs 1000000.\n");
    return 0;
  }
  const uint64_t inputs = loom::test::argValue(argc, argv, "--inputs", 50000);
  const uint64_t seed = loom::test::argValue(argc, argv, "--seed", 1);
  if (__sanitizer_set_death_callback != nullptr) __sanitizer_set_death_callback(reportCrash);
  // Quiet: every rejected input would log a warning otherwise.
  setenv("LOOM_DEBUG", "NONE", 0);

  // Hang watchdog: an input that takes more than 10 s is a hang.
  std::atomic<bool> done{false};
  std::thread watchdog([&] {
    uint64_t seen = gFinished.load();
    int still = 0;
    while (!done.load()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      const uint64_t now = gFinished.load();
      still = now == seen ? still + 1 : 0;
      seen = now;
      if (still >= 100) {
        std::fprintf(stderr, "loom_wire_fuzz: HANG on input %llu (target %s)\n",
                     static_cast<unsigned long long>(gCurrent.load()), gTarget);
        std::_Exit(3);
      }
    }
  });

  const auto start = std::chrono::steady_clock::now();
  Harness harness(seed);
  // The sequence depends only on the seed: a failing index reproduces with the same seed.
  for (uint64_t i = 0; i < inputs; ++i) {
    gCurrent = i;
    harness.runOne(i);
    gFinished.fetch_add(1, std::memory_order_relaxed);
  }
  done = true;
  watchdog.join();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  uint64_t rejected = 0;
  for (const auto& [name, c] : harness.counts()) {
    std::printf("  %-14s %9llu inputs, %9llu rejected\n", name.c_str(),
                static_cast<unsigned long long>(c.inputs),
                static_cast<unsigned long long>(c.rejected));
    rejected += c.rejected;
  }
  std::printf("loom_wire_fuzz: seed %llu: %llu inputs, %llu rejected, 0 crashes, 0 hangs, %.1f s\n",
              static_cast<unsigned long long>(seed), static_cast<unsigned long long>(inputs),
              static_cast<unsigned long long>(rejected), seconds);
  return 0;
}
