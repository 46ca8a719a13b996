"""Fault recovery: a rank is SIGKILLed mid-step; the survivors shrink the group and resume.

    python3 examples/recover_from_checkpoint.py [--steps 6] [--every 2] [--kill-step 3]

4 ranks train a small model with data parallelism (gradients summed by all_reduce, SGD with
momentum 1/2, lr 1/16). Every `--every` steps rank 0 writes a checkpoint (model and optimizer
state, the next step's number) to a temporary directory. In step `--kill-step`, after its
backward pass, rank 2 SIGKILLs itself. The other ranks are then in the gradients' all_reduce:
loom reports the death as an exception (DistBackendError naming rank 2), and each survivor
prints how long after the kill it arrived (the check below requires it within
MAX_ERROR_DELAY_S, 1 s). The survivors then

1. shrink the default group with `torch.distributed.shrink_group([2], SHRINK_ABORT)` (loom's
   loomCommShrink: no new rendezvous, ranks 0, 1, 3 become 0, 1, 2),
2. load the last checkpoint and re-shard the data over 3 ranks: every step's global batch of
   12 samples is the same whatever the number of ranks, each rank takes its contiguous share,
3. run the remaining steps to the end.

Check (in the parent, after the ranks exit): one process resumes from the same checkpoint
with the same data schedule and runs to the end; every survivor's final parameters must equal
its parameters, and the loss of every step must equal that of one process running all steps
without interruption, bit for bit. The data make exactness possible: float64 weights that are
multiples of 1/8, small integer inputs, a loss linear in the outputs, summed (not averaged)
gradients, momentum 1/2 and lr 1/16, so no sum rounds and the order in which loom adds the
ranks' gradients cannot change a bit. A mismatch, a survivor that got the error more than
MAX_ERROR_DELAY_S after the kill, or a rank ending other than as planned, exits non-zero.
"""

import argparse
import os
import re
import shutil
import signal
import sys
import tempfile
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.distributed_c10d import SHRINK_ABORT

from launch import _rank_main, context, free_port

WORLD = 4
VICTIM = 2
GLOBAL_BATCH = 12  # divisible by 4 and by 3: the same batch before and after the shrink
MAX_ERROR_DELAY_S = 1.0  # the survivors must get loom's error this soon after the kill
LR = 1.0 / 16
MOMENTUM = 0.5


def make_model():
    g = torch.Generator().manual_seed(0)
    m = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4)).double()
    with torch.no_grad():
        for p in m.parameters():
            p.copy_(torch.randint(-4, 5, p.shape, generator=g).double() / 8)
    return m


def make_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM)


def global_batch(step):
    """The step's samples: the same for any number of ranks."""
    g = torch.Generator().manual_seed(1000 + step)
    x = torch.randint(-2, 3, (GLOBAL_BATCH, 8), generator=g).double()
    t = torch.randint(-1, 2, (GLOBAL_BATCH, 4), generator=g).double()
    return x, t


def shard(step, rank, world):
    x, t = global_batch(step)
    n = GLOBAL_BATCH // world
    return x[rank * n:(rank + 1) * n], t[rank * n:(rank + 1) * n]


def loss_fn(model, x, t):
    return (model(x) * t).sum()


def checkpoint_path(ckpt_dir, step):
    return os.path.join(ckpt_dir, f"step{step:04d}.pt")


def save_checkpoint(ckpt_dir, next_step, model, opt):
    path = checkpoint_path(ckpt_dir, next_step)
    torch.save({"next_step": next_step, "model": model.state_dict(),
                "optimizer": opt.state_dict()}, path + ".tmp")
    os.replace(path + ".tmp", path)  # a checkpoint is whole or absent


def latest_checkpoint(ckpt_dir):
    names = sorted(n for n in os.listdir(ckpt_dir) if re.fullmatch(r"step\d+\.pt", n))
    return os.path.join(ckpt_dir, names[-1]) if names else None


