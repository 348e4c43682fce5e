/*
 * agg_switch_test.c: the dlcp-switch daemon end to end on loopback.  The
 * test starts the built daemon (tests/support/switchd), then runs each case as
 * |world| forked processes, each a rank driving the host core (src/coll/ina)
 * over its own UDP socket to the switch.  Every rank generates every rank's
 * input from the case's seed, so it knows the agreed exponents and the exact
 * reference without talking to the others; it checks its result bit for bit
 * (INT32) or within the documented scaling bound (FLOAT32).  A forged packet of
 * a running job is sent to the switch, which must count it and stay exact.
 * Finally SIGTERM must stop the daemon cleanly with its counters.  A daemon
 * that falls behind its socket counts what the kernel dropped there.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "coll/ina.h"
#include "proto/rng.h"
#include "rt/net.h"
#include "switchd.h"
#include "wire/agg_wire.h"

#define GRO_MAX 65536 /* a datagram, or a UDP_GRO run of them */

static dlcp_tstamp now_ns(void) {
  struct timespec ts;

  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (dlcp_tstamp)ts.tv_sec * 1000000000u + (dlcp_tstamp)ts.tv_nsec;
}

typedef switchd daemon_proc;

static void daemon_start(daemon_proc *d, const char *threads,
                         const char *mem) {
  const char *args[] = {"--threads", threads, "--mem",  mem,
                        "--resend-us", "20000", NULL};

  assert_int_equal(switchd_start(d, args), 0);
}

static const char *daemon_stop(daemon_proc *d) {
  const char *err = switchd_stop(d);

  assert_non_null(err);
  return err;
}

/* ---- one rank ------------------------------------------------------------ */

typedef struct tcase {
  uint32_t job;
  uint32_t world;
  dlcp_dtype dtype;
  dlcp_redop op;
  dlcp_ina_mode mode;
  uint32_t group_blocks;
  uint64_t count;
  uint64_t seed;
  /* the rank sends runs of equal datagrams as one UDP_SEGMENT message and
   * reads with UDP_GRO, as dlcp-switch does (a one-thread switch: on
   * loopback a run reaches one thread whole) */
  bool runs;
} tcase;

static void gen_input(const tcase *c, uint32_t rank, void *x) {
  dlcp_rng rng;

  dlcp_rng_seed(&rng, c->seed * 1000u + rank);
  for (uint64_t i = 0; i < c->count; i++) {
    if (c->dtype == DLCP_INT32) {
      ((int32_t *)x)[i] = (int32_t)(uint32_t)dlcp_rng_next(&rng);
    } else {
      ((float *)x)[i] = (float)ldexp(dlcp_rng_unit(&rng) * 2 - 1,
                                     (int)dlcp_rng_below(&rng, 16) - 8);
    }
  }
}

/* Runs rank |rank| of case |c| against the switch on |port|; returns the
 * process exit status (0 = exact). */
/* The datagrams a rank's core produced in one poll, to send as runs. */
typedef struct pending {
  uint8_t *buf; /* n slots of DLCP_AGG_DGRAM_MAX */
  struct iovec iov[DLCP_NET_GSO_MAX];
  uint32_t n;
} pending;

/* Sends |q|'s datagrams in order, each run of one length (the last may be
 * shorter) as one UDP_SEGMENT message. */
static void send_runs(int fd, pending *q) {
  for (uint32_t i = 0; i < q->n;) {
    union {
      struct cmsghdr align;
      char buf[DLCP_NET_GSO_CTL];
    } ctl;
    struct msghdr m;
    size_t count = dlcp_net_gso_run(&q->iov[i], q->n - i);

    dlcp_net_gso_message(&m, NULL, &q->iov[i], count, 0, ctl.buf);
    (void)sendmsg(fd, &m, 0);
    i += (uint32_t)count;
  }
  q->n = 0;
}

/* Reads what |fd| holds into the core, splitting UDP_GRO runs. */
static void receive_all(int fd, dlcp_ina *h, uint8_t *buf, size_t cap) {
  for (;;) {
    union {
      struct cmsghdr align;
      char buf[CMSG_SPACE(sizeof(int))];
    } ctl;
    struct iovec iov = {buf, cap};
    struct msghdr m;
    ssize_t k;
    size_t seg;

    memset(&m, 0, sizeof(m));
    m.msg_iov = &iov;
    m.msg_iovlen = 1;
    m.msg_control = ctl.buf;
    m.msg_controllen = sizeof(ctl.buf);
    k = recvmsg(fd, &m, MSG_DONTWAIT);
    if (k <= 0) {
      return;
    }
    seg = dlcp_net_gro_segment(&m, (size_t)k);
    for (size_t off = 0; off < (size_t)k; off += seg) {
      size_t n = (size_t)k - off < seg ? (size_t)k - off : seg;

      (void)dlcp_ina_on_packet(h, buf + off, n, 0, now_ns());
    }
  }
}

