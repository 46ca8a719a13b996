"""Starts the ranks of an example: one process per rank, env:// rendezvous on 127.0.0.1.

Every example calls ``spawn(body, world, *args)`` from its ``__main__``. Each rank sets the
variables torchrun would set, imports loom_torch (which registers the "loom" backend), joins
the default group and runs ``body(rank, world, *args)``. A rank that raises prints its
traceback and exits 1; spawn returns the exit code of the whole run: 0 when every rank
finished cleanly, 1 otherwise (a rank failed, or the ranks ran past ``timeout`` and were
killed), so that ``sys.exit(spawn(...))`` makes the example's check its exit status.
``bind_cpu=True`` binds the default group to a device, so that torch makes new groups by
splitting it.

The classic-failure examples call ``demonstrate(name, body, world, fault)`` instead: it runs
body on each backend asked for (loom, gloo) with a short group timeout, prints what every rank
got (an exception and its message, or nothing before it was killed), and checks that on loom
every rank failed with a message that names the rank at fault.
"""

import argparse
import os
import queue
import re
import socket
import sys
import tempfile
import time
import traceback
from datetime import timedelta

import torch.multiprocessing as mp


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def context():
    """The multiprocessing context that starts the ranks: a fork server that has imported torch
    once, so that each rank is a fork of it instead of a fresh interpreter importing torch
    again (seconds of CPU per rank, most of an example's cost on a few busy cores). The
    server imports nothing else, starts no threads and touches no communicator; each rank
    imports loom_torch and joins its group after the fork."""
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(["torch", "torch.distributed"])
    return ctx


def _rank_main(rank, world, port, body, args, pg_timeout, bind_cpu=False):
    os.environ.update(
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
        RANK=str(rank),
        WORLD_SIZE=str(world),
        LOCAL_RANK=str(rank),
        LOCAL_WORLD_SIZE=str(world),
    )
    import torch
    import torch.distributed as dist

    import loom_torch  # noqa: F401  (registers the "loom" backend)

    # Several ranks share few cores: one compute thread each keeps them from fighting.
    torch.set_num_threads(1)
    # bind_cpu binds the default group to a device (eager init): torch then makes every
    # new_group by splitting it, which on loom is loomCommSplit (no new rendezvous).
    extra = {"device_id": torch.device("cpu", 0)} if bind_cpu else {}
    try:
        dist.init_process_group("loom", timeout=timedelta(seconds=pg_timeout), **extra)
        body(rank, world, *args)
        dist.destroy_process_group()
    except BaseException:  # noqa: BLE001  (the parent only sees the exit code)
        sys.stderr.write(f"--- rank {rank} failed ---\n{traceback.format_exc()}")
        sys.stderr.flush()
        os._exit(1)  # without waiting for peers that may be stuck in a collective


def spawn(body, world, *args, timeout=300, pg_timeout=60, bind_cpu=False) -> int:
    """Runs body on `world` ranks; returns 0 if all of them succeed, else 1."""
    port = free_port()
    ctx = context()
    procs = [
        ctx.Process(target=_rank_main,
                    args=(r, world, port, body, args, pg_timeout, bind_cpu))
        for r in range(world)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout)
    hung = [r for r, p in enumerate(procs) if p.is_alive()]
    for p in procs:
        if p.is_alive():
            p.kill()
            p.join()
    failed = [r for r, p in enumerate(procs) if p.exitcode != 0 and r not in hung]
    if hung:
        print(f"FAILED: ranks {hung} still running after {timeout} s (killed)", file=sys.stderr)
    if failed:
        print(f"FAILED: ranks {failed} exited non-zero", file=sys.stderr)
    return 1 if hung or failed else 0


# ---- the classic failures: run a faulty program, report what every rank sees -----------------

STARTUP = 300  # seconds for the ranks to join the group (on 2 busy cores importing torch is slow)
GRACE = 30  # seconds, past the group timeout, for the ranks to report and end


def _failure_rank_main(body, backend, rank, world, port, timeout, results):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    import torch
    import torch.distributed as dist

    import loom_torch  # noqa: F401

    torch.set_num_threads(1)
    start = time.monotonic()
    try:
        dist.init_process_group(backend, rank=rank, world_size=world,
                                timeout=timedelta(seconds=timeout))
        results.put((rank, "ready", None, None))
        start = time.monotonic()
        note = body(rank, world)
        results.put((rank, None, time.monotonic() - start, note or ""))
    except Exception as e:  # noqa: BLE001  (what the user sees is the point)
        results.put((rank, type(e).__name__, time.monotonic() - start, " ".join(str(e).split())))
    results.close()
    results.join_thread()  # the report is out of this process
    # Like a training script that raised under torchrun: gone at once, without
    # destroy_process_group (a peer may still be stuck in a collective).
    os._exit(0)


