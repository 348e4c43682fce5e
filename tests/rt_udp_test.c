/*
 * rt_udp_test.c: the UDP batch of a communicator, one socket sending to
 * itself on loopback.  Header-and-payload datagrams (DATA) keep their
 * order and bytes; a whole control datagram longer than a header (CDATA,
 * written into a scratch buffer the caller reuses at once) arrives whole,
 * in order, with the bytes it had when queued, and the pieces of a long
 * control message leave together; a trailer (an auth tag)
 * given with either follows its last byte.  The ECN bits a datagram
 * arrives with are read, batch or one by one: Congestion Experienced
 * (set here by the sender itself, as a switch would) is reported, ECT(0)
 * and Not-ECT are not.  With GRO, a run comes back as one message that
 * splits into the datagrams queued.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rt/clock.h"
#include "rt/net.h"
#include "rt/udp.h"

/* Kernel time stamps are on the wall clock: converted, they may be off by
 * the two clocks' drift while the test runs. */
#define SLACK_NS 1000000u

enum { WHOLE_LEN = 4000, HDR_LEN = 24, PAYLOAD_LEN = 1000 };

/* Receives the next datagram (waiting up to a second for it). */
static const uint8_t *next_datagram(dlcp_udp *u, size_t *len) {
  struct pollfd pfd = {.fd = u->fd[0], .events = POLLIN};
  assert_int_equal(poll(&pfd, 1, 1000), 1);
  return dlcp_udp_take(u, 0, len);
}

/* Opens one socket on the loopback address |*state| names (IPv4 unless
 * given) and returns its own address, to send to itself; skips the test
 * on a host without IPv6 loopback. */
static dlcp_sockaddr open_to_self(dlcp_udp *u, void **state) {
  const char *ip = *state ? *state : "127.0.0.1";
  dlcp_errbuf eb = {0};
  int rv = dlcp_udp_open(u, ip, 1, &eb);
  if (rv == -EADDRNOTAVAIL || rv == -EAFNOSUPPORT) {
    skip();
  }
  assert_int_equal(rv, 0);
  dlcp_sockaddr self;
  assert_int_equal(dlcp_sockaddr_parse(&self, ip, u->port[0]), 0);
  return self;
}

static void test_whole_datagram_sent_before_scratch_reused(void **state) {
  dlcp_udp u;
  dlcp_sockaddr self = open_to_self(&u, state);
  uint8_t hdr[HDR_LEN], payload[PAYLOAD_LEN], scratch[WHOLE_LEN];
  memset(hdr, 0xa1, sizeof(hdr));
  memset(payload, 0xb2, sizeof(payload));
  uint8_t trailer[DLCP_UDP_TRAILER_LEN];
  memset(trailer, 0xc3, sizeof(trailer));
  dlcp_udp_queue(&u, 0, &self, hdr, sizeof(hdr), payload, sizeof(payload), NULL,
                 0);
  for (size_t i = 0; i < sizeof(scratch); i++) {
    scratch[i] = (uint8_t)i;
  }
  dlcp_udp_queue(&u, 0, &self, scratch, sizeof(scratch), NULL, 0, trailer, 0);
  memset(scratch, 0xff, sizeof(scratch)); /* the next poll's message */
  memset(trailer, 0xff, sizeof(trailer)); /* copied when queued */
  dlcp_udp_queue(&u, 0, &self, hdr, sizeof(hdr), payload, sizeof(payload), NULL,
                 0);
  memset(trailer, 0xd4, sizeof(trailer));
  dlcp_udp_queue(&u, 0, &self, hdr, sizeof(hdr), payload, sizeof(payload),
                 trailer, 0);
  memset(trailer, 0xff, sizeof(trailer));
  dlcp_udp_flush(&u);

  size_t len;
  const uint8_t *d = next_datagram(&u, &len);
  assert_int_equal(len, HDR_LEN + PAYLOAD_LEN);
  assert_int_equal(d[0], 0xa1);
  assert_int_equal(d[HDR_LEN], 0xb2);
  d = next_datagram(&u, &len);
  assert_int_equal(len, WHOLE_LEN + DLCP_UDP_TRAILER_LEN);
  for (size_t i = 0; i < WHOLE_LEN; i++) {
    if (d[i] != (uint8_t)i) {
      fail_msg("byte %zu: %u, expected %u", i, d[i], (unsigned)(uint8_t)i);
    }
  }
  for (size_t i = 0; i < DLCP_UDP_TRAILER_LEN; i++) {
    assert_int_equal(d[WHOLE_LEN + i], 0xc3);
  }
  d = next_datagram(&u, &len);
  assert_int_equal(len, HDR_LEN + PAYLOAD_LEN);
  assert_int_equal(d[HDR_LEN + PAYLOAD_LEN - 1], 0xb2);
  d = next_datagram(&u, &len);
  assert_int_equal(len, HDR_LEN + PAYLOAD_LEN + DLCP_UDP_TRAILER_LEN);
  assert_int_equal(d[HDR_LEN], 0xb2);
  assert_int_equal(d[HDR_LEN + PAYLOAD_LEN - 1], 0xb2);
  for (size_t i = 0; i < DLCP_UDP_TRAILER_LEN; i++) {
    assert_int_equal(d[HDR_LEN + PAYLOAD_LEN + i], 0xd4);
  }
  assert_int_equal(u.send_errors, 0);
  dlcp_udp_close(&u);
}