static int rank_main(const tcase *c, uint32_t rank, uint16_t port,
                     int ready_fd) {
  uint32_t ge = 64u * c->group_blocks;
  uint32_t ng = dlcp_ina_ngroups(c->count, 64, c->group_blocks);
  void *in = malloc(4 * c->count + 4), *out = malloc(4 * c->count + 4);
  void *other = malloc(4 * c->count + 4);
  double *exact = calloc(c->count + 1, sizeof(double));
  uint32_t *iexact = calloc(c->count + 1, sizeof(uint32_t));
  int32_t *exps = malloc((ng + 1u) * 4u), *loc = malloc((ng + 1u) * 4u);
  uint8_t *buf = malloc(GRO_MAX);
  pending q = {malloc((size_t)DLCP_NET_GSO_MAX * DLCP_AGG_DGRAM_MAX), {{0}},
               0};
  dlcp_ina_params p;
  dlcp_ina *h;
  dlcp_ina_result res;
  struct sockaddr_in sa;
  int fd = socket(AF_INET, SOCK_DGRAM, 0);
  dlcp_tstamp give_up = now_ns() + 60000000000u;
  bool done = false;

  if (in == NULL || out == NULL || other == NULL || exact == NULL ||
      iexact == NULL || exps == NULL || loc == NULL || buf == NULL ||
      q.buf == NULL || fd < 0) {
    return 2;
  }
  if (c->runs) {
    int one = 1;

    if (setsockopt(fd, SOL_UDP, UDP_GRO, &one, sizeof(one)) != 0) {
      return 2;
    }
  }
  for (uint32_t g = 0; g < ng; g++) {
    exps[g] = DLCP_INA_EXP_ZERO;
  }
  for (uint32_t r = 0; r < c->world; r++) {
    gen_input(c, r, r == rank ? in : other);
    const void *x = r == rank ? in : other;

    for (uint64_t i = 0; i < c->count; i++) {
      if (c->dtype == DLCP_INT32) {
        iexact[i] += (uint32_t)((const int32_t *)x)[i];
      } else {
        exact[i] += ((const float *)x)[i];
      }
    }
    if (c->dtype == DLCP_FLOAT32) {
      if (dlcp_ina_exponents(x, c->count, ge, loc) != 0) {
        return 3;
      }
      for (uint32_t g = 0; g < ng; g++) {
        exps[g] = loc[g] > exps[g] ? loc[g] : exps[g];
      }
    }
  }
  dlcp_ina_params_default(&p);
  p.job = c->job;
  p.token = 0x5EC2E7000000u + c->job;
  p.rank = rank;
  p.world = c->world;
  p.mode = c->mode;
  p.dtype = c->dtype;
  p.op = c->op;
  p.sendbuf = in;
  p.recvbuf = out;
  p.count = c->count;
  p.group_blocks = c->group_blocks;
  p.exps = exps;
  p.rto_ns = 5000000;
  p.max_retx = 2000;
  if (dlcp_ina_new(&h, &p, NULL, now_ns()) != 0) {
    return 4;
  }
  memset(&sa, 0, sizeof(sa));
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
    return 5;
  }
  while (!done && now_ns() < give_up) {
    dlcp_ina_action act;
    struct pollfd pfd = {fd, POLLIN, 0};
    dlcp_tstamp dl;

    for (;;) {
      uint8_t *slot = q.buf + (size_t)q.n * DLCP_AGG_DGRAM_MAX;

      (void)dlcp_ina_poll(h, &act, c->runs ? slot : buf, DLCP_AGG_DGRAM_MAX,
                          now_ns());
      if (act.type != DLCP_INA_ACT_SEND) {
        done = act.type == DLCP_INA_ACT_DONE;
        break;
      }
      if (!c->runs) {
        (void)send(fd, buf, act.len, 0);
        continue;
      }
      q.iov[q.n].iov_base = slot;
      q.iov[q.n].iov_len = act.len;
      if (++q.n == DLCP_NET_GSO_MAX) {
        send_runs(fd, &q);
      }
    }
    send_runs(fd, &q);
    if (done) {
      break;
    }
    dl = dlcp_ina_next_deadline(h);
    (void)poll(&pfd, 1, dl == DLCP_TSTAMP_NEVER ? 100 : 1);
    receive_all(fd, h, buf, GRO_MAX);
    dlcp_ina_get_result(h, &res);
    if (ready_fd >= 0 && res.done_below >= 2) {
      /* groups 0 and 1 are done: every switch thread knows the job */
      (void)write(ready_fd, "r", 1);
      close(ready_fd);
      ready_fd = -1;
    }
  }
  if (ready_fd >= 0) {
    (void)write(ready_fd, "r", 1); /* done before the first check */
    close(ready_fd);
  }
  dlcp_ina_get_result(h, &res);
  if (!done || res.status != 0) {
    fprintf(stderr, "rank %u: done %d status %s\n", rank, done,
            dlcp_strerror(res.status));
    return 6;
  }
  for (uint64_t i = 0; i < c->count; i++) {
    if (c->dtype == DLCP_INT32) {
      int32_t want = (int32_t)iexact[i];

      if (c->op == DLCP_AVG) {
        want /= (int32_t)c->world;
      }
      if (((int32_t *)out)[i] != want) {
        fprintf(stderr, "rank %u elem %llu: %d != %d\n", rank,
                (unsigned long long)i, ((int32_t *)out)[i], want);
        return 7;
      }
    } else {
      double want = exact[i] / (c->op == DLCP_AVG ? c->world : 1);
      double bound =
          (dlcp_ina_error_bound(exps[i / ge], c->world) +
           ldexp(fabs(exact[i]), -23)) /
          (c->op == DLCP_AVG ? c->world : 1);

      if (fabs(((float *)out)[i] - want) > bound) {
        fprintf(stderr, "rank %u elem %llu: %.9g vs %.9g (bound %g)\n", rank,
                (unsigned long long)i, ((float *)out)[i], want, bound);
        return 8;
      }
    }
  }
  /* let the last ACKs leave; then stray results are none of our business */
  dlcp_ina_del(h);
  close(fd);
  return 0;
}

