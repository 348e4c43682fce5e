/*
 * rate_test: the TIMELY-like rate controller on synthetic RTT sequences,
 * with the seed's defaults (T_low 12.5 us, T_high 125 us, alpha 40 Mbps,
 * beta 0.8).  Every expected rate is computed by hand from the rules.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "proto/rate.h"

#define LINE 10000000000ull /* 10 Gbps */
#define ALPHA 40000000.0

static dlcp_rate make(double start_bps) {
  dlcp_rate_params p;
  dlcp_rate_params_default(&p, LINE);
  dlcp_rate r;
  dlcp_rate_init(&r, &p);
  r.rate_bps = start_bps;
  return r;
}

static void assert_rate(const dlcp_rate *r, double want) {
  double diff = r->rate_bps - want;
  if (diff < -1e-3 || diff > 1e-3) {
    fail_msg("rate %.3f bps, want %.3f bps", r->rate_bps, want);
  }
}

static void test_defaults_are_the_seeds(void **state) {
  (void)state;
  dlcp_rate_params p;
  dlcp_rate_params_default(&p, LINE);
  assert_int_equal(p.t_low_ns, 12500);
  assert_int_equal(p.t_high_ns, 125000);
  assert_int_equal(p.alpha_bps, 40000000);
  assert_true(p.beta == 0.8);
  dlcp_rate r;
  dlcp_rate_init(&r, &p);
  assert_rate(&r, (double)LINE); /* starts at line rate */
}

static void test_below_t_low_increases_additively(void **state) {
  (void)state;
  dlcp_rate r = make(5e9);
  dlcp_rate_on_rtt(&r, 10000);
  assert_rate(&r, 5e9 + ALPHA);
  dlcp_rate_on_rtt(&r, 12499);
  assert_rate(&r, 5e9 + 2 * ALPHA);
  /* Rising but still below T_low: the RTT alone decides. */
  dlcp_rate_on_rtt(&r, 12400);
  assert_rate(&r, 5e9 + 3 * ALPHA);
}

static void test_above_t_high_decreases_multiplicatively(void **state) {
  (void)state;
  dlcp_rate r = make(8e9);
  dlcp_rate_on_rtt(&r, 250000); /* 1 - 0.8 (1 - 125/250) = 0.6 */
  assert_rate(&r, 8e9 * 0.6);
  dlcp_rate_on_rtt(&r, 500000); /* 1 - 0.8 (1 - 0.25) = 0.4 */
  assert_rate(&r, 8e9 * 0.6 * 0.4);
  /* Falling, yet above T_high: still a decrease. */
  dlcp_rate_on_rtt(&r, 200000); /* 1 - 0.8 (1 - 0.625) = 0.7 */
  assert_rate(&r, 8e9 * 0.6 * 0.4 * 0.7);
}

static void test_between_thresholds_follows_gradient(void **state) {
  (void)state;
  dlcp_rate r = make(6e9);
  dlcp_rate_on_rtt(&r, 50000); /* first sample: no gradient, hold */
  assert_rate(&r, 6e9);
  dlcp_rate_on_rtt(&r, 60000); /* rising: hold */
  assert_rate(&r, 6e9);
  dlcp_rate_on_rtt(&r, 60000); /* flat: hold */
  assert_rate(&r, 6e9);
  dlcp_rate_on_rtt(&r, 40000); /* falling: increase */
  assert_rate(&r, 6e9 + ALPHA);
  dlcp_rate_on_rtt(&r, 30000); /* falling: increase */
  assert_rate(&r, 6e9 + 2 * ALPHA);
  dlcp_rate_on_rtt(&r, 125000); /* exactly T_high, rising: hold */
  assert_rate(&r, 6e9 + 2 * ALPHA);
}

static void test_clamped_to_line_and_floor(void **state) {
  (void)state;
  dlcp_rate r = make((double)LINE - 1e7);
  dlcp_rate_on_rtt(&r, 1000);
  assert_rate(&r, (double)LINE);
  for (int i = 0; i < 100; i++) {
    dlcp_rate_on_rtt(&r, 100000000); /* 100 ms: factor ~0.2 each */
  }
  assert_rate(&r, (double)r.params.min_rate_bps);
}

static void test_tx_time_rounds_up(void **state) {
  (void)state;
  dlcp_rate r = make(1e9); /* 1 Gbps: 1 byte = 8 ns */
  assert_int_equal(dlcp_rate_tx_time(&r, 1500), 12000);
  r.rate_bps = 3e9; /* 1500 B = 4000 ns exactly; 1 B = 2.67 -> 3 */
  assert_int_equal(dlcp_rate_tx_time(&r, 1500), 4000);
  assert_int_equal(dlcp_rate_tx_time(&r, 1), 3);
}

static void test_params_checked(void **state) {
  (void)state;
  dlcp_rate_params p;
  dlcp_rate_params_default(&p, LINE);
  assert_int_equal(dlcp_rate_params_check(&p), 0);
  p.t_high_ns = p.t_low_ns;
  assert_int_equal(dlcp_rate_params_check(&p), DLCP_ERR_CONFIG);
  dlcp_rate_params_default(&p, LINE);
  p.beta = 1.5;
  assert_int_equal(dlcp_rate_params_check(&p), DLCP_ERR_CONFIG);
  dlcp_rate_params_default(&p, LINE);
  p.min_rate_bps = LINE + 1;
  assert_int_equal(dlcp_rate_params_check(&p), DLCP_ERR_CONFIG);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_defaults_are_the_seeds),
      cmocka_unit_test(test_below_t_low_increases_additively),
      cmocka_unit_test(test_above_t_high_decreases_multiplicatively),
      cmocka_unit_test(test_between_thresholds_follows_gradient),
      cmocka_unit_test(test_clamped_to_line_and_floor),
      cmocka_unit_test(test_tx_time_rounds_up),
      cmocka_unit_test(test_params_checked),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
