/*
 * rt_rdzv_abuse_test.c: rank 0's rendezvous server against bad clients
 * (silent, slow, not reading, garbage, oversized, wrong job, too many
 * connections, too many keys, GATHERs out of bounds), and GATHER's
 * answers at their edges (keys arriving out of order, answers split at
 * the size limit), over real loopback sockets.  Each case
 * checks that the bad connection is closed (bounded time, bounded
 * connections), that the server logs one line naming the client's
 * address and what it did wrong, and that a well-behaved rank is served
 * all the while.  Deadlines are the server's own io_timeout_ms (short
 * here) with generous margins; alarm() turns any hang into a failure.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "rt/clock.h"
#include "rt/net.h"
#include "rt/rendezvous.h"
#include "wire/bytes.h"

#define LOOPBACK "127.0.0.1"
#define JOB 7u
#define WORLD 2u
#define MAX_LINES 512
#define SHORT_MS 300u  /* io_timeout_ms where the test waits for it */
#define LONG_MS 20000u /* where it must not interfere */

/* ---- log capture ------------------------------------------------------ */

typedef struct log_capture {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  char *lines[MAX_LINES];
  size_t n;
} log_capture;

static log_capture g_log;

static void capture(void *arg, const char *line) {
  log_capture *lc = arg;
  pthread_mutex_lock(&lc->mu);
  if (lc->n < MAX_LINES) {
    lc->lines[lc->n++] = strdup(line);
  }
  pthread_cond_broadcast(&lc->cv);
  pthread_mutex_unlock(&lc->mu);
}

static void log_reset(void) {
  size_t i;
  for (i = 0; i < g_log.n; i++) {
    free(g_log.lines[i]);
  }
  g_log.n = 0;
}

/* count_lines counts captured lines containing both |a| and |b|. */
static size_t count_lines(const char *a, const char *b) {
  size_t i;
  size_t n = 0;
  pthread_mutex_lock(&g_log.mu);
  for (i = 0; i < g_log.n; i++) {
    if (strstr(g_log.lines[i], a) != NULL &&
        (b == NULL || strstr(g_log.lines[i], b) != NULL)) {
      n++;
    }
  }
  pthread_mutex_unlock(&g_log.mu);
  return n;
}

/* expect_line waits (up to 5 s) for a line containing |a| and |b|. */
static void expect_line(const char *a, const char *b) {
  dlcp_tstamp deadline = dlcp_rt_deadline_after(5000);
  while (count_lines(a, b) == 0) {
    if (dlcp_rt_now() >= deadline) {
      size_t i;
      for (i = 0; i < g_log.n; i++) {
        fprintf(stderr, "log: %s\n", g_log.lines[i]);
      }
      fail_msg("no log line with '%s' and '%s'", a, b != NULL ? b : "");
    }
    usleep(5000);
  }
}

/* ---- server and raw clients ------------------------------------------- */

static dlcp_rdzv_server *start(uint32_t io_timeout_ms, uint32_t max_strays) {
  dlcp_rdzv_server_config cfg;
  dlcp_rdzv_server *srv = NULL;
  dlcp_rdzv_server_config_default(&cfg, WORLD, JOB);
  cfg.io_timeout_ms = io_timeout_ms;
  cfg.max_strays = max_strays;
  cfg.log = capture;
  cfg.log_arg = &g_log;
  log_reset();
  assert_int_equal(dlcp_rdzv_server_start(&srv, LOOPBACK, 0, &cfg, NULL), 0);
  return srv;
}

static void stop(dlcp_rdzv_server *srv) {
  dlcp_rdzv_server_stop(srv, dlcp_rt_now());
}

/* raw_connect opens a plain TCP connection and writes its local address
 * ("127.0.0.1:port", as the server logs it) to |me|. */
static int raw_connect(uint16_t port, char *me, size_t melen) {
  dlcp_sockaddr addr;
  struct sockaddr_storage ss;
  socklen_t sslen = sizeof(ss);
  int fd;
  assert_int_equal(dlcp_net_resolve(&addr, LOOPBACK, port, SOCK_STREAM, NULL),
                   0);
  fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  assert_true(fd >= 0);
  assert_int_equal(connect(fd, &addr.sa, dlcp_sockaddr_len(&addr)), 0);
  assert_int_equal(getsockname(fd, (struct sockaddr *)&ss, &sslen), 0);
  if (me != NULL) {
    dlcp_net_addr_format(me, melen, (struct sockaddr *)&ss);
  }
  return fd;
}

