#!/usr/bin/env bash
# The prepared check of loom's CUDA data path, for a machine with a GPU that is lent for a few
# minutes and starts bare (no hwloc, no build). Three ways to call it:
#
#   tools/gpu_check.sh bundle [DIR]       here: a stripped CUDA build (sm_90, no MPI, no tests)
#                                         of loom_gpu_check and the perf binaries, with the
#                                         shared libraries a bare machine lacks, in DIR
#                                         (default .gpu-bundle, git-ignored; a few tens of MiB)
#   tools/gpu_check.sh run [DIR]          on the GPU machine: every phase from the bundle
#   tools/gpu_check.sh --dry-run [BUILD]  here: the phases that do not need a GPU, under the
#                                         simulated runtime (LOOM_CUDA_SIM=1, a test double
#                                         whose figures say nothing about GPUs), from a CUDA
#                                         build (default build/)
#
# Each phase runs under its own timeout and ends with a "RESULT phase PASS|FAIL|SKIP summary"
# line; the table of them is printed last. Exit status: 0 when no phase failed. A run on a GPU
# stays under 8 minutes. The phases (loom_gpu_check's subcommands, tools/gpu_check/):
#   probe        devices, SMs, IPC between processes, cudaHostRegister
#   kernels      the CUDA reduceCopy bit for bit against the CPU's, every type x op, with NaN,
#                -0, subnormals and infinities among the inputs            (GPU only)
#   collectives  every collective x type x op at 2, 3, 4 and 8 ranks sharing device 0 as
#                threads, counts 0, 1, 7, 4097 and 1M+3, in and out of place, poisoned
#                outputs, AllReduce with every algorithm, against CPU communicators on the same
#                inputs; once with LOOM_PROTO=simple, once with ll
#   wire         the matrix at 3 ranks over sockets: GPU buffers staged through the proxy
#   processes    the same matrix between 2 processes sharing device 0 (when IPC works)
#   rdma         the processes matrix over the NIC (LOOM_TRANSPORT=ib), when the machine has an
#                RDMA device (the dry run: the software NIC, a test double): GPUDirect RDMA
#                where the GPU's memory registers, else staged; the summary counts each way
#   stream       producer kernel -> AllReduce -> consumer kernel on one stream, no host sync;
#                a call on a stream capturing a CUDA graph refused
#   faults       a missing rank times out through the async error; abort ends a waiting call
#   bandwidth    the fused 2->1 reduce against a device-to-device copy, 256 MiB and 1 GiB (GPU
#                only); all_reduce_perf busbw at 256 MiB-1 GiB and 8 B latency, 2 ranks
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
mode=${1:-}

usage() {
  sed -n '2,18p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
  exit 2
}

