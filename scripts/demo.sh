#!/bin/sh
# The main job of `make demo`:
#   1. real processes on loopback: MLT transfers between 2 ranks launched by
#      dlcp-run, with loss injected in the send path, checked byte by byte;
#   2. the sans-I/O core alone through the seeded in-memory network;
#   3. an all-reduce benchmark over 4 ranks, every result checked;
#   4. a small simulation: dlcp-sim's embedded default scenario, DCTCP and
#      MLT side by side.
#   5. the Python package: an all-reduce of numpy arrays on 2 ranks.
set -eu
build=${1:-build}
bin=$build/bin

echo "== 1. dlcp-run -n 2 dlcp-p2p: 64 MiB, 1% injected loss, fully reliable (p = 0) =="
DLCP_FAULT_DROP=1% "$bin/dlcp-run" -n 2 "$bin/dlcp-p2p" --size 64M --iters 3
echo
echo "== 1b. same, 5% injected loss, loss bound p = 0.1 (no retransmission rounds) =="
DLCP_FAULT_DROP=5% "$bin/dlcp-run" -n 2 "$bin/dlcp-p2p" --size 64M --iters 3 --p 0.1
echo
echo "== 2. MLT core in the seeded in-memory network: 16 MiB, 10 Gbps, 10 us =="
for p in 0 0.1; do
  for loss in 0.01 0.3; do
    "$bin/example-mlt_lossy_transfer" --size 16777216 --loss "$loss" --p "$p" \
      --reorder 0.05 --seed 7
  done
done
echo
echo "== 3. dlcp-run -n 4 dlcp-bench: all-reduce, every result checked =="
"$bin/dlcp-run" -n 4 "$bin/dlcp-bench" -b 8 -e 16M -f 8 -a auto -p 0 -c 1 \
  -n 5 -w 2
echo
echo "== 4. dlcp-sim: the MLT seed's 144-host leaf-spine, PS traffic (scaled down), DCTCP and MLT =="
"$bin/dlcp-sim"
echo
echo "== 5. Python (make python's venv): dlcp.Communicator all-reduce on 2 ranks =="
"$bin/dlcp-run" -n 2 "$build/venv/bin/python" -c '
import numpy as np, dlcp
with dlcp.Communicator() as comm:
    a = np.full(4, comm.rank + 1.0, np.float32)
    print(a, "->", end=" ")
    print(a, comm.allreduce(a))'
