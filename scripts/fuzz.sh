#!/bin/sh
# Runs every libFuzzer target of a fuzz build, one after another.
#
# Usage: scripts/fuzz.sh BUILD_DIR SECONDS
#
# Each BUILD_DIR/fuzz/fuzz_<name> runs for SECONDS on a copy of its seed
# corpus tests/fuzz/corpus/<name>/ (the checked-in seeds are never
# modified).  The copy, the log and any crash artifacts go to
# fuzz-out/<name>/ under the repository root (FUZZ_OUT overrides it).
# Prints one line per target and exits non-zero if any target found a crash,
# leak, timeout or out-of-memory input.
set -u

if [ $# -ne 2 ]; then
  echo "usage: $0 BUILD_DIR SECONDS" >&2
  exit 2
fi
build=$1
seconds=$2
case $seconds in
  '' | *[!0-9]*) echo "fuzz.sh: SECONDS must be a number" >&2; exit 2 ;;
esac

root=$(cd "$(dirname "$0")/.." && pwd)
out=${FUZZ_OUT:-$root/fuzz-out}
seeds=$root/tests/fuzz/corpus

found=0
ran=0
for bin in "$build"/fuzz/fuzz_*; do
  [ -f "$bin" ] && [ -x "$bin" ] || continue
  name=${bin##*/fuzz_}
  dir=$out/$name
  mkdir -p "$dir"
  rm -rf "$dir/corpus"
  mkdir -p "$dir/corpus"
  if [ -d "$seeds/$name" ]; then
    cp -R "$seeds/$name/." "$dir/corpus/"
  fi
  nseeds=$(find "$dir/corpus" -type f | wc -l)
  # -timeout: one input taking over 10 s is a hang, hence a finding.
  "$bin" -max_total_time="$seconds" -timeout=10 -print_final_stats=1 \
    -artifact_prefix="$dir/" "$dir/corpus" >"$dir/log" 2>&1
  rc=$?
  ran=$((ran + 1))
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$dir/log" |
          tail -n 1)
  ncorpus=$(find "$dir/corpus" -type f | wc -l)
  if [ $rc -eq 0 ]; then
    printf 'fuzz_%-10s ok     %10s execs in %ss, corpus %d -> %d\n' \
      "$name" "${execs:-?}" "$seconds" "$nseeds" "$ncorpus"
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
