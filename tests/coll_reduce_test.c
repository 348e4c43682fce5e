/*
 * coll_reduce_test: the reduction kernels of src/coll/reduce.c.
 *
 * Every dtype x op against a scalar reference on unaligned buffers; the
 * half conversions at their rounding boundaries (ties to even, overflow,
 * subnormals, NaN) and exhaustively as round trips; integer wrap-around
 * and AVG's truncation toward zero; the documented NaN/inf behaviour.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "coll/reduce.h"
#include "proto/rng.h"

static float f32(uint32_t bits) {
  float f;
  memcpy(&f, &bits, 4);
  return f;
}

static uint32_t bits32(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}

static void test_sizes_and_names(void **state) {
  (void)state;
  assert_int_equal(dlcp_dtype_size(DLCP_FLOAT32), 4);
  assert_int_equal(dlcp_dtype_size(DLCP_FLOAT16), 2);
  assert_int_equal(dlcp_dtype_size(DLCP_BFLOAT16), 2);
  assert_int_equal(dlcp_dtype_size(DLCP_INT32), 4);
  assert_int_equal(dlcp_dtype_size(DLCP_INT64), 8);
  assert_int_equal(dlcp_dtype_size((dlcp_dtype)99), 0);
  assert_string_equal(dlcp_dtype_name(DLCP_BFLOAT16), "bfloat16");
  assert_string_equal(dlcp_redop_name(DLCP_AVG), "avg");
  int32_t a = 1, b = 2;
  assert_int_equal(dlcp_reduce_into(&a, &b, 1, (dlcp_dtype)99, DLCP_SUM),
                   DLCP_ERR_INVALID_ARGUMENT);
  assert_int_equal(dlcp_reduce_into(&a, &b, 1, DLCP_INT32, (dlcp_redop)9),
                   DLCP_ERR_INVALID_ARGUMENT);
  assert_int_equal(a, 1); /* nothing written */
  assert_int_equal(dlcp_reduce_finish(&a, 1, DLCP_INT32, DLCP_AVG, 0),
                   DLCP_ERR_INVALID_ARGUMENT);
}

static void test_f16_conversion_boundaries(void **state) {
  (void)state;
  assert_int_equal(dlcp_f32_to_f16(1.0f), 0x3c00);
  assert_int_equal(dlcp_f32_to_f16(-2.0f), 0xc000);
  assert_int_equal(dlcp_f32_to_f16(65504.0f), 0x7bff);  /* largest */
  assert_int_equal(dlcp_f32_to_f16(65519.0f), 0x7bff);  /* below the tie */
  assert_int_equal(dlcp_f32_to_f16(65520.0f), 0x7c00);  /* tie -> even: inf */
  assert_int_equal(dlcp_f32_to_f16(1e10f), 0x7c00);
  assert_int_equal(dlcp_f32_to_f16(-INFINITY), 0xfc00);
  /* 1 + 2^-11 is half way between 1 and 1 + 2^-10: even (1). */
  assert_int_equal(dlcp_f32_to_f16(1.0f + 0x1p-11f), 0x3c00);
  /* 1 + 3*2^-11 is half way between 1+2^-10 and 1+2^-9: even (1+2^-9). */
  assert_int_equal(dlcp_f32_to_f16(1.0f + 3 * 0x1p-11f), 0x3c02);
  /* Just above the tie rounds up. */
  assert_int_equal(dlcp_f32_to_f16(f32(bits32(1.0f + 0x1p-11f) + 1)),
                   0x3c01);
  /* Subnormals: the smallest is 2^-24; 2^-25 ties to 0; 3*2^-25 ties to 2
   * units (even); just above 2^-25 rounds up to 1 unit. */
  assert_int_equal(dlcp_f32_to_f16(0x1p-24f), 0x0001);
  assert_int_equal(dlcp_f32_to_f16(0x1p-25f), 0x0000);
  assert_int_equal(dlcp_f32_to_f16(-0x1p-25f), 0x8000);
  assert_int_equal(dlcp_f32_to_f16(3 * 0x1p-25f), 0x0002);
  assert_int_equal(dlcp_f32_to_f16(f32(bits32(0x1p-25f) + 1)), 0x0001);
  /* The largest subnormal rounds up into the smallest normal. */
  assert_int_equal(dlcp_f32_to_f16(0x1p-14f - 0x1p-26f), 0x0400);
  /* NaN stays a quiet NaN with its sign. */
  uint16_t qn = dlcp_f32_to_f16(f32(0x7f800001u));
  assert_true((qn & 0x7c00) == 0x7c00 && (qn & 0x03ff) != 0);
  assert_true(qn & 0x0200);
  assert_true(dlcp_f32_to_f16(f32(0xffc00000u)) & 0x8000);
  assert_true(dlcp_f16_to_f32(0x0001) == 0x1p-24f);
  assert_true(dlcp_f16_to_f32(0x03ff) == 0x1p-14f - 0x1p-24f);
  assert_true(isnan(dlcp_f16_to_f32(0x7e00)));
  assert_true(isinf(dlcp_f16_to_f32(0xfc00)) &&
              dlcp_f16_to_f32(0xfc00) < 0);
}

