/*
 * rt_rendezvous_test.c: the rendezvous store over real loopback sockets.
 * Ranks are threads of this process, each with its own connection, which
 * exercises the same code paths as separate processes would.  Deadlines
 * are short (hundreds of ms) so the timeout cases cost little; alarm()
 * turns any hang into a failure.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "dlcp/dlcp.h"
#include "rt/clock.h"
#include "rt/env.h"
#include "rt/net.h"
#include "rt/rendezvous.h"
#include "wire/bytes.h"

#define LOOPBACK "127.0.0.1"
#define MAX_RANKS 8

typedef struct rank_args {
  uint32_t rank;
  uint32_t world;
  uint16_t port;
  uint32_t timeout_ms;
  int rv;
  dlcp_errbuf eb;
  char got[MAX_RANKS][64]; /* every rank's published address */
} rank_args;

/* start_server starts a store for a world of |world| in job 0 (what
 * run_rank's zeroed environment carries). */
static int start_server(dlcp_rdzv_server **srv, uint32_t world) {
  dlcp_rdzv_server_config cfg;
  dlcp_rdzv_server_config_default(&cfg, world, 0);
  return dlcp_rdzv_server_start(srv, LOOPBACK, 0, &cfg, NULL);
}

static uint16_t free_port(void) {
  uint16_t port = 0;
  assert_int_equal(dlcp_net_free_port(LOOPBACK, &port, NULL), 0);
  return port;
}

/* run_rank is one rank's life through the public join/exchange/leave
 * sequence, with the environment a launcher would give it. */
static void *run_rank(void *arg) {
  rank_args *a = arg;
  dlcp_rt_env env;
  dlcp_rdzv rdzv;
  char mine[64];
  void *values[MAX_RANKS];
  size_t lens[MAX_RANKS];
  uint32_t r;

  memset(&env, 0, sizeof(env));
  strcpy(env.master_addr, LOOPBACK);
  env.master_port = a->port;
  env.rank = a->rank;
  env.world_size = a->world;
  env.rdzv_timeout_ms = a->timeout_ms;
  dlcp_errbuf_clear(&a->eb);
  a->rv = dlcp_rdzv_join(&rdzv, &env, &a->eb);
  if (a->rv != 0) {
    return NULL;
  }
  snprintf(mine, sizeof(mine), "127.0.0.1:%" PRIu32, 40000 + a->rank);
  a->rv =
      dlcp_rdzv_exchange(rdzv.client, "addr", mine, strlen(mine), values, lens,
                         dlcp_rt_deadline_after(a->timeout_ms), &a->eb);
  if (a->rv == 0) {
    for (r = 0; r < a->world; r++) {
      snprintf(a->got[r], sizeof(a->got[r]), "%s", (char *)values[r]);
    }
    dlcp_rdzv_free_values(values, a->world);
  }
  if (a->rv == 0) {
    a->rv = dlcp_rdzv_leave(&rdzv, &a->eb);
  } else {
    (void)dlcp_rdzv_leave(&rdzv, NULL);
  }
  return NULL;
}

static void check_exchange(rank_args *args, uint32_t world) {
  uint32_t r;
  uint32_t k;
  for (r = 0; r < world; r++) {
    if (args[r].rv != 0) {
      fail_msg("rank %" PRIu32 ": %s", r, args[r].eb.msg);
    }
    for (k = 0; k < world; k++) {
      char want[64];
      snprintf(want, sizeof(want), "127.0.0.1:%" PRIu32, 40000 + k);
      assert_string_equal(args[r].got[k], want);
    }
  }
}

static void test_exchange_all_ranks(void **state) {
  rank_args args[MAX_RANKS];
  pthread_t th[MAX_RANKS];
  uint32_t world = MAX_RANKS;
  uint16_t port = free_port();
  uint32_t r;
  (void)state;
  memset(args, 0, sizeof(args));
  for (r = 0; r < world; r++) {
    args[r].rank = r;
    args[r].world = world;
    args[r].port = port;
    args[r].timeout_ms = 5000;
    assert_int_equal(pthread_create(&th[r], NULL, run_rank, &args[r]), 0);
  }
  for (r = 0; r < world; r++) {
    pthread_join(th[r], NULL);
  }
  check_exchange(args, world);
}

/* An exchange of values too large for one answer: every rank gets every
 * value whole, in a few GATHERs each -- not one request per rank.  The
 * ranks exchange one after the other, all values published first, so
 * that no GATHER waits and the count of requests is exact. */
