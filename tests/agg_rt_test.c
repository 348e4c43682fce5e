/*
 * agg_rt_test.c: dlcp_allreduce with algorithms INA and RA_INA through
 * dlcp-switch, real processes on loopback.  A dlcp-switch is started
 * (tests/support/switchd); each case forks one process per rank; they
 * join a communicator and run a sequence of INA and RA-INA all-reduces
 * (FLOAT32 and INT32, SUM and AVG, in place and out of place, counts 0, 1
 * and odd; worlds 2, 3, 5, 8), checking every element against the exact
 * result: bit for bit for INT32, within the documented scaling bound for
 * FLOAT32 (every rank can generate every rank's input, so it knows the
 * exact sum and the agreed exponents).  A small switch pool makes RA-INA
 * send groups through the ring; a pool smaller than one group fails plain
 * INA at once; INA all-reduces overlap each other and a ring all-reduce;
 * a chain of two and of three dlcp-switch (CINA) sums the ranks of every
 * switch, and so do two trees of three leaves (MTINA, PANAMA's trees).
 * Runs of datagrams that reach a two-thread switch whole (UDP_SEGMENT on
 * loopback) are aggregated as if each had been steered alone; the ranks'
 * own runs of contributions (UDP GSO) and the switch's runs of results,
 * which loopback hands their UDP_GRO socket whole, come out exact.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <net/if.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <linux/sock_diag.h>
#include <time.h>
#include <unistd.h>

#include "coll/ina.h"
#include "dlcp/dlcp.h"
#include "proto/rng.h"
#include "rt/errbuf.h"
#include "rt/flight.h"
#include "rt/net.h"
#include "switchd.h"
#include "udpcaps.h"
#include "wire/agg_wire.h"

#define MAX_RANKS 8
/* The communicators' timeout where a test waits for one to fire. */
#define MISSING_TIMEOUT_MS 1500

/* Per rank: its DLCP_SWITCH (NULL: the one of run_ranks), and whether the
 * ranks run plain INA only (a chain has no RA-INA). */
static const char *rank_switch[MAX_RANKS];
static bool plain_only;

typedef struct report {
  int checks, wrong, ring_used;
  char error[256];
} report;

static void gen(uint32_t rank, uint32_t op, uint64_t count, dlcp_dtype dt,
                void *x) {
  dlcp_rng rng;

  dlcp_rng_seed(&rng, op * 977u + rank);
  for (uint64_t i = 0; i < count; i++) {
    if (dt == DLCP_INT32) {
      ((int32_t *)x)[i] = (int32_t)(uint32_t)dlcp_rng_next(&rng);
    } else {
      ((float *)x)[i] = (float)ldexp(dlcp_rng_unit(&rng) * 2 - 1,
                                     (int)dlcp_rng_below(&rng, 12) - 6);
    }
  }
}

/* Checks |out| of op |k| against every rank's generated input. */
static bool check(uint32_t world, uint32_t k, uint64_t count, dlcp_dtype dt,
                  dlcp_redop op, bool ra, const void *out, report *rep) {
  uint32_t ge = 64u * (ra ? world : 4u);
  uint32_t ng = dlcp_ina_ngroups(count, 64, ra ? world : 4u);
  void *x = malloc(4 * count + 4);
  double *exact = calloc(count + 1, sizeof(double));
  uint32_t *isum = calloc(count + 1, sizeof(uint32_t));
  int32_t *exps = malloc(4u * (ng + 1u)), *loc = malloc(4u * (ng + 1u));
  bool ok = true;

  for (uint32_t g = 0; g < ng; g++) {
    exps[g] = DLCP_INA_EXP_ZERO;
  }
  for (uint32_t r = 0; r < world; r++) {
    gen(r, k, count, dt, x);
    for (uint64_t i = 0; i < count; i++) {
      if (dt == DLCP_INT32) {
        isum[i] += (uint32_t)((int32_t *)x)[i];
      } else {
        exact[i] += ((float *)x)[i];
      }
    }
    if (dt == DLCP_FLOAT32) {
      (void)dlcp_ina_exponents(x, count, ge, loc);
      for (uint32_t g = 0; g < ng; g++) {
        exps[g] = loc[g] > exps[g] ? loc[g] : exps[g];
      }
    }
  }
  for (uint64_t i = 0; i < count && ok; i++) {
    if (dt == DLCP_INT32) {
      int32_t want = (int32_t)isum[i];

      want = op == DLCP_AVG ? want / (int32_t)world : want;
      ok = ((const int32_t *)out)[i] == want;
    } else {
      double div = op == DLCP_AVG ? world : 1;
      /* the scaling bound, the final rounding, and for ring groups the
       * float sums of the ring (partials at most 2^6 * world) */
      double bound = (dlcp_ina_error_bound(exps[i / ge], world) +
                      ldexp(64.0 * world, -24) * world) /
                     div;

      ok = fabs(((const float *)out)[i] - exact[i] / div) <= bound;
    }
    if (!ok) {
      snprintf(rep->error, sizeof(rep->error),
               "op %u (%s %s%s) count %llu: element %llu wrong", k,
               dt == DLCP_INT32 ? "int32" : "float32",
               op == DLCP_AVG ? "avg" : "sum", ra ? " ra" : "",
               (unsigned long long)count, (unsigned long long)i);
    }
  }
  free(x);
  free(exact);
  free(isum);
  free(exps);
  free(loc);
  return ok;
}

/* The loopback address of the ranks and switches of run_ranks,
 * run_chain and run_trees: "127.0.0.1", or "::1" for their IPv6 runs. */
static const char *loopback = "127.0.0.1";

/* A switch on |loopback| at |port| as DLCP_SWITCH and --parent name it. */
static void switch_name(char *buf, size_t len, uint16_t port) {
  snprintf(buf, len, strchr(loopback, ':') ? "[%s]:%u" : "%s:%u", loopback,
           port);
}

/* make_comm creates rank |rank| of |world| with its rendezvous on
 * |loopback| |port| and the operation timeout |timeout_ms|; 0 or the
 * creation's error, explained in |err|. */
static int make_comm(dlcp_comm **comm, uint32_t rank, uint32_t world,
                     uint16_t port, uint32_t timeout_ms, char *err,
                     size_t errlen) {
  dlcp_comm_config cfg;
  dlcp_comm_config_default(&cfg);
  cfg.rank = rank;
  cfg.world_size = world;
  cfg.master_addr = loopback;
  cfg.master_port = port;
  cfg.timeout_ms = timeout_ms;
  cfg.rdzv_timeout_ms = 20000;
  return dlcp_comm_create(comm, &cfg, err, errlen);
}

/* create_one_rank: creates a world of one on a free loopback port;
 * returns dlcp_comm_create's result, its error in |err|. */
static int create_one_rank(dlcp_comm **comm, uint32_t timeout_ms, char *err,
                           size_t errlen) {
  uint16_t port = 0;
  dlcp_errbuf eb;
  assert_int_equal(dlcp_net_free_port(loopback, &port, &eb), 0);
  return make_comm(comm, 0, 1, port, timeout_ms, err, errlen);
}

/* one_rank_comm: a world of one, on a free loopback port. */
static dlcp_comm *one_rank_comm(uint32_t timeout_ms) {
  dlcp_comm *comm = NULL;
  char err[256];
  assert_int_equal(create_one_rank(&comm, timeout_ms, err, sizeof(err)), 0);
  return comm;
}

/* A world of one must be refused at its creation with DLCP_ERR_CONFIG and
 * an error containing |want|: the INA variables are checked there (as
 * well as when an INA all-reduce reads them). */
static void refused_at_create(const char *want) {
  dlcp_comm *comm = NULL;
  char err[256] = "";
  assert_int_equal(create_one_rank(&comm, 20000, err, sizeof(err)),
                   DLCP_ERR_CONFIG);
  assert_null(comm);
  if (strstr(err, want) == NULL) {
    fail_msg("wanted \"%s\", got: %s", want, err);
  }
}

/* Op |k| of rank |rank|: an INA (|ra|: RA-INA) all-reduce of |count|
 * generated elements, in place or not, which must report its algorithm
 * and come out right.  0, or 1 with the failure in |rep|. */
static int one_op(dlcp_comm *comm, uint32_t rank, uint32_t world, uint32_t k,
                  uint64_t count, dlcp_dtype dt, dlcp_redop op, bool ra,
                  bool inplace, report *rep) {
  void *in = malloc(4 * count + 4), *out = malloc(4 * count + 4);
  dlcp_coll_info info = {0};
  dlcp_coll_opts o;
  dlcp_request *req;
  int rv;

  gen(rank, k, count, dt, in);
  if (inplace) {
    memcpy(out, in, 4 * count);
  }
  dlcp_coll_opts_default(&o);
  o.algo = ra ? DLCP_ALGO_RA_INA : DLCP_ALGO_INA;
  rv = dlcp_allreduce(comm, inplace ? out : in, out, count, dt, op, &o, &req);
  if (rv == 0) {
    rv = dlcp_wait(req, -1, &info);
    if (rv == 0 && (info.algo != o.algo ||
                    strcmp(info.algo_name, ra ? "ra_ina" : "ina") != 0)) {
      snprintf(info.error, sizeof(info.error), "reported %s", info.algo_name);
      rv = -1;
    }
    dlcp_request_free(req);
  }
  if (rv != 0) {
    snprintf(rep->error, sizeof(rep->error), "op %u: %.160s (%d)", k,
             info.error, rv);
  } else {
    rep->checks++;
    if (!check(world, k, count, dt, op, ra, out, rep)) {
      rep->wrong++;
      rv = 1;
    }
  }
  free(in);
  free(out);
  return rv != 0;
}

