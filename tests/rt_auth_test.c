/*
 * rt_auth_test.c: tags and replay windows of authenticated jobs: a tag
 * checks on the message it was made for and on nothing else (a flipped
 * bit, another stream, another counter, another job or secret); the
 * message may arrive gathered differently; the replay window takes each
 * counter once, in any order within its span, and nothing older.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "rt/auth.h"

static const char SECRET[] = "correct horse battery staple";

static void test_tags(void **state) {
  dlcp_auth a, other_job, other_secret;
  uint8_t msg[1500];
  uint8_t tr[DLCP_AUTH_TRAILER_LEN];
  struct iovec one = {msg, sizeof(msg)};
  struct iovec two[2] = {{msg, 44}, {msg + 44, sizeof(msg) - 44}};
  uint64_t s01 = dlcp_auth_stream(DLCP_AUTH_DATAGRAM, 0, 1);
  uint64_t s10 = dlcp_auth_stream(DLCP_AUTH_DATAGRAM, 1, 0);
  uint64_t c01 = dlcp_auth_stream(DLCP_AUTH_CONTROL, 0, 1);
  (void)state;
  for (size_t i = 0; i < sizeof(msg); i++) {
    msg[i] = (uint8_t)(i * 7);
  }
  assert_int_equal(dlcp_auth_init(&a, SECRET, strlen(SECRET), 7), 0);
  assert_int_equal(dlcp_auth_init(&other_job, SECRET, strlen(SECRET), 8), 0);
  assert_int_equal(dlcp_auth_init(&other_secret, "correct horse battery "
                                  "stapler", 29, 7), 0);
  assert_int_equal(dlcp_auth_init(&a, "short", 5, 7), -1);
  assert_int_equal(dlcp_auth_init(&a, SECRET, strlen(SECRET), 7), 0);

  dlcp_auth_seal(&a, s01, 42, &one, 1, tr);
  assert_int_equal(dlcp_auth_check(&a, s01, &one, 1, tr), 42);
  assert_int_equal(dlcp_auth_check(&a, s01, two, 2, tr), 42);
  assert_int_equal(dlcp_auth_check(&a, s10, &one, 1, tr), 0);
  assert_int_equal(dlcp_auth_check(&a, c01, &one, 1, tr), 0);
  assert_int_equal(dlcp_auth_check(&other_job, s01, &one, 1, tr), 0);
  assert_int_equal(dlcp_auth_check(&other_secret, s01, &one, 1, tr), 0);
  /* Any flipped bit, in the message or the trailer. */
  for (size_t bit = 0; bit < sizeof(msg) * 8; bit += 97) {
    msg[bit / 8] ^= (uint8_t)(1u << (bit % 8));
    assert_int_equal(dlcp_auth_check(&a, s01, &one, 1, tr), 0);
    msg[bit / 8] ^= (uint8_t)(1u << (bit % 8));
  }
  for (size_t bit = 0; bit < DLCP_AUTH_TRAILER_LEN * 8; bit++) {
    tr[bit / 8] ^= (uint8_t)(1u << (bit % 8));
    assert_int_equal(dlcp_auth_check(&a, s01, &one, 1, tr), 0);
    tr[bit / 8] ^= (uint8_t)(1u << (bit % 8));
  }
  /* A shorter message is another message. */
  one.iov_len--;
  assert_int_equal(dlcp_auth_check(&a, s01, &one, 1, tr), 0);
  /* Counter 0 is never valid, even correctly tagged. */
  one.iov_len++;
  dlcp_auth_seal(&a, s01, 0, &one, 1, tr);
  assert_int_equal(dlcp_auth_check(&a, s01, &one, 1, tr), 0);
}

static void test_replay_window(void **state) {
  dlcp_replay w;
  (void)state;
  memset(&w, 0, sizeof(w));
  assert_false(dlcp_replay_accept(&w, 0));
  assert_true(dlcp_replay_accept(&w, 1));
  assert_false(dlcp_replay_accept(&w, 1));
  assert_true(dlcp_replay_accept(&w, 5)); /* 2..4 still to come */
  assert_true(dlcp_replay_accept(&w, 3));
  assert_true(dlcp_replay_accept(&w, 2));
  assert_false(dlcp_replay_accept(&w, 3));
  assert_true(dlcp_replay_accept(&w, 4));
  /* Jump ahead by less than the window: the old ones stay known. */
  assert_true(dlcp_replay_accept(&w, 5 + DLCP_AUTH_WINDOW - 1));
  assert_false(dlcp_replay_accept(&w, 5));
  assert_true(dlcp_replay_accept(&w, 6));
  /* Out of the window: refused, seen or not. */
  assert_true(dlcp_replay_accept(&w, 10 * DLCP_AUTH_WINDOW));
  assert_false(dlcp_replay_accept(&w, 9 * DLCP_AUTH_WINDOW));
  assert_true(dlcp_replay_accept(&w, 9 * DLCP_AUTH_WINDOW + 1));
  assert_false(dlcp_replay_accept(&w, 9 * DLCP_AUTH_WINDOW + 1));
  /* Every counter of a shuffled run inside the window, exactly once. */
  {
    uint64_t base = 20 * DLCP_AUTH_WINDOW;
    for (uint64_t k = 0; k < DLCP_AUTH_WINDOW; k++) {
      uint64_t c = base + (k * 389) % DLCP_AUTH_WINDOW + 1;
      assert_true(dlcp_replay_accept(&w, c));
      assert_false(dlcp_replay_accept(&w, c));
    }
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_tags),
      cmocka_unit_test(test_replay_window),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