def load_checkpoint(path):
    state = torch.load(path)
    model = make_model()
    model.load_state_dict(state["model"])
    opt = make_optimizer(model)
    opt.load_state_dict(state["optimizer"])
    return state["next_step"], model, opt


# ---- the ranks ------------------------------------------------------------------------------

def train_step(step, model, opt, rank, world, kill_step):
    opt.zero_grad()
    loss = loss_fn(model, *shard(step, rank, world))
    loss.backward()
    if step == kill_step and dist.get_rank() == VICTIM and world == WORLD:
        with open(os.path.join(os.environ["CKPT_DIR"], "killed_at"), "w") as f:
            f.write(repr(time.time()))
        os.kill(os.getpid(), signal.SIGKILL)  # mid-step: the others are in the all_reduce
    flat = torch.cat([p.grad.reshape(-1) for p in model.parameters()] + [loss.detach().view(1)])
    dist.all_reduce(flat)  # gradients summed over the global batch, and the loss with them
    offset = 0
    for p in model.parameters():
        p.grad.copy_(flat[offset:offset + p.numel()].view_as(p))
        offset += p.numel()
    opt.step()
    return flat[-1].item()


def run_steps(first, model, opt, rank, world, steps, every, ckpt_dir, kill_step, losses):
    for step in range(first, steps):
        losses[step] = train_step(step, model, opt, rank, world, kill_step)
        if (step + 1) % every == 0 and step + 1 < steps:
            if dist.get_rank() == 0:
                save_checkpoint(ckpt_dir, step + 1, model, opt)
            dist.barrier()  # the checkpoint is on disk before anyone goes past it


def rank_main(rank, world, steps, every, kill_step, ckpt_dir):
    os.environ["CKPT_DIR"] = ckpt_dir
    say = print if rank == 0 else (lambda *a, **k: None)
    say(f"recover_from_checkpoint: {world} ranks on the loom backend, {steps} steps, "
        f"checkpoint every {every}, rank {VICTIM} killed in step {kill_step}")
    model = make_model()
    opt = make_optimizer(model)
    losses = {}
    try:
        run_steps(0, model, opt, rank, world, steps, every, ckpt_dir, kill_step, losses)
        raise AssertionError("the training finished although a rank was killed")
    except dist.DistBackendError as e:
        arrived = time.time()
        error = str(e)
        with open(os.path.join(ckpt_dir, "killed_at")) as f:
            delay = arrived - float(f.read())
        # One write per line, so that the ranks' lines do not interleave.
        sys.stdout.write(f"  rank {rank}: DistBackendError {delay * 1e3:.0f} ms after the kill"
                         + (f": {error.strip().splitlines()[0]}\n" if rank == 0 else "\n"))
        sys.stdout.flush()
    # loom's message names the dead rank; every survivor must exclude the same list (loom
    # refuses different lists).
    dead = sorted({int(r) for r in re.findall(r"rank (\d+) died", error)})
    assert dead == [VICTIM], f"rank {rank}: expected the message to name rank {VICTIM}: {error}"
    t0 = time.perf_counter()
    group = dist.shrink_group(dead, shrink_flags=SHRINK_ABORT)
    new_rank, new_world = group.rank(), group.size()
    shrink_ms = (time.perf_counter() - t0) * 1e3
    path = latest_checkpoint(ckpt_dir)
    first, model, opt = load_checkpoint(path)
    say(f"  shrink_group({dead}, SHRINK_ABORT): {new_world} ranks in {shrink_ms:.0f} ms; "
        f"resuming from {os.path.basename(path)} (step {first}), "
        f"{GLOBAL_BATCH // new_world} samples per rank instead of {GLOBAL_BATCH // world}")
    run_steps(first, model, opt, new_rank, new_world, steps, every, ckpt_dir, kill_step, losses)
    torch.save({"params": [p.detach() for p in model.parameters()], "losses": losses,
                "resumed_from": path, "error_delay_s": delay},
               os.path.join(ckpt_dir, f"final_rank{rank}.pt"))


# ---- the parent: spawn, then check ----------------------------------------------------------

