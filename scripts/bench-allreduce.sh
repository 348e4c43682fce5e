#!/bin/bash
# bench-allreduce.sh [BUILD_DIR]: dlcp-bench beside Gloo and Open MPI, same run.
#
# Builds bench/peers/{gloo_allreduce.cc,mpi_allreduce.c} into BUILD_DIR/peers/
# (installing libgloo-dev, libopenmpi-dev and openmpi-bin with apt-get when
# they are missing and we are root), then runs with 4 local ranks:
#   gloo     ring, ring_chunked, halving_doubling over gloo::transport::tcp
#            on 127.0.0.1 (rendezvous: FileStore in a temp dir)
#   mpi_tcp  MPI_Allreduce, mpirun --mca btl self,tcp (loopback TCP, like
#            dlcp and Gloo)
#   mpi_shm  MPI_Allreduce with Open MPI's default transports (pml ob1 with
#            btl vader, i.e. shared memory, on one host)
#   dlcp     BUILD_DIR/bin/dlcp-run -n 4 BUILD_DIR/bin/dlcp-bench ... (skipped
#            with a message when not built yet), out of place like MPI
#   dlcp_ip  the same in place (-i 1), like Gloo's algorithms
#   dlcp_udp, udp_ip  both again with DLCP_SHM=0: datagrams over UDP on
#            loopback (the path between hosts) instead of the shared-memory
#            rings ranks on one host use by default
# and prints one table of bus bandwidth per size plus the 4 KiB latency row.
# Raw outputs are kept in BUILD_DIR/peers/results/.  Exits non-zero if any
# program fails or reports a wrong result.
#
# Sizes: the sweep is -b 8 -e 256M -f 4, i.e. 8 B * 4^k = 8 B .. 128 MiB (the
# next step, 512 MiB, is past 256 MiB).  4 KiB and 64 MiB, the targets of
# issue 4, are not on that grid, so a second pass measures exactly those two
# (-b 4K -e 64M -f 16384).  Iterations: 5 warm-up + 20 timed per size;
# the peers use 2 + 10 at 64 and 128 MiB to keep the whole run well under 5
# minutes on two cores (PEER_BIG_FROM / PEER_BIG_ITERS / PEER_BIG_WARMUP).
# dlcp-bench runs as the lead specified: -a auto -c 0 -n 20 -w 5 (DLCP_ARGS
# overrides the options after the size arguments, e.g. DLCP_ARGS="-a auto -c 1
# -n 20 -w 5" to have dlcp check its results too).
set -eu

build=${1:-build}
here=$(cd "$(dirname "$0")/.." && pwd)
nranks=4
peers="$build/peers"
results="$peers/results"
big_from=${PEER_BIG_FROM:-64M}
big_iters=${PEER_BIG_ITERS:-10}
big_warmup=${PEER_BIG_WARMUP:-2}
dlcp_args=${DLCP_ARGS:--a auto -c 0 -n 20 -w 5}
sweep="-b 8 -e 256M -f 4"
points="-b 4K -e 64M -f 16384"
timeout_s=${PEER_TIMEOUT:-600}
# The two target sizes are measured this many times, the programs taking
# turns, and each program's time is the median of its runs: one run of any
# of them varies by up to 2x on a shared 2-core machine.
point_reps=${POINT_REPS:-5}

log() { printf '%s\n' "$*" >&2; }
die() { log "bench-allreduce: $*"; exit 1; }

