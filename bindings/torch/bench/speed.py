"""Speed of the loom backend: DDP step time against gloo, and all_reduce against all_reduce_perf.

    python3 bindings/torch/bench/speed.py [--perf build/perf/all_reduce_perf] [--repeat 3]
        [--batch 8] [--binding LABEL=DIR ...] [--json out.json]

1. DDP: one training step (forward, backward with DDP's bucketed all_reduce, SGD) of a model of
   about 10 M float32 parameters, on 2 and 4 ranks, with backend "loom" and "gloo", interleaved
   in the same run, every rank with one torch thread. "compute" is the same step without DDP in
   as many processes at once: what any backend's step time would be if communication cost
   nothing, so compute / gloo is the lowest loom / gloo this machine allows. The batch is small
   (--batch, default 8) so that the gradients' all_reduce (about 38 MB a step) is a real share
   of the step; the step is then mostly memory traffic (weights, fresh gradients, DDP's bucket
   copies), which hardly depends on the batch. "cpu" is the CPU time a rank's process spends
   per step (all its threads): on a machine with fewer cores than ranks' threads that, not the
   wall time, is what a backend costs, and it is still meaningful while others load the
   machine. "ddp floor" is DDP over gloo with a comm hook that communicates nothing: the step
   with DDP's own work (its bucket copies, hooks and autograd bookkeeping) and no transfer, so
   ddp floor / gloo is the lowest loom / gloo that any backend can reach under DDP here.
2. all_reduce (float32, SUM, in place, the tensor reused) through torch.distributed on loom
   against loom's own all_reduce_perf (the same ranks as processes, pageable buffers, in-place
   column) at 1 MiB, 16 MiB and 256 MiB on 2 ranks. "loop" times calls back to back, as
   all_reduce_perf does; "single" times one call after a barrier. perf / loop is the share of
   loom's speed that the backend keeps.
Each measurement runs --repeat times, the backends (and bindings) taking turns, so that the
load of a shared machine falls on all of them alike; the tables give the median of the runs'
medians and, in brackets, the lowest and highest. A benchmark, not a test: it checks no
threshold.

--binding LABEL=DIR (repeatable) runs loom once per binding, importing loom_torch from DIR
first (a `pip install --target DIR` of another build), to compare two builds in one run.
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


def init(backend, rank, world, port, path):
    if path:
        sys.path.insert(0, path)
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


def no_communication(state, bucket):
    """A DDP comm hook that leaves the bucket as it is: DDP's work without the transfer."""
    import torch

    fut = torch.futures.Future()
    fut.set_result(bucket.buffer())
    return fut


def ddp_rank(rank, world, port, backend, path, steps, batch, out):
    import torch

    torch.set_num_threads(1)
    torch.manual_seed(0)
    x = torch.randn(batch, 1024)
    if backend == "compute":
        # No process group: the ranks only start together (a file barrier would cost more).
        model = model_10m()
        sync = lambda: None  # noqa: E731
    else:
        from torch.nn.parallel import DistributedDataParallel as DDP

        dist = init("gloo" if backend == "ddp-floor" else backend, rank, world, port, path)
        model = DDP(model_10m())
        if backend == "ddp-floor":
            model.register_comm_hook(None, no_communication)
        sync = dist.barrier
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    times, cpu = [], []
    for step in range(steps + 3):  # 3 warm-up steps
        sync()
        start, start_cpu = time.perf_counter(), time.process_time()
        opt.zero_grad()
        model(x).square().mean().backward()
        opt.step()
        if step >= 3:
            times.append(time.perf_counter() - start)
            cpu.append(time.process_time() - start_cpu)
    if rank == 0:
        params = sum(p.numel() for p in model.parameters())
        out.put((params, statistics.median(times), statistics.median(cpu)))
    if backend != "compute":
        dist.destroy_process_group()