def spawn_with_victim(args, ckpt_dir, timeout=120):
    """launch.spawn, except that rank VICTIM is meant to die of SIGKILL."""
    port = free_port()
    ctx = context()
    body_args = (args.steps, args.every, args.kill_step, ckpt_dir)
    procs = [ctx.Process(target=_rank_main, args=(r, WORLD, port, rank_main, body_args, 60))
             for r in range(WORLD)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout)
    ok = True
    for r, p in enumerate(procs):
        if p.is_alive():
            p.kill()
            p.join()
            print(f"FAILED: rank {r} still running after {timeout} s (killed)", file=sys.stderr)
            ok = False
            continue
        expected = -signal.SIGKILL if r == VICTIM else 0
        if p.exitcode != expected:
            print(f"FAILED: rank {r} exited with {p.exitcode}, not {expected}", file=sys.stderr)
            ok = False
    return ok


def reference(first, model, opt, steps):
    """One process, every step on the whole global batch."""
    losses = {}
    for step in range(first, steps):
        opt.zero_grad()
        loss = loss_fn(model, *global_batch(step))
        loss.backward()
        opt.step()
        losses[step] = loss.item()
    return losses, [p.detach() for p in model.parameters()]


def check(args, ckpt_dir):
    finals = {r: torch.load(os.path.join(ckpt_dir, f"final_rank{r}.pt"))
              for r in range(WORLD) if r != VICTIM}
    path = finals[0]["resumed_from"]
    first, model, opt = load_checkpoint(path)
    _, resumed_params = reference(first, model, opt, args.steps)
    model = make_model()
    full_losses, full_params = reference(0, model, make_optimizer(model), args.steps)
    ok = True
    for r, final in finals.items():
        for i, (p, q) in enumerate(zip(final["params"], resumed_params)):
            if not torch.equal(p, q):
                print(f"MISMATCH: rank {r}, parameter {i} differs from the reference resumed "
                      f"from the checkpoint by {(p - q).abs().max()}", file=sys.stderr)
                ok = False
        if final["losses"] != full_losses:
            print(f"MISMATCH: rank {r}'s losses {final['losses']} differ from the "
                  f"uninterrupted run's {full_losses}", file=sys.stderr)
            ok = False
    slowest = max(final["error_delay_s"] for final in finals.values())
    if slowest > MAX_ERROR_DELAY_S:
        print(f"FAILED: a survivor got the error {slowest:.2f} s after the kill, more than "
              f"{MAX_ERROR_DELAY_S:g} s", file=sys.stderr)
        ok = False
    else:
        print(f"  every survivor got loom's error within {slowest * 1e3:.0f} ms of the kill "
              f"(the bound: {MAX_ERROR_DELAY_S:g} s)")
    if not all(torch.equal(p, q) for p, q in zip(resumed_params, full_params)):
        print("MISMATCH: the resumed reference differs from the uninterrupted one",
              file=sys.stderr)
        ok = False
    print("  loss per step (survivors = uninterrupted run): "
          + " ".join(f"{full_losses[s]:g}" for s in range(args.steps)))
    if ok:
        print(f"  the {len(finals)} survivors' parameters after step {args.steps - 1} equal, bit "
              f"for bit, one process resumed from {os.path.basename(path)} and one process "
              f"that never stopped")
    return ok


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--every", type=int, default=2, help="checkpoint every N steps")
    parser.add_argument("--kill-step", type=int, default=3, help="step in which rank 2 dies")
    args = parser.parse_args()
    if not args.every <= args.kill_step < args.steps:
        parser.error("need --every <= --kill-step < --steps (a checkpoint before the kill)")
    ckpt_dir = tempfile.mkdtemp(prefix="loom_recover_")
    try:
        start = time.perf_counter()
        ok = spawn_with_victim(args, ckpt_dir)
        ok = ok and check(args, ckpt_dir)
        print(f"recover_from_checkpoint: {'OK' if ok else 'FAILED'} "
              f"({time.perf_counter() - start:.1f} s)")
    finally:
        shutil.rmtree(ckpt_dir, ignore_errors=True)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