static int rank_main(uint32_t rank, uint32_t world, uint16_t port,
                     report *rep) {
  dlcp_comm *comm;
  char err[256];
  const uint64_t counts[] = {0, 1, 1000 + world, 30011};
  uint32_t k = 0, nonempty = 0;

  if (make_comm(&comm, rank, world, port, 20000, err, sizeof(err)) != 0) {
    snprintf(rep->error, sizeof(rep->error), "create: %.200s", err);
    return 1;
  }
  for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
    for (int variant = 0; variant < 6; variant++, k++) {
      uint64_t count = counts[c];
      dlcp_dtype dt = variant % 2 ? DLCP_INT32 : DLCP_FLOAT32;
      dlcp_redop op = variant == 2 || variant == 3 ? DLCP_AVG : DLCP_SUM;
      bool ra = variant >= 4;
      bool inplace = variant % 3 == 0;
      if (ra && plain_only) {
        continue;
      }
      if (one_op(comm, rank, world, k, count, dt, op, ra, inplace, rep) != 0) {
        return 1;
      }
      nonempty += count > 0;
    }
  }
  /* Every non-empty operation's groups were counted, by the switch or
   * (RA-INA) by the ring, on the last rank, which is its host's master
   * (the ranks before it on its host reduce to it and never contribute). */
  dlcp_comm_stats st;
  dlcp_comm_get_stats(comm, &st);
  if (rank == world - 1 && st.ina_groups + st.ina_ring_groups < nonempty) {
    snprintf(rep->error, sizeof(rep->error),
             "stats: %llu + %llu groups for %u operations",
             (unsigned long long)st.ina_groups,
             (unsigned long long)st.ina_ring_groups, nonempty);
    return 1;
  }
  dlcp_comm_destroy(comm);
  return 0;
}

/* Two all-reduces of a million and seven elements, plain INA (INT32) and
 * RA-INA (FLOAT32): the host's master sends its contributions to the
 * switch in runs (UDP GSO) and, where the kernel coalesces, reads the
 * switch's runs of results as one message each, cut back into datagrams;
 * every element exact, and the master counts the coalesced datagrams
 * among those the switch sent it. */
static int coalesced_main(uint32_t rank, uint32_t world, uint16_t port,
                          report *rep) {
  const uint64_t count = (1u << 20) + 7;
  dlcp_comm *comm;
  char err[256];

  if (make_comm(&comm, rank, world, port, 20000, err, sizeof(err)) != 0) {
    snprintf(rep->error, sizeof(rep->error), "create: %.200s", err);
    return 1;
  }
  for (uint32_t k = 0; k < 2; k++) {
    bool ra = k == 1;
    if (one_op(comm, rank, world, k, count, ra ? DLCP_FLOAT32 : DLCP_INT32,
               DLCP_SUM, ra, false, rep) != 0) {
      return 1;
    }
  }
  dlcp_comm_stats st;
  dlcp_comm_get_stats(comm, &st);
  /* The last rank is the host's master, the one the switch answers. */
  bool master = rank == world - 1;
  bool coalesces = udpcaps_coalesces();
  if ((master && st.ina_datagrams_received == 0) ||
      st.ina_datagrams_coalesced > st.ina_datagrams_received ||
      (master && coalesces && st.ina_datagrams_coalesced == 0) ||
      (!coalesces && st.ina_datagrams_coalesced != 0)) {
    snprintf(rep->error, sizeof(rep->error),
             "rank %u: %llu datagrams from the switch, %llu coalesced "
             "(kernel coalesces: %d)",
             rank, (unsigned long long)st.ina_datagrams_received,
             (unsigned long long)st.ina_datagrams_coalesced, coalesces);
    return 1;
  }
  if (master) {
    printf("rank %u: %llu datagrams from the switch, %llu coalesced\n", rank,
           (unsigned long long)st.ina_datagrams_received,
           (unsigned long long)st.ina_datagrams_coalesced);
    fflush(stdout); /* the rank leaves by _exit */
  }
  dlcp_comm_destroy(comm);
  return 0;
}

/* The connected UDP socket of this process whose peer is |port| (the
 * switch's), or -1: the INA socket, which the runtime keeps private. */
static int socket_to_port(uint16_t port) {
  for (int fd = 3; fd < 1024; fd++) {
    int type = 0;
    socklen_t tl = sizeof(type);
    dlcp_sockaddr peer;
    socklen_t pl = sizeof(peer);
    if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tl) == 0 &&
        type == SOCK_DGRAM && getpeername(fd, &peer.sa, &pl) == 0 &&
        dlcp_net_addr_port(&peer.sa) == port) {
      return fd;
    }
  }
  return -1;
}

/* A host's master that reads the switch's results too slowly: after a
 * first small operation opened its INA socket, the master shrinks that
 * socket's receive buffer to the kernel's least, so the switch's bursts
 * of results overflow it; a plain INA all-reduce of a million and seven
 * elements must still come out exact (the lost results asked for again),
 * and the master must count the datagrams its kernel dropped: some, and
 * no more than the kernel's own count of the socket's drops. */
static int rx_drops_main(uint32_t rank, uint32_t world, uint16_t port,
                         report *rep) {
  const uint64_t count = (1u << 20) + 7;
  bool master = rank == world - 1;
  dlcp_comm *comm;
  char err[256];

  if (make_comm(&comm, rank, world, port, 20000, err, sizeof(err)) != 0) {
    snprintf(rep->error, sizeof(rep->error), "create: %.200s", err);
    return 1;
  }
  if (one_op(comm, rank, world, 0, 1000, DLCP_INT32, DLCP_SUM, false, false,
             rep) != 0) {
    return 1;
  }
  int fd = -1;
  if (master) {
    const char *sw = getenv("DLCP_SWITCH");
    fd = socket_to_port((uint16_t)atoi(strrchr(sw, ':') + 1));
    int least = 1;
    if (fd < 0 ||
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &least, sizeof(least)) != 0) {
      snprintf(rep->error, sizeof(rep->error), "no INA socket to shrink");
      return 1;
    }
  }
  if (one_op(comm, rank, world, 1, count, DLCP_INT32, DLCP_SUM, false, false,
             rep) != 0) {
    return 1;
  }
  if (master) {
    uint32_t mem[SK_MEMINFO_VARS];
    socklen_t ml = sizeof(mem);
    dlcp_comm_stats st;
    dlcp_comm_get_stats(comm, &st);
    if (getsockopt(fd, SOL_SOCKET, SO_MEMINFO, mem, &ml) != 0 ||
        st.ina_datagrams_rx_dropped == 0 ||
        st.ina_datagrams_rx_dropped > mem[SK_MEMINFO_DROPS]) {
      snprintf(rep->error, sizeof(rep->error),
               "%llu results counted dropped, the kernel's count %u",
               (unsigned long long)st.ina_datagrams_rx_dropped,
               mem[SK_MEMINFO_DROPS]);
      return 1;
    }
    printf("rank %u: %llu of the switch's datagrams dropped at a full "
           "receive buffer (the kernel: %u), %llu received\n",
           rank, (unsigned long long)st.ina_datagrams_rx_dropped,
           mem[SK_MEMINFO_DROPS],
           (unsigned long long)st.ina_datagrams_received);
    fflush(stdout); /* the rank leaves by _exit */
  }
  dlcp_comm_destroy(comm);
  return 0;
}

/* Several collectives in flight at once: two INA all-reduces (plain
 * FLOAT32 and RA-INA INT32) and a ring all-reduce started back to back,
 * then waited for in the reverse order; the first INA one is waited for
 * with dlcp_test alone (the communicator's loop thread progresses it).
 * That the calls do not block is checked without timing: every rank but 0
 * starts its first INA all-reduce only after its left neighbour has
 * started its own and sent it a token, which a blocking call would never
 * do (rank 0's would wait for rank 1's contribution for ever). */
