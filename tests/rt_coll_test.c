/*
 * rt_coll_test: collectives between real processes on loopback.  Each
 * case forks one process per rank; they rendezvous on a free port, run
 * their collectives through dlcp_allreduce and friends, check every
 * element themselves and report through shared memory.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/sanitizer.h"
#include "dlcp/dlcp.h"
#include "rt/clock.h"
#include "rt/net.h"

#define MAX_RANKS 20
#define MAX_MISSING 64
/* The straggler test: untimed rounds first (the first operation runs cold,
 * buffers faulted in, and the bypass ring's estimates need a few
 * operations to forget it), then the timed ones. */
enum { STRAGGLE_WARMUP = 3, STRAGGLE_ROUNDS = 7 };
/* 64 MiB, but 4 MiB under ThreadSanitizer, which makes a 16 MiB hop take
 * some 200-300 ms (a 64 MiB all-reduce 3.4 s): longer than the straggler's
 * 150 ms, which no bypass then waits out (make tsan, 2026-11-30: 0
 * bypasses in two runs). */
#ifdef DLCP_UNDER_TSAN
#define STRAGGLE_COUNT (1u << 20)
#else
#define STRAGGLE_COUNT (16u << 20)
#endif

typedef struct rank_report {
  int checks;             /* collectives checked */
  int wrong;              /* collectives with a wrong element */
  int failed;             /* collectives that returned an error */
  char first_error[256];
  char first_wrong[128];
  double delivered;
  size_t nmissing;
  dlcp_range missing[MAX_MISSING];
  uint32_t bypasses;            /* straggler bypasses this rank made */
  /* straggler runs: each timed round's time */
  uint64_t ring_ns[STRAGGLE_ROUNDS], bypass_ns[STRAGGLE_ROUNDS];
} rank_report;

typedef struct scenario {
  uint32_t world;
  double drop;
  double p;
  int die_rank; /* -1: nobody */
  bool die_mid;  /* die_rank dies during its collective, not before */
  bool no_eager; /* every transfer through MLT's rounds, none eager */
  bool no_shm;   /* datagrams through UDP sockets, not shared memory */
  uint32_t shm_peers; /* expected per rank on a crowded host; 0: world - 1 */
  uint32_t segment; /* DATA payload per datagram; 0: the path's */
  uint32_t straggler;    /* with straggle_ms: this rank is slow */
  uint32_t straggle_ms;  /* DLCP_FAULT_STRAGGLE's delay, 0 = none */
  int (*body)(dlcp_comm *comm, const struct scenario *s, rank_report *rep);
} scenario;

static uint16_t free_port(void) {
  uint16_t port = 0;
  dlcp_errbuf eb;
  assert_int_equal(dlcp_net_free_port("127.0.0.1", &port, &eb), 0);
  return port;
}