static size_t make_request(uint8_t *buf, uint8_t op, const char *key,
                           const void *val, uint32_t val_len) {
  size_t key_len = key != NULL ? strlen(key) : 0;
  uint8_t *p = buf;
  p = dlcp_put_u16(p, DLCP_RDZV_MAGIC);
  p = dlcp_put_u8(p, DLCP_RDZV_VERSION);
  p = dlcp_put_u8(p, op);
  p = dlcp_put_u16(p, (uint16_t)key_len);
  p = dlcp_put_u16(p, 0);
  p = dlcp_put_u32(p, val_len);
  if (key_len > 0) {
    memcpy(p, key, key_len);
  }
  if (val_len > 0) {
    memcpy(p + key_len, val, val_len);
  }
  return DLCP_RDZV_HDR_LEN + key_len + val_len;
}

static size_t make_hello_in(uint8_t *buf, uint32_t rank, uint32_t world,
                            uint32_t job) {
  uint8_t v[DLCP_RDZV_HELLO_LEN];
  const dlcp_rdzv_hello h = {
      .rank = rank, .world = world, .job = job, .incarnation = 1};
  dlcp_rdzv_put_hello(v, &h);
  return make_request(buf, DLCP_RDZV_HELLO, NULL, v, sizeof(v));
}

static size_t make_hello(uint8_t *buf, uint32_t rank, uint32_t job) {
  return make_hello_in(buf, rank, WORLD, job);
}

/* read_answer reads one response: returns its status, its value in
 * |value| (room for DLCP_RDZV_MAX_ANSWER bytes) and |*len|. */
static uint8_t read_answer(int fd, uint8_t *value, uint32_t *len) {
  uint8_t hdr[DLCP_RDZV_HDR_LEN];
  dlcp_tstamp deadline = dlcp_rt_deadline_after(5000);
  assert_int_equal(dlcp_net_read_all(fd, hdr, sizeof(hdr), deadline), 0);
  assert_int_equal(dlcp_get_u16(hdr), DLCP_RDZV_MAGIC);
  *len = dlcp_get_u32(hdr + 8);
  assert_true(*len <= DLCP_RDZV_MAX_ANSWER);
  assert_int_equal(dlcp_net_read_all(fd, value, *len, deadline), 0);
  return dlcp_get_u8(hdr + 3);
}

/* read_status reads one response and returns its status (the value is
 * skipped). */
static uint8_t read_status(int fd) {
  static uint8_t value[DLCP_RDZV_MAX_ANSWER];
  uint32_t len;
  return read_answer(fd, value, &len);
}

/* expect_closed reads until the server hangs up (within 5 s). */
static void expect_closed(int fd) {
  uint8_t b[4096];
  dlcp_tstamp deadline = dlcp_rt_deadline_after(5000);
  for (;;) {
    struct pollfd p = {.fd = fd, .events = POLLIN, .revents = 0};
    ssize_t n;
    assert_true(poll(&p, 1, dlcp_rt_poll_timeout(deadline)) == 1);
    n = recv(fd, b, sizeof(b), 0);
    if (n <= 0) {
      return; /* end of stream, or a reset for unread data */
    }
  }
}

/* still_open: the server has not closed |fd| (nothing to read, no EOF). */
static int still_open(int fd) {
  struct pollfd p = {.fd = fd, .events = POLLIN, .revents = 0};
  return poll(&p, 1, 0) == 0;
}

/* a_rank_is_served connects rank |rank| through the real client, stores
 * and reads back a key. */
static void a_rank_is_served(uint16_t port, uint32_t rank) {
  dlcp_rdzv_client *cli = NULL;
  dlcp_errbuf eb;
  void *value = NULL;
  size_t len = 0;
  int found = 0;
  dlcp_tstamp deadline = dlcp_rt_deadline_after(5000);
  if (dlcp_rdzv_client_connect(&cli, LOOPBACK, port, rank, WORLD, JOB, NULL,
                               NULL, deadline, &eb) != 0) {
    fail_msg("a good rank was refused: %s", eb.msg);
  }
  assert_int_equal(dlcp_rdzv_set(cli, "k", "v", 1, deadline, &eb), 0);
  assert_int_equal(
      dlcp_rdzv_get(cli, "k", &found, &value, &len, deadline, &eb), 0);
  assert_true(found);
  assert_memory_equal(value, "v", 1);
  free(value);
  dlcp_rdzv_client_close(cli);
}