static int overlap_main(uint32_t rank, uint32_t world, uint16_t port,
                        report *rep) {
  enum { NOPS = 3 };
  static const uint64_t counts[NOPS] = {30011, 5003, 20000};
  static const dlcp_dtype dts[NOPS] = {DLCP_FLOAT32, DLCP_INT32, DLCP_INT32};
  static const dlcp_algo algos[NOPS] = {DLCP_ALGO_INA, DLCP_ALGO_RA_INA,
                                        DLCP_ALGO_RING};
  dlcp_comm *comm;
  dlcp_cq *cq;
  char err[256];

  if (make_comm(&comm, rank, world, port, 20000, err, sizeof(err)) != 0 ||
      dlcp_cq_create(comm, &cq) != 0) {
    snprintf(rep->error, sizeof(rep->error), "create: %.200s", err);
    return 1;
  }
  for (uint32_t round = 0; round < 3; round++) {
    void *buf[NOPS];
    dlcp_request *req[NOPS];
    dlcp_coll_info info;
    uint32_t token = round;
    dlcp_tensor t = {round, &token, sizeof(token)};
    dlcp_completion cmp;
    int done = 0;

    for (int i = 0; i < NOPS; i++) {
      dlcp_coll_opts o;
      uint32_t k = 100 + round * NOPS + (uint32_t)i;

      buf[i] = malloc(4 * counts[i]);
      gen(rank, k, counts[i], dts[i], buf[i]);
      if (i == 0 && rank > 0 &&
          (dlcp_post_recv(comm, rank - 1, &t, 0, cq, 0) != 0 ||
           dlcp_wait_cq(cq, &cmp, -1) != 1 || cmp.status != 0)) {
        snprintf(rep->error, sizeof(rep->error), "round %u: token", round);
        return 1;
      }
      dlcp_coll_opts_default(&o);
      o.algo = algos[i];
      if (dlcp_allreduce(comm, buf[i], buf[i], counts[i], dts[i], DLCP_SUM,
                         &o, &req[i]) != 0) {
        snprintf(rep->error, sizeof(rep->error), "round %u: start %d", round,
                 i);
        return 1;
      }
      if (i == 0 && rank + 1 < world &&
          (dlcp_post_send(comm, rank + 1, &t, NULL, cq, 0) != 0 ||
           dlcp_wait_cq(cq, &cmp, -1) != 1 || cmp.status != 0)) {
        snprintf(rep->error, sizeof(rep->error), "round %u: token", round);
        return 1;
      }
    }
    for (int i = NOPS - 1; i >= 1; i--) {
      if (dlcp_wait(req[i], -1, &info) != 0) {
        snprintf(rep->error, sizeof(rep->error), "round %u op %d: %.200s",
                 round, i, info.error);
        return 1;
      }
      dlcp_request_free(req[i]);
    }
    for (int spins = 0; !done && spins < 200000; spins++) {
      struct timespec ms = {0, 100000};

      if (dlcp_test(req[0], &done, &info) != 0) {
        snprintf(rep->error, sizeof(rep->error), "round %u op 0: %.200s",
                 round, info.error);
        return 1;
      }
      if (!done) {
        nanosleep(&ms, NULL);
      }
    }
    dlcp_request_free(req[0]);
    if (!done) {
      snprintf(rep->error, sizeof(rep->error), "round %u: op 0 not done",
               round);
      return 1;
    }
    for (int i = 0; i < NOPS; i++) {
      rep->checks++;
      if (!check(world, 100 + round * NOPS + (uint32_t)i, counts[i], dts[i],
                 DLCP_SUM, algos[i] == DLCP_ALGO_RA_INA, buf[i], rep)) {
        rep->wrong++;
        return 1;
      }
      free(buf[i]);
    }
  }
  dlcp_comm_destroy(comm);
  dlcp_cq_destroy(cq);
  return 0;
}

/* Forks |world| ranks running |main_fn| (rendezvous on a free port) and
 * checks that each exits 0 after |checks| checks. */
static void fork_ranks(uint32_t world,
                       int (*main_fn)(uint32_t, uint32_t, uint16_t, report *),
                       int checks) {
  report *rep = mmap(NULL, sizeof(report) * MAX_RANKS,
                     PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1,
                     0);
  uint16_t port = 0;
  dlcp_errbuf eb;
  pid_t pids[MAX_RANKS];

  assert_true(rep != MAP_FAILED);
  memset(rep, 0, sizeof(report) * MAX_RANKS);
  assert_int_equal(dlcp_net_free_port(loopback, &port, &eb), 0);
  for (uint32_t r = 0; r < world; r++) {
    pids[r] = fork();
    assert_true(pids[r] >= 0);
    if (pids[r] == 0) {
      if (rank_switch[r] != NULL) {
        setenv("DLCP_SWITCH", rank_switch[r], 1);
      }
      _exit(main_fn(r, world, port, &rep[r]));
    }
  }
  int status[MAX_RANKS];
  bool failed = false;

  /* Every rank is reaped and every failing rank's error printed: the
   * first to fail is often only reporting another's. */
  for (uint32_t r = 0; r < world; r++) {
    assert_int_equal(waitpid(pids[r], &status[r], 0), pids[r]);
    if (!WIFEXITED(status[r]) || WEXITSTATUS(status[r]) != 0) {
      print_error("world %u rank %u exited with 0x%x: %s\n", world, r,
                  status[r], rep[r].error);
      failed = true;
    }
  }
  if (failed) {
    fail_msg("world %u: a rank failed", world);
  }
  for (uint32_t r = 0; r < world; r++) {
    assert_int_equal(rep[r].checks, checks);
  }
  munmap(rep, sizeof(report) * MAX_RANKS);
}

static void run_ranks(uint32_t world, const char *mem,
                      int (*main_fn)(uint32_t, uint32_t, uint16_t, report *),
                      int checks) {
  const char *args[] = {"--mem", mem, NULL};
  switchd d;
  char sw[64];
  const char *err;

  assert_int_equal(switchd_start_at(&d, loopback, args), 0);
  switch_name(sw, sizeof(sw), d.port);
  setenv("DLCP_SWITCH", sw, 1);
  memset(rank_switch, 0, sizeof(rank_switch)); /* a failed chain's */
  plain_only = false;
  fork_ranks(world, main_fn, checks);
  err = switchd_stop(&d);
  assert_non_null(err);
  if (mem[0] == '1' && mem[1] == '6') { /* the small pool */
    assert_true(switchd_stat(err, "ring_verdicts") > 0);
  }
  assert_int_equal(switchd_stat(err, "foreign"), 0);
  assert_int_equal(switchd_stat(err, "stale_answers"), 0);
  assert_int_equal(switchd_stat(err, "peers_evicted"), 0);
}

static void run_world(uint32_t world, const char *mem) {
  run_ranks(world, mem, rank_main, 24);
}

static int ina_once(dlcp_comm *comm, dlcp_algo algo, dlcp_coll_info *info);

/* CINA: |nsw| switches chained leaf first (each started with --parent
 * the next), ranks split |per[0]|, |per[1]|, ... over them: every plain
 * INA all-reduce of rank_main is exact, every switch but the root
 * forwarded partial sums and took finals, and RA-INA is refused.  The
 * ranks at a switch share this host, so with |host_reduce| (the default)
 * they reduce to their master first and each switch sums one
 * contribution per group (two with the switch below); without, one per
 * rank. */
static void run_chain(const uint32_t *per, uint32_t nsw, bool host_reduce) {
  static char addr[3][64]; /* rank_switch points here */
  switchd d[3];
  char chain[200] = "";
  uint32_t world = 0;

  for (uint32_t i = nsw; i-- > 0;) {
    const char *args[] = {"--mem", "4M", i + 1 < nsw ? "--parent" : NULL,
                          i + 1 < nsw ? addr[i + 1] : NULL, NULL};
    assert_int_equal(switchd_start_at(&d[i], loopback, args), 0);
    switch_name(addr[i], sizeof(addr[i]), d[i].port);
  }
  for (uint32_t i = 0; i < nsw; i++) {
    size_t n = strlen(chain);
    snprintf(chain + n, sizeof(chain) - n, "%s%s", i ? "," : "", addr[i]);
    for (uint32_t m = 0; m < per[i]; m++) {
      rank_switch[world++] = addr[i];
    }
  }
  setenv("DLCP_INA_CHAIN", chain, 1);
  setenv("DLCP_INA_HOST_REDUCE", host_reduce ? "1" : "0", 1);
  plain_only = true;
  fork_ranks(world, rank_main, 16);
  plain_only = false;
  unsetenv("DLCP_INA_HOST_REDUCE");

  setenv("DLCP_SWITCH", addr[0], 1);
  dlcp_comm *comm = one_rank_comm(20000);
  dlcp_coll_info info;
  assert_int_equal(ina_once(comm, DLCP_ALGO_RA_INA, &info), DLCP_ERR_CONFIG);
  if (strstr(info.error, "RA-INA does not run over a chain") == NULL) {
    fail_msg("error: %s", info.error);
  }
  dlcp_comm_destroy(comm);
  unsetenv("DLCP_INA_CHAIN");
  memset(rank_switch, 0, sizeof(rank_switch));
  for (uint32_t i = 0; i < nsw; i++) {
    const char *err = switchd_stop(&d[i]);
    assert_non_null(err);
    assert_int_equal(switchd_stat(err, "foreign"), 0);
    assert_int_equal(switchd_stat(err, "malformed"), 0);
    uint64_t workers = (host_reduce ? 1u : per[i]) + (i > 0);
    assert_true(switchd_stat(err, "claims") > 0);
    assert_int_equal(switchd_stat(err, "contrib"),
                     workers * switchd_stat(err, "claims"));
    if (i + 1 < nsw) {
      assert_true(switchd_stat(err, "forwards") > 0);
      assert_true(switchd_stat(err, "finals") > 0);
    } else {
      assert_int_equal(switchd_stat(err, "forwards"), 0);
    }
  }
}

