#!/bin/bash
# Multi-host test in network namespaces: HOSTS namespaces ("hosts") on a bridge, each with its
# own veth and address, egress rate-limited with tbf; 2 rank processes per host, numbered
# interleaved across hosts (rank r on host r % HOSTS), LOOM_HOSTID per host and
# LOOM_SOCKET_IFNAME on the veth. Checks that every collective is right (loom_coll_rank) and
# that the ring crosses each host boundary exactly once (the INFO log's "ring 0:" line).
#
#   run_netns_test.sh COLL_RANK_BINARY NETNS_RANK_BINARY [--measure]
#
# --measure also times AllReduce (loom_netns_rank) at 8 B, 1 MiB and 64 MiB with the tuner's
# choice, the flat ring and hierarchical AllReduce, and prints the figures.
# Environment: LOOM_NETNS_HOSTS (default 3), LOOM_NETNS_RATE (tbf rate, default 1gbit),
# LOOM_NETNS_TBF (the rest of the tbf line, default "burst 1mb latency 20ms": a shallower
# queue cost hier 20% of its bandwidth), LOOM_NETNS_MTU, LOOM_NETNS_SYSCTL (key=value words set
# in every namespace); for --measure LOOM_NETNS_SIZES (BYTES:ITERS list), LOOM_NETNS_ALGOS
# ("tuner ring hier"), LOOM_NETNS_EXTRA_ENV (more VAR=value for the ranks), LOOM_NETNS_NSTAT
# (a regex of TCP counters to print per host afterwards), LOOM_NETNS_PER_HOST (default 2),
# and LOOM_NETNS_ONLY_MEASURE=1 to skip the correctness runs.
# Exit 77 (ctest's SKIP_RETURN_CODE) when not root or without netns/veth/bridge/tbf support.
# The namespaces, bridge and rank processes are removed on any exit.
set -u
COLL_RANK=${1:?usage: $0 COLL_RANK_BINARY NETNS_RANK_BINARY [--measure]}
NETNS_RANK=${2:?usage: $0 COLL_RANK_BINARY NETNS_RANK_BINARY [--measure]}
MEASURE=${3:-}
HOSTS=${LOOM_NETNS_HOSTS:-3}
RATE=${LOOM_NETNS_RATE:-1gbit}
PER_HOST=${LOOM_NETNS_PER_HOST:-2}
NRANKS=$((HOSTS * PER_HOST))
TAG=lm$(($$ % 100000))  # short: interface names have 15 characters at most
BRIDGE=${TAG}br
LOGDIR=$(mktemp -d /tmp/loom-netns.XXXXXX)
PIDS=()

skip() {
  echo "SKIP: $*"
  exit 77
}

