/*
 * rt_loop_test.c: the epoll event loop: descriptor callbacks, a timeout
 * without events, and removal during dispatch.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "rt/clock.h"
#include "rt/loop.h"

typedef struct io_ctx {
  int pipe_a[2];
  int pipe_b[2];
  int calls_a;
  int calls_b;
} io_ctx;

static void on_a(dlcp_loop *loop, int fd, uint32_t events, void *user) {
  io_ctx *c = user;
  char buf[16];
  assert_true(events & DLCP_LOOP_READ);
  assert_true(read(fd, buf, sizeof(buf)) > 0);
  c->calls_a++;
  /* b is ready in this very iteration too; removing it must suppress its
   * callback. */
  assert_int_equal(dlcp_loop_del_fd(loop, c->pipe_b[0]), 0);
}

static void on_b(dlcp_loop *loop, int fd, uint32_t events, void *user) {
  io_ctx *c = user;
  char buf[16];
  (void)loop;
  (void)events;
  assert_true(read(fd, buf, sizeof(buf)) > 0);
  c->calls_b++;
  assert_int_equal(dlcp_loop_del_fd(loop, c->pipe_a[0]), 0);
}

static void test_fd_callbacks_and_removal(void **state) {
  dlcp_loop *loop;
  io_ctx c;
  (void)state;
  memset(&c, 0, sizeof(c));
  assert_int_equal(pipe2(c.pipe_a, O_NONBLOCK | O_CLOEXEC), 0);
  assert_int_equal(pipe2(c.pipe_b, O_NONBLOCK | O_CLOEXEC), 0);
  assert_int_equal(dlcp_loop_new(&loop), 0);
  assert_int_equal(
      dlcp_loop_add_fd(loop, c.pipe_a[0], DLCP_LOOP_READ, on_a, &c), 0);
  assert_int_equal(
      dlcp_loop_add_fd(loop, c.pipe_b[0], DLCP_LOOP_READ, on_b, &c), 0);
  assert_int_equal(
      dlcp_loop_add_fd(loop, c.pipe_b[0], DLCP_LOOP_READ, on_b, &c),
      DLCP_ERR_DUPLICATE);
  /* Nothing ready: returns after the timeout without callbacks. */
  assert_int_equal(dlcp_loop_run_once(loop, dlcp_rt_deadline_after(5)), 0);
  assert_int_equal(c.calls_a + c.calls_b, 0);
  assert_int_equal(write(c.pipe_a[1], "x", 1), 1);
  assert_int_equal(write(c.pipe_b[1], "y", 1), 1);
  assert_int_equal(dlcp_loop_run_once(loop, dlcp_rt_deadline_after(1000)), 0);
  /* Whichever ran first removed the other. */
  assert_int_equal(c.calls_a + c.calls_b, 1);
  assert_int_equal(dlcp_loop_del_fd(loop, 12345), DLCP_ERR_INVALID_ARGUMENT);
  dlcp_loop_del(loop);
  close(c.pipe_a[0]);
  close(c.pipe_a[1]);
  close(c.pipe_b[0]);
  close(c.pipe_b[1]);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_fd_callbacks_and_removal),
  };
  alarm(60);
  return cmocka_run_group_tests(tests, NULL, NULL);
}
