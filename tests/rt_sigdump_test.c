/*
 * rt_sigdump_test.c: SIGUSR1 reaches every registered eventfd; the
 * previous disposition comes back after the last unregistration; an
 * application's own SIGUSR1 handler is left alone.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <signal.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "rt/sigdump.h"

static volatile sig_atomic_t app_got;

static void app_handler(int sig) {
  (void)sig;
  app_got++;
}

static uint64_t take(int efd) {
  uint64_t v = 0;
  if (read(efd, &v, sizeof(v)) != (ssize_t)sizeof(v)) {
    return 0;
  }
  return v;
}

static void test_reaches_every_registered_fd(void **state) {
  int a = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  int b = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  struct sigaction cur;
  (void)state;
  assert_true(dlcp_sigdump_register(a));
  assert_true(dlcp_sigdump_register(b));
  assert_int_equal(raise(SIGUSR1), 0);
  assert_int_equal(take(a), 1);
  assert_int_equal(take(b), 1);
  dlcp_sigdump_unregister(a);
  assert_int_equal(raise(SIGUSR1), 0);
  assert_int_equal(take(a), 0);
  assert_int_equal(take(b), 1);
  dlcp_sigdump_unregister(b);
  assert_int_equal(sigaction(SIGUSR1, NULL, &cur), 0);
  assert_true(cur.sa_handler == SIG_DFL);
  close(a);
  close(b);
}

static void test_application_handler_kept(void **state) {
  struct sigaction sa;
  struct sigaction cur;
  int a = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  (void)state;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = app_handler;
  sigemptyset(&sa.sa_mask);
  assert_int_equal(sigaction(SIGUSR1, &sa, NULL), 0);
  assert_false(dlcp_sigdump_register(a));
  assert_int_equal(raise(SIGUSR1), 0);
  assert_int_equal(app_got, 1);
  assert_int_equal(take(a), 0);
  dlcp_sigdump_unregister(a);
  assert_int_equal(sigaction(SIGUSR1, NULL, &cur), 0);
  assert_true(cur.sa_handler == app_handler);
  sa.sa_handler = SIG_DFL;
  assert_int_equal(sigaction(SIGUSR1, &sa, NULL), 0);
  close(a);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_reaches_every_registered_fd),
      cmocka_unit_test(test_application_handler_kept),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
