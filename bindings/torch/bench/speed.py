"""Speed of the loom backend: DDP step time against gloo, and all_reduce against all_reduce_perf.

    python3 bindings/torch/bench/speed.py [--perf build/perf/all_reduce_perf] [--json out.json]

1. DDP: one training step (forward, backward with DDP's bucketed all_reduce, SGD) of a model of
   about 10 M float32 parameters, on 2 and 4 ranks, with backend "loom" and then "gloo", in the
   same run. Reports the median step time of each and loom / gloo.
2. all_reduce (float32, SUM, in place) through torch.distributed on loom against loom's own
   all_reduce_perf (the same ranks as processes, pageable buffers, in-place column) at 1 MiB,
   16 MiB and 256 MiB on 2 ranks. Reports the median time of each and perf / backend, which is
   the share of loom's speed that the backend keeps.
A benchmark, not a test: it checks no threshold.
"""

import argparse
import json
import multiprocessing as mp
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import timedelta

SIZES_MIB = [1, 16, 256]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def init(backend, rank, world, port):
    import torch.distributed as dist

    if backend == "loom":
        import loom_torch  # noqa: F401
    dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world, timeout=timedelta(seconds=300))
    return dist


def model_10m():
    import torch.nn as nn

    # 1024*2048 + 2048*2048 + 2048*1024 + 1024*1024 weights (+ biases): about 9.4 M parameters.
    return nn.Sequential(nn.Linear(1024, 2048), nn.ReLU(), nn.Linear(2048, 2048), nn.ReLU(),
                         nn.Linear(2048, 1024), nn.ReLU(), nn.Linear(1024, 1024))


def ddp_rank(rank, world, port, backend, steps, out):
    import torch
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.set_num_threads(1)
    dist = init(backend, rank, world, port)
    torch.manual_seed(0)
    model = DDP(model_10m())
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(32, 1024)
    times = []
    for step in range(steps + 3):  # 3 warm-up steps
        dist.barrier()
        start = time.perf_counter()
        opt.zero_grad()
        model(x).square().mean().backward()
        opt.step()
        if step >= 3:
            times.append(time.perf_counter() - start)
    if rank == 0:
        params = sum(p.numel() for p in model.parameters())
        out.put((params, statistics.median(times)))
    dist.destroy_process_group()


def allreduce_rank(rank, world, port, out):
    import torch

    dist = init("loom", rank, world, port)
    result = {}
    for mib in SIZES_MIB:
        x = torch.ones(mib * (1 << 20) // 4)
        iters = max(5, 64 // mib)
        times = []
        for i in range(iters + 2):
            dist.barrier()
            start = time.perf_counter()
            dist.all_reduce(x)
            if i >= 2:
                times.append(time.perf_counter() - start)
        result[mib] = statistics.median(times)
    if rank == 0:
        out.put(result)
    dist.destroy_process_group()


def spawn(target, world, *args):
    """Runs target(rank, world, port, *args, queue) on `world` processes; rank 0's result."""
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    port = free_port()
    procs = [ctx.Process(target=target, args=(r, world, port, *args, out)) for r in range(world)]
    for p in procs:
        p.start()
    value = out.get(timeout=1800)
    for p in procs:
        p.join(600)
        if p.exitcode != 0:
            raise RuntimeError(f"a rank of {target.__name__} exited with {p.exitcode}")
    return value


def perf_times(perf, world):
    """all_reduce_perf's in-place times (seconds) per size, its ranks as processes."""
    port = free_port()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "perf.json")
        procs = []
        for r in range(world):
            env = dict(os.environ, RANK=str(r), WORLD_SIZE=str(world), LOCAL_RANK=str(r),
                       LOOM_COMM_ID=f"127.0.0.1:{port}")
            args = [perf, "-b", f"{SIZES_MIB[0]}M", "-e", f"{SIZES_MIB[-1]}M", "-f", "16",
                    "-d", "float", "-o", "sum", "-R", "0", "-w", "2", "-n", "5"]
            if r == 0:
                args += ["-J", path]
            procs.append(subprocess.Popen(args, env=env, stdout=subprocess.PIPE if r else None))
        for p in procs:
            p.wait(1800)
            if p.returncode != 0:
                raise RuntimeError(f"all_reduce_perf exited with {p.returncode}")
        with open(path) as f:
            data = json.load(f)
    times = {}
    for row in data["results"]:
        mib = row["size"] // (1 << 20)
        if mib in SIZES_MIB:
            times[mib] = row["in_place"]["time"] * 1e-6  # microseconds
    return times


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    default_perf = os.path.join(here, "..", "..", "..", "build", "perf", "all_reduce_perf")
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--perf", default=os.path.normpath(default_perf))
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--json", help="also write the figures here")
    args = ap.parse_args()
    report = {"ddp": {}, "all_reduce": {}}

    print("DDP step time, median of", args.steps, "steps (ms)")
    print(f"{'ranks':>5} {'params':>10} {'loom':>9} {'gloo':>9} {'loom/gloo':>9}")
    for world in (2, 4):
        params, loom = spawn(ddp_rank, world, "loom", args.steps)
        _, gloo = spawn(ddp_rank, world, "gloo", args.steps)
        report["ddp"][world] = {"params": params, "loom_s": loom, "gloo_s": gloo}
        print(f"{world:>5} {params:>10} {loom * 1e3:>9.1f} {gloo * 1e3:>9.1f} {loom / gloo:>9.2f}")

    print("\nall_reduce float32 in place, 2 ranks, median (ms)")
    backend = spawn(allreduce_rank, 2)
    perf = perf_times(args.perf, 2) if os.path.exists(args.perf) else {}
    print(f"{'MiB':>5} {'backend':>9} {'perf':>9} {'perf/backend':>12}")
    for mib in SIZES_MIB:
        p = perf.get(mib)
        report["all_reduce"][mib] = {"backend_s": backend[mib], "perf_s": p}
        ratio = f"{p / backend[mib]:>12.2f}" if p else f"{'(no perf)':>12}"
        ptxt = f"{p * 1e3:>9.2f}" if p else f"{'-':>9}"
        print(f"{mib:>5} {backend[mib] * 1e3:>9.2f} {ptxt} {ratio}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