cleanup() {
  # Every process still inside a namespace is one of our ranks (or its timeout wrapper).
  for ((h = 0; h < HOSTS; ++h)); do
    for pid in $(ip netns pids "${TAG}h$h" 2>/dev/null); do kill -9 "$pid" 2>/dev/null; done
  done
  for pid in "${PIDS[@]}"; do kill -9 "$pid" 2>/dev/null; done
  for ((h = 0; h < HOSTS; ++h)); do ip netns del "${TAG}h$h" 2>/dev/null; done
  ip link del "$BRIDGE" 2>/dev/null
  rm -rf "$LOGDIR"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

[ "$(id -u)" = 0 ] || skip "needs root (ip netns)"
command -v ip >/dev/null && command -v tc >/dev/null || skip "needs iproute2 (ip, tc)"
ip netns add "${TAG}h0" 2>/dev/null || skip "cannot create a network namespace"
ip link add "$BRIDGE" type bridge 2>/dev/null || skip "cannot create a bridge"
ip link set "$BRIDGE" up

for ((h = 0; h < HOSTS; ++h)); do
  ns=${TAG}h$h
  [ "$h" = 0 ] || ip netns add "$ns" || exit 1
  ip link add "${TAG}v$h" type veth peer name loomnet0 netns "$ns" || skip "cannot create veth"
  ip link set "${TAG}v$h" master "$BRIDGE" up || exit 1
  ip -n "$ns" addr add "10.231.0.$((h + 1))/24" dev loomnet0 || exit 1
  [ -z "${LOOM_NETNS_MTU:-}" ] || ip -n "$ns" link set loomnet0 mtu "$LOOM_NETNS_MTU"
  [ -z "${LOOM_NETNS_MTU:-}" ] || ip link set "${TAG}v$h" mtu "$LOOM_NETNS_MTU"
  ip -n "$ns" link set loomnet0 up || exit 1
  ip -n "$ns" link set lo up || exit 1
  for kv in ${LOOM_NETNS_SYSCTL:-}; do ip netns exec "$ns" sysctl -q -w "$kv" || exit 1; done
  # The host's link: everything it sends goes through a token bucket at RATE.
  tc -n "$ns" qdisc add dev loomnet0 root tbf rate "$RATE" ${LOOM_NETNS_TBF:-burst 1mb latency 20ms} ||
    skip "tc tbf is not available"
done
# run_job NAME EXTRA_ENV BINARY ARGS...: one process per rank; ARGS may use @RANK@ and @ID@.
run_job() {
  local name=$1 extra=$2 binary=$3
  shift 3
  # Below the namespace's ephemeral range, so no rank's port-0 listener or outgoing connection
  # takes the root's port before rank 0 binds it.
  local low
  low=$(ip netns exec "${TAG}h0" cat /proc/sys/net/ipv4/ip_local_port_range | cut -f1)
  local port=$((20000 + RANDOM % (${low:-32768} - 20000)))
  local commid="10.231.0.1:$port"
  local id
  id=$(LOOM_COMM_ID=$commid "$NETNS_RANK" id) || { echo "FAIL: no id"; return 1; }
  PIDS=()
  for ((r = 0; r < NRANKS; ++r)); do
    local h=$((r % HOSTS)) args=()
    for a in "$@"; do a=${a//@RANK@/$r}; args+=("${a//@ID@/$id}"); done
    # shellcheck disable=SC2086  # EXTRA_ENV is a list of VAR=value words
    ip netns exec "${TAG}h$h" env LOOM_HOSTID="netns-host-$h" LOOM_SOCKET_IFNAME=loomnet0 \
      LOOM_TIMEOUT=120 LOOM_TUNE_NET_MBPS=1000 $extra \
      timeout 600 "$binary" "${args[@]}" >"$LOGDIR/$name.$r.log" 2>&1 &
    PIDS+=($!)
  done
  local failed=0
  for ((r = 0; r < NRANKS; ++r)); do
    if ! wait "${PIDS[$r]}"; then
      echo "FAIL: $name rank $r:"
      tail -n 20 "$LOGDIR/$name.$r.log"
      failed=1
    fi
  done
  PIDS=()
  return $failed
}

status=0
if [ "${LOOM_NETNS_ONLY_MEASURE:-0}" != 1 ]; then
# 1. Every collective, every type, with the tuner's choices; the ring logged at INFO.
run_job all "LOOM_DEBUG=INFO LOOM_DEBUG_SUBSYS=GRAPH" "$COLL_RANK" all "$NRANKS" @RANK@ @ID@ ||
  status=1
expected="0"
for ((h = 0; h < HOSTS; ++h)); do
  for ((l = 0; l < PER_HOST; ++l)); do
    r=$((l * HOSTS + h))
    [ "$r" = 0 ] || expected="$expected $r"
  done
done
for ((r = 0; r < NRANKS; ++r)); do
  line=$(grep -o "ring 0:.*" "$LOGDIR/all.$r.log" | head -n 1)
  if [[ "$line" != "ring 0: $expected ($HOSTS node(s), $HOSTS crossing(s)"* ]]; then
    echo "FAIL: rank $r's ring is '$line', expected 'ring 0: $expected' crossing $HOSTS times"
    status=1
  fi
done
echo "ring (rank 0): $(grep -o "ring 0:.*" "$LOGDIR/all.0.log" | head -n 1)"
# 2. AllReduce forced through each algorithm.
for algo in hier ring tree doubling; do
  run_job "allreduce-$algo" "LOOM_ALGO=$algo" "$COLL_RANK" allreduce "$NRANKS" @RANK@ @ID@ ||
    status=1
done
[ "$status" = 0 ] && echo "correctness: every collective right on $HOSTS hosts x $PER_HOST ranks"
fi

if [ "$MEASURE" = "--measure" ]; then
  echo "measure: $HOSTS hosts x $PER_HOST ranks, links at $RATE"
  for algo in ${LOOM_NETNS_ALGOS:-tuner ring hier}; do
    env=""
    [ "$algo" = tuner ] || env="LOOM_ALGO=$algo"
    # shellcheck disable=SC2086
    run_job "time-$algo" "$env ${LOOM_NETNS_EXTRA_ENV:-}" "$NETNS_RANK" time "$NRANKS" @RANK@ @ID@ \
      ${LOOM_NETNS_SIZES:-8:200 1048576:10 67108864:3} || status=1
    grep -h "^allreduce" "$LOGDIR/time-$algo.0.log"
  done
  if [ -n "${LOOM_NETNS_NSTAT:-}" ]; then  # TCP counters matching this regex, per host
    for ((h = 0; h < HOSTS; ++h)); do
      echo "host $h: $(ip netns exec "${TAG}h$h" nstat -az 2>/dev/null |
        grep -E "$LOOM_NETNS_NSTAT" | awk '$2 != 0 {printf "%s=%s ", $1, $2}')"
    done
  fi
fi
exit $status
