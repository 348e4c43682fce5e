/*
 * reduce.c: the element-wise reduction kernels of the collectives.
 *
 * Model: a reduction is a loop over two byte buffers that the collective
 * layer hands in with no alignment promise (a segment of a user tensor, a
 * slice of a receive buffer).  Each loop reads and writes elements through
 * memcpy of a fixed size, the portable spelling of an unaligned load that
 * compilers turn into a single instruction; the buffers are restrict, so
 * with one operation per loop and no branches the compiler can vectorise.
 * The half types are widened to float a block at a time into stack arrays,
 * combined with the float loops and narrowed back with round-to-nearest-
 * even: the half conversions are integer code (no dependence on the FPU's
 * rounding mode or on compiler support for _Float16).  Integer SUM is done
 * in the unsigned type of the same width, where wrap-around is defined.
 */
#include "coll/reduce.h"

#include <string.h>

size_t dlcp_dtype_size(dlcp_dtype dtype) {
  switch (dtype) {
  case DLCP_FLOAT32:
  case DLCP_INT32:
    return 4;
  case DLCP_FLOAT16:
  case DLCP_BFLOAT16:
    return 2;
  case DLCP_INT64:
    return 8;
  }
  return 0;
}

const char *dlcp_dtype_name(dlcp_dtype dtype) {
  switch (dtype) {
  case DLCP_FLOAT32:
    return "float32";
  case DLCP_FLOAT16:
    return "float16";
  case DLCP_BFLOAT16:
    return "bfloat16";
  case DLCP_INT32:
    return "int32";
  case DLCP_INT64:
    return "int64";
  }
  return "?";
}

const char *dlcp_redop_name(dlcp_redop op) {
  switch (op) {
  case DLCP_SUM:
    return "sum";
  case DLCP_AVG:
    return "avg";
  case DLCP_MIN:
    return "min";
  case DLCP_MAX:
    return "max";
  }
  return "?";
}

static int redop_valid(dlcp_redop op) {
  return op == DLCP_SUM || op == DLCP_AVG || op == DLCP_MIN ||
         op == DLCP_MAX;
}

/* ---- scalar half conversions ------------------------------------------ */

static uint32_t f32_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof(u));
  return u;
}

static float f32_from_bits(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof(f));
  return f;
}

float dlcp_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t exp = (uint32_t)(h >> 10) & 0x1fu;
  uint32_t man = (uint32_t)h & 0x3ffu;
  if (exp == 0x1f) { /* inf or NaN: keep the payload bits */
    return f32_from_bits(sign | 0x7f800000u | (man << 13));
  }
  if (exp != 0) { /* normal: rebias 15 -> 127 */
    return f32_from_bits(sign | ((exp + 112u) << 23) | (man << 13));
  }
  if (man == 0) {
    return f32_from_bits(sign);
  }
  /* Subnormal half: value = man * 2^-24.  With the top set bit of |man| at
   * position p (0..9) that is 1.f * 2^(p - 24), a normal float whose biased
   * exponent is p - 24 + 127. */
  uint32_t p = 9;
  while (!(man & (1u << p))) {
    p--;
  }
  uint32_t frac = (man << (23 - p)) & 0x7fffffu;
  return f32_from_bits(sign | ((p + 103u) << 23) | frac);
}

uint16_t dlcp_f32_to_f16(float f) {
  uint32_t x = f32_bits(f);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t absx = x & 0x7fffffffu;
  if (absx > 0x7f800000u) { /* NaN: quiet, keep the top payload bits */
    return (uint16_t)(sign | 0x7e00u | ((absx >> 13) & 0x3ffu));
  }
  if (absx >= 0x47800000u) { /* >= 65536 (or inf): beyond the last
                                rounding interval of 65504 */
    return (uint16_t)(sign | 0x7c00u);
  }
  if (absx < 0x38800000u) { /* below 2^-14: a half subnormal or zero */
    if (absx <= 0x33000000u) { /* <= 2^-25: half way to the smallest
                                  subnormal or less; the tie goes to 0 */
      return (uint16_t)sign;
    }
    /* value = m * 2^(e - 150) with the implicit bit in m; in units of the
     * half subnormal step 2^-24 that is m >> (126 - e), shift 14..24. */
    uint32_t e = absx >> 23;
    uint32_t m = (absx & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126u - e;
    uint32_t r = m >> shift;
    uint32_t rem = m & ((1u << shift) - 1u);
    uint32_t half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (r & 1u))) {
      r++; /* may carry into 0x400, the smallest normal: still correct */
    }
    return (uint16_t)(sign | r);
  }
  /* Normal: rebias the exponent (127 -> 15, i.e. subtract 112 << 23) and
   * drop 13 mantissa bits with round-to-nearest-even.  A carry out of the
   * mantissa bumps the exponent, up to inf (0x7c00) at 65520. */
  uint32_t r = (absx - 0x38000000u) >> 13;
  uint32_t rem = absx & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (r & 1u))) {
    r++;
  }
  return (uint16_t)(sign | r);
}