/* ---- cases -------------------------------------------------------------- */

static void test_silent_client(void **state) {
  dlcp_rdzv_server *srv = start(SHORT_MS, 8);
  char me[DLCP_NET_ADDRSTR_LEN];
  int fd = raw_connect(dlcp_rdzv_server_port(srv), me, sizeof(me));
  (void)state;
  expect_closed(fd);
  expect_line(me, "sent nothing within 300 ms (silent client)");
  assert_int_equal(dlcp_rdzv_server_rejected(srv), 1);
  close(fd);
  stop(srv);
}

/* Half a HELLO, then nothing: closed, and the log says how far it got. */
static void test_slow_hello(void **state) {
  dlcp_rdzv_server *srv = start(SHORT_MS, 8);
  char me[DLCP_NET_ADDRSTR_LEN];
  uint8_t msg[64];
  int fd = raw_connect(dlcp_rdzv_server_port(srv), me, sizeof(me));
  (void)state;
  (void)make_hello(msg, 1, JOB);
  assert_int_equal(write(fd, msg, 5), 5);
  expect_closed(fd);
  expect_line(me, "no complete HELLO within 300 ms (5 bytes received; "
                  "slow client)");
  close(fd);
  stop(srv);
}

/* A rank that begins a request after its HELLO and never finishes it. */
static void test_slow_request(void **state) {
  dlcp_rdzv_server *srv = start(SHORT_MS, 8);
  char me[DLCP_NET_ADDRSTR_LEN];
  char who[DLCP_NET_ADDRSTR_LEN + 16];
  uint8_t msg[64];
  size_t n;
  int fd = raw_connect(dlcp_rdzv_server_port(srv), me, sizeof(me));
  (void)state;
  n = make_hello(msg, 1, JOB);
  assert_int_equal(write(fd, msg, n), (ssize_t)n);
  assert_int_equal(read_status(fd), DLCP_RDZV_OK);
  n = make_request(msg, DLCP_RDZV_SET, "key", "value", 5);
  assert_int_equal(write(fd, msg, n - 3), (ssize_t)(n - 3));
  expect_closed(fd);
  snprintf(who, sizeof(who), "rank 1 (%s)", me);
  expect_line(who, "request still incomplete 300 ms after it began (17 "
                   "bytes received; slow client)");
  close(fd);
  stop(srv);
}

/* Slow is not wrong: a HELLO trickled in well within the limit is
 * answered, and a rank idle after its HELLO is never timed out. */
static void test_slow_but_in_time(void **state) {
  dlcp_rdzv_server *srv = start(3000, 8);
  uint8_t msg[64];
  size_t n = make_hello(msg, 1, JOB);
  size_t i;
  int fd = raw_connect(dlcp_rdzv_server_port(srv), NULL, 0);
  (void)state;
  for (i = 0; i < n; i += 8) {
    size_t k = n - i < 8 ? n - i : 8;
    assert_int_equal(write(fd, msg + i, k), (ssize_t)k);
    usleep(20 * 1000);
  }
  assert_int_equal(read_status(fd), DLCP_RDZV_OK);
  usleep(3500 * 1000); /* idle longer than io_timeout_ms */
  assert_true(still_open(fd));
  n = make_request(msg, DLCP_RDZV_GET, "none", NULL, 0);
  assert_int_equal(write(fd, msg, n), (ssize_t)n);
  assert_int_equal(read_status(fd), DLCP_RDZV_NOT_FOUND);
  assert_int_equal(dlcp_rdzv_server_rejected(srv), 0);
  close(fd);
  stop(srv);
}

/* A rank that asks for a large value over and over without reading the
 * answers: the server stops reading from it once an answer is stuck,
 * closes it after the limit, and serves the other rank meanwhile. */
