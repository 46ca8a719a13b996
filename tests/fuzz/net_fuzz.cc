// Network fuzzer: a 3-rank job runs beside it (rank processes doing all-reduces with exact
// checks, and splitting and destroying communicators along the way), while this process
// connects to the job's bootstrap listeners and to rendezvous roots of its own and sends
// mutated frames: garbage, wrong secrets, truncated Hellos, and frames with the job's secret
// and mutated fields and payloads, as a buggy peer would. Traffic goes to 127.0.0.1 only, at
// a bounded rate, and stops by itself.
//
//   loom_net_fuzz [--frames N] [--seed S] [--rate PER_SECOND]
//
// Passes (exit 0) when every rank exits cleanly with no wrong result and no error, and the
// fuzzer's own roots survive. The closing line counts frames, rank calls, wrong results and
// errors. LOOM_TRANSPORT picks the job's transport as usual.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "loom/loom.h"
#include "src/bootstrap/bootstrap_root.h"
#include "src/bootstrap/unique_id.h"
#include "src/net/auth_listener.h"
#include "src/net/test_hooks.h"
#include "tests/fuzz/mutator.h"
#include "tests/test_util.h"
#include "tests/tool_args.h"

namespace loom::fuzz {
namespace {

constexpr int kRanks = 3;

// ---- a rank of the job beside the fuzzer ---------------------------------------------------

// All-reduces of small integers (exact in any order) until the fuzzer leaves `stopFile`; every
// fifth call also splits the communicator, all-reduces on the child and destroys it, so new
// listeners open while the fuzzer runs. Prints each listener's address as it opens.
int rankMain(int rank, const std::string& idHex, const std::string& stopFile) {
  testing::setListenerHook([](const SocketAddress& a) {
    std::printf("LISTEN %d\n", a.port());
    std::fflush(stdout);
  });
  uint64_t calls = 0, wrong = 0, errors = 0;
  loomComm_t comm = nullptr;
  auto report = [&](const char* how) {
    std::printf("RESULT %s calls %llu wrong %llu errors %llu\n", how,
                static_cast<unsigned long long>(calls), static_cast<unsigned long long>(wrong),
                static_cast<unsigned long long>(errors));
    std::fflush(stdout);
  };
  if (loomCommInitRank(&comm, kRanks, test::idFromHex(idHex), rank) != loomSuccess) {
    std::printf("init failed: %s\n", loomGetLastError(nullptr));
    ++errors;
    report("init");
    return 1;
  }
  std::vector<int32_t> send, recv;
  for (uint64_t it = 0;; ++it) {
    // Every rank derives the same count from `it`: 0, 1 and odd sizes included.
    const size_t count = (it * 2654435761u) % 5003;
    send.resize(count);
    recv.assign(count, -1);
    for (size_t i = 0; i < count; ++i) send[i] = static_cast<int32_t>((i + it) % 97 + rank);
    ++calls;
    if (loomAllReduce(send.data(), recv.data(), count, loomInt32, loomSum, comm, nullptr) !=
        loomSuccess) {
      std::printf("allreduce: %s\n", loomGetLastError(comm));
      ++errors;
      break;
    }
    for (size_t i = 0; i < count; ++i)
      if (recv[i] != static_cast<int32_t>(kRanks * ((i + it) % 97) + 0 + 1 + 2)) {
        ++wrong;
        break;
      }
    if (it % 5 == 4) {
      loomComm_t child = nullptr;
      const int color = it % 10 == 4 ? 0 : rank % 2;
      ++calls;
      if (loomCommSplit(comm, color, kRanks - rank, &child, nullptr) != loomSuccess) {
        std::printf("split: %s\n", loomGetLastError(comm));
        ++errors;
        break;
      }
      int n = 0;
      loomCommCount(child, &n);
      int32_t one = 1, sum = 0;
      ++calls;
      if (loomAllReduce(&one, &sum, 1, loomInt32, loomSum, child, nullptr) != loomSuccess) {
        std::printf("allreduce on a split communicator: %s\n", loomGetLastError(child));
        ++errors;
        break;
      }
      if (sum != n) ++wrong;
      // Finalize first: a peer may still be receiving this rank's last step (loom.h).
      if (loomCommFinalize(child) != loomSuccess) {
        std::printf("finalize of a split communicator: %s\n", loomGetLastError(child));
        ++errors;
        break;
      }
      loomCommDestroy(child);
    }
    // Stop together: any rank that sees the stop file makes every rank stop after this call.
    int32_t stop = access(stopFile.c_str(), F_OK) == 0 ? 1 : 0, anyStop = 0;
    ++calls;
    if (loomAllReduce(&stop, &anyStop, 1, loomInt32, loomMax, comm, nullptr) != loomSuccess) {
      std::printf("allreduce: %s\n", loomGetLastError(comm));
      ++errors;
      break;
    }
    if (anyStop != 0) break;
  }
  if (errors == 0 && loomCommFinalize(comm) != loomSuccess) {
    std::printf("finalize: %s\n", loomGetLastError(comm));
    ++errors;
  }
  loomCommDestroy(comm);
  report("done");
  return errors == 0 && wrong == 0 ? 0 : 1;
}

// ---- the fuzzer -----------------------------------------------------------------------------

class Fuzzer {
 public:
  Fuzzer(uint64_t seed, const Secret& secret) : m_(seed), secret_(secret) {}

