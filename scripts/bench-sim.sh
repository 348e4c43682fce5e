#!/bin/sh
# bench-sim.sh: simulator speed, dlcp-sim against ns-3 on two scenarios,
# and dlcp-sim's cost per packet-hop from 16 to 1,024 hosts.
#
#   scripts/bench-sim.sh [BUILD_DIR] [RUNS]
#
# Not run by CI or `make check` (minutes of CPU, and ns-3).  Environment:
# BENCH_SIM_NS3_RUNS (default 3) runs of the 144-host ns-3 program, each
# minutes of CPU; BENCH_SIM_PARTS (default "star leaf-spine scaling")
# chooses the parts after the default scenario's speed.
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
#    Packets are the same size on both: 1460-byte segments in 1500-byte IP
#    packets plus ns-3's 2-byte PPP header (dlcp-sim: mss 1460, header 42;
#    ns-3 without the timestamp option, bench/ns3/dctcp_defaults.h says
#    why).  dlcp-sim runs with cwr_fast_retransmit: false, as ns-3's TCP
#    starts no fast retransmit while in CWR (docs/performance-sim.md).
# 3. The 144-host leaf-spine: dlcp-sim's default scenario (PS traffic,
#    15,552 flows) with the star's packet sizes and a 341-packet (512 KB)
#    port buffer, beside bench/ns3/dctcp_leaf_spine_ps.cc, which builds
#    the same leaf-spine, the same PS flows and per-flow hash ECMP in ns-3.
#    Compares the run loops' CPU time (user + system; ns-3's from the
#    first push, its connection warm-up excluded) and the FCTs, and shows
#    how much the FCTs move with the ECMP hash alone (dlcp-sim seeds 1-5).
# 4. scripts/bench-sim-scaling.sh: CPU ns per packet-hop, fat trees k = 4
#    to 16 and leaf-spines of 16 to 1,024 hosts, same per-host load; the
#    leaf-spines' flows in ns-3 too, once each (its growth beside
#    dlcp-sim's).
#
# Needs: a CMake build of this tree in BUILD_DIR (default build), and ns-3
# (apt-get install -y libns3-dev ns3).  Work files go to BUILD_DIR/bench-sim.
set -eu
build=${1:-build}
runs=${2:-5}
ns3_runs=${BENCH_SIM_NS3_RUNS:-3}
parts=${BENCH_SIM_PARTS:-star leaf-spine scaling}
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
ns3bins=$("$root/bench/ns3/build.sh" "$work/ns3")
ns3star=$(echo "$ns3bins" | grep '/dctcp_star$')
ns3ls=$(echo "$ns3bins" | grep '/dctcp_leaf_spine_ps$')

# FCT statistics as dlcp-sim computes them: count, mean, nearest-rank p50
# and p99, from "id src dst bytes fct_us" lines.
stats() {
  awk '$5 >= 0 { print $5 }' "$1" | sort -g | awk '
    { v[NR] = $1; s += $1 }
    END {
      if (NR == 0) { print "0 0 0 0"; exit }
      i50 = int((NR * 50 + 99) / 100); i99 = int((NR * 99 + 99) / 100)
      printf "%d %.1f %.1f %.1f\n", NR, s / NR, v[i50], v[i99]
    }'
}
median() {
  sort -g "$1" | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'
}

# ---- the 16-host star ---------------------------------------------------------
case " $parts " in *" star "*)
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
  echo "transport: {kind: dctcp, mss: 1460, header: 42, ack_size: 42,"
  echo "            init_cwnd: 20, rto_min: 1ms, delayed_ack: false,"
  echo "            cwr_fast_retransmit: false}"
  echo "workload:"
  echo "  flows:"
  awk '{ printf "    - {src: h%d, dst: h%d, size: %d, start: %dus}\n", $1, $2, $3, $4 }' "$work/flows.txt"
} > "$work/star.yaml"

echo
echo "== dlcp-sim, comparison scenario ($runs runs) =="
"$speed" --runs "$runs" "$work/star.yaml" --fct "$work/fct-dlcp.txt" | tee "$work/dlcp.out"

echo
echo "== ns-3 3.37, comparison scenario =="
: > "$work/ns3-walls.txt"
r=0
while [ $r -lt "$runs" ]; do
  "$ns3star" --flows="$work/flows.txt" > "$work/ns3.out"
  awk '/^wall_s/ { print $2 }' "$work/ns3.out" >> "$work/ns3-walls.txt"
  r=$((r + 1))
