// LoomBackend's collectives. Each one checks its tensors, makes them loom buffers
// (buffers.h), and submits the loom calls on the collective lane. Where loom has the
// collective (AllReduce, Broadcast, Reduce, AllGather, ReduceScatter, AlltoAll with equal
// blocks) it runs as one call on the tensors' own memory; the operations loom has no
// collective for (gather, scatter, uneven and list alltoall, the list form of allgather) are
// one group of sends and receives, still without copies.
#include <c10/util/Exception.h>

#include "backend.h"
#include "buffers.h"
#include "wire.h"

namespace loom_torch {
namespace {

void checkSame(const at::Tensor& t, const at::Tensor& ref, int64_t numel, const char* name,
               const char* what) {
  checkTensor(t, name);
  TORCH_CHECK_VALUE(t.scalar_type() == ref.scalar_type(), "loom: ", name, ": ", what, " is ",
                    dtypeName(t.scalar_type()), " but the input is ", dtypeName(ref.scalar_type()));
  TORCH_CHECK_VALUE(t.numel() == numel, "loom: ", name, ": ", what, " has ", t.numel(),
                    " elements, expected ", numel);
}

std::vector<at::Tensor> one(const at::Tensor& t) { return {t}; }

}  // namespace

c10::intrusive_ptr<c10d::Work> LoomBackend::broadcast(std::vector<at::Tensor>& tensors,
                                                      const c10d::BroadcastOptions& opts) {
  const at::Tensor& t = single(tensors, "broadcast");
  const int root = checkPeer(static_cast<int>(opts.rootRank), "broadcast");
  Lane& lane = laneFor("broadcast");
  auto work = makeWork(c10d::OpType::BROADCAST, "broadcast", one(t), opts.asyncOp);
  Wire w = moveWire(writable(lane, *work, t));
  loomComm_t comm = comm_;
  return run(lane, work, [=](loomStream_t s) {
    check(loomBroadcast(w.data, w.data, w.count, w.type, root, comm, s), comm, "loomBroadcast");
  });
}

c10::intrusive_ptr<c10d::Work> LoomBackend::allreduce(std::vector<at::Tensor>& tensors,
                                                      const c10d::AllreduceOptions& opts) {
  const at::Tensor& t = single(tensors, "allreduce");
  Lane& lane = laneFor("allreduce");
  auto work = makeWork(c10d::OpType::ALLREDUCE, "allreduce", one(t), opts.asyncOp);
  Reduction r = reduceWire(writable(lane, *work, t), opts.reduceOp, "allreduce");
  loomComm_t comm = comm_;
  return run(lane, work, [=](loomStream_t s) {
    ScopedRedOp op(r, comm);
    const Wire& w = r.wire;
    check(loomAllReduce(w.data, w.data, w.count, w.type, op.op(), comm, s), comm, "loomAllReduce");
  });
}

c10::intrusive_ptr<c10d::Work> LoomBackend::allreduce_coalesced(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) {
  Lane& lane = laneFor("allreduce_coalesced");
  for (const auto& t : tensors) checkTensor(t, "allreduce_coalesced");
  auto work = makeWork(c10d::OpType::ALLREDUCE_COALESCED, "allreduce_coalesced", tensors);
  std::vector<Launch> launches;
  loomComm_t comm = comm_;
  for (const auto& t : tensors) {
    Reduction r = reduceWire(writable(lane, *work, t), opts.reduceOp, "allreduce_coalesced");
    launches.push_back([=](loomStream_t s) {
      ScopedRedOp op(r, comm);
      const Wire& w = r.wire;
      check(loomAllReduce(w.data, w.data, w.count, w.type, op.op(), comm, s), comm,
            "loomAllReduce");
    });
  }
  return runMany(lane, work, std::move(launches));
}

c10::intrusive_ptr<c10d::Work> LoomBackend::reduce(std::vector<at::Tensor>& tensors,
                                                   const c10d::ReduceOptions& opts) {
  const at::Tensor& t = single(tensors, "reduce");
  const int root = checkPeer(static_cast<int>(opts.rootRank), "reduce");
  Lane& lane = laneFor("reduce");
  auto work = makeWork(c10d::OpType::REDUCE, "reduce", one(t), opts.asyncOp);
  Reduction r = reduceWire(writable(lane, *work, t), opts.reduceOp, "reduce");
  loomComm_t comm = comm_;
  return run(lane, work, [=](loomStream_t s) {
    ScopedRedOp op(r, comm);
    const Wire& w = r.wire;
    check(loomReduce(w.data, w.data, w.count, w.type, op.op(), root, comm, s), comm, "loomReduce");
  });
}

// ---- gathers ----------------------------------------------------------------------------------

c10::intrusive_ptr<c10d::Work> LoomBackend::allgatherInto(std::vector<at::Tensor>& outputs,
                                                          std::vector<at::Tensor>& inputs,
                                                          c10d::OpType type, const char* name) {
  TORCH_CHECK_VALUE(outputs.size() == inputs.size(), "loom: ", name, " got ", outputs.size(),
                    " outputs for ", inputs.size(), " inputs");
  Lane& lane = laneFor(name);
  for (size_t i = 0; i < inputs.size(); ++i) {
    checkTensor(inputs[i], name);
    checkSame(outputs[i], inputs[i], inputs[i].numel() * size_, name, "the output");
  }
  auto work = makeWork(type, name, outputs);
  std::vector<Launch> launches;
  loomComm_t comm = comm_;
  for (size_t i = 0; i < inputs.size(); ++i) {
    Wire out = moveWire(writable(lane, *work, outputs[i]));
    Wire in = moveWire(readable(lane, *work, inputs[i]));
    launches.push_back([=](loomStream_t s) {
      check(loomAllGather(in.data, out.data, in.count, in.type, comm, s), comm, "loomAllGather");
    });
  }
  if (launches.size() == 1 && !coalescing_) return run(lane, work, std::move(launches[0]));
  return runMany(lane, work, std::move(launches));
}

c10::intrusive_ptr<c10d::Work> LoomBackend::_allgather_base(at::Tensor& output, at::Tensor& input,
                                                            const c10d::AllgatherOptions&) {
  std::vector<at::Tensor> outputs{output}, inputs{input};
  return allgatherInto(outputs, inputs, c10d::OpType::_ALLGATHER_BASE, "all_gather_into_tensor");
}

c10::intrusive_ptr<c10d::Work> LoomBackend::all_gather_single(at::Tensor& output, at::Tensor& input,
                                                              const c10d::AllgatherOptions& o) {
  return _allgather_base(output, input, o);
}

c10::intrusive_ptr<c10d::Work> LoomBackend::allgather_into_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions&) {
  return allgatherInto(outputs, inputs, c10d::OpType::ALLGATHER_INTO_TENSOR_COALESCED,
                       "allgather_into_tensor_coalesced");
}

