/*
 * dlcp-bench: all-reduce benchmark in the style of nccl-tests.
 *
 *   dlcp-run -n 4 build/bin/dlcp-bench -b 8 -e 256M -f 4 -a ring -p 0 -c 1
 *                                      -n 20 -w 5
 *
 *   -b/-e  smallest and largest size in bytes (K/M/G suffixes)
 *   -f     size multiplication factor              (default 2)
 *   -a     algorithm: auto ring ring_bypass ps hd rat direct rd
 *          (default auto)
 *   -p     loss bound for the data, [0, 1)         (default 0)
 *   -c     check every result against a reference (default 1)
 *   -n/-w  timed and warm-up iterations per size   (default 20 / 5)
 *   -d     type: float half bfloat16 int32 int64   (default float)
 *   -o     reduction: sum avg min max              (default sum)
 *   -i     in place                                 (default 0)
 *   -C     pipelining chunk in bytes                (default: the library's)
 *   -J     also write one JSON object per size to this file (rank 0)
 *
 * One row per size: size, count, type, redop, the algorithm that ran,
 * time (us; per iteration the slowest rank, median over iterations;
 * ranks line up on a barrier before each iteration), algbw = size / time,
 * busbw = algbw * 2(n-1)/n (GB/s), #wrong (elements differing from the
 * reference, over all ranks), the delivered fraction (%, mean over the
 * timed iterations and the ranks), then the 90th percentile (nearest
 * rank), the maximum and the mean of the same per-iteration times (us).
 * The JSON object has these figures, the least delivered fraction of any
 * rank in any timed iteration ("delivered_min") and every timed
 * iteration's time in order ("times_us"), for tails and drift, and beside
 * each, summed over the ranks, what the transport did in it
 * ("iterations": window timeouts, data retransmissions, control
 * datagrams sent again, the peers' mean ACK hold in us, and how long the
 * ranks' threads waited for a CPU while ready to run, in us, from the
 * kernel's schedstat): what to read first when one iteration took longer
 * than the others.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "coll/coll.h"
#include "dlcp/dlcp.h"

typedef struct options {
  uint64_t min_bytes, max_bytes, factor;
  dlcp_algo algo;
  double p;
  int check, iters, warmup, inplace;
  uint64_t chunk;
  const char *json_path; /* NULL: no JSON */
  dlcp_dtype dtype;
  dlcp_redop redop;
} options;

static const char *const kTypes[] = {"float", "half", "bfloat16", "int32",
                                     "int64"};
static const char *const kOps[] = {"sum", "avg", "min", "max"};
static const size_t kTypeSize[] = {4, 2, 2, 4, 8};

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static const char kSynopsis[] =
    "usage: dlcp-bench [-b BYTES] [-e BYTES] [-f N] [-a ALGO] [-p P] "
    "[-c 0|1] [-n N] [-w N] [-d TYPE] [-o OP] [-i 0|1] [-C BYTES] "
    "[-J FILE]\n";

static void help(void) {
  printf("%s"
         "\n"
         "All-reduce benchmark in the style of nccl-tests, run as every rank "
         "of a job:\n"
         "  dlcp-run -n 4 dlcp-bench -b 8 -e 256M -f 4\n"
         "\n"
         "  -b, -e BYTES  smallest and largest size (K/M/G suffixes; default "
         "8 and 256M)\n"
         "  -f N          size multiplication factor, >= 2 (default 2)\n"
         "  -a ALGO       auto ring ring_bypass ps hd rat direct rd "
         "(default auto)\n"
         "  -p P          loss bound for the data, [0, 1) (default 0)\n"
         "  -c 0|1        check every result against a reference (default "
         "1)\n"
         "  -n, -w N      timed and warm-up iterations per size (default 20 "
         "and 5)\n"
         "  -d TYPE       float half bfloat16 int32 int64 (default float)\n"
         "  -o OP         sum avg min max (default sum)\n"
         "  -i 0|1        in place (default 0)\n"
         "  -C BYTES      pipelining chunk (default: the library's)\n"
         "  -J FILE       also write one JSON object per size, with every "
         "iteration's\n"
         "                time, what the transport did in it and the ranks' "
         "wait\n"
         "                for a CPU (rank 0)\n"
         "  -h, --help    show this help\n"
         "\n"
         "One row per size: the algorithm that ran, the slowest rank's time "
         "(median\n"
         "over iterations, ranks lined up on a barrier before each), algbw, "
         "busbw,\n"
         "#wrong elements, the delivered fraction, then p90, max and mean "
         "time.\n"
         "The job comes from the environment (RANK, WORLD_SIZE, "
         "MASTER_ADDR,\n"
         "MASTER_PORT, DLCP_*: docs/runtime.md).\n",
         kSynopsis);
}

