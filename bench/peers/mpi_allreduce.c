/*
 * mpi_allreduce: float32-sum MPI_Allreduce benchmark, the Open MPI side of
 * scripts/bench-allreduce.sh (dlcp vs Gloo vs Open MPI).
 *
 *   mpirun -np N mpi_allreduce [-b MIN] [-e MAX] [-f F] [-n ITERS]
 *                              [-w WARMUP] [-l LABEL] [--big-from BYTES
 *                              --big-iters ITERS --big-warmup WARMUP]
 *                              [--json FILE]
 *
 * Rank 0 prints one row per size in the style of nccl-tests / dlcp-bench:
 *
 *   size count type redop algo time(us) algbw(GB/s) busbw(GB/s) #wrong
 *   delivered% p90(us) max(us) mean(us)
 *
 * and with --json one JSON object per row (one line) with the same figures
 * and every timed iteration's time in order ("times_us").
 *
 * where "algo" is LABEL (default "mpi"; the script passes "mpi_tcp" or
 * "mpi_default" to tell the transport runs apart).  Open MPI picks the
 * algorithm itself (coll/tuned decision rules), as an application sees it.
 *
 * Method, per size: WARMUP untimed and ITERS timed iterations; each is an
 * MPI_Barrier, then MPI_Allreduce (out of place) timed with MPI_Wtime on
 * every rank.  After the loop the per-iteration times are max-reduced to
 * rank 0 (the same numbers as a per-iteration reduction, without traffic
 * between iterations) and the reported time is the median over iterations
 * of that max.  algbw = bytes / time, busbw = algbw * 2(N-1)/N.
 *
 * Check: rank r's element i is (i + 3r) mod 13, a small integer, so every
 * sum is exact in float; after the last iteration every element of the
 * result is compared with the exact sum.  #wrong counts wrong elements over
 * all ranks; the exit status is 1 if any is wrong.
 */
#include <errno.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct opts {
  uint64_t min_bytes, max_bytes, factor, big_from;
  int iters, warmup, big_iters, big_warmup;
  const char *label;
  const char *json; /* NULL: no JSON */
};

static void usage(FILE *f) {
  fprintf(f,
          "usage: mpirun -np N mpi_allreduce [-b MIN] [-e MAX] [-f F] [-n ITERS]\n"
          "                    [-w WARMUP] [-l LABEL]\n"
          "                    [--big-from B --big-iters N --big-warmup W]\n"
          "  -b, -e          smallest / largest message in bytes, K/M/G suffixes\n"
          "                  allowed, multiples of 4 (default 8 and 256M)\n"
          "  -f F            size step factor, >= 2 (default 4)\n"
          "  -n ITERS        timed iterations per size, 1..100000 (default 20)\n"
          "  -w WARMUP       untimed iterations per size, 0..100000 (default 5)\n"
          "  -l LABEL        text for the algo column, no spaces (default mpi)\n"
          "  --big-from B    sizes >= B bytes use --big-iters timed and\n"
          "                  --big-warmup untimed iterations instead (all three\n"
          "                  go together; N 1..100000, W 0..100000)\n"
          "  --json FILE     rank 0 also writes one JSON object per row to FILE\n");
}

/* parse_bytes accepts a decimal with an optional K, M or G (binary) suffix. */
static int parse_bytes(const char *s, uint64_t *out) {
  char *end;
  unsigned long long v;
  unsigned shift = 0;
  if (s == NULL || *s < '0' || *s > '9') return -1;
  errno = 0;
  v = strtoull(s, &end, 10);
  if (errno) return -1;
  if (*end == 'K' || *end == 'k') shift = 10, end++;
  else if (*end == 'M' || *end == 'm') shift = 20, end++;
  else if (*end == 'G' || *end == 'g') shift = 30, end++;
  if (*end != '\0' || v > (UINT64_MAX >> shift)) return -1;
  *out = (uint64_t)v << shift;
  return 0;
}

static int parse_int(const char *s, long min, long max, int *out) {
  char *end;
  long v;
  if (s == NULL || *s < '0' || *s > '9') return -1;
  errno = 0;
  v = strtol(s, &end, 10);
  if (errno || *end != '\0' || v < min || v > max) return -1;
  *out = (int)v;
  return 0;
}

