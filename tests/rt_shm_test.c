/*
 * rt_shm_test.c: the shared-memory datagram rings.  One process maps its
 * own segment a second time through /proc/self/fd, as a peer would, and
 * drives both ends: order and contents, a full ring, lengths, the
 * doorbell handshake, and the checks that keep a peer from mapping the
 * wrong segment.  A forked producer then streams through one ring while
 * the consumer sleeps and wakes on doorbells, as two ranks do.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rt/shm.h"

enum { JOB = 7, WORLD = 3, ME = 0, PEER = 2 };
#define NONCE UINT64_C(0x1234567890abcdef)

static dlcp_shm_kind kind; /* what the last peek found */

typedef struct pair {
  dlcp_shm_in in;   /* rank ME's segment */
  dlcp_shm_out out; /* rank PEER writing into it */
} pair;

static void open_pair(pair *p) {
  dlcp_errbuf eb = {0};
  assert_int_equal(dlcp_shm_in_create(&p->in, JOB, ME, WORLD, NONCE, &eb), 0);
  assert_int_equal(dlcp_shm_in_admit(&p->in, PEER, &eb), 0);
  assert_int_equal(dlcp_shm_in_admit(&p->in, 1, &eb), 0);
  assert_int_equal(dlcp_shm_out_open(&p->out, getpid(), p->in.fd, NONCE, JOB,
                                     ME, PEER, WORLD, &eb),
                   0);
}

static void close_pair(pair *p) {
  dlcp_shm_out_close(&p->out);
  dlcp_shm_in_close(&p->in);
}

static void fill(uint8_t *b, size_t n, uint32_t seed) {
  for (size_t i = 0; i < n; i++) {
    b[i] = (uint8_t)(seed * 131u + i * 7u);
  }
}

static void test_order_and_contents(void **state) {
  (void)state;
  pair p;
  open_pair(&p);
  static uint8_t payload[DLCP_SHM_SLOT_DATA];
  /* Three rounds around the ring, datagrams of varied sizes. */
  for (uint32_t round = 0; round < 3 * DLCP_SHM_SLOTS; round += 8) {
    for (uint32_t i = 0; i < 8; i++) {
      uint8_t hdr[44];
      size_t plen = (size_t)(round + i) * 997u % (sizeof(payload) - 44);
      fill(hdr, sizeof(hdr), round + i);
      fill(payload, plen, ~(round + i));
      dlcp_shm_kind k = (round + i) % 3 ? DLCP_SHM_DATAGRAM : DLCP_SHM_CONTROL;
      assert_true(dlcp_shm_put(&p.out, k, hdr, sizeof(hdr), payload, plen));
    }
    for (uint32_t i = 0; i < 8; i++) {
      size_t plen = (size_t)(round + i) * 997u % (sizeof(payload) - 44), len;
      const uint8_t *d = dlcp_shm_peek(&p.in, PEER, &len, &kind);
      assert_non_null(d);
      assert_int_equal(len, 44 + plen);
      assert_int_equal(kind, (round + i) % 3 ? DLCP_SHM_DATAGRAM
                                             : DLCP_SHM_CONTROL);
      uint8_t want[44];
      fill(want, sizeof(want), round + i);
      assert_memory_equal(d, want, sizeof(want));
      fill(payload, plen, ~(round + i));
      if (plen) {
        assert_memory_equal(d + 44, payload, plen);
      }
      dlcp_shm_release(&p.in, PEER);
    }
    size_t len;
    assert_null(dlcp_shm_peek(&p.in, PEER, &len, &kind));
    /* Other rings stay empty. */
    assert_null(dlcp_shm_peek(&p.in, 1, &len, &kind));
  }
  close_pair(&p);
}

