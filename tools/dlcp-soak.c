/*
 * dlcp-soak: a long run of randomized all-reduces under randomized fault
 * injection, every result checked element by element, each process's
 * memory and descriptors sampled as it goes.  Launched by dlcp-run
 * (scripts/soak.sh, `make soak`):
 *
 *   dlcp-run -n N dlcp-soak [--minutes M] [--epoch-s S] [--seed X]
 *                           [--max-elems E] [--csv PREFIX] [--ina 0|1]
 *
 * The run is cut into epochs of about S seconds (default 30).  In each
 * epoch every rank creates a communicator with the epoch's configuration,
 * drawn from the shared seed so that all ranks agree: probabilities of
 * drop, duplicate, reorder and delay (and the delay), a straggler rank,
 * the number of paths, shared memory on or off.  It then runs all-reduces
 * whose size (1..E elements, log-uniform), type, operation, algorithm,
 * loss bound and in-place-ness are drawn per operation, checks every
 * element of every result (exact outside the reported missing ranges,
 * zero inside them, the same ranges on every rank), and destroys the
 * communicator; the next epoch rendezvouses on a fresh port that rank 0
 * broadcast.  Rank 0 decides when an epoch or the run ends, and tells the
 * others with a one-element all-reduce every few operations (so every
 * rank runs the same operations).  With --ina 1 the algorithms drawn
 * include INA and RA-INA through the aggregation switch DLCP_SWITCH names
 * (SOAK_INA=1 scripts/soak.sh runs it on a lossy testbed), and every
 * epoch is a new job at the switch, which must take it and let the last
 * one go.
 *
 * After each epoch's communicator is destroyed every rank samples its
 * resident set (/proc/self/statm), open descriptors (/proc/self/fd)
 * and the allocator's bytes in use (mallinfo2), after malloc_trim() so
 * that the resident set counts what is held rather than what malloc kept.
 * Verdict: descriptors return to the same count after every epoch, and
 * after the first WARMUP_EPOCHS the heap in use stays within 1 MiB and
 * the resident set within max(8 MiB, 10 %) of their lowest samples (built
 * with AddressSanitizer: the heap as ASan's allocator counts it, the
 * resident set not judged).  Exit status is 0 only if every
 * operation succeeded with the right result and both held.
 */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <malloc.h>
#include <math.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "base/sanitizer.h"
#include "dlcp/dlcp.h"

/* Under AddressSanitizer mallinfo2 knows nothing (ASan has its own
 * allocator) and the resident set holds ASan's quarantine of freed memory
 * and its shadow: the heap in use comes from ASan's allocator instead, and
 * the resident set is reported but not judged. */
#ifdef DLCP_UNDER_ASAN
/* sanitizer/allocator_interface.h, which GCC does not install; the
 * runtime (libasan) exports it all the same. */
size_t __sanitizer_get_current_allocated_bytes(void);
#endif

#define WARMUP_EPOCHS 2
#define CHECK_EVERY 4   /* operations between "go on?" votes */
#define MAX_EPOCHS 10000
#define RSS_SLACK_KIB (8u * 1024u)
#define HEAP_SLACK_KIB 1024u

/* The last two only with --ina 1 (the draws of a run without them are
 * those of the runs before they were added). */
static const dlcp_algo ALGOS[] = {
    DLCP_ALGO_AUTO,   DLCP_ALGO_RING,   DLCP_ALGO_RING_BYPASS,
    DLCP_ALGO_PS,     DLCP_ALGO_HALVING_DOUBLING,
    DLCP_ALGO_RAT,    DLCP_ALGO_DIRECT, DLCP_ALGO_RECURSIVE_DOUBLING,
    DLCP_ALGO_INA,    DLCP_ALGO_RA_INA,
};
#define NALGOS (sizeof(ALGOS) / sizeof(ALGOS[0]))
#define NALGOS_INA 2u

/* ---- randomness shared by every rank ----------------------------------- */

static uint64_t splitmix(uint64_t *s) {
  uint64_t z = (*s += UINT64_C(0x9E3779B97F4A7C15));
  z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
  z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
  return z ^ (z >> 31);
}

static double uniform(uint64_t *s) {
  return (double)(splitmix(s) >> 11) / 9007199254740992.0;
}

static uint64_t below(uint64_t *s, uint64_t n) { return splitmix(s) % n; }

