#!/bin/bash
# Measures the shared-memory constants of src/tune/cluster_model.cc on this machine: runs
# ring AllReduce (float32 sum) with each protocol on NRANKS rank processes of one host over a
# range of sizes, and fits time = alpha + beta x bytes per protocol (alpha: the 8-byte time;
# beta: the slope between 1 and 4 MiB, where latency no longer matters):
#   per-hop latency  = (alpha - kOpOverheadUs) / (2 (NRANKS - 1))
#   channel rate     = 2 (NRANKS - 1) / NRANKS / beta            (one channel, GB/s)
#
#   src/tune/calibrate.sh BUILD_DIR [NRANKS]       (default 4 ranks)
#
# Times are medians of many calls (loom_netns_rank). Run it on an idle machine with at least
# NRANKS free cores (ranks spin while they wait); the figures it prints go into kShmSimple /
# kShmLL. The network constants come from run_netns_test.sh --measure the same way.
set -eu
BUILD=${1:?usage: $0 BUILD_DIR [NRANKS]}
N=${2:-4}
RANK=$BUILD/tests/loom_netns_rank
for proto in simple ll; do
  port=$((20000 + RANDOM % 20000))
  id=$(LOOM_COMM_ID=127.0.0.1:$port "$RANK" id)
  out=$(mktemp)
  for ((r = 0; r < N; ++r)); do
    LOOM_ALGO=ring LOOM_PROTO=$proto LOOM_SOCKET_IFNAME=lo "$RANK" time "$N" "$r" "$id" \
      8:2000 1024:2000 8192:1000 65536:300 262144:100 1048576:30 4194304:10 >"$out.$r" &
  done
  wait
  echo "# $proto ring, $N ranks"
  grep "^allreduce" "$out.0"
  awk -v n="$N" -v proto="$proto" '/^allreduce/ { t[$2] = $7 }
    END {
      a = t[8]; b = (t[4194304] - t[1048576]) / (4194304 - 1048576);
      printf "%s: alpha %.1f us, beta %.3g us/B -> hop latency %.2f us (overhead 3), rate %.2f GB/s\n",
        proto, a, b, (a - 3) / (2 * (n - 1)), 2 * (n - 1) / n / b / 1e3 }' "$out.0"
  rm -f "$out" "$out".*
done
