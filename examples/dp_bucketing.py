"""Data parallelism: DDP, then a hand-written bucketed and overlapped AllReduce, on loom.

    python3 examples/dp_bucketing.py [--world 2] [--bench-steps 10]

1. Check. A small model trains for 3 steps with DDP, then with `BucketedDataParallel` below
   (hooks on parameters, a bucket size, async all_reduce, no_sync accumulation: step 1 runs
   two micro-batches and synchronises only after the second). After every step the parameters
   of every rank must equal, bit for bit, those of one process that runs all ranks' batches.
   The data make that possible: float64 weights that are multiples of 1/8, small integer
   inputs, a loss linear in the outputs and lr = 1/16, so no sum ever rounds and the order in
   which loom adds the ranks' gradients cannot change a bit. A mismatch exits non-zero.
2. Benchmark (printed, not checked). A larger float32 model runs `--bench-steps` steps under
   DDP and under BucketedDataParallel with several bucket sizes, with and without overlap;
   rank 0 prints the median step time of each (of the slowest rank).
"""

import argparse
import statistics
import sys
import time
from contextlib import contextmanager

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

from launch import spawn

LR = 1.0 / 16
STEPS = 3
ACCUMULATE_AT = 1  # the step that runs two micro-batches, the first under no_sync


class BucketedDataParallel:
    """Averages gradients over the ranks with bucketed, asynchronous all_reduce.

    Buckets hold parameters in reverse order of registration, the order in which backward
    produces their gradients. A hook on each parameter (register_post_accumulate_grad_hook)
    runs once its gradient is complete; when the last gradient of a bucket arrives the bucket
    is flattened and its all_reduce starts (async_op=True) while backward goes on with the
    earlier layers. Buckets start in index order on every rank, since collectives must be
    issued in the same order everywhere. `finish()` waits for them and writes the averages
    back into .grad. With overlap=False every all_reduce starts in finish(), after backward.
    """

    def __init__(self, model, bucket_bytes, overlap=True):
        self.model = model
        self.overlap = overlap
        self.sync = True
        self.world = dist.get_world_size()
        self.buckets = [[]]
        size = 0
        for p in reversed([p for p in model.parameters() if p.requires_grad]):
            if self.buckets[-1] and size >= bucket_bytes:
                self.buckets.append([])
                size = 0
            self.buckets[-1].append(p)
            size += p.numel() * p.element_size()
        self.bucket_of = {p: i for i, b in enumerate(self.buckets) for p in b}
        self._reset()
        for p in self.bucket_of:
            p.register_post_accumulate_grad_hook(self._grad_ready)

    def _reset(self):
        self.missing = [len(b) for b in self.buckets]
        self.next_bucket = 0
        self.inflight = []  # (bucket index, flat buffer, Work)

    def _grad_ready(self, p):
        if not self.sync:
            return  # no_sync: the gradient just accumulates in p.grad
        self.missing[self.bucket_of[p]] -= 1
        if self.overlap:
            self._start_ready_buckets()

    def _start_ready_buckets(self):
        while self.next_bucket < len(self.buckets) and self.missing[self.next_bucket] == 0:
            bucket = self.buckets[self.next_bucket]
            flat = torch.cat([p.grad.reshape(-1) for p in bucket])
            work = dist.all_reduce(flat, async_op=True)
            self.inflight.append((self.next_bucket, flat, work))
            self.next_bucket += 1

    def finish(self):
        """Call after backward, before the optimizer step."""
        if not self.sync:
            return
        self._start_ready_buckets()
        assert self.next_bucket == len(self.buckets), "some parameters got no gradient"
        for index, flat, work in self.inflight:
            work.wait()
            flat /= self.world
            offset = 0
            for p in self.buckets[index]:
                p.grad.copy_(flat[offset:offset + p.numel()].view_as(p.grad))
                offset += p.numel()
        self._reset()

    @contextmanager
    def no_sync(self):
        self.sync = False
        try:
            yield
        finally:
            self.sync = True


# ---- the exact check ------------------------------------------------------------------------

def small_model():
    g = torch.Generator().manual_seed(0)
    m = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 4))
    m = m.double()
    with torch.no_grad():
        for p in m.parameters():
            p.copy_(torch.randint(-4, 5, p.shape, generator=g).double() / 8)
    return m


def batch(step, rank, micro):
    g = torch.Generator().manual_seed(1000 * step + 10 * rank + micro)
    x = torch.randint(-2, 3, (4, 8), generator=g).double()
    t = torch.randint(-1, 2, (4, 4), generator=g).double()
    return x, t


def loss_fn(model, x, t):
    return (model(x) * t).sum()


def reference(world):
    """One process: every step averages the gradients of all ranks' micro-batches."""
    ref = small_model()
    opt = torch.optim.SGD(ref.parameters(), lr=LR)
    params = []
    for step in range(STEPS):
        opt.zero_grad()
        for micro in range(2 if step == ACCUMULATE_AT else 1):
            for r in range(world):
                (loss_fn(ref, *batch(step, r, micro)) / world).backward()
        opt.step()
        params.append([p.detach().clone() for p in ref.parameters()])
    return params