# ---- bundle -------------------------------------------------------------------------------
bundle() {
  local out=${1:-$root/.gpu-bundle}
  local build=$root/build-gpu-bundle
  if [[ ${PATH} != */usr/local/cuda/bin* && -d /usr/local/cuda/bin ]]; then
    PATH=/usr/local/cuda/bin:$PATH
  fi
  local launcher=()
  if command -v ccache >/dev/null; then
    launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
  fi
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLOOM_WITH_CUDA=ON "${launcher[@]}" \
    -DCMAKE_CUDA_ARCHITECTURES=90 -DLOOM_BUILD_TESTS=OFF -DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON \
    -DCMAKE_DISABLE_FIND_PACKAGE_Gloo=ON >/dev/null || return 1
  ninja -C "$build" -j "${LOOM_BUILD_JOBS:-2}" loom_gpu_check all_reduce_perf all_gather_perf \
    reduce_scatter_perf broadcast_perf || return 1
  rm -rf "$out"
  mkdir -p "$out/bin" "$out/lib"
  cp "$build/loom_gpu_check" "$build"/perf/{all_reduce,all_gather,reduce_scatter,broadcast}_perf \
    "$out/bin/"
  cp -L "$build"/libloom.so.0 "$out/lib/"
  # What a bare machine lacks: hwloc and what it needs beyond glibc.
  local lib
  for lib in libhwloc.so.15 libudev.so.1; do
    cp -L "$(ldconfig -p | awk -v l="$lib" '$1 == l && /x86-64/ {print $NF; exit}')" "$out/lib/"
  done
  strip --strip-unneeded "$out"/bin/* "$out"/lib/*
  cp "${BASH_SOURCE[0]}" "$out/gpu_check.sh"
  du -sh "$out"
}

# ---- phases -------------------------------------------------------------------------------
results=()

# run_phase NAME TIMEOUT COMMAND...: runs it, shows its output, keeps its RESULT lines (or a
# FAIL that says why there was none) for the table.
run_phase() {
  local name=$1 limit=$2
  shift 2
  printf '\n==== %s (at most %s s): %s\n' "$name" "$limit" "$*"
  local log start rc
  log=$(mktemp)
  start=$SECONDS
  timeout --kill-after=10 "$limit" "$@" 2>&1 | grep -v ' loom WARN LOOM_CUDA_SIM=1' | tee "$log"
  rc=${PIPESTATUS[0]}
  local took=$((SECONDS - start)) found=0 line
  while IFS= read -r line; do
    results+=("$(printf '%-20s %-5s %5ss  %s' "$name" \
      "$(awk '{print $3}' <<<"$line")" "$took" "$(cut -d' ' -f4- <<<"$line")")")
    found=1
  done < <(grep '^RESULT ' "$log")
  if [[ $found == 0 ]]; then
    local why="exit status $rc"
    [[ $rc == 124 || $rc == 137 ]] && why="timed out after $limit s"
    results+=("$(printf '%-20s %-5s %5ss  %s' "$name" FAIL "$took" "no result: $why")")
  fi
  rm -f "$log"
}

# perf_judge NAME PERF_BINARY ARGS...: runs a perf binary and judges it by its exit status and
# its #wrong columns; reports the best busbw and the first size's time (out of place).
perf_judge() {
  local name=$1 out rc
  shift
  out=$("$@" 2>&1)
  rc=$?
  printf '%s\n' "$out"
  local rows wrong best first
  rows=$(awk '$1 ~ /^[0-9]+$/ && NF >= 13' <<<"$out")
  wrong=$(awk '{w += $9 + $13} END {print w + 0}' <<<"$rows")
  best=$(awk '{b = $8 > b ? $8 : b} END {print b + 0}' <<<"$rows")
  first=$(awk '{print $6; exit}' <<<"$rows")
  local verdict=FAIL
  [[ $rc == 0 && -n $rows && $wrong == 0 ]] && verdict=PASS
  echo "RESULT $name $verdict $(grep -c . <<<"$rows") sizes, $wrong wrong, busbw up to $best GB/s," \
    "first size ${first:-?} us"
}
export -f perf_judge

# rdma_judge CHECK ARGS...: the processes phase over ib, with the transport's INFO lines
# counted: how many connections went by GPUDirect RDMA and how many were staged, and why.
rdma_judge() {
  local out rc
  out=$(LOOM_DEBUG=INFO LOOM_DEBUG_SUBSYS=NET "$@" 2>&1)
  rc=$?
  grep -v ' loom INFO ' <<<"$out" | grep -v '^RESULT '
  local direct staged how why verdict summary
  direct=$(grep -c ': GPUDirect RDMA (' <<<"$out")
  staged=$(grep -c ': no GPUDirect RDMA ' <<<"$out")
  how=$(grep -m1 -o ': GPUDirect RDMA ([a-z-]*)' <<<"$out" | sed 's/.*(\(.*\))/\1/')
  why=$(grep -m1 -o ': no GPUDirect RDMA .*' <<<"$out" | cut -c3-)
  verdict=$(awk '/^RESULT /{print $3; exit}' <<<"$out")
  summary=$(grep -m1 '^RESULT ' <<<"$out" | cut -d' ' -f4-)
  [[ $rc != 0 || -z $verdict ]] && verdict=FAIL
  echo "RESULT rdma $verdict ${summary:-exit status $rc}; GPU connections: $direct by" \
    "GPUDirect RDMA${how:+ ($how)}, $staged staged${why:+: $why}"
}
export -f rdma_judge

perf_phase() {
  local name=$1 limit=$2
  shift 2
  if [[ ! -x $1 ]]; then
    results+=("$(printf '%-20s %-5s %5ss  %s' "$name" SKIP 0 "$1 not built")")
    return
  fi
  run_phase "$name" "$limit" bash -c 'perf_judge "$@"' _ "$name" "$@"
}

run_all() {
  local bin=$1 dry=$2
  local check=$bin/loom_gpu_check perf=$bin
  [[ -x $perf/all_reduce_perf ]] || perf=$bin/perf
  local ranks=2,3,4,8 large=1048579 mib=256,1024 busbw=(-b 256M -e 1G -f 2 -n 20 -w 5)
  local slow=1
  if [[ $dry == 1 ]]; then
    # Two cores, maybe shared with other tests: fewer ranks, smaller buffers (still several
    # steps per call) and longer limits; the same code paths.
    ranks=2,3
    large=65539
    mib=4
    slow=3
    busbw=(-b 1M -e 4M -f 2 -n 5 -w 2)
  fi
  run_phase probe $((60 * slow)) "$check" probe
  if [[ ${results[-1]} != *" PASS "* ]]; then
    results+=("$(printf '%-20s %-5s %5ss  %s' "(the rest)" SKIP 0 "no device: nothing else can run")")
    return
  fi
  local ipc=0
  [[ ${results[-1]} == *"IPC yes"* ]] && ipc=1
  run_phase kernels $((120 * slow)) "$check" kernels
  for proto in simple ll; do
    run_phase "collectives-$proto" $((150 * slow)) env LOOM_PROTO=$proto "$check" collectives \
      --ranks "$ranks" --counts 0,1,7,4097 --large-counts "$large"
  done
  # The same over sockets: every connection behind a proxy ring in pinned host memory
  # (transports/proxy), as GPU ranks on different hosts reach each other.
  run_phase wire $((120 * slow)) env LOOM_PROTO=simple LOOM_TRANSPORT=socket "$check" collectives \
    --ranks 3 --counts 0,1,7,4097 --large-counts "$large"
  if [[ $ipc == 1 ]]; then
    run_phase processes $((120 * slow)) "$check" processes --counts 0,1,7,4097 --large-counts "$large"
  else
    results+=("$(printf '%-20s %-5s %5ss  %s' processes SKIP 0 "no IPC between processes")")
  fi
  local verbs=""
  [[ $dry == 1 ]] && verbs=$(ls "$bin"/tests/softnic/libloom_softnic.so 2>/dev/null)
  if [[ -n $verbs || ($dry == 0 && -n $(ls /sys/class/infiniband 2>/dev/null)) ]]; then
    run_phase rdma $((120 * slow)) env LOOM_PROTO=simple LOOM_TRANSPORT=ib \
      ${verbs:+LOOM_IBVERBS_LIB=$verbs} bash -c 'rdma_judge "$@"' _ "$check" processes \
      --counts 0,1,7,4097 --large-counts "$large"
  else
    results+=("$(printf '%-20s %-5s %5ss  %s' rdma SKIP 0 "no RDMA device (/sys/class/infiniband)")")
  fi
  run_phase stream $((60 * slow)) "$check" stream
  run_phase faults $((90 * slow)) "$check" faults
  run_phase bandwidth $((90 * slow)) "$check" bandwidth --mib "$mib"
  perf_phase allreduce-busbw $((120 * slow)) "$perf/all_reduce_perf" --device cuda -t 2 "${busbw[@]}" -c 1
  perf_phase allreduce-8B $((60 * slow)) "$perf/all_reduce_perf" --device cuda -t 2 -b 8 -e 8 -n 200 -w 50 -c 1
}

print_table() {
  printf '\n==== summary\n%-20s %-5s %6s  %s\n' phase verdict time summary
  local row failed=0
  for row in "${results[@]}"; do
    printf '%s\n' "$row"
    [[ $row == *" FAIL "* ]] && failed=1
  done
  return $failed
}

case $mode in
  bundle)
    bundle "${2:-}"
    ;;
  run)
    dir=${2:-$root/.gpu-bundle}
    [[ -x $dir/bin/loom_gpu_check ]] || { echo "no bundle in $dir: run '$0 bundle' first" >&2; exit 2; }
    export LD_LIBRARY_PATH=$dir/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    unset LOOM_CUDA_SIM
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null
    run_all "$dir/bin" 0
    print_table
    ;;
  --dry-run)
    build=${2:-$root/build}
    [[ -x $build/loom_gpu_check ]] || { echo "no loom_gpu_check in $build: a CUDA build is needed" >&2; exit 2; }
    export LOOM_CUDA_SIM=1 LOOM_CUDA_SIM_DEVICES=1
    echo "dry run: LOOM_CUDA_SIM=1, simulated devices (a test double); GPU-only phases skip"
    run_all "$build" 1
    print_table
    ;;
  *)
    usage
    ;;
esac