static int run_rank(uint32_t rank, uint16_t port, const scenario *s,
                    rank_report *rep) {
  dlcp_comm_config cfg;
  dlcp_comm_config_default(&cfg);
  cfg.rank = rank;
  cfg.world_size = s->world;
  cfg.master_addr = "127.0.0.1";
  cfg.master_port = port;
  cfg.timeout_ms = 20000;
  cfg.rdzv_timeout_ms = 20000;
  cfg.fault_drop = s->drop;
  cfg.fault_seed = 99 + rank;
  if (s->no_eager) {
    cfg.eager_bytes = 0;
  }
  cfg.shm = s->no_shm ? 0 : 1;
  cfg.segment_bytes = s->segment;
  if (s->straggle_ms && rank == s->straggler) {
    cfg.fault_straggle_ms = s->straggle_ms;
  }
  /* Two racks of consecutive ranks in two pods, for RAT. */
  char topo[32];
  snprintf(topo, sizeof(topo), "rack%u/pod%u", rank / 2, rank / 4);
  cfg.topo = topo;
  char err[256];
  dlcp_comm *comm;
  if (dlcp_comm_create(&comm, &cfg, err, sizeof(err)) != 0) {
    snprintf(rep->first_error, sizeof(rep->first_error), "create: %.200s",
             err);
    return 1;
  }
  if ((int)rank == s->die_rank && !s->die_mid) {
    _exit(3); /* dies after joining, before its collectives */
  }
  /* Every peer is on loopback: all through shared memory, or none, or on
   * a crowded host the partners rt/shm.h picks. */
  dlcp_comm_stats st;
  dlcp_comm_get_stats(comm, &st);
  uint64_t want_shm = s->no_shm || s->world == 1 ? 0
                      : s->shm_peers             ? s->shm_peers
                                                 : s->world - 1;
  if (st.shm_peers != want_shm) {
    snprintf(rep->first_error, sizeof(rep->first_error),
             "%llu peers through shared memory, expected %llu",
             (unsigned long long)st.shm_peers, (unsigned long long)want_shm);
    dlcp_comm_destroy(comm);
    return 1;
  }
  if (st.machine_ranks != s->world) {
    snprintf(rep->first_error, sizeof(rep->first_error),
             "%llu ranks on this machine, expected %u",
             (unsigned long long)st.machine_ranks, s->world);
    dlcp_comm_destroy(comm);
    return 1;
  }
  int rv = s->body(comm, s, rep);
  dlcp_comm_destroy(comm);
  return rv;
}

static rank_report *run(const scenario *s) {
  rank_report *rep = mmap(NULL, sizeof(rank_report) * MAX_RANKS,
                          PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                          -1, 0);
  assert_true(rep != MAP_FAILED);
  memset(rep, 0, sizeof(rank_report) * MAX_RANKS);
  uint16_t port = free_port();
  pid_t pids[MAX_RANKS];
  for (uint32_t r = 0; r < s->world; r++) {
    pids[r] = fork();
    assert_true(pids[r] >= 0);
    if (pids[r] == 0) {
      _exit(run_rank(r, port, s, &rep[r]));
    }
  }
  for (uint32_t r = 0; r < s->world; r++) {
    int st;
    assert_int_equal(waitpid(pids[r], &st, 0), pids[r]);
    if ((int)r == s->die_rank) {
      continue;
    }
    if (!WIFEXITED(st) || (WEXITSTATUS(st) != 0 && s->die_rank < 0)) {
      fail_msg("rank %u exited with 0x%x: %s%s%s", r, st, rep[r].first_error,
               rep[r].first_wrong[0] ? "; wrong: " : "", rep[r].first_wrong);
    }
  }
  return rep;
}

static int wait_req(dlcp_request *req, dlcp_coll_info *info,
                    rank_report *rep) {
  int rv = dlcp_wait(req, 60000, info);
  if (rv != 0) {
    rep->failed++;
    if (!rep->first_error[0]) {
      snprintf(rep->first_error, sizeof(rep->first_error), "%.250s",
               info->error);
    }
  }
  return rv;
}

/* Every algorithm, counts 0, 1, n-1, not divisible by n and large, in
 * place and out of place, float32 and int32 sums: exact everywhere
 * (integer inputs make float sums exact whatever the order); then a
 * broadcast, a reduce and a barrier. */