static void test_exchange_in_several_answers(void **state) {
  enum { WORLD = MAX_RANKS, BIG = 20000 };
  dlcp_rdzv_server *srv = NULL;
  dlcp_rdzv_client *cli[WORLD];
  static char mine[WORLD][BIG];
  char key[16];
  dlcp_errbuf eb;
  (void)state;
  assert_int_equal(start_server(&srv, WORLD), 0);
  for (uint32_t r = 0; r < WORLD; r++) {
    memset(mine[r], 'a' + (int)r, BIG);
    assert_int_equal(
        dlcp_rdzv_client_connect(&cli[r], LOOPBACK, dlcp_rdzv_server_port(srv),
                                 r, WORLD, 0, NULL, NULL,
                                 dlcp_rt_deadline_after(5000), &eb),
        0);
    snprintf(key, sizeof(key), "big/%" PRIu32, r);
    assert_int_equal(dlcp_rdzv_set(cli[r], key, mine[r], BIG,
                                   dlcp_rt_deadline_after(5000), &eb),
                     0);
  }
  for (uint32_t r = 0; r < WORLD; r++) {
    void *values[WORLD];
    size_t lens[WORLD];
    if (dlcp_rdzv_exchange(cli[r], "big", mine[r], BIG, values, lens,
                           dlcp_rt_deadline_after(5000), &eb) != 0) {
      fail_msg("rank %" PRIu32 ": %s", r, eb.msg);
    }
    for (uint32_t k = 0; k < WORLD; k++) {
      assert_int_equal(lens[k], BIG);
      assert_memory_equal(values[k], mine[k], BIG);
      assert_int_equal(((char *)values[k])[BIG], '\0');
    }
    dlcp_rdzv_free_values(values, WORLD);
  }
  /* Per rank: HELLO, a SET before, then the exchange's SET and three
   * GATHERs (three values of 20,000 bytes fit in an answer: 3, 3, 2). */
  assert_int_equal(dlcp_rdzv_server_requests(srv), WORLD * 6);
  for (uint32_t r = 0; r < WORLD; r++) {
    assert_int_equal(dlcp_rdzv_client_reconnects(cli[r]), 0);
    dlcp_rdzv_client_close(cli[r]);
  }
  dlcp_rdzv_server_stop(srv, dlcp_rt_now());
}

/* Ranks 1.. start first and must keep retrying until rank 0 is up. */
static void test_rank0_starts_late(void **state) {
  rank_args args[4];
  pthread_t th[4];
  uint32_t world = 4;
  uint16_t port = free_port();
  uint32_t r;
  (void)state;
  memset(args, 0, sizeof(args));
  for (r = 0; r < world; r++) {
    args[r].rank = r;
    args[r].world = world;
    args[r].port = port;
    args[r].timeout_ms = 5000;
  }
  for (r = 1; r < world; r++) {
    assert_int_equal(pthread_create(&th[r], NULL, run_rank, &args[r]), 0);
  }
  usleep(300 * 1000);
  assert_int_equal(pthread_create(&th[0], NULL, run_rank, &args[0]), 0);
  for (r = 0; r < world; r++) {
    pthread_join(th[r], NULL);
  }
  check_exchange(args, world);
}

static void test_rank0_never_starts(void **state) {
  uint16_t port = free_port();
  dlcp_rdzv_client *cli = NULL;
  dlcp_errbuf eb;
  char where[32];
  dlcp_tstamp start = dlcp_rt_now();
  uint64_t elapsed_ms;
  int rv;
  (void)state;
  rv = dlcp_rdzv_client_connect(&cli, LOOPBACK, port, 1, 2, 0, NULL, NULL,
                                dlcp_rt_deadline_after(300), &eb);
  elapsed_ms = (dlcp_rt_now() - start) / DLCP_NS_PER_MS;
  assert_int_equal(rv, DLCP_ERR_TIMEOUT);
  assert_null(cli);
  snprintf(where, sizeof(where), "127.0.0.1:%u", (unsigned)port);
  if (strstr(eb.msg, where) == NULL || strstr(eb.msg, "rank 0") == NULL ||
      strstr(eb.msg, "Connection refused") == NULL) {
    fail_msg("error does not name rank 0's address: %s", eb.msg);
  }
  assert_true(elapsed_ms >= 290);
  assert_true(elapsed_ms < 1500);
}