def _trim(message, limit=400):
    message = re.sub(r"\[/\S*/(gloo/\S+)\]", r"[.../\1]", message)  # gloo's build path
    return message if len(message) <= limit else message[:limit] + " ..."


def run_failure(body, world, backend, timeout):
    """Runs body on `world` ranks of `backend` with the group timeout given; returns, per rank,
    (exception type or None, seconds, message), or (None, None, why) for a rank that never
    reported. A rank that raises leaves at once, as a training script's process would."""
    ctx = context()
    results = ctx.Queue()
    port = free_port()
    procs = [ctx.Process(target=_failure_rank_main,
                         args=(body, backend, r, world, port, timeout, results))
             for r in range(world)]
    for p in procs:
        p.start()
    # The group timeout counts from the moment every rank has joined the group.
    ready, outcome = set(), {}
    deadline = time.monotonic() + STARTUP
    while len(outcome) < world and time.monotonic() < deadline:
        try:
            rank, kind, seconds, text = results.get(timeout=max(0.1, deadline - time.monotonic()))
        except queue.Empty:
            break
        if kind == "ready":
            ready.add(rank)
            if len(ready) == world:
                deadline = time.monotonic() + timeout + GRACE
        else:
            outcome[rank] = (kind, seconds, text)
    for r, p in enumerate(procs):
        if p.is_alive():
            p.join(max(0.0, deadline - time.monotonic()))
        if p.is_alive():
            p.kill()
            p.join()
            outcome.setdefault(r, (None, None, f"no answer {timeout + GRACE:g} s after all "
                                               f"ranks joined (group timeout + {GRACE} s); "
                                               "killed"))
        outcome.setdefault(r, (None, None, f"exited with code {p.exitcode}, no report"))
    return outcome


def named_ranks(message):
    return {int(n) for n in re.findall(r"\brank (\d+)", message)}


def demonstrate(name, body, world, fault, argv=None):
    """The main of a classic-failure example: runs body on each backend asked for, prints what
    every rank got, and checks loom's part: every rank must fail (none may hang or finish), and
    the message of every rank must name one of the ranks `fault` gives for it (rank -> ranks,
    or None for a rank whose own error is the cause). A --world other than `world` runs the
    program without the check. Returns the exit code."""
    doc = sys.modules["__main__"].__doc__ or name
    parser = argparse.ArgumentParser(description=doc.split("\n")[0])
    parser.add_argument("--world", type=int, default=world,
                        help=f"ranks; only {world} is checked")
    parser.add_argument("--backend", nargs="+", default=["loom", "gloo"],
                        choices=["loom", "gloo"], help="the backends to run it on, in order")
    parser.add_argument("--timeout", type=float, default=10.0,
                        help="the group timeout, seconds (init_process_group(timeout=...))")
    args = parser.parse_args(argv)
    log = os.environ.get("LOOM_DEBUG_FILE")
    if not log:
        # loom's warnings and flight records (docs/debugging.md) go to files, not the report.
        log = os.path.join(tempfile.mkdtemp(prefix=f"{name}-"), "loom-%p.log")
        os.environ["LOOM_DEBUG_FILE"] = log
    world_checked, world = world, args.world
    checked = world == world_checked
    problems = []
    for backend in args.backend:
        outcome = run_failure(body, world, backend, args.timeout)
        print(f"\n{name} on {backend} ({world} ranks, group timeout {args.timeout:g} s):")
        for r in range(world):
            kind, seconds, text = outcome[r]
            head = f"{kind} after {seconds:.1f} s: " if kind else (
                f"finished after {seconds:.1f} s; " if seconds is not None else "")
            print(f"  rank {r}: {head}{_trim(text)}")
            if backend != "loom" or not checked:
                continue
            if kind is None:
                problems.append(f"rank {r} got no error")
            elif fault[r] is not None and not named_ranks(text) & fault[r]:
                problems.append(f"rank {r}'s message names none of ranks {sorted(fault[r])}")
    if "loom" in args.backend:
        print(f"\nloom's log and flight records: {os.path.dirname(log) or '.'}")
        if not checked:
            print(f"{name}: not checked on {world} ranks (the check is for {world_checked})")
        elif problems:
            print(f"{name}: FAILED: " + "; ".join(problems))
            return 1
        else:
            print(f"{name}: OK (every rank failed; every message names the rank at fault)")
    return 0