# --- dependencies ----------------------------------------------------------
missing=""
[ -f /usr/include/gloo/allreduce_ring_chunked.h ] || missing="$missing libgloo-dev"
command -v mpicc >/dev/null 2>&1 || missing="$missing libopenmpi-dev"
command -v mpirun >/dev/null 2>&1 || missing="$missing openmpi-bin"
command -v g++ >/dev/null 2>&1 || missing="$missing g++"
if [ -n "$missing" ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    log "== installing:$missing"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2 || true
    # shellcheck disable=SC2086
    apt-get install -y -qq --no-install-recommends $missing >&2 ||
      die "apt-get install$missing failed"
  else
    die "missing:$missing (run as root, or: sudo apt-get install$missing)"
  fi
fi

# --- build the peers (only when a source is newer than its binary) ----------
mkdir -p "$peers" "$results"
if [ ! -x "$peers/gloo_allreduce" ] ||
   [ "$here/bench/peers/gloo_allreduce.cc" -nt "$peers/gloo_allreduce" ]; then
  log "== building $peers/gloo_allreduce"
  g++ -std=c++17 -O2 -Wall -Wextra -o "$peers/gloo_allreduce" \
    "$here/bench/peers/gloo_allreduce.cc" -lgloo -pthread
fi
if [ ! -x "$peers/mpi_allreduce" ] ||
   [ "$here/bench/peers/mpi_allreduce.c" -nt "$peers/mpi_allreduce" ]; then
  log "== building $peers/mpi_allreduce"
  mpicc -std=c11 -O2 -Wall -Wextra -o "$peers/mpi_allreduce" \
    "$here/bench/peers/mpi_allreduce.c"
fi

# --- runners -----------------------------------------------------------------
status=0
tmpdirs=()
cleanup() { [ ${#tmpdirs[@]} -eq 0 ] || rm -rf "${tmpdirs[@]}"; }
trap cleanup EXIT

# run_gloo OUT SIZE-ARGS...: the 4 ranks as background processes meeting
# in a fresh FileStore directory; rank 0's stdout goes to OUT.
run_gloo() {
  local out=$1 store r rc=0 pids=()
  shift
  store=$(mktemp -d "${TMPDIR:-/tmp}/dlcp-gloo-store.XXXXXX")
  tmpdirs+=("$store")
  for r in $(seq 0 $((nranks - 1))); do
    if [ "$r" = 0 ]; then
      timeout "$timeout_s" "$peers/gloo_allreduce" --rank "$r" --size "$nranks" \
        --store "$store" "$@" --big-from "$big_from" --big-iters "$big_iters" \
        --big-warmup "$big_warmup" >"$out" &
    else
      timeout "$timeout_s" "$peers/gloo_allreduce" --rank "$r" --size "$nranks" \
        --store "$store" "$@" --big-from "$big_from" --big-iters "$big_iters" \
        --big-warmup "$big_warmup" >/dev/null &
    fi
    pids+=($!)
  done
  for r in "${!pids[@]}"; do
    wait "${pids[$r]}" || { log "gloo rank $r exited with status $?"; rc=1; }
  done
  return $rc
}

# run_mpi OUT LABEL MCA-ARGS -- SIZE-ARGS...
run_mpi() {
  local out=$1 label=$2 mca=()
  shift 2
  while [ "$1" != -- ]; do mca+=("$1"); shift; done
  shift
  timeout "$timeout_s" mpirun --allow-run-as-root --oversubscribe -np "$nranks" \
    "${mca[@]}" "$peers/mpi_allreduce" "$@" -l "$label" \
    --big-from "$big_from" --big-iters "$big_iters" --big-warmup "$big_warmup" >"$out"
}

# run_dlcp OUT SHM SIZE-ARGS...: only rank 0's rows are kept (dlcp-run
# prefixes every line with "[rank R] ").  SHM is DLCP_SHM: 1 = ranks on
# this host exchange datagrams through shared memory (the default), 0 =
# UDP sockets on loopback, the path between hosts.
run_dlcp() {
  local out=$1 shm=$2
  shift 2
  # shellcheck disable=SC2086
  timeout "$timeout_s" env DLCP_SHM="$shm" "$build/bin/dlcp-run" -n "$nranks" \
    "$build/bin/dlcp-bench" "$@" $dlcp_args >"$out.all"
  sed -n -e 's/^\[rank 0\] //p' -e t -e '/^\[rank [0-9]*\] /d' -e p "$out.all" >"$out"
}

step() {  # step NAME CMD...: run, report, remember failures
  local name=$1 t0=$SECONDS
  shift
  log "== $name"
  if "$@"; then
    log "   done in $((SECONDS - t0)) s"
  else
    log "   FAILED (status $?) after $((SECONDS - t0)) s"
    status=1
  fi
}

have_dlcp=0
if [ -x "$build/bin/dlcp-bench" ] && [ -x "$build/bin/dlcp-run" ]; then
  have_dlcp=1
else
  log "== dlcp: $build/bin/dlcp-bench or dlcp-run not built yet; skipping dlcp (column shows n/a)"
fi

log "== load average before the run: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores"
t_start=$SECONDS
rm -f "$results"/*.txt "$results"/*.all
passes="sweep"
for rep in $(seq "$point_reps"); do passes="$passes points.$rep"; done
for pass in $passes; do
  var=${pass%%.*}
  args=${!var}
  # shellcheck disable=SC2086
  {
    step "gloo ($pass: $args)" run_gloo "$results/gloo.$pass.txt" $args
    step "mpi, btl self,tcp ($pass)" run_mpi "$results/mpi_tcp.$pass.txt" mpi_tcp \
      --mca btl self,tcp --mca btl_tcp_if_include lo -- $args
    step "mpi, default transports ($pass)" run_mpi "$results/mpi_def.$pass.txt" mpi_default -- $args
    if [ "$have_dlcp" = 1 ]; then
      step "dlcp-bench ($pass: $args $dlcp_args)" run_dlcp "$results/dlcp.$pass.txt" 1 $args
      # shellcheck disable=SC2086
      step "dlcp-bench in place ($pass: $args $dlcp_args -i 1)" run_dlcp \
        "$results/dlcp_ip.$pass.txt" 1 $args -i 1
      # shellcheck disable=SC2086
      step "dlcp-bench over UDP ($pass: DLCP_SHM=0 $args $dlcp_args)" run_dlcp \
        "$results/dlcp_udp.$pass.txt" 0 $args
      # shellcheck disable=SC2086
      step "dlcp-bench over UDP in place ($pass: DLCP_SHM=0 $args $dlcp_args -i 1)" \
        run_dlcp "$results/dlcp_udpip.$pass.txt" 0 $args -i 1
    fi
  }
done
log "== all runs took $((SECONDS - t_start)) s; load average now $(cut -d' ' -f1-3 /proc/loadavg)"

# --- the table ---------------------------------------------------------------
# Every program prints nccl-tests style rows; lines starting with '#' are
# comments.  A '#' header line naming the columns (size ... time ... busbw
# ... #wrong) is used when present; otherwise the dlcp-bench order
#   size count type redop algo time(us) algbw busbw #wrong delivered%
# is assumed.  Rows are lines whose first field is a byte count.
for f in "$results"/*.txt; do
  case $f in
    */dlcp.*) src=dlcp ;; */dlcp_ip.*) src=dlcp_ip ;;
    */dlcp_udp.*) src=dlcp_udp ;; */dlcp_udpip.*) src=dlcp_udpip ;;
    */gloo.*) src=gloo ;; */mpi_tcp.*) src=mpi_tcp ;; *) src=mpi_def ;;
  esac
  awk -v src="$src" '
    BEGIN { cs = 1; ca = 5; ct = 6; cb = 8; cw = 9 }
    /^#/ {
      if ($0 ~ /busbw/ && $0 ~ /size/) {
        line = $0; sub(/^#+/, "", line); n = split(line, h, /[ \t]+/); k = 0
        for (i = 1; i <= n; i++) {
          if (h[i] == "") continue
          k++
          if (h[i] ~ /^size/) cs = k
          else if (h[i] ~ /^algo/) ca = k
          else if (h[i] ~ /^time/) ct = k
          else if (h[i] ~ /^busbw/) cb = k
          else if (h[i] ~ /wrong/) cw = k
        }
      }
      next
    }
    $cs ~ /^[0-9]+$/ && NF >= cb {
      print src, $cs, $ca, $ct, $cb, ($cw == "" ? "?" : $cw)
    }' "$f"