/* ---- what an epoch and an operation look like --------------------------- */

typedef struct epoch_cfg {
  double drop, dup, reorder, delay;
  uint32_t delay_us;
  uint32_t straggler; /* rank, or UINT32_MAX for none */
  uint32_t straggle_ms;
  uint32_t paths;
  uint32_t shm;
  uint32_t segment; /* DATA payload per datagram; 0: the path's */
} epoch_cfg;

static void draw_epoch(epoch_cfg *e, uint64_t seed, uint32_t epoch,
                       uint32_t world) {
  static const double drops[] = {0, 0.001, 0.01, 0.05};
  static const double dups[] = {0, 0.01, 0.05};
  static const double reorders[] = {0, 0.01, 0.1};
  static const double delays[] = {0, 0.01};
  /* Loopback's frames hold 64 KiB; Ethernet's and jumbo frames' payloads
   * make long control messages (eager transfers) go in pieces. */
  static const uint32_t segments[] = {0, 1424, 8928};
  uint64_t s = seed ^ (UINT64_C(0x5EED) << 32) ^ epoch;
  e->drop = drops[below(&s, 4)];
  e->dup = dups[below(&s, 3)];
  e->reorder = reorders[below(&s, 3)];
  e->delay = delays[below(&s, 2)];
  e->delay_us = 50 + (uint32_t)below(&s, 1951);
  e->straggler = below(&s, 2) ? (uint32_t)below(&s, world) : UINT32_MAX;
  e->straggle_ms = 1 + (uint32_t)below(&s, 5);
  e->paths = 1 + (uint32_t)below(&s, 4);
  e->shm = (uint32_t)below(&s, 2);
  e->segment = segments[below(&s, 3)];
}

typedef struct op_cfg {
  uint64_t count;
  dlcp_dtype dtype;
  dlcp_redop op;
  dlcp_algo algo;
  double loss_bound;
  bool in_place;
} op_cfg;

static bool through_switch(dlcp_algo a) {
  return a == DLCP_ALGO_INA || a == DLCP_ALGO_RA_INA;
}

/* draw_op draws operation |seq|; with |ina| the switch's algorithms too,
 * whose operations are SUMs of FLOAT32 or INT32 (what the switch adds):
 * the dtype drawn picks which. */
static void draw_op(op_cfg *o, uint64_t seed, uint32_t epoch, uint64_t seq,
                    uint64_t max_elems, bool ina) {
  static const double bounds[] = {0.001, 0.01, 0.05, 0.2};
  uint64_t s = seed ^ ((uint64_t)epoch << 40) ^ (seq * 0x9E37u);
  (void)splitmix(&s);
  o->count = (uint64_t)exp(uniform(&s) * log((double)max_elems));
  if (o->count < 1) {
    o->count = 1;
  }
  if (o->count > max_elems) {
    o->count = max_elems;
  }
  o->dtype = (dlcp_dtype)below(&s, 5);
  o->op = below(&s, 2) ? DLCP_SUM : (below(&s, 2) ? DLCP_MIN : DLCP_MAX);
  if (o->dtype == DLCP_BFLOAT16 && o->op == DLCP_SUM) {
    o->op = DLCP_MAX; /* bf16 holds integers exactly only up to 256 */
  }
  o->algo = ALGOS[below(&s, ina ? NALGOS : NALGOS - NALGOS_INA)];
  if (through_switch(o->algo)) {
    o->dtype = o->dtype == DLCP_INT32 || o->dtype == DLCP_INT64
                   ? DLCP_INT32
                   : DLCP_FLOAT32;
    o->op = DLCP_SUM;
  }
  o->loss_bound = below(&s, 10) < 3 ? bounds[below(&s, 4)] : 0.0;
  o->in_place = below(&s, 5) == 0;
}

/* ---- data: small integers, exact in every type --------------------------- */

static int64_t value(uint32_t rank, uint64_t i, uint64_t seq) {
  uint64_t h = i * UINT64_C(2654435761) ^ seq * UINT64_C(40503) ^
               (uint64_t)rank * UINT64_C(9973);
  h ^= h >> 29;
  return (int64_t)(h % 64);
}

static size_t dtype_size(dlcp_dtype t) {
  return t == DLCP_INT64 ? 8 : (t == DLCP_FLOAT32 || t == DLCP_INT32) ? 4 : 2;
}