/* Reports a usage error (printf-style |fmt|) and returns the exit status. */
static int usage(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("dlcp-bench: ", stderr);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fprintf(stderr, " (see dlcp-bench --help)\n%s", kSynopsis);
  return 2;
}

static int parse_bytes(const char *s, uint64_t *out) {
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  uint64_t mult = 1;
  switch (*end) {
  case 'K': case 'k': mult = 1ull << 10; end++; break;
  case 'M': case 'm': mult = 1ull << 20; end++; break;
  case 'G': case 'g': mult = 1ull << 30; end++; break;
  default: break;
  }
  if (errno || end == s || *end || s[0] == '-' || v == 0) {
    return -1;
  }
  *out = v * mult;
  return 0;
}

static int pick(const char *s, const char *const *names, size_t n) {
  for (size_t i = 0; i < n; i++) {
    if (strcmp(s, names[i]) == 0) {
      return (int)i;
    }
  }
  return -1;
}

static int parse_int(const char *s, int lo, int hi, int *out) {
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno || end == s || *end || v < lo || v > hi) {
    return -1;
  }
  *out = (int)v;
  return 0;
}

/* parse's result besides 0 (run) and 2 (a usage error, reported). */
#define PARSED_HELP 1

static int parse(int argc, char **argv, options *o) {
  *o = (options){.min_bytes = 8, .max_bytes = 256u << 20, .factor = 2,
                 .algo = DLCP_ALGO_AUTO, .check = 1, .iters = 20,
                 .warmup = 5, .dtype = DLCP_FLOAT32, .redop = DLCP_SUM};
  for (int i = 1; i < argc; i += 2) {
    const char *f = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(f, "-h") == 0 || strcmp(f, "--help") == 0) {
      help();
      return PARSED_HELP;
    }
    if (f[0] != '-') {
      return usage("unexpected argument '%s'", f);
    }
    if (strlen(f) != 2) {
      return usage("unknown option '%s'", f);
    }
    if (!v) {
      return usage("%s needs a value", f);
    }
    int k;
    switch (f[1]) {
    case 'b':
      if (parse_bytes(v, &o->min_bytes)) {
        return usage("-b: expected a size in bytes such as 8 or 64K, not '%s'",
                     v);
      }
      break;
    case 'e':
      if (parse_bytes(v, &o->max_bytes)) {
        return usage("-e: expected a size in bytes such as 256M, not '%s'", v);
      }
      break;
    case 'f':
      if (parse_bytes(v, &o->factor) || o->factor < 2) {
        return usage("-f: expected an integer factor >= 2, not '%s'", v);
      }
      break;
    case 'a':
      /* The short names, or the names the result rows print. */
      if (dlcp_algo_parse(v, &o->algo) != 0) {
        return usage("-a: expected auto, ring, ring_bypass, ps, hd "
                     "(halving_doubling), rat, direct or rd "
                     "(recursive_doubling), not '%s'",
                     v);
      }
      break;
    case 'p': {
      char *end;
      o->p = strtod(v, &end);
      if (*end || !(o->p >= 0.0 && o->p < 1.0)) {
        return usage("-p: expected a loss bound in [0, 1), not '%s'", v);
      }
      break;
    }
    case 'c':
      if (parse_int(v, 0, 1, &o->check)) {
        return usage("-c: expected 0 or 1, not '%s'", v);
      }
      break;
    case 'n':
      if (parse_int(v, 1, 100000, &o->iters)) {
        return usage("-n: expected 1..100000 iterations, not '%s'", v);
      }
      break;
    case 'w':
      if (parse_int(v, 0, 100000, &o->warmup)) {
        return usage("-w: expected 0..100000 warm-up iterations, not '%s'", v);
      }
      break;
    case 'd':
      if ((k = pick(v, kTypes, 5)) < 0) {
        return usage(
            "-d: expected float, half, bfloat16, int32 or int64, not '%s'", v);
      }
      o->dtype = (dlcp_dtype)k;
      break;
    case 'o':
      if ((k = pick(v, kOps, 4)) < 0) {
        return usage("-o: expected sum, avg, min or max, not '%s'", v);
      }
      o->redop = (dlcp_redop)k;
      break;
    case 'i':
      if (parse_int(v, 0, 1, &o->inplace)) {
        return usage("-i: expected 0 or 1, not '%s'", v);
      }
      break;
    case 'C':
      if (parse_bytes(v, &o->chunk)) {
        return usage("-C: expected a chunk size in bytes such as 1M, not '%s'",
                     v);
      }
      break;
    case 'J':
      o->json_path = v;
      break;
    default:
      return usage("unknown option '%s'", f);
    }
  }
  if (o->min_bytes > o->max_bytes) {
    return usage("-b must not exceed -e");
  }
  return 0;
}

