"""Errors reach Python as exceptions with loom's message: a dead peer, a mismatched call, a
timeout, wait(timeout); and what loom cannot do is refused with a message saying so."""

import os
import time
from datetime import timedelta

import pytest
import torch
import torch.distributed as dist

from harness import run_ranks


def expect_error(fn, *words, kind=Exception):
    try:
        fn()
    except kind as e:  # noqa: PERF203
        text = str(e)
        for w in words:
            assert w in text, f"{w!r} not in the message: {text}"
        return text
    raise AssertionError(f"no error; expected one mentioning {words}")


def killed_peer_body(rank, world):
    dist.barrier()
    if rank == world - 1:
        os._exit(3)  # dies without a word
    x = torch.ones(1000)
    expect_error(lambda: dist.all_reduce(x), f"rank {world - 1}", kind=dist.DistBackendError)
    os._exit(0)  # the group is broken: nothing to destroy collectively


def test_killed_peer_is_named():
    run_ranks(killed_peer_body, 3, expect_exit={2: 3}, pg_timeout=120, timeout=150)


def mismatch_body(rank, world):
    x = torch.ones(4 + rank)
    expect_error(lambda: dist.all_reduce(x), "rank", kind=dist.DistBackendError)
    os._exit(0)


def test_mismatched_call():
    run_ranks(mismatch_body, 2, pg_timeout=30, timeout=90)


def timeout_body(rank, world):
    if rank == 1:
        time.sleep(12)  # past the group's 4 s timeout
        os._exit(0)
    # Rank 1 is alive but absent: the error is loom's timeout (not a peer's death), and names it.
    expect_error(lambda: dist.all_reduce(torch.ones(10)), "timed out", "rank 1",
                 kind=dist.DistBackendError)
    os._exit(0)


def test_timeout_names_the_missing_rank():
    run_ranks(timeout_body, 2, pg_timeout=4, timeout=60)


def wait_timeout_body(rank, world):
    if rank == 1:
        time.sleep(6)
        os._exit(0)
    work = dist.all_reduce(torch.ones(10), async_op=True)
    expect_error(lambda: work.wait(timeout=timedelta(seconds=1)), "did not finish within")
    expect_error(lambda: dist.all_reduce(torch.ones(1)), "aborted")
    os._exit(0)


def test_wait_timeout_aborts():
    run_ranks(wait_timeout_body, 2, pg_timeout=60, timeout=60)


def exit_without_destroy_body(rank, world):
    dist.all_reduce(torch.ones(1))
    if rank == 1:
        os._exit(0)  # leaves without destroy_process_group
    time.sleep(1)
    dist.destroy_process_group()  # must return, not wait for rank 1 forever


def test_exit_without_destroy_does_not_hang_others():
    run_ranks(exit_without_destroy_body, 2, pg_timeout=20, timeout=60)


def refusals_body(rank, world):
    x = torch.ones(4)
    for op in (dist.ReduceOp.BAND, dist.ReduceOp.BOR, dist.ReduceOp.BXOR):
        expect_error(lambda: dist.all_reduce(x, op=op), "bitwise", kind=ValueError)
    expect_error(lambda: dist.all_reduce(torch.ones(3, dtype=torch.int16)), "torch.int16",
                 "no arithmetic", kind=ValueError)
    expect_error(lambda: dist.all_reduce(torch.ones(3, dtype=torch.complex64),
                                         op=dist.ReduceOp.MAX), "complex", kind=ValueError)
    expect_error(lambda: dist.all_reduce(torch.ones(3, dtype=torch.bool), op=dist.ReduceOp.AVG),
                 "bool", kind=ValueError)
    expect_error(lambda: dist.all_reduce(torch.ones(3).to_sparse()), "dense")
    expect_error(lambda: dist.recv(torch.ones(3)), "any source")
    # The group is still usable after refused calls: nothing reached loom.
    y = torch.ones(2)
    dist.all_reduce(y)
    assert torch.equal(y, torch.full((2,), float(world)))


def test_refusals_are_clear():
    run_ranks(refusals_body, 2)


def cuda_body(rank, world):
    expect_error(lambda: dist.all_reduce(torch.ones(3, device="cuda")),
                 "CUDA communicators are not available", kind=ValueError)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device to make a tensor")
def test_cuda_tensors_are_refused():
    run_ranks(cuda_body, 2)
