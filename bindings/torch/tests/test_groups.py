"""Subgroups: new_group (a store rendezvous per group) and split_group (loomCommSplit)."""

import torch
import torch.distributed as dist

from harness import run_ranks


def new_group_body(rank, world):
    evens = dist.new_group([r for r in range(world) if r % 2 == 0])
    odds = dist.new_group([r for r in range(world) if r % 2 == 1])
    pair = dist.new_group([world - 1, 0])  # torch orders group ranks by global rank
    mine = evens if rank % 2 == 0 else odds
    members = [r for r in range(world) if r % 2 == rank % 2]
    x = torch.tensor([float(rank)])
    dist.all_reduce(x, group=mine)
    assert x.item() == sum(members), (rank, x)
    # Group ranks are positions in the member list; src/dst take global ranks.
    y = torch.tensor([float(rank)])
    dist.broadcast(y, src=members[-1], group=mine)
    assert y.item() == members[-1]
    if rank in (0, world - 1):
        z = torch.tensor([rank + 1.0])
        dist.all_reduce(z, group=pair)
        assert z.item() == world + 1.0
        out = [torch.empty(1) for _ in range(2)]
        dist.all_gather(out, torch.tensor([float(rank)]), group=pair)
        assert [o.item() for o in out] == [0.0, world - 1.0]
    # The default group still works after (and between) the subgroups.
    w = torch.ones(3)
    dist.all_reduce(w)
    assert torch.equal(w, torch.full((3,), float(world)))
    dist.destroy_process_group(evens if rank % 2 == 0 else odds)


def test_new_group_4_ranks():
    run_ranks(new_group_body, 4)


def test_new_group_3_ranks():
    run_ranks(new_group_body, 3)


def test_new_group_split_from_bound_default_group():
    # With the default group bound to a device, torch splits new groups from it: members
    # through the creator's split_from, the others through perform_nocolor_split.
    run_ranks(new_group_body, 4, bind_cpu=True)


def split_body(rank, world):
    low = [r for r in range(world) if r < world // 2]
    high = [r for r in range(world) if r >= world // 2]
    sub = dist.split_group(split_ranks=[low, high])
    assert sub is not None
    x = torch.tensor([float(rank)])
    dist.all_reduce(x, group=sub)
    assert x.item() == sum(low if rank in low else high)


def test_split_group():
    run_ranks(split_body, 4)
