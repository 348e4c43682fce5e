#!/bin/sh
# The main job of `make demo`: MLT transfers through the seeded lossy
# in-memory network (the sans-I/O core, driven in virtual time).  Later
# issues replace this with a multi-process all-reduce on loopback and a
# small simulation.
set -eu
build=${1:-build}
bin=$build/bin/example-mlt_lossy_transfer
echo "== MLT core demo: 16 MiB tensor, 10 Gbps link, 10 us delay, seeded loss =="
for p in 0 0.1; do
  for loss in 0 0.01 0.1 0.3; do
    "$bin" --size 16777216 --loss "$loss" --p "$p" --reorder 0.05 --seed 7
  done
done