/* Half and bfloat16 from small integers: exact conversions. */
static uint16_t to_half(double v) {
  /* v is a small non-negative integer (< 2048): exact in binary16. */
  if (v == 0) {
    return 0;
  }
  int e = 0;
  double m = frexp(v, &e); /* v = m * 2^e, m in [0.5, 1) */
  uint16_t exp = (uint16_t)(e - 1 + 15);
  uint16_t frac = (uint16_t)((m * 2.0 - 1.0) * 1024.0);
  return (uint16_t)(exp << 10 | frac);
}

static double from_half(uint16_t h) {
  int exp = (h >> 10) & 0x1F, frac = h & 0x3FF;
  if (exp == 0) {
    return ldexp(frac, -24);
  }
  return ldexp(1.0 + frac / 1024.0, exp - 15) * ((h & 0x8000) ? -1 : 1);
}

static void put(void *buf, dlcp_dtype t, uint64_t i, double v) {
  switch (t) {
  case DLCP_FLOAT32: ((float *)buf)[i] = (float)v; break;
  case DLCP_FLOAT16: ((uint16_t *)buf)[i] = to_half(v); break;
  case DLCP_BFLOAT16: {
    float f = (float)v;
    uint32_t u;
    memcpy(&u, &f, 4);
    ((uint16_t *)buf)[i] = (uint16_t)(u >> 16); /* exact: small integers */
    break;
  }
  case DLCP_INT32: ((int32_t *)buf)[i] = (int32_t)v; break;
  case DLCP_INT64: ((int64_t *)buf)[i] = (int64_t)v; break;
  default: break;
  }
}

static double get(const void *buf, dlcp_dtype t, uint64_t i) {
  switch (t) {
  case DLCP_FLOAT32: return ((const float *)buf)[i];
  case DLCP_FLOAT16: return from_half(((const uint16_t *)buf)[i]);
  case DLCP_BFLOAT16: {
    uint32_t u = (uint32_t)((const uint16_t *)buf)[i] << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
  }
  case DLCP_INT32: return ((const int32_t *)buf)[i];
  case DLCP_INT64: return (double)((const int64_t *)buf)[i];
  default: return 0;
  }
}

/* Rank r's element i is (r + 1) * (i % 5 + 1): small integers, so sums
 * are exact in every type for the worlds a loopback run has. */
static double input(uint32_t r, uint64_t i) {
  return (double)(r + 1) * (double)(i % 5 + 1);
}

static double expected(const options *o, uint32_t n, uint64_t i) {
  double k = (double)(i % 5 + 1);
  switch (o->redop) {
  case DLCP_SUM: return k * n * (n + 1) / 2.0;
  case DLCP_AVG: {
    double avg = k * (n + 1) / 2.0;
    return o->dtype >= DLCP_INT32 ? trunc(avg) : avg;
  }
  case DLCP_MIN: return k;
  case DLCP_MAX: return k * n;
  default: return 0;
  }
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return (x > y) - (x < y);
}