/* Integers 0..2047 in binary16 and bfloat16 (the latter exact up to 256). */
static uint16_t int_to_f16(int64_t v) {
  int e = 0;
  if (v == 0) {
    return 0;
  }
  while ((v >> (e + 1)) != 0) {
    e++;
  }
  return (uint16_t)(((e + 15) << 10) | ((v << (10 - e)) & 0x3FF));
}

static int64_t f16_to_int(uint16_t h) {
  int e = (h >> 10) - 15;
  if (h == 0) {
    return 0;
  }
  if (e < 0 || e > 10 || (h & 0x8000)) {
    return -1; /* never produced here: a wrong result */
  }
  return (int64_t)(((h & 0x3FF) | 0x400) >> (10 - e));
}

static void store(void *buf, dlcp_dtype t, uint64_t i, int64_t v) {
  switch (t) {
  case DLCP_FLOAT32:
    ((float *)buf)[i] = (float)v;
    break;
  case DLCP_FLOAT16:
    ((uint16_t *)buf)[i] = int_to_f16(v);
    break;
  case DLCP_BFLOAT16: {
    float f = (float)v;
    uint32_t bits;
    memcpy(&bits, &f, 4);
    ((uint16_t *)buf)[i] = (uint16_t)(bits >> 16);
    break;
  }
  case DLCP_INT32:
    ((int32_t *)buf)[i] = (int32_t)v;
    break;
  case DLCP_INT64:
    ((int64_t *)buf)[i] = v;
    break;
  }
}

/* load returns element |i| as an integer, or -1 for anything that is not
 * a small non-negative integer (never a right answer here). */
static int64_t load(const void *buf, dlcp_dtype t, uint64_t i) {
  switch (t) {
  case DLCP_FLOAT32: {
    float f = ((const float *)buf)[i];
    return f >= 0 && f < 1e9f && f == floorf(f) ? (int64_t)f : -1;
  }
  case DLCP_FLOAT16:
    return f16_to_int(((const uint16_t *)buf)[i]);
  case DLCP_BFLOAT16: {
    uint32_t bits = (uint32_t)((const uint16_t *)buf)[i] << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f >= 0 && f < 1e9f && f == floorf(f) ? (int64_t)f : -1;
  }
  case DLCP_INT32:
    return ((const int32_t *)buf)[i];
  case DLCP_INT64:
    return ((const int64_t *)buf)[i];
  }
  return -1;
}

static int64_t expected(const op_cfg *o, uint32_t world, uint64_t i,
                        uint64_t seq) {
  int64_t acc = value(0, i, seq);
  for (uint32_t r = 1; r < world; r++) {
    int64_t v = value(r, i, seq);
    acc = o->op == DLCP_SUM ? acc + v
          : o->op == DLCP_MIN ? (v < acc ? v : acc)
                              : (v > acc ? v : acc);
  }
  return acc;
}

/* ---- process samples ------------------------------------------------------ */

static uint64_t rss_kib(void) {
  unsigned long size = 0, resident = 0;
  FILE *f = fopen("/proc/self/statm", "r");
  if (f == NULL) {
    return 0;
  }
  if (fscanf(f, "%lu %lu", &size, &resident) != 2) {
    resident = 0;
  }
  fclose(f);
  return (uint64_t)resident * (uint64_t)sysconf(_SC_PAGESIZE) / 1024;
}

static uint32_t open_fds(void) {
  uint32_t n = 0;
  DIR *d = opendir("/proc/self/fd");
  struct dirent *e;
  if (d == NULL) {
    return 0;
  }
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] != '.') {
      n++;
    }
  }
  closedir(d);
  return n - 1; /* the directory stream itself */
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* free_port asks the kernel for a loopback port free right now. */
static uint16_t free_port(void) {
  struct sockaddr_in sa;
  socklen_t len = sizeof(sa);
  uint16_t port = 0;
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  memset(&sa, 0, sizeof(sa));
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
      getsockname(fd, (struct sockaddr *)&sa, &len) == 0) {
    port = ntohs(sa.sin_port);
  }
  if (fd >= 0) {
    close(fd);
  }
  return port;
}

static const char *straggler_text(uint32_t rank, uint32_t ms, char *buf,
                                  size_t len) {
  snprintf(buf, len, "%u (%u ms)", rank, ms);
  return buf;
}