static int matrix_body(dlcp_comm *comm, const scenario *s, rank_report *rep) {
  uint32_t n = s->world, r = dlcp_comm_rank(comm);
  const dlcp_algo algos[] = {DLCP_ALGO_AUTO, DLCP_ALGO_RING,
                             DLCP_ALGO_RING_BYPASS, DLCP_ALGO_PS,
                             DLCP_ALGO_HALVING_DOUBLING, DLCP_ALGO_RAT,
                             DLCP_ALGO_DIRECT, DLCP_ALGO_RECURSIVE_DOUBLING};
  const uint64_t counts[] = {0, 1, n - 1, 1000 + n, 100003};
  enum { BIG = 100003 };
  float *fin = malloc(BIG * sizeof(float)), *fout = malloc(BIG * sizeof(float));
  int32_t *iin = malloc(BIG * sizeof(int32_t)),
          *iout = malloc(BIG * sizeof(int32_t));
  for (size_t a = 0; a < sizeof(algos) / sizeof(algos[0]); a++) {
    for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]); k++) {
      for (int inplace = 0; inplace < 2; inplace++) {
        for (int integer = 0; integer < 2; integer++) {
          uint64_t count = counts[k];
          for (uint64_t i = 0; i < count; i++) {
            int32_t v = (int32_t)((r + 1) * (i % 11 + 1));
            fin[i] = (float)v;
            iin[i] = v;
            fout[i] = inplace ? (float)v : -1.0f;
            iout[i] = inplace ? v : -1;
          }
          dlcp_coll_opts opts;
          dlcp_coll_opts_default(&opts);
          opts.algo = algos[a];
          dlcp_request *req;
          void *in = integer ? (void *)iin : (void *)fin;
          void *out = integer ? (void *)iout : (void *)fout;
          int rv = dlcp_allreduce(comm, inplace ? out : in, out, count,
                                  integer ? DLCP_INT32 : DLCP_FLOAT32,
                                  DLCP_SUM, &opts, &req);
          dlcp_coll_info info;
          if (rv != 0) {
            rep->failed++;
            snprintf(rep->first_error, sizeof(rep->first_error),
                     "post %s count %llu: %s", dlcp_algo_str(algos[a]),
                     (unsigned long long)count, dlcp_strerror(rv));
            continue;
          }
          rv = wait_req(req, &info, rep);
          dlcp_request_free(req);
          if (rv != 0) {
            continue;
          }
          rep->checks++;
          for (uint64_t i = 0; i < count; i++) {
            int64_t want = (int64_t)(i % 11 + 1) * n * (n + 1) / 2;
            int64_t got = integer ? iout[i] : (int64_t)fout[i];
            if (got != want) {
              rep->wrong++;
              snprintf(rep->first_wrong, sizeof(rep->first_wrong),
                       "%s count %llu inplace %d int %d: [%llu] %lld != "
                       "%lld",
                       dlcp_algo_str(algos[a]), (unsigned long long)count,
                       inplace, integer, (unsigned long long)i,
                       (long long)got, (long long)want);
              break;
            }
          }
        }
      }
    }
  }
  /* The other collectives once each. */
  dlcp_request *req;
  dlcp_coll_info info;
  uint64_t count = 1000 + n;
  for (uint64_t i = 0; i < count; i++) {
    iout[i] = (int32_t)(r == 1 % n ? 7 * i : 0);
  }
  if (dlcp_broadcast(comm, iout, count, DLCP_INT32, 1 % n, NULL, &req) == 0 &&
      wait_req(req, &info, rep) == 0) {
    rep->checks++;
    for (uint64_t i = 0; i < count; i++) {
      if (iout[i] != (int32_t)(7 * i)) {
        rep->wrong++;
        snprintf(rep->first_wrong, sizeof(rep->first_wrong), "broadcast");
        break;
      }
    }
  }
  dlcp_request_free(req);
  /* A reduce to the last rank, out of place: the sum there. */
  for (uint64_t i = 0; i < count; i++) {
    iin[i] = (int32_t)((uint64_t)(r + 1) * (i % 11 + 1));
  }
  uint32_t root = (uint32_t)n - 1;
  if (dlcp_reduce(comm, iin, iout, count, DLCP_INT32, DLCP_SUM, root, NULL,
                  &req) == 0 &&
      wait_req(req, &info, rep) == 0) {
    rep->checks++;
    for (uint64_t i = 0; r == root && i < count; i++) {
      if (iout[i] != (int32_t)((i % 11 + 1) * n * (n + 1) / 2)) {
        rep->wrong++;
        snprintf(rep->first_wrong, sizeof(rep->first_wrong),
                 "reduce: [%llu] %d", (unsigned long long)i, iout[i]);
        break;
      }
    }
  }
  dlcp_request_free(req);
  if (dlcp_barrier(comm, &req) == 0 && wait_req(req, &info, rep) == 0) {
    rep->checks++;
    if (strcmp(info.algo_name, "dissemination") != 0) {
      rep->wrong++;
      snprintf(rep->first_wrong, sizeof(rep->first_wrong),
               "barrier reported as %.40s", info.algo_name);
    }
  }
  dlcp_request_free(req);
  free(fin);
  free(fout);
  free(iin);
  free(iout);
  return rep->wrong || rep->failed;
}