/* Runs case |c| as world processes; |forge| also sends forged packets. */
static void run_case(const tcase *c, const daemon_proc *d, bool forge) {
  pid_t pids[64];
  dlcp_tstamp deadline = now_ns() + 90000000000u;
  int ready[2];

  assert_int_equal(pipe(ready), 0);
  for (uint32_t r = 0; r < c->world; r++) {
    pids[r] = fork();
    assert_true(pids[r] >= 0);
    if (pids[r] == 0) {
      close(ready[0]);
      if (r != 0 || !forge) {
        close(ready[1]);
        ready[1] = -1;
      }
      _exit(rank_main(c, r, d->port, ready[1]));
    }
  }
  close(ready[1]);
  if (forge) {
    /* The switch binds a job id to the token of its first packet (trust
     * on first use), so the forger comes once the job is known to every
     * switch thread (rank 0 says so). */
    char byte;
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in sa;
    uint8_t b[DLCP_AGG_HDR_LEN + 1024];
    dlcp_agg_hdr h;

    assert_int_equal(read(ready[0], &byte, 1), 1);
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_port = htons(d->port);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    memset(&h, 0, sizeof(h));
    h.type = DLCP_AGG_CONTRIB;
    h.job = c->job;
    h.token = 0xBADBADu;
    h.world = (uint8_t)c->world;
    h.nblocks = (uint8_t)c->group_blocks;
    h.elems = 64;
    memset(b, 0x7F, sizeof(b));
    for (uint32_t k = 0; k < 50; k++) {
      struct timespec ts = {0, 2000000};

      h.group = k;
      assert_int_equal(dlcp_agg_hdr_encode(b, sizeof(b), &h),
                       DLCP_AGG_HDR_LEN);
      (void)sendto(fd, b, DLCP_AGG_HDR_LEN + 256u * c->group_blocks, 0,
                   (struct sockaddr *)&sa, sizeof(sa));
      nanosleep(&ts, NULL);
    }
    close(fd);
  }
  close(ready[0]);
  for (uint32_t r = 0; r < c->world; r++) {
    int status = 0;

    for (;;) {
      pid_t w = waitpid(pids[r], &status, WNOHANG);
      struct timespec ts = {0, 10000000};

      if (w == pids[r]) {
        break;
      }
      if (now_ns() > deadline) {
        for (uint32_t q = 0; q < c->world; q++) {
          kill(pids[q], SIGKILL);
        }
        fail_msg("job %u world %u: rank %u did not finish in 90 s", c->job,
                 c->world, r);
      }
      nanosleep(&ts, NULL);
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      fail_msg("job %u world %u: rank %u failed (status %d)", c->job,
               c->world, r, status);
    }
  }
}

