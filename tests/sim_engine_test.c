/*
 * sim_engine_test.c: the simulator's event queue, timers, packet pool and
 * time helpers.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "proto/rng.h"
#include "sim/engine.h"
#include "sim/packet.h"
#include "sim/simtime.h"

typedef struct log_ctx {
  dlcp_sim_ps times[4096];
  uintptr_t tags[4096];
  size_t n;
} log_ctx;

static void log_event(void *obj, void *arg, dlcp_sim_ps now) {
  log_ctx *log = obj;
  log->times[log->n] = now;
  log->tags[log->n] = (uintptr_t)arg;
  log->n++;
}

/* Random times with many ties: events come out sorted by time, and
 * events with equal time in the order they were scheduled. */
static void test_order_and_ties(void **state) {
  (void)state;
  static log_ctx log;
  log.n = 0;
  dlcp_sim_engine e;
  assert_int_equal(dlcp_sim_engine_init(&e, NULL), 0);
  dlcp_rng rng;
  dlcp_rng_seed(&rng, 42);
  const size_t n = 3000;
  dlcp_sim_ps when[3000];
  for (size_t i = 0; i < n; i++) {
    when[i] = dlcp_rng_below(&rng, 50); /* 50 distinct times: many ties */
    dlcp_sim_engine_at(&e, when[i], log_event, &log, (void *)(uintptr_t)i);
  }
  while (dlcp_sim_engine_step(&e, DLCP_SIM_PS_NEVER) == 1) {
  }
  assert_int_equal(log.n, n);
  for (size_t i = 1; i < n; i++) {
    assert_true(log.times[i - 1] <= log.times[i]);
    if (log.times[i - 1] == log.times[i]) {
      assert_true(log.tags[i - 1] < log.tags[i]);
    }
    assert_int_equal(log.times[i], when[log.tags[i]]);
  }
  assert_int_equal(e.nevents, n);
  dlcp_sim_engine_free(&e);
}

/* Steps stop at |until| and advance the clock to it. */
static void test_until(void **state) {
  (void)state;
  static log_ctx log;
  log.n = 0;
  dlcp_sim_engine e;
  assert_int_equal(dlcp_sim_engine_init(&e, NULL), 0);
  dlcp_sim_engine_at(&e, 100, log_event, &log, NULL);
  dlcp_sim_engine_at(&e, 101, log_event, &log, NULL);
  assert_int_equal(dlcp_sim_engine_step(&e, 100), 1);
  assert_int_equal(dlcp_sim_engine_step(&e, 100), 0);
  assert_int_equal(e.now, 100);
  assert_int_equal(dlcp_sim_engine_next_time(&e), 101);
  assert_int_equal(dlcp_sim_engine_step(&e, 150), 1);
  assert_int_equal(dlcp_sim_engine_step(&e, 150), 0);
  assert_int_equal(dlcp_sim_engine_next_time(&e), DLCP_SIM_PS_NEVER);
  dlcp_sim_engine_free(&e);
}

typedef struct fire_ctx {
  dlcp_sim_ps fired[16];
  size_t n;
} fire_ctx;

static void on_fire(void *obj, dlcp_sim_ps now) {
  fire_ctx *c = obj;
  c->fired[c->n++] = now;
}

/* Re-arming later, earlier, and cancelling: the timer fires exactly once
 * at its last deadline, and keeps at most two events queued. */
static void test_timer_rearm(void **state) {
  (void)state;
  dlcp_sim_engine e;
  assert_int_equal(dlcp_sim_engine_init(&e, NULL), 0);
  fire_ctx c = {{0}, 0};
  dlcp_sim_timer t;
  dlcp_sim_timer_init(&t, &e, on_fire, &c);
  dlcp_sim_timer_arm(&t, 1000);
  for (dlcp_sim_ps d = 1001; d < 2000; d++) {
    dlcp_sim_timer_arm(&t, d); /* later: no new event */
  }
  assert_int_equal(e.len, 1);
  dlcp_sim_timer_arm(&t, 500); /* earlier: one new event */
  assert_int_equal(e.len, 2);
  dlcp_sim_timer_arm(&t, 3000);
  while (dlcp_sim_engine_step(&e, DLCP_SIM_PS_NEVER) == 1) {
  }
  assert_int_equal(c.n, 1);
  assert_int_equal(c.fired[0], 3000);
  assert_false(dlcp_sim_timer_armed(&t));

  dlcp_sim_timer_arm(&t, 4000);
  dlcp_sim_timer_cancel(&t);
  while (dlcp_sim_engine_step(&e, DLCP_SIM_PS_NEVER) == 1) {
  }
  assert_int_equal(c.n, 1);
  dlcp_sim_engine_free(&e);
}