c10::intrusive_ptr<c10d::Work> LoomBackend::all_gather_single_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& o) {
  return allgather_into_tensor_coalesced(outputs, inputs, o);
}

c10::intrusive_ptr<c10d::Work> LoomBackend::allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                                      std::vector<at::Tensor>& inputs,
                                                      const c10d::AllgatherOptions&) {
  // outputs[0][p]: what rank p sends.
  TORCH_CHECK_VALUE(outputs.size() == 1, "loom: allgather takes one output list, got ",
                    outputs.size());
  const at::Tensor& in = single(inputs, "all_gather");
  TORCH_CHECK_VALUE(static_cast<int>(outputs[0].size()) == size_,
                    "loom: all_gather: the output "
                    "list has ",
                    outputs[0].size(), " tensors for ", size_, " ranks");
  PeerTensors sends, recvs;
  for (int p = 0; p < size_; ++p) {
    checkSame(outputs[0][p], in, in.numel(), "all_gather", "an output tensor");
    sends.emplace_back(p, in);
    recvs.emplace_back(p, outputs[0][p]);
  }
  return exchange(c10d::OpType::ALLGATHER, "all_gather", sends, recvs, outputs[0]);
}

c10::intrusive_ptr<c10d::Work> LoomBackend::allgather_coalesced(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions&) {
  // outputs[p][i]: input i of rank p (torch.distributed.all_gather_coalesced's layout, one
  // list per rank, unlike allgather's one list per input).
  const char* name = "all_gather_coalesced";
  TORCH_CHECK_VALUE(!inputs.empty(), "loom: ", name, " takes at least one input tensor");
  TORCH_CHECK_VALUE(static_cast<int>(outputs.size()) == size_, "loom: ", name, " got ",
                    outputs.size(), " output lists for ", size_, " ranks (one list per rank)");
  for (const auto& t : inputs) checkTensor(t, name);
  PeerTensors sends, recvs;
  std::vector<at::Tensor> written;
  for (int p = 0; p < size_; ++p) {
    TORCH_CHECK_VALUE(outputs[p].size() == inputs.size(), "loom: ", name,
                      ": the output list of "
                      "rank ",
                      p, " has ", outputs[p].size(), " tensors for ", inputs.size(), " inputs");
    for (size_t i = 0; i < inputs.size(); ++i) {
      checkSame(outputs[p][i], inputs[i], inputs[i].numel(), name, "an output tensor");
      sends.emplace_back(p, inputs[i]);
      recvs.emplace_back(p, outputs[p][i]);
      written.push_back(outputs[p][i]);
    }
  }
  return exchange(c10d::OpType::ALLGATHER_COALESCED, name, sends, recvs, std::move(written));
}

