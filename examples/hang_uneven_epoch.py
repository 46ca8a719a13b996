"""The end-of-epoch hang: one rank's data loader yields fewer batches than the other's.

    python3 examples/hang_uneven_epoch.py [--backend loom gloo] [--timeout 10]

The data set does not split evenly: rank 0's loader yields 3 batches, rank 1's only 2. Each
step all-reduces the gradients; after its loop each rank enters the end-of-epoch barrier. So
rank 1 is in the barrier while rank 0 waits in the all_reduce of its third batch: the two
ranks call different collectives, and neither can finish.

The program runs on each backend given with the group timeout given and prints what every
rank got. It checks loom's part: both ranks must get an error (no hang) whose message names
the other rank, the one whose call does not match; it exits non-zero if not. The gloo run is a
comparison, not checked (it ends at the group timeout too). docs/examples.md shows both.
"""

import sys

import torch
import torch.distributed as dist

from launch import demonstrate


def train_one_epoch(rank, world):
    batches = 3 if rank == 0 else 2  # an uneven split of the data set
    grad = torch.ones(1000)
    for _ in range(batches):
        dist.all_reduce(grad)  # the gradients of one step
    dist.barrier()  # end of epoch


if __name__ == "__main__":
    # Each rank must name the other: rank 0 waits for rank 1's third all_reduce, rank 1 for
    # rank 0's barrier.
    sys.exit(demonstrate("hang_uneven_epoch", train_one_epoch, 2, fault={0: {1}, 1: {0}}))
