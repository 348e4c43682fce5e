#!/bin/bash
# bench-auto.sh [BUILD_DIR]: is AUTO the fastest all-reduce algorithm, or
# within 10 % of it, at every size of bench-allreduce's sweep?
#
# 4 local ranks (RANKS=N to change), dlcp-bench -b 8 -e 128M -f 4 (8 B ..
# 128 MiB) with -n 20 -w 5 as in bench-allreduce, once per algorithm: auto
# and every algorithm AUTO may pick for an all-reduce without topology
# labels (ring, ps, halving_doubling, recursive_doubling on power-of-two
# worlds, direct).  REPS rounds (default 5), the algorithms taking turns in
# each; every program's time per size is the median of its rounds.  Prints
# per size each algorithm's median time, the fastest, what AUTO ran and
# AUTO's time over the fastest's, alone and pooled (AUTO's rounds counted
# as rounds of the algorithm it ran, which is the same code, so noise
# between two sets of rounds of one program is not taken for a wrong
# choice), then one verdict line on the pooled ratio.  DLCP_SHM=0 runs
# over UDP on loopback (the rules for ranks on different hosts) instead of
# the shared-memory rings.  LAUNCH replaces `dlcp-run -n RANKS` with
# another launcher, e.g. LAUNCH="tools/dlcp-testbed run --id ID --stats
# none --" for one rank per host of an emulated testbed (RANKS must then
# be its host count): the rules between hosts measured on links rather
# than loopback.  Exits 1 if a run fails, 3 if AUTO is more than 10 %
# slower than the fastest at some size.
set -eu
build=${1:-build}
ranks=${RANKS:-4}
reps=${REPS:-5}
sweep=${SWEEP:--b 8 -e 128M -f 4}
iters=${ITERS:--n 20 -w 5}
algos="auto ring ps halving_doubling direct"
if [ $((ranks & (ranks - 1))) = 0 ]; then
  algos="$algos recursive_doubling"
fi
launch=${LAUNCH:-$build/bin/dlcp-run -n $ranks}
out=$(mktemp -d "${TMPDIR:-/tmp}/dlcp-auto.XXXXXX")
trap 'rm -rf "$out"' EXIT

echo "# $ranks ranks ($launch), DLCP_SHM=${DLCP_SHM:-1}, dlcp-bench $sweep $iters -c 0, $reps rounds, algorithms taking turns"
for rep in $(seq "$reps"); do
  for a in $algos; do
    # shellcheck disable=SC2086 # $launch, $sweep and $iters are word lists
    if ! $launch "$build/bin/dlcp-bench" $sweep $iters \
        -a "$a" -c 0 >"$out/run.$a.$rep" 2>&1; then
      cat "$out/run.$a.$rep" >&2
      echo "bench-auto: $a failed in round $rep" >&2
      exit 1
    fi
    # rows: algo-asked size time algo-ran
    awk -v a="$a" '/^\[rank 0\] +[0-9]/ { print a, $3, $8, $7 }' \
      "$out/run.$a.$rep" >>"$out/rows"
  done
done

awk -v algos="$algos" '
  function median(list,   v, c, i, j, x) {
    c = split(list, v, " ")
    for (i = 2; i <= c; i++) { x = v[i] + 0; for (j = i - 1; j >= 1 && v[j] + 0 > x; j--) v[j + 1] = v[j]; v[j + 1] = x }
    return c % 2 ? v[(c + 1) / 2] + 0 : (v[c / 2] + v[c / 2 + 1]) / 2
  }
  function human(b) {
    if (b >= 1048576) return sprintf("%d MiB", b / 1048576)
    if (b >= 1024) return sprintf("%d KiB", b / 1024)
    return sprintf("%d B", b)
  }
  {
    k = $1 SUBSEP $2; t[k] = (k in t) ? t[k] " " $3 : $3; sizes[$2 + 0] = 1
    if ($1 == "auto") ran[$2 + 0] = $4
  }
  END {
    na = split(algos, A, " ")
    m = 0; for (s in sizes) L[++m] = s + 0
    for (i = 2; i <= m; i++) { v = L[i]; for (j = i - 1; j >= 1 && L[j] > v; j--) L[j + 1] = L[j]; L[j + 1] = v }
    printf "%9s", "size"
    for (i = 1; i <= na; i++) printf " %10s", substr(A[i], 1, 10)
    printf "  %-18s %-18s %s\n", "fastest", "auto ran", "auto/fastest alone pooled"
    worst = 0
    for (i = 1; i <= m; i++) {
      s = L[i]; best = -1; bn = ""
      printf "%9s", human(s)
      for (j = 1; j <= na; j++) {
        k = A[j] SUBSEP s
        if (!(k in t)) { printf " %10s", "-"; continue }
        x = median(t[k]); med[A[j]] = x
        printf " %10.1f", x
        if (A[j] != "auto" && (best < 0 || x < best)) { best = x; bn = A[j] }
      }
      r = med["auto"] / best
      # "-a auto" that resolved to X runs exactly the code of X, so both sets
      # of rounds sample one program: pool them into the time of X for the
      # verdict (and for the fastest), rather than judge AUTO on two
      # separate sets whose medians differ by the noise of the machine alone.
      k = ran[s] SUBSEP s
      pooled = r
      if (k in t) {
        px = median(t["auto" SUBSEP s] " " t[k])
        pbest = px
        for (j = 1; j <= na; j++)
          if (A[j] != "auto" && A[j] != ran[s] && med[A[j]] < pbest) pbest = med[A[j]]
        pooled = px / pbest
      }
      if (pooled > worst) { worst = pooled; ws = s }
      printf "  %-18s %-18s %6.3f %6.3f%s\n", bn, ran[s], r, pooled, (pooled > 1.10 ? "  <-- over 1.10" : "")
    }
    printf "times: median over rounds of dlcp-bench time (us, median over iterations of the max over ranks)\n"
    printf "auto/fastest: AUTO'"'"'s rounds alone; pooled: the rounds of AUTO and of the algorithm it ran taken as one set (the same code)\n"
    printf "worst pooled auto/fastest: %.3f at %s (target <= 1.10)\n", worst, human(ws)
    exit (worst > 1.10 ? 3 : 0)
  }' "$out/rows"