static void test_half_round_trips_exhaustive(void **state) {
  (void)state;
  for (uint32_t h = 0; h < 0x10000; h++) {
    float f = dlcp_f16_to_f32((uint16_t)h);
    if (isnan(f)) {
      assert_true(isnan(dlcp_f16_to_f32(dlcp_f32_to_f16(f))));
    } else {
      assert_int_equal(dlcp_f32_to_f16(f), h);
    }
    float g = dlcp_bf16_to_f32((uint16_t)h);
    if (isnan(g)) {
      assert_true(isnan(dlcp_bf16_to_f32(dlcp_f32_to_bf16(g))));
    } else {
      assert_int_equal(dlcp_f32_to_bf16(g), h);
    }
  }
}

static void test_bf16_rounding(void **state) {
  (void)state;
  assert_int_equal(dlcp_f32_to_bf16(1.0f), 0x3f80);
  assert_int_equal(dlcp_f32_to_bf16(f32(0x3f808000u)), 0x3f80); /* tie, even */
  assert_int_equal(dlcp_f32_to_bf16(f32(0x3f818000u)), 0x3f82); /* tie, up */
  assert_int_equal(dlcp_f32_to_bf16(f32(0x3f808001u)), 0x3f81);
  assert_int_equal(dlcp_f32_to_bf16(f32(0x7f7fffffu)), 0x7f80); /* -> inf */
  uint16_t qn = dlcp_f32_to_bf16(f32(0x7f800001u));
  assert_true((qn & 0x7f80) == 0x7f80 && (qn & 0x7f) != 0);
}

/* Scalar reference of one element, through double for floats. */
static void ref_elem(unsigned char *d, const unsigned char *s,
                     dlcp_dtype dt, dlcp_redop op) {
  switch (dt) {
  case DLCP_FLOAT32:
  case DLCP_FLOAT16:
  case DLCP_BFLOAT16: {
    float a, b;
    if (dt == DLCP_FLOAT32) {
      memcpy(&a, d, 4);
      memcpy(&b, s, 4);
    } else {
      uint16_t x, y;
      memcpy(&x, d, 2);
      memcpy(&y, s, 2);
      a = dt == DLCP_FLOAT16 ? dlcp_f16_to_f32(x) : dlcp_bf16_to_f32(x);
      b = dt == DLCP_FLOAT16 ? dlcp_f16_to_f32(y) : dlcp_bf16_to_f32(y);
    }
    float r = op == DLCP_MIN ? (isnan(b) || b < a ? b : a)
              : op == DLCP_MAX ? (isnan(b) || b > a ? b : a)
                               : a + b;
    if (dt == DLCP_FLOAT32) {
      memcpy(d, &r, 4);
    } else {
      uint16_t h = dt == DLCP_FLOAT16 ? dlcp_f32_to_f16(r)
                                      : dlcp_f32_to_bf16(r);
      memcpy(d, &h, 2);
    }
    break;
  }
  case DLCP_INT32: {
    int32_t a, b;
    memcpy(&a, d, 4);
    memcpy(&b, s, 4);
    int32_t r = op == DLCP_MIN   ? (b < a ? b : a)
                : op == DLCP_MAX ? (b > a ? b : a)
                                 : (int32_t)((uint32_t)a + (uint32_t)b);
    memcpy(d, &r, 4);
    break;
  }
  case DLCP_INT64: {
    int64_t a, b;
    memcpy(&a, d, 8);
    memcpy(&b, s, 8);
    int64_t r = op == DLCP_MIN   ? (b < a ? b : a)
                : op == DLCP_MAX ? (b > a ? b : a)
                                 : (int64_t)((uint64_t)a + (uint64_t)b);
    memcpy(d, &r, 8);
    break;
  }
  }
}

/* Random elements of |dt|: finite values over a wide range, plus the odd
 * extreme for integers. */
