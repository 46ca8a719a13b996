"""3D parallelism: data x tensor x pipeline = 2 x 2 x 2 on 8 ranks, one training step.

    python3 examples/parallel_3d.py

Rank r = 4 * dp + 2 * pp + tp. The groups come from `new_group`. The default group is bound
to a device (init_process_group(device_id=...)), so torch makes each new group by splitting
it: on loom, loomCommSplit of the default group's communicator, no new rendezvous. Every rank
calls new_group for every group, in the same order, as torch requires:
- tensor-parallel groups {4d+2p, 4d+2p+1}: the ranks of one pipeline stage of one replica;
- pipeline pairs need no group: stage 0 of a replica sends activations to stage 1 over the
  default group (isend/irecv to global ranks), stage 1 sends the gradients back;
- data-parallel groups {2p+t, 4+2p+t}: the ranks that hold the same shards in the two
  replicas; they average their gradients with all_reduce before the SGD step.
The model is two Megatron MLP blocks (column- then row-parallel, see tp_megatron.py), one per
pipeline stage. Each replica runs 2 micro-batches of its own data through the pipe (GPipe).

Check: after the step, the shards of every rank equal the matching slices of the same model
trained for one step in one process on all the data, bit for bit (weights in multiples of
1/8, small integer data, a loss linear in the outputs, lr = 1/16: nothing rounds). A mismatch
exits non-zero.
"""

import sys

import torch
import torch.distributed as dist

from launch import spawn

DP, PP, TP = 2, 2, 2
HIDDEN, FFN, MICRO_BATCH, MICRO_BATCHES = 4, 8, 2, 2
LR = 1.0 / 16


class CopyToTP(torch.autograd.Function):
    """Megatron's f: identity forward, all_reduce over the TP group backward."""

    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        grad = grad.clone()
        dist.all_reduce(grad, group=ctx.group)
        return grad, None


class ReduceFromTP(torch.autograd.Function):
    """Megatron's g: all_reduce over the TP group forward, identity backward."""

    @staticmethod
    def forward(ctx, x, group):
        x = x.clone()
        dist.all_reduce(x, group=group)
        return x

    @staticmethod
    def backward(ctx, grad):
        return grad, None


def block_weights(stage):
    g = torch.Generator().manual_seed(stage)

    def w(*shape):
        return torch.randint(-4, 5, shape, generator=g).double() / 8

    return {"w1": w(FFN, HIDDEN), "b1": w(FFN), "w2": w(HIDDEN, FFN), "b2": w(HIDDEN)}


def shard(full, tp):
    """Rows of W1 and b1, columns of W2: this TP rank's slice of the block; b2 whole."""
    return {"w1": full["w1"].chunk(TP, 0)[tp], "b1": full["b1"].chunk(TP, 0)[tp],
            "w2": full["w2"].chunk(TP, 1)[tp], "b2": full["b2"]}


def micro_batch(dp, i):
    g = torch.Generator().manual_seed(10 * dp + i)
    x = torch.randint(-2, 3, (MICRO_BATCH, HIDDEN), generator=g).double()
    t = torch.randint(-1, 2, (MICRO_BATCH, HIDDEN), generator=g).double()
    return x, t


def block(p, x, group=None):
    if group is not None:
        x = CopyToTP.apply(x, group)
    h = torch.relu(x @ p["w1"].T + p["b1"]) @ p["w2"].T
    if group is not None:
        h = ReduceFromTP.apply(h, group)
    return h + p["b2"]


def reference():
    """One process: both blocks, all replicas' data; the loss averaged over the replicas."""
    blocks = [{k: v.requires_grad_() for k, v in block_weights(s).items()} for s in range(PP)]
    for dp in range(DP):
        for i in range(MICRO_BATCHES):
            x, t = micro_batch(dp, i)
            for p in blocks:
                x = block(p, x)
            ((x * t).sum() / DP).backward()
    with torch.no_grad():
        for p in blocks:
            for w in p.values():
                w -= LR * w.grad
    return [{k: v.detach() for k, v in p.items()} for p in blocks]


def main(rank, world):
    assert world == DP * PP * TP
    dp, pp, tp = rank // (PP * TP), rank // TP % PP, rank % TP
    tp_groups = [[d * PP * TP + s * TP + t for t in range(TP)]
                 for d in range(DP) for s in range(PP)]
    dp_groups = [[d * PP * TP + s * TP + t for d in range(DP)]
                 for s in range(PP) for t in range(TP)]
    groups = {}
    for kind, partition in (("tp", tp_groups), ("dp", dp_groups)):
        for ranks in partition:
            group = dist.new_group(ranks)  # a split of the default group, on every rank
            if rank in ranks:
                groups[kind] = group
    prev_rank, next_rank = rank - TP, rank + TP  # the same TP slot in the neighbour stage

    p = {k: v.clone().requires_grad_() for k, v in shard(block_weights(pp), tp).items()}
    saved, sends = [], []
    for i in range(MICRO_BATCHES):  # GPipe: all forwards, then all backwards
        x, t = micro_batch(dp, i)
        if pp > 0:
            x = torch.empty(MICRO_BATCH, HIDDEN, dtype=torch.float64)
            dist.irecv(x, src=prev_rank).wait()
            x.requires_grad_()
        y = block(p, x, groups["tp"])
        if pp < PP - 1:
            sends.append(dist.isend(y.detach(), dst=next_rank))
        else:
            y = (y * t).sum() / DP
        saved.append((x, y))
    for x, y in saved:
        grad = None
        if pp < PP - 1:
            grad = torch.empty(MICRO_BATCH, HIDDEN, dtype=torch.float64)
            dist.irecv(grad, src=next_rank).wait()
        y.backward(grad)
        if pp > 0:
            sends.append(dist.isend(x.grad, dst=prev_rank))
    for work in sends:
        work.wait()
    # Data parallelism: the two replicas' gradients of the same shard are summed (the loss
    # already carries the 1/DP of the mean), then SGD.
    with torch.no_grad():
        for w in p.values():
            dist.all_reduce(w.grad, group=groups["dp"])
            w -= LR * w.grad

    want = shard(reference()[pp], tp)
    for name, w in p.items():
        if not torch.equal(w, want[name]):
            raise AssertionError(f"rank {rank} (dp {dp}, pp {pp}, tp {tp}): {name} differs "
                                 f"from the single-process model by {(w - want[name]).abs().max()}")
    ok = torch.ones(1)
    dist.all_reduce(ok)
    if rank == 0:
        print(f"  {int(ok.item())} ranks: every shard equals the single-process model's after "
              "one step, bit for bit")


if __name__ == "__main__":
    print(f"parallel_3d: DP x PP x TP = {DP} x {PP} x {TP} on {DP * PP * TP} ranks, loom backend")
    rc = spawn(main, DP * PP * TP, bind_cpu=True)
    print("parallel_3d: " + ("OK" if rc == 0 else "FAILED"))
    sys.exit(rc)