/* heap_kib: bytes the allocator has handed out and not had back. */
static uint64_t heap_kib(void) {
#ifdef DLCP_UNDER_ASAN
  return (uint64_t)__sanitizer_get_current_allocated_bytes() / 1024;
#else
  struct mallinfo2 mi = mallinfo2();
  return (uint64_t)(mi.uordblks + mi.hblkhd) / 1024;
#endif
}

/* ---- the run -------------------------------------------------------------- */

typedef struct soak {
  uint32_t rank, world;
  char master_addr[256];
  uint64_t seed;
  uint64_t max_elems;
  double minutes, epoch_s;
  bool ina; /* --ina 1: the switch's algorithms drawn too */
  uint8_t *sendbuf, *recvbuf;
  FILE *csv;
  /* totals */
  uint64_t ops, skipped, lossy, missing_elems, bytes;
  uint64_t switched; /* operations the switch summed */
} soak;

static int env_u64(const char *name, uint64_t lo, uint64_t hi, uint64_t *out) {
  const char *s = getenv(name);
  char *end;
  unsigned long long v;
  if (s == NULL || *s == '\0') {
    fprintf(stderr, "dlcp-soak: %s is not set (run under dlcp-run)\n", name);
    return -1;
  }
  errno = 0;
  v = strtoull(s, &end, 10);
  if (errno != 0 || *end != '\0' || s[0] == '-' || v < lo || v > hi) {
    fprintf(stderr, "dlcp-soak: %s='%s': expected an integer in %" PRIu64
            "..%" PRIu64 "\n", name, s, lo, hi);
    return -1;
  }
  *out = v;
  return 0;
}

/* vote: rank 0's |go| reaches every rank (a one-element MAX all-reduce,
 * itself part of the soak). */
static int vote(dlcp_comm *comm, int32_t go, int32_t *out, char *why,
                size_t whylen) {
  dlcp_request *req = NULL;
  dlcp_coll_info info;
  int32_t v = go;
  int rv = dlcp_allreduce(comm, &v, &v, 1, DLCP_INT32, DLCP_MAX, NULL, &req);
  if (rv == 0) {
    rv = dlcp_wait(req, -1, &info);
    if (rv != 0) {
      snprintf(why, whylen, "vote: %s", info.error);
    }
    dlcp_request_free(req);
  } else {
    snprintf(why, whylen, "vote: %s", dlcp_strerror(rv));
  }
  *out = v;
  return rv;
}

/* check_result compares every element and the missing ranges; returns 0
 * or -1 with |why| set. */
static int check_result(const soak *sk, const op_cfg *o, uint64_t seq,
                        const dlcp_coll_info *info, char *why,
                        size_t whylen) {
  uint64_t next = 0;
  size_t m = 0;
  if (o->loss_bound == 0 && info->nmissing != 0) {
    snprintf(why, whylen, "exact all-reduce reported %zu missing ranges",
             info->nmissing);
    return -1;
  }
  for (size_t k = 0; k < info->nmissing; k++) {
    const dlcp_range *r = &info->missing[k];
    if (r->len == 0 || r->offset < next || r->offset + r->len > o->count) {
      snprintf(why, whylen, "missing range %zu [%" PRIu64 ", +%" PRIu64
               ") out of order or outside the %" PRIu64 " elements",
               k, r->offset, r->len, o->count);
      return -1;
    }
    next = r->offset + r->len;
  }
  for (uint64_t i = 0; i < o->count; i++) {
    int64_t got = load(sk->recvbuf, o->dtype, i);
    int64_t want;
    while (m < info->nmissing &&
           i >= info->missing[m].offset + info->missing[m].len) {
      m++;
    }
    want = m < info->nmissing && i >= info->missing[m].offset
               ? 0
               : expected(o, sk->world, i, seq);
    if (got != want) {
      snprintf(why, whylen, "element %" PRIu64 " is %" PRId64
               ", expected %" PRId64, i, got, want);
      return -1;
    }
  }
  return 0;
}

/* same_everywhere checks that every rank reported the same missing ranges
 * (a hash, all-reduced with MAX of h and of -h). */