/* The runs both tests below send: 7 equal datagrams, a shorter one ending
 * their run, 2 of another TOS byte, 2 equal with trailers (a longer
 * length: a new run). */
enum { RUNS_N = 12, RUNS_TRAILED_FROM = 10 };
static const size_t runs_payload_len[RUNS_N] = {
    1000, 1000, 1000, 1000, 1000, 1000, 1000, 300, 1000, 1000, 1000, 1000};
static const int runs_tos[RUNS_N] = {0, 0, 0, 0, 0, 0, 0, 0, 0x20, 0x20, 0, 0};

/* Queues the runs to |to| (datagram k's header bytes 0x10 + k, payload
 * bytes 0x80 + k, trailer bytes 0xee) and flushes them. */
static void send_runs(dlcp_udp *u, const dlcp_sockaddr *to) {
  uint8_t hdr[RUNS_N][HDR_LEN], payload[RUNS_N][PAYLOAD_LEN];
  uint8_t trailer[DLCP_UDP_TRAILER_LEN];
  memset(trailer, 0xee, sizeof(trailer));
  for (int k = 0; k < RUNS_N; k++) {
    memset(hdr[k], 0x10 + k, HDR_LEN);
    memset(payload[k], 0x80 + k, PAYLOAD_LEN);
    dlcp_udp_queue(u, 0, to, hdr[k], HDR_LEN, payload[k],
                   runs_payload_len[k],
                   k >= RUNS_TRAILED_FROM ? trailer : NULL, runs_tos[k]);
  }
  dlcp_udp_flush(u);
}

/* Datagram |k| of the runs, received as |d| of |len| bytes: exact. */
static void check_run_datagram(int k, const uint8_t *d, size_t len) {
  bool trailed = k >= RUNS_TRAILED_FROM;
  assert_int_equal(len, HDR_LEN + runs_payload_len[k] +
                            (trailed ? DLCP_UDP_TRAILER_LEN : 0));
  assert_int_equal(d[0], 0x10 + k);
  assert_int_equal(d[HDR_LEN - 1], 0x10 + k);
  assert_int_equal(d[HDR_LEN], 0x80 + k);
  assert_int_equal(d[HDR_LEN + runs_payload_len[k] - 1], 0x80 + k);
  if (trailed) {
    assert_int_equal(d[len - 1], 0xee);
  }
}

/* Equal datagrams to one address with one TOS byte go as one UDP GSO
 * message (a shorter one may end the run); each still arrives whole, on
 * its own, in order, and counts as one datagram sent. */
