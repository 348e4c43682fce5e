/*
 * rt_stall_logic_test.c: the inquiry that follows who waits on whom
 * (src/rt/stall.c), without processes: a chain ending at a silent rank,
 * at an idle one, a cycle, stale and unexpected answers, and the probe
 * deadline.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "rt/stall.h"

#define MS 1000000ull

static void test_chain_to_silent_rank(void **state) {
  dlcp_stall st;
  uint32_t nonce = 0, next = 0;
  char why[256];
  (void)state;
  dlcp_stall_init(&st, 0, 4, 600 * MS);
  /* Rank 0 timed out on 3; 3 waits on 2; 2 never answers. */
  assert_int_equal(dlcp_stall_begin(&st, 3, 1000 * MS, &nonce), 3);
  assert_int_equal(dlcp_stall_deadline(&st), 1600 * MS);
  /* A second timeout joins the inquiry under way. */
  assert_int_equal(dlcp_stall_begin(&st, 1, 1001 * MS, &next),
                   DLCP_STALL_NOBODY);
  /* Stale: wrong nonce, wrong rank. */
  assert_int_equal(dlcp_stall_on_answer(&st, 3, nonce + 1, 2, 1002 * MS,
                                        &next), DLCP_STALL_NOBODY);
  assert_int_equal(dlcp_stall_on_answer(&st, 1, nonce, 2, 1002 * MS, &next),
                   DLCP_STALL_NOBODY);
  assert_int_equal(st.verdict, DLCP_STALL_PENDING);
  assert_int_equal(dlcp_stall_on_answer(&st, 3, nonce, 2, 1003 * MS, &next),
                   2);
  assert_int_not_equal(next, nonce);
  assert_int_equal(dlcp_stall_deadline(&st), 1603 * MS);
  assert_int_equal(dlcp_stall_on_time(&st, 1602 * MS, &next),
                   DLCP_STALL_NOBODY);
  assert_int_equal(st.verdict, DLCP_STALL_PENDING);
  assert_int_equal(dlcp_stall_on_time(&st, 1603 * MS, &next),
                   DLCP_STALL_NOBODY);
  assert_int_equal(st.verdict, DLCP_STALL_SILENT);
  assert_int_equal(st.culprit, 2);
  assert_int_equal(dlcp_stall_deadline(&st), DLCP_TSTAMP_NEVER);
  /* A late answer changes nothing. */
  assert_int_equal(dlcp_stall_on_answer(&st, 2, next, 1, 1700 * MS, &next),
                   DLCP_STALL_NOBODY);
  assert_int_equal(st.culprit, 2);
  dlcp_stall_describe(&st, why, sizeof(why));
  assert_string_equal(why, "stopped responding (no answer to a probe within "
                           "600 ms); waits: rank 0 -> rank 3 -> rank 2");
}

/* A rank that waits on nobody is asked again every probe/8 (it may be
 * between operations), and named only if it stays idle for the probe
 * interval. */
static void test_idle_rank(void **state) {
  dlcp_stall st;
  uint32_t nonce = 0, next = 0;
  char why[256];
  (void)state;
  dlcp_stall_init(&st, 1, 3, 400 * MS);
  assert_int_equal(dlcp_stall_begin(&st, 2, 0, &nonce), 2);
  assert_int_equal(dlcp_stall_on_answer(&st, 2, nonce, DLCP_STALL_NOBODY,
                                        10 * MS, &next), DLCP_STALL_NOBODY);
  assert_int_equal(st.verdict, DLCP_STALL_PENDING);
  assert_int_equal(dlcp_stall_deadline(&st), 60 * MS);
  assert_int_equal(dlcp_stall_on_time(&st, 59 * MS, &next),
                   DLCP_STALL_NOBODY);
  assert_int_equal(dlcp_stall_on_time(&st, 60 * MS, &next), 2);
  nonce = next;
  assert_int_equal(dlcp_stall_deadline(&st), 460 * MS);
  assert_int_equal(dlcp_stall_on_answer(&st, 2, nonce, DLCP_STALL_NOBODY,
                                        70 * MS, &next), DLCP_STALL_NOBODY);
  assert_int_equal(dlcp_stall_on_time(&st, 120 * MS, &next), 2);
  nonce = next;
  /* Past the interval, still idle: named. */
  assert_int_equal(dlcp_stall_on_answer(&st, 2, nonce, DLCP_STALL_NOBODY,
                                        401 * MS, &next), DLCP_STALL_NOBODY);
  assert_int_equal(st.verdict, DLCP_STALL_IDLE);
  assert_int_equal(st.culprit, 2);
  dlcp_stall_describe(&st, why, sizeof(why));
  assert_string_equal(why, "alive but not taking part (waits on nobody); "
                           "waits: rank 1 -> rank 2");
}

static void test_cycle(void **state) {
  dlcp_stall st;
  uint32_t nonce = 0, next = 0;
  char why[256];
  (void)state;
  dlcp_stall_init(&st, 0, 3, 500 * MS);
  assert_int_equal(dlcp_stall_begin(&st, 1, 0, &nonce), 1);
  assert_int_equal(dlcp_stall_on_answer(&st, 1, nonce, 2, 1, &next), 2);
  nonce = next;
  assert_int_equal(dlcp_stall_on_answer(&st, 2, nonce, 0, 2, &next),
                   DLCP_STALL_NOBODY);
  assert_int_equal(st.verdict, DLCP_STALL_CYCLE);
  assert_int_equal(st.culprit, 1);
  dlcp_stall_describe(&st, why, sizeof(why));
  assert_string_equal(why, "no progress: alive ranks wait on each other in "
                           "a cycle (their data lost on the way, or "
                           "different operations); waits: rank 0 -> rank 1 "
                           "-> rank 2 -> rank 0");
}

static void test_bad_input(void **state) {
  dlcp_stall st;
  uint32_t nonce = 0, next = 0;
  (void)state;
  dlcp_stall_init(&st, 0, 4, 500 * MS);
  assert_int_equal(dlcp_stall_begin(&st, 0, 0, &nonce), DLCP_STALL_NOBODY);
  assert_int_equal(dlcp_stall_begin(&st, 4, 0, &nonce), DLCP_STALL_NOBODY);
  assert_int_equal(dlcp_stall_on_answer(&st, 1, 1, 2, 0, &next),
                   DLCP_STALL_NOBODY); /* no inquiry */
  assert_int_equal(dlcp_stall_begin(&st, 1, 0, &nonce), 1);
  /* A rank out of range counts as nobody. */
  assert_int_equal(dlcp_stall_on_answer(&st, 1, nonce, 99, 600 * MS, &next),
                   DLCP_STALL_NOBODY);
  assert_int_equal(st.verdict, DLCP_STALL_IDLE);
  {
    uint32_t n, w;
    dlcp_stall_unpack(dlcp_stall_pack(0xABCDu, 7), &n, &w);
    assert_int_equal(n, 0xABCDu);
    assert_int_equal(w, 7);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_chain_to_silent_rank),
      cmocka_unit_test(test_idle_rank),
      cmocka_unit_test(test_cycle),
      cmocka_unit_test(test_bad_input),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