static int same_everywhere(dlcp_comm *comm, const dlcp_coll_info *info,
                           char *why, size_t whylen) {
  uint64_t h = UINT64_C(1469598103934665603);
  int64_t v[2];
  dlcp_request *req = NULL;
  dlcp_coll_info vi;
  int rv;
  vi.error[0] = '\0';
  for (size_t k = 0; k < info->nmissing; k++) {
    h = (h ^ info->missing[k].offset) * UINT64_C(1099511628211);
    h = (h ^ info->missing[k].len) * UINT64_C(1099511628211);
  }
  h = (h ^ info->nmissing) >> 2;
  v[0] = (int64_t)h;
  v[1] = -(int64_t)h;
  rv = dlcp_allreduce(comm, v, v, 2, DLCP_INT64, DLCP_MAX, NULL, &req);
  if (rv == 0) {
    rv = dlcp_wait(req, -1, &vi);
    dlcp_request_free(req);
  }
  if (rv != 0) {
    snprintf(why, whylen, "comparing missing ranges: %s",
             vi.error[0] != '\0' ? vi.error : dlcp_strerror(rv));
    return -1;
  }
  if (v[0] != -v[1]) {
    snprintf(why, whylen, "ranks disagree on the missing ranges");
    return -1;
  }
  return 0;
}

/* run_op runs operation |seq|; returns 0, 1 (algorithm does not run
 * this world: skipped on every rank alike) or -1 with |why|. */
static int run_op(soak *sk, dlcp_comm *comm, const op_cfg *o, uint64_t seq,
                  char *why, size_t whylen) {
  size_t esz = dtype_size(o->dtype);
  dlcp_coll_opts opts;
  dlcp_coll_info info;
  dlcp_request *req = NULL;
  void *src = o->in_place ? sk->recvbuf : sk->sendbuf;
  int rv;
  for (uint64_t i = 0; i < o->count; i++) {
    store(src, o->dtype, i, value(sk->rank, i, seq));
  }
  if (!o->in_place) {
    memset(sk->recvbuf, 0xA5, o->count * esz);
  }
  dlcp_coll_opts_default(&opts);
  opts.algo = o->algo;
  opts.loss_bound = o->loss_bound;
  rv = dlcp_allreduce(comm, src, sk->recvbuf, o->count, o->dtype, o->op,
                      &opts, &req);
  if (rv == DLCP_ERR_INVALID_ARGUMENT) {
    return 1;
  }
  if (rv != 0) {
    snprintf(why, whylen, "dlcp_allreduce: %s", dlcp_strerror(rv));
    return -1;
  }
  rv = dlcp_wait(req, -1, &info);
  if (rv != 0) {
    snprintf(why, whylen, "%s", info.error);
    dlcp_request_free(req);
    return -1;
  }
  rv = check_result(sk, o, seq, &info, why, whylen);
  sk->switched += through_switch(info.algo);
  if (rv == 0 && o->loss_bound > 0) {
    rv = same_everywhere(comm, &info, why, whylen);
    sk->lossy++;
    for (size_t k = 0; k < info.nmissing; k++) {
      sk->missing_elems += info.missing[k].len;
    }
  }
  dlcp_request_free(req);
  sk->bytes += o->count * esz;
  return rv;
}

static const char *op_name(dlcp_redop op) {
  return op == DLCP_SUM ? "sum" : op == DLCP_MIN ? "min" : "max";
}

static const char *dtype_name(dlcp_dtype t) {
  static const char *const names[] = {"f32", "f16", "bf16", "i32", "i64"};
  return names[t];
}