/* Only ranks 0 and 1 of 4 show up: the error names 2 and 3. */
static void test_exchange_timeout_names_missing(void **state) {
  dlcp_rdzv_server *srv = NULL;
  dlcp_rdzv_client *cli[2] = {NULL, NULL};
  dlcp_errbuf eb;
  uint32_t r;
  (void)state;
  assert_int_equal(start_server(&srv, 4), 0);
  for (r = 0; r < 2; r++) {
    assert_int_equal(dlcp_rdzv_client_connect(
                         &cli[r], LOOPBACK, dlcp_rdzv_server_port(srv), r, 4, 0,
                         NULL, NULL, dlcp_rt_deadline_after(2000), &eb),
                     0);
  }
  /* Rank 1 has published before rank 0 gives up. */
  assert_int_equal(dlcp_rdzv_set(cli[1], "addr/1", "x", 1,
                                 dlcp_rt_deadline_after(2000), &eb),
                   0);
  for (r = 0; r < 2; r++) {
    void *values[4];
    size_t lens[4];
    assert_int_equal(dlcp_rdzv_exchange(cli[r], "addr", "x", 1, values, lens,
                                        dlcp_rt_deadline_after(200), &eb),
                     DLCP_ERR_TIMEOUT);
    if (strstr(eb.msg, "ranks 2, 3 of 4") == NULL ||
        strstr(eb.msg, "'addr'") == NULL) {
      fail_msg("error does not list the missing ranks: %s", eb.msg);
    }
    assert_null(values[0]);
    dlcp_rdzv_client_close(cli[r]);
  }
  dlcp_rdzv_server_stop(srv, dlcp_rt_now());
}

static void test_world_size_mismatch(void **state) {
  dlcp_rdzv_server *srv = NULL;
  dlcp_rdzv_client *cli = NULL;
  dlcp_errbuf eb;
  (void)state;
  assert_int_equal(start_server(&srv, 2), 0);
  assert_int_equal(dlcp_rdzv_client_connect(
                       &cli, LOOPBACK, dlcp_rdzv_server_port(srv), 1, 3, 0,
                       NULL, NULL, dlcp_rt_deadline_after(2000), &eb),
                   DLCP_ERR_CONFIG);
  assert_null(cli);
  assert_non_null(strstr(eb.msg, "WORLD_SIZE mismatch"));
  dlcp_rdzv_server_stop(srv, dlcp_rt_now());
}

static void test_duplicate_rank(void **state) {
  dlcp_rdzv_server *srv = NULL;
  dlcp_rdzv_client *a = NULL;
  dlcp_rdzv_client *b = NULL;
  dlcp_errbuf eb;
  (void)state;
  assert_int_equal(start_server(&srv, 2), 0);
  assert_int_equal(dlcp_rdzv_client_connect(
                       &a, LOOPBACK, dlcp_rdzv_server_port(srv), 1, 2, 0, NULL,
                       NULL, dlcp_rt_deadline_after(2000), &eb),
                   0);
  assert_int_equal(dlcp_rdzv_client_connect(
                       &b, LOOPBACK, dlcp_rdzv_server_port(srv), 1, 2, 0, NULL,
                       NULL, dlcp_rt_deadline_after(2000), &eb),
                   DLCP_ERR_CONFIG);
  assert_non_null(strstr(eb.msg, "rank 1 is already connected"));
  dlcp_rdzv_client_close(a);
  dlcp_rdzv_server_stop(srv, dlcp_rt_now());
}

/* A server on every address (host NULL: MASTER_ADDR not bindable here)
 * takes clients by IPv4 and, where the host has it, by IPv6. */
static void test_server_on_every_address(void **state) {
  dlcp_rdzv_server *srv = NULL;
  dlcp_rdzv_client *a = NULL;
  dlcp_rdzv_client *b = NULL;
  dlcp_rdzv_server_config cfg;
  dlcp_errbuf eb;
  (void)state;
  dlcp_rdzv_server_config_default(&cfg, 3, 0);
  assert_int_equal(dlcp_rdzv_server_start(&srv, NULL, 0, &cfg, &eb), 0);
  uint16_t port = dlcp_rdzv_server_port(srv);
  assert_int_equal(dlcp_rdzv_client_connect(&a, "127.0.0.1", port, 1, 3, 0,
                                            NULL, NULL,
                                            dlcp_rt_deadline_after(2000), &eb),
                   0);
  int v6 = socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in6 lo = {.sin6_family = AF_INET6,
                            .sin6_addr = IN6ADDR_LOOPBACK_INIT};
  bool has_v6 = v6 >= 0 && bind(v6, (struct sockaddr *)&lo, sizeof(lo)) == 0;
  if (v6 >= 0) {
    close(v6);
  }
  if (has_v6) {
    assert_int_equal(
        dlcp_rdzv_client_connect(&b, "::1", port, 2, 3, 0, NULL, NULL,
                                 dlcp_rt_deadline_after(2000), &eb),
        0);
  }
  dlcp_rdzv_client_close(b);
  dlcp_rdzv_client_close(a);
  dlcp_rdzv_server_stop(srv, dlcp_rt_now());
}