static void check_matrix(const scenario *s, const rank_report *rep) {
  for (uint32_t r = 0; r < s->world; r++) {
    if (rep[r].wrong || rep[r].failed) {
      fail_msg("world %u rank %u: %d wrong (%s), %d failed (%s)", s->world,
               r, rep[r].wrong, rep[r].first_wrong, rep[r].failed,
               rep[r].first_error);
    }
    assert_int_equal(rep[r].checks, 8 * 5 * 2 * 2 + 3);
  }
}

static void test_matrix_worlds_1_to_5(void **state) {
  (void)state;
  for (uint32_t n = 1; n <= 5; n++) {
    scenario s = {.world = n, .die_rank = -1, .body = matrix_body};
    rank_report *rep = run(&s);
    check_matrix(&s, rep);
    munmap(rep, sizeof(rank_report) * MAX_RANKS);
  }
}

static void test_matrix_world_8(void **state) {
  (void)state;
  scenario s = {.world = 8, .die_rank = -1, .body = matrix_body};
  rank_report *rep = run(&s);
  check_matrix(&s, rep);
  munmap(rep, sizeof(rank_report) * MAX_RANKS);
}

/* More ranks than a rank has rings for (DLCP_SHM_MAX_PEERS): each shares
 * memory with the 8 ranks 1, 2, 4, 8 or 16 away either way round a world
 * of 20 (12, 16, 18 and 19 ahead), the 11 others through UDP, and every
 * algorithm mixes the two. */
static void test_matrix_crowded_host(void **state) {
  (void)state;
  scenario s = {
      .world = 20, .shm_peers = 8, .die_rank = -1, .body = matrix_body};
  rank_report *rep = run(&s);
  check_matrix(&s, rep);
  munmap(rep, sizeof(rank_report) * MAX_RANKS);
}

static void test_matrix_1_percent_loss(void **state) {
  (void)state;
  scenario s = {.world = 4, .drop = 0.01, .die_rank = -1,
                .body = matrix_body};
  rank_report *rep = run(&s);
  check_matrix(&s, rep);
  munmap(rep, sizeof(rank_report) * MAX_RANKS);
}

/* Small transfers go eager (on the control connection) by default, out
 * of the injected loss's reach: this runs them through MLT's rounds. */
static void test_matrix_1_percent_loss_no_eager(void **state) {
  (void)state;
  scenario s = {.world = 4, .drop = 0.01, .die_rank = -1, .no_eager = true,
                .body = matrix_body};
  rank_report *rep = run(&s);
  check_matrix(&s, rep);
  munmap(rep, sizeof(rank_report) * MAX_RANKS);
}

/* The same through UDP sockets (ranks on one host otherwise share
 * memory): the path every multi-host job takes. */
static void test_matrix_1_percent_loss_udp(void **state) {
  (void)state;
  scenario s = {.world = 4, .drop = 0.01, .die_rank = -1, .no_shm = true,
                .body = matrix_body};
  rank_report *rep = run(&s);
  check_matrix(&s, rep);
  munmap(rep, sizeof(rank_report) * MAX_RANKS);
}

/* Frames of an Ethernet MTU: an eager transfer longer than one (up to
 * 64 KiB) goes as several control datagrams, and the pieces lost to the
 * injected loss are sent again on their own. */
static void test_matrix_1_percent_loss_udp_small_frames(void **state) {
  (void)state;
  scenario s = {.world = 4, .drop = 0.01, .die_rank = -1, .no_shm = true,
                .segment = 1400, .body = matrix_body};
  rank_report *rep = run(&s);
  check_matrix(&s, rep);
  munmap(rep, sizeof(rank_report) * MAX_RANKS);
}

