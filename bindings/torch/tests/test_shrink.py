"""torch.distributed.shrink_group on loom: after a rank is SIGKILLed, the survivors get loom's
error, shrink the group with SHRINK_ABORT (loomCommShrink) and go on, renumbered in order, on a
group without the dead rank; without a failure SHRINK_DEFAULT leaves out a live rank."""

import os
import signal

import torch
import torch.distributed as dist

from torch.distributed.distributed_c10d import SHRINK_ABORT

from harness import run_ranks


def killed_rank_body(rank, world):
    x = torch.full((1000,), float(rank + 1))
    dist.all_reduce(x)
    assert torch.equal(x, torch.full((1000,), 10.0))  # 1 + 2 + 3 + 4
    if rank == 2:
        os.kill(os.getpid(), signal.SIGKILL)
    try:
        dist.all_reduce(torch.ones(1000))
    except dist.DistBackendError as e:
        assert "rank 2" in str(e), f"the error does not name rank 2: {e}"
    else:
        raise AssertionError("all_reduce with a dead rank did not raise")
    group = dist.shrink_group([2], shrink_flags=SHRINK_ABORT)
    # Survivors 0, 1, 3 become 0, 1, 2; the shrunk default group is the new default group.
    assert group.size() == 3 and group.rank() == [0, 1, None, 2][rank]
    assert dist.get_world_size() == 3 and dist.get_rank() == group.rank()
    y = torch.full((1000,), float(rank + 1))
    dist.all_reduce(y)
    assert torch.equal(y, torch.full((1000,), 7.0)), y[:4]  # 1 + 2 + 4
    z = torch.full((5,), float(group.rank()))
    dist.broadcast(z, src=2)  # global rank 3
    assert torch.equal(z, torch.full((5,), 2.0))


def test_shrink_after_sigkill():
    run_ranks(killed_rank_body, 4, expect_exit={2: -signal.SIGKILL}, pg_timeout=60, timeout=120)


def live_rank_body(rank, world):
    if rank == 0:
        return  # left out while alive; the others do not wait for it
    group = dist.shrink_group([0])
    assert group.size() == 2 and group.rank() == rank - 1
    y = torch.full((64,), float(rank))
    dist.all_reduce(y)
    assert torch.equal(y, torch.full((64,), 3.0))


def test_shrink_default_leaves_out_a_live_rank():
    run_ranks(live_rank_body, 3, pg_timeout=60, timeout=120)