float dlcp_bf16_to_f32(uint16_t h) {
  return f32_from_bits((uint32_t)h << 16);
}

uint16_t dlcp_f32_to_bf16(float f) {
  uint32_t x = f32_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) { /* NaN: force quiet */
    return (uint16_t)((x >> 16) | 0x40u);
  }
  /* Round to nearest even on the 16 dropped bits: adding 0x7fff rounds up
   * exactly when they exceed half, and the extra lsb breaks ties to even.
   * A carry into the exponent is the right answer (up to inf). */
  x += 0x7fffu + ((x >> 16) & 1u);
  return (uint16_t)(x >> 16);
}

/* ---- float32 loops ----------------------------------------------------- */

/* One loop per operation so the body has no branch on |op|. */
static void f32_sum(unsigned char *restrict d, const unsigned char *restrict s,
                    size_t n) {
  for (size_t i = 0; i < n; i++) {
    float a, b;
    memcpy(&a, d + 4 * i, 4);
    memcpy(&b, s + 4 * i, 4);
    a += b;
    memcpy(d + 4 * i, &a, 4);
  }
}

/* MIN/MAX: take |b| when it is smaller (larger) or NaN, so a NaN on either
 * side wins: a NaN |a| fails both comparisons and stays. */
static void f32_min(unsigned char *restrict d, const unsigned char *restrict s,
                    size_t n) {
  for (size_t i = 0; i < n; i++) {
    float a, b;
    memcpy(&a, d + 4 * i, 4);
    memcpy(&b, s + 4 * i, 4);
    a = (b < a || b != b) ? b : a;
    memcpy(d + 4 * i, &a, 4);
  }
}

static void f32_max(unsigned char *restrict d, const unsigned char *restrict s,
                    size_t n) {
  for (size_t i = 0; i < n; i++) {
    float a, b;
    memcpy(&a, d + 4 * i, 4);
    memcpy(&b, s + 4 * i, 4);
    a = (b > a || b != b) ? b : a;
    memcpy(d + 4 * i, &a, 4);
  }
}

static void f32_apply(unsigned char *restrict d,
                      const unsigned char *restrict s, size_t n,
                      dlcp_redop op) {
  switch (op) {
  case DLCP_SUM:
  case DLCP_AVG:
    f32_sum(d, s, n);
    break;
  case DLCP_MIN:
    f32_min(d, s, n);
    break;
  case DLCP_MAX:
    f32_max(d, s, n);
    break;
  }
}

/* ---- half types: widen a block, combine in float, narrow ---------------- */

#define HALF_BLOCK 256

static void half_widen(float *out, const unsigned char *in, size_t n,
                       int bf16) {
  for (size_t i = 0; i < n; i++) {
    uint16_t h;
    memcpy(&h, in + 2 * i, 2);
    out[i] = bf16 ? dlcp_bf16_to_f32(h) : dlcp_f16_to_f32(h);
  }
}

static void half_narrow(unsigned char *out, const float *in, size_t n,
                        int bf16) {
  for (size_t i = 0; i < n; i++) {
    uint16_t h = bf16 ? dlcp_f32_to_bf16(in[i]) : dlcp_f32_to_f16(in[i]);
    memcpy(out + 2 * i, &h, 2);
  }
}

static void half_reduce(unsigned char *restrict d,
                        const unsigned char *restrict s, size_t n,
                        dlcp_redop op, int bf16) {
  float a[HALF_BLOCK], b[HALF_BLOCK];
  while (n > 0) {
    size_t k = n < HALF_BLOCK ? n : HALF_BLOCK;
    half_widen(a, d, k, bf16);
    half_widen(b, s, k, bf16);
    f32_apply((unsigned char *)a, (const unsigned char *)b, k, op);
    half_narrow(d, a, k, bf16);
    d += 2 * k;
    s += 2 * k;
    n -= k;
  }
}

/* ---- integer loops ----------------------------------------------------- */

/* Integer loops are generated for both widths: SUM in the unsigned type
 * (defined wrap-around), MIN/MAX in the signed type. */