static void test_runs_of_equal_datagrams_arrive_one_by_one(void **state) {
  dlcp_udp u;
  dlcp_sockaddr self = open_to_self(&u, state);
  send_runs(&u, &self);
  for (int k = 0; k < RUNS_N; k++) {
    size_t len;
    const uint8_t *d = next_datagram(&u, &len);
    check_run_datagram(k, d, len);
  }
  assert_int_equal(u.sent, RUNS_N);
  assert_int_equal(u.send_errors, 0);
  dlcp_udp_close(&u);
}

/* With GRO on the receiving socket, a run sent as one GSO message comes
 * back as one message (loopback passes it through whole) that
 * dlcp_udp_rx_segment cuts into the very datagrams queued, in order. */
static void test_gro_runs_arrive_whole_and_split(void **state) {
  dlcp_udp u;
  dlcp_sockaddr self = open_to_self(&u, state);
  if (dlcp_udp_enable_gro(&u) == -ENOPROTOOPT) {
    dlcp_udp_close(&u);
    skip(); /* a kernel without UDP_GRO */
  }
  send_runs(&u, &self);
  struct pollfd pfd = {.fd = u.fd[0], .events = POLLIN};
  int got = 0, messages = 0;
  while (got < RUNS_N && poll(&pfd, 1, 1000) == 1) {
    int n = dlcp_udp_recv(&u, 0);
    for (int i = 0; i < n; i++, messages++) {
      size_t len;
      const dlcp_sockaddr *from;
      const uint8_t *m = dlcp_udp_rx_data(&u, i, &len, &from);
      size_t seg = dlcp_udp_rx_segment(&u, i);
      assert_true(seg > 0 && seg <= len);
      for (size_t off = 0; off < len; off += seg, got++) {
        assert_true(got < RUNS_N);
        check_run_datagram(got, m + off, len - off < seg ? len - off : seg);
      }
    }
  }
  assert_int_equal(got, RUNS_N);
  /* Three GSO messages, each received whole; one a datagram without GSO. */
  assert_int_equal(messages, u.gso_off ? RUNS_N : 3);
  dlcp_udp_close(&u);
}

/* In a network namespace of its own whose loopback carries 1,500-byte
 * packets: a run of datagrams that fit, then a run of 8,000-byte ones,
 * which the kernel sends as IP fragments but refuses as one UDP GSO
 * message (a DLCP_SEGMENT above the path's MTU).  Every datagram must
 * arrive whole and in order, and the refused run turn the runs off.  Then
 * one to an address without a route (the namespace has none but
 * loopback's): refused, counted as a send error (dlcp_comm_stats'
 * datagrams_unsent), and nothing else.
 * Returns 0, 77 without the privilege to make a namespace, or 1 (after
 * saying why): run in a child process, which leaves the test's own
 * namespace alone. */
enum { BIG_N = 4, BIG_PAYLOAD = 8000, SMALL_N = 8 };