static void test_client_that_does_not_read(void **state) {
  dlcp_rdzv_server *srv = start(SHORT_MS, 8);
  uint16_t port = dlcp_rdzv_server_port(srv);
  dlcp_rdzv_client *cli = NULL;
  static uint8_t big[60000];
  uint8_t msg[64];
  char me[DLCP_NET_ADDRSTR_LEN];
  int small = 4096;
  size_t n;
  int fd;
  int i;
  (void)state;
  memset(big, 'b', sizeof(big));
  assert_int_equal(dlcp_rdzv_client_connect(&cli, LOOPBACK, port, 0, WORLD, JOB,
                                            NULL, NULL,
                                            dlcp_rt_deadline_after(5000), NULL),
                   0);
  assert_int_equal(dlcp_rdzv_set(cli, "big", big, sizeof(big),
                                 dlcp_rt_deadline_after(5000), NULL),
                   0);
  fd = raw_connect(port, me, sizeof(me));
  assert_int_equal(
      setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small)), 0);
  n = make_hello(msg, 1, JOB);
  assert_int_equal(write(fd, msg, n), (ssize_t)n);
  assert_int_equal(read_status(fd), DLCP_RDZV_OK);
  n = make_request(msg, DLCP_RDZV_GET, "big", NULL, 0);
  for (i = 0; i < 200; i++) {
    assert_int_equal(write(fd, msg, n), (ssize_t)n);
  }
  /* The other rank is served while the answers pile up. */
  {
    void *value = NULL;
    size_t len = 0;
    int found = 0;
    assert_int_equal(dlcp_rdzv_get(cli, "big", &found, &value, &len,
                                   dlcp_rt_deadline_after(5000), NULL),
                     0);
    assert_int_equal(len, sizeof(big));
    free(value);
  }
  expect_line(me, "did not read its answer within 300 ms");
  expect_closed(fd);
  close(fd);
  dlcp_rdzv_client_close(cli);
  stop(srv);
}

static void test_garbage(void **state) {
  dlcp_rdzv_server *srv = start(LONG_MS, 8);
  char me[DLCP_NET_ADDRSTR_LEN];
  int fd = raw_connect(dlcp_rdzv_server_port(srv), me, sizeof(me));
  (void)state;
  assert_int_equal(write(fd, "GET / HTTP/1.0\r\n\r\n", 18), 18);
  assert_int_equal(read_status(fd), DLCP_RDZV_BAD_REQUEST);
  expect_closed(fd);
  expect_line(me, "not a dlcp rendezvous request (magic 0x4547)");
  close(fd);
  a_rank_is_served(dlcp_rdzv_server_port(srv), 0);
  stop(srv);
}

/* A header announcing more than the limits is refused from its 12 bytes,
 * before anything is allocated or the body read. */
static void test_oversized(void **state) {
  dlcp_rdzv_server *srv = start(LONG_MS, 8);
  uint16_t port = dlcp_rdzv_server_port(srv);
  char me[DLCP_NET_ADDRSTR_LEN];
  uint8_t msg[64];
  int fd = raw_connect(port, me, sizeof(me));
  (void)state;
  (void)make_request(msg, DLCP_RDZV_HELLO, NULL, NULL, 0);
  dlcp_put_u32(msg + 8, 1u << 30);
  assert_int_equal(write(fd, msg, DLCP_RDZV_HDR_LEN), DLCP_RDZV_HDR_LEN);
  assert_int_equal(read_status(fd), DLCP_RDZV_BAD_REQUEST);
  expect_closed(fd);
  expect_line(me, "value of 1073741824 bytes over the limit (256, 65536)");
  close(fd);

  fd = raw_connect(port, me, sizeof(me));
  (void)make_request(msg, DLCP_RDZV_HELLO, NULL, NULL, 0);
  dlcp_put_u16(msg + 4, DLCP_RDZV_MAX_KEY + 1);
  assert_int_equal(write(fd, msg, DLCP_RDZV_HDR_LEN), DLCP_RDZV_HDR_LEN);
  assert_int_equal(read_status(fd), DLCP_RDZV_BAD_REQUEST);
  expect_closed(fd);
  expect_line(me, "key of 257 bytes");
  close(fd);
  a_rank_is_served(port, 1);
  stop(srv);
}

/* A rank of another job (same port, same world): refused by name. */
static void test_wrong_job(void **state) {
  dlcp_rdzv_server *srv = start(LONG_MS, 8);
  uint16_t port = dlcp_rdzv_server_port(srv);
  dlcp_rdzv_client *cli = NULL;
  dlcp_errbuf eb;
  (void)state;
  assert_int_equal(dlcp_rdzv_client_connect(&cli, LOOPBACK, port, 1, WORLD,
                                            JOB + 1, NULL, NULL,
                                            dlcp_rt_deadline_after(5000), &eb),
                   DLCP_ERR_CONFIG);
  assert_null(cli);
  if (strstr(eb.msg, "job mismatch: this is job 7, rank 1 belongs to job 8") ==
      NULL) {
    fail_msg("client error does not name both jobs: %s", eb.msg);
  }
  expect_line("refused 127.0.0.1:", "job mismatch: this is job 7, rank 1 "
                                    "belongs to job 8");
  a_rank_is_served(port, 1);
  stop(srv);
}