#define INT_LOOPS(bits)                                                        \
  static void i##bits##_sum(unsigned char *restrict d,                        \
                            const unsigned char *restrict s, size_t n) {      \
    for (size_t i = 0; i < n; i++) {                                           \
      uint##bits##_t a, b;                                                     \
      memcpy(&a, d + sizeof(a) * i, sizeof(a));                                \
      memcpy(&b, s + sizeof(b) * i, sizeof(b));                                \
      a += b;                                                                  \
      memcpy(d + sizeof(a) * i, &a, sizeof(a));                                \
    }                                                                          \
  }                                                                            \
  static void i##bits##_min(unsigned char *restrict d,                        \
                            const unsigned char *restrict s, size_t n) {      \
    for (size_t i = 0; i < n; i++) {                                           \
      int##bits##_t a, b;                                                      \
      memcpy(&a, d + sizeof(a) * i, sizeof(a));                                \
      memcpy(&b, s + sizeof(b) * i, sizeof(b));                                \
      a = b < a ? b : a;                                                       \
      memcpy(d + sizeof(a) * i, &a, sizeof(a));                                \
    }                                                                          \
  }                                                                            \
  static void i##bits##_max(unsigned char *restrict d,                        \
                            const unsigned char *restrict s, size_t n) {      \
    for (size_t i = 0; i < n; i++) {                                           \
      int##bits##_t a, b;                                                      \
      memcpy(&a, d + sizeof(a) * i, sizeof(a));                                \
      memcpy(&b, s + sizeof(b) * i, sizeof(b));                                \
      a = b > a ? b : a;                                                       \
      memcpy(d + sizeof(a) * i, &a, sizeof(a));                                \
    }                                                                          \
  }                                                                            \
  static void i##bits##_apply(unsigned char *restrict d,                      \
                              const unsigned char *restrict s, size_t n,      \
                              dlcp_redop op) {                                 \
    switch (op) {                                                              \
    case DLCP_SUM:                                                             \
    case DLCP_AVG:                                                             \
      i##bits##_sum(d, s, n);                                                  \
      break;                                                                   \
    case DLCP_MIN:                                                             \
      i##bits##_min(d, s, n);                                                  \
      break;                                                                   \
    case DLCP_MAX:                                                             \
      i##bits##_max(d, s, n);                                                  \
      break;                                                                   \
    }                                                                          \
  }

INT_LOOPS(32)
INT_LOOPS(64)

int dlcp_reduce_into(void *restrict dst, const void *restrict src, size_t count,
                     dlcp_dtype dtype, dlcp_redop op) {
  unsigned char *d = dst;
  const unsigned char *s = src;
  if (!redop_valid(op)) {
    return DLCP_ERR_INVALID_ARGUMENT;
  }
  switch (dtype) {
  case DLCP_FLOAT32:
    f32_apply(d, s, count, op);
    return 0;
  case DLCP_FLOAT16:
    half_reduce(d, s, count, op, 0);
    return 0;
  case DLCP_BFLOAT16:
    half_reduce(d, s, count, op, 1);
    return 0;
  case DLCP_INT32:
    i32_apply(d, s, count, op);
    return 0;
  case DLCP_INT64:
    i64_apply(d, s, count, op);
    return 0;
  }
  return DLCP_ERR_INVALID_ARGUMENT;
}

/* ---- AVG's final division ---------------------------------------------- */

static void f32_div(unsigned char *b, size_t n, float div) {
  for (size_t i = 0; i < n; i++) {
    float a;
    memcpy(&a, b + 4 * i, 4);
    a /= div; /* division, not a reciprocal multiply: rounded once */
    memcpy(b + 4 * i, &a, 4);
  }
}

static void half_div(unsigned char *b, size_t n, float div, int bf16) {
  float a[HALF_BLOCK];
  while (n > 0) {
    size_t k = n < HALF_BLOCK ? n : HALF_BLOCK;
    half_widen(a, b, k, bf16);
    for (size_t i = 0; i < k; i++) {
      a[i] /= div;
    }
    half_narrow(b, a, k, bf16);
    b += 2 * k;
    n -= k;
  }
}

int dlcp_reduce_finish(void *buf, size_t count, dlcp_dtype dtype,
                       dlcp_redop op, uint32_t nranks) {
  unsigned char *b = buf;
  if (!redop_valid(op) || dlcp_dtype_size(dtype) == 0 || nranks == 0) {
    return DLCP_ERR_INVALID_ARGUMENT;
  }
  if (op != DLCP_AVG || nranks == 1) {
    return 0;
  }
  switch (dtype) {
  case DLCP_FLOAT32:
    f32_div(b, count, (float)nranks);
    break;
  case DLCP_FLOAT16:
    half_div(b, count, (float)nranks, 0);
    break;
  case DLCP_BFLOAT16:
    half_div(b, count, (float)nranks, 1);
    break;
  case DLCP_INT32: {
    /* C's signed division truncates toward zero.  Done in 64 bits so that
     * no |nranks| can overflow the divisor. */
    for (size_t i = 0; i < count; i++) {
      int32_t a;
      memcpy(&a, b + 4 * i, 4);
      a = (int32_t)((int64_t)a / (int64_t)nranks);
      memcpy(b + 4 * i, &a, 4);
    }
    break;
  }
  case DLCP_INT64: {
    int64_t div = (int64_t)nranks;
    for (size_t i = 0; i < count; i++) {
      int64_t a;
      memcpy(&a, b + 8 * i, 8);
      a /= div;
      memcpy(b + 8 * i, &a, 8);
    }
    break;
  }
  }
  return 0;
}
