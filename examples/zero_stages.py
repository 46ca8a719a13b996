"""ZeRO stages 1, 2 and 3 with reduce_scatter_tensor and all_gather_into_tensor, and FSDP2.

    python3 examples/zero_stages.py [--world 2] [--steps 3]

Data parallelism keeps on every rank the parameters (P bytes), the gradients (G) and the
optimizer state (O: Adam's two moments). ZeRO shards them over the N ranks, stage by stage;
each rank owns 1/N of every parameter (flattened), as FSDP2 does:
- ZeRO-1 shards the optimizer state. After backward, reduce_scatter_tensor sums the gradients
  and leaves each rank the sum of its own slice; the rank updates that slice of the parameters
  with its slice of Adam's state; all_gather_into_tensor rebuilds the whole parameters.
- ZeRO-2 shards the gradients too: a hook on each parameter reduce-scatters its gradient as
  soon as backward has produced it and drops the whole gradient.
- ZeRO-3 shards the parameters too: forward all-gathers each weight just before it is used
  (an autograd Function whose backward reduce-scatters the weight's gradient), so between
  steps a rank holds only its slices.
- FSDP2 (torch.distributed.fsdp.fully_shard) does what ZeRO-3 does, on the loom backend.
Each stage prints the bytes of parameters, gradients and optimizer state one rank holds after a
step, counted from its tensors; the example checks them against theory exactly (every
tensor's size is a multiple of N, so no padding): DP P+G+O, ZeRO-1 P+G+O/N, ZeRO-2 P+(G+O)/N,
ZeRO-3 and FSDP2 (P+G+O)/N. (The whole weights ZeRO-3 gathers live only from a layer's use in
forward to its backward.)

Every stage trains the same float32 MLP for --steps Adam steps, and its final parameters
are compared with plain data parallelism computed in one process (each rank's gradients
averaged, Adam on the whole parameters). The Adam update is element-wise, so sharding alone
cannot change a bit; only the order in which the ranks' gradients are added can, from the
second step on when the weights are no longer small dyadic numbers. Two ranks add in one order
only (a+b = b+a): the result is bit-exact. With more ranks the stated tolerance applies:
|difference| <= 1e-5 (float32). A mismatch exits non-zero.
"""

import argparse
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.func import functional_call

from launch import spawn

LR, B1, B2, EPS = 1e-2, 0.9, 0.999, 1e-8
TOLERANCE = 1e-5
BATCH = 8


def make_model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(),
                         nn.Linear(64, 16))


def batch(step, rank):
    g = torch.Generator().manual_seed(1000 * step + rank)
    return torch.randn(BATCH, 16, generator=g), torch.randn(BATCH, 16, generator=g)


def loss_fn(y, t):
    return (y - t).square().mean()


class Adam:
    """Adam on flat tensors, element-wise: a shard of a tensor updates exactly as the whole."""

    def __init__(self, params):
        self.params = params
        self.m = [torch.zeros_like(p) for p in params]
        self.v = [torch.zeros_like(p) for p in params]
        self.t = 0

    def step(self, grads):
        self.t += 1
        for p, g, m, v in zip(self.params, grads, self.m, self.v):
            m.mul_(B1).add_(g * (1 - B1))
            v.mul_(B2).add_(g * g * (1 - B2))
            m_hat = m / (1 - B1 ** self.t)
            v_hat = v / (1 - B2 ** self.t)
            p.sub_(LR * m_hat / (v_hat.sqrt() + EPS))

    def state_bytes(self):
        return sum(t.numel() * t.element_size() for t in self.m + self.v)


def nbytes(tensors):
    return sum(t.numel() * t.element_size() for t in tensors if t is not None)


def reference(world, steps):
    """Plain data parallelism in one process: the mean of the ranks' gradients, Adam."""
    model = make_model()
    params = [p for p in model.parameters()]
    opt = Adam([p.data.view(-1) for p in params])
    for step in range(steps):
        for p in params:
            p.grad = None
        for r in range(world):
            x, t = batch(step, r)
            loss_fn(model(x), t).backward()  # accumulates: rank 0's, then + rank 1's ...
        opt.step([p.grad.view(-1) / world for p in params])
    return [p.detach() for p in params], nbytes(params), nbytes(params), opt.state_bytes()


def my_slice(flat, rank, world):
    n = flat.numel() // world
    return flat[rank * n:(rank + 1) * n]