/* Per-iteration times of one size, sorted, summarised. */
typedef struct summary {
  double p50_us, p90_us, max_us, mean_us;
} summary;

static summary summarise(const uint64_t *sorted, int n) {
  summary s = {0};
  double sum = 0;
  for (int i = 0; i < n; i++) {
    sum += (double)sorted[i];
  }
  int p90 = (9 * n + 9) / 10 - 1; /* nearest rank: ceil(0.9 n) - 1 */
  s.p50_us = (double)sorted[n / 2] / 1e3;
  s.p90_us = (double)sorted[p90] / 1e3;
  s.max_us = (double)sorted[n - 1] / 1e3;
  s.mean_us = sum / n / 1e3;
  return s;
}

/* What the transport did in each timed iteration, one array per counter
 * (deltas of dlcp_comm_stats and of the threads' run-queue wait, summed
 * over the ranks once all ran). */
enum {
  C_WINDOW_TIMEOUTS,
  C_RETX,
  C_CONTROL_RETX,
  C_ACKS,
  C_ACK_HOLD_NS,
  C_RUNQ_NS,
  C_COUNT
};
static const char *const kCounterNames[C_ACKS] = {
    "window_timeouts", "retransmissions", "control_retx"};

/* How long this process's threads have waited on a run queue, ready to
 * run (ns; the second field of each thread's schedstat): on a host whose
 * cores its ranks and network share, what an iteration lost to waiting
 * for a CPU; 0 where the kernel keeps no such figure.  The threads' files
 * are opened once per size and read again with pread: a walk of /proc per
 * read took some 50 us of the cores the ranks share (4 ranks on
 * loopback, 64 KiB with -J: 76 -> 176 us a median).  A thread started
 * after the open is not counted. */
#define RUNQ_MAX_THREADS 64
typedef struct runq {
  int fd[RUNQ_MAX_THREADS];
  int n;
} runq;

static void runq_open(runq *r) {
  r->n = 0;
  DIR *d = opendir("/proc/self/task");
  if (d == NULL) {
    return;
  }
  for (struct dirent *e; r->n < RUNQ_MAX_THREADS && (e = readdir(d)) != NULL;) {
    char path[64];
    if (e->d_name[0] == '.' ||
        snprintf(path, sizeof(path), "/proc/self/task/%s/schedstat",
                 e->d_name) >= (int)sizeof(path)) {
      continue;
    }
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
      r->fd[r->n++] = fd;
    }
  }
  closedir(d);
}

static void runq_close(runq *r) {
  for (int i = 0; i < r->n; i++) {
    close(r->fd[i]);
  }
  r->n = 0;
}

static int64_t runq_wait_ns(const runq *r) {
  int64_t sum = 0;
  for (int i = 0; i < r->n; i++) {
    char buf[96];
    unsigned long long wait;
    ssize_t len = pread(r->fd[i], buf, sizeof(buf) - 1, 0);
    if (len > 0) {
      buf[len] = '\0';
      if (sscanf(buf, "%*s %llu", &wait) == 1) {
        sum += (int64_t)wait;
      }
    }
  }
  return sum;
}

static void read_counters(dlcp_comm *comm, const runq *rq,
                          int64_t v[C_COUNT]) {
  dlcp_comm_stats st;
  dlcp_comm_get_stats(comm, &st);
  v[C_WINDOW_TIMEOUTS] = (int64_t)st.window_timeouts;
  v[C_RETX] = (int64_t)st.retransmissions;
  v[C_CONTROL_RETX] = (int64_t)st.control_retx;
  v[C_ACKS] = (int64_t)st.acks_received;
  v[C_ACK_HOLD_NS] = (int64_t)st.ack_hold_ns;
  v[C_RUNQ_NS] = runq_wait_ns(rq);
}