static void fill_random(unsigned char *p, size_t n, dlcp_dtype dt,
                        dlcp_rng *rng) {
  size_t esz = dlcp_dtype_size(dt);
  for (size_t i = 0; i < n; i++) {
    uint64_t r = dlcp_rng_next(rng);
    switch (dt) {
    case DLCP_FLOAT32: {
      float f = (float)((double)(int64_t)(r >> 11) * 0x1p-40);
      memcpy(p + i * esz, &f, 4);
      break;
    }
    case DLCP_FLOAT16:
    case DLCP_BFLOAT16: {
      float f = (float)((double)(int32_t)(r >> 32) * 0x1p-24);
      uint16_t h = dt == DLCP_FLOAT16 ? dlcp_f32_to_f16(f)
                                      : dlcp_f32_to_bf16(f);
      memcpy(p + i * esz, &h, 2);
      break;
    }
    case DLCP_INT32:
    case DLCP_INT64:
      memcpy(p + i * esz, &r, esz);
      break;
    }
  }
}

static void test_every_dtype_and_op_unaligned(void **state) {
  (void)state;
  const dlcp_dtype dts[] = {DLCP_FLOAT32, DLCP_FLOAT16, DLCP_BFLOAT16,
                            DLCP_INT32, DLCP_INT64};
  const dlcp_redop ops[] = {DLCP_SUM, DLCP_AVG, DLCP_MIN, DLCP_MAX};
  dlcp_rng rng;
  dlcp_rng_seed(&rng, 42);
  const size_t n = 1029; /* not a multiple of any vector width or block */
  for (size_t d = 0; d < 5; d++) {
    for (size_t o = 0; o < 4; o++) {
      size_t esz = dlcp_dtype_size(dts[d]);
      /* +1: the buffers start one byte past malloc's alignment. */
      unsigned char *dst = malloc(n * esz + 1), *src = malloc(n * esz + 1);
      unsigned char *ref = malloc(n * esz);
      assert_non_null(dst);
      assert_non_null(src);
      assert_non_null(ref);
      fill_random(dst + 1, n, dts[d], &rng);
      fill_random(src + 1, n, dts[d], &rng);
      memcpy(ref, dst + 1, n * esz);
      for (size_t i = 0; i < n; i++) {
        ref_elem(ref + i * esz, src + 1 + i * esz, dts[d], ops[o]);
      }
      assert_int_equal(dlcp_reduce_into(dst + 1, src + 1, n, dts[d], ops[o]),
                       0);
      assert_memory_equal(dst + 1, ref, n * esz);
      free(dst);
      free(src);
      free(ref);
    }
  }
}

static void test_integer_wraparound_and_avg(void **state) {
  (void)state;
  int32_t a[3] = {INT32_MAX, INT32_MIN, -7};
  int32_t b[3] = {1, -1, 0};
  assert_int_equal(dlcp_reduce_into(a, b, 3, DLCP_INT32, DLCP_SUM), 0);
  assert_int_equal(a[0], INT32_MIN);
  assert_int_equal(a[1], INT32_MAX);
  assert_int_equal(a[2], -7);
  /* AVG: truncation toward zero, on the wrapped sum. */
  int32_t v[4] = {-7, 7, -1, INT32_MIN};
  assert_int_equal(dlcp_reduce_finish(v, 4, DLCP_INT32, DLCP_AVG, 2), 0);
  assert_int_equal(v[0], -3);
  assert_int_equal(v[1], 3);
  assert_int_equal(v[2], 0);
  assert_int_equal(v[3], INT32_MIN / 2);
  int64_t x[2] = {INT64_MIN, INT64_MAX}, y[2] = {-1, 1};
  assert_int_equal(dlcp_reduce_into(x, y, 2, DLCP_INT64, DLCP_SUM), 0);
  assert_true(x[0] == INT64_MAX && x[1] == INT64_MIN);
  int64_t m[2] = {5, -5}, k[2] = {-9, 9};
  assert_int_equal(dlcp_reduce_into(m, k, 2, DLCP_INT64, DLCP_MIN), 0);
  assert_true(m[0] == -9 && m[1] == -5);
  int64_t w[1] = {-10};
  assert_int_equal(dlcp_reduce_finish(w, 1, DLCP_INT64, DLCP_AVG, 3), 0);
  assert_true(w[0] == -3);
  /* SUM/MIN/MAX finish is a no-op. */
  int32_t z[1] = {9};
  assert_int_equal(dlcp_reduce_finish(z, 1, DLCP_INT32, DLCP_SUM, 4), 0);
  assert_int_equal(z[0], 9);
}

