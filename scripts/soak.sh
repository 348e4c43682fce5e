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
#   SOAK_INA      1: the ranks on a testbed of SOAK_RANKS hosts instead
#                 (tools/dlcp-testbed, as root: 10 Gbit/s, MTU 9000,
#                 SOAK_INA_LOSS random loss at every link, default 1%) with
#                 dlcp-switch on its switch, and INA and RA-INA among the
#                 algorithms drawn (dlcp-soak --ina 1); the daemon must
#                 still run at the end, its resident set (sampled every
#                 epoch into switch.csv) stay flat after the first 2
#                 epochs as the ranks' do, and its log, with its final
#                 counters, is kept as switch.log
#   SOAK_INA_ARGS more options of dlcp-testbed up, after those (a later
#                 one wins): e.g. "--rate 1gbit --mtu 1500 --host-gro"
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

ina=${SOAK_INA:-0}
case $ina in
  0) launch=("$build/bin/dlcp-run" -n "$ranks" --) ;;
  1) ;;
  *) echo "soak: SOAK_INA=$ina: expected 0 or 1" >&2; exit 2 ;;
esac

# switch_pid: the dlcp-switch process in testbed $tb_id's rack namespace.
switch_pid() {
  local p
  for p in $(ip netns pids "dlcptb-$tb_id-r0" 2>/dev/null); do
    if [ "$(cat "/proc/$p/comm" 2>/dev/null)" = dlcp-switch ]; then
      echo "$p"
      return
    fi
  done
}

# switch_rss: its resident set in KiB ("gone" if it is not running).
switch_rss() {
  local p
  p=$(switch_pid)
  if [ -n "$p" ]; then
    awk '/^VmRSS:/ { print $2 }' "/proc/$p/status"
  else
    echo gone
  fi
}

if [ "$ina" = 1 ]; then
  loss=${SOAK_INA_LOSS:-1%}
  testbed=$root/tools/dlcp-testbed
  # shellcheck disable=SC2086  # SOAK_INA_ARGS: words, as on a command line
  if ! tb_id=$("$testbed" up -n "$ranks" --rate 10gbit --mtu 9000 \
                 --loss "$loss" --agg-switch "$build/bin/dlcp-switch" \
                 --agg-mem 8m ${SOAK_INA_ARGS:-}); then
    echo "soak: the testbed did not come up" >&2
    exit 1
  fi
  trap '"$testbed" down "$tb_id" >/dev/null 2>&1' EXIT
  launch=("$testbed" run --id "$tb_id" --stats none --)
  echo "# soak: on testbed $tb_id ($ranks hosts, $loss loss," \
       "${SOAK_INA_ARGS:-10 Gbit/s, MTU 9000}), dlcp-switch resident set" \
       "$(switch_rss) KiB"
fi
echo "# soak: $ranks ranks, $minutes min, epochs of $epoch_s s, seed $seed," \
     "all-reduces of 1..$max_elems elements; log $out/soak.log"
# The watchdog: a hang is a failure too (each operation has its own
# no-progress timeout of 20 s; this catches anything beyond that).
limit=$(awk -v m="$minutes" -v e="$epoch_s" 'BEGIN { print int(m * 60 + e + 300) }')
start=$(date +%s)
if [ "$ina" = 1 ]; then
  echo "t_s,rss_kib" >"$out/switch.csv"
  while sleep "$epoch_s"; do
    echo "$(( $(date +%s) - start )),$(switch_rss)" >>"$out/switch.csv"
  done &
  sampler=$!
fi
timeout --kill-after=30 "$limit" "${launch[@]}" \
  "$build/bin/dlcp-soak" --minutes "$minutes" --epoch-s "$epoch_s" \
  --seed "$seed" --max-elems "$max_elems" --csv "$out/soak" --ina "$ina" \
  >"$out/soak.log" 2>&1
rc=$?
took=$(( $(date +%s) - start ))
if [ "$ina" = 1 ]; then
  kill "$sampler" 2>/dev/null
  wait "$sampler" 2>/dev/null
  # The daemon still running, its resident set flat after warm-up (the
  # ranks' rule: within max(8 MiB, 10 %) of its lowest sample), then its
  # final counters: SIGINT makes it print them to its log, which goes
  # with the testbed.
  echo "$(( $(date +%s) - start )),$(switch_rss)" >>"$out/switch.csv"
  # Built with AddressSanitizer its resident set holds the quarantine of
  # freed memory and is not judged (as dlcp-soak's own); a sanitizer's
  # report in its log fails the run instead.
  asan=0
  ldd "$build/bin/dlcp-switch" | grep -q libasan && asan=1
  verdict=$(awk -F, -v from=$(( 2 * ${epoch_s%.*} )) -v asan=$asan '
    NR > 1 && $2 == "gone" { gone = 1 }
    NR > 1 && $2 != "gone" && $1 >= from {
      lo = (n == 0 || $2 < lo) ? $2 : lo; hi = $2 > hi ? $2 : hi; n++ }
    END {
      slack = lo / 10 > 8192 ? lo / 10 : 8192
      if (gone) print "FAIL: not running at a sample"
      else if (n == 0) print "not judged: no sample after warm-up"
      else if (asan) printf "rss %d..%d KiB (not judged under ASan)\n",
                            lo, hi
      else printf "%s: rss %d..%d KiB after warm-up\n",
                  hi - lo <= slack ? "PASS" : "FAIL (GROWING)", lo, hi
    }' "$out/switch.csv")
  echo "soak: dlcp-switch $verdict"
  case $verdict in FAIL*) rc=1 ;; esac
  pid=$(switch_pid)
  if [ -z "$pid" ]; then
    rc=1
  else
    kill -INT "$pid"
    log=/run/dlcp-testbed/$tb_id/agg-switch.log
    for _ in $(seq 50); do
      grep -q 'exit:' "$log" 2>/dev/null && break
      sleep 0.1
    done
    cp "$log" "$out/switch.log"
    grep 'exit:' "$out/switch.log"
    if grep -qE 'AddressSanitizer|LeakSanitizer|runtime error' \
         "$out/switch.log"; then
      echo "soak: dlcp-switch: sanitizer report in $out/switch.log (FAIL)"
      rc=1
    fi
  fi
fi
grep -E 'soak: rank [0-9]+ (PASS|FAIL)|FAILED|failed|dlcp-run:|dlcp-testbed:' "$out/soak.log"
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