static int runs_beyond_mtu(void) {
  struct ifreq ifr;
  int fd;
  if (unshare(CLONE_NEWNET) != 0) {
    return 77;
  }
  fd = socket(AF_INET, SOCK_DGRAM, 0);
  memset(&ifr, 0, sizeof(ifr));
  strcpy(ifr.ifr_name, "lo");
  ifr.ifr_mtu = 1500;
  if (fd < 0 || ioctl(fd, SIOCSIFMTU, &ifr) != 0 ||
      ioctl(fd, SIOCGIFFLAGS, &ifr) != 0) {
    fprintf(stderr, "loopback of the new namespace: %s\n", strerror(errno));
    return 1;
  }
  ifr.ifr_flags |= IFF_UP;
  if (ioctl(fd, SIOCSIFFLAGS, &ifr) != 0) {
    fprintf(stderr, "loopback up: %s\n", strerror(errno));
    return 1;
  }
  close(fd);

  dlcp_udp u;
  dlcp_errbuf eb = {0};
  dlcp_sockaddr self;
  static uint8_t payload[SMALL_N + BIG_N][BIG_PAYLOAD]; /* held to the flush */
  uint8_t hdr[HDR_LEN];
  if (dlcp_udp_open(&u, "127.0.0.1", 1, &eb) != 0 ||
      dlcp_sockaddr_parse(&self, "127.0.0.1", u.port[0]) != 0) {
    fprintf(stderr, "socket: %s\n", eb.msg);
    return 1;
  }
  for (int k = 0; k < SMALL_N + BIG_N; k++) {
    memset(hdr, 0x10 + k, sizeof(hdr));
    memset(payload[k], 0x80 + k, BIG_PAYLOAD);
    dlcp_udp_queue(&u, 0, &self, hdr, HDR_LEN, payload[k],
                   k < SMALL_N ? PAYLOAD_LEN : BIG_PAYLOAD, NULL, 0);
    if (k == SMALL_N - 1 || k == SMALL_N + BIG_N - 1) {
      dlcp_udp_flush(&u); /* the runs in two batches */
    }
  }
  for (int k = 0; k < SMALL_N + BIG_N; k++) {
    struct pollfd pfd = {.fd = u.fd[0], .events = POLLIN};
    size_t len = 0;
    const uint8_t *d = poll(&pfd, 1, 1000) == 1
                           ? dlcp_udp_take(&u, 0, &len)
                           : NULL;
    size_t want = HDR_LEN + (k < SMALL_N ? PAYLOAD_LEN : BIG_PAYLOAD);
    if (d == NULL || len != want || d[0] != 0x10 + k ||
        d[len - 1] != 0x80 + k) {
      fprintf(stderr, "datagram %d: %s (%zu bytes, %zu expected)\n", k,
              d == NULL ? "did not come" : "wrong", len, want);
      return 1;
    }
  }
  if (u.sent != SMALL_N + BIG_N || u.send_errors != 0 || !u.gso_off) {
    fprintf(stderr, "sent %llu, send errors %llu, runs %s\n",
            (unsigned long long)u.sent, (unsigned long long)u.send_errors,
            u.gso_off ? "off" : "still on");
    return 1;
  }
  dlcp_sockaddr nowhere;
  if (dlcp_sockaddr_parse(&nowhere, "10.9.9.9", 9) != 0) {
    return 1;
  }
  dlcp_udp_queue(&u, 0, &nowhere, hdr, HDR_LEN, payload[0], PAYLOAD_LEN,
                 NULL, 0);
  dlcp_udp_flush(&u);
  if (u.sent != SMALL_N + BIG_N || u.send_errors != 1) {
    fprintf(stderr, "no route: sent %llu, send errors %llu\n",
            (unsigned long long)u.sent, (unsigned long long)u.send_errors);
    return 1;
  }
  dlcp_udp_close(&u);
  return 0;
}

static void test_runs_beyond_the_path_mtu_go_one_by_one(void **state) {
  (void)state;
  int status;
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    _exit(runs_beyond_mtu());
  }
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status));
  if (WEXITSTATUS(status) == 77) {
    skip(); /* not allowed to make a network namespace */
  }
  assert_int_equal(WEXITSTATUS(status), 0);
}

/* The pieces of a long control message (whole datagrams written one after
 * another into the same scratch buffer) wait in the batch, copied, and
 * leave together at the flush: nothing before it, then each piece whole,
 * in order, with the bytes it had when queued. */
static void test_whole_datagrams_leave_together(void **state) {
  dlcp_udp u;
  dlcp_sockaddr self = open_to_self(&u, state);
  enum { N = 20, PIECE = 1472 };
  uint8_t scratch[PIECE];
  for (int k = 0; k < N; k++) {
    memset(scratch, 0x40 + k, sizeof(scratch));
    dlcp_udp_queue(&u, 0, &self, scratch, k == N - 1 ? 100 : sizeof(scratch),
                   NULL, 0, NULL, 0);
  }
  memset(scratch, 0xff, sizeof(scratch));
  struct pollfd pfd = {.fd = u.fd[0], .events = POLLIN};
  assert_int_equal(poll(&pfd, 1, 0), 0);
  dlcp_udp_flush(&u);
  for (int k = 0; k < N; k++) {
    size_t len;
    const uint8_t *d = next_datagram(&u, &len);
    assert_int_equal(len, k == N - 1 ? 100 : PIECE);
    assert_int_equal(d[0], 0x40 + k);
    assert_int_equal(d[len - 1], 0x40 + k);
  }
  assert_int_equal(u.sent, N);
  assert_int_equal(u.send_errors, 0);
  dlcp_udp_close(&u);
}