static int run(soak *sk, uint16_t port) {
  double start = now_s();
  double end = start + sk->minutes * 60.0;
  static uint64_t rss[MAX_EPOCHS];
  static uint64_t heap[MAX_EPOCHS];
  static uint32_t fds[MAX_EPOCHS];
  uint32_t epoch;
  uint64_t seq = 0;
  char why[512];

  for (epoch = 0; epoch < MAX_EPOCHS && port != 0; epoch++) {
    double epoch_end = now_s() + sk->epoch_s;
    dlcp_comm_config cfg;
    dlcp_comm *comm = NULL;
    epoch_cfg e;
    char err[512];
    uint64_t ops0 = sk->ops;
    int32_t go = 1;
    int32_t next_port = 0;
    int rv;

    draw_epoch(&e, sk->seed, epoch, sk->world);
    dlcp_comm_config_default(&cfg);
    cfg.rank = sk->rank;
    cfg.world_size = sk->world;
    cfg.master_addr = sk->master_addr;
    cfg.master_port = port;
    cfg.job = (uint32_t)(sk->seed % 1000000) * 1000 + epoch + 1;
    cfg.paths = e.paths;
    cfg.shm = e.shm;
    cfg.segment_bytes = e.segment;
    cfg.timeout_ms = 20000;
    cfg.fault_drop = e.drop;
    cfg.fault_dup = e.dup;
    cfg.fault_reorder = e.reorder;
    cfg.fault_delay = e.delay;
    cfg.fault_delay_us = e.delay_us;
    cfg.fault_seed = sk->seed + epoch;
    cfg.fault_straggle_ms = e.straggler == sk->rank ? e.straggle_ms : 0;
    if (sk->rank == 0) {
      char who[48];
      printf("soak: epoch %u: drop %g dup %g reorder %g delay %g (%u us), "
             "straggler %s%s, paths %u, shm %u, segment %u\n",
             epoch, e.drop, e.dup, e.reorder, e.delay, e.delay_us,
             e.straggler == UINT32_MAX ? "none" : "rank ",
             e.straggler == UINT32_MAX ? "" : straggler_text(e.straggler,
                                                            e.straggle_ms,
                                                            who,
                                                            sizeof(who)),
             e.paths, e.shm, e.segment);
      fflush(stdout);
    }
    rv = dlcp_comm_create(&comm, &cfg, err, sizeof(err));
    if (rv != 0) {
      fprintf(stderr, "soak: epoch %u: joining failed: %s\n", epoch, err);
      return -1;
    }
    while (go) {
      for (int k = 0; k < CHECK_EVERY; k++, seq++) {
        op_cfg o;
        draw_op(&o, sk->seed, epoch, seq, sk->max_elems, sk->ina);
        rv = run_op(sk, comm, &o, seq, why, sizeof(why));
        if (rv < 0) {
          fprintf(stderr, "soak: epoch %u op %" PRIu64 " (%s %s of %" PRIu64
                  " elements, %s, loss bound %g%s) FAILED: %s\n", epoch, seq,
                  dtype_name(o.dtype), op_name(o.op), o.count,
                  dlcp_algo_str(o.algo), o.loss_bound,
                  o.in_place ? ", in place" : "", why);
          dlcp_comm_destroy(comm);
          return -1;
        }
        sk->skipped += rv == 1;
        sk->ops += rv == 0;
      }
      if (vote(comm, sk->rank == 0 && now_s() < epoch_end && now_s() < end,
               &go, why, sizeof(why)) != 0) {
        fprintf(stderr, "soak: epoch %u: %s\n", epoch, why);
        dlcp_comm_destroy(comm);
        return -1;
      }
    }
    /* Rank 0 picks the next epoch's port (0: the run is over). */
    if (sk->rank == 0 && now_s() < end) {
      next_port = free_port();
    }
    {
      dlcp_request *req = NULL;
      dlcp_coll_info info;
      rv = dlcp_broadcast(comm, &next_port, 1, DLCP_INT32, 0, NULL, &req);
      if (rv == 0) {
        rv = dlcp_wait(req, -1, &info);
        dlcp_request_free(req);
      }
      if (rv != 0) {
        fprintf(stderr, "soak: epoch %u: broadcast of the next port: %s\n",
                epoch, dlcp_strerror(rv));
        dlcp_comm_destroy(comm);
        return -1;
      }
    }
    dlcp_comm_destroy(comm);
    port = (uint16_t)next_port;
    /* Free memory goes back to the kernel first, so the resident set
     * measures what is held rather than what malloc happened to keep. */
    (void)malloc_trim(0);
    rss[epoch] = rss_kib();
    heap[epoch] = heap_kib();
    fds[epoch] = open_fds();
    printf("soak: epoch %u rank %u: %" PRIu64 " all-reduces, rss %" PRIu64
           " KiB, heap %" PRIu64 " KiB, %u fds, %.0f s\n", epoch, sk->rank,
           sk->ops - ops0, rss[epoch], heap[epoch], fds[epoch],
           now_s() - start);
    fflush(stdout);
    if (sk->csv != NULL) {
      fprintf(sk->csv, "%u,%.1f,%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%u\n",
              epoch, now_s() - start, sk->ops, rss[epoch], heap[epoch],
              fds[epoch]);
      fflush(sk->csv);
    }
  }

  /* The verdict on this process. */
  {
    uint64_t lo = UINT64_MAX, hi = 0, hlo = UINT64_MAX, hhi = 0;
    bool fds_flat = true;
    bool rss_flat, heap_flat;
    const char *rss_word;
    for (uint32_t k = 0; k < epoch; k++) {
      fds_flat = fds_flat && fds[k] == fds[0];
      if (k >= WARMUP_EPOCHS || epoch <= WARMUP_EPOCHS) {
        lo = rss[k] < lo ? rss[k] : lo;
        hi = rss[k] > hi ? rss[k] : hi;
        hlo = heap[k] < hlo ? heap[k] : hlo;
        hhi = heap[k] > hhi ? heap[k] : hhi;
      }
    }
#ifdef DLCP_UNDER_ASAN
    rss_flat = epoch > 0; /* not judged: ASan's quarantine and shadow */
    rss_word = "not judged under ASan";
#else
    uint64_t slack = lo / 10 > RSS_SLACK_KIB ? lo / 10 : RSS_SLACK_KIB;
    rss_flat = epoch > 0 && hi - lo <= slack;
    rss_word = rss_flat ? "flat" : "GROWING";
#endif
    heap_flat = epoch > 0 && hhi - hlo <= HEAP_SLACK_KIB;
    char switched[48] = "";
    if (sk->ina) {
      snprintf(switched, sizeof(switched), "%" PRIu64 " through the switch, ",
               sk->switched);
    }
    printf("soak: rank %u %s: %u epochs, %.0f s, %" PRIu64 " all-reduces "
           "checked (%s%" PRIu64 " lossy, %" PRIu64 " elements reported "
           "missing, %" PRIu64 " skipped: algorithm not for this world), "
           "%.1f GiB reduced; after warm-up rss %" PRIu64 "..%" PRIu64
           " KiB (%s), heap %" PRIu64 "..%" PRIu64 " KiB (%s), fds %u..%u "
           "(%s)\n",
           sk->rank, fds_flat && rss_flat && heap_flat ? "PASS" : "FAIL",
           epoch, now_s() - start, sk->ops, switched, sk->lossy,
           sk->missing_elems, sk->skipped, (double)sk->bytes / (1u << 30),
           lo, hi,
           rss_word, hlo, hhi,
           heap_flat ? "flat" : "GROWING", fds[0],
           fds[epoch ? epoch - 1 : 0], fds_flat ? "flat" : "CHANGING");
    return fds_flat && rss_flat && heap_flat ? 0 : -1;
  }
}