static void test_float_nan_inf_zero(void **state) {
  (void)state;
  /* SUM: inf + -inf = NaN; NaN propagates. */
  float a[3] = {INFINITY, NAN, 1.0f}, b[3] = {-INFINITY, 1.0f, NAN};
  assert_int_equal(dlcp_reduce_into(a, b, 3, DLCP_FLOAT32, DLCP_SUM), 0);
  assert_true(isnan(a[0]) && isnan(a[1]) && isnan(a[2]));
  /* MIN/MAX propagate NaN from either side. */
  float c[2] = {NAN, 1.0f}, d[2] = {0.0f, NAN};
  assert_int_equal(dlcp_reduce_into(c, d, 2, DLCP_FLOAT32, DLCP_MIN), 0);
  assert_true(isnan(c[0]) && isnan(c[1]));
  float e[2] = {NAN, 1.0f}, f[2] = {0.0f, NAN};
  assert_int_equal(dlcp_reduce_into(e, f, 2, DLCP_FLOAT32, DLCP_MAX), 0);
  assert_true(isnan(e[0]) && isnan(e[1]));
  /* Between -0 and +0 the destination is kept. */
  float g[1] = {-0.0f}, h[1] = {0.0f};
  assert_int_equal(dlcp_reduce_into(g, h, 1, DLCP_FLOAT32, DLCP_MAX), 0);
  assert_true(signbit(g[0]));
  /* inf wins MAX and MIN normally. */
  float i[1] = {1.0f}, j[1] = {INFINITY};
  assert_int_equal(dlcp_reduce_into(i, j, 1, DLCP_FLOAT32, DLCP_MAX), 0);
  assert_true(isinf(i[0]));
  /* Half types: overflow of a sum becomes inf. */
  uint16_t p[1] = {0x7bff}, q[1] = {0x7bff};
  assert_int_equal(dlcp_reduce_into(p, q, 1, DLCP_FLOAT16, DLCP_SUM), 0);
  assert_int_equal(p[0], 0x7c00);
}

static void test_half_sum_rounds_each_step(void **state) {
  (void)state;
  /* 2048 + 1 in binary16: the spacing at 2048 is 2, 2049 is a tie, even
   * is 2048.  2048 + 3 = 2051 ties between 2050 and 2052: even is 2052. */
  uint16_t a[2] = {dlcp_f32_to_f16(2048.0f), dlcp_f32_to_f16(2048.0f)};
  uint16_t b[2] = {dlcp_f32_to_f16(1.0f), dlcp_f32_to_f16(3.0f)};
  assert_int_equal(dlcp_reduce_into(a, b, 2, DLCP_FLOAT16, DLCP_SUM), 0);
  assert_true(dlcp_f16_to_f32(a[0]) == 2048.0f);
  assert_true(dlcp_f16_to_f32(a[1]) == 2052.0f);
  /* bfloat16: 256 + 1 ties to 256 (spacing 2 at 256). */
  uint16_t c[1] = {dlcp_f32_to_bf16(256.0f)}, d[1] = {dlcp_f32_to_bf16(1.0f)};
  assert_int_equal(dlcp_reduce_into(c, d, 1, DLCP_BFLOAT16, DLCP_SUM), 0);
  assert_true(dlcp_bf16_to_f32(c[0]) == 256.0f);
  /* AVG of halves divides in float and rounds once: 3 / 2 = 1.5 exactly;
   * 1 / 3 rounds to the nearest binary16. */
  uint16_t e[2] = {dlcp_f32_to_f16(3.0f), dlcp_f32_to_f16(1.0f)};
  assert_int_equal(dlcp_reduce_finish(e, 2, DLCP_FLOAT16, DLCP_AVG, 2), 0);
  assert_true(dlcp_f16_to_f32(e[0]) == 1.5f);
  assert_true(dlcp_f16_to_f32(e[1]) == 0.5f);
  uint16_t t[1] = {dlcp_f32_to_f16(1.0f)};
  assert_int_equal(dlcp_reduce_finish(t, 1, DLCP_FLOAT16, DLCP_AVG, 3), 0);
  assert_int_equal(t[0], dlcp_f32_to_f16(1.0f / 3.0f));
  float fl[1] = {1.0f};
  assert_int_equal(dlcp_reduce_finish(fl, 1, DLCP_FLOAT32, DLCP_AVG, 3), 0);
  assert_true(fl[0] == 1.0f / 3.0f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_sizes_and_names),
      cmocka_unit_test(test_f16_conversion_boundaries),
      cmocka_unit_test(test_half_round_trips_exhaustive),
      cmocka_unit_test(test_bf16_rounding),
      cmocka_unit_test(test_every_dtype_and_op_unaligned),
      cmocka_unit_test(test_integer_wraparound_and_avg),
      cmocka_unit_test(test_float_nan_inf_zero),
      cmocka_unit_test(test_half_sum_rounds_each_step),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
