#!/usr/bin/env python3
"""loom-trace-merge on fixture dumps with known divergences (tests/tools/fixtures).

Usage: trace_merge_test.py TOOL FIXTURE_DIR
"""
import os
import subprocess
import sys
import unittest

TOOL, FIXTURES = sys.argv[1], sys.argv[2]
STUCK = [f"stuck_rank{r}.log" for r in range(4)]


def merge(files, options=()):
    """(exit status, stdout lines, stderr) of the tool run on fixture files."""
    argv = [sys.executable, TOOL] + [os.path.join(FIXTURES, f) for f in files] + list(options)
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    return done.returncode, done.stdout.splitlines(), done.stderr


class TraceMerge(unittest.TestCase):
    def test_a_rank_that_stops_calling_is_named(self):
        code, out, _ = merge(STUCK)
        self.assertEqual(code, 1, out)
        self.assertEqual(out[0], "comm 'loom' (id 00000000000000a1), 4 ranks: dumps of ranks 0-3")
        self.assertIn("first divergence at #21: ranks 0-2 issued AllReduce #21 (count 675920, "
                      "float32, sum); rank 3 stops at #20 (AllGather, completed)", out)
        marked = [line for line in out if line.startswith(">")]
        self.assertEqual(len(marked), 1, out)
        self.assertEqual(marked[0].split(), [">", "#21", "AllReduce(count", "675920,", "float32,",
                                             "sum)", "00:53:20.800", "running", "running",
                                             "running", "-"])
        # Rank 3 kept #13, which the others' rings had dropped.
        row13 = next(line for line in out if line.split()[0] == "#13")
        self.assertEqual(row13.split()[-7:], ["(not", "kept)", "(not", "kept)", "(not", "kept)",
                                              "completed"])
        self.assertIn("rank 3 dumped for: loomCommAbort", out)

    def test_without_the_stuck_rank_the_others_agree(self):
        code, out, _ = merge(["stuck_rank0.log", "stuck_rank1.log"])
        self.assertEqual(code, 0, out)
        self.assertEqual(out[0], "comm 'loom' (id 00000000000000a1), 4 ranks: dumps of ranks 0-1; "
                                 "no dump of ranks 2-3")
        self.assertIn("the ranks agree on every call kept; all completed up to #20", out)

    def test_calls_that_differ_are_named_per_rank(self):
        code, out, _ = merge(["mismatch.log"], ["--comm", "loom"])
        self.assertEqual(code, 1, out)
        self.assertIn("first divergence at #5: the ranks issued different calls as #5: "
                      "ranks 0, 2 AllReduce(count 1024, float32, sum); "
                      "rank 1 AllReduce(count 1000, float32, sum)", out)
        # A send/recv ring is not a divergence: each rank names its own side.
        row3 = next(line for line in out if line.split()[0] == "#3")
        self.assertEqual(row3.split()[-6:], ["Send>1", "completed", "Send>2", "completed",
                                             "Send>0", "completed"])
        self.assertFalse(any("comm 'tp'" in line for line in out), out)

    def test_each_communicator_gets_its_table(self):
        code, out, _ = merge(["mismatch.log"], ["--comm", "tp"])
        self.assertEqual(code, 0, out)
        self.assertEqual(out[0], "comm 'tp' (id 00000000000000c3), 2 ranks: dumps of ranks 0-1")
        self.assertIn("the ranks agree on every call kept; all completed up to #3", out)

    def test_jobs_in_one_log_stay_apart(self):
        code, out, _ = merge(["two_jobs.log"])
        self.assertEqual(code, 1, out)
        heads = [line for line in out if line.startswith("comm ")]
        self.assertEqual(heads, ["comm 'loom' (id 00000000000000d4), 2 ranks: dumps of ranks 0-1",
                                 "comm 'loom' (id 00000000000000e5), 2 ranks: dumps of ranks 0-1"])
        self.assertIn("the ranks agree on every call kept; all completed up to #3", out)
        self.assertIn("first divergence at #3: rank 0 issued AllReduce #3 (count 8, float32, sum); "
                      "rank 1 stops at #2 (AllReduce, completed)", out)

    def test_context_keeps_the_rows_before_the_divergence(self):
        code, out, _ = merge(STUCK, ["--context", "2"])
        self.assertEqual(code, 1)
        rows = [line.split()[1] if line.startswith(">") else line.split()[0] for line in out
                if line.lstrip(">").split()[0].startswith("#")]
        self.assertEqual(rows, ["#19", "#20", "#21"], out)

    def test_no_dump_is_an_error(self):
        code, out, err = merge(["../trace_merge_test.py"])
        self.assertEqual(code, 2)
        self.assertIn("no flight-record dump found", err)


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0]])