/* raw_connect opens a plain TCP connection to the server. */
static int raw_connect(uint16_t port) {
  dlcp_sockaddr addr;
  int fd;
  assert_int_equal(dlcp_net_resolve(&addr, LOOPBACK, port, SOCK_STREAM, NULL),
                   0);
  fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  assert_true(fd >= 0);
  assert_int_equal(connect(fd, &addr.sa, dlcp_sockaddr_len(&addr)), 0);
  return fd;
}

/* raw_expect_rejected sends |len| bytes and expects an error answer (if
 * |answered|) and then the connection to be closed by the server. */
static void raw_expect_rejected(uint16_t port, const uint8_t *msg, size_t len,
                                int answered) {
  uint8_t hdr[DLCP_RDZV_HDR_LEN];
  uint8_t rest[512];
  dlcp_tstamp deadline = dlcp_rt_deadline_after(2000);
  int fd = raw_connect(port);
  assert_int_equal(dlcp_net_write_all(fd, msg, len, deadline), 0);
  if (answered) {
    uint32_t vlen;
    assert_int_equal(dlcp_net_read_all(fd, hdr, sizeof(hdr), deadline), 0);
    assert_int_equal(dlcp_get_u16(hdr), DLCP_RDZV_MAGIC);
    assert_true(dlcp_get_u8(hdr + 3) == DLCP_RDZV_BAD_REQUEST ||
                dlcp_get_u8(hdr + 3) == DLCP_RDZV_REJECTED);
    vlen = dlcp_get_u32(hdr + 8);
    assert_true(vlen > 0 && vlen < sizeof(rest));
    assert_int_equal(dlcp_net_read_all(fd, rest, vlen, deadline), 0);
  }
  /* Then end of stream: the server hung up on us. */
  assert_int_equal(dlcp_net_read_all(fd, rest, 1, deadline),
                   DLCP_ERR_PEER_CLOSED);
  close(fd);
}

static size_t make_header(uint8_t *buf, uint16_t magic, uint8_t op,
                          uint16_t key_len, uint32_t val_len) {
  uint8_t *p = buf;
  p = dlcp_put_u16(p, magic);
  p = dlcp_put_u8(p, DLCP_RDZV_VERSION);
  p = dlcp_put_u8(p, op);
  p = dlcp_put_u16(p, key_len);
  p = dlcp_put_u16(p, 0);
  dlcp_put_u32(p, val_len);
  return DLCP_RDZV_HDR_LEN;
}

/* Garbage, oversized, out-of-order and truncated requests are refused
 * without disturbing a well-behaved client on the same server. */
static void test_garbage_rejected(void **state) {
  dlcp_rdzv_server *srv = NULL;
  dlcp_rdzv_client *cli = NULL;
  uint8_t msg[64];
  uint16_t port;
  int idle_fd;
  int found;
  void *value;
  size_t len;
  size_t n;
  (void)state;
  assert_int_equal(start_server(&srv, 2), 0);
  port = dlcp_rdzv_server_port(srv);

  /* A client that sends half a header and then just sits there. */
  idle_fd = raw_connect(port);
  assert_int_equal(write(idle_fd, "\x5a\xd1\x01", 3), 3);

  raw_expect_rejected(port, (const uint8_t *)"GET / HTTP/1.0\r\n\r\n", 18, 1);
  n = make_header(msg, DLCP_RDZV_MAGIC, DLCP_RDZV_SET, 4, 0xFFFFFFFFu);
  raw_expect_rejected(port, msg, n, 1); /* 4 GiB value */
  n = make_header(msg, DLCP_RDZV_MAGIC, 9, 0, 0);
  raw_expect_rejected(port, msg, n, 1); /* unknown op */
  n = make_header(msg, DLCP_RDZV_MAGIC, DLCP_RDZV_SET, 1, 1);
  memcpy(msg + n, "kv", 2);
  raw_expect_rejected(port, msg, n + 2, 1); /* SET before HELLO */
  n = make_header(msg, DLCP_RDZV_MAGIC, DLCP_RDZV_HELLO, 0, 3);
  memcpy(msg + n, "abc", 3);
  raw_expect_rejected(port, msg, n + 3, 1); /* short HELLO */
  /* Truncated: a header announcing 100 value bytes, then hang up. */
  {
    int fd = raw_connect(port);
    n = make_header(msg, DLCP_RDZV_MAGIC, DLCP_RDZV_HELLO, 0, 100);
    assert_int_equal(write(fd, msg, n), (ssize_t)n);
    close(fd);
  }

  /* The server still serves a real client. */
  assert_int_equal(dlcp_rdzv_client_connect(&cli, LOOPBACK, port, 0, 2, 0, NULL,
                                            NULL, dlcp_rt_deadline_after(2000),
                                            NULL),
                   0);
  assert_int_equal(
      dlcp_rdzv_set(cli, "k", "v1", 2, dlcp_rt_deadline_after(2000), NULL), 0);
  assert_int_equal(dlcp_rdzv_get(cli, "k", &found, &value, &len,
                                 dlcp_rt_deadline_after(2000), NULL),
                   0);
  assert_true(found);
  assert_int_equal(len, 2);
  assert_memory_equal(value, "v1", 2);
  free(value);
  assert_int_equal(dlcp_rdzv_get(cli, "nope", &found, &value, &len,
                                 dlcp_rt_deadline_after(2000), NULL),
                   0);
  assert_false(found);
  assert_true(dlcp_rdzv_server_rejected(srv) >= 5);

  dlcp_rdzv_client_close(cli);
  close(idle_fd);
  dlcp_rdzv_server_stop(srv, dlcp_rt_deadline_after(1000));
}