/* Records in |row| what each counter grew by since |before|. */
static void count_iteration(dlcp_comm *comm, const runq *rq,
                            const int64_t before[C_COUNT],
                            int64_t row[C_COUNT]) {
  int64_t now[C_COUNT];
  read_counters(comm, rq, now);
  for (int c = 0; c < C_COUNT; c++) {
    row[c] = now[c] - before[c];
  }
}

/* One JSON object (one line) for a size: the row's figures and every
 * timed iteration in order (|order|, slowest rank each; |iter|, summed
 * over the ranks). */
static void write_json(FILE *f, const options *o, uint32_t n, uint64_t bytes,
                       const char *algo, const summary *s,
                       const int64_t *order,
                       const int64_t (*iter)[C_COUNT],
                       int64_t wrong, double delivered,
                       double delivered_min) {
  fprintf(f, "{\"impl\":\"dlcp\",\"ranks\":%u,\"algo\":\"%s\",\"bytes\":%llu,"
          "\"type\":\"%s\",\"redop\":\"%s\",\"loss_bound\":%g,"
          "\"p50_us\":%.1f,\"p90_us\":%.1f,\"max_us\":%.1f,"
          "\"mean_us\":%.1f,\"wrong\":%lld,\"delivered\":%.6f,"
          "\"delivered_min\":%.6f,\"times_us\":[",
          n, algo, (unsigned long long)bytes, kTypes[o->dtype],
          kOps[o->redop], o->p, s->p50_us, s->p90_us, s->max_us, s->mean_us,
          (long long)(o->check ? wrong : -1), delivered, delivered_min);
  for (int i = 0; i < o->iters; i++) {
    fprintf(f, "%s%.1f", i ? "," : "", (double)order[i] / 1e3);
  }
  fprintf(f, "],\"iterations\":{");
  for (int c = 0; c < C_ACKS; c++) {
    fprintf(f, "\"%s\":[", kCounterNames[c]);
    for (int i = 0; i < o->iters; i++) {
      fprintf(f, "%s%lld", i ? "," : "", (long long)iter[i][c]);
    }
    fprintf(f, "],");
  }
  fprintf(f, "\"ack_hold_us\":[");
  for (int i = 0; i < o->iters; i++) {
    int64_t acks = iter[i][C_ACKS];
    fprintf(f, "%s%.1f", i ? "," : "",
            acks > 0 ? (double)iter[i][C_ACK_HOLD_NS] / (double)acks / 1e3
                     : 0.0);
  }
  fprintf(f, "],\"runq_wait_us\":[");
  for (int i = 0; i < o->iters; i++) {
    fprintf(f, "%s%.1f", i ? "," : "", (double)iter[i][C_RUNQ_NS] / 1e3);
  }
  fprintf(f, "]}}\n");
  fflush(f);
}

/* Runs one all-reduce; |*done| is its request, which owns info->missing:
 * the caller frees it once it has read the result. */
static int run_coll(dlcp_comm *comm, const void *in, void *out,
                    uint64_t count, const options *o, dlcp_coll_info *info,
                    dlcp_request **done) {
  dlcp_coll_opts opts;
  dlcp_coll_opts_default(&opts);
  opts.algo = o->algo;
  opts.loss_bound = o->p;
  opts.chunk_bytes = o->chunk;
  dlcp_request *req;
  int rv = dlcp_allreduce(comm, in, out, count, o->dtype, o->redop, &opts,
                          &req);
  if (rv != 0) {
    fprintf(stderr, "dlcp-bench: allreduce: %s\n", dlcp_strerror(rv));
    return rv;
  }
  rv = dlcp_wait(req, -1, info);
  if (rv != 0) {
    fprintf(stderr, "dlcp-bench: allreduce failed: %s\n", info->error);
  }
  *done = req;
  return rv;
}

/* An int64 all-reduce of |n| values (max or sum) for bookkeeping. */
static int reduce_i64(dlcp_comm *comm, int64_t *v, uint64_t n,
                      dlcp_redop op) {
  dlcp_coll_opts opts;
  dlcp_coll_opts_default(&opts);
  dlcp_request *req;
  dlcp_coll_info info;
  int rv = dlcp_allreduce(comm, v, v, n, DLCP_INT64, op, &opts, &req);
  if (rv == 0) {
    rv = dlcp_wait(req, -1, &info);
    dlcp_request_free(req);
  }
  return rv;
}

