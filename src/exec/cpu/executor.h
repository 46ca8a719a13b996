// The CPU executor: runs a set of operations (one call, or a whole group) to completion on the
// calling thread - the caller's for a NULL stream, a host stream's own thread otherwise.
//
// How it works. Each operation becomes PrimTasks, one per channel (or per peer for
// point-to-point). Connections are made on first use (Comm::connect says how that stays
// deadlock-free with other operations in flight). The tasks of a call join their
// communicator's progress engine (progress_engine.h), where whichever thread drives steps them
// together with those of the other calls running on other streams or threads of the
// communicator. Tasks that share a connection run in the order they were submitted (every rank
// submits in the same order, so the slots on the wire match); tasks on different connections
// progress together, so sends and receives posted in any order - in one group, or on
// different streams - cannot deadlock. The loop polls every task and connection; when nothing
// moves it spins briefly, then yields, then sleeps in short naps, so ranks that share cores
// still make progress. A run fails with loomTimeout when nothing moved for the communicator's
// timeout (naming what each unfinished task waits for), and with loomInvalidUsage when its
// communicator is aborted; a failure fails every operation in flight on the communicator, and
// marks it failed.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "src/comm/connection_key.h"
#include "src/exec/cpu/exchange_now.h"
#include "src/exec/cpu/progress_engine.h"
#include "src/exec/cpu/shm_way_policy.h"
#include "src/exec/device_executor.h"
#include "src/plan/coll.h"

namespace loom {

class HostStream;

void runOps(std::vector<CollOp>& ops);

// Makes the connections each communicator lacks of those `wanted` names. With several
// communicators each connects on its own thread: one thread may drive all ranks of a job
// (loomCommInitAll + a group), and each rank's setup waits for its peers'.
void connectComms(const std::map<Comm*, std::vector<LinkRequest>>& wanted);
// A send to oneself is a local copy: pairs each with the receive from oneself of the same
// communicator, in posting order, as NCCL does, and appends the copy (a Recv whose sendbuff
// is the send's buffer) to `selfCopies`. Throws InvalidUsage for unpaired or mismatched ones.
void planSelfCopies(const std::vector<CollOp>& ops, std::vector<CollOp>& selfCopies);

// nccl-tests' in-place send/recv: a Send whose buffer a Recv of the same group overwrites.
// Such a Send is marked (op.inputOverwritten: its peer must get a copy, never read that memory
// in place) and the pair is listed, so an executor gates the Recv's task on the Send's (step i
// of the receive overwrites only what step i of the send has copied out). Both must then start
// at the same address: other overlaps have no order that works, so they are refused
// (InvalidUsage). Buffers of different communicators are different ranks' memory: they are
// not paired. `received` is scratch.
struct RecvInterval {
  uintptr_t begin, end;  // [begin, end) of a Recv buffer
  size_t op;
  bool operator<(const RecvInterval& o) const { return begin < o.begin; }
};
struct SendRecvOverlap {
  size_t send;  // indices into ops
  size_t recv;
};
void pairOverwrittenInputs(std::vector<CollOp>& ops, std::vector<RecvInterval>& received,
                           std::vector<SendRecvOverlap>& overlaps);

// The executor of a CPU communicator, and what it keeps per communicator: the progress engine
// its calls join, the shared-memory way policy, the fast path's cached plan and the host streams.
class CpuExecutor final : public Executor {
 public:
  explicit CpuExecutor(const Comm& comm);

  const char* device() const override { return "cpu"; }
  bool hostStreams() const override { return true; }
  CpuExecutor* hostExecutor() override { return this; }
  void run(std::vector<CollOp>& ops) override { runOps(ops); }
  void runOne(CollOp& op) override;
  void quiesce() override;
  void resume() override;
  void drain() override;

  // Runs this communicator's operations together (progress_engine.h).
  ProgressEngine& engine() { return engine_; }
  // How a call's steps between processes move (shm_way_policy.h); used under the engine's
  // lock (ProgressEngine::enter, ::locked).
  ShmWayPolicy& shmWayPolicy() { return shmWayPolicy_; }
  // The fast path's plans for the last few shapes of small calls (exchange_now.h); used while
  // driving alone (ProgressEngine::tryExclusive).
  ExchangeNowCache& exchangeNowCache() { return exchangeNowCache_; }
  // Whether a host call of `bytes` per rank writes its output and the peers' slots with
  // non-temporal stores (LOOM_STREAM_STORE_THRESHOLD).
  bool streamsStores(size_t bytes) const { return streamMinBytes_ > 0 && bytes >= streamMinBytes_; }
  // Whether copies through shared-memory slots may use crossCoreCopy (every rank has a CPU of
  // its own); a call's way says whether they do (CpuCallFlags::crossCoreCopies).
  bool crossCoreCopies() const { return crossCoreCopies_; }
  // Sets the flags a call of `way` steps by (shm_way_policy.h): whether it may pull, streams
  // its slots, walks 8 pages at once through them.
  void takeWay(ShmWay way, CpuCallFlags& flags) const {
    flags.mayPull = way == ShmWay::kPull;
    flags.streamSlots = way == ShmWay::kStreamedRing;
    flags.crossCoreCopies = crossCoreCopies_ && shmWayPolicy_.walks(way);
  }
  // Streams created on this communicator, so finalize/destroy/abort can drain them.
  void addStream(std::weak_ptr<HostStream> stream);

 private:
  ProgressEngine engine_;
  ShmWayPolicy shmWayPolicy_;
  size_t streamMinBytes_ = 0;
  bool crossCoreCopies_ = false;
  ExchangeNowCache exchangeNowCache_;
  std::mutex streamsMutex_;
  std::vector<std::weak_ptr<HostStream>> streams_;
};

// The CPU executor of `comm`. Throws InvalidUsage before init made it or for a CUDA
// communicator.
CpuExecutor& cpuExecutorOf(const Comm& comm);
inline ProgressEngine& engineOf(const Comm& comm) { return cpuExecutorOf(comm).engine(); }

}  // namespace loom
