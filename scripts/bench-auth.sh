#!/bin/bash
# bench-auth.sh [BUILD_DIR]: what authenticating every datagram and control
# message (DLCP_JOB_SECRET) costs a point-to-point transfer.
#
# Two ranks on loopback, UDP only (DLCP_SHM=0: the shared-memory rings
# carry no tags), one rank sending SIZE (default 64 MiB) to the other ITERS
# times (default 6, the first a warm-up) with dlcp-p2p, which checks every
# byte.  For each segment size in SEGMENTS (default "1024 auto": 1 KiB, the
# issue's worst case, and the path's own, 64 KiB on loopback) the job
# without and with a secret take turns for REPS runs (default 5); the
# median throughput of each and their ratio are printed.  Exits non-zero if
# a run fails.
set -eu
build=${1:-build}
size=${AUTH_SIZE:-64M}
iters=${ITERS:-6}
reps=${REPS:-5}
segments=${SEGMENTS:-1024 auto}
out=$(mktemp -d "${TMPDIR:-/tmp}/dlcp-auth.XXXXXX")
trap 'rm -rf "$out"' EXIT

run() { # run SEGMENT SECRET(0|1) REP: prints the Gbps of each timed transfer
  local f="$out/$1.$2.$3"
  if [ "$2" = 1 ]; then
    export DLCP_JOB_SECRET="bench-auth secret, 32 bytes long"
  else
    unset DLCP_JOB_SECRET
  fi
  DLCP_SHM=0 DLCP_SEGMENT="$1" "$build/bin/dlcp-run" -n 2 \
    "$build/bin/dlcp-p2p" --size "$size" --iters "$iters" >"$f" 2>&1 ||
    { cat "$f" >&2; exit 1; }
  unset DLCP_JOB_SECRET
  # "recv I: N B in T ms (G Gbps)": all but the first (warm-up).
  sed -n 's/.*recv \([0-9]*\): .*(\([0-9.]*\) Gbps).*/\1 \2/p' "$f" |
    awk '$1 > 0 { print $2 }'
}

median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

echo "# 2 ranks on loopback over UDP, $size x $iters (first untimed), $reps runs per mode, modes taking turns"
printf '%-9s %14s %14s %10s\n' segment plain_Gbps secret_Gbps secret/plain
for seg in $segments; do
  : >"$out/$seg.plain"; : >"$out/$seg.secret"
  for r in $(seq "$reps"); do
    if [ $((r % 2)) = 1 ]; then order="0 1"; else order="1 0"; fi
    for s in $order; do
      if [ "$s" = 1 ]; then run "$seg" 1 "$r" >>"$out/$seg.secret"
      else run "$seg" 0 "$r" >>"$out/$seg.plain"; fi
    done
  done
  plain=$(median <"$out/$seg.plain")
  secret=$(median <"$out/$seg.secret")
  printf '%-9s %14.2f %14.2f %10.3f\n' "$seg" "$plain" "$secret" \
    "$(awk -v a="$secret" -v b="$plain" 'BEGIN { print a / b }')"
done
