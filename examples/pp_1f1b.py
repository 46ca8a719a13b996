"""Pipeline parallelism: GPipe and 1F1B schedules over send/recv, with the bubble measured.

    python3 examples/pp_1f1b.py [--micro-batches 4 8] [--forward-ms 30]

A 4-layer model is cut into 4 stages, one layer per rank. Each batch is split into m
micro-batches. A stage receives its input from the previous stage (irecv), computes, and sends
its output on (isend); backward sends the gradient of each stage's input back the same way.
- GPipe: all m forwards, then all m backwards. Every stage keeps the activations of all m
  micro-batches until their backward.
- 1F1B: stage s runs p-1-s forwards (warm-up), then alternates one forward and one backward,
  then drains the remaining backwards. At most p-s micro-batches are in flight on stage s.
Both leave the same idle time, the pipeline bubble: a stage waits p-1 slots while the pipe
fills and drains, so the bubble is (p-1)/(m+p-1) of the wall time. Here each forward takes
--forward-ms (a sleep standing in for compute, plus the real math) and each backward twice
that, and the example measures each stage's busy time against the wall time of the schedule:
bubble = 1 - sum(busy) / (p * wall). It exits non-zero if the measured bubble is off the
theory by more than MARGIN (the time of sends, receives and Python between slots adds to it;
on 2 shared cores 4 ranks add a few percent).

It also checks the math: the loss of every micro-batch and the gradient of every stage's
weights equal those of the whole model run in one process, bit for bit (weights in multiples of
1/8, small integers as data, a loss linear in the outputs: no sum rounds).
"""

import argparse
import sys
import time

import torch
import torch.distributed as dist

from launch import spawn

WIDTH = 8
MICRO_BATCH = 2
MARGIN = 0.10  # measured bubble minus theory may lie in [-0.02, MARGIN]


def layer_weights(stage):
    g = torch.Generator().manual_seed(stage)
    w = torch.randint(-4, 5, (WIDTH, WIDTH), generator=g).double() / 8
    b = torch.randint(-4, 5, (WIDTH,), generator=g).double() / 8
    return w, b


def micro_batch(i):
    g = torch.Generator().manual_seed(100 + i)
    x = torch.randint(-2, 3, (MICRO_BATCH, WIDTH), generator=g).double()
    t = torch.randint(-1, 2, (MICRO_BATCH, WIDTH), generator=g).double()
    return x, t


def stage_forward(w, b, x, last):
    y = x @ w.T + b
    return y if last else torch.relu(y)


def reference(p, m):
    """The whole model in one process: the loss of every micro-batch and every weight's grad."""
    params = [[t.clone().requires_grad_() for t in layer_weights(s)] for s in range(p)]
    losses = []
    for i in range(m):
        x, t = micro_batch(i)
        for s, (w, b) in enumerate(params):
            x = stage_forward(w, b, x, s == p - 1)
        losses.append((x * t).sum())
    sum(losses).backward()
    return [loss.detach() for loss in losses], [(w.grad, b.grad) for w, b in params]


class Stage:
    """One rank's stage: forward and backward of one micro-batch, with the transfers."""

    def __init__(self, stage, p, forward_s):
        self.s, self.p = stage, p
        self.first, self.last = stage == 0, stage == p - 1
        self.w, self.b = [t.clone().requires_grad_() for t in layer_weights(stage)]
        self.forward_s = forward_s
        self.saved = {}  # micro-batch -> (input, output): the activations in flight
        self.max_in_flight = 0
        self.busy = 0.0
        self.losses = []
        self.sends = []

    def forward(self, i):
        if self.first:
            x = micro_batch(i)[0]
        else:
            x = torch.empty(MICRO_BATCH, WIDTH, dtype=torch.float64)
            dist.irecv(x, src=self.s - 1).wait()
        start = time.monotonic()
        x.requires_grad_(not self.first)
        y = stage_forward(self.w, self.b, x, self.last)
        time.sleep(self.forward_s)  # stands in for the compute of a real layer
        if self.last:
            y = (y * micro_batch(i)[1]).sum()
            self.losses.append(y.detach())
        else:
            self.sends.append(dist.isend(y.detach(), dst=self.s + 1))
        self.busy += time.monotonic() - start
        self.saved[i] = (x, y)
        self.max_in_flight = max(self.max_in_flight, len(self.saved))

    def backward(self, i):
        x, y = self.saved.pop(i)
        grad = None
        if not self.last:
            grad = torch.empty(MICRO_BATCH, WIDTH, dtype=torch.float64)
            dist.irecv(grad, src=self.s + 1).wait()
        start = time.monotonic()
        y.backward(grad)
        time.sleep(2 * self.forward_s)  # backward costs about twice the forward
        if not self.first:
            self.sends.append(dist.isend(x.grad, dst=self.s - 1))
        self.busy += time.monotonic() - start


