// TEST DOUBLE tests: helpers that drive the soft NIC through plain libibverbs calls, the way an
// RC transport does (one PD, CQ, completion channel, QP and registered buffer per endpoint).
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <string>
#include <vector>

namespace softnic::test {

constexpr int kAllRemote =
    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;

struct QpParams {
  uint32_t sqPsn = 0x1234;
  uint32_t rqPsn = 0x1234;  // must equal the peer's sqPsn
  int access = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  int timeout = 14;
  int retry = 7;
  int rnrRetry = 7;
  int minRnrTimer = 1;
};

struct Endpoint {
  explicit Endpoint(size_t bytes = 1 << 16, int mrAccess = kAllRemote, int cqe = 4096);
  ~Endpoint();
  Endpoint(const Endpoint&) = delete;
  Endpoint& operator=(const Endpoint&) = delete;

  uint32_t qpn() const { return qp->qp_num; }
  uint64_t addr(size_t offset = 0) const { return uint64_t(uintptr_t(buf.data() + offset)); }

  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  ibv_comp_channel* channel = nullptr;
  ibv_cq* cq = nullptr;
  ibv_qp* qp = nullptr;
  ibv_mr* mr = nullptr;
  ibv_gid gid{};
  std::vector<char> buf;
};

ibv_device* firstDevice();
int toInit(ibv_qp* qp, int access);
int toRtr(ibv_qp* qp, const ibv_gid& dgid, uint32_t destQpn, uint32_t rqPsn, int minRnrTimer);
int toRts(ibv_qp* qp, uint32_t sqPsn, int timeout, int retry, int rnrRetry);
// Brings `self` to RTS towards the remote QP; 0 or the first failing errno.
int connectTo(Endpoint& self, const ibv_gid& dgid, uint32_t destQpn, const QpParams& p = {});
// Connects two endpoints of this process to each other (each side uses its own params).
int connectPair(Endpoint& a, Endpoint& b, const QpParams& pa = {}, const QpParams& pb = {});

// Polls until `n` completions arrived or timeoutMs passed; returns what arrived.
std::vector<ibv_wc> pollFor(ibv_cq* cq, size_t n, int timeoutMs = 10000);

int postRecv(Endpoint& ep, uint64_t wrId, size_t offset = 0, uint32_t length = 0);
int postWrite(Endpoint& from, uint64_t wrId, size_t offset, uint32_t length, uint64_t remoteAddr,
              uint32_t rkey, bool withImm, uint32_t imm, bool signaled = true);

// "gid-hex qpn addr rkey" for exchanging endpoints between processes.
std::string describe(const Endpoint& ep);
bool parse(const std::string& line, ibv_gid* gid, uint32_t* qpn, uint64_t* addr, uint32_t* rkey);

}  // namespace softnic::test
