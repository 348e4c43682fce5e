#!/bin/bash
# bench-straggler.sh [BUILD_DIR]: the plain ring against the straggler-bypass
# ring when one rank is slow in every all-reduce.
#
# 4 local ranks; rank 1 is a straggler: DLCP_FAULT_STRAGGLE=1:MS hands its
# first completed receive of every collective to the collective MS ms late
# (default 50), while its connections and notes keep running.  Each run is
# dlcp-bench with one size (default 64 MiB with 16 MiB pipeline segments:
# one lane per chunk, so the hop the bypass skips, the seed's T + T_trans,
# is a whole 16 MiB transfer and reduce); the two algorithms take turns
# for REPS runs (default 5) of ITERS timed iterations (default 10) after
# WARMUP untimed ones (default 5: the bypass ring learns T_trans and T over
# its first few operations, the first of which runs cold), and the medians
# are compared.  Prints the ratio and the bypasses counted by dlcp-bench.
# Exits non-zero if a run fails or a result is wrong.
set -eu
build=${1:-build}
size=${STRAGGLE_SIZE:-64M}
chunk=${STRAGGLE_CHUNK:-16M}
ms=${STRAGGLE_MS:-50}
reps=${REPS:-5}
iters=${ITERS:-10}
warmup=${WARMUP:-5}
out=$(mktemp -d "${TMPDIR:-/tmp}/dlcp-straggler.XXXXXX")
trap 'rm -rf "$out"' EXIT

run() { # run ALGO REP: prints "time_us bypasses"
  DLCP_FAULT_STRAGGLE="1:$ms" "$build/bin/dlcp-run" -n 4 "$build/bin/dlcp-bench" \
    -b "$size" -e "$size" -a "$1" -C "$chunk" -c 1 -n "$iters" -w "$warmup" \
    >"$out/$1.$2" 2>&1 || { cat "$out/$1.$2" >&2; exit 1; }
  awk '/^\[rank 0\] +[0-9]/ { t = $8; w = $11 }
       /straggler bypasses/ { for (i = 1; i <= NF; i++) if ($i == "straggler") b = $(i - 1) }
       END { if (w != 0) { print "wrong results" > "/dev/stderr"; exit 1 } print t, b }' "$out/$1.$2"
}

median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

echo "# 4 ranks, $size, chunk segments $chunk, rank 1 straggles ${ms} ms in every all-reduce; $reps runs of $iters iterations after $warmup warm-up ones, algorithms taking turns"
: >"$out/ring.times"; : >"$out/bypass.times"; total_bypasses=0
for r in $(seq "$reps"); do
  read -r t _ < <(run ring "$r"); echo "$t" >>"$out/ring.times"
  read -r tb b < <(run ring_bypass "$r"); echo "$tb" >>"$out/bypass.times"
  total_bypasses=$((total_bypasses + b))
  printf "run %d: ring %10.1f us   ring_bypass %10.1f us (%d bypasses)\n" "$r" "$t" "$tb" "$b"
done
mr=$(median <"$out/ring.times"); mb=$(median <"$out/bypass.times")
awk -v r="$mr" -v b="$mb" -v n="$total_bypasses" 'BEGIN {
  printf "median: ring %.1f us, ring_bypass %.1f us: bypass/ring = %.3f (%d bypasses in all)\n", r, b, b / r, n }'
