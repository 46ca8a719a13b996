// TEST DOUBLE tests: the soft NIC between two processes (the second is loom_softnic_peer), its
// start-up settings, and libloom_softnic.so as a dlopen'ed libibverbs.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "softnic_api.h"
#include "softnic_test_util.h"

extern char** environ;

namespace softnic::test {
namespace {

// A loom_softnic_peer process with its stdin and stdout on pipes.
class Peer {
 public:
  explicit Peer(std::vector<std::string> args, std::vector<std::string> env = {}) {
    int in[2], out[2];
    EXPECT_EQ(pipe(in), 0);
    EXPECT_EQ(pipe(out), 0);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in[0], 0);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    posix_spawn_file_actions_addclose(&fa, in[1]);
    posix_spawn_file_actions_addclose(&fa, out[0]);
    args.insert(args.begin(), LOOM_SOFTNIC_PEER);
    std::vector<char*> argv, envp;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    for (char** e = environ; *e != nullptr; ++e) envp.push_back(*e);
    for (auto& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    EXPECT_EQ(posix_spawn(&pid_, LOOM_SOFTNIC_PEER, &fa, nullptr, argv.data(), envp.data()), 0);
    posix_spawn_file_actions_destroy(&fa);
    close(in[0]);
    close(out[1]);
    to_ = fdopen(in[1], "w");
    from_ = fdopen(out[0], "r");
  }
  ~Peer() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    fclose(to_);
    fclose(from_);
  }

  std::string readLine() {
    char buf[512];
    if (std::fgets(buf, sizeof(buf), from_) == nullptr) return "";
    std::string s(buf);
    if (!s.empty() && s.back() == '\n') s.pop_back();
    return s;
  }
  void writeLine(const std::string& s) {
    std::fprintf(to_, "%s\n", s.c_str());
    std::fflush(to_);
  }
  int wait() {
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  void killNow() {
    kill(pid_, SIGKILL);
    wait();
  }

 private:
  pid_t pid_ = -1;
  FILE* to_ = nullptr;
  FILE* from_ = nullptr;
};

struct Remote {
  ibv_gid gid{};
  uint32_t qpn = 0;
  uint64_t addr = 0;
  uint32_t rkey = 0;
};

// Connects `self` to a peer in "target" mode; false when the exchange fails.
bool connectToPeer(Peer& peer, Endpoint& self, Remote* remote) {
  if (!parse(peer.readLine(), &remote->gid, &remote->qpn, &remote->addr, &remote->rkey))
    return false;
  if (connectTo(self, remote->gid, remote->qpn) != 0) return false;
  peer.writeLine(describe(self));
  return peer.readLine() == "ready";
}

TEST(SoftnicProcesses, WriteWithImmCrossesProcessesWholeAndInOrder) {
  constexpr int kMessages = 64;
  Peer peer({"target", std::to_string(kMessages)});
  Endpoint a(kMessages * 1024);
  Remote remote;
  ASSERT_TRUE(connectToPeer(peer, a, &remote));
  for (size_t k = 0; k < a.buf.size(); ++k) a.buf[k] = char(k * 11 + 1);
  // Message i goes to offset i * 1024 of the peer, which sums what it finds there.
  std::vector<std::string> expected;
  for (int i = 0; i < kMessages; ++i) {
    uint32_t len = uint32_t((i * 53) % 1024 + 1);
    uint64_t sum = 0;
    for (uint32_t k = 0; k < len; ++k) sum += uint8_t(a.buf[size_t(i) * 1024 + k]);
    std::ostringstream line;
    line << "wc " << IBV_WC_SUCCESS << ' ' << IBV_WC_RECV_RDMA_WITH_IMM << ' ' << i << ' ' << len
         << ' ' << sum;
    expected.push_back(line.str());
    ASSERT_EQ(postWrite(a, uint64_t(i), size_t(i) * 1024, len, remote.addr + uint64_t(i) * 1024,
                        remote.rkey, true, uint32_t(i)),
              0);
  }
  auto sent = pollFor(a.cq, kMessages);
  ASSERT_EQ(sent.size(), size_t(kMessages));
  for (const ibv_wc& wc : sent) EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  for (int i = 0; i < kMessages; ++i) EXPECT_EQ(peer.readLine(), expected[i]);
  EXPECT_EQ(peer.wait(), 0);
}

TEST(SoftnicProcesses, KilledPeerMakesTheNextWriteExceedItsRetries) {
  Peer peer({"target", "100"});
  Endpoint a;
  Remote remote;
  ASSERT_TRUE(connectToPeer(peer, a, &remote));
  ASSERT_EQ(postWrite(a, 1, 0, 8, remote.addr, remote.rkey, true, 0), 0);
  auto first = pollFor(a.cq, 1);
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].status, IBV_WC_SUCCESS);
  peer.killNow();
  ASSERT_EQ(postWrite(a, 2, 0, 8, remote.addr, remote.rkey, true, 1), 0);
  auto second = pollFor(a.cq, 1, 30000);
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(second[0].status, IBV_WC_RETRY_EXC_ERR);
}