/* parse_args returns 0 on success, 1 for --help, -1 (after a message) on
 * a bad command line. */
static int parse_args(int argc, char **argv, struct opts *o) {
  int i, f;
  o->min_bytes = 8;
  o->max_bytes = 256ull << 20;
  o->factor = 4;
  o->big_from = UINT64_MAX;
  o->iters = 20;
  o->warmup = 5;
  o->big_iters = 0;
  o->big_warmup = 0;
  o->label = "mpi";
  o->json = NULL;
  for (i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    int bad = 0;
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) return 1;
    if (v == NULL) {
      fprintf(stderr, "mpi_allreduce: missing value for %s\n", a);
      return -1;
    }
    i++;
    if (!strcmp(a, "-b")) bad = parse_bytes(v, &o->min_bytes);
    else if (!strcmp(a, "-e")) bad = parse_bytes(v, &o->max_bytes);
    else if (!strcmp(a, "-f")) {
      bad = parse_int(v, 2, 1 << 20, &f);
      o->factor = (uint64_t)f;
    } else if (!strcmp(a, "-n")) bad = parse_int(v, 1, 100000, &o->iters);
    else if (!strcmp(a, "-w")) bad = parse_int(v, 0, 100000, &o->warmup);
    else if (!strcmp(a, "-l")) bad = (*v == '\0' || strpbrk(v, " \t\n") != NULL);
    else if (!strcmp(a, "--big-from")) bad = parse_bytes(v, &o->big_from);
    else if (!strcmp(a, "--big-iters")) bad = parse_int(v, 1, 100000, &o->big_iters);
    else if (!strcmp(a, "--big-warmup")) bad = parse_int(v, 0, 100000, &o->big_warmup);
    else if (!strcmp(a, "--json")) o->json = v;
    else {
      fprintf(stderr, "mpi_allreduce: unknown option %s\n", a);
      return -1;
    }
    if (!strcmp(a, "-l") && !bad) o->label = v;
    if (bad) {
      fprintf(stderr, "mpi_allreduce: bad value for %s: '%s'\n", a, v);
      return -1;
    }
  }
  /* MPI counts are int. */
  if (o->min_bytes == 0 || o->min_bytes % 4 || o->max_bytes % 4 ||
      o->min_bytes > o->max_bytes || o->max_bytes / 4 > 0x7fffffffull) {
    fprintf(stderr, "mpi_allreduce: -b/-e must be multiples of 4 with "
                    "0 < MIN <= MAX <= 8G\n");
    return -1;
  }
  if ((o->big_from != UINT64_MAX) != (o->big_iters != 0)) {
    fprintf(stderr, "mpi_allreduce: --big-from and --big-iters go together\n");
    return -1;
  }
  return 0;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv) {
  struct opts o;
  int rank, n, rc, it;
  uint64_t bytes, total_wrong = 0;
  size_t max_count, i;
  float *in, *out;
  double *t, *tmax, *order;
  FILE *json = NULL;

  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  rc = parse_args(argc, argv, &o);
  if (rc) {
    if (rank == 0) usage(rc > 0 ? stdout : stderr);
    MPI_Finalize();
    return rc > 0 ? 0 : 2;
  }
  if (n < 2) {
    if (rank == 0) fprintf(stderr, "mpi_allreduce: needs at least 2 ranks\n");
    MPI_Finalize();
    return 2;
  }

  max_count = (size_t)(o.max_bytes / 4);
  in = malloc(max_count * sizeof *in);
  out = malloc(max_count * sizeof *out);
  t = malloc((size_t)(o.iters > o.big_iters ? o.iters : o.big_iters) * sizeof *t);
  tmax = malloc((size_t)(o.iters > o.big_iters ? o.iters : o.big_iters) * sizeof *tmax);
  order = malloc((size_t)(o.iters > o.big_iters ? o.iters : o.big_iters) * sizeof *order);
  if (!in || !out || !t || !tmax || !order) {
    fprintf(stderr, "mpi_allreduce: rank %d: out of memory\n", rank);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  for (i = 0; i < max_count; i++) in[i] = (float)((i + 3u * (unsigned)rank) % 13u);

  if (rank == 0 && o.json && !(json = fopen(o.json, "w"))) {
    fprintf(stderr, "mpi_allreduce: --json %s: %s\n", o.json, strerror(errno));
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  if (rank == 0) {
    printf("# mpi_allreduce: %d ranks, MPI_Allreduce, float32 sum, warmup %d, iters %d",
           n, o.warmup, o.iters);
    if (o.big_iters)
      printf(" (from %llu B: warmup %d, iters %d)", (unsigned long long)o.big_from,
             o.big_warmup, o.big_iters);
    printf("\n# time = median over iterations of the max over ranks\n");
    printf("#%11s %12s %6s %6s %16s %12s %12s %12s %7s %10s %11s %11s %11s\n", "size",
           "count", "type", "redop", "algo", "time(us)", "algbw(GB/s)", "busbw(GB/s)",
           "#wrong", "delivered%", "p90(us)", "max(us)", "mean(us)");
    fflush(stdout);
  }

  for (bytes = o.min_bytes; bytes <= o.max_bytes; bytes *= o.factor) {
    const int count = (int)(bytes / 4);
    const int big = bytes >= o.big_from;
    const int iters = big ? o.big_iters : o.iters;
    const int warmup = big ? o.big_warmup : o.warmup;
    unsigned long long wrong = 0, wrong_all = 0;
    double med, algbw, p90, mean = 0;

    for (it = -warmup; it < iters; it++) {
      double t0, t1;
      MPI_Barrier(MPI_COMM_WORLD);
      t0 = MPI_Wtime();
      MPI_Allreduce(in, out, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      t1 = MPI_Wtime();
      if (it >= 0) t[it] = t1 - t0;
    }

    /* Check the last result against the exact sum. */
    for (i = 0; i < (size_t)count; i++) {
      unsigned s = 0;
      int r;
      for (r = 0; r < n; r++) s += (unsigned)((i + 3u * (unsigned)r) % 13u);
      if (out[i] != (float)s) wrong++;
    }
    MPI_Reduce(&wrong, &wrong_all, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    MPI_Reduce(t, tmax, iters, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);

    if (rank == 0) {
      total_wrong += wrong_all;
      memcpy(order, tmax, (size_t)iters * sizeof *tmax);
      qsort(tmax, (size_t)iters, sizeof *tmax, cmp_double);
      med = iters % 2 ? tmax[iters / 2] : 0.5 * (tmax[iters / 2 - 1] + tmax[iters / 2]);
      p90 = tmax[(9 * iters + 9) / 10 - 1]; /* nearest rank */
      for (it = 0; it < iters; it++) mean += tmax[it] / iters;
      algbw = (double)bytes / med / 1e9;
      printf("%12llu %12d %6s %6s %16s %12.1f %12.3f %12.3f %7llu %10.2f %11.1f %11.1f %11.1f\n",
             (unsigned long long)bytes, count, "float", "sum", o.label, med * 1e6, algbw,
             algbw * 2.0 * (n - 1) / n, wrong_all, 100.0, p90 * 1e6, tmax[iters - 1] * 1e6,
             mean * 1e6);
      fflush(stdout);
      if (json) {
        fprintf(json,
                "{\"impl\":\"mpi\",\"ranks\":%d,\"algo\":\"%s\",\"bytes\":%llu,"
                "\"p50_us\":%.1f,\"p90_us\":%.1f,\"max_us\":%.1f,\"mean_us\":%.1f,"
                "\"wrong\":%llu,\"delivered\":1,\"times_us\":[",
                n, o.label, (unsigned long long)bytes, med * 1e6, p90 * 1e6,
                tmax[iters - 1] * 1e6, mean * 1e6, wrong_all);
        for (it = 0; it < iters; it++) fprintf(json, "%s%.1f", it ? "," : "", order[it] * 1e6);
        fprintf(json, "]}\n");
        fflush(json);
      }
    }
    if (bytes > o.max_bytes / o.factor) break; /* no overflow of bytes *= factor */
  }

  MPI_Bcast(&total_wrong, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
  if (rank == 0 && total_wrong)
    fprintf(stderr, "mpi_allreduce: %llu wrong elements\n", (unsigned long long)total_wrong);
  free(in);
  free(out);
  free(t);
  free(tmax);
  free(order);
  if (json) fclose(json);
  MPI_Finalize();
  return total_wrong ? 1 : 0;
}