/* Rank 1 of a two-rank job that publishes |record| as its address. */
typedef struct fake_rank {
  uint16_t port;
  const char *record;
} fake_rank;

static void *run_fake_rank(void *arg) {
  fake_rank *f = arg;
  dlcp_rt_env env;
  dlcp_rdzv rdzv;
  void *values[2];
  size_t lens[2];
  memset(&env, 0, sizeof(env));
  strcpy(env.master_addr, LOOPBACK);
  env.master_port = f->port;
  env.rank = 1;
  env.world_size = 2;
  env.job = 1; /* dlcp_comm_config_default's */
  env.rdzv_timeout_ms = 5000;
  if (dlcp_rdzv_join(&rdzv, &env, NULL) != 0) {
    return NULL;
  }
  if (dlcp_rdzv_exchange(rdzv.client, "addr", f->record,
                         strlen(f->record) + 1, values, lens,
                         dlcp_rt_deadline_after(5000), NULL) == 0) {
    dlcp_rdzv_free_values(values, 2);
  }
  (void)dlcp_rdzv_leave(&rdzv, NULL); /* rank 0 has given up */
  return NULL;
}

/* A rank's address record is checked field by field: rank 0 refuses to
 * join with a peer whose record it cannot read, naming the peer. */
static void test_address_record_checked(void **state) {
  (void)state;
  const struct {
    const char *record;
    const char *says;
  } cases[] = {
      {"127.0.0.1 9 1 9 machine 1234", "rank 1 published a malformed "
                                       "machine id '1234'"},
      {"127.0.0.1 9 1 9 machine 0123456789abcdef0123456789abcdef0123",
       "malformed machine id"},
      {"127.0.0.1 9 1 9 machine 01234567-89ab-cdef-0123-456789ABCDEF",
       "malformed machine id"},
      {"127.0.0.1 9 1 9 cpus 8", "rank 1 published an address record "
                                 "with unknown fields ' cpus 8'"},
      {"127.0.0.1 9 1 9 machine 01234567-89ab-cdef-0123-456789abcdef junk",
       "unknown fields ' junk'"},
      /* A segment is published with its machine and namespace. */
      {"127.0.0.1 9 1 9 shm 42 5 abc 4026531840",
       "rank 1 published a malformed shared-memory segment"},
      {"127.0.0.1 9 1 9 machine 01234567-89ab-cdef-0123-456789abcdef "
       "shm 42 5 abc",
       "unknown fields ' shm 42 5 abc'"},
      {"127.0.0.1 9 1 9 machine 01234567-89ab-cdef-0123-456789abcdef "
       "shm 0 5 abc f0000000",
       "malformed shared-memory segment"},
      {"127.0.0.300 9 1 9", "rank 1 published a malformed address record"},
      {"host0 9 1 9", "malformed address record 'host0 9 1 9'"},
      /* Rank 0 is on IPv4 (its MASTER_ADDR's version). */
      {"::1 9 1 9", "rank 1 published the address ::1, rank 0 has "
                    "127.0.0.1: every rank must reach MASTER_ADDR by the "
                    "same IP version"},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    fake_rank f = {.port = free_port(), .record = cases[i].record};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, run_fake_rank, &f), 0);
    dlcp_comm_config cfg;
    dlcp_comm_config_default(&cfg);
    cfg.rank = 0;
    cfg.world_size = 2;
    cfg.master_addr = LOOPBACK;
    cfg.master_port = f.port;
    cfg.rdzv_timeout_ms = 5000;
    dlcp_comm *comm = NULL;
    char err[256] = "";
    int rv = dlcp_comm_create(&comm, &cfg, err, sizeof(err));
    pthread_join(th, NULL);
    print_message("%s -> %s\n", cases[i].record, err);
    assert_int_equal(rv, DLCP_ERR_CONFIG);
    assert_non_null(strstr(err, cases[i].says));
  }
}