c10::intrusive_ptr<c10d::Work> LoomBackend::gather(std::vector<std::vector<at::Tensor>>& outputs,
                                                   std::vector<at::Tensor>& inputs,
                                                   const c10d::GatherOptions& opts) {
  const at::Tensor& in = single(inputs, "gather");
  const int root = checkPeer(static_cast<int>(opts.rootRank), "gather");
  PeerTensors sends{{root, in}}, recvs;
  std::vector<at::Tensor> written;
  if (rank_ == root) {
    TORCH_CHECK_VALUE(outputs.size() == 1 && static_cast<int>(outputs[0].size()) == size_,
                      "loom: gather on the root takes one list of ", size_, " output tensors");
    for (int p = 0; p < size_; ++p) {
      checkSame(outputs[0][p], in, in.numel(), "gather", "an output tensor");
      recvs.emplace_back(p, outputs[0][p]);
      written.push_back(outputs[0][p]);
    }
  }
  return exchange(c10d::OpType::GATHER, "gather", sends, recvs, std::move(written));
}

c10::intrusive_ptr<c10d::Work> LoomBackend::scatter(std::vector<at::Tensor>& outputs,
                                                    std::vector<std::vector<at::Tensor>>& inputs,
                                                    const c10d::ScatterOptions& opts) {
  const at::Tensor& out = single(outputs, "scatter");
  const int root = checkPeer(static_cast<int>(opts.rootRank), "scatter");
  PeerTensors sends, recvs{{root, out}};
  if (rank_ == root) {
    TORCH_CHECK_VALUE(inputs.size() == 1 && static_cast<int>(inputs[0].size()) == size_,
                      "loom: scatter on the root takes one list of ", size_, " input tensors");
    for (int p = 0; p < size_; ++p) {
      checkSame(inputs[0][p], out, out.numel(), "scatter", "an input tensor");
      sends.emplace_back(p, inputs[0][p]);
    }
  }
  return exchange(c10d::OpType::SCATTER, "scatter", sends, recvs, one(out));
}

// ---- reduce-scatter ---------------------------------------------------------------------------

c10::intrusive_ptr<c10d::Work> LoomBackend::reduceScatterInto(std::vector<at::Tensor>& outputs,
                                                              std::vector<at::Tensor>& inputs,
                                                              const c10d::ReduceOp& op,
                                                              c10d::OpType type, const char* name) {
  TORCH_CHECK_VALUE(outputs.size() == inputs.size(), "loom: ", name, " got ", outputs.size(),
                    " outputs for ", inputs.size(), " inputs");
  Lane& lane = laneFor(name);
  for (size_t i = 0; i < inputs.size(); ++i) {
    checkTensor(outputs[i], name);
    checkSame(inputs[i], outputs[i], outputs[i].numel() * size_, name, "the input");
  }
  auto work = makeWork(type, name, outputs);
  std::vector<Launch> launches;
  loomComm_t comm = comm_;
  for (size_t i = 0; i < inputs.size(); ++i) {
    Reduction r = reduceWire(writable(lane, *work, outputs[i]), op, name);
    const void* in = readable(lane, *work, inputs[i]).data_ptr();
    launches.push_back([=](loomStream_t s) {
      ScopedRedOp rop(r, comm);
      const Wire& w = r.wire;
      check(loomReduceScatter(in, w.data, w.count, w.type, rop.op(), comm, s), comm,
            "loomReduceScatter");
    });
  }
  if (launches.size() == 1 && !coalescing_) return run(lane, work, std::move(launches[0]));
  return runMany(lane, work, std::move(launches));
}