static void test_cina_chain(void **state) {
  static const uint32_t two[] = {2, 3}, three[] = {1, 2, 1};
  (void)state;
  run_chain(two, 2, true);
  run_chain(three, 3, true);
  run_chain(two, 2, false);
  /* a rank's switch missing from the chain, and an empty entry, are
   * refused naming the variables */
  static const char *const bad[][2] = {
      {"127.0.0.1:9", "127.0.0.1:7,127.0.0.1:8"},
      {"127.0.0.1:9", "127.0.0.1:9,,127.0.0.1:8"}};
  static const char *const want[] = {"is not in DLCP_INA_CHAIN",
                                     "DLCP_INA_CHAIN=127.0.0.1:9,,"};
  for (int i = 0; i < 2; i++) {
    setenv("DLCP_SWITCH", bad[i][0], 1);
    setenv("DLCP_INA_CHAIN", bad[i][1], 1);
    refused_at_create(want[i]);
  }
  unsetenv("DLCP_INA_CHAIN");
  setenv("DLCP_INA_HOST_REDUCE", "yes", 1);
  refused_at_create("DLCP_INA_HOST_REDUCE=yes: expected 0 or 1");
  unsetenv("DLCP_INA_HOST_REDUCE");
  static const char *const windows[] = {"0", "2049", "64k", ""};
  for (int i = 0; i < 4; i++) {
    char msg[64];
    setenv("DLCP_INA_WINDOW", windows[i], 1);
    snprintf(msg, sizeof(msg), "DLCP_INA_WINDOW=%s: expected groups",
             windows[i]);
    refused_at_create(msg);
  }
  unsetenv("DLCP_INA_WINDOW");
}

/* Trees (DLCP_INA_LEAVES, DLCP_INA_TREES): two roots and three leaves,
 * each leaf started with both roots as --parent, |per| ranks on the
 * leaves.  Every plain INA all-reduce is exact.  With ranks on two leaves
 * each group goes up one tree, so the roots' groups add up to a leaf's
 * and each root has some, and a root sums the two leaves with ranks (an
 * empty leaf is no worker); with all ranks on one leaf, that leaf sums
 * them alone and the roots see nothing.  |panama|: with PANAMA's window
 * (one per tree) and without the host's reduce.  RA-INA is refused. */
static void run_trees(const uint32_t per[3], bool panama) {
  static char addr[5][64]; /* roots 0-1, leaves 2-4; rank_switch points
                              here */
  switchd d[5];
  char leaves[200] = "";
  uint32_t world = 0, used = 0;

  for (uint32_t i = 0; i < 5; i++) {
    const char *args[] = {"--mem", "4M", i >= 2 ? "--parent" : NULL,
                          addr[0], "--parent", addr[1], NULL};
    assert_int_equal(switchd_start_at(&d[i], loopback, args), 0);
    switch_name(addr[i], sizeof(addr[i]), d[i].port);
  }
  for (uint32_t i = 2; i < 5; i++) {
    size_t n = strlen(leaves);
    snprintf(leaves + n, sizeof(leaves) - n, "%s%s", i > 2 ? "," : "",
             addr[i]);
    used += per[i - 2] > 0;
    for (uint32_t m = 0; m < per[i - 2]; m++) {
      rank_switch[world++] = addr[i];
    }
  }
  setenv("DLCP_INA_LEAVES", leaves, 1);
  setenv("DLCP_INA_TREES", "2", 1);
  if (panama) {
    setenv("DLCP_INA_CC", "panama", 1);
    setenv("DLCP_INA_MIN_BYTES", "0", 1);
    setenv("DLCP_INA_HOST_REDUCE", "0", 1);
  }
  plain_only = true;
  fork_ranks(world, rank_main, 16);
  plain_only = false;
  unsetenv("DLCP_INA_CC");
  unsetenv("DLCP_INA_MIN_BYTES");
  unsetenv("DLCP_INA_HOST_REDUCE");
  memset(rank_switch, 0, sizeof(rank_switch));

  setenv("DLCP_SWITCH", addr[2], 1);
  dlcp_comm *comm = one_rank_comm(20000);
  dlcp_coll_info info;
  assert_int_equal(ina_once(comm, DLCP_ALGO_RA_INA, &info), DLCP_ERR_CONFIG);
  if (strstr(info.error, "RA-INA does not run over a chain or trees") ==
      NULL) {
    fail_msg("error: %s", info.error);
  }
  dlcp_comm_destroy(comm);
  uint64_t claims[5], leaf_claims = 0;
  for (uint32_t i = 0; i < 5; i++) {
    const char *err = switchd_stop(&d[i]);
    assert_non_null(err);
    assert_int_equal(switchd_stat(err, "foreign"), 0);
    assert_int_equal(switchd_stat(err, "malformed"), 0);
    claims[i] = switchd_stat(err, "claims");
    if ((i < 2 && used == 1) || (i >= 2 && per[i - 2] == 0)) {
      assert_int_equal(switchd_stat(err, "packets"), 0);
      continue;
    }
    uint64_t workers = i < 2 ? used : panama ? per[i - 2] : 1u;
    assert_true(claims[i] > 0);
    assert_int_equal(switchd_stat(err, "contrib"), workers * claims[i]);
    assert_int_equal(switchd_stat(err, "forwards") > 0, i >= 2 && used > 1);
    assert_int_equal(switchd_stat(err, "finals") > 0, i >= 2 && used > 1);
    if (i >= 2) {
      assert_true(leaf_claims == 0 || leaf_claims == claims[i]);
      leaf_claims = claims[i];
    }
  }
  if (used > 1) {
    assert_int_equal(claims[0] + claims[1], leaf_claims);
  }
  unsetenv("DLCP_INA_LEAVES");
  unsetenv("DLCP_INA_TREES");
}

/* A tree whose root is gone (127.0.0.1:9, the discard port): the leaves
 * hold the group complete and answer the ranks' re-sends with WAITING for
 * nobody; each rank times out naming its leaf and the tree's root it
 * waits on, not "no answer". */
static int above_main(uint32_t rank, uint32_t world, uint16_t port,
                      report *rep) {
  dlcp_comm *comm;
  dlcp_coll_info info;
  char err[256];

  if (make_comm(&comm, rank, world, port, MISSING_TIMEOUT_MS, err,
                sizeof(err)) != 0) {
    snprintf(rep->error, sizeof(rep->error), "create: %.200s", err);
    return 1;
  }
  int rv = ina_once(comm, DLCP_ALGO_INA, &info); /* one group: group 0 */
  if (rv != DLCP_ERR_TIMEOUT ||
      strstr(info.error, "its group 0 has every contribution and waits on "
                         "the switch above it, the root of tree 0 (its "
                         "--parent number 1)") == NULL ||
      strstr(info.error, getenv("DLCP_SWITCH")) == NULL) {
    snprintf(rep->error, sizeof(rep->error), "%d %.200s", rv, info.error);
    return 1;
  }
  rep->checks++;
  dlcp_comm_destroy(comm);
  return 0;
}

static void run_dead_root(void) {
  static char addr[3][64]; /* the live root, two leaves */
  switchd d[3];
  for (uint32_t i = 0; i < 3; i++) {
    const char *args[] = {"--mem", "4M", i > 0 ? "--parent" : NULL,
                          "127.0.0.1:9", "--parent", addr[0], NULL};
    assert_int_equal(switchd_start(&d[i], args), 0);
    snprintf(addr[i], sizeof(addr[i]), "127.0.0.1:%u", d[i].port);
  }
  char leaves[140];
  snprintf(leaves, sizeof(leaves), "%s,%s", addr[1], addr[2]);
  rank_switch[0] = addr[1];
  rank_switch[1] = addr[2];
  setenv("DLCP_INA_LEAVES", leaves, 1);
  setenv("DLCP_INA_TREES", "2", 1);
  fork_ranks(2, above_main, 1);
  memset(rank_switch, 0, sizeof(rank_switch));
  unsetenv("DLCP_INA_LEAVES");
  unsetenv("DLCP_INA_TREES");
  for (uint32_t i = 0; i < 3; i++) {
    const char *err = switchd_stop(&d[i]);
    assert_non_null(err);
    if (i > 0) {
      assert_true(switchd_stat(err, "forwards") > 0);
      assert_int_equal(switchd_stat(err, "finals"), 0);
    }
  }
}

/* A dlcp-switch that exited at start (switchd_start gave -1): its stderr
 * says |why|; it is reaped. */
static void refused_with(switchd *d, const char *why) {
  char text[1024];
  ssize_t n = read(d->err_fd, text, sizeof(text) - 1);
  text[n > 0 ? n : 0] = '\0';
  close(d->err_fd);
  (void)waitpid(d->pid, NULL, 0);
  if (strstr(text, why) == NULL) {
    fail_msg("expected '%s' from dlcp-switch, got: %s", why, text);
  }
}

/* A reuseport socket of this process's on 127.0.0.1:|port|, or -1. */
static int reuseport_socket(uint16_t port) {
  int one = 1, fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in sa = {.sin_family = AF_INET,
                           .sin_port = htons(port),
                           .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  if (fd >= 0 &&
      (setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) != 0 ||
       bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0)) {
    close(fd);
    fd = -1;
  }
  return fd;
}