/* Every received datagram says whether it was CE marked and when the kernel
 * received it: after it was sent, before it was read. */
static void test_arrival_is_read(void **state) {
  dlcp_udp u;
  dlcp_sockaddr self = open_to_self(&u, state);
  uint8_t hdr[HDR_LEN] = {0};
  /* TOS: DSCP CS5 with ECT(0), CE, Not-ECT; then the same three again. */
  const int tos[3] = {dlcp_udp_tos(2, true), dlcp_udp_tos(2, true) | 3,
                      dlcp_udp_tos(2, false)};
  const bool ce[3] = {false, true, false};
  for (int round = 0; round < 2; round++) {
    dlcp_tstamp sent = dlcp_rt_now();
    for (int i = 0; i < 3; i++) {
      dlcp_udp_queue(&u, 0, &self, hdr, sizeof(hdr), NULL, 0, NULL, tos[i]);
    }
    dlcp_udp_flush(&u);
    if (round == 0) { /* one by one */
      for (int i = 0; i < 3; i++) {
        size_t len;
        (void)next_datagram(&u, &len);
        assert_int_equal(len, HDR_LEN);
        dlcp_mlt_arrival a = dlcp_udp_taken_arrival(&u);
        assert_int_equal(a.ce, ce[i]);
        assert_true(a.at + SLACK_NS >= sent && a.at <= dlcp_rt_now());
      }
    } else { /* in a batch */
      struct pollfd pfd = {.fd = u.fd[0], .events = POLLIN};
      int got = 0;
      while (got < 3 && poll(&pfd, 1, 1000) == 1) {
        int n = dlcp_udp_recv(&u, 0);
        for (int i = 0; i < n; i++) {
          dlcp_mlt_arrival a = dlcp_udp_rx_arrival(&u, i);
          assert_int_equal(a.ce, ce[got + i]);
          assert_true(a.at + SLACK_NS >= sent && a.at <= dlcp_rt_now());
        }
        got += n;
      }
      assert_int_equal(got, 3);
    }
  }
  assert_int_equal(u.send_errors, 0);
  dlcp_udp_close(&u);
}

/* A burst into a receive buffer too small for it: every datagram the
 * kernel dropped is counted (rx_drops, from the socket's drop count on
 * a later datagram, batch or one by one), exactly what did not arrive. */
static void test_full_receive_buffer_drops_are_counted(void **state) {
  dlcp_udp u;
  dlcp_sockaddr self = open_to_self(&u, state);
  int small = 4096;
  assert_int_equal(
      setsockopt(u.fd[0], SOL_SOCKET, SO_RCVBUF, &small, sizeof(small)), 0);
  enum { BURST = 200 };
  uint8_t hdr[HDR_LEN] = {0};
  for (int i = 0; i < BURST; i++) {
    dlcp_udp_queue(&u, 0, &self, hdr, sizeof(hdr), NULL, 0, NULL, 0);
  }
  dlcp_udp_flush(&u);
  assert_int_equal(u.send_errors, 0);
  struct pollfd pfd = {.fd = u.fd[0], .events = POLLIN};
  uint64_t got = 0;
  while (poll(&pfd, 1, 100) == 1) {
    got += (uint64_t)dlcp_udp_recv(&u, 0);
  }
  assert_true(got > 0 && got < BURST);
  /* The count of drops after the last queued datagram comes with the
   * next one. */
  dlcp_udp_queue(&u, 0, &self, hdr, sizeof(hdr), NULL, 0, NULL, 0);
  dlcp_udp_flush(&u);
  size_t len;
  (void)next_datagram(&u, &len);
  assert_int_equal(got + 1 + u.rx_drops.total, BURST + 1);
  dlcp_udp_close(&u);
}

