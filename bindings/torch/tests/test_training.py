"""DDP and FSDP2 training on loom, compared bit for bit with a single-process reference.

The model is float64 with weights that are multiples of 1/8, inputs and targets are small
integers and the loss is linear in the outputs, so every gradient, every sum of gradients (in
any order) and every SGD step with lr = 1/16 is exact: the distributed result must equal the
reference exactly, whatever order loom reduces in.
"""

import copy

import pytest
import torch
import torch.distributed as dist
import torch.nn as nn

from harness import run_ranks

STEPS = 2  # exact: every step multiplies the bits that gradients need
BATCH = 4  # per rank
LR = 1.0 / 16


def make_model():
    g = torch.Generator().manual_seed(0)
    m = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 4))
    m = m.double()
    with torch.no_grad():
        for p in m.parameters():
            p.copy_(torch.randint(-4, 5, p.shape, generator=g).double() / 8)
    return m


def batch(step, rank, micro=0):
    g = torch.Generator().manual_seed(1000 * step + 10 * rank + micro)
    x = torch.randint(-2, 3, (BATCH, 8), generator=g).double()
    t = torch.randint(-1, 2, (BATCH, 4), generator=g).double()
    return x, t


def loss_fn(model, x, t):
    return (model(x) * t).sum()


def reference_step(ref, opt, step, world, micros):
    """The same step on one process: the mean over ranks of each rank's summed loss."""
    opt.zero_grad()
    for micro in range(micros):
        for r in range(world):
            x, t = batch(step, r, micro)
            (loss_fn(ref, x, t) / world).backward()
    opt.step()


def check_equal(model_params, ref, what):
    for (name, p), q in zip(model_params, ref.parameters()):
        assert torch.equal(p, q), f"{what}: parameter {name} differs by {(p - q).abs().max()}"


def ddp_body(rank, world, hook):
    from torch.nn.parallel import DistributedDataParallel as DDP

    ref = make_model()
    ref_opt = torch.optim.SGD(ref.parameters(), lr=LR)
    model = DDP(make_model(), bucket_cap_mb=0.002)  # about 2 KB: several buckets
    if hook == "future-hook":
        def allreduce_then_divide(state, bucket):
            fut = dist.all_reduce(bucket.buffer(), async_op=True).get_future()
            return fut.then(lambda f: f.value()[0] / world)

        model.register_comm_hook(None, allreduce_then_divide)
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    for step in range(STEPS):
        micros = 2 if step == 1 else 1  # step 1 accumulates one micro-batch under no_sync
        opt.zero_grad()
        for micro in range(micros):
            x, t = batch(step, rank, micro)
            if micro < micros - 1:
                with model.no_sync():
                    loss_fn(model, x, t).backward()
            else:
                loss_fn(model, x, t).backward()
        opt.step()
        reference_step(ref, ref_opt, step, world, micros)
        check_equal(model.module.named_parameters(), ref, f"DDP step {step} on rank {rank}")


@pytest.mark.parametrize("hook", ["default-hook", "future-hook"])
@pytest.mark.parametrize("world", [2, 4])
def test_ddp_matches_single_process(world, hook):
    run_ranks(ddp_body, world, hook)


def fsdp_body(rank, world):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    ref = make_model()
    ref_opt = torch.optim.SGD(ref.parameters(), lr=LR)
    model = copy.deepcopy(ref)
    mesh = init_device_mesh("cpu", (world,))
    for layer in model:
        if isinstance(layer, nn.Linear):
            fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    for step in range(STEPS):
        opt.zero_grad()
        x, t = batch(step, rank)
        loss_fn(model, x, t).backward()
        opt.step()
        reference_step(ref, ref_opt, step, world, 1)
        full = [(n, p.full_tensor()) for n, p in model.named_parameters()]
        check_equal(full, ref, f"FSDP2 step {step} on rank {rank}")


@pytest.mark.parametrize("world", [2, 4])
def test_fsdp2_matches_single_process(world):
    run_ranks(fsdp_body, world)