/* Writes |text| to the file |path|; returns 0 or -1. */
static int write_file(const char *path, const char *text) {
  int fd = open(path, O_WRONLY | O_CLOEXEC);
  ssize_t n = fd >= 0 ? write(fd, text, strlen(text)) : -1;
  if (fd >= 0) {
    close(fd);
  }
  return n == (ssize_t)strlen(text) ? 0 : -1;
}

/* In a network namespace of its own whose ephemeral ports are only 40000
 * (a child process, so the test's other sockets stay where they are):
 * with another process's reuseport socket on 40000, the only port the
 * kernel gives, a 2-thread switch started with --port 0 refuses to share
 * it; without, it listens there.  Returns 0, 77 if namespaces are not
 * available here, or 1 with the reason on stderr. */
static int lone_port_child(void) {
  switchd d;
  struct ifreq ifr;
  int fd;

  if (unshare(CLONE_NEWNET) != 0) {
    return 77;
  }
  memset(&ifr, 0, sizeof(ifr));
  snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
  fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  ifr.ifr_flags = IFF_UP | IFF_LOOPBACK | IFF_RUNNING;
  if (fd < 0 || ioctl(fd, SIOCSIFFLAGS, &ifr) != 0 ||
      write_file("/proc/sys/net/ipv4/ip_local_port_range", "40000 40000") !=
          0) {
    perror("lone_port_child: lo up, ip_local_port_range");
    return 1;
  }
  close(fd);
  int ready[2];
  char byte = 0;
  if (pipe(ready) != 0) {
    return 1;
  }
  pid_t other = fork();
  if (other == 0) { /* the other process, holding the port */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    byte = reuseport_socket(40000) >= 0 ? 'y' : 'n';
    (void)!write(ready[1], &byte, 1);
    pause();
    _exit(0);
  }
  if (other < 0 || read(ready[0], &byte, 1) != 1 || byte != 'y') {
    fprintf(stderr, "lone_port_child: no socket on port 40000\n");
    return 1;
  }
  const char *two[] = {"--threads", "2", NULL};
  int rv = switchd_start(&d, two) == -1 ? 0 : 1;
  if (rv == 0) {
    char text[1024];
    ssize_t n = read(d.err_fd, text, sizeof(text) - 1);
    text[n > 0 ? n : 0] = '\0';
    close(d.err_fd);
    (void)waitpid(d.pid, NULL, 0);
    if (strstr(text, "was bound by another process's socket too") == NULL) {
      fprintf(stderr, "lone_port_child: got %s\n", text);
      rv = 1;
    }
  } else {
    fprintf(stderr, "lone_port_child: the switch shared port %u\n", d.port);
    (void)switchd_stop(&d);
  }
  kill(other, SIGKILL);
  (void)waitpid(other, NULL, 0);
  if (rv == 0 && (switchd_start(&d, two) != 0 || d.port != 40000 ||
                  switchd_stop(&d) == NULL)) {
    fprintf(stderr, "lone_port_child: no switch on the free port\n");
    rv = 1;
  }
  return rv;
}

/* A switch has its port to itself (SO_REUSEPORT, which its threads share
 * the port with, would let another process's socket share it too, and
 * the kernel split the datagrams between the two): a second switch on a
 * 2-thread switch's port is refused, with 2 threads or 1, and --port 0
 * never gives a port another process's socket holds. */
static void test_port_of_its_own(void **state) {
  (void)state;
  switchd a, b;
  char port[8];
  const char *two[] = {"--threads", "2", NULL};
  assert_int_equal(switchd_start(&a, two), 0);
  snprintf(port, sizeof(port), "%u", a.port);
  const char *again2[] = {"--threads", "2", "--port", port, NULL};
  assert_int_equal(switchd_start(&b, again2), -1);
  refused_with(&b, "is bound by another process's socket too");
  const char *again1[] = {"--port", port, NULL};
  assert_int_equal(switchd_start(&b, again1), -1);
  refused_with(&b, "Address already in use");
  assert_non_null(switchd_stop(&a));

  pid_t child = fork();
  if (child == 0) {
    _exit(lone_port_child());
  }
  int status = 0;
  assert_int_equal(waitpid(child, &status, 0), child);
  assert_true(WIFEXITED(status));
  if (WEXITSTATUS(status) == 77) {
    skip(); /* no network namespace here (not root) */
  }
  assert_int_equal(WEXITSTATUS(status), 0);
}

static void test_ina_trees(void **state) {
  (void)state;
  static const uint32_t two_leaves[] = {2, 0, 3}, one_leaf[] = {0, 3, 0};
  run_trees(two_leaves, false);
  run_trees(two_leaves, true);
  run_trees(one_leaf, false);
  run_dead_root();
  /* dlcp-switch refuses itself as a parent, and a ninth tree */
  {
    switchd d;
    uint16_t port = 0;
    dlcp_errbuf eb;
    char self[32], portstr[8];
    assert_int_equal(dlcp_net_free_port("127.0.0.1", &port, &eb), 0);
    snprintf(self, sizeof(self), "127.0.0.1:%u", port);
    snprintf(portstr, sizeof(portstr), "%u", port);
    const char *loop[] = {"--port", portstr, "--parent", self, NULL};
    assert_int_equal(switchd_start(&d, loop), -1);
    refused_with(&d, "is this switch");
    const char *nine[] = {"--parent", "127.0.0.1:9", "--parent", "127.0.0.1:9",
                          "--parent", "127.0.0.1:9", "--parent", "127.0.0.1:9",
                          "--parent", "127.0.0.1:9", "--parent", "127.0.0.1:9",
                          "--parent", "127.0.0.1:9", "--parent", "127.0.0.1:9",
                          "--parent", "127.0.0.1:9", NULL};
    assert_int_equal(switchd_start(&d, nine), -1);
    refused_with(&d, "--parent: at most 8 (one per tree)");
  }
  static const char *const env[][3] = {
      /* DLCP_INA_LEAVES, DLCP_INA_TREES, DLCP_INA_CHAIN */
      {"127.0.0.1:9", "9", NULL},
      {"127.0.0.1:9", "two", NULL},
      {NULL, "2", NULL},
      {"127.0.0.1:9", NULL, "127.0.0.1:9"},
      {"127.0.0.1:7,127.0.0.1:8", NULL, NULL}};
  static const char *const want[] = {
      "DLCP_INA_TREES=9: expected the trees", "DLCP_INA_TREES=two",
      "(DLCP_INA_LEAVES is unset)", "are both set",
      "is not in DLCP_INA_LEAVES"};
  setenv("DLCP_SWITCH", "127.0.0.1:9", 1);
  for (int i = 0; i < 5; i++) {
    static const char *const vars[] = {"DLCP_INA_LEAVES", "DLCP_INA_TREES",
                                       "DLCP_INA_CHAIN"};
    for (int v = 0; v < 3; v++) {
      if (env[i][v] != NULL) {
        setenv(vars[v], env[i][v], 1);
      } else {
        unsetenv(vars[v]);
      }
    }
    refused_at_create(want[i]);
  }
  unsetenv("DLCP_INA_LEAVES");
  unsetenv("DLCP_INA_TREES");
  unsetenv("DLCP_INA_CHAIN");
}

static void test_overlap(void **state) {
  (void)state;
  run_ranks(3, "4M", overlap_main, 9);
  /* 64 aggregators: plain INA's 32-block groups wait their turn (BUSY)
   * while RA-INA's get ring verdicts (run_ranks checks the switch gave
   * some), so RA-INA's ring part, a collective whose id was reserved at
   * the call, starts after the ring all-reduce started behind it */
  run_ranks(3, "16K", overlap_main, 9);
}

static void test_coalesced_runs(void **state) {
  (void)state;
  run_ranks(2, "4M", coalesced_main, 2);
}

static void test_rx_drops_counted(void **state) {
  (void)state;
  run_ranks(2, "4M", rx_drops_main, 2);
}

static void test_worlds(void **state) {
  (void)state;
  static const uint32_t worlds[] = {2, 3, 5, 8};

  for (size_t w = 0; w < sizeof(worlds) / sizeof(worlds[0]); w++) {
    run_world(worlds[w], "4M");
  }
}

/* 16 KiB: 64 aggregators, fewer than a window of RA-INA groups needs, so
 * RA-INA sends groups through the ring and plain INA waits. */
static void test_small_pool(void **state) {
  (void)state;
  run_world(4, "16K");
}

/* No switch listening: the operation fails naming it, never hangs; the
 * simulator and the plan builders do not take INA. */
static int ina_once(dlcp_comm *comm, dlcp_algo algo, dlcp_coll_info *info) {
  float x[4] = {1, 2, 3, 4};
  dlcp_coll_opts o;
  dlcp_request *req;
  int rv;

  dlcp_coll_opts_default(&o);
  o.algo = algo;
  memset(info, 0, sizeof(*info));
  rv = dlcp_allreduce(comm, x, x, 4, DLCP_FLOAT32, DLCP_SUM, &o, &req);
  if (rv == 0) {
    rv = dlcp_wait(req, -1, info);
    dlcp_request_free(req);
  }
  return rv;
}