static void test_matrix_world_5_udp(void **state) {
  (void)state;
  scenario s = {.world = 5, .die_rank = -1, .no_shm = true,
                .body = matrix_body};
  rank_report *rep = run(&s);
  check_matrix(&s, rep);
  munmap(rep, sizeof(rank_report) * MAX_RANKS);
}

/* p = 0.05 under 3% loss: at least 95% delivered, exact where delivered,
 * zero where missing, and every rank reports the same missing ranges. */
static int bounded_body(dlcp_comm *comm, const scenario *s,
                        rank_report *rep) {
  uint32_t n = s->world, r = dlcp_comm_rank(comm);
  enum { COUNT = 1u << 20 };
  float *buf = malloc(COUNT * sizeof(float));
  for (uint64_t i = 0; i < COUNT; i++) {
    buf[i] = (float)((r + 1) * (i % 11 + 1));
  }
  dlcp_coll_opts opts;
  dlcp_coll_opts_default(&opts);
  opts.algo = DLCP_ALGO_RING;
  opts.loss_bound = s->p;
  dlcp_request *req;
  dlcp_coll_info info;
  if (dlcp_allreduce(comm, buf, buf, COUNT, DLCP_FLOAT32, DLCP_SUM, &opts,
                     &req) != 0 ||
      wait_req(req, &info, rep) != 0) {
    free(buf);
    return 1;
  }
  rep->checks++;
  rep->delivered = info.delivered_fraction;
  rep->nmissing = info.nmissing < MAX_MISSING ? info.nmissing : MAX_MISSING;
  if (rep->nmissing > 0) { /* info.missing is NULL when nothing is */
    memcpy(rep->missing, info.missing, rep->nmissing * sizeof(dlcp_range));
  }
  size_t m = 0;
  for (uint64_t i = 0; i < COUNT && !rep->wrong; i++) {
    while (m < info.nmissing &&
           info.missing[m].offset + info.missing[m].len <= i) {
      m++;
    }
    bool lost = m < info.nmissing && info.missing[m].offset <= i;
    float want = lost ? 0.0f : (float)((i % 11 + 1) * n * (n + 1) / 2);
    if (buf[i] != want) {
      rep->wrong++;
      snprintf(rep->first_wrong, sizeof(rep->first_wrong),
               "[%llu] %g != %g (lost %d)", (unsigned long long)i,
               (double)buf[i], (double)want, lost);
    }
  }
  dlcp_request_free(req);
  free(buf);
  return rep->wrong != 0;
}

static void test_bounded_loss_agrees(void **state) {
  (void)state;
  scenario s = {.world = 4, .drop = 0.03, .p = 0.05, .die_rank = -1,
                .body = bounded_body};
  rank_report *rep = run(&s);
  for (uint32_t r = 0; r < s.world; r++) {
    assert_int_equal(rep[r].wrong, 0);
    assert_int_equal(rep[r].checks, 1);
    assert_true(rep[r].delivered >= 0.95);
    assert_int_equal(rep[r].nmissing, rep[0].nmissing);
    assert_memory_equal(rep[r].missing, rep[0].missing,
                        rep[0].nmissing * sizeof(dlcp_range));
    assert_true(rep[r].delivered == rep[0].delivered);
  }
  print_message("delivered %.4f, %zu missing ranges, identical on %u ranks\n",
                rep[0].delivered, rep[0].nmissing, s.world);
  munmap(rep, sizeof(rank_report) * MAX_RANKS);
}