static int parse_double(const char *name, const char *s, double lo,
                        double hi, double *out) {
  char *end;
  double v;
  errno = 0;
  v = strtod(s, &end);
  if (errno != 0 || end == s || *end != '\0' || !(v >= lo && v <= hi)) {
    fprintf(stderr, "dlcp-soak: %s: expected a number in [%g, %g], got "
            "'%s'\n", name, lo, hi, s);
    return -1;
  }
  *out = v;
  return 0;
}

static void help(void) {
  printf("usage: dlcp-soak [--minutes M] [--epoch-s S] [--seed X] "
         "[--max-elems E]\n"
         "                 [--csv PREFIX] [--ina 0|1]\n"
         "\n"
         "A long run of randomized all-reduces under randomized fault "
         "injection, every\n"
         "result checked, each rank's memory and descriptors sampled after "
         "every epoch:\n"
         "  dlcp-run -n 4 dlcp-soak --minutes 10   (or: make soak)\n"
         "\n"
         "  --minutes M      length of the run, 0.01..100000 (default 30)\n"
         "  --epoch-s S      seconds per epoch (a communicator with its own "
         "faults,\n"
         "                   paths and transports), 1..86400 (default 30)\n"
         "  --seed X         the draws' seed, shared by the ranks (default "
         "1)\n"
         "  --max-elems E    largest all-reduce in elements, 1..2^26 "
         "(default 2^20)\n"
         "  --csv PREFIX     each rank writes its samples to "
         "PREFIX.rankR.csv\n"
         "  --ina 0|1        1: in-network aggregation (INA, RA-INA) among "
         "the\n"
         "                   algorithms drawn, through the switch that "
         "DLCP_SWITCH\n"
         "                   names (default 0)\n"
         "  -h, --help       show this help\n"
         "\n"
         "Exits 0 only if every operation succeeded with the right result, "
         "the\n"
         "descriptors returned to the same count after every epoch and the "
         "heap and\n"
         "resident set stayed flat after the first %d epochs.\n",
         WARMUP_EPOCHS);
}