/* run_world, run_chain and run_trees over IPv6: switches bound to ::1
 * (their senders interned, a chain's and the trees' parents given as
 * [::1]:PORT), the ranks' rendezvous and data path on ::1, DLCP_SWITCH
 * and the switch lists in brackets; an IPv6 DLCP_SWITCH without them is
 * refused. */
static void test_ipv6(void **state) {
  static const uint32_t two[] = {2, 3}, two_leaves[] = {2, 0, 3};
  dlcp_coll_info info;

  (void)state;
  loopback = "::1";
  run_world(3, "4M");
  run_chain(two, 2, true);
  run_trees(two_leaves, false);
  /* an IPv6 address without brackets, ports that are none */
  static const char *const bad[] = {"::1:7070",    "[::1]",
                                    "[::1]:0",     "127.0.0.1:x",
                                    "[::1]:70000", "127.0.0.1:7070x"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    char want[96];
    unsetenv("DLCP_SWITCH"); /* set after the creation, which checks it */
    dlcp_comm *comm = one_rank_comm(20000);
    setenv("DLCP_SWITCH", bad[i], 1);
    assert_int_equal(ina_once(comm, DLCP_ALGO_INA, &info), DLCP_ERR_CONFIG);
    snprintf(want, sizeof(want),
             "DLCP_SWITCH=%s: expected host:port or [IPv6]:port", bad[i]);
    if (strstr(info.error, want) == NULL) {
      fail_msg("%s: error: %s", bad[i], info.error);
    }
    dlcp_comm_destroy(comm);
  }
  /* set before the creation, it refuses them */
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    char want[96];
    setenv("DLCP_SWITCH", bad[i], 1);
    snprintf(want, sizeof(want),
             "DLCP_SWITCH=%s: expected host:port or [IPv6]:port", bad[i]);
    refused_at_create(want);
  }
  unsetenv("DLCP_SWITCH");
  loopback = "127.0.0.1";
}

static void test_no_switch(void **state) {
  dlcp_comm *comm;
  dlcp_coll_info info;

  (void)state;
  comm = one_rank_comm(300);
  setenv("DLCP_SWITCH", "not-a-switch", 1);
  assert_int_equal(ina_once(comm, DLCP_ALGO_INA, &info), DLCP_ERR_CONFIG);
  assert_non_null(strstr(info.error, "DLCP_SWITCH=not-a-switch"));
  setenv("DLCP_SWITCH", "127.0.0.1:9", 1); /* discard: nobody answers */
  /* The flight recorder is dumped to stderr at the timeout, while the
   * operation still waits: caught in a file. */
  char path[] = "/tmp/dlcp-ina-flight-XXXXXX";
  int fd = mkstemp(path), saved = dup(2);
  assert_true(fd >= 0 && saved >= 0);
  assert_int_equal(dup2(fd, 2), 2);
  int rv = ina_once(comm, DLCP_ALGO_RA_INA, &info);
  assert_int_equal(dup2(saved, 2), 2);
  close(saved);
  assert_int_equal(rv, DLCP_ERR_TIMEOUT);
  assert_non_null(strstr(info.error, "127.0.0.1:9"));
  assert_string_equal(info.algo_name, "ra_ina");
  {
    char text[4096];
    ssize_t n = pread(fd, text, sizeof(text) - 1, 0);
    assert_true(n > 0);
    text[n] = '\0';
    close(fd);
    unlink(path);
    /* the operation, and whom it waited on: the switch */
    if (strstr(text, "waiting: rank 0 on switch since") == NULL ||
        strstr(text, "allreduce ra_ina 16 B: running") == NULL ||
        strstr(text, "waiting on the aggregation switch for") == NULL) {
      fail_msg("flight record:\n%s", text);
    }
  }
  /* a request freed while the switch has not answered: the operation is
   * withdrawn (nothing left running, the next one works alike) */
  {
    float x[4] = {1, 2, 3, 4};
    dlcp_coll_opts o;
    dlcp_request *req;

    dlcp_coll_opts_default(&o);
    o.algo = DLCP_ALGO_INA;
    assert_int_equal(
        dlcp_allreduce(comm, x, x, 4, DLCP_FLOAT32, DLCP_SUM, &o, &req), 0);
    dlcp_request_free(req);
  }
  assert_int_equal(ina_once(comm, DLCP_ALGO_INA, &info), DLCP_ERR_TIMEOUT);
  dlcp_comm_destroy(comm);
}

/* Rank 2 of three takes part in a first INA all-reduce (which also
 * agrees on the job's identity) but never starts the second: ranks 0 and
 * 1 time out naming rank 2 and its address, which the switch's WAITING
 * answers to their re-sends told them, not the switch; their flight
 * records say they wait on rank 2. */
static int missing_main(uint32_t rank, uint32_t world, uint16_t port,
                        report *rep) {
  dlcp_comm *comm;
  dlcp_coll_info info;
  dlcp_coll_opts o;
  dlcp_request *req;
  int32_t x[256];
  char err[256];
  char path[64];

  snprintf(path, sizeof(path), "/tmp/dlcp-ina-missing-%d-%u", (int)getpid(),
           rank);
  int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
  if (fd < 0 || dup2(fd, 2) != 2) {
    snprintf(rep->error, sizeof(rep->error), "stderr to %s", path);
    return 1;
  }
  unlink(path);
  if (make_comm(&comm, rank, world, port, MISSING_TIMEOUT_MS, err,
                sizeof(err)) != 0) {
    snprintf(rep->error, sizeof(rep->error), "create: %.200s", err);
    return 1;
  }
  dlcp_coll_opts_default(&o);
  o.algo = DLCP_ALGO_INA;
  for (int round = 0; round < 2; round++) {
    for (int i = 0; i < 256; i++) {
      x[i] = (int32_t)(rank + 1u);
    }
    if (round == 1 && rank == 2) {
      /* alive, but this rank never contributes */
      usleep((MISSING_TIMEOUT_MS + 1000) * 1000);
      break;
    }
    int rv = dlcp_allreduce(comm, x, x, 256, DLCP_INT32, DLCP_SUM, &o, &req);
    if (rv == 0) {
      rv = dlcp_wait(req, -1, &info);
      dlcp_request_free(req);
    }
    if (round == 0 && (rv != 0 || x[0] != 6)) {
      snprintf(rep->error, sizeof(rep->error), "first: %d %.200s", rv,
               info.error);
      return 1;
    }
    if (round == 1) {
      char want[64];
      char text[8192];
      snprintf(want, sizeof(want), "waiting: rank %u on 2 since", rank);
      ssize_t n = pread(fd, text, sizeof(text) - 1, 0);
      text[n > 0 ? n : 0] = '\0';
      if (rv != DLCP_ERR_TIMEOUT ||
          strstr(info.error, "still lacks the contribution of rank 2 (") ==
              NULL ||
          strstr(text, want) == NULL) {
        snprintf(rep->error, sizeof(rep->error), "second: %d %.100s; %.80s",
                 rv, info.error, text);
        return 1;
      }
    }
  }
  rep->checks++;
  dlcp_comm_destroy(comm);
  close(fd);
  return 0;
}

/* CINA with the host's reduce (one switch as the chain, the 3 ranks one
 * host): rank 0 stays alive but never starts the second all-reduce, so
 * the host's reduce waits on it; ranks 1 and 2 (the master) fail within
 * the timeout + 1 s naming rank 0, not the switch. */