/* A reset timer leaves its queued event behind, which fires for nothing,
 * and its next arm queues an event at once, as a new timer's does (kept,
 * the stale event re-queued itself when it fired: later than a fresh arm,
 * so ties at one instant broke otherwise). */
static void test_timer_reset(void **state) {
  (void)state;
  dlcp_sim_engine e;
  assert_int_equal(dlcp_sim_engine_init(&e, NULL), 0);
  fire_ctx c = {{0}, 0};
  dlcp_sim_timer t;
  dlcp_sim_timer_init(&t, &e, on_fire, &c);
  dlcp_sim_timer_arm(&t, 1000);
  dlcp_sim_timer_cancel(&t);
  dlcp_sim_timer_reset(&t);
  assert_false(dlcp_sim_timer_armed(&t));
  dlcp_sim_timer_arm(&t, 2000); /* later than the stale event: queued */
  assert_int_equal(e.len, 2);
  while (dlcp_sim_engine_step(&e, DLCP_SIM_PS_NEVER) == 1) {
  }
  assert_int_equal(c.n, 1);
  assert_int_equal(c.fired[0], 2000);
  assert_int_equal(e.len, 0);
  dlcp_sim_engine_free(&e);
}

/* The pool reuses freed packets: a steady state allocates nothing new. */
static void test_packet_pool(void **state) {
  (void)state;
  dlcp_sim_packet_pool pool;
  dlcp_sim_packet_pool_init(&pool, NULL);
  dlcp_sim_packet *p[100];
  for (int round = 0; round < 50; round++) {
    for (int i = 0; i < 100; i++) {
      p[i] = dlcp_sim_packet_alloc(&pool);
      assert_non_null(p[i]);
      assert_int_equal(p[i]->size_bytes, 0);
      p[i]->size_bytes = 1500;
    }
    for (int i = 0; i < 100; i++) {
      dlcp_sim_packet_free(&pool, p[i]);
    }
  }
  assert_int_equal(pool.nchunks, 1);
  assert_int_equal(pool.live, 0);
  assert_int_equal(pool.peak, 100);
  dlcp_sim_packet_pool_free(&pool);
}

static void test_time_helpers(void **state) {
  (void)state;
  assert_int_equal(dlcp_sim_time_from_us(24), 24000000ull);
  assert_int_equal(dlcp_sim_time_from_ms(1), 1000000000ull);
  assert_int_equal(dlcp_sim_time_from_ns(3), 3000ull);
  assert_int_equal(dlcp_sim_speed_from_gbps(100), 100000000000ull);
  /* 1500 B at 100 Gbps = 120 ns; at 40 Gbps = 300 ns; exact. */
  assert_int_equal(dlcp_sim_serialization_ps(1500, 100000000000ull), 120000);
  assert_int_equal(dlcp_sim_serialization_ps(1500, 40000000000ull), 300000);
  /* 64 B at 25 Gbps = 20.48 ns. */
  assert_int_equal(dlcp_sim_serialization_ps(64, 25000000000ull), 20480);
  /* A rate that does not divide 8e12: 1 B at 3 Gbps = 2666.67 ps, floor. */
  assert_int_equal(dlcp_sim_serialization_ps(1, 3000000000ull), 2666);
  assert_int_equal(dlcp_sim_serialization_ps(3, 3000000000ull), 8000);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_order_and_ties),
      cmocka_unit_test(test_until),
      cmocka_unit_test(test_timer_rearm),
      cmocka_unit_test(test_timer_reset),
      cmocka_unit_test(test_packet_pool),
      cmocka_unit_test(test_time_helpers),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
