#!/bin/bash
# soak.sh [BUILD_DIR]: randomized all-reduces under randomized fault
# injection on loopback for SOAK_MINUTES (default 30), every result
# checked, each rank's resident set, heap in use and open descriptors
# sampled between epochs (tools/dlcp-soak.c says how).
#
#   SOAK_MINUTES  run length (default 30)
#   SOAK_RANKS    ranks, started by dlcp-run (default 4)
#   SOAK_EPOCH_S  seconds per epoch, i.e. per communicator and fault
#                 configuration (default 30)
#   SOAK_SEED     the shared seed (default: the current time; printed, so a
#                 failing run can be replayed)
#   SOAK_MAX_ELEMS largest all-reduce in elements (default 1048576)
#   SOAK_OUT      where the log, the per-rank CSVs and the plot go
#                 (default soak-out/ in the repository)
#
# Prints each rank's verdict and exits non-zero if an operation failed or
# gave a wrong result, or if descriptors or memory did not stay flat.
set -u
build=${1:-build}
minutes=${SOAK_MINUTES:-30}
ranks=${SOAK_RANKS:-4}
epoch_s=${SOAK_EPOCH_S:-30}
seed=${SOAK_SEED:-$(date +%s)}
max_elems=${SOAK_MAX_ELEMS:-1048576}
root=$(cd "$(dirname "$0")/.." && pwd)
out=${SOAK_OUT:-$root/soak-out}
mkdir -p "$out"
rm -f "$out"/soak.rank*.csv

echo "# soak: $ranks ranks, $minutes min, epochs of $epoch_s s, seed $seed," \
     "all-reduces of 1..$max_elems elements; log $out/soak.log"
# The watchdog: a hang is a failure too (each operation has its own
# no-progress timeout of 20 s; this catches anything beyond that).
limit=$(awk -v m="$minutes" -v e="$epoch_s" 'BEGIN { print int(m * 60 + e + 300) }')
start=$(date +%s)
timeout --kill-after=30 "$limit" "$build/bin/dlcp-run" -n "$ranks" -- \
  "$build/bin/dlcp-soak" --minutes "$minutes" --epoch-s "$epoch_s" \
  --seed "$seed" --max-elems "$max_elems" --csv "$out/soak" \
  >"$out/soak.log" 2>&1
rc=$?
took=$(( $(date +%s) - start ))
grep -E 'soak: rank [0-9]+ (PASS|FAIL)|FAILED|failed|dlcp-run:' "$out/soak.log"
if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
  echo "soak: HUNG (killed after $limit s); see $out/soak.log" >&2
fi
# The plot needs matplotlib (Debian's python3-matplotlib, which a python3
# of pyenv or a venv first on PATH may not see: PYTHON overrides).
py=${PYTHON:-python3}
"$py" -c 'import matplotlib' 2>/dev/null || py=/usr/bin/python3
if "$py" -c 'import matplotlib' 2>/dev/null; then
  "$py" "$root/scripts/soak_plot.py" "$out" "$out/soak.png" ||
    echo "soak: plot failed (the run's verdict stands)" >&2
else
  echo "soak: no matplotlib, no plot (the run's verdict stands)" >&2
fi
echo "# soak: exit $rc after $took s (seed $seed)"
exit $rc
