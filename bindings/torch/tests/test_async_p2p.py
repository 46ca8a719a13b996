"""Asynchronous operations, futures, and point-to-point in every posting and waiting order."""

import itertools
import time

import pytest
import torch
import torch.distributed as dist

from harness import run_ranks


def _poll(done, what, seconds=30.0):
    """Spins (never calling wait) until done() holds: futures must complete by themselves."""
    deadline = time.monotonic() + seconds
    while not done():
        assert time.monotonic() < deadline, f"{what} did not complete without a wait()"
        time.sleep(0.001)


def futures_body(rank, world):
    n = world * (world + 1) // 2
    xs = [torch.full((1000,), float(rank + 1)) for _ in range(8)]
    works = [dist.all_reduce(x, async_op=True) for x in xs]
    for w, x in zip(works, xs):
        _poll(w.is_completed, "all_reduce's Work")
        assert w.is_success()
        assert torch.equal(x, torch.full((1000,), float(n)))
    # A future's value is the list of output tensors; then() callbacks run on completion.
    x = torch.full((10,), float(rank + 1))
    fut = dist.all_reduce(x, async_op=True).get_future()
    chained = fut.then(lambda f: f.value()[0] * 2)
    _poll(chained.done, "a then() callback")
    assert torch.equal(chained.value(), torch.full((10,), 2.0 * n))
    # Every operation kind has a future (gloo gives reduce_scatter none).
    out = torch.empty(4)
    fut = dist.reduce_scatter_tensor(out, torch.ones(4 * world), async_op=True).get_future()
    _poll(fut.done, "reduce_scatter_tensor's future")
    assert torch.equal(fut.value()[0], torch.full((4,), float(world)))
    out = torch.empty(3 * world)
    fut = dist.all_gather_into_tensor(out, torch.full((3,), float(rank)),
                                      async_op=True).get_future()
    _poll(fut.done, "all_gather_into_tensor's future")
    # Work in flight overlaps with compute on this thread.
    big = torch.ones(1 << 22)
    w = dist.all_reduce(big, async_op=True)
    torch.mm(torch.ones(256, 256), torch.ones(256, 256))
    w.wait()
    assert torch.equal(big, torch.full((1 << 22,), float(world)))
    assert dist.get_backend() == "loom"
    seq = dist.distributed_c10d._get_default_group()._get_backend(
        torch.device("cpu"))._get_sequence_number_for_group()
    assert seq > 0


def entry_point_body(rank, world):
    import sys

    assert dist.get_backend() == "loom"
    assert "loom_torch" in sys.modules  # torch loaded it through the entry point
    x = torch.ones(3)
    dist.all_reduce(x)
    assert torch.equal(x, torch.full((3,), float(world)))


def test_found_through_the_entry_point():
    # Runs against the installed package: the entry point lives in its metadata.
    run_ranks(entry_point_body, 2, import_package=False)


def test_futures_complete_by_themselves():
    run_ranks(futures_body, 3)


def batch_body(rank, world):
    # batch_isend_irecv: one loom group, every rank posting recvs first.
    peers = [p for p in range(world) if p != rank]
    got = {p: torch.empty(5, dtype=torch.int64) for p in peers}
    ops = [dist.P2POp(dist.irecv, got[p], p) for p in peers]
    ops += [dist.P2POp(dist.isend, torch.full((5,), rank * 10 + p), p) for p in peers]
    for w in dist.batch_isend_irecv(ops):
        w.wait()
    for p in peers:
        assert torch.equal(got[p], torch.full((5,), p * 10 + rank)), (p, got[p])


@pytest.mark.parametrize("world", [2, 3])
def test_batch_isend_irecv_posts_receives_first(world):
    run_ranks(batch_body, world)


ORDERS = list(itertools.product(["send-first", "recv-first"], repeat=2))


def p2p_body(rank, world, order, wait_reversed):
    """Two ranks exchange tensors of several sizes; each rank posts in its own order."""
    peer = 1 - rank
    sizes = [1, 1000, 1 << 20]  # up to 4 MiB: more than any transport's buffering
    mine = [torch.full((n,), float(rank + 1)) for n in sizes]
    got = [torch.empty(n) for n in sizes]
    works = []
    for m, g in zip(mine, got):
        pair = [dist.isend(m, peer), dist.irecv(g, peer)]
        works += pair if order[rank] == "send-first" else pair[::-1]
    for w in reversed(works) if wait_reversed else works:
        w.wait()
    for g in got:
        assert torch.equal(g, torch.full(g.shape, float(peer + 1)))


@pytest.mark.parametrize("order", ORDERS, ids=["-".join(o) for o in ORDERS])
@pytest.mark.parametrize("wait_reversed", [False, True], ids=["wait-in-order", "wait-reversed"])
def test_isend_irecv_any_posting_order(order, wait_reversed):
    # Each send and receive runs on its own loom host stream, and loom progresses independent
    # point-to-point operations of one communicator together: a rank's blocked irecv never
    # holds up its isend. The short group timeout turns a deadlock into a failure.
    run_ranks(p2p_body, 2, order, wait_reversed, timeout=60, pg_timeout=20)
