"""Runs PyTorch's own distributed test suite (torch.testing._internal.distributed.distributed_test)
against a backend: its CPU tests, the way PyTorch's test/distributed/test_distributed_spawn.py
runs them for gloo.

    python3 bindings/torch/tests/torch_suite.py --backend loom --world-size 2 [-k PATTERN ...]
    python3 bindings/torch/tests/torch_suite.py --compare loom gloo --world-size 2

It needs the `expecttest` package (pip), which the suite imports. Every test starts WORLD_SIZE
processes that rendezvous through a file. `--compare` runs the suite once per backend (one
pytest run each, results as JUnit XML) and prints passed / failed / skipped per backend and the
tests the second backend passes and the first does not.
Not a pytest test file itself (its name does not start with test_): the whole suite takes far
longer than CI allows.

The suite gates tests on backend names: those it runs for "gloo" only stay skipped on loom (the
comparison lists them apart), unless --gloo-gates lets them run on loom too (test bodies that
check the backend by name at run time then take their non-gloo branch, which fails some of
them). For a plugin backend, "loom" is added to the suite's feature sets for plugins, DDP,
subgroups and devices, as gloo is in them: the tests that also need CUDA skip themselves on a
machine without it.
"""

import argparse
import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET


def _prepare_module():
    """Builds the test class at import (the spawned ranks import this file too)."""
    backend = os.environ.get("BACKEND")
    if not backend:
        return
    import torch
    import torch.testing._internal.common_distributed as common

    common.TIMEOUT_DEFAULT = int(os.environ.get("LOOM_SUITE_TIMEOUT", "120"))
    if backend not in ("gloo", "nccl", "ucc", "mpi"):
        import importlib

        importlib.import_module(os.environ.get("LOOM_SUITE_PLUGIN", "loom_torch"))
        for feature in ("plugin", "ddp", "subgroup", "gpu"):
            common.DistTestCases.backend_feature[feature].add(backend)
    gloo_gates = os.environ.get("LOOM_SUITE_GLOO_GATES") == "1"
    if gloo_gates:
        # The suite reads BACKEND when it decorates its tests: as "gloo", the tests it keeps
        # for gloo are not skipped; the module's BACKEND then names the backend under test,
        # which every test's init_process_group uses.
        os.environ["BACKEND"] = "gloo"
    try:
        import torch.testing._internal.distributed.distributed_test as suite
    finally:
        os.environ["BACKEND"] = backend
    suite.BACKEND = backend
    DistributedTest, TestDistBackend = suite.DistributedTest, suite.TestDistBackend

    torch.backends.cuda.matmul.allow_tf32 = False

    class TestDistBackendWithSpawn(TestDistBackend, DistributedTest._DistTestBase):
        def setUp(self):
            super().setUp()
            if os.environ.get("LOOM_SUITE_START") == "spawn":
                self._spawn_processes()
            else:
                # Forked ranks start in a second instead of importing torch again (tens of
                # seconds on a loaded machine); the parent has no communicator yet.
                self._start_processes(torch.multiprocessing.get_context("fork").Process)

    # The spawned ranks find the class by name in this module.
    TestDistBackendWithSpawn.__qualname__ = "TestDistBackendWithSpawn"
    globals()["TestDistBackendWithSpawn"] = TestDistBackendWithSpawn


_prepare_module()


def run_suite(backend, world_size, patterns, xml_path, timeout, start, gloo_gates):
    env = dict(os.environ, BACKEND=backend, WORLD_SIZE=str(world_size),
               LOOM_SUITE_TIMEOUT=str(timeout), LOOM_SUITE_START=start,
               LOOM_SUITE_GLOO_GATES="1" if gloo_gates else "0")
    with tempfile.TemporaryDirectory() as tmp:
        env["TEMP_DIR"] = tmp
        cmd = [sys.executable, "-m", "pytest", os.path.abspath(__file__), "-q", "-p",
               "no:cacheprovider", f"--junitxml={xml_path}", "-o", "junit_family=xunit1"]
        for k in patterns:
            cmd += ["-k", k]
        return subprocess.call(cmd, env=env)


def read_results(xml_path):
    """{test name: 'passed' | 'failed' | 'skipped'}"""
    results = {}
    for case in ET.parse(xml_path).getroot().iter("testcase"):
        name = case.get("name")
        if case.find("failure") is not None or case.find("error") is not None:
            results[name] = "failed"
        elif case.find("skipped") is not None:
            results[name] = "skipped"
        else:
            results[name] = "passed"
    return results


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--backend", default="loom")
    ap.add_argument("--compare", nargs=2, metavar=("BACKEND", "REFERENCE"))
    ap.add_argument("--world-size", type=int, default=2)
    ap.add_argument("-k", action="append", default=[], help="pytest -k expression")
    ap.add_argument("--timeout", type=int, default=120, help="seconds per test")
    ap.add_argument("--start", choices=("fork", "spawn"), default="fork",
                    help="how ranks start: fork (fast) or spawn (as PyTorch's CI)")
    ap.add_argument("--gloo-gates", action="store_true",
                    help="also run the tests the suite keeps for gloo (see above)")
    ap.add_argument("--out", default=".", help="directory for the JUnit XML files")
    args = ap.parse_args()
    backends = args.compare or [args.backend]
    results = {}
    for b in backends:
        gates = "-gloo-gates" if args.gloo_gates and b != "gloo" else ""
        xml = os.path.join(args.out, f"suite-{b}{gates}-{args.world_size}.xml")
        run_suite(b, args.world_size, args.k, xml, args.timeout, args.start, bool(gates))
        results[b] = read_results(xml)
    print(f"\nworld size {args.world_size}")
    print(f"{'backend':>8} {'passed':>7} {'failed':>7} {'skipped':>8}")
    for b in backends:
        counts = [sum(1 for v in results[b].values() if v == s)
                  for s in ("passed", "failed", "skipped")]
        print(f"{b:>8} {counts[0]:>7} {counts[1]:>7} {counts[2]:>8}")
    if args.compare:
        mine, ref = (results[b] for b in args.compare)
        for state in ("failed", "skipped"):
            names = sorted(n for n, v in ref.items() if v == "passed" and mine.get(n) == state)
            print(f"\n{args.compare[1]} passes, {args.compare[0]} {state} ({len(names)}):")
            for n in names:
                print("  " + n)
    return 0


if __name__ == "__main__":
    sys.exit(main())
