"""The job that runs on 2 ranks and hangs on 4, between data loading and the first step.

    python3 examples/hang_on_4_ranks.py [--backend loom gloo] [--timeout 10] [--world 4]

Before the first step each rank sums, over all ranks, a histogram of the lengths of its
samples, sized by the longest sample of its own shard (shard = lengths[rank::world]). On 2
ranks both shards hold a sample of length 7 and the histograms agree in size; on 4 ranks the
shards of ranks 2 and 3 hold only samples of length 5, so ranks 0 and 1 all-reduce 8 numbers
and ranks 2 and 3 only 6. The first training step (an all_reduce of gradients) follows.

The program runs on each backend given with the group timeout given and prints what every
rank got. It checks loom's part on 4 ranks: every rank must get an error (no hang) whose
message names a rank of the other half, whose call differs from its own; it exits non-zero if
not. `--world 2` shows the same program finishing. The gloo run is a comparison, not checked.
docs/examples.md shows both.
"""

import sys

import torch
import torch.distributed as dist

from launch import demonstrate

LENGTHS = [7, 7, 5, 5, 5, 5, 5, 5]  # the data set's sample lengths


def load_data_then_step(rank, world):
    shard = LENGTHS[rank::world]
    histogram = torch.zeros(max(shard) + 1)  # sized by this shard's longest sample
    for n in shard:
        histogram[n] += 1
    dist.all_reduce(histogram)  # sizes differ between ranks when world = 4
    grad = torch.ones(1000)
    dist.all_reduce(grad)  # the first training step
    return f"histogram {histogram.tolist()} (all 8 samples: 6 of length 5, 2 of length 7)"


if __name__ == "__main__":
    # Ranks 0 and 1 made one call, ranks 2 and 3 another: each must name the other half.
    fault = {0: {2, 3}, 1: {2, 3}, 2: {0, 1}, 3: {0, 1}}
    sys.exit(demonstrate("hang_on_4_ranks", load_data_then_step, 4, fault))