def reduce_scatter_mean(flat_grad, world):
    out = torch.empty(flat_grad.numel() // world, dtype=flat_grad.dtype)
    dist.reduce_scatter_tensor(out, flat_grad.contiguous())
    return out.div_(world)


def all_gather_into(full_flat, shard):
    dist.all_gather_into_tensor(full_flat, shard.clone())  # input must not alias the output


def zero_1_or_2(rank, world, steps, stage):
    model = make_model()
    params = list(model.parameters())
    opt = Adam([my_slice(p.data.view(-1), rank, world) for p in params])  # views: in place
    grad_shards = {}
    if stage == 2:
        def reduce_now(p):  # backward produced p's whole gradient: keep only our slice
            grad_shards[p] = reduce_scatter_mean(p.grad.view(-1), world)
            p.grad = None

        for p in params:
            p.register_post_accumulate_grad_hook(reduce_now)
    for step in range(steps):
        x, t = batch(step, rank)
        loss_fn(model(x), t).backward()
        if stage == 1:  # the whole gradients stay; our slice of each becomes the mean
            for p in params:
                mine = my_slice(p.grad.view(-1), rank, world)
                grad_shards[p] = mine.copy_(reduce_scatter_mean(p.grad.view(-1), world))
        opt.step([grad_shards[p] for p in params])
        held = [p.grad for p in params] if stage == 1 else list(grad_shards.values())
        memory = (nbytes(params), nbytes(held), opt.state_bytes())
        for p in params:
            all_gather_into(p.data.view(-1), my_slice(p.data.view(-1), rank, world))
            if stage == 1:
                p.grad = None
    return [p.detach() for p in params], memory


class GatherParameter(torch.autograd.Function):
    """All-gathers a parameter from its shards forward; reduce-scatters its gradient back."""

    @staticmethod
    def forward(ctx, shard, shape, world):
        ctx.world = world
        full = torch.empty(shard.numel() * world, dtype=shard.dtype)
        dist.all_gather_into_tensor(full, shard.detach())
        return full.view(shape)

    @staticmethod
    def backward(ctx, grad):
        return reduce_scatter_mean(grad.reshape(-1), ctx.world), None, None


def zero_3(rank, world, steps):
    model = make_model()
    shapes = {name: p.shape for name, p in model.named_parameters()}
    shards = {name: my_slice(p.detach().view(-1), rank, world).clone().requires_grad_()
              for name, p in model.named_parameters()}
    del model  # from here on this rank holds its slices only (the module is a template)
    template = make_model().to("meta")
    opt = Adam([s.data for s in shards.values()])
    for step in range(steps):
        x, t = batch(step, rank)
        full = {n: GatherParameter.apply(s, shapes[n], world) for n, s in shards.items()}
        loss_fn(functional_call(template, full, (x,)), t).backward()
        del full
        opt.step([s.grad for s in shards.values()])
        memory = (nbytes(shards.values()), nbytes([s.grad for s in shards.values()]),
                  opt.state_bytes())
        for s in shards.values():
            s.grad = None
    params = []
    for n, s in shards.items():
        full = torch.empty(s.numel() * world)
        all_gather_into(full, s.detach())
        params.append(full.view(shapes[n]))
    return params, memory


def fsdp2(rank, world, steps):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    model = make_model()
    mesh = init_device_mesh("cpu", (world,))
    for layer in model:
        if isinstance(layer, nn.Linear):
            fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    params = list(model.parameters())  # DTensors: each rank holds dim-0 slices
    for step in range(steps):
        x, t = batch(step, rank)
        loss_fn(model(x), t).backward()
        with torch.no_grad():  # the same Adam on the local slices (FSDP2 already averaged)
            if step == 0:
                opt = Adam([p.to_local() for p in params])
            opt.step([p.grad.to_local() for p in params])
        memory = (nbytes([p.to_local() for p in params]),
                  nbytes([p.grad.to_local() for p in params]), opt.state_bytes())
        for p in params:
            p.grad = None
    return [p.full_tensor().detach() for p in params], memory


def compare(what, got, want, world):
    diff = max((a - b).abs().max().item() for a, b in zip(got, want))
    exact = all(torch.equal(a, b) for a, b in zip(got, want))
    if not exact and (world == 2 or diff > TOLERANCE):
        raise AssertionError(f"{what}: final parameters differ from plain data parallelism by "
                             f"{diff:.3g}" + (" (2 ranks must match exactly)"
                                              if world == 2 else f" > {TOLERANCE}"))
    return "bit-exact" if exact else f"max diff {diff:.1e}"


def main(rank, world, steps):
    ref_params, P, G, O = reference(world, steps)
    n = sum(p.numel() for p in ref_params)
    theory = {"data parallel": (P, G, O), "ZeRO-1": (P, G, O // world),
              "ZeRO-2": (P, G // world, O // world),
              "ZeRO-3": (P // world, G // world, O // world)}
    theory["FSDP2"] = theory["ZeRO-3"]
    if rank == 0:
        print(f"  model: {n} float32 parameters; {steps} Adam steps; bytes held by each rank "
              f"after a step")
        print(f"  {'stage':14s} {'params':>9s} {'grads':>9s} {'optimizer':>10s} "
              f"{'total':>9s}  vs data parallel")
        print(f"  {'data parallel':14s} {P:9d} {G:9d} {O:10d} {P + G + O:9d}  "
              "(the single-process reference)")
    runs = [("ZeRO-1", lambda: zero_1_or_2(rank, world, steps, 1)),
            ("ZeRO-2", lambda: zero_1_or_2(rank, world, steps, 2)),
            ("ZeRO-3", lambda: zero_3(rank, world, steps)),
            ("FSDP2", lambda: fsdp2(rank, world, steps))]
    for name, run in runs:
        params, memory = run()
        verdict = compare(name, params, ref_params, world)
        if memory != theory[name]:
            raise AssertionError(f"{name} on rank {rank}: holds (params, grads, optimizer) = "
                                 f"{memory} bytes, theory says {theory[name]}")
        # Every rank holds the same: gather the figures to be sure.
        everyone = torch.empty(world, 3, dtype=torch.int64)
        dist.all_gather_into_tensor(everyone, torch.tensor(memory))
        assert all(tuple(row) == memory for row in everyone.tolist()), everyone
        if rank == 0:
            total = sum(memory)
            print(f"  {name:14s} {memory[0]:9d} {memory[1]:9d} {memory[2]:10d} {total:9d}  "
                  f"{total / (P + G + O):5.3f}x, params {verdict}")
    if rank == 0:
        print(f"  every rank's figures equal the theory for N = {world} exactly")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--world", type=int, default=2, help="ranks (a divisor of 16)")
    parser.add_argument("--steps", type=int, default=3)
    args = parser.parse_args()
    print(f"zero_stages: {args.world} ranks on the loom backend")
    rc = spawn(main, args.world, args.steps)
    print("zero_stages: " + ("OK" if rc == 0 else "FAILED"))
    sys.exit(rc)
