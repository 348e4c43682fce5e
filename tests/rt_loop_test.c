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

/* Whichever of the two pipes is dispatched first serves both: it takes the
 * other (ready, still to come) and reads it; a third pipe with nothing in
 * it is not ready and cannot be taken. */
typedef struct take_ctx {
  int pipe[3][2];
  int calls;
  int took;
} take_ctx;

static void on_either(dlcp_loop *loop, int fd, uint32_t events, void *user) {
  take_ctx *c = user;
  char buf[16];
  (void)events;
  assert_true(read(fd, buf, sizeof(buf)) > 0);
  c->calls++;
  int other = fd == c->pipe[0][0] ? c->pipe[1][0] : c->pipe[0][0];
  if (dlcp_loop_take_ready(loop, other)) {
    c->took++;
    assert_true(read(other, buf, sizeof(buf)) > 0);
  }
  assert_false(dlcp_loop_take_ready(loop, c->pipe[2][0]));
  assert_false(dlcp_loop_take_ready(loop, fd)); /* dispatched already */
}

static void test_take_ready(void **state) {
  dlcp_loop *loop;
  take_ctx c;
  (void)state;
  memset(&c, 0, sizeof(c));
  assert_int_equal(dlcp_loop_new(&loop), 0);
  for (int i = 0; i < 3; i++) {
    assert_int_equal(pipe2(c.pipe[i], O_NONBLOCK | O_CLOEXEC), 0);
    assert_int_equal(
        dlcp_loop_add_fd(loop, c.pipe[i][0], DLCP_LOOP_READ, on_either, &c),
        0);
  }
  assert_int_equal(write(c.pipe[0][1], "x", 1), 1);
  assert_int_equal(write(c.pipe[1][1], "y", 1), 1);
  assert_int_equal(dlcp_loop_run_once(loop, dlcp_rt_deadline_after(1000)), 0);
  assert_int_equal(c.calls, 1);
  assert_int_equal(c.took, 1);
  /* Outside a dispatch nothing is ready to take. */
  assert_false(dlcp_loop_take_ready(loop, c.pipe[0][0]));
  dlcp_loop_del(loop);
  for (int i = 0; i < 3; i++) {
    close(c.pipe[i][0]);
    close(c.pipe[i][1]);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_fd_callbacks_and_removal),
      cmocka_unit_test(test_take_ready),
  };
  alarm(60);
  return cmocka_run_group_tests(tests, NULL, NULL);
}