  // One frame for a rank's listener (`root`: for a rendezvous root).
  std::vector<uint8_t> frame(bool root) {
    std::vector<uint8_t> b;
    const size_t kind = m_.below(10);
    if (kind == 0) {  // garbage
      for (size_t i = 0, n = m_.below(128); i < n; ++i)
        b.push_back(static_cast<uint8_t>(m_.next()));
      return b;
    }
    Hello h;
    h.kind = static_cast<HelloKind>(root ? 1 : 1 + m_.below(4));
    h.secret = kind == 1 ? randomSecret() : secret_;
    // Ranks that no communicator of the job has, or a job size it does not have: the job's
    // own messages are never matched by these (a frame that claims a real rank and tag would
    // be a peer speaking for it, which no check can tell apart).
    static constexpr int32_t kRanksSeen[] = {-1, kRanks, kRanks + 1, 1000, INT32_MAX, INT32_MIN};
    h.rank =
        root ? static_cast<int32_t>(m_.below(6)) - 1 : kRanksSeen[m_.below(std::size(kRanksSeen))];
    h.nranks = root ? static_cast<int32_t>(m_.below(6)) - 1 : kRanks;
    h.tag = static_cast<uint32_t>(m_.next());
    std::vector<char> payload;
    if (root || m_.chance(2)) {
      RootRegistration reg{SocketAddress::parse("127.0.0.1:1"),
                           static_cast<int64_t>(m_.below(400))};
      payload = encodeRegistration(reg);
    } else {
      payload.resize(m_.below(512));
      for (char& c : payload) c = static_cast<char>(m_.next());
    }
    m_.mutate(payload, 1024);
    h.payloadBytes = static_cast<uint32_t>(payload.size());
    if (m_.chance(8)) h.payloadBytes = static_cast<uint32_t>(m_.next());  // lies about it
    b = helloBytes(h);
    if (kind == 2) m_.mutate(b, 64);  // a mangled header
    b.insert(b.end(), payload.begin(), payload.end());
    if (m_.chance(10)) b.resize(m_.below(b.size() + 1));  // truncated
    return b;
  }

  Mutator& mutator() { return m_; }

 private:
  static std::vector<uint8_t> helloBytes(const Hello& h) {
    std::vector<uint8_t> b(kHelloBytes);
    encodeHello(h, b.data());
    return b;
  }

