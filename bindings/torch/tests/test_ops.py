"""Every c10d operation x dtype x reduce op, with exact expected values, at 2, 3 and 4 ranks.

One process group per world size runs the whole matrix (starting ranks costs more than the
operations); each rank collects every mismatch and the test reports them all.
"""

import pytest
import torch
import torch.distributed as dist

import values as V
from harness import run_ranks


class Check:
    def __init__(self, rank):
        self.rank = rank
        self.failures = []

    def same(self, what, got, want):
        if not V.same(got, want):
            self.failures.append(f"rank {self.rank}: {what}: got {got.tolist()} want {want.tolist()}")

    def done(self):
        assert not self.failures, "\n".join(self.failures[:20]) + f"\n({len(self.failures)} in all)"


def reductions(rank, world, c):
    root = world - 1
    for dtype in V.REAL + V.COMPLEX + [torch.bool]:
        for op in V.OPS:
            if not V.supports(dtype, op):
                continue
            for tensor_factor in [False, True] if op == "PREMUL_SUM" else [False]:
                tag = f"{dtype} {op}{' (tensor factor)' if tensor_factor else ''}"
                want = V.reference(world, op, dtype)
                mine = V.make(rank, world, op, dtype)
                x = mine.clone()
                dist.all_reduce(x, op=V.reduce_op(op, tensor_factor=tensor_factor))
                c.same(f"all_reduce {tag}", x, want)

                x = mine.clone()
                dist.reduce(x, dst=root, op=V.reduce_op(op, tensor_factor=tensor_factor))
                c.same(f"reduce {tag}", x, want if rank == root else mine)

                # reduce_scatter: block b of rank r's input is make(r)[shifted by b].
                ins = [V.make(rank, world, op, dtype).roll(b) for b in range(world)]
                want_rs = want.roll(rank)
                out = torch.empty_like(mine)
                dist.reduce_scatter_tensor(out, torch.cat(ins), op=V.reduce_op(op))
                c.same(f"reduce_scatter_tensor {tag}", out, want_rs)
                out = torch.empty_like(mine)
                dist.reduce_scatter(out, ins, op=V.reduce_op(op))
                c.same(f"reduce_scatter {tag}", out, want_rs)
        # Coalesced: several tensors in one loom group.
        op = "MAX"
        if V.supports(dtype, op):
            xs = [V.make(rank, world, op, dtype, n) for n in (1, 5, 33)]
            with dist._coalescing_manager(async_ops=True) as cm:
                for x in xs:
                    dist.all_reduce(x, op=dist.ReduceOp.MAX)
            cm.wait()
            for x, n in zip(xs, (1, 5, 33)):
                c.same(f"coalesced all_reduce {dtype} n={n}", x, V.reference(world, op, dtype, n=n))
            wants = [V.reference(world, op, dtype, n=n) for n in (2, 7)]
            xs = [V.make(rank, world, op, dtype, n) for n in (2, 7)]
            dist.distributed_c10d.all_reduce_coalesced(xs, op=dist.ReduceOp.MAX)
            for x, w in zip(xs, wants):
                c.same(f"all_reduce_coalesced {dtype}", x, w)