static uint64_t stat_of(const char *err, const char *name) {
  uint64_t v = switchd_stat(err, name);

  assert_true(v != UINT64_MAX);
  return v;
}

static void run_daemon_cases(const char *threads) {
  daemon_proc d;
  const char *err;
  uint32_t job = threads[0] == '1' ? 100 : 200;
  static const uint32_t worlds[] = {2, 3, 4, 5, 8};

  daemon_start(&d, threads, "4M");
  for (size_t w = 0; w < sizeof(worlds) / sizeof(worlds[0]); w++) {
    tcase c = {job++, worlds[w], DLCP_FLOAT32, DLCP_SUM, DLCP_INA_WAIT, 4,
               50000 + w, w, false};

    run_case(&c, &d, false);
    c = (tcase){job++, worlds[w], DLCP_INT32, DLCP_SUM,
                DLCP_INA_RING_FALLBACK, worlds[w], 12345, 10 + w, false};
    run_case(&c, &d, false);
    c = (tcase){job++, worlds[w], DLCP_FLOAT32, DLCP_AVG, DLCP_INA_WAIT, 2,
                7777, 20 + w, false};
    run_case(&c, &d, false);
    c = (tcase){job++, worlds[w], DLCP_INT32, DLCP_AVG, DLCP_INA_WAIT, 1,
                3000, 30 + w, false};
    run_case(&c, &d, false);
  }
  if (threads[0] == '1') {
    /* Contributions and ACKs in UDP_SEGMENT runs, results read with
     * UDP_GRO: the switch splits the runs it receives. */
    tcase c = {job++, 4, DLCP_FLOAT32, DLCP_SUM, DLCP_INA_WAIT, 4, 300000,
               40, true};

    run_case(&c, &d, false);
    c = (tcase){job++, 8, DLCP_INT32, DLCP_SUM, DLCP_INA_WAIT, 2, 100000, 41,
                true};
    run_case(&c, &d, false);
  }
  {
    tcase c = {job++, 4, DLCP_INT32, DLCP_SUM, DLCP_INA_WAIT, 4, 400000, 99,
               false};

    run_case(&c, &d, true);
  }
  err = daemon_stop(&d);
  /* every forged packet that reached the switch is counted; loopback may
   * drop some when the daemon's receive buffer is full (slow builds) */
  if (stat_of(err, "foreign") == 0 || stat_of(err, "foreign") > 50) {
    fail_msg("expected 1-50 forged packets counted:\n%s", err);
  }
  /* No malformed count is asserted: loopback is shared with the other
   * tests, whose stray datagrams (e.g. MLT packets to a dead rank's port,
   * which the daemon may have been given) are rightly counted there. */
}

static void test_switch_one_thread(void **state) {
  (void)state;
  run_daemon_cases("1");
}

static void test_switch_two_threads(void **state) {
  (void)state;
  run_daemon_cases("2");
}

/* A too-small pool with plain INA: groups wait their turn, all exact. */
static void test_switch_small_pool(void **state) {
  daemon_proc d;
  tcase c = {300, 4, DLCP_FLOAT32, DLCP_SUM, DLCP_INA_WAIT, 4, 200000, 5,
             false};
  const char *err;

  (void)state;
  daemon_start(&d, "1", "8K"); /* 32 aggregators: 8 groups of 4 blocks */
  run_case(&c, &d, false);
  err = daemon_stop(&d);
  assert_true(stat_of(err, "nacked") > 0);
}

/* The kernel's view of the UDP socket bound to 127.0.0.1:|port| (a line
 * of /proc/net/udp): the bytes in its receive queue and its drop count.
 * Returns false if no such socket. */
