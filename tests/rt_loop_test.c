/*
 * rt_loop_test.c: the epoll event loop: timer order and cancellation
 * (checked against a brute-force model under random operations),
 * descriptor callbacks, removal during dispatch, and cross-thread stop.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include "proto/rng.h"
#include "rt/clock.h"
#include "rt/loop.h"

#define NTIMERS 64

typedef struct fired_log {
  int order[NTIMERS * 4];
  size_t n;
  dlcp_tstamp at[NTIMERS * 4];
} fired_log;

typedef struct test_timer {
  dlcp_loop_timer t;
  int id;
  fired_log *log;
  int rearm_times; /* re-arm in the callback this many times */
} test_timer;

static void on_timer(dlcp_loop *loop, dlcp_loop_timer *t) {
  test_timer *tt = t->user;
  tt->log->order[tt->log->n] = tt->id;
  tt->log->at[tt->log->n] = dlcp_loop_now(loop);
  tt->log->n++;
  if (tt->rearm_times > 0) {
    tt->rearm_times--;
    /* In the past: must still wait for the next iteration. */
    assert_int_equal(dlcp_loop_timer_arm(loop, t, 0), 0);
  }
}

static void test_timers_fire_in_order(void **state) {
  dlcp_loop *loop;
  fired_log log;
  test_timer tt[4];
  dlcp_tstamp base;
  /* Deadlines (ms from base): ids 2 and 3 share one and must keep their
   * arming order. */
  const unsigned offset_ms[4] = {6, 2, 4, 4};
  int i;
  (void)state;
  memset(&log, 0, sizeof(log));
  assert_int_equal(dlcp_loop_new(&loop), 0);
  base = dlcp_rt_now();
  for (i = 0; i < 4; i++) {
    tt[i].id = i;
    tt[i].log = &log;
    tt[i].rearm_times = 0;
    dlcp_loop_timer_init(&tt[i].t, on_timer, &tt[i]);
    assert_int_equal(dlcp_loop_timer_arm(loop, &tt[i].t,
                                         base + offset_ms[i] * DLCP_NS_PER_MS),
                     0);
  }
  while (log.n < 4) {
    assert_int_equal(dlcp_loop_run_once(loop, DLCP_TSTAMP_NEVER), 0);
  }
  assert_int_equal(log.order[0], 1);
  assert_int_equal(log.order[1], 2);
  assert_int_equal(log.order[2], 3);
  assert_int_equal(log.order[3], 0);
  for (i = 0; i < 4; i++) {
    int id = log.order[i];
    /* Never early; late by well under a second even on a busy CI box. */
    assert_true(log.at[i] >= base + offset_ms[id] * DLCP_NS_PER_MS);
    assert_true(log.at[i] < base + (offset_ms[id] + 500) * DLCP_NS_PER_MS);
  }
  dlcp_loop_del(loop);
}

/* A callback re-arming its timer in the past fires again only in the next
 * iteration: the loop cannot spin inside one run_once. */
static void test_rearm_in_callback(void **state) {
  dlcp_loop *loop;
  fired_log log;
  test_timer tt;
  (void)state;
  memset(&log, 0, sizeof(log));
  assert_int_equal(dlcp_loop_new(&loop), 0);
  tt.id = 7;
  tt.log = &log;
  tt.rearm_times = 2;
  dlcp_loop_timer_init(&tt.t, on_timer, &tt);
  assert_int_equal(dlcp_loop_timer_arm(loop, &tt.t, 0), 0);
  assert_int_equal(dlcp_loop_run_once(loop, 0), 0);
  assert_int_equal(log.n, 1);
  assert_true(dlcp_loop_timer_armed(&tt.t));
  assert_int_equal(dlcp_loop_run_once(loop, 0), 0);
  assert_int_equal(dlcp_loop_run_once(loop, 0), 0);
  assert_int_equal(log.n, 3);
  assert_false(dlcp_loop_timer_armed(&tt.t));
  assert_int_equal(dlcp_loop_run_once(loop, 0), 0);
  assert_int_equal(log.n, 3);
  dlcp_loop_del(loop);
}

/* Random arm/cancel/re-arm against a brute-force model: the heap always
 * yields the armed timer with the smallest (deadline, arming order). */
static void test_heap_matches_model(void **state) {
  dlcp_loop *loop;
  fired_log log;
  test_timer tt[NTIMERS];
  dlcp_tstamp model_deadline[NTIMERS];
  uint64_t model_seq[NTIMERS];
  int model_armed[NTIMERS];
  uint64_t seq = 0;
  dlcp_rng rng;
  int step;
  int i;
  (void)state;
  memset(&log, 0, sizeof(log));
  dlcp_rng_seed(&rng, 42);
  assert_int_equal(dlcp_loop_new(&loop), 0);
  for (i = 0; i < NTIMERS; i++) {
    tt[i].id = i;
    tt[i].log = &log;
    tt[i].rearm_times = 0;
    dlcp_loop_timer_init(&tt[i].t, on_timer, &tt[i]);
    model_armed[i] = 0;
  }
  for (step = 0; step < 5000; step++) {
    int k = (int)dlcp_rng_below(&rng, NTIMERS);
    if (dlcp_rng_below(&rng, 3) == 0) {
      dlcp_loop_timer_cancel(loop, &tt[k].t);
      model_armed[k] = 0;
    } else {
      /* Far future so nothing fires; few distinct values force ties. */
      dlcp_tstamp d = DLCP_TSTAMP_NEVER - 1 - dlcp_rng_below(&rng, 16);
      assert_int_equal(dlcp_loop_timer_arm(loop, &tt[k].t, d), 0);
      model_deadline[k] = d;
      model_seq[k] = seq++;
      model_armed[k] = 1;
    }
    /* The armed flags agree with the model, and the model's earliest
     * timer sits at the top of the heap. */
    {
      int best = -1;
      for (i = 0; i < NTIMERS; i++) {
        assert_int_equal(dlcp_loop_timer_armed(&tt[i].t), model_armed[i]);
        if (model_armed[i] &&
            (best < 0 || model_deadline[i] < model_deadline[best] ||
             (model_deadline[i] == model_deadline[best] &&
              model_seq[i] < model_seq[best]))) {
          best = i;
        }
      }
      if (best >= 0) {
        assert_int_equal(tt[best].t.heap_index, 0);
      }
    }
  }
  dlcp_loop_del(loop);
}

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

static void *stop_later(void *arg) {
  usleep(50 * 1000);
  dlcp_loop_stop(arg);
  return NULL;
}

static void test_stop_from_other_thread(void **state) {
  dlcp_loop *loop;
  pthread_t th;
  dlcp_tstamp start;
  (void)state;
  assert_int_equal(dlcp_loop_new(&loop), 0);
  start = dlcp_rt_now();
  assert_int_equal(pthread_create(&th, NULL, stop_later, loop), 0);
  /* Nothing to do at all: only the stop can end this. */
  assert_int_equal(dlcp_loop_run(loop), 0);
  assert_true(dlcp_rt_now() - start < 2000 * DLCP_NS_PER_MS);
  pthread_join(th, NULL);
  dlcp_loop_del(loop);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_timers_fire_in_order),
      cmocka_unit_test(test_rearm_in_callback),
      cmocka_unit_test(test_heap_matches_model),
      cmocka_unit_test(test_fd_callbacks_and_removal),
      cmocka_unit_test(test_stop_from_other_thread),
  };
  alarm(60);
  return cmocka_run_group_tests(tests, NULL, NULL);
}