def allreduce_rank(rank, world, port, path, out):
    import torch

    dist = init("loom", rank, world, port, path)
    result = {}
    for mib in SIZES_MIB:
        x = torch.ones(mib * (1 << 20) // 4)
        iters = max(5, 64 // mib)
        single = []
        for i in range(iters + 2):
            dist.barrier()
            start = time.perf_counter()
            dist.all_reduce(x)
            if i >= 2:
                single.append(time.perf_counter() - start)
        dist.barrier()
        start = time.perf_counter()
        for _ in range(iters):
            dist.all_reduce(x)
        loop = (time.perf_counter() - start) / iters
        result[mib] = {"single": statistics.median(single), "loop": loop}
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
            procs.append(subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL))
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


def spread(values, scale=1.0, fmt="{:.1f}"):
    """'median [low, high]' of `values` times `scale`."""
    m = statistics.median(values) * scale
    return f"{fmt.format(m)} [{fmt.format(min(values) * scale)}, {fmt.format(max(values) * scale)}]"


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    default_perf = os.path.join(here, "..", "..", "..", "build", "perf", "all_reduce_perf")
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--perf", default=os.path.normpath(default_perf))
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--batch", type=int, default=8, help="DDP batch size per rank")
    ap.add_argument("--repeat", type=int, default=3, help="runs of each measurement")
    ap.add_argument("--worlds", default="2,4", help="DDP world sizes")
    ap.add_argument("--binding", action="append", default=[], metavar="LABEL=DIR",
                    help="a loom_torch build to measure (default: the one python finds)")
    ap.add_argument("--skip", choices=("ddp", "all_reduce"), action="append", default=[])
    ap.add_argument("--json", help="also write the figures here")
    args = ap.parse_args()
    bindings = [tuple(b.split("=", 1)) for b in args.binding] or [("loom", "")]
    looms = [label for label, _ in bindings]
    report = {"ddp": {}, "all_reduce": {}}

    if "ddp" not in args.skip:
        backends = [(label, "loom", path) for label, path in bindings]
        backends += [("gloo", "gloo", ""), ("ddp floor", "ddp-floor", ""),
                     ("compute", "compute", "")]
        for world in map(int, args.worlds.split(",")):
            times = {label: [] for label, _, _ in backends}
            cpus = {label: [] for label, _, _ in backends}
            params = 0
            for _ in range(args.repeat):
                for label, backend, path in backends:
                    params, t, c = spawn(ddp_rank, world, backend, path, args.steps, args.batch)
                    times[label].append(t)
                    cpus[label].append(c)
            report["ddp"][world] = {"params": params, "batch": args.batch, "seconds": times,
                                    "cpu_seconds": cpus}
            print(f"\nDDP step, {world} ranks, {params} parameters, batch {args.batch} per rank, "
                  f"median of {args.steps} steps per run, {args.repeat} runs "
                  "(ms: median [low, high]; ratios per run)")
            for label in times:
                ratio = [t / g for t, g in zip(times[label], times["gloo"])]
                cpu_ratio = [t / g for t, g in zip(cpus[label], cpus["gloo"])]
                print(f"  {label:>10} wall {spread(times[label], 1e3):>22}  / gloo "
                      f"{spread(ratio, 1, '{:.2f}'):>18}   rank 0 cpu "
                      f"{spread(cpus[label], 1e3):>22}  / gloo {spread(cpu_ratio, 1, '{:.2f}')}")

    if "all_reduce" not in args.skip:
        have_perf = os.path.exists(args.perf)
        runs = {label: {m: {"single": [], "loop": []} for m in SIZES_MIB} for label in looms}
        perf = {m: [] for m in SIZES_MIB}
        for _ in range(args.repeat):
            for label, path in bindings:
                result = spawn(allreduce_rank, 2, path)
                for m in SIZES_MIB:
                    for kind in ("single", "loop"):
                        runs[label][m][kind].append(result[m][kind])
            if have_perf:
                for m, t in perf_times(args.perf, 2).items():
                    perf[m].append(t)
        report["all_reduce"] = {"backend": runs, "perf": perf}
        print(f"\nall_reduce float32 in place, 2 ranks, {args.repeat} runs "
              "(ms: median [low, high]; perf / backend per run)")
        for m in SIZES_MIB:
            if perf[m]:
                print(f"  {m:>4} MiB {'all_reduce_perf':>16} {spread(perf[m], 1e3, '{:.2f}'):>26}")
            for label in looms:
                for kind in ("loop", "single"):
                    ts = runs[label][m][kind]
                    line = f"  {m:>4} MiB {label + ' ' + kind:>16} {spread(ts, 1e3, '{:.2f}'):>26}"
                    if perf[m]:
                        ratio = [p / t for p, t in zip(perf[m], ts)]
                        line += f"   perf/backend {spread(ratio, 1, '{:.2f}')}"
                    print(line)
        if not have_perf:
            print(f"  (no {args.perf}: build loom's all_reduce_perf target for the comparison)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