/* Datagrams queued on several paths' sockets towards one address leave in
 * the order they were queued, each from its path's socket (its source port,
 * which an ECMP network hashes): a path's batch never overtakes another's. */
static void test_paths_leave_in_queued_order(void **state) {
  (void)state;
  dlcp_udp u;
  dlcp_errbuf eb = {0};
  assert_int_equal(dlcp_udp_open(&u, "127.0.0.1", 3, &eb), 0);
  dlcp_sockaddr to;
  assert_int_equal(dlcp_sockaddr_parse(&to, "127.0.0.1", u.port[0]), 0);
  enum { N = 8 };
  const uint32_t path[N] = {0, 0, 1, 1, 2, 0, 1, 1};
  uint8_t hdr[N][HDR_LEN], payload[PAYLOAD_LEN];
  memset(payload, 0x55, sizeof(payload));
  for (int k = 0; k < N; k++) {
    memset(hdr[k], 0x10 + k, HDR_LEN);
    dlcp_udp_queue(&u, path[k], &to, hdr[k], HDR_LEN, payload, PAYLOAD_LEN,
                   NULL, 0);
  }
  dlcp_udp_flush(&u);
  struct pollfd pfd = {.fd = u.fd[0], .events = POLLIN};
  int got = 0;
  while (got < N && poll(&pfd, 1, 1000) == 1) {
    int n = dlcp_udp_recv(&u, 0);
    for (int i = 0; i < n && got + i < N; i++) {
      size_t len;
      const dlcp_sockaddr *from;
      const uint8_t *d = dlcp_udp_rx_data(&u, i, &len, &from);
      assert_int_equal(len, HDR_LEN + PAYLOAD_LEN);
      assert_int_equal(d[0], 0x10 + got + i);
      assert_int_equal(dlcp_net_addr_port(&from->sa), u.port[path[got + i]]);
    }
    got += n;
  }
  assert_int_equal(got, N);
  assert_int_equal(u.sent, N);
  assert_int_equal(u.send_errors, 0);
  dlcp_udp_close(&u);
}

/* Towards this host, the path is memory: the local rate, whether the peer
 * is addressed on loopback or by one of this host's own addresses. */
static void test_path_rate_towards_this_host(void **state) {
  (void)state;
  dlcp_sockaddr to;
  const char *local[] = {"127.0.0.1", "127.5.6.7", "::1"};
  for (size_t k = 0; k < sizeof(local) / sizeof(local[0]); k++) {
    assert_int_equal(dlcp_sockaddr_parse(&to, local[k], 9), 0);
    assert_true(dlcp_net_path_rate_gbps(&to, 7.0, 3.0) == 7.0);
  }
  struct ifaddrs *all;
  assert_int_equal(getifaddrs(&all), 0);
  for (struct ifaddrs *i = all; i; i = i->ifa_next) {
    if (i->ifa_addr && (i->ifa_flags & IFF_UP) &&
        (i->ifa_addr->sa_family == AF_INET ||
         (i->ifa_addr->sa_family == AF_INET6 &&
          !IN6_IS_ADDR_LINKLOCAL(
              &((const struct sockaddr_in6 *)(const void *)i->ifa_addr)
                   ->sin6_addr)))) {
      memset(&to, 0, sizeof(to));
      memcpy(&to, i->ifa_addr,
             i->ifa_addr->sa_family == AF_INET6 ? sizeof(to.in6)
                                                : sizeof(to.in));
      assert_true(dlcp_net_path_rate_gbps(&to, 7.0, 3.0) == 7.0);
    }
  }
  freeifaddrs(all);
}

