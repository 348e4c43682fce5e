/*
 * mlt_tune_test: MLT's rate-control parameters for a segment size (the
 * step per byte acknowledged stays the seed's; thresholds x20 beyond jumbo
 * frames).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "proto/mlt_tune.h"

static void test_reference_segment_keeps_the_seed(void **state) {
  (void)state;
  dlcp_mlt_config def, cfg;
  dlcp_mlt_config_default(&def);
  cfg = def;
  dlcp_mlt_config_tune_segment(&cfg, DLCP_MLT_TUNE_REF_SEGMENT);
  assert_int_equal(cfg.segment_size, DLCP_MLT_TUNE_REF_SEGMENT);
  assert_int_equal(cfg.alpha_bps, def.alpha_bps);
  assert_int_equal(cfg.t_low_ns, def.t_low_ns);
  assert_int_equal(cfg.t_high_ns, def.t_high_ns);
}

static void test_jumbo_scales_the_step_only(void **state) {
  (void)state;
  dlcp_mlt_config def, cfg;
  dlcp_mlt_config_default(&def);
  cfg = def;
  dlcp_mlt_config_tune_segment(&cfg, 2 * DLCP_MLT_TUNE_REF_SEGMENT);
  assert_int_equal(cfg.alpha_bps, 2 * def.alpha_bps);
  cfg = def;
  dlcp_mlt_config_tune_segment(&cfg, DLCP_MLT_TUNE_JUMBO_SEGMENT);
  assert_int_equal(cfg.t_low_ns, def.t_low_ns);
  assert_int_equal(cfg.t_high_ns, def.t_high_ns);
}

static void test_large_datagrams_scale_thresholds(void **state) {
  (void)state;
  dlcp_mlt_config def, cfg;
  dlcp_mlt_config_default(&def);
  cfg = def;
  /* Loopback's segment: 45 reference segments' worth of bytes per ACK. */
  dlcp_mlt_config_tune_segment(&cfg, 45 * DLCP_MLT_TUNE_REF_SEGMENT);
  assert_int_equal(cfg.alpha_bps, 45 * def.alpha_bps);
  assert_int_equal(cfg.t_low_ns, 20 * def.t_low_ns);
  assert_int_equal(cfg.t_high_ns, 20 * def.t_high_ns);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_reference_segment_keeps_the_seed),
      cmocka_unit_test(test_jumbo_scales_the_step_only),
      cmocka_unit_test(test_large_datagrams_scale_thresholds),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
