#!/bin/sh
# bench-sim.sh: simulator speed, and dlcp-sim against ns-3 on one scenario.
#
#   scripts/bench-sim.sh [BUILD_DIR] [RUNS]
#
# 1. bench-sim_speed on dlcp-sim's default scenario (144-host leaf-spine,
#    PS traffic): median wall time and events/s over RUNS runs (default 5).
# 2. The comparison scenario: 16 hosts on one switch, 100 Gbps links of
#    6 us (base RTT 24 us), 512 KB (341-packet) switch ports marking ECN at
#    65 packets, DCTCP (IW 20, RTO_min 1 ms, an ACK per segment), and the
#    same seeded set of 64 flows (50 KB .. 4 MB, random pairs over 2 ms)
#    plus an 8-to-1 incast of 500 KB.  The ns-3 program
#    (bench/ns3/dctcp_star.cc, built with g++ against Debian's libns3-dev
#    3.37 by bench/ns3/build.sh) and dlcp-sim both run it; the script prints
#    the wall-time ratio and both FCT distributions (mean, p50, p99).
#    Packets are the same size on both: 1448-byte segments in 1500-byte IP
#    packets plus ns-3's 2-byte PPP header (dlcp-sim: mss 1448, header 54).
#
# Needs: a CMake build of this tree in BUILD_DIR (default build), and ns-3
# (apt-get install -y libns3-dev ns3).  Work files go to BUILD_DIR/bench-sim.
set -eu
build=${1:-build}
runs=${2:-5}
root=$(cd "$(dirname "$0")/.." && pwd)
work="$build/bench-sim"
mkdir -p "$work"
speed="$build/bin/bench-sim_speed"
if [ ! -x "$speed" ]; then
  echo "bench-sim.sh: $speed not built (cmake --build $build)" >&2
  exit 1
fi

echo "== dlcp-sim default scenario ($runs runs) =="
"$speed" --runs "$runs"

# ---- the comparison scenario ------------------------------------------------
hosts=16
# A fixed LCG (Numerical Recipes constants), so the flow set is the same
# everywhere: "src dst bytes start_us" per line.
awk -v hosts=$hosts 'BEGIN {
  x = 12345; m = 4294967296
  split("50000 200000 1000000 4000000", sizes, " ")
  for (i = 0; i < 64; i++) {
    x = (1664525 * x + 1013904223) % m; src = int(x / m * hosts)
    do { x = (1664525 * x + 1013904223) % m; dst = int(x / m * hosts) } while (dst == src)
    x = (1664525 * x + 1013904223) % m; size = sizes[1 + int(x / m * 4)]
    x = (1664525 * x + 1013904223) % m; start = int(x / m * 2000)
    print src, dst, size, start
  }
  for (s = 1; s <= 8; s++) print s, 0, 500000, 1000
}' > "$work/flows.txt"

# The same scenario for dlcp-sim: an explicit star topology.
{
  echo "name: ns3-comparison"
  echo "seed: 1"
  echo "topology:"
  echo "  kind: explicit"
  echo "  nodes:"
  echo "    - {name: sw, kind: switch}"
  i=0
  while [ $i -lt $hosts ]; do
    echo "    - {name: h$i, kind: host}"
    i=$((i + 1))
  done
  echo "  links:"
  i=0
  while [ $i -lt $hosts ]; do
    echo "    - {a: h$i, b: sw, rate: 100Gbps, delay: 6us}"
    i=$((i + 1))
  done
  echo "switch: {queues: 1, port_buffer: 341pkts, ecn_threshold: 65pkts}"
  echo "host: {nic_buffer: 5400pkts}"
  echo "transport: {kind: dctcp, mss: 1448, header: 54, ack_size: 54,"
  echo "            init_cwnd: 20, rto_min: 1ms, delayed_ack: false}"
  echo "workload:"
  echo "  flows:"
  awk '{ printf "    - {src: h%d, dst: h%d, size: %d, start: %dus}\n", $1, $2, $3, $4 }' "$work/flows.txt"
} > "$work/star.yaml"

echo
echo "== dlcp-sim, comparison scenario ($runs runs) =="
"$speed" --runs "$runs" "$work/star.yaml" --fct "$work/fct-dlcp.txt" | tee "$work/dlcp.out"

echo
echo "== ns-3 3.37, comparison scenario =="
ns3bin=$("$root/bench/ns3/build.sh" "$work/ns3" | tail -1)
: > "$work/ns3-walls.txt"
r=0
while [ $r -lt "$runs" ]; do
  "$ns3bin" --flows="$work/flows.txt" > "$work/ns3.out"
  awk '/^wall_s/ { print $2 }' "$work/ns3.out" >> "$work/ns3-walls.txt"
  r=$((r + 1))
done
awk '/^fct/ { print $2, $3, $4, $5, $6 }' "$work/ns3.out" > "$work/fct-ns3.txt"
ns3_wall=$(sort -g "$work/ns3-walls.txt" | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }')
echo "wall_s $ns3_wall (median of $runs)"

# FCT statistics as dlcp-sim computes them: mean, nearest-rank p50, p99.
stats() {
  awk '$5 >= 0 { print $5 }' "$1" | sort -g | awk '
    { v[NR] = $1; s += $1 }
    END {
      if (NR == 0) { print "0 0 0 0"; exit }
      i50 = int((NR * 50 + 99) / 100); i99 = int((NR * 99 + 99) / 100)
      printf "%d %.1f %.1f %.1f\n", NR, s / NR, v[i50], v[i99]
    }'
}
set -- $(stats "$work/fct-dlcp.txt")
d_n=$1 d_mean=$2 d_p50=$3 d_p99=$4
set -- $(stats "$work/fct-ns3.txt")
n_n=$1 n_mean=$2 n_p50=$3 n_p99=$4
d_wall=$(awk '/^wall_s/ { print $2 }' "$work/dlcp.out")

echo
echo "== comparison (16 hosts, DCTCP, $(wc -l < "$work/flows.txt") flows) =="
awk -v dw="$d_wall" -v nw="$ns3_wall" -v dn="$d_n" -v nn="$n_n" \
    -v dm="$d_mean" -v d5="$d_p50" -v d9="$d_p99" \
    -v nm="$n_mean" -v n5="$n_p50" -v n9="$n_p99" 'BEGIN {
  printf "%-22s %12s %12s %10s\n", "", "dlcp-sim", "ns-3", "diff"
  printf "%-22s %12.4f %12.4f %9.1fx\n", "wall time (s)", dw, nw, nw / dw
  printf "%-22s %12d %12d\n", "flows finished", dn, nn
  printf "%-22s %12.1f %12.1f %+9.1f%%\n", "FCT mean (us)", dm, nm, (dm / nm - 1) * 100
  printf "%-22s %12.1f %12.1f %+9.1f%%\n", "FCT p50 (us)", d5, n5, (d5 / n5 - 1) * 100
  printf "%-22s %12.1f %12.1f %+9.1f%%\n", "FCT p99 (us)", d9, n9, (d9 / n9 - 1) * 100
}'
