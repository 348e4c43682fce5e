#!/bin/sh
# bench-sim-scaling.sh: dlcp-sim's CPU cost per packet-hop from 16 to
# 1,024 hosts.
#
#   scripts/bench-sim-scaling.sh [BUILD_DIR] [RUNS] [NS3_PROGRAM]
#
# Two families of topologies at the default scenario's link speed, RTT,
# buffers and ECN threshold (100 Gbps, 24 us base RTT, 512 KB ports, ECN at
# 65 packets), all with the same per-host load: DCTCP (the default
# scenario's settings, flow ECMP) carrying web-search background traffic
# (Poisson arrivals between random host pairs) at 30 % of every host's
# access capacity for 1 ms of arrivals, run to the last flow's end:
#   - fat trees, k = 4, 6, ..., 16 (16 to 1,024 hosts);
#   - non-blocking leaf-spines of 16 hosts per ToR and 16 spines, 1 to 64
#     ToRs (16 to 1,024 hosts).
# Each scenario runs RUNS times (default 3) in bench-sim_speed, which
# reports the median CPU time (user + system) of the run loop and the
# packet-hops (packets sent on any link, host NICs included).  Writes
# BUILD_DIR/bench-sim/scaling.csv and scaling.md, and (with matplotlib)
# scaling.png; prints the table.
#
# With NS3_PROGRAM (bench/ns3/dctcp_leaf_spine_ps, built by
# bench/ns3/build.sh; bench-sim.sh passes it) every leaf-spine also runs
# once in ns-3 as the peer: the same topology, the same flows (dlcp-sim's,
# from its flows.csv: source, destination, size, start) and DCTCP's
# settings, its packet-hops counted by ns-3 and its CPU time that of the
# workload (the connections' warm-up excluded).  Writes scaling-ns3.csv
# and a second table, ns-3's growth beside dlcp-sim's; minutes of CPU at
# 1,024 hosts.
set -eu
build=${1:-build}
runs=${2:-3}
ns3=${3:-}
root=$(cd "$(dirname "$0")/.." && pwd)
work="$build/bench-sim/scaling"
speed="$build/bin/bench-sim_speed"
if [ ! -x "$speed" ]; then
  echo "bench-sim-scaling.sh: $speed not built (cmake --build $build)" >&2
  exit 1
fi
mkdir -p "$work"

# scenario NAME TOPOLOGY_LINES: writes $work/NAME.yaml.
scenario() {
  {
    echo "name: scaling-$1"
    echo "seed: 1"
    echo "topology:"
    printf '%s\n' "$2"
    echo "  link_rate: 100Gbps"
    echo "  base_rtt: 24us"
    echo "switch: {port_buffer: 512KB, ecn_threshold: 65pkts}"
    echo "transport: {kind: dctcp, rto_min: 1ms, init_cwnd: 20,"
    echo "            dupack_threshold: 3, delayed_ack: false,"
    echo "            load_balancing: ecmp}"
    echo "workload:"
    echo "  background: {distribution: websearch, load: 0.3, duration: 1ms}"
  } > "$work/$1.yaml"
}

csv="$build/bench-sim/scaling.csv"
echo "family,hosts,switches,flows,events,packet_hops,cpu_s,cpu_s_min,cpu_s_max,ns_per_hop,ns_per_event" > "$csv"
# measure FAMILY HOSTS SWITCHES NAME
measure() {
  out="$work/$4.out"
  "$speed" --runs "$runs" "$work/$4.yaml" > "$out"
  awk -v fam="$1" -v hosts="$2" -v sw="$3" '
    /^flows / { split($2, f, "/"); flows = f[2] }
    /^events / { ev = $2 }
    /^packet_hops / { hops = $2 }
    /^cpu_s / { cpu = $2; cmin = $4; cmax = $6; sub(/,/, "", cmin); sub(/\)/, "", cmax) }
    END {
      printf "%s,%d,%d,%d,%d,%d,%.4f,%.4f,%.4f,%.1f,%.1f\n", fam, hosts, sw,
             flows, ev, hops, cpu, cmin, cmax, cpu * 1e9 / hops, cpu * 1e9 / ev
    }' "$out" >> "$csv"
  tail -1 "$csv"
}

