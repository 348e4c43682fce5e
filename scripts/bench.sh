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
echo "== bench-p2p_vs_tcp (dlcp-run -n 2) =="
"$build/bin/dlcp-run" -n 2 "$build/bin/bench-p2p_vs_tcp"