static int missing_host_main(uint32_t rank, uint32_t world, uint16_t port,
                             report *rep) {
  dlcp_comm *comm;
  dlcp_coll_info info;
  dlcp_coll_opts o;
  dlcp_request *req;
  float x[4096];
  char err[256];

  setenv("DLCP_INA_CHAIN", getenv("DLCP_SWITCH"), 1);
  if (make_comm(&comm, rank, world, port, MISSING_TIMEOUT_MS, err,
                sizeof(err)) != 0) {
    snprintf(rep->error, sizeof(rep->error), "create: %.200s", err);
    return 1;
  }
  dlcp_coll_opts_default(&o);
  o.algo = DLCP_ALGO_INA;
  for (int round = 0; round < 2; round++) {
    for (int i = 0; i < 4096; i++) {
      x[i] = (float)(rank + 1u);
    }
    if (round == 1 && rank == 0) {
      usleep((MISSING_TIMEOUT_MS + 1500) * 1000);
      break;
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int rv = dlcp_allreduce(comm, x, x, 4096, DLCP_FLOAT32, DLCP_SUM, &o,
                            &req);
    if (rv == 0) {
      rv = dlcp_wait(req, -1, &info);
      dlcp_request_free(req);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (double)(t1.tv_sec - t0.tv_sec) +
               (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    if (round == 0 && (rv != 0 || x[0] != 6.0f || x[4095] != 6.0f)) {
      snprintf(rep->error, sizeof(rep->error), "first: %d %.200s", rv,
               info.error);
      return 1;
    }
    if (round == 1 && (rv == 0 || strstr(info.error, "rank 0 (") == NULL ||
                       s > MISSING_TIMEOUT_MS / 1000.0 + 1.0)) {
      snprintf(rep->error, sizeof(rep->error),
               "second: %d after %.2f s: %.200s", rv, s, info.error);
      return 1;
    }
  }
  rep->checks++;
  dlcp_comm_destroy(comm);
  return 0;
}

static void test_missing_rank_named(void **state) {
  (void)state;
  run_ranks(3, "4M", missing_main, 1);
  run_ranks(3, "4M", missing_host_main, 1);
}

/* PANAMA's window and RA-INA's header-only claims in the runtime
 * (DLCP_INA_CC=panama, DLCP_INA_CLAIM=always or auto): every dtype, op and size
 * exact, on a roomy pool and on one too small for every RA-INA group; a value
 * the runtime does not know is refused naming the variable (by the
 * communicator's creation, and by an all-reduce if set after it); below
 * DLCP_INA_MIN_BYTES (PANAMA's 40 MB by default) an INA all-reduce runs as
 * ring. */
static void test_panama_and_claims(void **state) {
  (void)state;
  setenv("DLCP_INA_CC", "panama", 1);
  setenv("DLCP_INA_CLAIM", "always", 1);
  /* these all-reduces are far below PANAMA's 40 MB for aggregation */
  setenv("DLCP_INA_MIN_BYTES", "0", 1);
  run_world(4, "4M");
  run_world(3, "16K");
  setenv("DLCP_INA_CLAIM", "auto", 1);
  run_world(3, "16K");
  unsetenv("DLCP_INA_CLAIM");
  unsetenv("DLCP_INA_MIN_BYTES");
  setenv("DLCP_INA_CC", "dctcp", 1);
  const char *args[] = {"--mem", "4M", NULL};
  switchd d;
  char sw[64];
  dlcp_coll_info info;
  assert_int_equal(switchd_start(&d, args), 0);
  snprintf(sw, sizeof(sw), "127.0.0.1:%u", d.port);
  setenv("DLCP_SWITCH", sw, 1);
  refused_at_create("DLCP_INA_CC=dctcp: expected none or panama");
  /* PANAMA aggregates only reduce flows above 40 MB by default: a small
   * all-reduce runs as ring and the switch never hears of it */
  setenv("DLCP_INA_CC", "panama", 1);
  dlcp_comm *comm = one_rank_comm(20000);
  assert_int_equal(ina_once(comm, DLCP_ALGO_INA, &info), 0);
  assert_int_equal(info.algo, DLCP_ALGO_RING);
  setenv("DLCP_INA_MIN_BYTES", "16", 1);
  assert_int_equal(ina_once(comm, DLCP_ALGO_INA, &info), 0);
  assert_int_equal(info.algo, DLCP_ALGO_INA); /* 16 bytes: not below 16 */
  dlcp_comm_destroy(comm);
  setenv("DLCP_INA_MIN_BYTES", "40MB", 1);
  refused_at_create("DLCP_INA_MIN_BYTES=40MB: expected a number");
  /* Set after the creation: the INA all-reduce that reads it refuses it
   * (the INA state reads its options once, at its first operation). */
  unsetenv("DLCP_INA_MIN_BYTES");
  comm = one_rank_comm(20000);
  setenv("DLCP_INA_MIN_BYTES", "40MB", 1);
  assert_int_equal(ina_once(comm, DLCP_ALGO_INA, &info), DLCP_ERR_CONFIG);
  if (strstr(info.error, "DLCP_INA_MIN_BYTES=40MB: expected a number") ==
      NULL) {
    fail_msg("error: %s", info.error);
  }
  dlcp_comm_destroy(comm);
  const char *err = switchd_stop(&d);
  assert_non_null(err);
  assert_int_equal(switchd_stat(err, "contrib"), 1); /* the 16-byte one */
  unsetenv("DLCP_INA_MIN_BYTES");
  unsetenv("DLCP_INA_CC");
}

/* A pool smaller than one group of plain INA (4 KiB: 16 aggregators; a
 * group on loopback is 32 blocks): the switch refuses the group at once
 * and the operation fails naming the switch and both sizes, not after the
 * 20 s timeout with "no answer".  RA-INA's smaller groups still fit. */
static void test_pool_smaller_than_group(void **state) {
  const char *args[] = {"--mem", "4K", NULL};
  dlcp_comm *comm;
  dlcp_coll_info info;
  char sw[64], want[96];
  switchd d;
  float x[4] = {1, 2, 3, 4};
  dlcp_coll_opts o;
  dlcp_request *req;

  (void)state;
  assert_int_equal(switchd_start(&d, args), 0);
  snprintf(sw, sizeof(sw), "127.0.0.1:%u", d.port);
  setenv("DLCP_SWITCH", sw, 1);
  comm = one_rank_comm(20000);
  assert_int_equal(ina_once(comm, DLCP_ALGO_INA, &info), DLCP_ERR_CONFIG);
  snprintf(want, sizeof(want), "switch %s has 16 aggregators", sw);
  if (strstr(info.error, want) == NULL ||
      strstr(info.error, "needs 32 side by side") == NULL) {
    fail_msg("error: %s", info.error);
  }
  dlcp_coll_opts_default(&o);
  o.algo = DLCP_ALGO_RA_INA;
  assert_int_equal(
      dlcp_allreduce(comm, x, x, 4, DLCP_FLOAT32, DLCP_SUM, &o, &req), 0);
  assert_int_equal(dlcp_wait(req, -1, &info), 0);
  dlcp_request_free(req);
  assert_true(x[0] == 1 && x[1] == 2 && x[2] == 3 && x[3] == 4);
  dlcp_comm_stats st;
  dlcp_comm_get_stats(comm, &st);
  assert_int_equal(st.ina_ring_groups, 1);
  assert_int_equal(st.ina_groups, 0);
  dlcp_comm_destroy(comm);
  /* one group, refused (twice if the machine delayed the answer past the
   * 2 ms RTO and the group went out again) */
  assert_true(switchd_stat(switchd_stop(&d), "too_big") >= 1);
}

/* Starts dlcp-switch with |args| in |d| and connects two UDP sockets,
 * |fd[0]| and |fd[1]|, to it: the hand-built tests' two workers. */
static void switch_and_senders(switchd *d, const char *const *args,
                               int fd[2]) {
  assert_int_equal(switchd_start(d, args), 0);
  struct sockaddr_in sw = {.sin_family = AF_INET,
                           .sin_port = htons(d->port),
                           .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  for (int r = 0; r < 2; r++) {
    fd[r] = socket(AF_INET, SOCK_DGRAM, 0);
    assert_true(fd[r] >= 0);
    assert_int_equal(connect(fd[r], (struct sockaddr *)&sw, sizeof(sw)), 0);
  }
}

/* Sends |n| CONTRIBs of job 77 (world 2) from |fd|, rank |rank|, groups
 * order[0..n) of one 64-element block each holding rank + 1, as one
 * UDP_SEGMENT run.  Returns whether the kernel took it as one. */
#define RUN_GROUPS 8u
static bool send_run(int fd, uint8_t rank, const uint32_t *order) {
  static uint8_t bufs[2][RUN_GROUPS][DLCP_AGG_HDR_LEN + 4 * 64];
  struct iovec iov[RUN_GROUPS];
  union {
    struct cmsghdr align;
    char buf[DLCP_NET_GSO_CTL];
  } ctl;
  struct msghdr m;
  for (uint32_t i = 0; i < RUN_GROUPS; i++) {
    uint8_t *b = bufs[rank][i];
    dlcp_agg_hdr h = {.type = DLCP_AGG_CONTRIB, .job = 77, .token = 0x5eed,
                      .group = order[i], .rank = rank, .world = 2,
                      .nblocks = 1, .elems = 64};
    assert_int_equal(dlcp_agg_hdr_encode(b, DLCP_AGG_HDR_LEN, &h),
                     DLCP_AGG_HDR_LEN);
    for (uint32_t e = 0; e < 64; e++) {
      uint32_t v = rank + 1u;
      memcpy(b + DLCP_AGG_HDR_LEN + 4 * e, &v, 4); /* little-endian host */
    }
    iov[i].iov_base = b;
    iov[i].iov_len = sizeof(bufs[rank][i]);
  }
  dlcp_net_gso_message(&m, NULL, iov, RUN_GROUPS, 0, ctl.buf);
  return sendmsg(fd, &m, 0) >= 0;
}

/* Two senders each send their contributions to groups 0-7 as one run,
 * the first starting with an even group, the second with an odd one, to a
 * switch with two threads (group g's is g mod 2).  On loopback a run
 * reaches the switch whole and goes to the thread of its first datagram:
 * without the hand-off, one thread would hold every group of the first
 * sender and the other every group of the second, and no group would
 * complete.  Every group's sum (1 + 2) comes back to both. */
static void test_runs_across_threads(void **state) {
  (void)state;
  static const uint32_t even_first[RUN_GROUPS] = {0, 1, 2, 3, 4, 5, 6, 7};
  static const uint32_t odd_first[RUN_GROUPS] = {1, 0, 3, 2, 5, 4, 7, 6};
  const char *const args[] = {"--threads", "2", "--mem", "1M", NULL};
  switchd d;
  int fd[2];
  switch_and_senders(&d, args, fd);
  bool runs = send_run(fd[0], 0, even_first) && send_run(fd[1], 1, odd_first);
  if (!runs) { /* a kernel without UDP_SEGMENT: nothing to steer whole */
    print_message("UDP_SEGMENT refused (%s): skipped\n", strerror(errno));
    close(fd[0]);
    close(fd[1]);
    switchd_stop(&d);
    skip();
  }
  for (int r = 0; r < 2; r++) {
    uint32_t got = 0; /* bit g: group g's result */
    uint8_t buf[DLCP_AGG_DGRAM_MAX];
    while (got != (1u << RUN_GROUPS) - 1) {
      struct pollfd pfd = {fd[r], POLLIN, 0};
      /* The switch re-sends a result only after its resend timer; the
       * first ones come at once. */
      if (poll(&pfd, 1, 2000) != 1) {
        fail_msg("sender %d: results for groups 0x%x only", r, got);
      }
      ssize_t len = recv(fd[r], buf, sizeof(buf), 0);
      dlcp_agg_hdr h;
      const uint8_t *payload;
      assert_true(len > 0);
      assert_int_equal(dlcp_agg_decode(&h, &payload, buf, (size_t)len), 0);
      assert_int_equal(h.type, DLCP_AGG_RESULT);
      assert_true(h.group < RUN_GROUPS);
      for (uint32_t e = 0; e < 64; e++) {
        int32_t v;
        memcpy(&v, payload + 4 * e, 4);
        assert_int_equal(v, 3);
      }
      got |= 1u << h.group;
    }
    close(fd[r]);
  }
  const char *err = switchd_stop(&d);
  assert_non_null(err);
  /* Each run's datagrams of the other thread's groups: 4 a run. */
  assert_int_equal(switchd_stat(err, "handed"), 2 * RUN_GROUPS / 2);
  assert_int_equal(switchd_stat(err, "handoff_drops"), 0);
  assert_int_equal(switchd_stat(err, "contrib"), 2 * RUN_GROUPS);
}

/* Rank |rank| of job |job| (world 2) contributes group |group| of
 * |nblocks| 64-element blocks, each element rank + 1; |flags|
 * DLCP_AGG_FLAG_RING for RA-INA, 0 for plain INA. */
static void send_contrib(int fd, uint32_t job, uint8_t rank, uint32_t group,
                         uint8_t nblocks, uint8_t flags) {
  static uint8_t b[DLCP_AGG_HDR_LEN + 4 * 64 * 255];
  dlcp_agg_hdr h = {.type = DLCP_AGG_CONTRIB, .job = job, .token = 0x5eed,
                    .group = group, .rank = rank, .world = 2,
                    .nblocks = nblocks, .flags = flags, .elems = 64};
  assert_int_equal(dlcp_agg_hdr_encode(b, DLCP_AGG_HDR_LEN, &h),
                   DLCP_AGG_HDR_LEN);
  size_t n = 64u * nblocks;
  for (size_t e = 0; e < n; e++) {
    uint32_t v = rank + 1u;
    memcpy(b + DLCP_AGG_HDR_LEN + 4 * e, &v, 4); /* little-endian host */
  }
  assert_int_equal(send(fd, b, DLCP_AGG_HDR_LEN + 4 * n, 0),
                   (ssize_t)(DLCP_AGG_HDR_LEN + 4 * n));
}

/* Waits longer than the switch's re-send interval (--resend-us 1000), so
 * that the groups contributed before are idle and may be evicted. */
static void idle_past_resend(void) {
  struct timespec idle = {.tv_sec = 0, .tv_nsec = 50 * 1000 * 1000};
  nanosleep(&idle, NULL);
}

/* Reads |fd| until the result of job |job|'s group |group| (|nblocks|
 * blocks) comes, and checks its sum, 1 + 2 in every element; any NACK
 * on the way (no room for a group) fails. */
static void await_sum(int fd, uint32_t job, uint32_t group,
                      uint8_t nblocks) {
  uint8_t buf[DLCP_AGG_DGRAM_MAX];
  dlcp_agg_hdr h;
  const uint8_t *payload;
  do {
    struct pollfd pfd = {fd, POLLIN, 0};
    if (poll(&pfd, 1, 2000) != 1) {
      fail_msg("job %u: no result for group %u", job, group);
    }
    ssize_t len = recv(fd, buf, sizeof(buf), 0);
    assert_true(len > 0);
    assert_int_equal(dlcp_agg_decode(&h, &payload, buf, (size_t)len), 0);
    if (h.type != DLCP_AGG_RESULT) {
      fail_msg("job %u group %u: type %u aux %u", h.job, h.group, h.type,
               h.aux);
    }
  } while (h.job != job || h.group != group);
  for (uint32_t e = 0; e < 64u * nblocks; e++) {
    int32_t v;
    memcpy(&v, payload + 4 * e, 4);
    assert_int_equal(v, 3);
  }
}

/* Each thread of dlcp-switch counts its job's lowest group among the
 * groups its steering brings it (group g to thread g mod 2): thread 1,
 * whose 32 aggregators two idle RA-INA groups hold (5 and 7, rank 1's
 * contributions never sent), evicts one for plain INA's group 1, its
 * lowest.  Counting from every group, its lowest would be group 0, which
 * it never sees, and group 1 would wait (NACK BUSY) until their lease ran
 * out, 10 s later. */
static void test_threads_evict_for_their_lowest(void **state) {
  (void)state;
  const char *const args[] = {"--threads", "2", "--mem", "16K",
                              "--resend-us", "1000", NULL};
  switchd d;
  int fd[2];
  switch_and_senders(&d, args, fd);
  send_contrib(fd[0], 78, 0, 5, 16, DLCP_AGG_FLAG_RING); /* thread 1's */
  send_contrib(fd[0], 78, 0, 7, 16, DLCP_AGG_FLAG_RING);
  idle_past_resend();
  send_contrib(fd[1], 78, 1, 1, 16, 0);
  send_contrib(fd[0], 78, 0, 1, 16, 0);
  for (int r = 0; r < 2; r++) {
    await_sum(fd[r], 78, 1, 16);
    close(fd[r]);
  }
  const char *err = switchd_stop(&d);
  assert_non_null(err);
  assert_int_equal(switchd_stat(err, "evicted"), 1);
}

/* Between processes, a job's lowest group evicts another job's idle
 * group, never that job's lowest: in a pool of 32 aggregators job 78
 * holds its groups 0 (its lowest: no worker has moved its mark) and 1,
 * 16 each, rank 1's contributions not sent yet; job 79's group 0, its
 * lowest, takes group 1's room, and job 78's group 0 still completes when
 * its rank 1 contributes. */
static void test_lowest_evicts_another_jobs_idle_group(void **state) {
  (void)state;
  const char *const args[] = {"--mem", "8K", "--resend-us", "1000", NULL};
  switchd d;
  int fd[2];
  switch_and_senders(&d, args, fd);
  send_contrib(fd[0], 78, 0, 0, 16, DLCP_AGG_FLAG_RING);
  send_contrib(fd[0], 78, 0, 1, 16, DLCP_AGG_FLAG_RING);
  idle_past_resend();
  send_contrib(fd[1], 79, 1, 0, 16, 0);
  send_contrib(fd[0], 79, 0, 0, 16, 0);
  await_sum(fd[0], 79, 0, 16);
  await_sum(fd[1], 79, 0, 16);
  send_contrib(fd[1], 78, 1, 0, 16, DLCP_AGG_FLAG_RING);
  await_sum(fd[0], 78, 0, 16);
  await_sum(fd[1], 78, 0, 16);
  close(fd[0]);
  close(fd[1]);
  const char *err = switchd_stop(&d);
  assert_non_null(err);
  assert_int_equal(switchd_stat(err, "evicted"), 1);
}

/* After every test, pass or fail: a test that fails between its setenv
 * and its unsetenv would otherwise hand its INA settings to every test
 * after it, which then fail for that alone. */
static int unset_ina_env(void **state) {
  (void)state;
  static const char *const vars[] = {
      "DLCP_INA_LEAVES",      "DLCP_INA_TREES", "DLCP_INA_CHAIN",
      "DLCP_INA_HOST_REDUCE", "DLCP_INA_CC",    "DLCP_INA_MIN_BYTES",
      "DLCP_INA_WINDOW",      "DLCP_INA_CLAIM"};
  for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
    unsetenv(vars[i]);
  }
  loopback = "127.0.0.1"; /* after a failed IPv6 test */
  return 0;
}

#define TEST(f) cmocka_unit_test_teardown(f, unset_ina_env)

int main(void) {
  const struct CMUnitTest tests[] = {
      TEST(test_runs_across_threads),
      TEST(test_threads_evict_for_their_lowest),
      TEST(test_lowest_evicts_another_jobs_idle_group),
      TEST(test_no_switch),
      TEST(test_pool_smaller_than_group),
      TEST(test_missing_rank_named),
      TEST(test_panama_and_claims),
      TEST(test_cina_chain),
      TEST(test_port_of_its_own),
      TEST(test_ina_trees),
      TEST(test_worlds),
      TEST(test_coalesced_runs),
      TEST(test_rx_drops_counted),
      TEST(test_small_pool),
      TEST(test_overlap),
      TEST(test_ipv6),
  };

  return cmocka_run_group_tests(tests, NULL, NULL);
}
