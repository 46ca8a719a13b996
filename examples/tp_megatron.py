"""Tensor parallelism, Megatron style: a column-parallel then a row-parallel linear layer.

    python3 examples/tp_megatron.py [--world 2]

The MLP block Y = relu(X W1^T + b1) W2^T + b2 is split over the ranks without gathering
the hidden activation:
- W1 (and b1) by rows, its output features: the column-parallel layer. Each rank computes its
  slice of the hidden layer from the whole input.
- W2 by columns, its input features: the row-parallel layer. Each rank multiplies its slice of
  the hidden layer by its slice of W2, which gives a partial sum of Y.
Two conjugate autograd Functions carry the communication (Megatron-LM's f and g):
- f, before the column-parallel layer: identity forward, all_reduce of dL/dX backward (each
  rank's slice contributes to the gradient of the whole input);
- g, after the row-parallel layer: all_reduce of the partial sums forward, identity backward.
One all_reduce forward and one backward per block. A column-parallel layer on its own
(gather_output) all-gathers its output forward and keeps its own slice of the gradient back.

Checks, on every rank, against the unsharded block computed in the same process: the output,
dL/dX, and the gradients of every shard equal the matching slices of the reference's, bit for
bit (weights in multiples of 1/8, small integer inputs, a loss linear in the outputs: no sum
rounds, so the order of loom's additions cannot change a bit). A mismatch exits non-zero.
"""

import argparse
import sys

import torch
import torch.distributed as dist

from launch import spawn

HIDDEN = 8
FFN = 32  # the hidden layer of the block, split over the ranks
BATCH = 4


class CopyToParallel(torch.autograd.Function):
    """f: identity forward, all_reduce backward."""

    @staticmethod
    def forward(ctx, x):
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        grad = grad.clone()
        dist.all_reduce(grad)
        return grad


class ReduceFromParallel(torch.autograd.Function):
    """g: all_reduce forward, identity backward."""

    @staticmethod
    def forward(ctx, x):
        x = x.clone()
        dist.all_reduce(x)
        return x

    @staticmethod
    def backward(ctx, grad):
        return grad


class GatherFromParallel(torch.autograd.Function):
    """all_gather of the last dimension forward, this rank's slice of the gradient backward."""

    @staticmethod
    def forward(ctx, x):
        world = dist.get_world_size()
        out = torch.empty((world,) + x.shape, dtype=x.dtype)
        dist.all_gather_into_tensor(out, x.contiguous())
        return torch.cat(out.unbind(0), dim=-1)  # [rank 0's columns, rank 1's columns, ...]

    @staticmethod
    def backward(ctx, grad):
        return grad.chunk(dist.get_world_size(), dim=-1)[dist.get_rank()].contiguous()


def full_weights():
    g = torch.Generator().manual_seed(0)

    def w(*shape):
        return (torch.randint(-4, 5, shape, generator=g).double() / 8).requires_grad_()

    return {"w1": w(FFN, HIDDEN), "b1": w(FFN), "w2": w(HIDDEN, FFN), "b2": w(HIDDEN)}


def data():
    g = torch.Generator().manual_seed(1)
    x = torch.randint(-2, 3, (BATCH, HIDDEN), generator=g).double().requires_grad_()
    t = torch.randint(-1, 2, (BATCH, HIDDEN), generator=g).double()
    return x, t


def shard(full, rank, world):
    """This rank's shards: rows of W1 and b1, columns of W2; b2 whole (added once, after g)."""
    rows = lambda t: t.detach().chunk(world, dim=0)[rank].clone().requires_grad_()  # noqa: E731
    return {"w1": rows(full["w1"]), "b1": rows(full["b1"]),
            "w2": full["w2"].detach().chunk(world, dim=1)[rank].clone().requires_grad_(),
            "b2": full["b2"].detach().clone().requires_grad_()}


def mlp_reference(p, x):
    return torch.relu(x @ p["w1"].T + p["b1"]) @ p["w2"].T + p["b2"]


def mlp_tensor_parallel(p, x):
    x = CopyToParallel.apply(x)                      # f
    h = torch.relu(x @ p["w1"].T + p["b1"])          # column-parallel: this rank's FFN slice
    y = ReduceFromParallel.apply(h @ p["w2"].T)      # row-parallel partial sums, then g
    return y + p["b2"]


def expect_equal(what, got, want):
    if not torch.equal(got, want):
        raise AssertionError(f"{what} differs from the unsharded reference by "
                             f"{(got - want).abs().max()}")


def main(rank, world):
    assert FFN % world == 0, f"{FFN} hidden features do not split over {world} ranks"
    full = full_weights()
    x_ref, t = data()
    y_ref = mlp_reference(full, x_ref)
    (y_ref * t).sum().backward()

    # The MLP block: f, column-parallel, row-parallel, g.
    p = shard(full, rank, world)
    x = x_ref.detach().clone().requires_grad_()
    y = mlp_tensor_parallel(p, x)
    (y * t).sum().backward()
    expect_equal("output Y", y, y_ref)
    expect_equal("dL/dX", x.grad, x_ref.grad)
    ref_shards = {"w1": full["w1"].grad.chunk(world, 0)[rank],
                  "b1": full["b1"].grad.chunk(world, 0)[rank],
                  "w2": full["w2"].grad.chunk(world, 1)[rank], "b2": full["b2"].grad}
    for name, want in ref_shards.items():
        expect_equal(f"gradient of {name} (rank {rank}'s shard)", p[name].grad, want)
    if rank == 0:
        print(f"  MLP block {HIDDEN} -> {FFN} -> {HIDDEN}, FFN split {world} ways "
              f"({FFN // world} features per rank): output, dL/dX and every shard's gradient "
              f"equal the unsharded block's bit for bit")

    # A column-parallel layer alone, its output all-gathered.
    p = shard(full, rank, world)
    x = x_ref.detach().clone().requires_grad_()
    h = GatherFromParallel.apply(CopyToParallel.apply(x) @ p["w1"].T + p["b1"])
    x_ref2 = x_ref.detach().clone().requires_grad_()
    h_ref = x_ref2 @ full["w1"].detach().T + full["b1"].detach()
    u = torch.arange(FFN, dtype=torch.float64) % 3 - 1  # a loss weight per feature
    (h * u).sum().backward()
    (h_ref * u).sum().backward()
    expect_equal("gathered column-parallel output", h, h_ref)
    expect_equal("dL/dX of the column-parallel layer", x.grad, x_ref2.grad)
    if rank == 0:
        print("  column-parallel layer with all-gathered output: output and dL/dX equal the "
              "unsharded layer's bit for bit")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--world", type=int, default=2, help="ranks (a divisor of 32)")
    args = parser.parse_args()
    print(f"tp_megatron: {args.world} ranks on the loom backend")
    rc = spawn(main, args.world)
    print("tp_megatron: " + ("OK" if rc == 0 else "FAILED"))
    sys.exit(rc)
