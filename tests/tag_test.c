/*
 * tag_test: layer priorities i * P / L and the sampled-median importance
 * rule of MLT's gradient-aware tagging.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <math.h>

#include <cmocka.h>

#include "proto/rng.h"
#include "proto/tag.h"

static void test_layer_priority(void **state) {
  (void)state;
  /* L = 16 layers over P = 8 queues: two layers per queue. */
  for (uint32_t i = 0; i < 16; i++) {
    assert_int_equal(dlcp_tag_priority(i, 16, 8), i / 2);
  }
  /* L = 3 over P = 8: 0, 8/3 -> 2, 16/3 -> 5. */
  assert_int_equal(dlcp_tag_priority(0, 3, 8), 0);
  assert_int_equal(dlcp_tag_priority(1, 3, 8), 2);
  assert_int_equal(dlcp_tag_priority(2, 3, 8), 5);
  /* ResNet-50-like L = 161, P = 8. */
  assert_int_equal(dlcp_tag_priority(160, 161, 8), 7);
  assert_int_equal(dlcp_tag_priority(20, 161, 8), 0);
  assert_int_equal(dlcp_tag_priority(21, 161, 8), 1);
  /* Out of range layers clamp to the last queue; no layers: 0. */
  assert_int_equal(dlcp_tag_priority(500, 161, 8), 7);
  assert_int_equal(dlcp_tag_priority(3, 0, 8), 0);
  assert_int_equal(dlcp_tag_priority(3, 10, 0), 0);
}

static void test_sample_size_is_five_percent(void **state) {
  (void)state;
  assert_int_equal(dlcp_tag_sample_size(0, DLCP_TAG_SAMPLE_PERMILLE), 0);
  assert_int_equal(dlcp_tag_sample_size(1, DLCP_TAG_SAMPLE_PERMILLE), 1);
  assert_int_equal(dlcp_tag_sample_size(100, DLCP_TAG_SAMPLE_PERMILLE), 5);
  assert_int_equal(dlcp_tag_sample_size(1000000, DLCP_TAG_SAMPLE_PERMILLE),
                   50000);
  assert_int_equal(dlcp_tag_sample_size(10, 1000), 10);
}

static void test_exact_median_with_full_sample(void **state) {
  (void)state;
  float g[7] = {-5, 1, -3, 2, 7, -4, 6};
  float scratch[7];
  dlcp_rng rng;
  dlcp_rng_seed(&rng, 1);
  /* |g| = 5 1 3 2 7 4 6 -> median 4. */
  assert_true(dlcp_tag_median_abs_f32(g, 7, 1000, &rng, scratch) == 4.0f);
}

static void test_sampled_median_is_close(void **state) {
  (void)state;
  enum { N = 200000 };
  float *g = malloc(N * sizeof(float));
  float *scratch = malloc(N * sizeof(float));
  /* |g| uniform over (0, 1] in a shuffled order: median 0.5. */
  dlcp_rng rng;
  dlcp_rng_seed(&rng, 42);
  for (uint32_t i = 0; i < N; i++) {
    g[i] = (float)(i + 1) / N * ((i & 1) ? -1.0f : 1.0f);
  }
  for (uint32_t i = N - 1; i > 0; i--) {
    uint32_t j = (uint32_t)dlcp_rng_below(&rng, i + 1);
    float t = g[i];
    g[i] = g[j];
    g[j] = t;
  }
  float m = dlcp_tag_median_abs_f32(g, N, DLCP_TAG_SAMPLE_PERMILLE, &rng,
                                    scratch);
  /* 10,000 samples: the standard error of the median is 0.005. */
  assert_true(fabsf(m - 0.5f) < 0.02f);
  free(g);
  free(scratch);
}

static void test_nan_counts_as_large(void **state) {
  (void)state;
  float g[3] = {NAN, 1, 2};
  float scratch[3];
  dlcp_rng rng;
  dlcp_rng_seed(&rng, 1);
  assert_true(dlcp_tag_median_abs_f32(g, 3, 1000, &rng, scratch) == 2.0f);
  assert_true(dlcp_tag_mean_abs_above(g, 1, 1e30f));
}

static void test_mean_above_median(void **state) {
  (void)state;
  float g[4] = {-1, 1, -3, 3}; /* mean |g| = 2 */
  assert_true(dlcp_tag_mean_abs_above(g, 4, 1.9f));
  assert_false(dlcp_tag_mean_abs_above(g, 4, 2.0f));
  assert_false(dlcp_tag_mean_abs_above(g, 0, 0.0f));
}

static void test_rng_is_reproducible(void **state) {
  (void)state;
  dlcp_rng a, b, c;
  dlcp_rng_seed(&a, 7);
  dlcp_rng_seed(&b, 7);
  dlcp_rng_seed(&c, 8);
  int differ = 0;
  for (int i = 0; i < 100; i++) {
    uint64_t x = dlcp_rng_next(&a);
    assert_int_equal(x, dlcp_rng_next(&b));
    differ += x != dlcp_rng_next(&c);
  }
  assert_true(differ > 90);
  for (int i = 0; i < 1000; i++) {
    assert_true(dlcp_rng_below(&a, 7) < 7);
    double u = dlcp_rng_unit(&a);
    assert_true(u >= 0.0 && u < 1.0);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_layer_priority),
      cmocka_unit_test(test_sample_size_is_five_percent),
      cmocka_unit_test(test_exact_median_with_full_sample),
      cmocka_unit_test(test_sampled_median_is_close),
      cmocka_unit_test(test_nan_counts_as_large),
      cmocka_unit_test(test_mean_above_median),
      cmocka_unit_test(test_rng_is_reproducible),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
