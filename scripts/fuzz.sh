#!/bin/sh
# Runs every libFuzzer target of a fuzz build, one after another.
#
# Usage: scripts/fuzz.sh BUILD_DIR RUNS SECONDS
#
# Each BUILD_DIR/fuzz/fuzz_<name> runs until it has executed RUNS inputs
# or SECONDS have passed, whichever comes first (0: no such limit; not
# both 0), on a copy of its seed corpus tests/fuzz/corpus/<name>/ (the
# checked-in seeds are never modified) and of tests/fuzz/regressions/<name>/
# (inputs that once failed).  `make fuzz` gives every target
# 10^7 executions; CI gives each 10 seconds.  FUZZ_ONLY=name restricts
# the run to one target.  The copy, the log and any crash artifacts go to
# fuzz-out/<name>/ under the repository root (FUZZ_OUT overrides it).
# tests/fuzz/options/<name>, when present, holds more libFuzzer flags for
# that target (mlt_conn: -max_len=1024, since a 4 KB program of ~1,300
# operations runs at ~1,000 inputs a second against ~9,000 for short ones,
# and coverage stopped growing at programs of a few hundred bytes).
# FUZZ_JOBS=N (N > 1) runs each target as N worker processes sharing its
# corpus (libFuzzer's -fork=N; RUNS and SECONDS then bound them all
# together): for the targets whose inputs cost system calls (rdzv, about
# 1,300 inputs a second on one core), the way to 10^7 in one sitting.
# Prints one line per target and exits non-zero if any target found a crash,
# leak, timeout or out-of-memory input.
set -u

if [ $# -ne 3 ]; then
  echo "usage: $0 BUILD_DIR RUNS SECONDS" >&2
  exit 2
fi
build=$1
runs=$2
seconds=$3
for n in "$runs" "$seconds"; do
  case $n in
    '' | *[!0-9]*) echo "fuzz.sh: RUNS and SECONDS must be numbers" >&2
                   exit 2 ;;
  esac
done
if [ "$runs" -eq 0 ] && [ "$seconds" -eq 0 ]; then
  echo "fuzz.sh: RUNS and SECONDS cannot both be 0 (no limit)" >&2
  exit 2
fi
# libFuzzer: -runs=-1 and -max_total_time=0 mean unlimited.
[ "$runs" -eq 0 ] && runs=-1
jobs=${FUZZ_JOBS:-1}
case $jobs in
  '' | *[!0-9]* | 0) echo "fuzz.sh: FUZZ_JOBS must be a positive number" >&2
                     exit 2 ;;
esac
fork=
[ "$jobs" -gt 1 ] && fork=-fork=$jobs

root=$(cd "$(dirname "$0")/.." && pwd)
out=${FUZZ_OUT:-$root/fuzz-out}
seeds=$root/tests/fuzz/corpus
regressions=$root/tests/fuzz/regressions

found=0
ran=0
for bin in "$build"/fuzz/fuzz_*; do
  [ -f "$bin" ] && [ -x "$bin" ] || continue
  name=${bin##*/fuzz_}
  if [ -n "${FUZZ_ONLY:-}" ] && [ "$name" != "$FUZZ_ONLY" ]; then
    continue
  fi
  dir=$out/$name
  mkdir -p "$dir/earlier"
  rm -rf "$dir/corpus"
  mkdir -p "$dir/corpus"
  # A finding of an earlier run is kept, out of the way of this run's.
  for f in "$dir"/crash-* "$dir"/leak-* "$dir"/timeout-* "$dir"/oom-* \
           "$dir"/slow-unit-*; do
    [ -e "$f" ] && mv "$f" "$dir/earlier/"
  done
  if [ -d "$seeds/$name" ]; then
    cp -R "$seeds/$name/." "$dir/corpus/"
  fi
  # Inputs that once failed are seeds of every later run, CI's included.
  if [ -d "$regressions/$name" ]; then
    cp -R "$regressions/$name/." "$dir/corpus/"
  fi
  nseeds=$(find "$dir/corpus" -type f | wc -l)
  extra=$(cat "$root/tests/fuzz/options/$name" 2>/dev/null || true)
  # -timeout: one input taking over 10 s is a hang, hence a finding.
  start=$(date +%s)
  # $extra unquoted: one word per flag.
  "$bin" -runs="$runs" -max_total_time="$seconds" -timeout=10 $fork $extra \
    -print_final_stats=1 -artifact_prefix="$dir/" "$dir/corpus" \
    >"$dir/log" 2>&1
  rc=$?
  took=$(( $(date +%s) - start ))
  ran=$((ran + 1))
  # One process prints its final stats; -fork's parent its running total
  # (#N: lines) and, when RUNS ended it, the final one.
  execs=$(sed -n -e 's/^stat::number_of_executed_units: *//p' \
                 -e 's/^#\([0-9]*\): cov:.*/\1/p' \
                 -e 's/^INFO: fuzzed for \([0-9]*\) iterations.*/\1/p' \
                 "$dir/log" | tail -n 1)
  ncorpus=$(find "$dir/corpus" -type f | wc -l)
  if [ $rc -eq 0 ]; then
    printf 'fuzz_%-10s ok     %10s execs in %ss, corpus %d -> %d\n' \
      "$name" "${execs:-?}" "$took" "$nseeds" "$ncorpus"
  else
    found=1
    art=$(ls "$dir" | grep -E '^(crash|leak|timeout|oom|slow-unit)-' |
          head -n 1)
    printf 'fuzz_%-10s FAILED (exit %d) %s, log %s\n' "$name" "$rc" \
      "${art:+artifact $dir/$art}" "$dir/log"
  fi
done

if [ $ran -eq 0 ]; then
  echo "fuzz.sh: no fuzz targets in $build/fuzz (configure with" \
       "CC=clang -DDLCP_FUZZ=ON)" >&2
  exit 2
fi
exit $found
