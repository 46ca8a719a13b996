#!/usr/bin/env python3
"""Runs one loom perf binary and checks what it printed, the way an nccl-tests parser reads it.

Modes: threads (-t N in one process), env (N processes with torchrun's RANK/WORLD_SIZE and
LOOM_COMM_ID), mpi (mpirun -np N). Passes when every process exits 0, the table has rows,
every #wrong column is 0 and the footer says "Out of bounds values : 0 OK". With --json the
-J report is checked against the table too. --expect-refusal TEXT instead expects a non-zero
exit (not a crash) with TEXT on stderr.
"""
import argparse
import json
import os
import random
import socket
import subprocess
import sys
import tempfile

ROW_FIELDS = 13  # size count type redop root, then time algbw busbw #wrong twice


def free_port():
    """A free loopback port below the kernel's ephemeral range, so no port-0 listener or outgoing
    connection of a test running beside this one takes it before rank 0 binds it."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    candidates = [random.randrange(20000, low) for _ in range(200)] if low > 21000 else []
    for port in candidates + [0]:
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return s.getsockname()[1]
    raise RuntimeError("no free loopback port")


def parse_table(text, fmt="nccl"):
    """Table rows as lists of fields. nccl: nccl-tests' 13 columns. p2p: p2p_vs_coll's
    collective size count type, then time/busbw for native, ring (+ratio), direct (+ratio),
    #wrong."""
    rows = []
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        fields = line.split()
        if len(fields) != ROW_FIELDS:
            raise SystemExit(f"row with {len(fields)} fields, want {ROW_FIELDS}: {line!r}")
        if fmt == "nccl":
            int(fields[0]), int(fields[1]), int(fields[4])
            for i in (5, 6, 7, 9, 10, 11):
                float(fields[i])
        else:
            int(fields[1]), int(fields[2]), int(fields[12])
            for i in (4, 5, 6, 7, 9, 10):
                float(fields[i])
        rows.append(fields)
    return rows


def wrong_fields(row, fmt):
    return [row[8], row[12]] if fmt == "nccl" else [row[12]]


def run(cmd, env, timeout):
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=["threads", "env", "mpi"], default="threads")
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--mpirun", default="mpirun")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--format", choices=["nccl", "p2p"], default="nccl")
    ap.add_argument("--expect-refusal")
    ap.add_argument("--timeout", type=int, default=170)
    ap.add_argument("cmd", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    cmd = a.cmd[1:] if a.cmd and a.cmd[0] == "--" else a.cmd
    env = dict(os.environ)

    if a.expect_refusal:
        p = run(cmd, env, a.timeout)
        if p.returncode <= 0 or a.expect_refusal not in p.stderr:
            raise SystemExit(f"want a refusal with {a.expect_refusal!r}, got rc={p.returncode}"
                             f"\nstdout:\n{p.stdout}\nstderr:\n{p.stderr}")
        print(p.stderr)
        return

    tmp = tempfile.mkdtemp(prefix="loom_perf_check_")
    json_path = os.path.join(tmp, "out.json")
    # gloo_coll_perf's ranks meet in a fresh file store; the other binaries ignore it.
    env["LOOM_PERF_GLOO_STORE"] = os.path.join(tmp, "gloo_store")
    if a.json:
        cmd = cmd + ["-J", json_path]

    if a.mode == "threads":
        procs = [run(cmd + ["-t", str(a.ranks)], env, a.timeout)]
    elif a.mode == "mpi":
        env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
                   OMPI_MCA_rmaps_base_oversubscribe="1")
        # Sanitizer builds: Open MPI's own allocations outlive MPI_Finalize and would fail
        # LeakSanitizer; the harness's leaks are checked by the thread and env runs.
        if "ASAN_OPTIONS" in env:
            env["ASAN_OPTIONS"] += ":detect_leaks=0"
        procs = [run([a.mpirun, "-np", str(a.ranks), "--oversubscribe", "--bind-to", "none",
                      "-x", "LOOM_SOCKET_IFNAME", "-x", "LOOM_TIMEOUT",
                      "-x", "LOOM_PERF_GLOO_STORE"] + cmd, env, a.timeout)]
    else:
        env["LOOM_COMM_ID"] = f"127.0.0.1:{free_port()}"
        env["WORLD_SIZE"] = str(a.ranks)
        running = []
        for r in range(a.ranks):
            e = dict(env, RANK=str(r), LOCAL_RANK=str(r))
            running.append(subprocess.Popen(cmd, env=e, stdout=subprocess.PIPE,
                                            stderr=subprocess.PIPE, text=True))
        procs = []
        for p in running:
            out, err = p.communicate(timeout=a.timeout)
            procs.append(subprocess.CompletedProcess(cmd, p.returncode, out, err))

    for i, p in enumerate(procs):
        if p.returncode != 0:
            raise SystemExit(f"process {i} exited {p.returncode}\nstdout:\n{p.stdout}"
                             f"\nstderr:\n{p.stderr}")
    out = procs[0].stdout
    print(out)
    rows = parse_table(out, a.format)
    if not rows:
        raise SystemExit("no table rows")
    wrong = [r for r in rows if any(f != "0" for f in wrong_fields(r, a.format))]
    if wrong:
        raise SystemExit(f"rows with wrong elements: {wrong}")
    if "# Out of bounds values : 0 OK" not in out or "# Avg bus bandwidth" not in out:
        raise SystemExit("footer missing or not OK")
    for i, p in enumerate(procs[1:], 1):
        if parse_table(p.stdout, a.format):
            raise SystemExit(f"process {i} printed table rows; only rank 0 should")
    if a.json:
        with open(json_path) as f:
            doc = json.load(f)
        results = doc["results"]
        if len(results) != len(rows):
            raise SystemExit(f"JSON has {len(results)} results, table {len(rows)} rows")
        for res, row in zip(results, rows):
            if res["size"] != int(row[0]) or res["count"] != int(row[1]):
                raise SystemExit(f"JSON {res} disagrees with row {row}")
            for k in ("out_of_place", "in_place"):
                if res[k]["nwrong"] != 0:
                    raise SystemExit(f"JSON {k} has wrong elements: {res}")
        if doc["out_of_bounds"]["okay"] != "true" or len(doc["config"]["devices"]) != a.ranks:
            raise SystemExit(f"JSON summary wrong: {doc['out_of_bounds']}, "
                             f"{len(doc['config']['devices'])} devices")
        print(f"JSON ok: {len(results)} results")


if __name__ == "__main__":
    main()