/* A flood of connections that never say HELLO: at most max_strays stay
 * open (the oldest are evicted in order, each logged), and a rank that
 * connects in the middle of it is served. */
static void test_connection_flood(void **state) {
  enum { STRAYS = 4, FLOOD = 20 };
  dlcp_rdzv_server *srv = start(LONG_MS, STRAYS);
  uint16_t port = dlcp_rdzv_server_port(srv);
  char me[FLOOD][DLCP_NET_ADDRSTR_LEN];
  int fd[FLOOD];
  int i;
  (void)state;
  /* The kernel's accept queue is FIFO: accept order is connect order. */
  for (i = 0; i < FLOOD; i++) {
    fd[i] = raw_connect(port, me[i], sizeof(me[i]));
  }
  for (i = 0; i < FLOOD - STRAYS; i++) {
    expect_closed(fd[i]);
    expect_line(me[i], "4 connections without HELLO (limit 4); the oldest");
  }
  for (i = FLOOD - STRAYS; i < FLOOD; i++) {
    assert_true(still_open(fd[i]));
  }
  /* The rank's connection evicts the oldest remaining stray. */
  a_rank_is_served(port, 0);
  expect_closed(fd[FLOOD - STRAYS]);
  for (i = FLOOD - STRAYS + 1; i < FLOOD; i++) {
    assert_true(still_open(fd[i]));
  }
  for (i = 0; i < FLOOD; i++) {
    close(fd[i]);
  }
  assert_int_equal(dlcp_rdzv_server_rejected(srv), FLOOD - STRAYS + 1);
  stop(srv);
}

/* A whole world connecting before any of its HELLOs is read (a job of
 * 200 ranks starting at once): with the default limits no rank is taken
 * for a stray and evicted.  Until the default was 64 strays whatever the
 * world, 256 threads joining at once lost 5 ranks that way and the job
 * timed out. */
static void test_whole_world_connects_at_once(void **state) {
  enum { RANKS = 200 };
  dlcp_rdzv_server_config cfg;
  dlcp_rdzv_server *srv = NULL;
  uint8_t buf[DLCP_RDZV_HDR_LEN + DLCP_RDZV_HELLO_LEN];
  static int fd[RANKS];
  (void)state;
  dlcp_rdzv_server_config_default(&cfg, RANKS, JOB);
  cfg.log = capture;
  cfg.log_arg = &g_log;
  log_reset();
  assert_int_equal(dlcp_rdzv_server_start(&srv, LOOPBACK, 0, &cfg, NULL), 0);
  uint16_t port = dlcp_rdzv_server_port(srv);
  for (uint32_t r = 0; r < RANKS; r++) {
    fd[r] = raw_connect(port, NULL, 0);
  }
  usleep(200 * 1000); /* the server accepts them all, HELLO-less */
  for (uint32_t r = 0; r < RANKS; r++) {
    uint8_t v[DLCP_RDZV_HELLO_LEN];
    const dlcp_rdzv_hello h = {
        .rank = r, .world = RANKS, .job = JOB, .incarnation = r + 1};
    dlcp_rdzv_put_hello(v, &h);
    size_t n = make_request(buf, DLCP_RDZV_HELLO, NULL, v, sizeof(v));
    assert_int_equal(write(fd[r], buf, n), (ssize_t)n);
  }
  for (uint32_t r = 0; r < RANKS; r++) {
    assert_int_equal(read_status(fd[r]), DLCP_RDZV_OK);
    close(fd[r]);
  }
  assert_int_equal(count_lines("without HELLO", NULL), 0);
  assert_int_equal(dlcp_rdzv_server_rejected(srv), 0);
  stop(srv);
}

/* More evictions than LOG_BURST in a second: lines beyond the burst are
 * not written but counted, and the count is reported (here at stop), so
 * logged + suppressed = evictions exactly. */
