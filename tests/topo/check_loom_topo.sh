#!/bin/bash
# Runs loom-topo --xml on fixtures and checks lines of its output (ctest loom_topo_tool_xml).
set -u
tool=$1
fixtures=$2
status=0

expect() {  # expect OUTPUT REGEX: the output has a line matching the (extended) regex
  if ! grep -Eq -- "$2" <<<"$1"; then
    echo "missing line matching: $2"
    status=1
  fi
}

out=$("$tool" --xml "$fixtures/dell-xe8640-h100x4-mlx5x4-nvlink.ipa20.xml") || {
  echo "loom-topo failed on the XE8640 fixture"; exit 1; }
echo "$out"
expect "$out" "^loom-topo: .*: 2 socket\(s\), 8 NUMA node\(s\), 112 cores, 224 PUs, 4 GPU\(s\), 6 NIC\(s\)$"
expect "$out" "^  GPU0  0000:4e:00.0  \[10de:2330\]  cuda 0  cuda0 nvml0  NUMA 3  cpus 42-55,154-167"
expect "$out" "^  mlx5_0 +0000:4d:00.0 .* InfiniBand +netdev hsi0 +NUMA 3"
expect "$out" "^        via hostbridge 0000:\[48-4e\] > .* > "
expect "$out" "^GPU0 +X +NV150 +NV150 +NV150 +SOCK +SOCK +PIX +PIX +SOCK +SYS +PHB +SYS$"
expect "$out" "^  PIX +PCIe switch +nominal"
expect "$out" "^  GPU0 -> mlx5_0 \(PIX\)$"
expect "$out" "^  GPU1 -> mlx5_2 \(PIX\)$"
expect "$out" "^  GPU3 -> mlx5_3 \(PIX\)$"
expect "$out" "^Node summary: 4 GPU\(s\), slowest GPU pair NVL 150.0 GB/s"

# --tune: the tuner's decisions for clusters of that server (simulated node counts).
out=$("$tool" --xml "$fixtures/dell-xe8640-h100x4-mlx5x4-nvlink.ipa20.xml" --tune --nodes 2,1024) || {
  echo "loom-topo --tune failed on the XE8640 fixture"; exit 1; }
echo "$out"
# Inside: the ring's slowest hop (NVLink 150) x 4 ranks. Between nodes: the NICs the GPUs are
# paired with, mlx5_0 (Gen4 x16, 31.5), mlx5_2 and mlx5_3 (Gen5 x16, 63 each).
expect "$out" "^# AllReduce on 2 node\(s\) x 4 rank\(s\), intra 600 GB/s, inter 157.5 GB/s per node, channels 1-14$"
expect "$out" "^# AllReduce on 1024 node\(s\) x 4 rank\(s\)"
expect "$out" "^ +8 B +(tree|hier) +ll "
expect "$out" "^ +2 GiB +ring +simple "
# This machine, CPU ranks: runs and picks ring/simple for large calls.
out=$("$tool" --tune --nodes 1 --cpu-ranks 4) || { echo "loom-topo --tune failed here"; exit 1; }
expect "$out" "^ +2 GiB +ring +simple "
if "$tool" --tune --nodes 0 >/dev/null 2>&1; then echo "--nodes 0 was accepted"; status=1; fi

out=$("$tool" --xml "$fixtures/aws-g4dn-metal-t4x8-efa.xml") || { echo "loom-topo failed on g4dn"; exit 1; }
expect "$out" "^  rdmap197s0 +0000:c5:00.0 +\[1d0f:efa0\] +RoCE"
expect "$out" "^  GPU7 -> rdmap197s0 \(NUMA\)$"

# NCCL's topology XML through the same flag: NDv4 (8x A100, NVSwitch, 8 HDR NICs).
out=$("$tool" --xml "$fixtures/azure-ndv4-nccl-dump.xml") || { echo "loom-topo failed on NDv4"; exit 1; }
expect "$out" "^loom-topo: .*: 4 socket\(s\), 4 NUMA node\(s\), 96 cores, 96 PUs, 8 GPU\(s\), 8 NIC\(s\)$"
expect "$out" "^  GPU0  0001:00:00.0  \[10de:0000\]  cuda 0  -  NUMA 1  cpus 24-47  PCIe 31.5 GB/s  sm 80  12 NVLinks$"
expect "$out" "^  mlx5_ib0 +0101:00:00.0 .* InfiniBand .* port 25.0 GB/s$"
expect "$out" "^        via cpu numaid=1 > ffff:ff:02.0$"
expect "$out" "^GPU0 +X +NV300 +NV300 +NV300 +NV300 +NV300 +NV300 +NV300 +PIX +PIX +SYS"
expect "$out" "^  NV# +NVLink, # = GB/s between the pair \(NVLink links x per-link rate, through NVSwitch\)$"
expect "$out" "^  GPU5 -> mlx5_ib5 \(PIX\)$"
expect "$out" "^Ring \(1 rank\(s\) per GPU\): GPU0 GPU1 GPU2 GPU3 GPU4 GPU5 GPU6 GPU7$"
expect "$out" "^  slowest hop NVL 300.0 GB/s; 15 channel\(s\) fill it$"
# NDv2 with the V100 cube-mesh: the ring of double NVLinks; 2 ranks per GPU side by side.
out=$("$tool" --xml "$fixtures/azure-ndv2-nccl-dump.xml" --ranks-per-gpu 2) || { echo "loom-topo failed on NDv2"; exit 1; }
expect "$out" "^Ring \(2 rank\(s\) per GPU\): GPU0 GPU0 GPU3 GPU3 GPU2 GPU2 GPU1 GPU1 GPU5 GPU5 GPU6 GPU6 GPU7 GPU7 GPU4 GPU4$"
expect "$out" "^  slowest hop NVL 50.0 GB/s; 3 channel\(s\) fill it$"
err=$(printf '<system version="1">\n  <cpu numaid="0">\n    <pci busid="0000:07:00.0">\n  </cpu>\n</system>\n' >"${TMPDIR:-/tmp}/loom_topo_bad_$$.xml"; "$tool" --xml "${TMPDIR:-/tmp}/loom_topo_bad_$$.xml" 2>&1)
rc=$?
rm -f "${TMPDIR:-/tmp}/loom_topo_bad_$$.xml"
[ $rc -eq 2 ] || { echo "malformed NCCL file: exit status $rc, expected 2"; status=1; }
expect "$err" "topology file '.*loom_topo_bad_.*\.xml' line 4: </cpu> closes <pci> \(opened on line 3\)"

# A bad file: a clear message naming it, exit status 2, no crash.
err=$("$tool" --xml "$fixtures/does-not-exist.xml" 2>&1)
rc=$?
[ $rc -eq 2 ] || { echo "missing file: exit status $rc, expected 2"; status=1; }
expect "$err" "cannot open topology file '.*does-not-exist.xml': No such file or directory"

err=$("$tool" --bogus 2>&1)
expect "$err" "unknown option '--bogus'"
exit $status