/* A rank blocked in WAIT learns promptly that rank 0 went away. */
static void test_server_gone(void **state) {
  dlcp_rdzv_server *srv = NULL;
  dlcp_rdzv_client *cli = NULL;
  dlcp_errbuf eb;
  void *value;
  size_t len;
  (void)state;
  assert_int_equal(start_server(&srv, 2), 0);
  assert_int_equal(dlcp_rdzv_client_connect(
                       &cli, LOOPBACK, dlcp_rdzv_server_port(srv), 1, 2, 0,
                       NULL, NULL, dlcp_rt_deadline_after(2000), &eb),
                   0);
  /* Drain deadline already passed: the server closes at once. */
  dlcp_rdzv_server_stop(srv, dlcp_rt_now());
  assert_int_equal(dlcp_rdzv_wait(cli, "never", &value, &len,
                                  dlcp_rt_deadline_after(5000), &eb),
                   DLCP_ERR_PEER_CLOSED);
  assert_non_null(strstr(eb.msg, "rank 0"));
  /* The server refused the reconnection: the client stays unusable
   * rather than retrying until the deadline. */
  assert_int_equal(
      dlcp_rdzv_set(cli, "k", "v", 1, dlcp_rt_deadline_after(100), &eb),
      DLCP_ERR_PEER_CLOSED);
  dlcp_rdzv_client_close(cli);
}

static void test_world_of_one(void **state) {
  dlcp_rt_env env;
  dlcp_rdzv rdzv;
  (void)state;
  memset(&env, 0, sizeof(env));
  strcpy(env.master_addr, LOOPBACK);
  env.world_size = 1;
  env.rdzv_timeout_ms = 100;
  assert_int_equal(dlcp_rdzv_join(&rdzv, &env, NULL), 0);
  assert_null(rdzv.client);
  assert_null(rdzv.server);
  assert_int_equal(dlcp_rdzv_leave(&rdzv, NULL), 0);
}

/* A port from dlcp_net_free_port lies outside the kernel's ephemeral
 * range, where another socket's connect() could take it before the rank
 * binds it, and can be listened on. */
static void test_free_port_not_ephemeral(void **state) {
  unsigned lo = 32768;
  unsigned hi = 60999;
  FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
  (void)state;
  if (f != NULL) {
    assert_int_equal(fscanf(f, "%u %u", &lo, &hi), 2);
    fclose(f);
  }
  for (int i = 0; i < 32; i++) {
    uint16_t port = free_port();
    dlcp_rdzv_server *srv = NULL;
    dlcp_rdzv_server_config cfg;
    if (lo > 10000 || hi < 65535) {
      assert_true(port < lo || port > hi);
    }
    dlcp_rdzv_server_config_default(&cfg, 2, 0);
    assert_int_equal(dlcp_rdzv_server_start(&srv, LOOPBACK, port, &cfg, NULL),
                     0);
    assert_int_equal(dlcp_rdzv_server_port(srv), port);
    dlcp_rdzv_server_stop(srv, 0);
  }
}

/* ---- a relay that can stall connections ------------------------------ */

/* The relay stands between a client and the server, as a lossy ECMP link
 * would for some connections: it forwards both ways, except that it can
 * take the next connections and never forward a byte (a SYN-ACK arrives,
 * nothing after: every segment lost), or stop forwarding on the
 * connections open now, in both directions, without closing them (the
 * client never hears of it). */
#define RELAY_MAX 16

typedef struct relay_pair {
  bool used;
  int client; /* -1: closed */
  int server; /* -1: never forwarded, or closed */
  bool frozen;
} relay_pair;

typedef struct relay {
  int listen_fd;
  uint16_t port;             /* the relay's */
  uint16_t target;           /* the server's */
  atomic_int blackhole_next; /* this many next connections go nowhere */
  atomic_bool freeze_open;   /* stop forwarding on those open now */
  atomic_bool stop;
  atomic_int accepted;
  relay_pair pairs[RELAY_MAX];
  pthread_t thread;
} relay;

static int loopback_connect(uint16_t port) {
  dlcp_sockaddr a;
  assert_int_equal(dlcp_net_resolve(&a, LOOPBACK, port, SOCK_STREAM, NULL), 0);
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  assert_true(fd >= 0);
  assert_int_equal(connect(fd, &a.sa, dlcp_sockaddr_len(&a)), 0);
  return fd;
}

/* relay_end closes one side of |p|; the other goes too unless the pair
 * is frozen (a dead link passes no close on), and the slot is free once
 * both have. */
static void relay_end(relay_pair *p, int *side) {
  close(*side);
  *side = -1;
  if (!p->frozen) {
    if (p->client >= 0) {
      close(p->client);
    }
    if (p->server >= 0) {
      close(p->server);
    }
    p->client = p->server = -1;
  }
  p->used = p->client >= 0 || p->server >= 0;
}

