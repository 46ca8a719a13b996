#include "tests/test_util.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <thread>

extern char** environ;

namespace loom::test {

void runThreads(int nranks, const std::function<void(int rank)>& fn) {
  std::vector<std::thread> threads;
  for (int r = 0; r < nranks; ++r) threads.emplace_back(fn, r);
  for (auto& t : threads) t.join();
}

loomUniqueId makeId() {
  loomUniqueId id;
  loomResult_t r = loomGetUniqueId(&id);
  EXPECT_EQ(r, loomSuccess) << loomGetLastError(nullptr);
  return id;
}

std::vector<loomComm_t> initThreads(int nranks, const loomUniqueId& id) {
  std::vector<loomComm_t> comms(nranks, nullptr);
  std::vector<loomResult_t> results(nranks, loomInternalError);
  std::vector<std::string> errors(nranks);
  runThreads(nranks, [&](int r) {
    results[r] = loomCommInitRank(&comms[r], nranks, id, r);
    if (results[r] != loomSuccess) errors[r] = loomGetLastError(nullptr);
  });
  for (int r = 0; r < nranks; ++r) {
    EXPECT_EQ(results[r], loomSuccess) << "rank " << r << ": " << errors[r];
    EXPECT_NE(comms[r], nullptr);
  }
  return comms;
}

void finalizeAndDestroy(const std::vector<loomComm_t>& comms) {
  runThreads(static_cast<int>(comms.size()), [&](int r) {
    if (comms[r] == nullptr) return;
    EXPECT_EQ(loomCommFinalize(comms[r]), loomSuccess) << loomGetLastError(comms[r]);
    EXPECT_EQ(loomCommDestroy(comms[r]), loomSuccess) << loomGetLastError(nullptr);
  });
}

std::string idToHex(const loomUniqueId& id) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (char c : id.internal) {
    auto b = static_cast<unsigned char>(c);
    out += digits[b >> 4];
    out += digits[b & 15];
  }
  return out;
}

loomUniqueId idFromHex(const std::string& hex) {
  loomUniqueId id;
  std::memset(&id, 0, sizeof(id));
  for (size_t i = 0; i + 1 < hex.size() && i / 2 < sizeof(id.internal); i += 2) {
    id.internal[i / 2] = static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
  }
  return id;
}

RankProcess spawnRank(const std::vector<std::string>& args, const std::vector<std::string>& env) {
  return spawnProcess(LOOM_TEST_RANK_BINARY, args, env);
}

RankProcess spawnProcess(const std::string& binary, const std::vector<std::string>& args,
                         const std::vector<std::string>& env) {
  int pipeFds[2];
  if (pipe2(pipeFds, O_CLOEXEC) != 0) ADD_FAILURE() << "pipe2 failed";
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, pipeFds[1], 1);
  std::vector<std::string> argStrings{binary};
  argStrings.insert(argStrings.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argStrings) argv.push_back(a.data());
  argv.push_back(nullptr);
  // getenv returns the first match, so the overrides go first.
  std::vector<std::string> ordered(env.begin(), env.end());
  for (char** e = environ; *e != nullptr; ++e) ordered.emplace_back(*e);
  std::vector<char*> envp;
  for (auto& e : ordered) envp.push_back(e.data());
  envp.push_back(nullptr);
  RankProcess p;
  int rc = posix_spawn(&p.pid, argv[0], &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  close(pipeFds[1]);
  if (rc != 0) {
    ADD_FAILURE() << "posix_spawn " << argv[0] << ": " << strerror(rc);
    close(pipeFds[0]);
    p.pid = -1;
    return p;
  }
  p.stdoutFd = pipeFds[0];
  return p;
}

namespace {

// Appends what the child wrote, waiting at most waitMs; returns false at EOF.
bool readSome(RankProcess& p, int waitMs, std::string* output) {
  if (p.stdoutFd < 0) return false;
  pollfd fd{p.stdoutFd, POLLIN, 0};
  if (poll(&fd, 1, waitMs) <= 0) return true;
  char buf[4096];
  ssize_t n = read(p.stdoutFd, buf, sizeof(buf));
  if (n <= 0) {
    close(p.stdoutFd);
    p.stdoutFd = -1;
    return false;
  }
  if (output != nullptr) output->append(buf, static_cast<size_t>(n));
  return true;
}

}  // namespace

bool waitForLine(RankProcess& p, const std::string& line, int timeoutMs, std::string* output) {
  std::string local;
  std::string* out = output != nullptr ? output : &local;
  auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeoutMs);
  while (std::chrono::steady_clock::now() < end) {
    if (out->find(line) != std::string::npos) return true;
    if (!readSome(p, 50, out)) return out->find(line) != std::string::npos;
  }
  return out->find(line) != std::string::npos;
}

std::optional<int> waitRank(RankProcess& p, int timeoutMs, std::string* output) {
  auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeoutMs);
  std::string local;
  std::string* out = output != nullptr ? output : &local;
  for (;;) {
    readSome(p, 20, out);
    int status = 0;
    pid_t done = waitpid(p.pid, &status, WNOHANG);
    if (done == p.pid) {
      while (readSome(p, 0, out) && p.stdoutFd >= 0) {
      }
      if (p.stdoutFd >= 0) close(p.stdoutFd);
      p.stdoutFd = -1;
      if (WIFEXITED(status)) return WEXITSTATUS(status);
      if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
      return -1;
    }
    if (std::chrono::steady_clock::now() >= end) {
      kill(p.pid, SIGKILL);
      waitpid(p.pid, &status, 0);
      if (p.stdoutFd >= 0) close(p.stdoutFd);
      p.stdoutFd = -1;
      return std::nullopt;
    }
  }
}

ScopedEnv::ScopedEnv(const char* name, const std::string& value) : name_(name) {
  if (const char* old = getenv(name)) old_ = old;
  setenv(name, value.c_str(), 1);
}

ScopedEnv::~ScopedEnv() {
  if (old_) {
    setenv(name_.c_str(), old_->c_str(), 1);
  } else {
    unsetenv(name_.c_str());
  }
}

namespace {

// The lowest port the kernel hands out for bind(port 0) and for outgoing connections.
int ephemeralPortLow() {
  int low = 32768;
  if (FILE* f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r")) {
    if (fscanf(f, "%d", &low) != 1) low = 32768;
    fclose(f);
  }
  return low;
}

// Binds loopback:port (0: the kernel picks) and releases it; the port bound, or -1.
int bindAndRelease(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  socklen_t len = sizeof(a);
  int bound = -1;
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
    bound = ntohs(a.sin_port);
  }
  close(fd);
  return bound;
}

}  // namespace

int freePort() {
  // Below the ephemeral range: a port from inside it can be taken, between this check and the
  // job's bind, by any process's listener on port 0 or outgoing connection (ctest runs tests side
  // by side), and the rendezvous then fails with EADDRINUSE.
  int low = ephemeralPortLow();
  if (low > 20000 + 1000) {
    std::mt19937 pick(std::random_device{}());
    std::uniform_int_distribution<int> port(20000, low - 1);
    for (int attempt = 0; attempt < 200; ++attempt) {
      int p = bindAndRelease(port(pick));
      if (p > 0) return p;
    }
  }
  return bindAndRelease(0);
}

}  // namespace loom::test
