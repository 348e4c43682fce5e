#!/bin/sh
# `make bench-ina`: throughput of the aggregation switch (docs/ina.md).
#   1. bench-agg_switch core: the sans-I/O core alone, one thread;
#   2. bench-agg_switch udp against dlcp-switch on loopback with 1 and 2
#      worker threads, and with the generator sending runs of 64
#      datagrams (UDP_SEGMENT) to one thread, per size; the daemon's exit
#      line gives its CPU time and the gradient per CPU second (the
#      per-core figure on a shared machine);
#   3. bench-udp_floor: the kernel's own UDP cost per datagram at 256 B
#      and 1 KiB of gradient, the ceiling of any daemon over sockets.
# Usage: scripts/bench-ina.sh BUILD_DIR [SECONDS]
set -eu
build=${1:-build}
secs=${2:-3}
echo "== bench-agg_switch core (the core alone, one thread) =="
"$build/bin/bench-agg_switch" core "$secs"
# threads:generator GSO; the generator's runs reach a loopback switch's
# threads whole, so they go to one thread only
for cfg in 1:1 2:1 1:64; do
  threads=${cfg%:*}
  gso=${cfg#*:}
  for bytes in 256 1024; do
  echo
  echo "== bench-agg_switch udp, $bytes B, runs of $gso, against dlcp-switch --threads $threads (loopback) =="
  out=$(mktemp)
  err=$(mktemp)
  "$build/bin/dlcp-switch" --bind 127.0.0.1 --port 0 --threads "$threads" \
    --mem 4M >"$out" 2>"$err" &
  pid=$!
  port=
  for _ in $(seq 50); do
    port=$(sed -n 's/.*127\.0\.0\.1:\([0-9]*\).*/\1/p' "$out")
    [ -n "$port" ] && break
    sleep 0.1
  done
  if [ -z "$port" ]; then
    echo "bench-ina: dlcp-switch did not start:" >&2
    cat "$err" >&2
    kill "$pid" 2>/dev/null || true
    exit 1
  fi
  rc=0
  "$build/bin/bench-agg_switch" udp 127.0.0.1 "$port" "$secs" 4 "$gso" \
    "$bytes" || rc=$?
  kill -INT "$pid"
  wait "$pid" || rc=$?
  grep 'exit: cpu' "$err" || cat "$err"
  rm -f "$out" "$err"
  [ $rc -eq 0 ] || exit $rc
  done
done
for bytes in 288 1056; do
  echo
  echo "== bench-udp_floor --bytes $bytes (the kernel's UDP path alone) =="
  "$build/bin/bench-udp_floor" --bytes "$bytes"
done
