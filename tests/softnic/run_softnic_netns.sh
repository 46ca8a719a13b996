#!/bin/bash
# TEST DOUBLE test: the soft NIC's TCP wire between two network namespaces ("hosts") joined by a
# veth pair. loom_softnic_peer runs as "target" in one and "initiator" in the other, each with
# SOFTNIC_IFNAME on its veth, so the GIDs they exchange carry the namespaces' own addresses. The
# initiator writes N messages with immediate data; the target's completions must be exactly the
# lines the initiator expects.
#
#   run_softnic_netns.sh PEER_BINARY [N]
#
# Exit 77 (ctest's SKIP_RETURN_CODE) when not root or without netns/veth support. The
# namespaces and processes are removed on any exit.
set -u
PEER=${1:?usage: $0 PEER_BINARY [N]}
N=${2:-200}
TAG=sn$(($$ % 100000))  # short: interface names have 15 characters at most
DIR=$(mktemp -d /tmp/softnic-netns.XXXXXX)
PIDS=()

skip() {
  echo "SKIP: $*"
  exit 77
}

cleanup() {
  for pid in "${PIDS[@]}"; do kill -9 "$pid" 2>/dev/null; done
  for ns in "${TAG}a" "${TAG}b"; do
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$pid" 2>/dev/null; done
    ip netns del "$ns" 2>/dev/null
  done
  rm -rf "$DIR"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

[ "$(id -u)" = 0 ] || skip "needs root (ip netns)"
command -v ip >/dev/null || skip "needs iproute2"
ip netns add "${TAG}a" 2>/dev/null || skip "cannot create a network namespace"
ip netns add "${TAG}b" || exit 1
ip link add "${TAG}va" netns "${TAG}a" type veth peer name "${TAG}vb" netns "${TAG}b" ||
  skip "cannot create veth"
for h in a b; do
  ns=${TAG}$h
  ip -n "$ns" link set "${TAG}v$h" name snet0 || exit 1
  ip -n "$ns" addr add "10.232.0.$([ $h = a ] && echo 1 || echo 2)/24" dev snet0 || exit 1
  ip -n "$ns" link set snet0 up || exit 1
  ip -n "$ns" link set lo up || exit 1
done

mkfifo "$DIR/a_in" "$DIR/a_out" "$DIR/b_in" "$DIR/b_out" || exit 1
ip netns exec "${TAG}a" env SOFTNIC_IFNAME=snet0 timeout 60 "$PEER" target "$N" \
  <"$DIR/a_in" >"$DIR/a_out" &
PIDS+=($!)
ip netns exec "${TAG}b" env SOFTNIC_IFNAME=snet0 timeout 60 "$PEER" initiator "$N" \
  <"$DIR/b_in" >"$DIR/b_out" &
PIDS+=($!)
exec 3>"$DIR/a_in" 4<"$DIR/a_out" 5>"$DIR/b_in" 6<"$DIR/b_out"

# Relay the endpoint exchange: target -> initiator, initiator -> target, then "ready".
read -r -t 30 target_ep <&4 || { echo "FAIL: no endpoint from the target"; exit 1; }
echo "$target_ep" >&5
read -r -t 30 initiator_ep <&6 || { echo "FAIL: no endpoint from the initiator"; exit 1; }
echo "$initiator_ep" >&3
read -r -t 30 ready <&4 && [ "$ready" = ready ] || { echo "FAIL: target not ready"; exit 1; }
echo ready >&5
gid=${target_ep%% *}
# bytes 12-15 of the GID: 10.232.0.1 is 0ae80001
[ "${gid:24:8}" = 0ae80001 ] || { echo "FAIL: target GID $gid does not carry 10.232.0.1"; exit 1; }

cat <&4 >"$DIR/got" &
PIDS+=($!)
cat <&6 >"$DIR/want"
wait "${PIDS[1]}"
rc_initiator=$?
wait "${PIDS[0]}"
rc_target=$?
wait "${PIDS[2]}"
if [ $rc_initiator != 0 ] || [ $rc_target != 0 ]; then
  echo "FAIL: initiator exit $rc_initiator, target exit $rc_target"
  exit 1
fi
if ! diff -q "$DIR/want" "$DIR/got" >/dev/null || [ "$(wc -l <"$DIR/got")" != "$N" ]; then
  echo "FAIL: the target's completions differ from what was sent"
  diff "$DIR/want" "$DIR/got" | head -5
  exit 1
fi
echo "PASS: $N write-with-imm messages from ${TAG}b (10.232.0.2) to ${TAG}a (10.232.0.1)"