c10::intrusive_ptr<c10d::Work> LoomBackend::_reduce_scatter_base(
    at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) {
  std::vector<at::Tensor> outputs{output}, inputs{input};
  return reduceScatterInto(outputs, inputs, opts.reduceOp, c10d::OpType::_REDUCE_SCATTER_BASE,
                           "reduce_scatter_tensor");
}

c10::intrusive_ptr<c10d::Work> LoomBackend::reduce_scatter_single(
    at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) {
  return _reduce_scatter_base(output, input, opts);
}

c10::intrusive_ptr<c10d::Work> LoomBackend::reduce_scatter_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  return reduceScatterInto(outputs, inputs, opts.reduceOp,
                           c10d::OpType::REDUCE_SCATTER_TENSOR_COALESCED,
                           "reduce_scatter_tensor_coalesced");
}

c10::intrusive_ptr<c10d::Work> LoomBackend::reduce_scatter_single_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  return reduce_scatter_tensor_coalesced(outputs, inputs, opts);
}

c10::intrusive_ptr<c10d::Work> LoomBackend::reduce_scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  const at::Tensor& out = single(outputs, "reduce_scatter");
  TORCH_CHECK_VALUE(inputs.size() == 1 && static_cast<int>(inputs[0].size()) == size_,
                    "loom: reduce_scatter takes one list of ", size_, " input tensors");
  for (const auto& t : inputs[0]) checkSame(t, out, out.numel(), "reduce_scatter", "an input");
  // loom reduces one buffer of consecutive blocks: the list is gathered into one, in stream
  // order.
  laneFor("reduce_scatter").drain();
  std::vector<at::Tensor> flat{at::cat(inputs[0]).reshape({-1})};
  std::vector<at::Tensor> outs{out};
  return reduceScatterInto(outs, flat, opts.reduceOp, c10d::OpType::REDUCE_SCATTER,
                           "reduce_scatter");
}

// ---- all-to-all -------------------------------------------------------------------------------

c10::intrusive_ptr<c10d::Work> LoomBackend::alltoall_base(at::Tensor& output, at::Tensor& input,
                                                          std::vector<int64_t>& outputSplits,
                                                          std::vector<int64_t>& inputSplits,
                                                          const c10d::AllToAllOptions&) {
  const char* name = "all_to_all_single";
  checkTensor(input, name);
  checkTensor(output, name);
  TORCH_CHECK_VALUE(output.scalar_type() == input.scalar_type(), "loom: ", name, ": the output is ",
                    output.scalar_type(), " but the input is ", input.scalar_type());
  Lane& lane = laneFor(name);
  if (outputSplits.empty() && inputSplits.empty()) {
    TORCH_CHECK_VALUE(input.numel() == output.numel() && input.numel() % size_ == 0, "loom: ", name,
                      " with equal splits needs input and output of the same size, a "
                      "multiple of ",
                      size_, "; got ", input.numel(), " and ", output.numel());
    auto work = makeWork(c10d::OpType::ALLTOALL_BASE, name, one(output));
    Wire out = moveWire(writable(lane, *work, output));
    Wire in = moveWire(readable(lane, *work, input));
    const size_t block = in.count / size_;
    loomComm_t comm = comm_;
    return run(lane, work, [=](loomStream_t s) {
      check(loomAlltoAll(in.data, out.data, block, in.type, comm, s), comm, "loomAlltoAll");
    });
  }
  // Uneven splits count rows of dimension 0; an empty list means equal rows.
  auto splits = [&](const at::Tensor& t, std::vector<int64_t> given, const char* what) {
    TORCH_CHECK_VALUE(t.dim() > 0, "loom: ", name,
                      " with splits needs tensors of 1 dimension "
                      "or more");
    if (given.empty()) given.assign(size_, t.size(0) / size_);
    TORCH_CHECK_VALUE(static_cast<int>(given.size()) == size_, "loom: ", name, ": ", what, " has ",
                      given.size(), " entries for ", size_, " ranks");
    int64_t sum = 0;
    for (int64_t g : given) sum += g;
    TORCH_CHECK_VALUE(sum == t.size(0), "loom: ", name, ": ", what, " add up to ", sum,
                      " rows, but the tensor has ", t.size(0));
    return given;
  };
  std::vector<int64_t> outRows = splits(output, outputSplits, "output_split_sizes");
  std::vector<int64_t> inRows = splits(input, inputSplits, "input_split_sizes");
  // Views of one contiguous buffer (copied once if the tensor is not contiguous itself).
  auto work = makeWork(c10d::OpType::ALLTOALL_BASE, name, one(output));
  at::Tensor out = writable(lane, *work, output);
  at::Tensor in = readable(lane, *work, input);
  PeerTensors sends, recvs;
  for (int p = 0, inRow = 0, outRow = 0; p < size_; ++p) {
    sends.emplace_back(p, in.narrow(0, inRow, inRows[p]));
    recvs.emplace_back(p, out.narrow(0, outRow, outRows[p]));
    inRow += inRows[p];
    outRow += outRows[p];
  }
  return exchangeWith(work, lane, sends, recvs);
}

