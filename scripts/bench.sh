#!/bin/sh
# `make bench`: every benchmark under build/bin/bench-*, one after another.
set -eu
build=${1:-build}
for b in "$build"/bin/bench-*; do
  [ -x "$b" ] || continue
  echo "== $(basename "$b") =="
  "$b"
done