/* The family helpers the data path relies on. */
static void test_sockaddr_helpers(void **state) {
  (void)state;
  dlcp_sockaddr a, b;
  /* HOST:PORT and [IPV6]:PORT, as DLCP_SWITCH and --parent give them */
  char host[16];
  uint16_t port = 0;
  assert_int_equal(
      dlcp_net_split_host_port("h1:7070", host, sizeof(host), &port), 0);
  assert_string_equal(host, "h1");
  assert_int_equal(port, 7070);
  assert_int_equal(
      dlcp_net_split_host_port("[fd00::1]:65535", host, sizeof(host), &port),
      0);
  assert_string_equal(host, "fd00::1");
  assert_int_equal(port, 65535);
  static const char *const bad[] = {"fd00::1:7070",
                                    "[fd00::1]",
                                    "h1",
                                    ":7",
                                    "h1:",
                                    "h1:0",
                                    "h1:65536",
                                    "h1:-1",
                                    "h1:7x",
                                    "[]:7",
                                    "a-name-longer-than-16:7",
                                    "[fd00::1:7"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    if (dlcp_net_split_host_port(bad[i], host, sizeof(host), &port) != -1) {
      fail_msg("'%s' accepted", bad[i]);
    }
  }
  assert_int_equal(dlcp_sockaddr_parse(&a, "10.0.0.1", 7), 0);
  assert_int_equal(dlcp_sockaddr_len(&a), sizeof(struct sockaddr_in));
  assert_int_equal(dlcp_sockaddr_parse(&b, "10.0.0.1", 8), 0);
  assert_true(dlcp_sockaddr_same_host(&a, &b));
  assert_false(dlcp_sockaddr_equal(&a, &b));
  assert_false(dlcp_sockaddr_is_loopback(&a));
  assert_int_equal(dlcp_sockaddr_parse(&b, "fd00::1", 7), 0);
  assert_int_equal(dlcp_sockaddr_len(&b), sizeof(struct sockaddr_in6));
  assert_false(dlcp_sockaddr_same_host(&a, &b));
  assert_int_equal(dlcp_net_addr_port(&b.sa), 7);
  assert_int_equal(dlcp_sockaddr_parse(&a, "::1", 7), 0);
  assert_true(dlcp_sockaddr_is_loopback(&a));
  assert_int_equal(dlcp_sockaddr_parse(&a, "host0", 7), -1);
  assert_int_equal(dlcp_net_ip_header_len(AF_INET6), 40);
  assert_int_equal(dlcp_net_ip_header_len(AF_INET), 20);
}

static char IPV6_LOOPBACK[] = "::1";

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_whole_datagram_sent_before_scratch_reused),
      cmocka_unit_test(test_runs_of_equal_datagrams_arrive_one_by_one),
      cmocka_unit_test(test_whole_datagrams_leave_together),
      cmocka_unit_test(test_gro_runs_arrive_whole_and_split),
      cmocka_unit_test(test_arrival_is_read),
      cmocka_unit_test(test_runs_beyond_the_path_mtu_go_one_by_one),
      /* The same over IPv6 (IPV6_TCLASS instead of IP_TOS). */
      cmocka_unit_test_prestate(test_whole_datagram_sent_before_scratch_reused,
                                IPV6_LOOPBACK),
      cmocka_unit_test_prestate(test_runs_of_equal_datagrams_arrive_one_by_one,
                                IPV6_LOOPBACK),
      cmocka_unit_test_prestate(test_whole_datagrams_leave_together,
                                IPV6_LOOPBACK),
      cmocka_unit_test_prestate(test_gro_runs_arrive_whole_and_split,
                                IPV6_LOOPBACK),
      cmocka_unit_test_prestate(test_arrival_is_read, IPV6_LOOPBACK),
      cmocka_unit_test(test_full_receive_buffer_drops_are_counted),
      cmocka_unit_test(test_paths_leave_in_queued_order),
      cmocka_unit_test(test_path_rate_towards_this_host),
      cmocka_unit_test(test_sockaddr_helpers),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
