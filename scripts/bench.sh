#!/bin/sh
# `make bench`: the core's per-packet cost, and point-to-point throughput
# and latency against TCP between two processes.  The all-reduce and
# simulator comparisons have their own targets (bench-allreduce,
# bench-sim): they install and build peers (Gloo, Open MPI, ns-3).
set -eu
build=${1:-build}
echo "== bench-mlt_core =="
"$build/bin/bench-mlt_core"
echo
# The TCP comparison is about the network path: DLCP_SHM=0 keeps dlcp on
# UDP sockets like TCP (two ranks on one host otherwise share memory).
echo "== bench-p2p_vs_tcp (DLCP_SHM=0 dlcp-run -n 2: UDP against TCP on loopback) =="
DLCP_SHM=0 "$build/bin/dlcp-run" -n 2 "$build/bin/bench-p2p_vs_tcp"
echo
echo "== bench-p2p_vs_tcp (dlcp-run -n 2: shared-memory rings against TCP, for reference) =="
"$build/bin/dlcp-run" -n 2 "$build/bin/bench-p2p_vs_tcp"