/* relay_move reads what |from| has and, unless |to| < 0, writes it on;
 * returns false at the end of |from|'s stream. */
static bool relay_move(int from, int to) {
  char b[4096];
  ssize_t n = recv(from, b, sizeof(b), MSG_DONTWAIT);
  if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
    return false;
  }
  if (n > 0 && to >= 0) {
    (void)dlcp_net_write_all(to, b, (size_t)n, dlcp_rt_deadline_after(1000));
  }
  return true;
}

static void relay_accept(relay *rl) {
  int fd = accept4(rl->listen_fd, NULL, NULL, SOCK_CLOEXEC);
  relay_pair *p = NULL;
  if (fd < 0) {
    return;
  }
  for (int i = 0; i < RELAY_MAX && p == NULL; i++) {
    p = !rl->pairs[i].used ? &rl->pairs[i] : NULL;
  }
  assert_non_null(p);
  atomic_fetch_add(&rl->accepted, 1);
  p->used = true;
  p->client = fd;
  p->frozen = false;
  p->server = -1;
  if (atomic_load(&rl->blackhole_next) > 0) {
    atomic_fetch_sub(&rl->blackhole_next, 1);
  } else {
    p->server = loopback_connect(rl->target);
  }
}

static void *relay_main(void *arg) {
  relay *rl = arg;
  while (!atomic_load(&rl->stop)) {
    struct pollfd pfd[1 + 2 * RELAY_MAX];
    nfds_t n = 0;
    pfd[n++] = (struct pollfd){.fd = rl->listen_fd, .events = POLLIN};
    if (atomic_exchange(&rl->freeze_open, false)) {
      for (int i = 0; i < RELAY_MAX; i++) {
        rl->pairs[i].frozen = true;
      }
    }
    for (int i = 0; i < RELAY_MAX; i++) {
      pfd[n++] = (struct pollfd){.fd = rl->pairs[i].client, .events = POLLIN};
      pfd[n++] = (struct pollfd){.fd = rl->pairs[i].server, .events = POLLIN};
    }
    if (poll(pfd, n, 20) <= 0) {
      continue;
    }
    for (int i = 0; i < RELAY_MAX; i++) {
      relay_pair *p = &rl->pairs[i];
      if (pfd[1 + 2 * i].revents != 0 &&
          !relay_move(p->client, p->frozen ? -1 : p->server)) {
        relay_end(p, &p->client);
      } else if (pfd[2 + 2 * i].revents != 0 &&
                 !relay_move(p->server, p->frozen ? -1 : p->client)) {
        relay_end(p, &p->server);
      }
    }
    if (pfd[0].revents != 0) {
      relay_accept(rl);
    }
  }
  for (int i = 0; i < RELAY_MAX; i++) {
    rl->pairs[i].frozen = false;
    if (rl->pairs[i].client >= 0) {
      relay_end(&rl->pairs[i], &rl->pairs[i].client);
    } else if (rl->pairs[i].server >= 0) {
      relay_end(&rl->pairs[i], &rl->pairs[i].server);
    }
  }
  return NULL;
}

static void relay_start(relay *rl, uint16_t target) {
  memset(rl, 0, sizeof(*rl));
  for (int i = 0; i < RELAY_MAX; i++) {
    rl->pairs[i].client = rl->pairs[i].server = -1;
  }
  rl->target = target;
  rl->port = free_port();
  dlcp_sockaddr a;
  assert_int_equal(dlcp_net_resolve(&a, LOOPBACK, rl->port, SOCK_STREAM, NULL),
                   0);
  rl->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  assert_int_equal(bind(rl->listen_fd, &a.sa, dlcp_sockaddr_len(&a)), 0);
  assert_int_equal(listen(rl->listen_fd, 16), 0);
  assert_int_equal(pthread_create(&rl->thread, NULL, relay_main, rl), 0);
}

static void relay_stop(relay *rl) {
  atomic_store(&rl->stop, true);
  pthread_join(rl->thread, NULL);
  close(rl->listen_fd);
}

static atomic_int g_reconnected_lines;

static void count_reconnections(void *arg, const char *line) {
  (void)arg;
  if (strstr(line, "rank 1 reconnected from") != NULL) {
    atomic_fetch_add(&g_reconnected_lines, 1);
  }
}

/* A connection that stalls -- at its HELLO, or later in the middle of a
 * WAIT and a SET -- costs the rank a reconnection of about half a second,
 * not the job: the server takes the new connection as the same rank's and
 * closes the old one, which the rank never hears about. */