static void test_flood_log_is_bounded(void **state) {
  enum { FLOOD = 60 };
  dlcp_rdzv_server *srv = start(LONG_MS, 1);
  uint16_t port = dlcp_rdzv_server_port(srv);
  size_t logged;
  size_t suppressed = 0;
  size_t i;
  int fd[FLOOD];
  (void)state;
  for (i = 0; i < FLOOD; i++) {
    fd[i] = raw_connect(port, NULL, 0);
  }
  for (i = 0; i + 1 < FLOOD; i++) {
    expect_closed(fd[i]);
  }
  stop(srv);
  logged = count_lines("connections without HELLO", NULL);
  for (i = 0; i < g_log.n; i++) {
    const char *s = strstr(g_log.lines[i], "(and ");
    if (s != NULL) {
      suppressed += strtoul(s + 5, NULL, 10);
    }
  }
  assert_true(logged >= 20);
  assert_int_equal(logged + suppressed, FLOOD - 1);
  for (i = 0; i < FLOOD; i++) {
    close(fd[i]);
  }
}

/* A rank that stores keys in a loop hits the key limit (16 per rank + 64)
 * and is refused with the limits in the message. */
static void test_too_many_keys(void **state) {
  dlcp_rdzv_server *srv = start(LONG_MS, 8);
  dlcp_rdzv_client *cli = NULL;
  dlcp_errbuf eb;
  char key[32];
  int i;
  int rv = 0;
  (void)state;
  assert_int_equal(dlcp_rdzv_client_connect(
                       &cli, LOOPBACK, dlcp_rdzv_server_port(srv), 0, WORLD,
                       JOB, NULL, NULL, dlcp_rt_deadline_after(5000), &eb),
                   0);
  for (i = 0; i < 1000 && rv == 0; i++) {
    snprintf(key, sizeof(key), "junk/%d", i);
    rv = dlcp_rdzv_set(cli, key, "x", 1, dlcp_rt_deadline_after(5000), &eb);
  }
  assert_int_equal(rv, DLCP_ERR_CONFIG);
  assert_int_equal(i, WORLD * 16 + 64 + 1);
  assert_non_null(strstr(eb.msg, "store full (limits: 67108864 bytes, 96 "
                                 "keys)"));
  expect_line("refused rank 0 (127.0.0.1:", "store full");
  dlcp_rdzv_client_close(cli);
  /* What was stored before the limit is still served. */
  {
    void *value = NULL;
    size_t len = 0;
    int found = 0;
    assert_int_equal(dlcp_rdzv_client_connect(
                         &cli, LOOPBACK, dlcp_rdzv_server_port(srv), 1, WORLD,
                         JOB, NULL, NULL, dlcp_rt_deadline_after(5000), &eb),
                     0);
    assert_int_equal(dlcp_rdzv_get(cli, "junk/95", &found, &value, &len,
                                   dlcp_rt_deadline_after(5000), &eb),
                     0);
    assert_true(found);
    free(value);
    dlcp_rdzv_client_close(cli);
  }
  stop(srv);
}

/* ---- GATHER ------------------------------------------------------------ */

/* send_request writes one request on |fd| (value up to 64 KiB + 64). */
static void send_request(int fd, uint8_t op, const char *key, const void *val,
                         uint32_t val_len) {
  static uint8_t buf[DLCP_RDZV_HDR_LEN + DLCP_RDZV_MAX_KEY + 65600];
  size_t n = make_request(buf, op, key, val, val_len);
  assert_int_equal(dlcp_net_write_all(fd, buf, n, dlcp_rt_deadline_after(5000)),
                   0);
}

static void send_gather(int fd, const char *name, uint32_t timeout_ms,
                        uint32_t first, uint32_t count) {
  uint8_t v[DLCP_RDZV_GATHER_LEN];
  const dlcp_rdzv_gather g = {
      .timeout_ms = timeout_ms, .first = first, .count = count};
  dlcp_rdzv_put_gather(v, &g);
  send_request(fd, DLCP_RDZV_GATHER, name, v, sizeof(v));
}

/* rank_connect opens a raw connection that has said HELLO as |rank| of
 * |world|. */
static int rank_connect(uint16_t port, uint32_t rank, uint32_t world) {
  uint8_t msg[64];
  int fd = raw_connect(port, NULL, 0);
  size_t n = make_hello_in(msg, rank, world, JOB);
  assert_int_equal(write(fd, msg, n), (ssize_t)n);
  assert_int_equal(read_status(fd), DLCP_RDZV_OK);
  return fd;
}