c10::intrusive_ptr<c10d::Work> LoomBackend::all_to_all_single(at::Tensor& output, at::Tensor& input,
                                                              std::vector<int64_t>& outputSplits,
                                                              std::vector<int64_t>& inputSplits,
                                                              const c10d::AllToAllOptions& o) {
  return alltoall_base(output, input, outputSplits, inputSplits, o);
}

c10::intrusive_ptr<c10d::Work> LoomBackend::alltoall(std::vector<at::Tensor>& outputs,
                                                     std::vector<at::Tensor>& inputs,
                                                     const c10d::AllToAllOptions&) {
  TORCH_CHECK_VALUE(
      static_cast<int>(outputs.size()) == size_ && static_cast<int>(inputs.size()) == size_,
      "loom: alltoall takes ", size_, " input and ", size_, " output tensors, got ", inputs.size(),
      " and ", outputs.size());
  PeerTensors sends, recvs;
  for (int p = 0; p < size_; ++p) {
    checkTensor(inputs[p], "alltoall");
    checkTensor(outputs[p], "alltoall");
    sends.emplace_back(p, inputs[p]);
    recvs.emplace_back(p, outputs[p]);
  }
  return exchange(c10d::OpType::ALLTOALL, "alltoall", sends, recvs, outputs);
}

// ---- exchanges of sends and receives ----------------------------------------------------------

c10::intrusive_ptr<c10d::Work> LoomBackend::exchange(c10d::OpType type, const char* name,
                                                     const PeerTensors& sends,
                                                     const PeerTensors& recvs,
                                                     std::vector<at::Tensor> outputs) {
  Lane& lane = laneFor(name);
  auto work = makeWork(type, name, std::move(outputs));
  return exchangeWith(work, lane, sends, recvs);
}

c10::intrusive_ptr<c10d::Work> LoomBackend::exchangeWith(const c10::intrusive_ptr<LoomWork>& work,
                                                         Lane& lane, const PeerTensors& sends,
                                                         const PeerTensors& recvs) {
  std::vector<Launch> launches;
  loomComm_t comm = comm_;
  for (const auto& [peer, t] : sends) {
    Wire w = moveWire(readable(lane, *work, t));
    launches.push_back([=, p = peer](loomStream_t s) {
      check(loomSend(w.data, w.count, w.type, p, comm, s), comm, "loomSend");
    });
  }
  for (const auto& [peer, t] : recvs) {
    Wire w = moveWire(writable(lane, *work, t));
    launches.push_back([=, p = peer](loomStream_t s) {
      check(loomRecv(w.data, w.count, w.type, p, comm, s), comm, "loomRecv");
    });
  }
  return runMany(lane, work, std::move(launches));
}

}  // namespace loom_torch