def train_and_check(rank, world, what, model, backward_step, no_sync, expected):
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    params = list(model.module.parameters()) if isinstance(model, DDP) else list(
        model.parameters())
    for step in range(STEPS):
        opt.zero_grad()
        micros = 2 if step == ACCUMULATE_AT else 1
        for micro in range(micros):
            x, t = batch(step, rank, micro)
            if micro < micros - 1:
                with no_sync():  # accumulate locally, no communication
                    loss_fn(model, x, t).backward()
            else:
                backward_step(loss_fn(model, x, t))
        opt.step()
        for i, (p, q) in enumerate(zip(params, expected[step])):
            if not torch.equal(p, q):
                raise AssertionError(f"{what}, step {step}, parameter {i}: differs from the "
                                     f"single-process reference by {(p - q).abs().max()}")
    if rank == 0:
        print(f"  {what}: {STEPS} steps (step {ACCUMULATE_AT} accumulates 2 micro-batches "
              f"under no_sync), parameters equal the single-process reference bit for bit")


def check(rank, world):
    expected = reference(world)
    ddp = DDP(small_model(), bucket_cap_mb=0.002)  # about 2 KB: several buckets
    train_and_check(rank, world, "DDP", ddp, lambda loss: loss.backward(), ddp.no_sync,
                    expected)
    model = small_model()
    bdp = BucketedDataParallel(model, bucket_bytes=2048)

    def backward_step(loss):
        loss.backward()
        bdp.finish()

    train_and_check(rank, world, f"BucketedDataParallel ({len(bdp.buckets)} buckets)", model,
                    backward_step, bdp.no_sync, expected)


# ---- the benchmark --------------------------------------------------------------------------

def big_model():
    torch.manual_seed(0)
    layers = []
    for _ in range(16):
        layers += [nn.Linear(256, 256), nn.ReLU()]
    return nn.Sequential(*layers)


def bench(rank, world, steps):
    """Steps of every configuration interleaved, so that the machine's load hits them alike."""
    configs = [("DDP (bucket_cap_mb=25)", DDP(big_model()), None)]
    for kib, overlap in [(8192, False), (8192, True), (1024, True), (256, True), (0, True)]:
        model = big_model()
        bdp = BucketedDataParallel(model, bucket_bytes=kib * 1024, overlap=overlap)
        what = (f"bucketed, {kib} KiB buckets, " if kib else "bucketed, one per parameter, ") + (
            "overlapped" if overlap else "after backward")
        configs.append((what, model, bdp))
    x = torch.randn(64, 256)
    opts = [torch.optim.SGD(model.parameters(), lr=1e-3) for _, model, _ in configs]
    times = [[] for _ in configs]
    for step in range(steps + 1):  # step 0 warms up
        for (what, model, bdp), opt, t in zip(configs, opts, times):
            dist.barrier()
            start = time.perf_counter()
            opt.zero_grad()
            model(x).square().mean().backward()
            if bdp is not None:
                bdp.finish()
            opt.step()
            if step > 0:
                t.append(time.perf_counter() - start)
    # A step ends when the slowest rank is done: report the largest median over the ranks.
    medians = torch.tensor([statistics.median(t) for t in times], dtype=torch.float64)
    dist.all_reduce(medians, op=dist.ReduceOp.MAX)
    if rank == 0:
        n = sum(p.numel() for p in configs[0][1].parameters())
        print(f"\nbenchmark: 16 x Linear(256, 256), {n / 1e6:.2f} M float32 parameters "
              f"({n * 4 / 2**20:.1f} MiB of gradients), batch 64, {world} ranks, median of "
              f"{steps} steps (configurations interleaved)")
        print(f"  {'configuration':44s} {'buckets':>7s} {'step (ms)':>10s}")
        for (what, _, bdp), median in zip(configs, medians.tolist()):
            buckets = str(len(bdp.buckets)) if bdp else ""
            print(f"  {what:44s} {buckets:>7s} {median * 1e3:10.1f}")


def main(rank, world, bench_steps):
    if rank == 0:
        print(f"dp_bucketing: {world} ranks on the loom backend")
    check(rank, world)
    if bench_steps > 0:
        bench(rank, world, bench_steps)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--world", type=int, default=2, help="ranks (a power of two)")
    parser.add_argument("--bench-steps", type=int, default=10, help="0 skips the benchmark")
    args = parser.parse_args()
    if args.world & (args.world - 1):
        parser.error("--world must be a power of two (the check divides by it exactly)")
    rc = spawn(main, args.world, args.bench_steps)
    print("dp_bucketing: " + ("OK" if rc == 0 else "FAILED"))
    sys.exit(rc)