static dlcp_rdzv_server *start_world(uint32_t world) {
  dlcp_rdzv_server_config cfg;
  dlcp_rdzv_server *srv = NULL;
  dlcp_rdzv_server_config_default(&cfg, world, JOB);
  cfg.log = capture;
  cfg.log_arg = &g_log;
  log_reset();
  assert_int_equal(dlcp_rdzv_server_start(&srv, LOOPBACK, 0, &cfg, NULL), 0);
  return srv;
}

/* expect_gathered reads a GATHER's OK answer and checks it holds exactly
 * the |n| values |want| of lengths |lens|. */
static void expect_gathered(int fd, uint32_t n, const char *const *want,
                            const uint32_t *lens) {
  static uint8_t value[DLCP_RDZV_MAX_ANSWER];
  dlcp_rdzv_gathered g;
  const uint8_t *v;
  uint32_t len;
  assert_int_equal(read_answer(fd, value, &len), DLCP_RDZV_OK);
  assert_int_equal(dlcp_rdzv_gathered_open(&g, value, len), 0);
  assert_int_equal(g.count, n);
  for (uint32_t i = 0; i < n; i++) {
    assert_int_equal(dlcp_rdzv_gathered_next(&g, &v, &len), 1);
    assert_int_equal(len, lens[i]);
    assert_memory_equal(v, want[i], len);
  }
  assert_int_equal(dlcp_rdzv_gathered_next(&g, &v, &len), 0);
}

/* A GATHER of keys 1..3 stays parked while any is missing, whatever the
 * order they come in, and is answered in key order once the last comes;
 * one whose key never comes is answered NOT_FOUND at its timeout. */
static void test_gather_waits_for_every_key(void **state) {
  dlcp_rdzv_server *srv = start_world(4);
  uint16_t port = dlcp_rdzv_server_port(srv);
  int a = rank_connect(port, 0, 4);
  int b = rank_connect(port, 1, 4);
  (void)state;
  send_gather(a, "g", 5000, 1, 3);
  send_request(b, DLCP_RDZV_SET, "g/3", "three", 5);
  assert_int_equal(read_status(b), DLCP_RDZV_OK);
  send_request(b, DLCP_RDZV_SET, "g/1", "one", 3);
  assert_int_equal(read_status(b), DLCP_RDZV_OK);
  send_request(b, DLCP_RDZV_SET, "g/0", "zero", 4);
  assert_int_equal(read_status(b), DLCP_RDZV_OK);
  assert_true(still_open(a)); /* no answer: g/2 is missing */
  send_request(b, DLCP_RDZV_SET, "g/2", NULL, 0);
  assert_int_equal(read_status(b), DLCP_RDZV_OK);
  {
    static const char *const want[] = {"one", "", "three"};
    static const uint32_t lens[] = {3, 0, 5};
    expect_gathered(a, 3, want, lens);
  }
  send_gather(a, "h", 100, 0, 4);
  assert_int_equal(read_status(a), DLCP_RDZV_NOT_FOUND);
  /* Present already: answered at once, even with no time to wait. */
  send_gather(a, "g", 0, 0, 2);
  {
    static const char *const want[] = {"zero", "one"};
    static const uint32_t lens[] = {4, 3};
    expect_gathered(a, 2, want, lens);
  }
  /* 2 HELLOs, 4 SETs, 3 GATHERs: a parked GATHER costs no request. */
  assert_int_equal(dlcp_rdzv_server_requests(srv), 9);
  assert_int_equal(dlcp_rdzv_server_rejected(srv), 0);
  close(a);
  close(b);
  stop(srv);
}

/* Values that do not all fit in one answer come as many as fit, from the
 * first: two of 30,000 bytes, or one of the longest alone. */