int main(int argc, char **argv) {
  soak sk;
  uint64_t v;
  const char *csv_prefix = NULL;
  const char *addr;
  double d;
  int rv;

  memset(&sk, 0, sizeof(sk));
  sk.minutes = 30;
  sk.epoch_s = 30;
  sk.seed = 1;
  sk.max_elems = 1u << 20;
  for (int i = 1; i < argc; i += 2) {
    const char *a = argv[i];
    const char *val = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
      help();
      return 0;
    }
    if (val == NULL) {
      fprintf(stderr, "dlcp-soak: %s needs a value (see dlcp-soak --help)\n",
              a);
      return 2;
    }
    if (strcmp(a, "--minutes") == 0) {
      if (parse_double(a, val, 0.01, 100000, &sk.minutes) != 0) {
        return 2;
      }
    } else if (strcmp(a, "--epoch-s") == 0) {
      if (parse_double(a, val, 1, 86400, &sk.epoch_s) != 0) {
        return 2;
      }
    } else if (strcmp(a, "--seed") == 0) {
      if (parse_double(a, val, 0, 4e9, &d) != 0) {
        return 2;
      }
      sk.seed = (uint64_t)d;
    } else if (strcmp(a, "--max-elems") == 0) {
      if (parse_double(a, val, 1, 1 << 26, &d) != 0) {
        return 2;
      }
      sk.max_elems = (uint64_t)d;
    } else if (strcmp(a, "--csv") == 0) {
      csv_prefix = val;
    } else if (strcmp(a, "--ina") == 0) {
      if (strcmp(val, "0") != 0 && strcmp(val, "1") != 0) {
        fprintf(stderr, "dlcp-soak: --ina: expected 0 or 1, got '%s'\n",
                val);
        return 2;
      }
      sk.ina = val[0] == '1';
    } else {
      fprintf(stderr,
              "dlcp-soak: unknown option '%s' (see dlcp-soak "
              "--help)\n",
              a);
      return 2;
    }
  }
  const char *sw = getenv("DLCP_SWITCH");
  if (sk.ina && (sw == NULL || sw[0] == '\0')) {
    fprintf(stderr, "dlcp-soak: --ina 1: DLCP_SWITCH names no switch (see "
            "docs/ina.md)\n");
    return 2;
  }
  if (env_u64("WORLD_SIZE", 1, 4096, &v) != 0) {
    return 2;
  }
  sk.world = (uint32_t)v;
  if (env_u64("RANK", 0, sk.world - 1, &v) != 0) {
    return 2;
  }
  sk.rank = (uint32_t)v;
  if (env_u64("MASTER_PORT", 1, 65535, &v) != 0) {
    return 2;
  }
  addr = getenv("MASTER_ADDR");
  snprintf(sk.master_addr, sizeof(sk.master_addr), "%s",
           addr != NULL ? addr : "127.0.0.1");
  sk.sendbuf = malloc(sk.max_elems * 8);
  sk.recvbuf = malloc(sk.max_elems * 8);
  if (sk.sendbuf == NULL || sk.recvbuf == NULL) {
    fprintf(stderr, "dlcp-soak: cannot allocate 2 x %" PRIu64 " bytes\n",
            sk.max_elems * 8);
    return 1;
  }
  /* Touch the buffers once so the resident set starts at its level. */
  memset(sk.sendbuf, 0, sk.max_elems * 8);
  memset(sk.recvbuf, 0, sk.max_elems * 8);
  if (csv_prefix != NULL) {
    char path[512];
    snprintf(path, sizeof(path), "%s.rank%u.csv", csv_prefix, sk.rank);
    sk.csv = fopen(path, "w");
    if (sk.csv == NULL) {
      fprintf(stderr, "dlcp-soak: %s: %s\n", path, strerror(errno));
      return 1;
    }
    fprintf(sk.csv, "epoch,t_s,allreduces,rss_kib,heap_kib,fds\n");
  }
  rv = run(&sk, (uint16_t)v);
  if (sk.csv != NULL) {
    fclose(sk.csv);
  }
  free(sk.sendbuf);
  free(sk.recvbuf);
  return rv == 0 ? 0 : 1;
}