ns3csv="$build/bench-sim/scaling-ns3.csv"
echo "hosts,flows,packet_hops,cpu_s,ns_per_hop" > "$ns3csv"
# measure_ns3 TORS NAME: the leaf-spine NAME's flows in ns-3.
measure_ns3() {
  "$build/bin/dlcp-sim" "$work/$2.yaml" --out "$work/$2.dlcp" > /dev/null
  # flows.csv: id,group,iteration,src,dst,size_bytes,priority,start_us,...
  awk -F, 'NR > 1 { printf "%d %d %d %.0f\n", substr($4, 2), substr($5, 2),
                    $6, $8 * 1000 }' "$work/$2.dlcp/flows.csv" \
    > "$work/$2.flows"
  "$ns3" --tors="$1" --hostsPerTor=16 --spines=16 --bytes=1 \
    --flows="$work/$2.flows" --countHops=1 > "$work/$2.ns3"
  awk -v hosts=$(($1 * 16)) '
    /^flows / { split($2, f, "/"); flows = f[2]; done = f[1] }
    /^packet_hops / { hops = $2 }
    /^cpu_s / { cpu = $2 }
    END {
      if (done != flows) { print "ns-3: " done " of " flows " flows finished" > "/dev/stderr"; exit 1 }
      printf "%d,%d,%d,%.3f,%.1f\n", hosts, flows, hops, cpu, cpu * 1e9 / hops
    }' "$work/$2.ns3" >> "$ns3csv"
  tail -1 "$ns3csv"
}

for k in 4 6 8 10 12 14 16; do
  scenario "fat-tree-k$k" "  kind: fat_tree
  k: $k"
  measure fat_tree $((k * k * k / 4)) $((5 * k * k / 4)) "fat-tree-k$k"
done
for tors in 1 4 16 36 64; do
  scenario "leaf-spine-$tors" "  kind: leaf_spine
  tors: $tors
  hosts_per_tor: 16
  spines: 16"
  measure leaf_spine $((tors * 16)) $((tors + 16)) "leaf-spine-$tors"
  if [ -n "$ns3" ]; then
    measure_ns3 "$tors" "leaf-spine-$tors"
  fi
done

# The table: each size's cost beside the same family's 16-host cost.
md="$build/bench-sim/scaling.md"
awk -F, 'NR > 1 {
  if (!($1 in base)) base[$1] = $10
  printf "| %s | %d | %d | %d | %.1f M | %.1f M | %.2f s (%.2f-%.2f) | %.0f | %.0f | %.2fx |\n",
         $1 == "fat_tree" ? "fat tree" : "leaf-spine", $2, $3, $4, $5 / 1e6,
         $6 / 1e6, $7, $8, $9, $10, $11, $10 / base[$1]
}' "$csv" > "$md.rows"
{
  echo "| topology | hosts | switches | flows | events | packet-hops | CPU (median, min-max of $runs) | ns/packet-hop | ns/event | vs 16 hosts |"
  echo "|---|---|---|---|---|---|---|---|---|---|"
  cat "$md.rows"
} > "$md"
rm -f "$md.rows"
echo
cat "$md"
if [ -n "$ns3" ]; then
  # ns-3 beside dlcp-sim's leaf-spine rows, each against its 16 hosts.
  awk -F, 'NR == FNR { if (FNR > 1 && $1 == "leaf_spine") dlcp[$2] = $10; next }
    FNR > 1 {
      if (!base) { base = $5; dbase = dlcp[$1] }
      printf "| %d | %d | %.1f M | %.1f s | %.0f | %.2fx | %.0f | %.2fx | %.0fx |\n",
             $1, $2, $3 / 1e6, $4, $5, $5 / base, dlcp[$1], dlcp[$1] / dbase,
             $5 / dlcp[$1]
    }' "$csv" "$ns3csv" > "$md.ns3"
  {
    echo
    echo "| hosts (leaf-spine) | flows | ns-3 packet-hops | ns-3 CPU | ns-3 ns/packet-hop | ns-3 vs 16 hosts | dlcp-sim ns/packet-hop | dlcp-sim vs 16 hosts | ns-3 / dlcp-sim |"
    echo "|---|---|---|---|---|---|---|---|---|"
    cat "$md.ns3"
  } >> "$md"
  rm -f "$md.ns3"
  tail -8 "$md"
fi

py=/usr/bin/python3
if "$py" -c 'import matplotlib' 2>/dev/null; then
  "$py" "$root/scripts/plot-sim-scaling.py" "$csv" "$build/bench-sim/scaling.png" \
    ${ns3:+"$ns3csv"}
  echo "plot: $build/bench-sim/scaling.png"
else
  echo "bench-sim-scaling.sh: no matplotlib (apt-get install -y python3-matplotlib), no plot" >&2
fi