static void test_gather_answer_split(void **state) {
  enum { BIG = 30000 };
  dlcp_rdzv_server *srv = start_world(4);
  int a = rank_connect(dlcp_rdzv_server_port(srv), 0, 4);
  static char v[4][DLCP_RDZV_MAX_VALUE];
  const char *want[4];
  uint32_t lens[4];
  char key[8];
  (void)state;
  for (int i = 0; i < 4; i++) {
    memset(v[i], 'a' + i, sizeof(v[i]));
    snprintf(key, sizeof(key), "g/%d", i);
    send_request(a, DLCP_RDZV_SET, key, v[i], BIG);
    assert_int_equal(read_status(a), DLCP_RDZV_OK);
    want[i] = v[i];
    lens[i] = BIG;
  }
  send_gather(a, "g", 1000, 0, 4);
  expect_gathered(a, 2, want, lens);
  send_gather(a, "g", 1000, 2, 2);
  expect_gathered(a, 2, want + 2, lens + 2);
  send_request(a, DLCP_RDZV_SET, "g/1", v[1], DLCP_RDZV_MAX_VALUE);
  assert_int_equal(read_status(a), DLCP_RDZV_OK);
  lens[1] = DLCP_RDZV_MAX_VALUE;
  send_gather(a, "g", 1000, 1, 3);
  expect_gathered(a, 1, want + 1, lens + 1);
  send_gather(a, "g", 1000, 0, 4);
  expect_gathered(a, 1, want, lens);
  close(a);
  stop(srv);
}

/* A GATHER outside the world, of none, with a name too long for its keys
 * or a value not of its size is refused, and logged. */
static void test_bad_gather_refused(void **state) {
  dlcp_rdzv_server *srv = start_world(4);
  uint16_t port = dlcp_rdzv_server_port(srv);
  char name[DLCP_RDZV_MAX_KEY + 1];
  int fd;
  (void)state;
  fd = rank_connect(port, 0, 4);
  send_gather(fd, "g", 0, 0, 0);
  assert_int_equal(read_status(fd), DLCP_RDZV_BAD_REQUEST);
  expect_closed(fd);
  close(fd);
  fd = rank_connect(port, 0, 4);
  send_gather(fd, "g", 0, 3, 2);
  assert_int_equal(read_status(fd), DLCP_RDZV_BAD_REQUEST);
  expect_closed(fd);
  close(fd);
  fd = rank_connect(port, 0, 4);
  send_gather(fd, "g", 0, UINT32_MAX, 2);
  assert_int_equal(read_status(fd), DLCP_RDZV_BAD_REQUEST);
  expect_closed(fd);
  close(fd);
  fd = rank_connect(port, 0, 4);
  send_request(fd, DLCP_RDZV_GATHER, "g", "12345678", 8);
  assert_int_equal(read_status(fd), DLCP_RDZV_BAD_REQUEST);
  expect_closed(fd);
  close(fd);
  expect_line("refused rank 0 (127.0.0.1:",
              "GATHER of 2 keys from 3 is not within the world of 4");
  expect_line("refused rank 0 (127.0.0.1:", "GATHER must carry 12 bytes");
  /* The longest name whose keys fit is served; one byte more is not. */
  memset(name, 'n', sizeof(name));
  name[DLCP_RDZV_GATHER_MAX_NAME] = '\0';
  fd = rank_connect(port, 0, 4);
  send_gather(fd, name, 0, 0, 4);
  assert_int_equal(read_status(fd), DLCP_RDZV_NOT_FOUND);
  name[DLCP_RDZV_GATHER_MAX_NAME] = 'n';
  name[DLCP_RDZV_GATHER_MAX_NAME + 1] = '\0';
  send_gather(fd, name, 0, 0, 4);
  assert_int_equal(read_status(fd), DLCP_RDZV_BAD_REQUEST);
  expect_closed(fd);
  close(fd);
  expect_line("refused rank 0 (127.0.0.1:", "GATHER name of 246 bytes");
  assert_int_equal(dlcp_rdzv_server_rejected(srv), 5);
  stop(srv);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_silent_client),
      cmocka_unit_test(test_slow_hello),
      cmocka_unit_test(test_slow_request),
      cmocka_unit_test(test_slow_but_in_time),
      cmocka_unit_test(test_client_that_does_not_read),
      cmocka_unit_test(test_garbage),
      cmocka_unit_test(test_oversized),
      cmocka_unit_test(test_wrong_job),
      cmocka_unit_test(test_connection_flood),
      cmocka_unit_test(test_whole_world_connects_at_once),
      cmocka_unit_test(test_flood_log_is_bounded),
      cmocka_unit_test(test_too_many_keys),
      cmocka_unit_test(test_gather_waits_for_every_key),
      cmocka_unit_test(test_gather_answer_split),
      cmocka_unit_test(test_bad_gather_refused),
  };
  int rv;
  pthread_mutex_init(&g_log.mu, NULL);
  pthread_cond_init(&g_log.cv, NULL);
  alarm(120);
  rv = cmocka_run_group_tests(tests, NULL, NULL);
  log_reset();
  return rv;
}