def gpipe(stage, m):
    for i in range(m):
        stage.forward(i)
    for i in range(m):
        stage.backward(i)


def one_f_one_b(stage, m):
    warmup = min(stage.p - 1 - stage.s, m)
    for i in range(warmup):
        stage.forward(i)
    for i in range(warmup, m):  # steady state: one forward, then the oldest backward
        stage.forward(i)
        stage.backward(i - warmup)
    for i in range(m - warmup, m):
        stage.backward(i)


def run(rank, p, m, schedule, forward_s):
    stage = Stage(rank, p, forward_s)
    dist.barrier()
    start = time.monotonic()
    schedule(stage, m)
    end = time.monotonic()
    for work in stage.sends:
        work.wait()
    # Every stage's [start, end, busy]: the wall time runs from the first start to the last end.
    times = torch.empty(p, 3, dtype=torch.float64)
    dist.all_gather_into_tensor(times, torch.tensor([start, end, stage.busy],
                                                    dtype=torch.float64))
    wall = times[:, 1].max() - times[:, 0].min()
    bubble = 1 - times[:, 2].sum().item() / (p * wall.item())
    in_flight = torch.zeros(p, dtype=torch.int64)
    dist.all_gather_into_tensor(in_flight, torch.tensor([stage.max_in_flight]))
    return stage, bubble, wall.item(), in_flight.tolist()


def check_math(stage, p, m, name):
    losses, grads = reference(p, m)
    if stage.last and not all(torch.equal(a, b) for a, b in zip(stage.losses, losses)):
        raise AssertionError(f"{name}: the micro-batch losses differ from the reference: "
                             f"{stage.losses} vs {losses}")
    for got, want, what in ((stage.w.grad, grads[stage.s][0], "W"),
                            (stage.b.grad, grads[stage.s][1], "b")):
        if not torch.equal(got, want):
            raise AssertionError(f"{name}: stage {stage.s}'s gradient of {what} differs from "
                                 f"the reference by {(got - want).abs().max()}")


def main(rank, world, micro_batches, forward_ms):
    p = world
    failures = []
    if rank == 0:
        print(f"  {'schedule':8s} {'m':>3s} {'wall (s)':>9s} {'bubble':>7s} {'theory':>7s} "
              f"{'diff':>7s}  max micro-batches in flight per stage")
    # Untimed warm-up: the first transfer between two ranks sets up their connection.
    run(rank, p, 2, one_f_one_b, 0.0)
    for m in micro_batches:
        for name, schedule in (("GPipe", gpipe), ("1F1B", one_f_one_b)):
            stage, bubble, wall, in_flight = run(rank, p, m, schedule, forward_ms / 1e3)
            check_math(stage, p, m, f"{name}, m={m}")
            theory = (p - 1) / (m + p - 1)
            if rank == 0:
                print(f"  {name:8s} {m:3d} {wall:9.2f} {bubble:7.3f} {theory:7.3f} "
                      f"{bubble - theory:+7.3f}  {in_flight}")
            if not -0.02 <= bubble - theory <= MARGIN:
                failures.append(f"{name} m={m}: bubble {bubble:.3f}, theory {theory:.3f}")
    if rank == 0:
        print("  losses and gradients of every schedule equal the single-process model's bit "
              "for bit")
    if failures:
        raise AssertionError("measured bubble off the theory by more than the margin: " +
                             "; ".join(failures))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--stages", type=int, default=4)
    parser.add_argument("--micro-batches", type=int, nargs="+", default=[4, 8])
    parser.add_argument("--forward-ms", type=float, default=30.0,
                        help="time of one micro-batch's forward on one stage")
    args = parser.parse_args()
    print(f"pp_1f1b: {args.stages} stages, one rank each, on the loom backend; "
          f"forward {args.forward_ms:g} ms, backward {2 * args.forward_ms:g} ms per micro-batch")
    rc = spawn(main, args.stages, args.micro_batches, args.forward_ms)
    print("pp_1f1b: " + ("OK" if rc == 0 else "FAILED"))
    sys.exit(rc)
