// TEST DOUBLE: a software RDMA NIC for loom's tests. It is not a driver and moves no data over
// RDMA hardware; it emulates the libibverbs semantics an RC transport relies on, over TCP.
//
// The objects below back the ibv_* handles the soft NIC hands out. Each verbs struct the caller
// sees lives inside a Shell that also points at its C++ owner, so a handle converts back to its
// object without a lookup table (the way a real provider embeds ibv_qp in its own QP struct).
#pragma once

#include <infiniband/verbs.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace softnic {

template <class Ibv, class Obj>
struct Shell {
  Ibv ibv;
  Obj* obj;
};

template <class Obj, class Ibv>
Obj* ownerOf(Ibv* handle) {
  return reinterpret_cast<Shell<Ibv, Obj>*>(handle)->obj;
}

struct Context;
struct Qp;

constexpr uint32_t kRkeyBit = 0x80000000u;  // lkeys and rkeys differ, so swapping them fails

// One soft NIC: a TCP listener that is the NIC's "wire", its ports and the tables that remote
// requests resolve against (QPs by number, MRs by rkey).
struct Device {
  Shell<ibv_device, Device> shell{};
  std::string name;
  uint32_t ipv4 = 0;     // network order
  uint16_t tcpPort = 0;  // host order; 0 until the listener is up
  uint64_t guid = 0;     // network order
  int numPorts = 1;

  std::mutex mu;
  std::vector<bool> portActive;  // index port_num - 1
  std::map<uint32_t, std::shared_ptr<Qp>> qps;
  std::map<uint32_t, struct Mr*> mrs;  // by lkey and by rkey (rkey = lkey | kRkeyBit)
  std::vector<Context*> contexts;
  uint32_t nextQpn = 0x11;
  uint32_t nextKey = 0x1001;
  bool listening = false;

  bool portUp(int port);
  std::shared_ptr<Qp> findQp(uint32_t qpn);
};

struct ContextShell {
  Context* obj;
  verbs_context vctx;
};

struct Context {
  ContextShell shell{};
  Device* dev = nullptr;
  int asyncRead = -1;
  int asyncWrite = -1;
  std::atomic<int> users{0};  // PDs, CQs, channels

  ibv_context* ibv() { return &shell.vctx.context; }
  void postAsync(const ibv_async_event& event);
};

Context* contextOf(ibv_context* ctx);

struct Pd {
  Shell<ibv_pd, Pd> shell{};
  Context* ctx = nullptr;
  std::atomic<int> users{0};  // MRs, QPs
};

struct Mr {
  Shell<ibv_mr, Mr> shell{};
  Pd* pd = nullptr;
  uint64_t iova = 0;     // the address work requests name (== base unless registered by iova)
  char* base = nullptr;  // where the bytes are in this process (iova for a dma-buf)
  uint64_t length = 0;
  int access = 0;

  bool covers(uint64_t start, uint64_t len) const {
    return start >= iova && len <= length && start - iova <= length - len;
  }
  char* at(uint64_t start) const { return base + (start - iova); }
};

struct Channel {
  Shell<ibv_comp_channel, Channel> shell{};
  Context* ctx = nullptr;
  int writeFd = -1;
  std::atomic<int> users{0};
};

struct Cq {
  Shell<ibv_cq, Cq> shell{};
  Context* ctx = nullptr;
  Channel* channel = nullptr;
  int capacity = 0;
  std::atomic<int> users{0};  // QPs

  std::mutex mu;
  std::deque<ibv_wc> entries;
  bool armed = false;
  bool solicitedOnly = false;

  // Adds a completion; raises the channel event when armed (solicited-only arms fire on a
  // solicited receive or any error) and IBV_EVENT_CQ_ERR when the CQ overflows.
  void push(const ibv_wc& wc, bool solicited);
  int poll(int max, ibv_wc* out);
};

// Turns a key into a registered region of `pd` that covers [addr, addr+len) and grants `access`;
// remote picks the rkey namespace. NULL when any check fails. Caller holds dev->mu.
Mr* findMrLocked(Device* dev, uint32_t key, bool remote, Pd* pd, uint64_t addr, uint64_t len,
                 int access);

// The process-wide configuration and fault injection (SOFTNIC_* variables, loom_softnic_inject).
struct Faults {
  std::mutex mu;
  long retryExceededAfter = -1;  // one-shot: fires when this many send WRs have run
  long qpFatalAfter = -1;        // one-shot
  long regFailAfter = -1;        // persistent: registrations after this many successes fail
  bool noDmabuf = false;
  long sendsSeen = 0;
  long regsSeen = 0;
};
Faults& faults();
// Parses "kind[@N],..." (kinds: retry_exceeded, qp_fatal, reg_fail, no_dmabuf, port_down,
// clear). Returns false on an unknown kind.
bool injectFaults(const std::string& spec, std::vector<Device*>& list);
// The longest wait the NIC models for one transport timeout (4.096 us << timeout) or RNR timer.
int maxWaitMs();

std::vector<Device*>& devices();
bool startListener(Device* dev);
void setPortState(Device* dev, int port, bool active);

// GID layout (RoCE v2 style, IPv4-mapped): bytes 0-7 zero, bytes 8-9 the NIC's TCP port
// (big-endian), bytes 10-11 0xffff, bytes 12-15 the IPv4 address.
void encodeGid(uint32_t ipv4, uint16_t tcpPort, ibv_gid* gid);
bool decodeGid(const ibv_gid& gid, uint32_t* ipv4, uint16_t* tcpPort);

}  // namespace softnic