  Mutator m_;
  Secret secret_;
};

// Sends one frame to 127.0.0.1:port without blocking for long; returns the socket (closed later
// with a reset, so that no TIME_WAIT piles up) or -1 when the port did not take it.
int sendFrame(int port, const std::vector<uint8_t>& bytes) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 && errno != EINPROGRESS) {
    close(fd);
    return -1;
  }
  pollfd p{fd, POLLOUT, 0};
  if (poll(&p, 1, 20) <= 0 || (p.revents & (POLLERR | POLLHUP)) != 0) {
    close(fd);
    return -1;
  }
  if (!bytes.empty()) (void)!send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
  return fd;
}

void closeWithReset(int fd) {
  linger l{1, 0};
  setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
  close(fd);
}

int fuzzMain(int argc, char** argv) {
  const uint64_t frames = loom::test::argValue(argc, argv, "--frames", 5000);
  const uint64_t seed = loom::test::argValue(argc, argv, "--seed", 1);
  const uint64_t rate = loom::test::argValue(argc, argv, "--rate", 2000);
  const auto start = std::chrono::steady_clock::now();

  loomUniqueId id;
  if (loomGetUniqueId(&id) != loomSuccess) {
    std::fprintf(stderr, "loomGetUniqueId: %s\n", loomGetLastError(nullptr));
    return 1;
  }
  const UniqueIdContents contents = unpackUniqueId(id);
  Fuzzer fuzzer(seed, contents.secret);
  char stopFile[] = "/tmp/loom-net-fuzz-XXXXXX";
  const int tmp = mkstemp(stopFile);
  if (tmp < 0) return 1;
  close(tmp);
  unlink(stopFile);

  // Strangers at the job's own root before the ranks arrive: it must still gather them.
  uint64_t toJobRoot = 0, notTaken = 0;
  for (int i = 0; i < 200; ++i) {
    std::vector<uint8_t> junk(fuzzer.mutator().below(80));
    for (auto& c : junk) c = static_cast<uint8_t>(fuzzer.mutator().next());
    int fd = sendFrame(contents.root.port(), junk);
    if (fd >= 0) {
      closeWithReset(fd);
      ++toJobRoot;
    } else {
      ++notTaken;
    }
  }

  const std::string self = "/proc/self/exe";
  char exe[4096];
  const ssize_t n = readlink(self.c_str(), exe, sizeof(exe) - 1);
  if (n <= 0) return 1;
  exe[n] = '\0';
  std::vector<test::RankProcess> ranks;
  for (int r = 0; r < kRanks; ++r)
    ranks.push_back(test::spawnProcess(
        exe, {"--rank", std::to_string(r), "--id", test::idToHex(id), "--stop", stopFile}));
  for (auto& r : ranks) fcntl(r.stdoutFd, F_SETFL, fcntl(r.stdoutFd, F_GETFL) | O_NONBLOCK);
  std::vector<std::string> output(kRanks), partial(kRanks);
  std::vector<int> ports;
  auto readRanks = [&] {
    char buf[4096];
    for (int r = 0; r < kRanks; ++r) {
      for (;;) {
        ssize_t got = read(ranks[r].stdoutFd, buf, sizeof(buf));
        if (got <= 0) break;
        partial[r].append(buf, static_cast<size_t>(got));
        for (size_t eol; (eol = partial[r].find('\n')) != std::string::npos;) {
          std::string line = partial[r].substr(0, eol + 1);
          partial[r].erase(0, eol + 1);
          if (line.rfind("LISTEN ", 0) == 0)
            ports.push_back(std::atoi(line.c_str() + 7));
          else
            output[r] += line;
        }
      }
    }
  };

  // Roots of the fuzzer's own: registrations with the secret and mutated fields go there
  // (the job's root is done once the job has started).
  std::vector<int> roots;
  std::deque<int> open;
  const auto period = std::chrono::nanoseconds(1000000000 / std::max<uint64_t>(rate, 1));
  auto next = std::chrono::steady_clock::now();
  uint64_t toRanks = 0, toRoots = 0;
  for (uint64_t attempt = 0; attempt < frames; ++attempt) {
    readRanks();
    if (roots.empty() || fuzzer.mutator().chance(500)) {
      roots.push_back(
          startBootstrapRoot(SocketAddress::parse("127.0.0.1:0"), contents.secret).port());
    }
    std::sort(ports.begin(), ports.end());
    ports.erase(std::unique(ports.begin(), ports.end()), ports.end());
    const bool toRoot = ports.empty() || fuzzer.mutator().chance(4);
    const int port = toRoot ? roots[fuzzer.mutator().below(roots.size())]
                            : ports[fuzzer.mutator().below(ports.size())];
    int fd = sendFrame(port, fuzzer.frame(toRoot));
    if (fd >= 0) {
      open.push_back(fd);
      ++(toRoot ? toRoots : toRanks);
    } else {
      ++notTaken;  // a closed split listener, or a full backlog
      if (!toRoot) ports.erase(std::find(ports.begin(), ports.end(), port));
    }
    // Keep the last frames open a little so their listener reads them before the reset.
    while (open.size() > 64) {
      closeWithReset(open.front());
      open.pop_front();
    }
    next += period;
    std::this_thread::sleep_until(next);
  }
  for (int fd : open) closeWithReset(fd);

  // Stop the job and collect its verdict.
  FILE* f = std::fopen(stopFile, "w");
  if (f != nullptr) std::fclose(f);
  bool ok = true;
  uint64_t calls = 0, wrong = 0, errors = 0;
  for (int r = 0; r < kRanks; ++r) {
    std::string rest;
    std::optional<int> code = test::waitRank(ranks[r], 120000, &rest);
    output[r] += partial[r] + rest;
    const size_t at = output[r].find("RESULT ");
    unsigned long long c = 0, w = 0, e = 0;
    if (at == std::string::npos ||
        std::sscanf(output[r].c_str() + at, "RESULT %*s calls %llu wrong %llu errors %llu", &c, &w,
                    &e) != 3 ||
        !code || *code != 0) {
      ok = false;
      std::fprintf(stderr, "rank %d failed (exit %d):\n%s\n", r, code ? *code : -1,
                   output[r].c_str());
    }
    calls += c;
    wrong += w;
    errors += e;
  }
  unlink(stopFile);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf(
      "loom_net_fuzz: seed %llu: %llu frames (%llu to rank listeners, %llu to fuzzed roots, %llu "
      "to the job's root, %llu not taken), %zu listeners seen; job: %llu calls, %llu wrong, %llu "
      "errors; %s, %.1f s\n",
      static_cast<unsigned long long>(seed),
      static_cast<unsigned long long>(toRanks + toRoots + toJobRoot + notTaken),
      static_cast<unsigned long long>(toRanks), static_cast<unsigned long long>(toRoots),
      static_cast<unsigned long long>(toJobRoot), static_cast<unsigned long long>(notTaken),
      ports.size(), static_cast<unsigned long long>(calls), static_cast<unsigned long long>(wrong),
      static_cast<unsigned long long>(errors), ok ? "0 crashes, 0 hangs" : "FAILED", seconds);
  return ok && wrong == 0 && errors == 0 ? 0 : 1;
}

}  // namespace
}  // namespace loom::fuzz

int main(int argc, char** argv) {
  using namespace loom::fuzz;
  if (loom::test::wantsHelp(argc, argv)) {
    std::printf(
        "usage: loom_net_fuzz [--frames N] [--seed S] [--rate PER_SECOND]\n"
        "Runs a 3-rank job (all-reduces with exact checks, splits) beside a fuzzer that\n"
        "sends N mutated bootstrap frames (default 5000, at most RATE per second, default\n"
        "2000) to the job's listeners and to rendezvous roots, on 127.0.0.1 only.\n");
    return 0;
  }
  const std::string rank = loom::test::argString(argc, argv, "--rank", "");
  if (!rank.empty())
    return rankMain(std::atoi(rank.c_str()), loom::test::argString(argc, argv, "--id", ""),
                    loom::test::argString(argc, argv, "--stop", ""));
  return fuzzMain(argc, argv);
}