TEST(SoftnicProcesses, StartupSettingsComeFromTheEnvironment) {
  {
    Peer peer({"probe"});
    EXPECT_EQ(peer.readLine(),
              "devices 1 last softnic0 ports 1 port " + std::to_string(IBV_PORT_ACTIVE) + " reg 0");
    EXPECT_EQ(peer.wait(), 0);
  }
  {
    Peer peer({"probe"}, {"SOFTNIC_PORT_STATE=down", "SOFTNIC_FAULT=reg_fail@0",
                          "SOFTNIC_DEVICES=nicA,nicB", "SOFTNIC_PORTS=2"});
    EXPECT_EQ(peer.readLine(), "devices 2 last nicB ports 2 port " + std::to_string(IBV_PORT_DOWN) +
                                   " reg " + std::to_string(ENOMEM));
    EXPECT_EQ(peer.wait(), 0);
  }
  {
    Peer peer({"probe"}, {"SOFTNIC_DEVICES="});
    EXPECT_EQ(peer.readLine(), "no device");
    EXPECT_EQ(peer.wait(), 0);
  }
}

// What a dlopen/dlsym verbs table (LOOM_IBVERBS_LIB) finds, versions included.
TEST(SoftnicSharedLibrary, ExportsTheVerbsAbiUnderLibibverbsVersions) {
  void* h = dlopen(LOOM_SOFTNIC_LIB, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(h, nullptr) << dlerror();
  const char* exported[] = {"ibv_get_device_list",
                            "ibv_free_device_list",
                            "ibv_get_device_name",
                            "ibv_get_device_guid",
                            "ibv_open_device",
                            "ibv_close_device",
                            "ibv_query_device",
                            "ibv_query_port",
                            "ibv_query_gid",
                            "ibv_alloc_pd",
                            "ibv_dealloc_pd",
                            "ibv_reg_mr",
                            "ibv_reg_mr_iova2",
                            "ibv_reg_dmabuf_mr",
                            "ibv_dereg_mr",
                            "ibv_create_comp_channel",
                            "ibv_destroy_comp_channel",
                            "ibv_create_cq",
                            "ibv_destroy_cq",
                            "ibv_get_cq_event",
                            "ibv_ack_cq_events",
                            "ibv_create_qp",
                            "ibv_modify_qp",
                            "ibv_query_qp",
                            "ibv_destroy_qp",
                            "ibv_get_async_event",
                            "ibv_ack_async_event",
                            "loom_softnic_lookup"};
  for (const char* name : exported) {
    EXPECT_NE(dlsym(h, name), nullptr) << name;
    if (std::string(name).find("ibv_") != std::string::npos) {
      EXPECT_NE(loom_softnic_lookup(name), nullptr) << name;
    }
  }
  EXPECT_NE(dlvsym(h, "ibv_reg_dmabuf_mr", "IBVERBS_1.12"), nullptr);
  EXPECT_NE(dlvsym(h, "ibv_reg_mr_iova2", "IBVERBS_1.8"), nullptr);
  EXPECT_NE(dlvsym(h, "ibv_query_port", "IBVERBS_1.1"), nullptr);
  EXPECT_NE(dlvsym(h, "_ibv_query_gid_ex", "IBVERBS_1.11"), nullptr);
  EXPECT_EQ(dlvsym(h, "ibv_reg_dmabuf_mr", "IBVERBS_1.8"), nullptr);
  // verbs.h reaches these through context->ops; the table still offers them by name.
  for (const char* name : {"ibv_post_send", "ibv_post_recv", "ibv_poll_cq", "ibv_req_notify_cq"})
    EXPECT_NE(loom_softnic_lookup(name), nullptr) << name;
  EXPECT_EQ(dlsym(h, "ibv_post_send"), nullptr);  // static inline in verbs.h, as in libibverbs
  EXPECT_EQ(loom_softnic_lookup("ibv_no_such_verb"), nullptr);
  dlclose(h);
}

}  // namespace
}  // namespace softnic::test