done >"$results/rows"

awk -v have_dlcp="$have_dlcp" -v dlcp_args="$dlcp_args" -v n="$nranks" '
  # rows: src size algo time_us busbw wrong.  busbw is recomputed from size
  # and time (same formula, more digits at small sizes); ratios are time
  # ratios, which equal busbw ratios at one size.  A (program, algo, size)
  # measured in several runs counts with the median of its times; gloo
  # then shows its best algorithm.
  {
    s = $2 + 0; t = $4 + 0; sizes[s] = 1
    if ($1 == "dlcp" && $6 == "-1") unchecked = 1
    if ($6 ~ /^[0-9.]+$/ && $6 + 0 > 0) bad = bad sprintf("%s %s %s: %s wrong\n", $1, $2, $3, $6)
    if (t <= 0) next
    k = $1 SUBSEP $3 SUBSEP s
    runs[k] = (k in runs) ? runs[k] " " t : t
  }
  function median(list,   v, c, i, j, x) {
    c = split(list, v, " ")
    for (i = 2; i <= c; i++) { x = v[i] + 0; for (j = i - 1; j >= 1 && v[j] + 0 > x; j--) v[j + 1] = v[j]; v[j + 1] = x }
    return c % 2 ? v[(c + 1) / 2] + 0 : (v[c / 2] + v[c / 2 + 1]) / 2
  }
  function settle(   k, p, t) {
    for (k in runs) {
      split(k, p, SUBSEP); t = median(runs[k])
      if (!((p[1], p[3]) in tm) || t < tm[p[1], p[3]]) { tm[p[1], p[3]] = t; al[p[1], p[3]] = p[2] }
      nruns[p[1], p[3]] = split(runs[k], unused, " ")
    }
  }
  function bw(src, s) { return s / (tm[src, s] * 1e3) * 2 * (n - 1) / n }
  function col(src, s) { return ((src, s) in tm) ? sprintf("%9.4f", bw(src, s)) : sprintf("%9s", "n/a") }
  function human(b) {
    if (b >= 1048576) return sprintf("%d MiB", b / 1048576)
    if (b >= 1024) return sprintf("%d KiB", b / 1024)
    return sprintf("%d B", b)
  }
  # Like for like: Gloo reduces in place (its input restored, untimed),
  # MPI_Allreduce runs out of place; dlcp runs both ways.  ratio_vs(s, ip,
  # op, shm) is the smallest busbw ratio of dlcp (in place |ip| against
  # Gloo, out of place |op| against MPI over TCP and, when |shm|, against
  # MPI with its shared-memory transport): > 1 = dlcp faster than each.
  function ratio_vs(s, ip, op, shm,   r, x) {
    r = -1
    if ((("gloo", s) in tm) && ((ip, s) in tm)) r = tm["gloo", s] / tm[ip, s]
    if ((("mpi_tcp", s) in tm) && ((op, s) in tm)) { x = tm["mpi_tcp", s] / tm[op, s]; if (r < 0 || x < r) r = x }
    if (shm && (("mpi_def", s) in tm) && ((op, s) in tm)) { x = tm["mpi_def", s] / tm[op, s]; if (r < 0 || x < r) r = x }
    return r
  }
  END {
    settle()
    m = 0; for (s in sizes) list[++m] = s + 0
    for (i = 2; i <= m; i++) { v = list[i]; for (j = i - 1; j >= 1 && list[j] > v; j--) list[j + 1] = list[j]; list[j + 1] = v }
    printf "\nall-reduce float32 sum, %d ranks on one host; busbw in GB/s = bytes/time * 2(n-1)/n,\n", n
    printf "time = median over iterations of the max over ranks\n"
    printf "4 KiB and 64 MiB: median of %d runs per program, the programs taking turns\n", nruns["dlcp", 4096] ? nruns["dlcp", 4096] : nruns["mpi_tcp", 4096]
    if (!have_dlcp) printf "dlcp-bench: NOT AVAILABLE in this run (not built yet), dlcp columns are n/a\n"
    else printf "dlcp-bench: %s%s\n", dlcp_args, unchecked ? " (its results unchecked: #wrong -1)" : ""
    printf "%9s  %9s %-19s %9s %9s %9s %-19s %9s %9s %9s %9s %9s\n", "size", "gloo", "(best algo)", "mpi_tcp", "mpi_shm", "dlcp", "(dlcp algo)", "dlcp_ip", "dlcp_udp", "udp_ip", "dlcp/best", "udp/sock"
    for (i = 1; i <= m; i++) {
      s = list[i]; r = ratio_vs(s, "dlcp_ip", "dlcp", 1); ru = ratio_vs(s, "dlcp_udpip", "dlcp_udp", 0)
      printf "%9s  %s %-19s %s %s %s %-19s %s %s %s %9s %9s\n", human(s), col("gloo", s),
        (("gloo", s) in al) ? "(" al["gloo", s] ")" : "", col("mpi_tcp", s), col("mpi_def", s),
        col("dlcp", s), (("dlcp", s) in al) ? "(" al["dlcp", s] ")" : "", col("dlcp_ip", s),
        col("dlcp_udp", s), col("dlcp_udpip", s),
        (r > 0 ? sprintf("%.2fx", r) : "n/a"), (ru > 0 ? sprintf("%.2fx", ru) : "n/a")
    }
    s = 4096
    printf "\nlatency at 4 KiB, time in us (lower is better):\n"
    printf "  gloo %s (%s)   mpi_tcp %s   mpi_shm %s\n",
      (("gloo", s) in tm) ? sprintf("%.1f", tm["gloo", s]) : "n/a", (("gloo", s) in al) ? al["gloo", s] : "-",
      (("mpi_tcp", s) in tm) ? sprintf("%.1f", tm["mpi_tcp", s]) : "n/a",
      (("mpi_def", s) in tm) ? sprintf("%.1f", tm["mpi_def", s]) : "n/a"
    printf "  dlcp %s, in place %s; over UDP %s, in place %s\n",
      (("dlcp", s) in tm) ? sprintf("%.1f", tm["dlcp", s]) : "n/a",
      (("dlcp_ip", s) in tm) ? sprintf("%.1f", tm["dlcp_ip", s]) : "n/a",
      (("dlcp_udp", s) in tm) ? sprintf("%.1f", tm["dlcp_udp", s]) : "n/a",
      (("dlcp_udpip", s) in tm) ? sprintf("%.1f", tm["dlcp_udpip", s]) : "n/a"
    for (j = 0; j < 2; j++) {
      s = j ? 67108864 : 4096
      r = ratio_vs(s, "dlcp_ip", "dlcp", 1); ru = ratio_vs(s, "dlcp_udpip", "dlcp_udp", 0)
      if (r > 0)
        printf "%s: dlcp against every peer (Gloo, MPI over TCP, MPI shared memory): %.2fx busbw = %.2fx time (target %s)\n", human(s), r, 1 / r, (j ? ">= 1.2x busbw" : "<= 1.0x time")
      if (ru > 0)
        printf "%s: dlcp over UDP against the socket-based peers (Gloo, MPI over TCP): %.2fx busbw = %.2fx time\n", human(s), ru, 1 / ru
    }
    printf "dlcp/best: the smallest busbw ratio of dlcp over each peer in the same mode:\n"
    printf "dlcp_ip (in place) / gloo (in place; best of ring, ring_chunked,\n"
    printf "halving_doubling), dlcp (out of place) / mpi_tcp and / mpi_shm (out of place;\n"
    printf "mpi_shm = Open MPI defaults, shared memory between ranks on one host).\n"
    printf "udp/sock: the same for dlcp with DLCP_SHM=0 (UDP on loopback, the path\n"
    printf "between hosts) against the socket-based peers only.\n"
    if (bad != "") { printf "\nWRONG RESULTS:\n%s", bad; exit 3 }
  }' "$results/rows" || status=1

[ "$status" = 0 ] || log "bench-allreduce: some run failed or reported wrong results (see $results)"
exit "$status"