done
awk '/^fct/ { print $2, $3, $4, $5, $6 }' "$work/ns3.out" > "$work/fct-ns3.txt"
ns3_wall=$(median "$work/ns3-walls.txt")
echo "wall_s $ns3_wall (median of $runs)"

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
;; esac

# ---- the 144-host leaf-spine PS scenario ------------------------------------
case " $parts " in *" leaf-spine "*)
ls_sets="--set transport.mss=1460 --set transport.header=42
  --set transport.ack_size=42 --set switch.port_buffer=341pkts
  --set host.nic_buffer=5400pkts --set transport.cwr_fast_retransmit=false"
echo
echo "== dlcp-sim, 144-host leaf-spine PS ($runs runs) =="
# shellcheck disable=SC2086  # ls_sets is a list of arguments
"$speed" --runs "$runs" $ls_sets --fct "$work/ls-fct-dlcp.txt" | tee "$work/ls-dlcp.out"
# The ECMP hash is the only random choice here: other seeds, other paths.
: > "$work/ls-seeds.txt"
for seed in 2 3 4 5; do
  # shellcheck disable=SC2086
  "$speed" --runs 1 $ls_sets --set seed=$seed --fct "$work/ls-fct-dlcp-s$seed.txt" > /dev/null
  echo "$seed $(stats "$work/ls-fct-dlcp-s$seed.txt")" >> "$work/ls-seeds.txt"
done
echo
echo "== ns-3 3.37, 144-host leaf-spine PS ($ns3_runs runs) =="
: > "$work/ls-ns3-cpu.txt"
r=0
while [ $r -lt "$ns3_runs" ]; do
  # --bytes=1: the 512 KB port buffer and the ECN threshold counted in
  # bytes, as dlcp-sim counts them (in packets, an ACK takes a whole
  # packet's slot: see docs/performance-sim.md).
  "$ns3ls" --bytes=1 > "$work/ls-ns3.out"
  grep -v '^fct' "$work/ls-ns3.out"
  awk '/^cpu_s/ { print $2 }' "$work/ls-ns3.out" >> "$work/ls-ns3-cpu.txt"
  r=$((r + 1))
done
awk '/^fct/ { print $2, $3, $4, $5, $6 }' "$work/ls-ns3.out" > "$work/ls-fct-ns3.txt"
ns3_cpu=$(median "$work/ls-ns3-cpu.txt")
d_cpu=$(awk '/^cpu_s/ { print $2 }' "$work/ls-dlcp.out")
set -- $(stats "$work/ls-fct-dlcp.txt")
d_n=$1 d_mean=$2 d_p50=$3 d_p99=$4
set -- $(stats "$work/ls-fct-ns3.txt")
n_n=$1 n_mean=$2 n_p50=$3 n_p99=$4
echo
echo "== comparison (144-host leaf-spine, DCTCP, PS, $d_n/$n_n flows finished) =="
awk -v dc="$d_cpu" -v nc="$ns3_cpu" \
    -v dm="$d_mean" -v d5="$d_p50" -v d9="$d_p99" \
    -v nm="$n_mean" -v n5="$n_p50" -v n9="$n_p99" 'BEGIN {
  printf "%-30s %12s %12s %10s\n", "", "dlcp-sim", "ns-3", "diff"
  printf "%-30s %12.3f %12.3f %9.1fx\n", "CPU time, run loop (s, median)", dc, nc, nc / dc
  printf "%-30s %12.1f %12.1f %+9.1f%%\n", "FCT mean (us)", dm, nm, (dm / nm - 1) * 100
  printf "%-30s %12.1f %12.1f %+9.1f%%\n", "FCT p50 (us)", d5, n5, (d5 / n5 - 1) * 100
  printf "%-30s %12.1f %12.1f %+9.1f%%\n", "FCT p99 (us)", d9, n9, (d9 / n9 - 1) * 100
}'
echo "dlcp-sim with other ECMP salts (seed: flows mean p50 p99):"
cat "$work/ls-seeds.txt"
;; esac

case " $parts " in *" scaling "*)
echo
echo "== cost per packet-hop, 16 to 1,024 hosts =="
"$root/scripts/bench-sim-scaling.sh" "$build" 3 "$ns3ls"
;; esac