static bool udp_socket_of(uint16_t port, unsigned *rx_queue,
                          unsigned long long *drops) {
  FILE *f = fopen("/proc/net/udp", "r");
  char line[512];
  bool found = false;

  assert_non_null(f);
  while (!found && fgets(line, sizeof(line), f) != NULL) {
    unsigned addr, lport;
    found = sscanf(line,
                   " %*u: %8X:%4X %*X:%*X %*X %*X:%X %*X:%*X %*X %*u "
                   "%*d %*u %*d %*s %llu",
                   &addr, &lport, rx_queue, drops) == 4 &&
            addr == htonl(INADDR_LOOPBACK) && lport == port;
  }
  fclose(f);
  return found;
}

/* Packets this host's CPUs dropped from their full input backlogs (the
 * second column of /proc/net/softnet_stat, summed): loopback's datagrams
 * wait there for the receive softirq, which a loaded machine may run
 * late, before they reach a socket. */
static uint64_t backlog_drops(void) {
  FILE *f = fopen("/proc/net/softnet_stat", "r");
  unsigned processed, dropped;
  uint64_t sum = 0;
  char rest[512];

  assert_non_null(f);
  while (fscanf(f, "%x %x", &processed, &dropped) == 2) {
    sum += dropped;
    if (fgets(rest, sizeof(rest), f) == NULL) {
      break;
    }
  }
  fclose(f);
  return sum;
}

/* Waits (10 s at most) until the socket on |port| has read everything
 * queued to it; returns its drop count. */
static unsigned long long drained(uint16_t port) {
  unsigned rxq = 1;
  unsigned long long drops = 0;

  for (int i = 0; i < 1000 && rxq != 0; i++) {
    assert_true(udp_socket_of(port, &rxq, &drops));
    if (rxq != 0) {
      usleep(10000);
    }
  }
  assert_int_equal(rxq, 0);
  return drops;
}

/* A switch thread that falls behind its socket: the daemon is stopped
 * (SIGSTOP) while a sender fills its socket with junk datagrams, then let
 * go; one datagram sent after it drained carries the socket's final drop
 * count.  Every datagram sent is read (counted in packets, as malformed)
 * or counted dropped (but for those the host dropped before the socket),
 * the count the kernel's own, and some were dropped: 40,000
 * of 1,400 bytes are more than its 16 MiB of buffer holds. */
static void test_switch_rx_drops(void **state) {
  enum { SENT = 40000, LEN = 1400 };
  static uint8_t junk[LEN];
  struct sockaddr_in to = {.sin_family = AF_INET,
                           .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  daemon_proc d;
  int fd = socket(AF_INET, SOCK_DGRAM, 0);
  uint64_t sent = 0;

  (void)state;
  assert_true(fd >= 0);
  daemon_start(&d, "1", "1M");
  to.sin_port = htons(d.port);
  assert_int_equal(kill(d.pid, SIGSTOP), 0);
  uint64_t backlog = backlog_drops();
  for (int i = 0; i < SENT; i++) {
    sent += sendto(fd, junk, LEN, 0, (struct sockaddr *)&to, sizeof(to)) == LEN;
  }
  assert_int_equal(kill(d.pid, SIGCONT), 0);
  (void)drained(d.port);
  backlog = backlog_drops() - backlog;
  sent += sendto(fd, junk, LEN, 0, (struct sockaddr *)&to, sizeof(to)) == LEN;
  unsigned long long kernel = drained(d.port);
  close(fd);
  const char *err = daemon_stop(&d);
  uint64_t dropped = stat_of(err, "rx_dropped");
  uint64_t packets = stat_of(err, "packets");
  /* Other tests' stray datagrams to a port the daemon was given again
   * are read too (and are malformed here as well): a few at most; the
   * host's input backlogs may have dropped some before the socket. */
  if (dropped == 0 || dropped != kernel || packets + dropped + backlog < sent ||
      packets + dropped > sent + 50 || stat_of(err, "malformed") != packets) {
    fail_msg("%llu sent, %llu read, %llu dropped (the kernel: %llu):\n%s",
             (unsigned long long)sent, (unsigned long long)packets,
             (unsigned long long)dropped, kernel, err);
  }
  printf("%llu sent: %llu read, %llu dropped at the full socket (%llu "
         "dropped before it, at a full input backlog, by any sender)\n",
         (unsigned long long)sent, (unsigned long long)packets,
         (unsigned long long)dropped, (unsigned long long)backlog);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_switch_one_thread),
      cmocka_unit_test(test_switch_two_threads),
      cmocka_unit_test(test_switch_small_pool),
      cmocka_unit_test(test_switch_rx_drops),
  };

  signal(SIGPIPE, SIG_IGN);
  return cmocka_run_group_tests(tests, NULL, NULL);
}
