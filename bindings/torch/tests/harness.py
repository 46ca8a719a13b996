"""Runs a test body on N ranks, each in its own process, with loom as the backend.

Every rank calls ``body(rank, world, *args)`` inside an initialised default group (TCP store on
a free port of 127.0.0.1, the env:// variables set as torchrun sets them). The parent fails the
test with the ranks' own tracebacks when any rank raises or exits non-zero, and when the ranks
have not finished within ``timeout`` seconds (then it kills them: a test never hangs CI).
"""

import multiprocessing as mp
import os
import socket
import traceback
from datetime import timedelta

_CTX = mp.get_context("spawn")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _child(body, rank, world, port, args, pg_timeout, import_package, bind_cpu, errors):
    try:
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

        if import_package:
            import loom_torch  # noqa: F401  (registers "loom")

        # bind_cpu: the default group is bound to the CPU device (eager init), so torch makes
        # new groups by splitting it.
        extra = {"device_id": torch.device("cpu", 0)} if bind_cpu else {}
        dist.init_process_group("loom", timeout=timedelta(seconds=pg_timeout), **extra)
        body(rank, world, *args)
        if dist.is_initialized():
            dist.destroy_process_group()
    except BaseException:  # noqa: BLE001  (reported to the parent)
        errors.put((rank, traceback.format_exc()))
        raise SystemExit(1)


def run_ranks(body, world, *args, timeout=240, pg_timeout=60, expect_exit=None,
              import_package=True, bind_cpu=False):
    """Runs body on `world` ranks; raises AssertionError with every failing rank's traceback.

    expect_exit maps ranks to the exit code they are meant to end with (a rank that kills
    itself on purpose); other ranks must exit 0. import_package=False leaves finding the
    backend to torch (the entry point of the installed package).
    """
    expect_exit = expect_exit or {}
    port = free_port()
    errors = _CTX.Queue()
    procs = [
        _CTX.Process(
            target=_child,
            args=(body, r, world, port, args, pg_timeout, import_package, bind_cpu, errors),
        )
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
    reports = []
    while not errors.empty():
        rank, tb = errors.get()
        reports.append(f"--- rank {rank} ---\n{tb}")
    bad = [
        (r, p.exitcode)
        for r, p in enumerate(procs)
        if r not in hung and p.exitcode != expect_exit.get(r, 0)
    ]
    if hung or bad or reports:
        raise AssertionError(
            f"ranks still running after {timeout} s: {hung}; unexpected exit codes "
            f"(rank, code): {bad}\n" + "\n".join(reports)
        )