static void test_stalled_connection_reconnects(void **state) {
  dlcp_rdzv_server *srv = NULL;
  dlcp_rdzv_server_config cfg;
  dlcp_rdzv_client *direct = NULL;
  dlcp_rdzv_client *relayed = NULL;
  dlcp_errbuf eb;
  relay rl;
  void *values[2];
  size_t lens[2];
  int found;
  void *v;
  size_t len;
  (void)state;
  dlcp_rdzv_server_config_default(&cfg, 2, 0);
  cfg.log = count_reconnections;
  atomic_store(&g_reconnected_lines, 0);
  assert_int_equal(dlcp_rdzv_server_start(&srv, LOOPBACK, 0, &cfg, NULL), 0);
  relay_start(&rl, dlcp_rdzv_server_port(srv));

  /* The first connection goes nowhere: HELLO again on a second. */
  atomic_store(&rl.blackhole_next, 1);
  dlcp_tstamp start = dlcp_rt_now();
  if (dlcp_rdzv_client_connect(&relayed, LOOPBACK, rl.port, 1, 2, 0, NULL, NULL,
                               dlcp_rt_deadline_after(5000), &eb) != 0) {
    fail_msg("%s", eb.msg);
  }
  uint64_t took_ms = (dlcp_rt_now() - start) / DLCP_NS_PER_MS;
  assert_int_equal(atomic_load(&rl.accepted), 2);
  assert_int_equal(dlcp_rdzv_client_reconnects(relayed), 1);
  assert_true(took_ms >= 450 && took_ms < 3000);
  assert_int_equal(dlcp_rdzv_client_connect(
                       &direct, LOOPBACK, dlcp_rdzv_server_port(srv), 0, 2, 0,
                       NULL, NULL, dlcp_rt_deadline_after(2000), &eb),
                   0);

  /* Rank 1's connection stops forwarding while it waits for rank 0's
   * key: its WAIT slices go unanswered, it reconnects, and the key rank 0
   * publishes meanwhile reaches it. */
  atomic_store(&rl.freeze_open, true);
  usleep(50 * 1000);
  assert_int_equal(dlcp_rdzv_set(direct, "addr/0", "zero", 4,
                                 dlcp_rt_deadline_after(2000), &eb),
                   0);
  if (dlcp_rdzv_exchange(relayed, "addr", "one", 3, values, lens,
                         dlcp_rt_deadline_after(5000), &eb) != 0) {
    fail_msg("%s", eb.msg);
  }
  assert_string_equal((char *)values[0], "zero");
  assert_string_equal((char *)values[1], "one");
  dlcp_rdzv_free_values(values, 2);
  assert_int_equal(dlcp_rdzv_client_reconnects(relayed), 2);
  assert_int_equal(dlcp_rdzv_get(direct, "addr/1", &found, &v, &len,
                                 dlcp_rt_deadline_after(2000), &eb),
                   0);
  assert_true(found);
  free(v);
  /* Both stalled connections were closed by the server as rank 1's old
   * ones (the first was never rank 1's: it said nothing). */
  assert_int_equal(atomic_load(&g_reconnected_lines), 1);

  /* Another process claiming rank 1 is still refused. */
  dlcp_rdzv_client *impostor = NULL;
  assert_int_equal(dlcp_rdzv_client_connect(
                       &impostor, LOOPBACK, dlcp_rdzv_server_port(srv), 1, 2, 0,
                       NULL, NULL, dlcp_rt_deadline_after(2000), &eb),
                   DLCP_ERR_CONFIG);
  assert_non_null(strstr(eb.msg, "rank 1 is already connected"));

  dlcp_rdzv_client_close(relayed);
  dlcp_rdzv_client_close(direct);
  relay_stop(&rl);
  dlcp_rdzv_server_stop(srv, dlcp_rt_now());
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_exchange_all_ranks),
      cmocka_unit_test(test_exchange_in_several_answers),
      cmocka_unit_test(test_rank0_starts_late),
      cmocka_unit_test(test_rank0_never_starts),
      cmocka_unit_test(test_exchange_timeout_names_missing),
      cmocka_unit_test(test_world_size_mismatch),
      cmocka_unit_test(test_duplicate_rank),
      cmocka_unit_test(test_server_on_every_address),
      cmocka_unit_test(test_garbage_rejected),
      cmocka_unit_test(test_server_gone),
      cmocka_unit_test(test_address_record_checked),
      cmocka_unit_test(test_world_of_one),
      cmocka_unit_test(test_free_port_not_ephemeral),
      cmocka_unit_test(test_stalled_connection_reconnects),
  };
  /* A hang anywhere becomes a failure well before ctest's own limit. */
  alarm(60);
  return cmocka_run_group_tests(tests, NULL, NULL);
}
