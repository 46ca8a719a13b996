// LoomBackend: a c10d::Backend over loom's public C API, for CPU tensors.
//
// One loom communicator per process group, created from a unique id that group rank 0 puts
// into the group's store (the store torch hands over is already prefixed by the group's name,
// so every group has its own key). Operations are enqueued on loom host streams (Lanes):
//  - collectives on one lane, so that they keep the order in which the ranks call them;
//  - send and recv on a lane per (peer, direction), so that an irecv waiting for its message
//    never holds up an isend posted after it on this rank. Messages to one peer keep their
//    order, as torch's send/recv matching needs.
// Coalescing (startCoalescing ... endCoalescing, and so batch_isend_irecv) collects the
// launches and runs them as one loom group on the collective lane.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "loom/loom.h"
#include "work.h"

namespace loom_torch {

class LoomBackend : public c10d::Backend {
 public:
  struct Options : c10d::Backend::Options {
    explicit Options(std::chrono::milliseconds timeout = kBackendDefaultTimeout)
        : c10d::Backend::Options("loom", timeout) {}
    c10::intrusive_ptr<c10d::Backend::Options> clone() const override {
      return c10::make_intrusive<Options>(*this);
    }
  };

  // Joins the group's communicator through `store` (collective over the group's ranks).
  LoomBackend(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
              c10::intrusive_ptr<Options> options);
  // Wraps a communicator made by loomCommSplit.
  LoomBackend(loomComm_t comm, int rank, int size, c10::intrusive_ptr<Options> options);
  ~LoomBackend() override;

  const std::string getBackendName() const override { return "loom"; }
  c10::intrusive_ptr<c10d::Backend::Options> getBackendOptions() override { return options_; }
  bool supportsCoalescing() const override { return true; }
  bool supportsSplitting() const override { return true; }
  bool supportsShrinking() const override { return true; }
  void setTimeout(std::chrono::milliseconds timeout) override { options_->timeout = timeout; }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> all_gather_single(at::Tensor& output, at::Tensor& input,
                                                   const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                                                     std::vector<at::Tensor>& inputs,
                                                     const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> all_gather_single_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_single(
      at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_single_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> all_to_all_single(at::Tensor& output, at::Tensor& input,
                                                   std::vector<int64_t>& outputSplits,
                                                   std::vector<int64_t>& inputSplits,
                                                   const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& outputSplits,
                                               std::vector<int64_t>& inputSplits,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs,
                                          std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dstRank,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int srcRank,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors, int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;

  void startCoalescing() override;
  c10::intrusive_ptr<c10d::Work> endCoalescing() override;

  c10::intrusive_ptr<c10d::Backend> split(
      const c10::intrusive_ptr<c10d::Store>& store, const std::vector<int>& ranks,
      const c10::intrusive_ptr<c10d::Backend::Options>& opts) override;
  // torch.distributed.shrink_group: a new backend on the communicator of the ranks not in
  // `ranksToExclude` (group ranks), made by loomCommShrink; the survivors keep their order.
  // shrinkFlags 1 (torch's SHRINK_ABORT) first stops this group's operations in flight and
  // leaves this group aborted; 0 expects none in flight. Either way this group is not
  // finalized at shutdown any more: the excluded ranks would never join the finalize.
  c10::intrusive_ptr<c10d::Backend> shrink(
      const std::vector<int64_t>& ranksToExclude, int shrinkFlags,
      const c10::intrusive_ptr<c10d::Backend::Options>& optsOverride) override;
  // The part of a split that a rank outside every new group plays (torch's new_group calls it
  // on the non-members of a group split from a device-bound default group).
  void performNocolorSplit();

  uint64_t getSequenceNumberForGroup() override { return seq_; }
  c10d::ErrorType getError() override;
  void abort() override;
  void shutdown() override;

  // Global ranks of the group, for split (empty: the same as group ranks).
  void setGlobalRanks(std::vector<uint64_t> ranks) {
    options_->global_ranks_in_group = std::move(ranks);
  }

 private:
  using Launch = std::function<void(loomStream_t)>;
  // A new Work (or, while coalescing, the group's Work) for an operation writing `outputs`.
  // asyncOp false (a blocking call, which torch waits for at once) leaves finishing the work
  // to that wait.
  c10::intrusive_ptr<LoomWork> makeWork(c10d::OpType type, const char* name,
                                        std::vector<at::Tensor> outputs, bool asyncOp = true);
  // Submits `launch` on `lane`, or keeps it for endCoalescing.
  c10::intrusive_ptr<c10d::Work> run(Lane& lane, const c10::intrusive_ptr<LoomWork>& work,
                                     Launch launch);
  // Submits `launches` as one loom group.
  void runGroup(Lane& lane, const c10::intrusive_ptr<LoomWork>& work, std::vector<Launch> launches);
  // runGroup, or while coalescing, keeps the launches for endCoalescing.
  c10::intrusive_ptr<c10d::Work> runMany(Lane& lane, const c10::intrusive_ptr<LoomWork>& work,
                                         std::vector<Launch> launches);
  // Collectives' lane (checks that the communicator is usable).
  Lane& laneFor(const char* name);
  Lane& p2pLane(int peer, bool sending);
  loomComm_t liveComm(const char* name);
  void initLanes();
  void drainAll();
  void abortWith(const std::string& why);
  void destroyComm(bool finalize);
  int checkPeer(int peer, const char* name) const;
  // The sends and receives of gather, scatter, alltoall and the list form of allgather.
  // Each (peer, tensor) of `sends` goes to its peer, each of `recvs` comes from its peer, all
  // in one group (a rank's own block is a local copy inside loom).
  using PeerTensors = std::vector<std::pair<int, at::Tensor>>;
  c10::intrusive_ptr<c10d::Work> exchange(c10d::OpType type, const char* name,
                                          const PeerTensors& sends, const PeerTensors& recvs,
                                          std::vector<at::Tensor> outputs);
  c10::intrusive_ptr<c10d::Work> exchangeWith(const c10::intrusive_ptr<LoomWork>& work, Lane& lane,
                                              const PeerTensors& sends, const PeerTensors& recvs);
  // The single-tensor gather and reduce-scatter, alone or coalesced.
  c10::intrusive_ptr<c10d::Work> allgatherInto(std::vector<at::Tensor>& outputs,
                                               std::vector<at::Tensor>& inputs, c10d::OpType type,
                                               const char* name);
  c10::intrusive_ptr<c10d::Work> reduceScatterInto(std::vector<at::Tensor>& outputs,
                                                   std::vector<at::Tensor>& inputs,
                                                   const c10d::ReduceOp& op, c10d::OpType type,
                                                   const char* name);

  c10::intrusive_ptr<Options> options_;
  loomComm_t comm_ = nullptr;
  std::mutex commMutex_;  // guards comm_ against abort() from another thread
  bool aborted_ = false;
  std::string abortReason_;
  std::unique_ptr<Lane> collLane_;
  std::map<std::pair<int, bool>, std::unique_ptr<Lane>> p2pLanes_;
  uint64_t seq_ = 0;
  // Coalescing: launches collected since startCoalescing, and the tensors they write.
  bool coalescing_ = false;
  std::vector<Launch> coalesced_;
  std::vector<at::Tensor> coalescedOutputs_;
  c10::intrusive_ptr<LoomWork> coalescedWork_;
  int splits_ = 0;
  bool shrunk_ = false;  // a shrink made a successor: shutdown destroys without finalizing
};

}  // namespace loom_torch
