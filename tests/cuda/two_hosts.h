// GPU ranks on two "hosts": two forked processes (fork_pair.h) with different LOOM_HOSTID, so
// no memory transport connects them and a wire transport (socket, or ib on the software NIC)
// carries every connection. Shared by the proxy (sim_proxy_test.cc) and GPUDirect
// (sim_gdr_test.cc) tests under the simulated runtime.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "loom/loom.h"

namespace loom::test {

// Exact int32 sums whatever the order: rank r contributes (i % 1000) * (r + 1).
std::vector<int32_t> rankInput(size_t count, int r);

// Rank r of a forked pair on simulated GPU `device`, made current: its communicator, or
// nullptr when init failed.
loomComm_t initGpuRank(int r, const loomUniqueId& id, int device);

// Where the calls' buffer comes from: plain cudaMalloc, loomMemAlloc (device memory, which
// the ib transport registers on first use), or cudaMalloc registered with loomCommRegister.
enum class TwoHostsBuffer { kCudaMalloc, kLoomMemAlloc, kRegistered };

struct TwoHostsRun {
  const char* transport = "socket";
  // In each rank's process, before its communicator is made (environment for one side).
  std::function<void(int rank)> beforeInit;
  // In each rank's process after the calls, before destroy: 0, or a code saying what is wrong.
  std::function<int(int rank)> afterCalls;
  TwoHostsBuffer buffer = TwoHostsBuffer::kCudaMalloc;
};

// GPU ranks 0 and 1 (on GPUs 0 and 1) on hosts "host-a" and "host-b" over `run.transport`,
// with LOOM_BUFFSIZE small so that each call is many steps through rings of kSlots slots:
// AllReduce, AllGather and a Send/Recv pair, three times, every result exact. Reports
// failures with EXPECTs.
void pipelineOnTwoHosts(const TwoHostsRun& run);

}  // namespace loom::test
