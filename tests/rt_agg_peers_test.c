/*
 * rt_agg_peers_test.c: the cookies dlcp-switch gives the aggregation core
 * for its peers (src/rt/agg_peers.h).  IPv4 addresses are carried in the
 * cookie; IPv6 ones are interned, one cookie per address and port, and a
 * full table evicts the least recently seen unpinned sender by the clock
 * algorithm: its old cookie then names nothing (never another sender),
 * pinned senders stay, forged cookies are refused, and a flood of
 * addresses keeps the table at its size.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>

#include "rt/agg_peers.h"

static dlcp_sockaddr v6(uint32_t host, uint16_t port) {
  dlcp_sockaddr a;
  char ip[64];

  snprintf(ip, sizeof(ip), "fd00::%x:%x", host >> 16, host & 0xffffu);
  assert_int_equal(dlcp_sockaddr_parse(&a, ip, port), 0);
  return a;
}

static void assert_names(const dlcp_agg_peers *p, uint64_t cookie,
                         const dlcp_sockaddr *want) {
  dlcp_sockaddr got;

  assert_true(dlcp_agg_peers_addr(p, cookie, &got));
  assert_true(dlcp_sockaddr_equal(&got, want));
  assert_int_equal(got.in6.sin6_scope_id, want->sa.sa_family == AF_INET6
                                              ? want->in6.sin6_scope_id
                                              : 0);
}

static void test_ipv4_in_the_cookie(void **state) {
  (void)state;
  dlcp_agg_peers *p;
  dlcp_sockaddr a, b;

  assert_int_equal(dlcp_agg_peers_new(&p, 2), 0);
  assert_int_equal(dlcp_sockaddr_parse(&a, "10.1.2.3", 7070), 0);
  assert_int_equal(dlcp_sockaddr_parse(&b, "255.255.255.255", 65535), 0);
  uint64_t ca = dlcp_agg_peers_cookie(p, &a, false);
  assert_int_equal(ca, (UINT64_C(0x0a010203) << 16) | 7070);
  assert_int_equal(dlcp_agg_peers_cookie(p, &b, false),
                   UINT64_C(0xffffffffffff));
  assert_names(p, ca, &a);
  assert_names(p, UINT64_C(0xffffffffffff), &b);
  /* a cookie above 48 bits without the IPv6 bit is no IPv4 one */
  assert_false(dlcp_agg_peers_addr(p, UINT64_C(1) << 48, &a));
  /* many IPv4 senders take no room: none evicted */
  for (uint32_t i = 0; i < 1000; i++) {
    a.in.sin_port = htons((uint16_t)i);
    (void)dlcp_agg_peers_cookie(p, &a, false);
  }
  assert_int_equal(dlcp_agg_peers_evicted(p), 0);
  dlcp_agg_peers_del(p);
}

static void test_ipv6_interned(void **state) {
  (void)state;
  dlcp_agg_peers *p;
  dlcp_sockaddr a = v6(1, 7000), b = v6(1, 7001), c = v6(2, 7000);
  dlcp_sockaddr ll;

  assert_int_equal(dlcp_agg_peers_new(&p, 8), 0);
  assert_int_equal(dlcp_sockaddr_parse(&ll, "fe80::1", 7000), 0);
  ll.in6.sin6_scope_id = 3;
  uint64_t ca = dlcp_agg_peers_cookie(p, &a, false);
  uint64_t cb = dlcp_agg_peers_cookie(p, &b, false);
  uint64_t cc = dlcp_agg_peers_cookie(p, &c, false);
  uint64_t cl = dlcp_agg_peers_cookie(p, &ll, false);
  assert_true(ca >> 63 && cb >> 63 && cc >> 63 && cl >> 63);
  assert_true(ca != cb && ca != cc && cb != cc && cl != ca);
  assert_int_equal(dlcp_agg_peers_cookie(p, &a, false), ca);
  assert_int_equal(dlcp_agg_peers_cookie(p, &c, false), cc);
  assert_names(p, ca, &a);
  assert_names(p, cb, &b);
  assert_names(p, cc, &c);
  assert_names(p, cl, &ll); /* the interface index comes back */
  ll.in6.sin6_scope_id = 4;
  assert_true(dlcp_agg_peers_cookie(p, &ll, false) != cl);
  /* cookies this table never gave: a slot not handed out, a wrong
   * generation */
  dlcp_sockaddr x;
  assert_false(dlcp_agg_peers_addr(p, (UINT64_C(1) << 63) | 7, &x));
  assert_false(dlcp_agg_peers_addr(p, ca + (UINT64_C(1) << 32), &x));
  assert_int_equal(dlcp_agg_peers_evicted(p), 0);
  dlcp_agg_peers_del(p);
}

/* Slots 0-3 hold A-D; E evicts A (every slot had been seen, so the hand
 * clears them all and takes the first); then B is seen again, and F
 * evicts C, the next unseen one, not B. */
