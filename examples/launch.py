"""Spawns the ranks of an example: one process per rank, env:// rendezvous on 127.0.0.1.

Every example calls ``spawn(body, world, *args)`` from its ``__main__``. Each rank sets the
variables torchrun would set, imports loom_torch (which registers the "loom" backend), joins
the default group and runs ``body(rank, world, *args)``. A rank that raises prints its
traceback and exits 1; spawn returns the exit code of the whole run: 0 when every rank
finished cleanly, 1 otherwise (a rank failed, or the ranks ran past ``timeout`` and were
killed), so that ``sys.exit(spawn(...))`` makes the example's check its exit status.
"""

import os
import socket
import sys
import traceback
from datetime import timedelta

import torch.multiprocessing as mp


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rank_main(rank, world, port, body, args, pg_timeout):
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
    try:
        dist.init_process_group("loom", timeout=timedelta(seconds=pg_timeout))
        body(rank, world, *args)
        dist.destroy_process_group()
    except BaseException:  # noqa: BLE001  (the parent only sees the exit code)
        sys.stderr.write(f"--- rank {rank} failed ---\n{traceback.format_exc()}")
        sys.stderr.flush()
        os._exit(1)  # without waiting for peers that may be stuck in a collective


def spawn(body, world, *args, timeout=300, pg_timeout=60) -> int:
    """Runs body on `world` ranks; returns 0 if all of them succeed, else 1."""
    port = free_port()
    ctx = mp.get_context("spawn")
    procs = [
        ctx.Process(target=_rank_main,
                    args=(r, world, port, body, args, pg_timeout))
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