static void test_full_ring_and_oversize(void **state) {
  (void)state;
  pair p;
  open_pair(&p);
  uint8_t hdr[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  for (uint32_t i = 0; i < DLCP_SHM_SLOTS; i++) {
    assert_true(dlcp_shm_put(&p.out, DLCP_SHM_DATAGRAM, hdr, sizeof(hdr), NULL, 0));
  }
  assert_false(dlcp_shm_put(&p.out, DLCP_SHM_DATAGRAM, hdr, sizeof(hdr), NULL, 0));
  size_t len;
  assert_non_null(dlcp_shm_peek(&p.in, PEER, &len, &kind));
  dlcp_shm_release(&p.in, PEER);
  assert_true(dlcp_shm_put(&p.out, DLCP_SHM_DATAGRAM, hdr, sizeof(hdr), NULL, 0));
  assert_false(dlcp_shm_put(&p.out, DLCP_SHM_DATAGRAM, hdr, sizeof(hdr), NULL, 0));
  /* One byte past a slot never goes in. */
  static uint8_t big[DLCP_SHM_SLOT_DATA];
  for (uint32_t i = 0; i < DLCP_SHM_SLOTS; i++) {
    dlcp_shm_release(&p.in, PEER);
  }
  assert_false(dlcp_shm_put(&p.out, DLCP_SHM_DATAGRAM, hdr, sizeof(hdr), big, sizeof(big)));
  assert_true(dlcp_shm_put(&p.out, DLCP_SHM_DATAGRAM, hdr, sizeof(hdr), big,
                           sizeof(big) - sizeof(hdr)));
  close_pair(&p);
}

static void test_doorbell_handshake(void **state) {
  (void)state;
  pair p;
  open_pair(&p);
  uint8_t hdr[4] = {9, 9, 9, 9};
  size_t len;
  /* A new segment's consumer is asleep: the first datagram rings, once. */
  assert_false(dlcp_shm_needs_doorbell(&p.out)); /* nothing written yet */
  assert_true(dlcp_shm_put(&p.out, DLCP_SHM_DATAGRAM, hdr, sizeof(hdr), NULL, 0));
  assert_true(dlcp_shm_needs_doorbell(&p.out));
  assert_true(dlcp_shm_put(&p.out, DLCP_SHM_DATAGRAM, hdr, sizeof(hdr), NULL, 0));
  assert_false(dlcp_shm_needs_doorbell(&p.out)); /* already woken */
  /* Draining: no doorbells. */
  dlcp_shm_begin_drain(&p.in);
  assert_true(dlcp_shm_put(&p.out, DLCP_SHM_DATAGRAM, hdr, sizeof(hdr), NULL, 0));
  assert_false(dlcp_shm_needs_doorbell(&p.out));
  /* It cannot sleep while datagrams wait, and stays awake. */
  assert_false(dlcp_shm_try_sleep(&p.in));
  assert_true(dlcp_shm_put(&p.out, DLCP_SHM_DATAGRAM, hdr, sizeof(hdr), NULL, 0));
  assert_false(dlcp_shm_needs_doorbell(&p.out));
  while (dlcp_shm_peek(&p.in, PEER, &len, &kind)) {
    dlcp_shm_release(&p.in, PEER);
  }
  assert_true(dlcp_shm_try_sleep(&p.in));
  assert_true(dlcp_shm_put(&p.out, DLCP_SHM_DATAGRAM, hdr, sizeof(hdr), NULL, 0));
  assert_true(dlcp_shm_needs_doorbell(&p.out));
  /* Two producers see the sleeping flag: only one rings. */
  while (dlcp_shm_peek(&p.in, PEER, &len, &kind)) {
    dlcp_shm_release(&p.in, PEER);
  }
  assert_true(dlcp_shm_try_sleep(&p.in));
  dlcp_shm_out other;
  dlcp_errbuf eb = {0};
  assert_int_equal(dlcp_shm_out_open(&other, getpid(), p.in.fd, NONCE, JOB,
                                     ME, 1, WORLD, &eb),
                   0);
  assert_true(dlcp_shm_put(&p.out, DLCP_SHM_DATAGRAM, hdr, sizeof(hdr), NULL, 0));
  assert_true(dlcp_shm_put(&other, DLCP_SHM_DATAGRAM, hdr, sizeof(hdr), NULL, 0));
  int rang = dlcp_shm_needs_doorbell(&p.out) + dlcp_shm_needs_doorbell(&other);
  assert_int_equal(rang, 1);
  assert_non_null(dlcp_shm_peek(&p.in, 1, &len, &kind));
  dlcp_shm_out_close(&other);
  close_pair(&p);
}

static void test_wrong_segment_refused(void **state) {
  (void)state;
  pair p;
  open_pair(&p);
  dlcp_shm_out o;
  dlcp_errbuf eb = {0};
  /* Wrong nonce, job, owner or world; a descriptor that is no segment;
   * no such descriptor. */
  assert_int_not_equal(dlcp_shm_out_open(&o, getpid(), p.in.fd, NONCE + 1,
                                         JOB, ME, PEER, WORLD, &eb),
                       0);
  assert_non_null(strstr(eb.msg, "is not rank 0's segment"));
  assert_int_not_equal(dlcp_shm_out_open(&o, getpid(), p.in.fd, NONCE,
                                         JOB + 1, ME, PEER, WORLD, &eb),
                       0);
  assert_int_not_equal(dlcp_shm_out_open(&o, getpid(), p.in.fd, NONCE, JOB,
                                         1, PEER, WORLD, &eb),
                       0);
  assert_int_not_equal(dlcp_shm_out_open(&o, getpid(), p.in.fd, NONCE, JOB,
                                         ME, PEER, WORLD + 1, &eb),
                       0);
  assert_non_null(strstr(eb.msg, "expected"));
  int fds[2];
  assert_int_equal(pipe(fds), 0);
  assert_int_not_equal(dlcp_shm_out_open(&o, getpid(), fds[0], NONCE, JOB,
                                         ME, PEER, WORLD, &eb),
                       0);
  close(fds[0]);
  close(fds[1]);
  assert_int_not_equal(dlcp_shm_out_open(&o, getpid(), 1000000, NONCE, JOB,
                                         ME, PEER, WORLD, &eb),
                       0);
  assert_non_null(strstr(eb.msg, "/proc/"));
  assert_null(o.hdr);
  close_pair(&p);
}

/* A world of the largest size costs only the rings in use: the segment
 * is sparse and each end maps the header and its rings alone.  A rank
 * reads at most DLCP_SHM_MAX_PEERS rings, never its own or one outside
 * the world, and a ring it did not admit reads as empty. */
static void test_large_world_maps_only_rings_in_use(void **state) {
  (void)state;
  enum { BIG = 65536, FAR = 40000 };
  dlcp_shm_in in;
  dlcp_errbuf eb = {0};
  assert_int_equal(dlcp_shm_in_create(&in, JOB, ME, BIG, NONCE, &eb), 0);
  assert_int_equal(dlcp_shm_in_admit(&in, FAR, &eb), 0);
  assert_int_not_equal(dlcp_shm_in_admit(&in, ME, &eb), 0);
  assert_int_not_equal(dlcp_shm_in_admit(&in, BIG, &eb), 0);
  for (uint32_t src = 1; in.admitted < DLCP_SHM_MAX_PEERS; src++) {
    assert_int_equal(dlcp_shm_in_admit(&in, src, &eb), 0);
  }
  assert_int_not_equal(dlcp_shm_in_admit(&in, BIG - 1, &eb), 0);
  assert_non_null(strstr(eb.msg, "no ring for rank 65535"));
  dlcp_shm_out out;
  assert_int_equal(
      dlcp_shm_out_open(&out, getpid(), in.fd, NONCE, JOB, ME, FAR, BIG, &eb),
      0);
  uint8_t hdr[8] = {9, 8, 7, 6, 5, 4, 3, 2};
  assert_true(dlcp_shm_put(&out, DLCP_SHM_DATAGRAM, hdr, sizeof(hdr), NULL, 0));
  assert_true(dlcp_shm_pending(&in));
  size_t len;
  const uint8_t *d = dlcp_shm_peek(&in, FAR, &len, &kind);
  assert_non_null(d);
  assert_int_equal(len, sizeof(hdr));
  assert_memory_equal(d, hdr, sizeof(hdr));
  dlcp_shm_release(&in, FAR);
  assert_false(dlcp_shm_pending(&in));
  /* A producer the consumer never admitted writes where nobody reads. */
  dlcp_shm_out stray;
  assert_int_equal(dlcp_shm_out_open(&stray, getpid(), in.fd, NONCE, JOB, ME,
                                     BIG - 1, BIG, &eb),
                   0);
  assert_true(
      dlcp_shm_put(&stray, DLCP_SHM_DATAGRAM, hdr, sizeof(hdr), NULL, 0));
  assert_false(dlcp_shm_pending(&in));
  assert_null(dlcp_shm_peek(&in, BIG - 1, &len, &kind));
  dlcp_shm_out_close(&stray);
  dlcp_shm_out_close(&out);
  dlcp_shm_in_close(&in);
}

/* Mapping a ring writes each of its pages (shm.c, touch_ring) but
 * changes no byte, so an end may map while the other already uses it:
 * a consumer that admits a ring its producer has filled to the last slot,
 * every page of it, reads back every datagram exactly as written; so
 * does one after its producer mapped the ring again. */
static void test_late_mapping_changes_nothing(void **state) {
  (void)state;
  static uint8_t payload[DLCP_SHM_SLOT_DATA];
  uint8_t hdr[16];
  dlcp_shm_in in;
  dlcp_shm_out out, again;
  dlcp_errbuf eb = {0};
  assert_int_equal(dlcp_shm_in_create(&in, JOB, ME, WORLD, NONCE, &eb), 0);
  assert_int_equal(dlcp_shm_out_open(&out, getpid(), in.fd, NONCE, JOB, ME,
                                     PEER, WORLD, &eb),
                   0);
  for (uint32_t i = 0; i < DLCP_SHM_SLOTS; i++) {
    fill(hdr, sizeof(hdr), i);
    fill(payload, sizeof(payload) - sizeof(hdr), ~i);
    assert_true(dlcp_shm_put(&out, DLCP_SHM_DATAGRAM, hdr, sizeof(hdr), payload,
                             sizeof(payload) - sizeof(hdr)));
  }
  assert_int_equal(dlcp_shm_in_admit(&in, PEER, &eb), 0);
  assert_int_equal(dlcp_shm_out_open(&again, getpid(), in.fd, NONCE, JOB, ME,
                                     PEER, WORLD, &eb),
                   0);
  for (uint32_t i = 0; i < DLCP_SHM_SLOTS; i++) {
    size_t len;
    const uint8_t *d = dlcp_shm_peek(&in, PEER, &len, &kind);
    assert_non_null(d);
    assert_int_equal(len, sizeof(payload));
    fill(hdr, sizeof(hdr), i);
    assert_memory_equal(d, hdr, sizeof(hdr));
    fill(payload, sizeof(payload) - sizeof(hdr), ~i);
    assert_memory_equal(d + sizeof(hdr), payload,
                        sizeof(payload) - sizeof(hdr));
    dlcp_shm_release(&in, PEER);
  }
  size_t len;
  assert_null(dlcp_shm_peek(&in, PEER, &len, &kind));
  dlcp_shm_out_close(&again);
  dlcp_shm_out_close(&out);
  dlcp_shm_in_close(&in);
}

static uint32_t partners_of(uint32_t a, uint32_t world) {
  uint32_t n = 0;
  for (uint32_t b = 0; b < world; b++) {
    n += dlcp_shm_partners(a, b, world);
  }
  return n;
}

/* On a host crowded with ranks, rings go to ranks a power of two apart
 * either way round the world, as far as DLCP_SHM_MAX_PEERS of them reach:
 * the rule is symmetric and never exceeds the rings a rank has. */
static void test_partners_on_a_crowded_host(void **state) {
  (void)state;
  const uint32_t worlds[] = {17, 20, 32, 100, 128, 255, 256, 257, 512, 1000};
  for (size_t w = 0; w < sizeof(worlds) / sizeof(worlds[0]); w++) {
    uint32_t world = worlds[w];
    for (uint32_t a = 0; a < world; a++) {
      assert_false(dlcp_shm_partners(a, a, world));
      assert_false(dlcp_shm_partners(a, world, world));
      assert_true(dlcp_shm_partners(a, (a + 1) % world, world));
      assert_in_range(partners_of(a, world), 1, DLCP_SHM_MAX_PEERS);
      for (uint32_t b = 0; b < world; b++) {
        assert_int_equal(dlcp_shm_partners(a, b, world),
                         dlcp_shm_partners(b, a, world));
      }
    }
  }
  /* World 20: 1, 2, 4, 8, 16 ahead and behind, 8 distinct ranks. */
  const uint32_t of_3[] = {1, 2, 4, 5, 7, 11, 15, 19};
  for (uint32_t b = 0, i = 0; b < 20; b++) {
    bool want = i < 8 && of_3[i] == b;
    assert_int_equal(dlcp_shm_partners(3, b, 20), want);
    i += want;
  }
  /* Power-of-two worlds up to 256: every partner of recursive doubling and
   * halving-doubling (a XOR 2^k); 13 rings at 128, 15 at 256. */
  for (uint32_t world = 32; world <= 256; world *= 2) {
    for (uint32_t a = 0; a < world; a++) {
      for (uint32_t d = 1; d < world; d *= 2) {
        assert_true(dlcp_shm_partners(a, a ^ d, world));
      }
    }
  }
  assert_int_equal(partners_of(0, 128), 13);
  assert_int_equal(partners_of(0, 256), 15);
  /* 512: up to 64 either way (14 ranks); 128 and 256 away go through UDP. */
  assert_int_equal(partners_of(0, 512), 14);
  assert_true(dlcp_shm_partners(0, 64, 512));
  assert_true(dlcp_shm_partners(0, 448, 512));
  assert_false(dlcp_shm_partners(0, 128, 512));
  assert_false(dlcp_shm_partners(0, 256, 512));
}

/* A length word a broken producer wrote past the slot reads as an empty
 * datagram, never as a read past the slot. */
static void test_length_never_trusted(void **state) {
  (void)state;
  pair p;
  open_pair(&p);
  uint8_t hdr[4] = {1, 2, 3, 4};
  assert_true(dlcp_shm_put(&p.out, DLCP_SHM_DATAGRAM, hdr, sizeof(hdr), NULL, 0));
  size_t len;
  uint8_t *d = (uint8_t *)(uintptr_t)dlcp_shm_peek(&p.in, PEER, &len, &kind);
  assert_non_null(d);
  uint32_t bogus = DLCP_SHM_SLOT_DATA + 1;
  memcpy(d - 64, &bogus, sizeof(bogus)); /* the slot's length word */
  assert_non_null(dlcp_shm_peek(&p.in, PEER, &len, &kind));
  assert_int_equal(len, 0);
  close_pair(&p);
}

/* Two processes: the producer streams numbered datagrams, ringing a
 * socketpair (the doorbell) when told to; the consumer sleeps in poll()
 * whenever its ring is dry.  Every datagram arrives, in order, and the
 * consumer never sleeps through one (poll would time out). */
static void test_two_processes_never_miss_a_wakeup(void **state) {
  (void)state;
  enum { COUNT = 20000 };
  dlcp_shm_in in;
  dlcp_errbuf eb = {0};
  assert_int_equal(dlcp_shm_in_create(&in, JOB, ME, WORLD, NONCE, &eb), 0);
  assert_int_equal(dlcp_shm_in_admit(&in, PEER, &eb), 0);
  int bell[2];
  assert_int_equal(socketpair(AF_UNIX, SOCK_DGRAM, 0, bell), 0);
  pid_t parent = getpid();
  pid_t child = fork();
  assert_true(child >= 0);
  if (child == 0) {
    dlcp_shm_out out;
    dlcp_errbuf ceb = {0};
    if (dlcp_shm_out_open(&out, parent, in.fd, NONCE, JOB, ME, PEER, WORLD,
                          &ceb) != 0) {
      _exit(2);
    }
    for (uint32_t i = 0; i < COUNT;) {
      uint32_t burst = 1 + i % 5;
      for (uint32_t b = 0; b < burst && i < COUNT; b++) {
        uint8_t msg[8];
        memcpy(msg, &i, sizeof(i));
        memcpy(msg + 4, &i, sizeof(i));
        if (!dlcp_shm_put(&out, DLCP_SHM_DATAGRAM, msg, sizeof(msg), NULL, 0)) {
          break; /* full: ring (below) and try again */
        }
        i++;
      }
      if (dlcp_shm_needs_doorbell(&out)) {
        char c = 1;
        if (write(bell[1], &c, 1) != 1) {
          _exit(3);
        }
      }
    }
    _exit(0);
  }
  uint32_t next = 0;
  int sleeps = 0;
  while (next < COUNT) {
    dlcp_shm_begin_drain(&in);
    size_t len;
    const uint8_t *d;
    while ((d = dlcp_shm_peek(&in, PEER, &len, &kind)) != NULL) {
      uint32_t a, b;
      assert_int_equal(len, 8);
      memcpy(&a, d, 4);
      memcpy(&b, d + 4, 4);
      assert_int_equal(a, next);
      assert_int_equal(b, next);
      next++;
      dlcp_shm_release(&in, PEER);
    }
    if (next == COUNT || !dlcp_shm_try_sleep(&in)) {
      continue;
    }
    struct pollfd pfd = {.fd = bell[0], .events = POLLIN};
    assert_int_equal(poll(&pfd, 1, 10000), 1); /* a lost wake-up hangs */
    char c;
    assert_int_equal(read(bell[0], &c, 1), 1);
    sleeps++;
  }
  int st;
  assert_int_equal(waitpid(child, &st, 0), child);
  assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  print_message("%d datagrams, consumer slept %d times\n", COUNT, sleeps);
  close(bell[0]);
  close(bell[1]);
  dlcp_shm_in_close(&in);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_order_and_contents),
      cmocka_unit_test(test_full_ring_and_oversize),
      cmocka_unit_test(test_doorbell_handshake),
      cmocka_unit_test(test_wrong_segment_refused),
      cmocka_unit_test(test_length_never_trusted),
      cmocka_unit_test(test_large_world_maps_only_rings_in_use),
      cmocka_unit_test(test_late_mapping_changes_nothing),
      cmocka_unit_test(test_partners_on_a_crowded_host),
      cmocka_unit_test(test_two_processes_never_miss_a_wakeup),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