static void test_clock_evicts_the_unseen(void **state) {
  (void)state;
  dlcp_agg_peers *p;
  uint64_t c[6];
  dlcp_sockaddr x;

  assert_int_equal(dlcp_agg_peers_new(&p, 4), 0);
  for (uint32_t i = 0; i < 5; i++) {
    dlcp_sockaddr a = v6(i, 1);
    c[i] = dlcp_agg_peers_cookie(p, &a, false);
  }
  assert_int_equal(dlcp_agg_peers_evicted(p), 1);
  assert_false(dlcp_agg_peers_addr(p, c[0], &x));
  dlcp_sockaddr b = v6(1, 1), f = v6(5, 1), a = v6(0, 1);
  assert_int_equal(dlcp_agg_peers_cookie(p, &b, false), c[1]);
  c[5] = dlcp_agg_peers_cookie(p, &f, false);
  assert_int_equal(dlcp_agg_peers_evicted(p), 2);
  assert_false(dlcp_agg_peers_addr(p, c[2], &x));
  assert_names(p, c[1], &b);
  assert_names(p, c[5], &f);
  /* the slot A held now names E, and A's old cookie does not */
  dlcp_sockaddr e = v6(4, 1);
  assert_int_equal((uint32_t)c[4], (uint32_t)c[0]);
  assert_names(p, c[4], &e);
  /* A back: a new cookie, never its old one */
  uint64_t again = dlcp_agg_peers_cookie(p, &a, false);
  assert_true(again != c[0]);
  assert_names(p, again, &a);
  dlcp_agg_peers_del(p);
}

static void test_pinned_stay(void **state) {
  (void)state;
  dlcp_agg_peers *p;
  dlcp_sockaddr parent = v6(0xffff, 9), second = v6(0xfffe, 9);
  dlcp_sockaddr third = v6(0xfffd, 9), x;

  assert_int_equal(dlcp_agg_peers_new(&p, 4), 0);
  uint64_t cp = dlcp_agg_peers_cookie(p, &parent, true);
  uint64_t cs = dlcp_agg_peers_cookie(p, &second, true);
  /* half the table pinned: the third is interned, not pinned */
  uint64_t ct = dlcp_agg_peers_cookie(p, &third, true);
  for (uint32_t i = 0; i < 100; i++) {
    dlcp_sockaddr a = v6(i, 1);
    (void)dlcp_agg_peers_cookie(p, &a, false);
  }
  assert_names(p, cp, &parent);
  assert_names(p, cs, &second);
  assert_false(dlcp_agg_peers_addr(p, ct, &x));
  assert_int_equal(dlcp_agg_peers_evicted(p), 99);
  dlcp_agg_peers_del(p);
}

/* 100,000 forged sources through a table of 1,024: each evicts one, the
 * latest ones still name their own address, and every cookie given names
 * its own sender or nothing. */
static void test_flood(void **state) {
  (void)state;
  enum { N = 100000, CAP = 1024 };
  dlcp_agg_peers *p;
  static uint64_t c[N];

  assert_int_equal(dlcp_agg_peers_new(&p, CAP), 0);
  for (uint32_t i = 0; i < N; i++) {
    dlcp_sockaddr a = v6(i, (uint16_t)(i * 7));
    c[i] = dlcp_agg_peers_cookie(p, &a, false);
  }
  assert_int_equal(dlcp_agg_peers_evicted(p), N - CAP);
  uint32_t live = 0;
  for (uint32_t i = 0; i < N; i++) {
    dlcp_sockaddr a = v6(i, (uint16_t)(i * 7)), got;
    if (dlcp_agg_peers_addr(p, c[i], &got)) {
      assert_true(dlcp_sockaddr_equal(&got, &a));
      live++;
    }
  }
  assert_int_equal(live, CAP);
  dlcp_sockaddr last = v6(N - 1, (uint16_t)((N - 1) * 7));
  assert_names(p, c[N - 1], &last);
  dlcp_agg_peers_del(p);
}

static void test_bad_sizes(void **state) {
  (void)state;
  dlcp_agg_peers *p = (dlcp_agg_peers *)1;

  assert_int_equal(dlcp_agg_peers_new(&p, 0), DLCP_ERR_INVALID_ARGUMENT);
  assert_null(p);
  assert_int_equal(dlcp_agg_peers_new(&p, (1u << 24) + 1),
                   DLCP_ERR_INVALID_ARGUMENT);
  assert_int_equal(dlcp_agg_peers_new(&p, 3), 0); /* rounded up to 4 */
  for (uint32_t i = 0; i < 4; i++) {
    dlcp_sockaddr a = v6(i, 1);
    (void)dlcp_agg_peers_cookie(p, &a, false);
  }
  assert_int_equal(dlcp_agg_peers_evicted(p), 0);
  dlcp_agg_peers_del(p);
  dlcp_agg_peers_del(NULL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_ipv4_in_the_cookie),
      cmocka_unit_test(test_ipv6_interned),
      cmocka_unit_test(test_clock_evicts_the_unseen),
      cmocka_unit_test(test_pinned_stay),
      cmocka_unit_test(test_flood),
      cmocka_unit_test(test_bad_sizes),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
