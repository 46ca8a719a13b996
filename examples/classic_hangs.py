"""Two classic distributed-training hangs, run on loom and on gloo side by side.

    python3 examples/classic_hangs.py [--timeout 10] [--backends loom gloo]

1. uneven_epoch: the end-of-epoch hang. Rank 0's data loader yields 3 batches, rank 1's
   only 2. Rank 1 leaves the training loop and enters the end-of-epoch barrier while rank 0
   still waits in the all_reduce of its third batch's gradients.
2. world_4_only: runs on 2 ranks, hangs on 4, between data loading and the first step. Each
   rank pads its samples to the longest one of its own shard and the ranks sum a histogram of
   lengths of that size. On 2 ranks both shards hold a long sample; on 4, two shards do not,
   so the ranks pass all_reduce buffers of different sizes. The first training step (an
   all_reduce of gradients) follows.
Each scenario runs on each backend with the group timeout given (small, so that the demo ends);
the parent prints what each rank got: an exception with its message, or nothing before the
parent killed it. This is a demonstration, not a check: it exits 0 whatever the backends do.
"""

import argparse
import multiprocessing as mp
import os
import queue
import time
from datetime import timedelta

import torch
import torch.distributed as dist

from launch import free_port


def uneven_epoch(rank, world):
    batches = 3 if rank == 0 else 2  # an uneven split of the data set
    grad = torch.ones(1000)
    for _ in range(batches):
        dist.all_reduce(grad)  # the gradients of one step
    dist.barrier()  # end of epoch


def world_4_only(rank, world):
    lengths = [7, 7, 5, 5, 5, 5, 5, 5]  # sample lengths; shard = lengths[rank::world]
    longest = max(lengths[rank::world])
    histogram = torch.zeros(longest + 1)
    for n in lengths[rank::world]:
        histogram[n] += 1
    dist.all_reduce(histogram)  # sizes differ between ranks when world = 4
    grad = torch.ones(1000)
    dist.all_reduce(grad)  # the first training step
    return f"histogram {histogram.tolist()} (all 8 samples: 6 of length 5, 2 of length 7)"


GRACE = 60  # seconds for the ranks to start (8 processes importing torch on 2 cores) and end
SCENARIOS = {"uneven_epoch": (uneven_epoch, 2), "world_4_only": (world_4_only, 4)}


def rank_main(scenario, backend, rank, world, port, timeout, results):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    import loom_torch  # noqa: F401

    torch.set_num_threads(1)
    dist.init_process_group(backend, rank=rank, world_size=world,
                            timeout=timedelta(seconds=timeout))
    start = time.monotonic()
    try:
        note = SCENARIOS[scenario][0](rank, world)
        results.put((rank, f"finished ({time.monotonic() - start:.1f} s)" +
                     (f"; {note}" if note else "")))
    except Exception as e:  # noqa: BLE001  (what the user sees is the point)
        message = " ".join(str(e).split())
        if len(message) > 400:
            message = message[:400] + " ..."
        results.put((rank, f"{type(e).__name__} after {time.monotonic() - start:.1f} s: "
                           f"{message}"))
    results.close()
    results.join_thread()  # the report is out of this process
    os._exit(0)  # no destroy_process_group: a peer may still be stuck


def run(scenario, backend, timeout):
    world = SCENARIOS[scenario][1]
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    port = free_port()
    procs = [ctx.Process(target=rank_main,
                         args=(scenario, backend, r, world, port, timeout, results))
             for r in range(world)]
    for p in procs:
        p.start()
    deadline = time.monotonic() + timeout + GRACE  # start-up plus the group's timeout
    for p in procs:
        p.join(max(0.0, deadline - time.monotonic()))
    outcome = {}
    while True:
        try:
            rank, text = results.get(timeout=1)
        except queue.Empty:
            break
        outcome[rank] = text
    for r, p in enumerate(procs):
        if p.is_alive():
            p.kill()
            p.join()
            outcome.setdefault(r, f"no answer {timeout + GRACE:.0f} s after start (group timeout + "
                                  f"{GRACE} s), killed")
        outcome.setdefault(r, f"exited with code {p.exitcode} and no report")
    print(f"\n{scenario} on {backend} ({world} ranks, group timeout {timeout:g} s):")
    for r in range(world):
        print(f"  rank {r}: {outcome[r]}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--timeout", type=float, default=10.0, help="group timeout, seconds")
    parser.add_argument("--backends", nargs="+", default=["loom", "gloo"])
    parser.add_argument("--scenarios", nargs="+", default=list(SCENARIOS))
    args = parser.parse_args()
    for scenario in args.scenarios:
        for backend in args.backends:
            run(scenario, backend, args.timeout)
