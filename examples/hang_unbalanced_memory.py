"""Unbalanced memory: one rank's batch needs more memory than the others', and it runs out.

    python3 examples/hang_unbalanced_memory.py [--backend loom gloo] [--timeout 10]

Every rank has the same memory (as identical GPUs do); here each may allocate MEMORY_MIB
beyond what it holds after start-up (a limit on its address space). The batches are
sequences of varying length, and a self-attention layer's scores grow with the square of the
length: rank 1's second batch holds sequences 8 times longer than any other, so its scores
need 64 times the memory. Rank 1 runs out of memory in that forward pass and, like a training
script whose exception nobody catches, exits; rank 0 has finished its forward and backward and
waits in the all_reduce of the step's gradients for a rank that is gone. (Where the rank that
runs short does not fail but slows down, swapping or offloading, the others wait in the same
all_reduce until the group timeout.)

The program runs on each backend given with the group timeout given and prints what every
rank got. It checks loom's part: rank 1's error is its own (out of memory), and rank 0 must
get an error, not a hang, whose message names rank 1; it exits non-zero if not. The gloo run
is a comparison, not checked. docs/examples.md shows both.
"""

import resource
import sys

import torch
import torch.distributed as dist

from launch import demonstrate

MEMORY_MIB = 256  # what each rank may allocate after start-up
BATCH, WIDTH = 4, 16
SEQUENCE_LENGTHS = {0: [512, 512, 512], 1: [512, 4096, 512]}  # per rank, per step


def limit_memory(mib):
    """Caps this process's address space at what it uses now plus `mib`."""
    with open("/proc/self/status") as f:
        used = next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmSize:"))
    resource.setrlimit(resource.RLIMIT_AS, (used + mib * 2**20, resource.RLIM_INFINITY))


def train(rank, world):
    g = torch.Generator().manual_seed(0)
    wq, wk, wv = (torch.randn(WIDTH, WIDTH, generator=g).requires_grad_() for _ in range(3))
    dist.all_reduce(torch.zeros(1000))  # the connections are up before the limit
    limit_memory(MEMORY_MIB)
    for step, length in enumerate(SEQUENCE_LENGTHS[rank]):
        x = torch.randn(BATCH, length, WIDTH, generator=g)
        q, k, v = x @ wq, x @ wk, x @ wv
        scores = torch.softmax(q @ k.transpose(1, 2) / WIDTH**0.5, dim=-1)  # BATCH x len x len
        (scores @ v).square().mean().backward()
        for w in (wq, wk, wv):
            dist.all_reduce(w.grad)  # the step's gradients
            w.grad = None


if __name__ == "__main__":
    # Rank 1's own error is the cause (out of memory); rank 0 must name rank 1.
    sys.exit(demonstrate("hang_unbalanced_memory", train, 2, fault={0: {1}, 1: None}))