def movements(rank, world, c):
    def data(r, dtype, n=V.N):
        return V.make(r, world, "SUM", dtype, n) if dtype != torch.int16 else (
            torch.arange(n, dtype=torch.int16) * (r + 1))

    for dtype in V.REAL + V.MOVE_ONLY:
        mine = data(rank, dtype)
        for root in range(world):
            x = mine.clone()
            dist.broadcast(x, src=root)
            c.same(f"broadcast {dtype} root {root}", x, data(root, dtype))
        everyone = [data(r, dtype) for r in range(world)]
        out = torch.empty(world * V.N, dtype=dtype)
        dist.all_gather_into_tensor(out, mine)
        c.same(f"all_gather_into_tensor {dtype}", out, torch.cat(everyone))
        outs = [torch.empty_like(mine) for _ in range(world)]
        dist.all_gather(outs, mine)
        for r in range(world):
            c.same(f"all_gather {dtype} from {r}", outs[r], everyone[r])
        # all_gather_coalesced: one output list per rank, one tensor per input (sizes differ,
        # one is empty).
        ins = [data(rank, dtype, n) for n in (3, 0, 7)]
        outs = [[torch.empty_like(t) for t in ins] for _ in range(world)]
        dist.all_gather_coalesced(outs, ins)
        for r in range(world):
            for i, n in enumerate((3, 0, 7)):
                c.same(f"all_gather_coalesced {dtype} input {i} from {r}", outs[r][i],
                       data(r, dtype, n))
        # gather / scatter at the last rank
        root = world - 1
        outs = [torch.empty_like(mine) for _ in range(world)] if rank == root else None
        dist.gather(mine, outs, dst=root)
        if rank == root:
            for r in range(world):
                c.same(f"gather {dtype} from {r}", outs[r], everyone[r])
        got = torch.empty_like(mine)
        dist.scatter(got, [data(r, dtype) for r in range(world)] if rank == root else None, src=root)
        c.same(f"scatter {dtype}", got, data(rank, dtype))
        # all_to_all_single, equal blocks: block p of rank r is data(r)[shifted by p].
        blocks = [data(rank, dtype, 3).roll(p) for p in range(world)]
        out = torch.empty(world * 3, dtype=dtype)
        dist.all_to_all_single(out, torch.cat(blocks))
        c.same(f"all_to_all_single {dtype}", out,
               torch.cat([data(r, dtype, 3).roll(rank) for r in range(world)]))
        # uneven: rank r sends (r + p) % 3 + 1 rows of 2 to rank p
        rows = lambda r, p: (r + p) % 3 + 1  # noqa: E731
        send = [data(rank, dtype, 2 * rows(rank, p)).reshape(-1, 2) for p in range(world)]
        out = torch.empty(sum(rows(r, rank) for r in range(world)), 2, dtype=dtype)
        dist.all_to_all_single(out, torch.cat(send),
                               output_split_sizes=[rows(r, rank) for r in range(world)],
                               input_split_sizes=[rows(rank, p) for p in range(world)])
        c.same(f"all_to_all_single uneven {dtype}", out, torch.cat(
            [data(r, dtype, 2 * rows(r, rank)).reshape(-1, 2) for r in range(world)]))
        # list all_to_all, different sizes per peer
        ins = [data(rank, dtype, p + 1) for p in range(world)]
        outs = [torch.empty(rank + 1, dtype=dtype) for _ in range(world)]
        dist.all_to_all(outs, ins)
        for r in range(world):
            c.same(f"all_to_all {dtype} from {r}", outs[r], data(r, dtype, rank + 1))
        # send / recv around the ring (even ranks send first, so any loom matches them)
        nxt, prv = (rank + 1) % world, (rank - 1) % world
        got = torch.empty_like(mine)
        if rank % 2 == 0:
            dist.send(mine, nxt, tag=7)
            dist.recv(got, prv, tag=7)
        else:
            dist.recv(got, prv, tag=7)
            dist.send(mine, nxt, tag=7)
        c.same(f"send/recv {dtype}", got, data(prv, dtype))
        dist.barrier()


def edge_cases(rank, world, c):
    # Empty tensors and a large one (several loom chunks).
    x = torch.empty(0)
    dist.all_reduce(x)
    c.same("all_reduce of 0 elements", x, torch.empty(0))
    big = torch.full((3 << 20,), float(rank + 1))
    dist.all_reduce(big)
    c.same("all_reduce of 12 MiB", big, torch.full((3 << 20,), float(world * (world + 1) // 2)))
    # Non-contiguous tensors: handled through a contiguous copy, results written back.
    base = torch.arange(24, dtype=torch.float32).reshape(4, 6) * (rank + 1)
    t = base.t()  # transposed view
    dist.all_reduce(t)
    want = (torch.arange(24, dtype=torch.float32).reshape(4, 6) * (world * (world + 1) // 2)).t()
    c.same("all_reduce of a transposed view", t, want)
    c.same("... written into its base", base, want.t())
    strided = torch.zeros(10)
    view = strided[::2]
    if rank == 0:
        view.copy_(torch.arange(5.0))
    dist.broadcast(view, src=0)
    c.same("broadcast into a strided view", strided,
           torch.tensor([0.0, 0, 1, 0, 2, 0, 3, 0, 4, 0]))
    out = torch.zeros(world, 4)[:, ::2]  # non-contiguous output
    dist.all_gather_into_tensor(out, torch.full((2,), float(rank)))
    c.same("all_gather into a strided output", out,
           torch.arange(world, dtype=torch.float32).repeat_interleave(2).reshape(world, 2))


def body(rank, world):
    c = Check(rank)
    reductions(rank, world, c)
    movements(rank, world, c)
    edge_cases(rank, world, c)
    c.done()


@pytest.mark.parametrize("world", [2, 3, 4])
def test_every_op_dtype_and_reduce_op(world):
    run_ranks(body, world, timeout=600)