/* The barrier before each iteration; a failure says why, naming the
 * rank it stalled on or lost, as a failed all-reduce does. */
static int barrier(dlcp_comm *comm) {
  dlcp_request *req;
  dlcp_coll_info info;
  int rv = dlcp_barrier(comm, &req);
  if (rv != 0) {
    fprintf(stderr, "dlcp-bench: barrier: %s\n", dlcp_strerror(rv));
    return rv;
  }
  rv = dlcp_wait(req, -1, &info);
  dlcp_request_free(req);
  if (rv != 0) {
    fprintf(stderr, "dlcp-bench: barrier failed: %s\n", info.error);
  }
  return rv;
}

int main(int argc, char **argv) {
  options o;
  int rv = parse(argc, argv, &o);
  if (rv != 0) {
    return rv == PARSED_HELP ? 0 : rv;
  }
  char err[512];
  dlcp_comm *comm;
  if (dlcp_comm_create_from_env(&comm, err, sizeof(err)) != 0) {
    fprintf(stderr, "dlcp-bench: %s\n", err);
    return 1;
  }
  uint32_t rank = dlcp_comm_rank(comm), n = dlcp_comm_size(comm);
  size_t esize = kTypeSize[o.dtype];
  uint64_t max_count = o.max_bytes / esize;
  uint8_t *in = malloc(max_count * esize + 1);
  uint8_t *out = malloc(max_count * esize + 1);
  uint64_t *times = malloc((size_t)o.iters * sizeof(uint64_t));
  int64_t *times_max = malloc((size_t)o.iters * sizeof(int64_t));
  int64_t(*iter)[C_COUNT] = malloc((size_t)o.iters * sizeof(*iter));
  if (!in || !out || !times || !times_max || !iter) {
    fprintf(stderr, "dlcp-bench: out of memory\n");
    return 1;
  }
  FILE *json = NULL;
  if (rank == 0 && o.json_path && !(json = fopen(o.json_path, "w"))) {
    fprintf(stderr, "dlcp-bench: -J %s: %s\n", o.json_path, strerror(errno));
    return 1;
  }
  if (rank == 0) {
    printf("# dlcp-bench: %u ranks, algo %s, type %s, redop %s, loss bound "
           "%g, %s, %d iterations (+%d warm-up), check %d\n",
           n, dlcp_algo_short_name(o.algo), kTypes[o.dtype], kOps[o.redop], o.p,
           o.inplace ? "in place" : "out of place", o.iters, o.warmup,
           o.check);
    printf("#%13s %13s %8s %6s %12s %11s %8s %8s %7s %10s %11s %11s %11s\n",
           "size", "count", "type", "redop", "algo", "time", "algbw",
           "busbw", "#wrong", "delivered", "p90", "max", "mean");
    printf("#%13s %13s %8s %6s %12s %11s %8s %8s %7s %10s %11s %11s %11s\n",
           "(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "",
           "(%)", "(us)", "(us)", "(us)");
  }
  int failed = 0;
  int64_t bypasses = 0; /* straggler bypasses this rank made */
  for (uint64_t bytes = o.min_bytes; bytes <= o.max_bytes && !failed;
       bytes *= o.factor) {
    uint64_t count = bytes / esize;
    if (count == 0) {
      continue;
    }
    void *src = o.inplace ? out : in;
    dlcp_coll_info info;
    memset(&info, 0, sizeof(info));
    int64_t wrong = 0;
    int64_t delivered_ppm = 0; /* sum over the timed iterations */
    int64_t delivered_min_ppm = 1000000; /* the least of one iteration */
    runq rq = {.n = 0};
    for (int it = 0; it < o.warmup + o.iters && !failed; it++) {
      bool timed = it >= o.warmup;
      if (it == o.warmup && o.json_path) {
        runq_open(&rq); /* the warm-up started any thread the run needs */
      }
      bool checked = o.check && it == o.warmup + o.iters - 1;
      if (checked || it == 0 || o.inplace) {
        for (uint64_t i = 0; i < count; i++) {
          put(src, o.dtype, i, input(rank, i));
        }
      }
      if (barrier(comm) != 0) {
        failed = 1;
        break;
      }
      int64_t before[C_COUNT] = {0};
      if (timed && o.json_path) {
        /* after the barrier's own traffic; only for the JSON, which alone
         * reports them, so that a latency run reads no stats */
        read_counters(comm, &rq, before);
      }
      uint64_t t0 = now_ns();
      dlcp_request *req = NULL;
      if (run_coll(comm, src, out, count, &o, &info, &req) != 0) {
        dlcp_request_free(req);
        failed = 1;
        break;
      }
      bypasses += info.bypasses;
      if (timed) {
        times[it - o.warmup] = now_ns() - t0;
        if (o.json_path) {
          count_iteration(comm, &rq, before, iter[it - o.warmup]);
        }
        int64_t ppm = (int64_t)(info.delivered_fraction * 1e6 + 0.5);
        delivered_ppm += ppm;
        delivered_min_ppm = ppm < delivered_min_ppm ? ppm : delivered_min_ppm;
      }
      if (checked) {
        /* Exact where delivered; zero where reported missing. */
        size_t m = 0;
        for (uint64_t i = 0; i < count; i++) {
          while (m < info.nmissing &&
                 info.missing[m].offset + info.missing[m].len <= i) {
            m++;
          }
          bool lost = m < info.nmissing && info.missing[m].offset <= i;
          double want = lost ? 0.0 : expected(&o, n, i);
          double got = get(out, o.dtype, i);
          wrong += fabs(got - want) > 1e-6 * fabs(want);
        }
      }
      dlcp_request_free(req); /* after the check: it owns info.missing */
    }
    runq_close(&rq);
    if (failed) {
      break;
    }
    for (int it = 0; it < o.iters; it++) {
      times_max[it] = (int64_t)times[it];
    }
    if ((o.json_path &&
         reduce_i64(comm, iter[0], (uint64_t)o.iters * C_COUNT, DLCP_SUM) !=
             0) ||
        reduce_i64(comm, times_max, (uint64_t)o.iters, DLCP_MAX) != 0 ||
        reduce_i64(comm, &wrong, 1, DLCP_SUM) != 0 ||
        reduce_i64(comm, &delivered_ppm, 1, DLCP_SUM) != 0 ||
        reduce_i64(comm, &delivered_min_ppm, 1, DLCP_MIN) != 0) {
      failed = 1;
      break;
    }
    for (int it = 0; it < o.iters; it++) {
      times[it] = (uint64_t)times_max[it];
    }
    qsort(times, (size_t)o.iters, sizeof(uint64_t), cmp_u64);
    summary sm = summarise(times, o.iters);
    double us = sm.p50_us;
    double algbw = (double)bytes / (us * 1e3);
    double busbw = algbw * 2.0 * (n - 1) / n;
    double delivered = (double)delivered_ppm / 1e6 / ((double)o.iters * n);
    if (rank == 0) {
      printf(" %13llu %13llu %8s %6s %12s %11.1f %8.3f %8.3f %7lld %10.2f "
             "%11.1f %11.1f %11.1f\n",
             (unsigned long long)bytes, (unsigned long long)count,
             kTypes[o.dtype], kOps[o.redop], dlcp_algo_str(info.algo), us,
             algbw, busbw, (long long)(o.check ? wrong : -1),
             delivered * 100.0, sm.p90_us, sm.max_us, sm.mean_us);
      fflush(stdout);
      if (json) {
        write_json(json, &o, n, bytes, dlcp_algo_str(info.algo), &sm,
                   times_max, iter, wrong, delivered,
                   (double)delivered_min_ppm / 1e6);
      }
    }
    if (o.check && wrong != 0) {
      failed = 1;
    }
  }
  /* Summed over the ranks: straggler bypasses, control connections dialed
   * again while joining (only ranks above 0 dial). */
  dlcp_comm_stats st;
  dlcp_comm_get_stats(comm, &st);
  int64_t sums[2] = {bypasses, (int64_t)st.control_redials};
  if (!failed && reduce_i64(comm, sums, 2, DLCP_SUM) != 0) {
    failed = 1;
  }
  if (rank == 0) {
    dlcp_comm_get_stats(comm, &st);
    printf("# rank 0: %llu datagrams sent (%llu refused by the kernel), "
           "%llu retransmitted; %llu "
           "received, %llu of them coalesced (GRO), %llu dropped by the "
           "kernel on a full receive buffer; send rate "
           "now %.2f Gbps (slowest peer), srtt up to %.1f us; "
           "%lld straggler bypasses, %lld control connections dialed "
           "again (all ranks)\n",
           (unsigned long long)st.datagrams_sent,
           (unsigned long long)st.datagrams_unsent,
           (unsigned long long)st.retransmissions,
           (unsigned long long)st.datagrams_received,
           (unsigned long long)st.datagrams_coalesced,
           (unsigned long long)st.datagrams_rx_dropped, st.min_rate_gbps,
           (double)st.max_srtt_ns / 1e3, (long long)sums[0],
           (long long)sums[1]);
    printf("# rank 0: %llu data packets arrived CE-marked; rate cuts: %llu "
           "for ECN, %llu for delay; %llu control datagrams sent again "
           "(%llu needless); %llu paths left out, %llu rerouted\n",
           (unsigned long long)st.ce_received, (unsigned long long)st.cuts_ecn,
           (unsigned long long)st.cuts_delay,
           (unsigned long long)st.control_retx,
           (unsigned long long)st.control_retx_needless,
           (unsigned long long)st.paths_left_out,
           (unsigned long long)st.paths_rerouted);
    printf("# rank 0: %llu data packets arrived reordered (%llu more "
           "overtaken inside the host); holes asked for %llu times while a "
           "first round was sent, %llu times on a round's last packet; %llu "
           "send windows timed out; %llu quiet ACKs\n",
           (unsigned long long)st.data_reordered,
           (unsigned long long)st.data_overtaken_in_host,
           (unsigned long long)st.bitmaps_early,
           (unsigned long long)st.bitmaps_unprompted,
           (unsigned long long)st.window_timeouts,
           (unsigned long long)st.acks_quiet);
    printf("# rank 0: %llu ACKs from the peers, which held the packets they "
           "answer %.1f us on average, %.1f us at most\n",
           (unsigned long long)st.acks_received,
           st.acks_received
               ? (double)st.ack_hold_ns / (double)st.acks_received / 1e3
               : 0.0,
           (double)st.max_ack_hold_ns / 1e3);
    printf("# rank 0: %llu peers through shared memory: %llu datagrams, "
           "%llu dropped on a full ring, %llu doorbells\n",
           (unsigned long long)st.shm_peers, (unsigned long long)st.shm_sent,
           (unsigned long long)st.shm_full,
           (unsigned long long)st.doorbells);
    if (st.ina_groups + st.ina_ring_groups > 0) {
      printf("# rank 0: in-network aggregation: %llu groups by the switch, "
             "%llu by the ring; %llu contributions sent again, %llu BUSY, "
             "%llu WAITING, %llu results that came again; %llu datagrams "
             "from the switch, %llu of them coalesced (GRO), %llu dropped "
             "by the kernel on a full receive buffer\n",
             (unsigned long long)st.ina_groups,
             (unsigned long long)st.ina_ring_groups,
             (unsigned long long)st.ina_resent, (unsigned long long)st.ina_busy,
             (unsigned long long)st.ina_waiting,
             (unsigned long long)st.ina_dup_results,
             (unsigned long long)st.ina_datagrams_received,
             (unsigned long long)st.ina_datagrams_coalesced,
             (unsigned long long)st.ina_datagrams_rx_dropped);
    }
  }
  if (json) {
    fclose(json);
  }
  dlcp_comm_destroy(comm);
  free(in);
  free(out);
  free(times);
  free(times_max);
  free(iter);
  return failed;
}