/* A straggler (DLCP_FAULT_STRAGGLE: rank 1's first receive of every
 * all-reduce, one per training step, reaches it 150 ms late): the plain
 * ring and the bypass ring both stay exact and both pay for the slow step,
 * and the bypass ring finishes measurably faster by going around the hop
 * after the straggler.  The seed's gain is one hop, T + T_trans (its eq.
 * 1), so the vector is large (64 MiB) and one pipeline lane carries a
 * whole chunk: the hop is a 16 MiB transfer and reduce, about 5 ms of
 * ~90 ms on a 2-core machine.  The delay is far above a step: a bypass
 * waits alpha times the step time it learnt, and with another process
 * busy on one of the two cores a 50 ms delay was within that and no
 * bypass fired.  Rounds alternate the two rings after
 * STRAGGLE_WARMUP warm-up rounds (the estimates a bypass ring hands to the
 * next); each round's time is the slowest rank's, and the medians are
 * compared. */

static int straggler_body(dlcp_comm *comm, const scenario *s,
                          rank_report *rep) {
  uint32_t n = s->world, r = dlcp_comm_rank(comm);
  float *buf = malloc(STRAGGLE_COUNT * sizeof(float));
  int rv = buf == NULL;
  for (int round = 0; round < STRAGGLE_WARMUP + STRAGGLE_ROUNDS && rv == 0;
       round++) {
    for (int bypass = 0; bypass < 2 && rv == 0; bypass++) {
      for (uint64_t i = 0; i < STRAGGLE_COUNT; i++) {
        buf[i] = (float)((r + 1) * (i % 11 + 1));
      }
      dlcp_coll_opts opts;
      dlcp_coll_opts_default(&opts);
      opts.algo = bypass ? DLCP_ALGO_RING_BYPASS : DLCP_ALGO_RING;
      opts.chunk_bytes = STRAGGLE_COUNT / n * sizeof(float);
      dlcp_request *req;
      dlcp_coll_info info;
      /* Start together: a rank's first wait would otherwise include the
       * others' late start, and teach the bypass a long transfer time. */
      if (dlcp_barrier(comm, &req) != 0 || wait_req(req, &info, rep) != 0) {
        rv = 1;
        break;
      }
      dlcp_request_free(req);
      if (dlcp_allreduce(comm, buf, buf, STRAGGLE_COUNT, DLCP_FLOAT32,
                         DLCP_SUM, &opts, &req) != 0 ||
          wait_req(req, &info, rep) != 0) {
        rv = 1;
        break;
      }
      dlcp_request_free(req);
      rep->checks++;
      rep->bypasses += info.bypasses;
      if (round >= STRAGGLE_WARMUP) {
        (bypass ? rep->bypass_ns
                : rep->ring_ns)[round - STRAGGLE_WARMUP] = info.elapsed_ns;
      }
      for (uint64_t i = 0; i < STRAGGLE_COUNT; i++) {
        if (buf[i] != (float)((i % 11 + 1) * n * (n + 1) / 2)) {
          rep->wrong++;
          snprintf(rep->first_wrong, sizeof(rep->first_wrong),
                   "%s: [%llu] %g", bypass ? "ring_bypass" : "ring",
                   (unsigned long long)i, (double)buf[i]);
          break;
        }
      }
    }
  }
  free(buf);
  return rv || rep->wrong;
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

/* The median over rounds of the slowest rank's time. */
static uint64_t median_round(const rank_report *rep, uint32_t world,
                             bool bypass) {
  uint64_t t[STRAGGLE_ROUNDS];
  for (int k = 0; k < STRAGGLE_ROUNDS; k++) {
    t[k] = 0;
    for (uint32_t r = 0; r < world; r++) {
      uint64_t v = (bypass ? rep[r].bypass_ns : rep[r].ring_ns)[k];
      t[k] = v > t[k] ? v : t[k];
    }
  }
  qsort(t, STRAGGLE_ROUNDS, sizeof(t[0]), cmp_u64);
  return t[STRAGGLE_ROUNDS / 2];
}

static void test_straggler_bypassed(void **state) {
  (void)state;
  scenario s = {.world = 4, .die_rank = -1, .straggler = 1,
                .straggle_ms = 150, .body = straggler_body};
  rank_report *rep = run(&s);
  uint32_t bypasses = 0;
  for (uint32_t r = 0; r < s.world; r++) {
    if (rep[r].wrong || rep[r].failed) {
      fail_msg("rank %u: %d wrong (%s), %d failed (%s)", r, rep[r].wrong,
               rep[r].first_wrong, rep[r].failed, rep[r].first_error);
    }
    assert_int_equal(rep[r].checks, 2 * (STRAGGLE_WARMUP + STRAGGLE_ROUNDS));
    /* Every collective waited for the slow step. */
    for (int k = 0; k < STRAGGLE_ROUNDS; k++) {
      assert_true(rep[r].ring_ns[k] >= s.straggle_ms * 1000000ull);
      assert_true(rep[r].bypass_ns[k] >= s.straggle_ms * 1000000ull);
    }
    bypasses += rep[r].bypasses;
  }
  uint64_t ring = median_round(rep, s.world, false);
  uint64_t byp = median_round(rep, s.world, true);
  print_message("straggler %u ms, %u MiB: ring %.1f ms, bypass ring %.1f ms "
                "(median of %d rounds, slowest rank): %.3f, %u bypasses\n",
                s.straggle_ms, (unsigned)(STRAGGLE_COUNT * sizeof(float) >> 20),
                (double)ring / 1e6, (double)byp / 1e6,
                STRAGGLE_ROUNDS, (double)byp / (double)ring, bypasses);
  /* The times are printed, not asserted: on a shared 2-core machine the
   * bypass's 3-5 % gain is within the noise (it failed twice under load),
   * and speed claims belong to benchmarks (make bench-straggler), not to
   * unit tests.  What is asserted: bypasses happened, results exact. */
  assert_true(bypasses > 0);
  munmap(rep, sizeof(rank_report) * MAX_RANKS);
}

/* A rank that dies before the collective: every other rank's collective
 * fails, naming it. */
static int dying_body(dlcp_comm *comm, const scenario *s, rank_report *rep) {
  (void)s;
  float buf[4096];
  memset(buf, 0, sizeof(buf));
  dlcp_request *req;
  dlcp_coll_info info;
  dlcp_coll_opts opts;
  dlcp_coll_opts_default(&opts);
  opts.algo = DLCP_ALGO_RING;
  if (dlcp_allreduce(comm, buf, buf, 4096, DLCP_FLOAT32, DLCP_SUM, &opts,
                     &req) != 0) {
    return 1;
  }
  int rv = wait_req(req, &info, rep);
  dlcp_request_free(req);
  return rv == 0;
}

/* Kills the process 20 ms from now, at once and whatever its other
 * threads are doing: under TSan _exit() finishes the sanitizer's work
 * first, and the collective went on to complete meanwhile. */
static void *die_soon(void *arg) {
  (void)arg;
  usleep(20000);
  kill(getpid(), SIGKILL);
  return NULL;
}

/* A rank that dies in the middle of a collective: rank 1 straggles (its
 * first receive reaches the collective 50 ms late), so a 16 MiB ring is
 * still running when rank 2 is killed 20 ms after posting it.  A rank
 * that had every byte it needed before the death may still complete;
 * then its sums must be exact. */
static int dying_mid_body(dlcp_comm *comm, const scenario *s,
                          rank_report *rep) {
  enum { COUNT = 4u << 20 };
  float *buf = malloc(COUNT * sizeof(float));
  if (!buf) {
    return 1;
  }
  uint32_t rank = dlcp_comm_rank(comm);
  for (uint32_t i = 0; i < COUNT; i++) {
    buf[i] = (float)(rank + 1);
  }
  dlcp_request *req;
  dlcp_coll_info info;
  /* Every rank posts at once, however long it took to fill its buffer,
   * so the straggler's delay still holds the ring when rank 2 dies. */
  if (dlcp_barrier(comm, &req) != 0 || wait_req(req, &info, rep) != 0) {
    free(buf);
    return 1;
  }
  dlcp_request_free(req);
  dlcp_coll_opts opts;
  dlcp_coll_opts_default(&opts);
  opts.algo = DLCP_ALGO_RING;
  if (dlcp_allreduce(comm, buf, buf, COUNT, DLCP_FLOAT32, DLCP_SUM, &opts,
                     &req) != 0) {
    return 1;
  }
  pthread_t t;
  if ((int)rank == s->die_rank &&
      pthread_create(&t, NULL, die_soon, NULL) != 0) {
    return 1;
  }
  dlcp_tstamp t0 = dlcp_rt_now();
  int rv = wait_req(req, &info, rep);
  rep->ring_ns[0] = dlcp_rt_now() - t0;
  dlcp_request_free(req);
  float want = (float)(s->world * (s->world + 1) / 2);
  for (uint32_t i = 0; rv == 0 && i < COUNT && !rep->first_wrong[0]; i++) {
    if (buf[i] != want) {
      snprintf(rep->first_wrong, sizeof(rep->first_wrong),
               "element %u: %g, expected %g", i, (double)buf[i],
               (double)want);
    }
  }
  free(buf);
  return rv == 0;
}

static void expect_named(const scenario *s, const rank_report *rep) {
  for (uint32_t r = 0; r < s->world; r++) {
    if ((int)r == s->die_rank) {
      continue;
    }
    assert_int_equal(rep[r].failed, 1);
    print_message("rank %u: %s\n", r, rep[r].first_error);
    assert_non_null(strstr(rep[r].first_error, "rank 2 (127.0.0.1:"));
  }
}

static void test_dead_rank_named_everywhere(void **state) {
  (void)state;
  scenario s = {.world = 4, .die_rank = 2, .body = dying_body};
  rank_report *rep = run(&s);
  expect_named(&s, rep);
  munmap(rep, sizeof(rank_report) * MAX_RANKS);
}

static void test_rank_dying_mid_collective_named(void **state) {
  (void)state;
  scenario s = {.world = 4, .die_rank = 2, .die_mid = true, .straggler = 1,
                .straggle_ms = 50, .body = dying_mid_body};
  rank_report *rep = run(&s);
  /* The rank after the dead one waits for its data in every step: it
   * fails, naming it; any other rank fails the same way or completes
   * with exact sums. */
  for (uint32_t r = 0; r < s.world; r++) {
    if ((int)r != s.die_rank) {
      print_message("rank %u: %s (%.1f ms)\n", r,
                    rep[r].failed ? rep[r].first_error : "completed",
                    (double)rep[r].ring_ns[0] / 1e6);
    }
  }
  assert_int_equal(rep[(s.die_rank + 1) % (int)s.world].failed, 1);
  for (uint32_t r = 0; r < s.world; r++) {
    if ((int)r == s.die_rank) {
      continue;
    }
    if (rep[r].failed) {
      assert_non_null(strstr(rep[r].first_error, "rank 2 (127.0.0.1:"));
    } else if (rep[r].first_wrong[0]) {
      fail_msg("rank %u completed with a wrong sum: %s", r,
               rep[r].first_wrong);
    }
    /* Promptly: well within the 20 s timeout the ranks were given. */
    assert_true(rep[r].ring_ns[0] < 5000000000ull);
  }
  munmap(rep, sizeof(rank_report) * MAX_RANKS);
}

int main(void) {
  signal(SIGPIPE, SIG_IGN);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_matrix_worlds_1_to_5),
      cmocka_unit_test(test_matrix_world_8),
      cmocka_unit_test(test_matrix_crowded_host),
      cmocka_unit_test(test_matrix_1_percent_loss),
      cmocka_unit_test(test_matrix_1_percent_loss_no_eager),
      cmocka_unit_test(test_matrix_1_percent_loss_udp_small_frames),
      cmocka_unit_test(test_matrix_1_percent_loss_udp),
      cmocka_unit_test(test_matrix_world_5_udp),
      cmocka_unit_test(test_bounded_loss_agrees),
      cmocka_unit_test(test_straggler_bypassed),
      cmocka_unit_test(test_dead_rank_named_everywhere),
      cmocka_unit_test(test_rank_dying_mid_collective_named),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
