/*
 * coll_algo_test: the collective algorithms of src/coll run against each
 * other through the virtual-time harness tests/support/collsim.
 *
 * Every run checks the full contract: every rank DONE with status 0 and
 * the expected algorithm; outputs equal to a serial reference (bit-exact
 * for integers and for floats whose sums are exact in any order; within
 * the documented bound for random floats, and then bit-identical on every
 * rank); out-of-place inputs untouched; with a loss bound, identical
 * missing ranges on every rank, zeros there, exact elsewhere, delivered
 * fraction >= 1 - p.  The harness itself fails a run on a duplicate or
 * reused tag, a size mismatch or a stall.
 *
 * Float tolerance: a sum of n terms in any order, rounded at each step in
 * a type with unit roundoff u (2^-24 float32, 2^-11 float16, 2^-8
 * bfloat16), is within (n - 1) u sum|x_i| of the exact sum; AVG adds one
 * rounding of the quotient.  Every algorithm here computes each element's
 * sum once, on one rank, and copies it, so all ranks agree bit for bit.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "coll/coll.h"
#include "coll/reduce.h"
#include "collsim.h"
#include "proto/rng.h"

#define MAXR COLLSIM_MAX_WORLD

typedef struct spec {
  dlcp_coll_kind kind;
  dlcp_algo algo;
  uint32_t world;
  uint64_t count;
  dlcp_dtype dtype;
  dlcp_redop op;
  bool in_place;
  uint32_t root;
  uint64_t chunk;
  double loss;          /* the operation's loss bound */
  uint64_t exact_bytes; /* transfers the driver delivers whole, at most */
  double segment_loss;  /* collsim's per-piece loss */
  bool random_floats;   /* else small integers: exact in any order */
  bool order_sensitive; /* floats: +-0 and NaNs of several payloads */
  const uint32_t *topo;
  uint32_t levels;
  uint64_t seed;
  /* straggler runs */
  int32_t slow_rank;
  dlcp_duration slow_ns;
  dlcp_tstamp slow_until_ns;
  double alpha;
  dlcp_duration step_hint, trans_hint;
  dlcp_duration compute_ns, jitter_ns, note_jitter_ns;
  /* a group: operation i runs as the harness's rank members[i] */
  const uint32_t *members;
  bool fuse; /* reduce_on_arrival */
  /* every rank's operation first runs on other inputs and buffers, then
   * runs this spec through dlcp_coll_reuse */
  bool reuse;
} spec;

typedef struct outcome {
  dlcp_tstamp makespan;
  dlcp_tstamp mean_done; /* mean of the ranks' completion times */
  uint32_t bypasses;
  size_t nmissing;
  double delivered;
  dlcp_duration step_ns, trans_ns; /* from the rank after the slow one */
  uint64_t lost_bytes;
  uint64_t notes; /* NOTEs the operations sent */
} outcome;

static void spec_init(spec *s) {
  memset(s, 0, sizeof(*s));
  s->kind = DLCP_COLL_ALLREDUCE;
  s->algo = DLCP_ALGO_RING;
  s->world = 4;
  s->dtype = DLCP_INT32;
  s->op = DLCP_SUM;
  s->seed = 1;
  s->slow_rank = -1;
  s->compute_ns = 1000;
}

static double unit_roundoff(dlcp_dtype dt) {
  switch (dt) {
  case DLCP_FLOAT32:
    return 0x1p-24;
  case DLCP_FLOAT16:
    return 0x1p-11;
  case DLCP_BFLOAT16:
    return 0x1p-8;
  case DLCP_INT32:
  case DLCP_INT64:
    break;
  }
  return 0.0;
}

static bool is_float(dlcp_dtype dt) {
  return dt == DLCP_FLOAT32 || dt == DLCP_FLOAT16 || dt == DLCP_BFLOAT16;
}

static double get_double(const unsigned char *p, dlcp_dtype dt) {
  switch (dt) {
  case DLCP_FLOAT32: {
    float f;
    memcpy(&f, p, 4);
    return f;
  }
  case DLCP_FLOAT16:
  case DLCP_BFLOAT16: {
    uint16_t h;
    memcpy(&h, p, 2);
    return dt == DLCP_FLOAT16 ? dlcp_f16_to_f32(h) : dlcp_bf16_to_f32(h);
  }
  case DLCP_INT32: {
    int32_t v;
    memcpy(&v, p, 4);
    return v;
  }
  case DLCP_INT64: {
    int64_t v;
    memcpy(&v, p, 8);
    return (double)v;
  }
  }
  return 0;
}

static void put_value(unsigned char *p, dlcp_dtype dt, double v,
                      uint64_t raw) {
  switch (dt) {
  case DLCP_FLOAT32: {
    float f = (float)v;
    memcpy(p, &f, 4);
    break;
  }
  case DLCP_FLOAT16: {
    uint16_t h = dlcp_f32_to_f16((float)v);
    memcpy(p, &h, 2);
    break;
  }
  case DLCP_BFLOAT16: {
    uint16_t h = dlcp_f32_to_bf16((float)v);
    memcpy(p, &h, 2);
    break;
  }
  case DLCP_INT32:
    memcpy(p, &raw, 4);
    break;
  case DLCP_INT64:
    memcpy(p, &raw, 8);
    break;
  }
}

/* Values whose combination depends on the operand order: MIN/MAX of +0
 * and -0 keep the left operand, and of two NaNs (like SUM of two NaNs) the
 * payload and sign depend on it.  Element i draws from +-0 (i % 3 == 0),
 * from NaNs of two payloads and signs and 1 (i % 3 == 1), or from small
 * integers. */
static void put_order_sensitive(unsigned char *p, dlcp_dtype dt, uint64_t i,
                                uint64_t raw) {
  /* +0, -0, NaN with payload 1, negative NaN with payload 2, 1.0 */
  static const uint32_t f32[] = {0x00000000u, 0x80000000u, 0x7fc00001u,
                                 0xffc00002u, 0x3f800000u};
  static const uint16_t f16[] = {0x0000u, 0x8000u, 0x7e01u, 0xfe02u,
                                 0x3c00u};
  static const uint16_t bf16[] = {0x0000u, 0x8000u, 0x7fc1u, 0xffc2u,
                                  0x3f80u};
  unsigned k;
  switch (i % 3) {
  case 0:
    k = (unsigned)(raw % 2);
    break;
  case 1:
    k = 2 + (unsigned)(raw % 3);
    break;
  default:
    put_value(p, dt, (double)((int64_t)(raw % 17) - 8), raw);
    return;
  }
  if (dt == DLCP_FLOAT32) {
    memcpy(p, &f32[k], 4);
  } else {
    memcpy(p, dt == DLCP_FLOAT16 ? &f16[k] : &bf16[k], 2);
  }
}

/* Rank r's input: integers are full-width random (sums wrap); floats are
 * small integers in [-8, 8] (exact in every order and type) or random in
 * [-1, 1], or order-sensitive values (put_order_sensitive). */
static void make_input(unsigned char *p, const spec *s, uint32_t r) {
  size_t esz = dlcp_dtype_size(s->dtype);
  dlcp_rng rng;
  dlcp_rng_seed(&rng, s->seed * 1000003u + r);
  for (uint64_t i = 0; i < s->count; i++) {
    uint64_t raw = dlcp_rng_next(&rng);
    if (s->order_sensitive && is_float(s->dtype)) {
      put_order_sensitive(p + i * esz, s->dtype, i, raw);
      continue;
    }
    double v = s->random_floats ? dlcp_rng_unit(&rng) * 2.0 - 1.0
                                : (double)((int64_t)(raw % 17) - 8);
    put_value(p + i * esz, s->dtype, v, raw);
  }
}

static bool in_missing(const dlcp_coll_result *res, uint64_t e) {
  for (size_t m = 0; m < res->nmissing; m++) {
    if (e >= res->missing[m].offset &&
        e < res->missing[m].offset + res->missing[m].len) {
      return true;
    }
  }
  return false;
}

static bool all_zero(const unsigned char *p, size_t n) {
  for (size_t i = 0; i < n; i++) {
    if (p[i]) {
      return false;
    }
  }
  return true;
}

/* Checks element |e| of an output against the reference. */
static void check_elem(const spec *s, const unsigned char *got,
                       const unsigned char *want, double abs_sum,
                       uint32_t r, uint64_t e) {
  size_t esz = dlcp_dtype_size(s->dtype);
  if (s->order_sensitive && is_float(s->dtype)) {
    /* The serial reference associates differently, so it may keep the
     * other zero or NaN: compare values.  run_spec still demands the same
     * bits on every rank. */
    double w = get_double(want, s->dtype), g = get_double(got, s->dtype);
    if (!(g == w || (isnan(g) && isnan(w)))) {
      fail_msg("rank %u element %llu: got %g want %g (%s %s n=%u)", r,
               (unsigned long long)e, g, w, dlcp_algo_name(s->algo),
               dlcp_redop_name(s->op), s->world);
    }
    return;
  }
  if (!is_float(s->dtype) || !s->random_floats ||
      s->kind != DLCP_COLL_ALLREDUCE) {
    if (memcmp(got, want, esz) != 0) {
      fail_msg("rank %u element %llu: got %g want %g (%s %s n=%u)", r,
               (unsigned long long)e, get_double(got, s->dtype),
               get_double(want, s->dtype), dlcp_algo_name(s->algo),
               dlcp_redop_name(s->op), s->world);
    }
    return;
  }
  double u = unit_roundoff(s->dtype);
  double tol = (s->world - 1) * u * abs_sum;
  double w = get_double(want, s->dtype), g = get_double(got, s->dtype);
  if (s->op == DLCP_AVG) {
    tol = tol / s->world + 2 * u * fabs(w);
  } else if (s->op == DLCP_MIN || s->op == DLCP_MAX) {
    tol = 0; /* exact in any order */
  }
  tol += 2 * u * fabs(w); /* the reference's own rounding */
  if (fabs(g - w) > tol) {
    fail_msg("rank %u element %llu: got %.9g want %.9g tol %.3g", r,
             (unsigned long long)e, g, w, tol);
  }
}

/* |s|'s operations run first on other inputs in other buffers of the same
 * layout, to the end; then each takes |params| through dlcp_coll_reuse
 * into |op|, which run_spec runs and checks like new ones. */
static void reuse_ops(const spec *s, const collsim_config *cfg,
                      const dlcp_coll_params *params, dlcp_coll **op) {
  uint32_t n = s->world;
  size_t bytes = (size_t)s->count * dlcp_dtype_size(s->dtype);
  spec other = *s;
  other.seed = s->seed + 7919;
  unsigned char *win[MAXR], *wout[MAXR];
  collsim *cs = collsim_new(cfg);
  assert_non_null(cs);
  for (uint32_t r = 0; r < n; r++) {
    win[r] = malloc(bytes + 1);
    wout[r] = malloc(bytes + 1);
    assert_non_null(win[r]);
    assert_non_null(wout[r]);
    make_input(win[r], &other, r);
    memcpy(wout[r], win[r], bytes);
    /* The same layout: what pointed into the output or the input points
     * into their stand-ins. */
    dlcp_coll_params p = params[r];
    const unsigned char *sb = p.sendbuf, *rb = p.recvbuf;
    if (rb) {
      p.recvbuf = wout[r];
    }
    if (sb && rb && sb >= rb && sb < rb + bytes + 1) {
      p.sendbuf = wout[r] + (sb - rb);
    } else if (sb) {
      uint64_t off = 0, len;
      if (s->kind == DLCP_COLL_ALLGATHER) { /* just the shard */
        dlcp_coll_shard(s->count, n, r, &off, &len);
      }
      p.sendbuf = win[r] + off * dlcp_dtype_size(s->dtype);
    }
    assert_int_equal(dlcp_coll_new(&op[r], &p, NULL, 0), 0);
    collsim_set_op(cs, s->members ? s->members[r] : r, op[r]);
  }
  if (collsim_run(cs) != 0) {
    fail_msg("first run before reuse: %s", collsim_error(cs));
  }
  collsim_del(cs);
  for (uint32_t r = 0; r < n; r++) {
    assert_int_equal(dlcp_coll_reuse(op[r], &params[r], 0), 0);
    free(win[r]);
    free(wout[r]);
  }
}

static void run_spec(const spec *s, outcome *o) {
  uint32_t n = s->world;
  size_t esz = dlcp_dtype_size(s->dtype);
  size_t bytes = (size_t)s->count * esz;
  unsigned char *in[MAXR], *out[MAXR], *ref = calloc(1, bytes + 1);
  double *abs_sum = calloc(s->count + 1, sizeof(double));
  dlcp_coll *op[MAXR];
  dlcp_coll_params params[MAXR];
  assert_non_null(ref);
  assert_non_null(abs_sum);
  memset(o, 0, sizeof(*o));

  collsim_config cfg;
  collsim_config_default(&cfg);
  cfg.world = n;
  cfg.seed = s->seed;
  cfg.segment_loss = s->segment_loss;
  cfg.loss_segment_bytes = 16;
  cfg.compute_ns = s->compute_ns;
  cfg.jitter_ns = s->jitter_ns;
  cfg.note_jitter_ns = s->note_jitter_ns;
  if (s->slow_rank >= 0) {
    cfg.slow_ns[s->slow_rank] = s->slow_ns;
    cfg.slow_until_ns = s->slow_until_ns;
  }
  collsim *cs = collsim_new(&cfg);
  assert_non_null(cs);

  for (uint32_t r = 0; r < n; r++) {
    in[r] = malloc(bytes + 1);
    out[r] = malloc(bytes + 1);
    assert_non_null(in[r]);
    assert_non_null(out[r]);
    make_input(in[r], s, r);
    memset(out[r], 0xab, bytes + 1); /* garbage: must be overwritten */
    uint64_t off, len;
    dlcp_coll_shard(s->count, n, r, &off, &len);
    dlcp_coll_params p;
    dlcp_coll_params_default(&p);
    p.kind = s->kind;
    p.algo = s->algo;
    p.rank = r;
    p.world = n;
    p.count = s->count;
    p.dtype = s->dtype;
    p.op = s->op;
    p.root = s->root;
    p.chunk_bytes = s->chunk;
    p.loss_bound = s->loss;
    p.exact_bytes = s->exact_bytes;
    p.topo = s->topo;
    p.topo_levels = s->levels;
    p.bypass_alpha = s->alpha;
    p.bypass_step_hint_ns = s->step_hint;
    p.bypass_trans_hint_ns = s->trans_hint;
    p.members = s->members;
    p.reduce_on_arrival = s->fuse;
    switch (s->kind) {
    case DLCP_COLL_ALLREDUCE:
    case DLCP_COLL_REDUCE_SCATTER:
    case DLCP_COLL_BROADCAST:
    case DLCP_COLL_REDUCE:
      if (s->in_place) {
        memcpy(out[r], in[r], bytes);
        p.sendbuf = out[r];
      } else {
        p.sendbuf = in[r];
      }
      p.recvbuf = out[r];
      break;
    case DLCP_COLL_ALLGATHER:
      if (s->in_place) {
        memcpy(out[r] + off * esz, in[r] + off * esz, len * esz);
        p.sendbuf = out[r];
      } else {
        p.sendbuf = in[r] + off * esz; /* just the shard */
      }
      p.recvbuf = out[r];
      break;
    case DLCP_COLL_BARRIER:
      break;
    }
    params[r] = p;
  }
  if (s->reuse) {
    reuse_ops(s, &cfg, params, op);
  }
  for (uint32_t r = 0; r < n; r++) {
    if (!s->reuse) {
      assert_int_equal(dlcp_coll_new(&op[r], &params[r], NULL, 0), 0);
    }
    collsim_set_op(cs, s->members ? s->members[r] : r, op[r]);
  }
  if (collsim_run(cs) != 0) {
    fail_msg("%s %s n=%u count=%llu %s: %s", dlcp_coll_kind_name(s->kind),
             dlcp_algo_name(s->algo), n, (unsigned long long)s->count,
             s->in_place ? "in-place" : "out-of-place", collsim_error(cs));
  }
  collsim_stats st;
  collsim_get_stats(cs, &st);
  o->lost_bytes = st.lost_bytes;
  o->notes = st.notes;
  o->makespan = collsim_makespan(cs);
  for (uint32_t r = 0; r < n; r++) {
    o->mean_done += collsim_done_at(cs, r) / n;
  }

  /* The reference. */
  switch (s->kind) {
  case DLCP_COLL_ALLREDUCE:
  case DLCP_COLL_REDUCE_SCATTER:
  case DLCP_COLL_REDUCE:
    memcpy(ref, in[0], bytes);
    for (uint32_t r = 1; r < n; r++) {
      assert_int_equal(
          dlcp_reduce_into(ref, in[r], (size_t)s->count, s->dtype, s->op), 0);
    }
    assert_int_equal(dlcp_reduce_finish(ref, (size_t)s->count, s->dtype,
                                        s->op, n),
                     0);
    for (uint32_t r = 0; r < n; r++) {
      for (uint64_t i = 0; i < s->count; i++) {
        abs_sum[i] += fabs(get_double(in[r] + i * esz, s->dtype));
      }
    }
    break;
  case DLCP_COLL_ALLGATHER:
    for (uint32_t r = 0; r < n; r++) {
      uint64_t off, len;
      dlcp_coll_shard(s->count, n, r, &off, &len);
      memcpy(ref + off * esz, in[r] + off * esz, len * esz);
    }
    break;
  case DLCP_COLL_BROADCAST:
    memcpy(ref, in[s->root], bytes);
    break;
  case DLCP_COLL_BARRIER:
    break;
  }

  dlcp_coll_result r0;
  dlcp_coll_get_result(op[0], &r0);
  o->nmissing = r0.nmissing;
  o->delivered = r0.delivered_fraction;
  for (uint32_t r = 0; r < n; r++) {
    dlcp_coll_result res;
    dlcp_coll_get_result(op[r], &res);
    assert_true(res.done);
    assert_int_equal(res.status, 0);
    assert_int_equal(res.failed_peer, -1);
    if (s->algo != DLCP_ALGO_AUTO && s->kind != DLCP_COLL_BARRIER) {
      dlcp_algo want = s->algo;
      if (s->algo == DLCP_ALGO_RING_BYPASS &&
          (s->kind == DLCP_COLL_ALLGATHER || s->kind == DLCP_COLL_BROADCAST)) {
        want = DLCP_ALGO_RING;
      }
      assert_int_equal(res.algo, want);
    }
    o->bypasses += res.bypasses;
    if (s->slow_rank >= 0 && r == (uint32_t)(s->slow_rank + 1) % n) {
      o->step_ns = res.step_ns;
      o->trans_ns = res.trans_ns;
    }
    /* Identical missing lists everywhere. */
    assert_int_equal(res.nmissing, r0.nmissing);
    if (res.nmissing) {
      assert_memory_equal(res.missing, r0.missing,
                          res.nmissing * sizeof(dlcp_coll_range));
    }
    if (s->loss <= 0.0) {
      assert_int_equal(res.nmissing, 0);
      assert_true(res.delivered_fraction == 1.0);
    } else {
      assert_true(res.delivered_fraction >= 1.0 - s->loss);
    }
    uint64_t off, len;
    dlcp_coll_shard(s->count, n, r, &off, &len);
    /* Out-of-place inputs are never written. */
    if (!s->in_place && s->kind != DLCP_COLL_BARRIER) {
      unsigned char *fresh = malloc(bytes + 1);
      assert_non_null(fresh);
      make_input(fresh, s, r);
      assert_memory_equal(fresh, in[r], bytes);
      free(fresh);
    }
    uint64_t lo = 0, hi = s->count;
    uint64_t out_first = 0; /* the element at out[r][0] */
    if (s->kind == DLCP_COLL_REDUCE_SCATTER) {
      lo = off;
      hi = off + len;
      if (!s->in_place) {
        out_first = off;
        /* Nothing written past the shard. */
        assert_int_equal(out[r][len * esz], 0xab);
      }
    }
    if (s->kind == DLCP_COLL_BARRIER ||
        (s->kind == DLCP_COLL_REDUCE && r != s->root)) {
      continue; /* elsewhere a reduce leaves partial sums */
    }
    for (uint64_t e = lo; e < hi; e++) {
      const unsigned char *got = out[r] + (e - out_first) * esz;
      if (in_missing(&res, e)) {
        assert_true(all_zero(got, esz));
        continue;
      }
      check_elem(s, got, ref + e * esz, abs_sum[e], r, e);
      if (s->kind == DLCP_COLL_ALLREDUCE && r > 0) {
        assert_memory_equal(got, out[0] + e * esz, esz); /* same bits */
      }
    }
  }
  for (uint32_t r = 0; r < n; r++) {
    dlcp_coll_del(op[r]);
    free(in[r]);
    free(out[r]);
  }
  collsim_del(cs);
  free(ref);
  free(abs_sum);
}

/* Rack labels for RAT in the matrix: two ranks per rack, one level. */
static uint32_t rack_of_pairs[MAXR];

static const dlcp_algo allreduce_algos[] = {
    DLCP_ALGO_RING, DLCP_ALGO_RING_BYPASS, DLCP_ALGO_PS,
    DLCP_ALGO_HALVING_DOUBLING, DLCP_ALGO_RAT, DLCP_ALGO_DIRECT,
    DLCP_ALGO_RECURSIVE_DOUBLING};
#define N_ALLREDUCE_ALGOS (sizeof(allreduce_algos) / sizeof(allreduce_algos[0]))
static const dlcp_dtype all_dtypes[] = {DLCP_INT32, DLCP_FLOAT32,
                                        DLCP_INT64, DLCP_FLOAT16,
                                        DLCP_BFLOAT16};
static const dlcp_redop all_ops[] = {DLCP_SUM, DLCP_AVG, DLCP_MIN,
                                     DLCP_MAX};

/* The counts of the matrix for world n: 0, 1, n - 1, not divisible by n,
 * large. */
static void counts_for(uint32_t n, uint64_t c[5]) {
  c[0] = 0;
  c[1] = 1;
  c[2] = n - 1;
  c[3] = 7u * n + 3u;
  c[4] = 4099; /* with 1 KiB segments: several segments per chunk */
}

static void test_allreduce_matrix(void **state) {
  (void)state;
  const uint32_t worlds[] = {1, 2, 3, 4, 5, 8};
  unsigned combo = 0;
  for (size_t a = 0; a < N_ALLREDUCE_ALGOS; a++) {
    for (size_t w = 0; w < 6; w++) {
      uint64_t counts[5];
      counts_for(worlds[w], counts);
      for (size_t c = 0; c < 5; c++) {
        for (int ip = 0; ip < 2; ip++) {
          spec s;
          spec_init(&s);
          s.algo = allreduce_algos[a];
          s.world = worlds[w];
          s.count = counts[c];
          s.in_place = ip;
          /* Walk through dtype x op so the matrix covers them all. */
          s.dtype = all_dtypes[combo % 5];
          s.op = all_ops[(combo / 5) % 4];
          combo++;
          s.chunk = s.count < 1000 ? 8 : 1024; /* force segmentation */
          s.seed = combo;
          s.topo = rack_of_pairs;
          s.levels = 1;
          s.fuse = (combo / 20) % 2;
          outcome o;
          run_spec(&s, &o);
        }
      }
    }
  }
}

static void test_allreduce_world16(void **state) {
  (void)state;
  for (size_t a = 0; a < N_ALLREDUCE_ALGOS; a++) {
    const uint64_t counts[] = {1, 15, 115, 20011};
    for (size_t c = 0; c < 4; c++) {
      spec s;
      spec_init(&s);
      s.algo = allreduce_algos[a];
      s.world = 16;
      s.count = counts[c];
      s.dtype = c % 2 ? DLCP_FLOAT32 : DLCP_INT64;
      s.op = c % 2 ? DLCP_AVG : DLCP_SUM;
      s.in_place = c % 2;
      s.chunk = 4096;
      s.topo = rack_of_pairs;
      s.levels = 1;
      outcome o;
      run_spec(&s, &o);
    }
  }
}

/* Every dtype x op on a non-power-of-two world, for every algorithm. */
static void test_every_dtype_and_op(void **state) {
  (void)state;
  for (size_t a = 0; a < N_ALLREDUCE_ALGOS; a++) {
    for (size_t d = 0; d < 5; d++) {
      for (size_t k = 0; k < 4; k++) {
        spec s;
        spec_init(&s);
        s.algo = allreduce_algos[a];
        s.world = 5;
        s.count = 303;
        s.dtype = all_dtypes[d];
        s.op = all_ops[k];
        s.chunk = 64;
        s.topo = rack_of_pairs;
        s.levels = 1;
        outcome o;
        run_spec(&s, &o);
      }
    }
  }
}

/* Random floats: within the documented bound of the serial reference and
 * bit-identical on every rank. */
static void test_random_floats_tolerance(void **state) {
  (void)state;
  const dlcp_dtype dts[] = {DLCP_FLOAT32, DLCP_FLOAT16, DLCP_BFLOAT16};
  for (size_t a = 0; a < N_ALLREDUCE_ALGOS; a++) {
    for (size_t d = 0; d < 3; d++) {
      for (uint32_t n = 5; n <= 8; n += 3) {
        spec s;
        spec_init(&s);
        s.algo = allreduce_algos[a];
        s.world = n;
        s.count = 2001;
        s.dtype = dts[d];
        s.op = d == 1 ? DLCP_AVG : DLCP_SUM;
        s.random_floats = true;
        s.chunk = 512;
        s.topo = rack_of_pairs;
        s.levels = 1;
        s.fuse = (n + d) % 2;
        outcome o;
        run_spec(&s, &o);
      }
    }
  }
}

/* +-0 under MIN/MAX and NaNs of different payloads and signs: every rank
 * must still hold the same bits.  Algorithms that reduce each element on
 * one rank and copy it get this for free; DIRECT reduces in rank order
 * everywhere; RECURSIVE_DOUBLING has both partners of an exchange combine
 * the lower rank's vector with the higher's, in that order. */
static void test_order_sensitive_values(void **state) {
  (void)state;
  const dlcp_dtype dts[] = {DLCP_FLOAT32, DLCP_FLOAT16, DLCP_BFLOAT16};
  const uint32_t worlds[] = {2, 3, 4, 5, 8};
  for (size_t a = 0; a < N_ALLREDUCE_ALGOS; a++) {
    for (size_t w = 0; w < sizeof(worlds) / sizeof(worlds[0]); w++) {
      for (size_t d = 0; d < 3; d++) {
        for (size_t k = 0; k < 4; k++) {
          spec s;
          spec_init(&s);
          s.algo = allreduce_algos[a];
          s.world = worlds[w];
          s.count = 301;
          s.dtype = dts[d];
          s.op = all_ops[k];
          s.order_sensitive = true;
          s.in_place = (w + k) % 2;
          s.fuse = (w + d) % 2;
          s.chunk = 128;
          s.seed = 1 + a * 100 + w * 10 + d + k;
          s.topo = rack_of_pairs;
          s.levels = 1;
          outcome o;
          run_spec(&s, &o);
        }
      }
    }
  }
}

static void test_reduce_scatter_allgather_broadcast(void **state) {
  (void)state;
  const uint32_t worlds[] = {1, 2, 3, 4, 5, 8};
  const dlcp_algo rs_algos[] = {DLCP_ALGO_RING, DLCP_ALGO_RING_BYPASS,
                                DLCP_ALGO_PS};
  const dlcp_algo ag_algos[] = {DLCP_ALGO_RING, DLCP_ALGO_PS,
                                DLCP_ALGO_RING_BYPASS};
  const dlcp_algo bc_algos[] = {DLCP_ALGO_RING, DLCP_ALGO_PS,
                                DLCP_ALGO_HALVING_DOUBLING, DLCP_ALGO_RAT};
  unsigned combo = 0;
  for (size_t w = 0; w < 6; w++) {
    uint64_t counts[5];
    counts_for(worlds[w], counts);
    for (size_t c = 0; c < 5; c++) {
      for (int ip = 0; ip < 2; ip++) {
        spec s;
        spec_init(&s);
        s.world = worlds[w];
        s.count = counts[c];
        s.in_place = ip;
        s.chunk = s.count < 1000 ? 8 : 1024;
        s.topo = rack_of_pairs;
        s.levels = 1;
        outcome o;
        for (size_t a = 0; a < 3; a++) {
          s.kind = DLCP_COLL_REDUCE_SCATTER;
          s.algo = rs_algos[a];
          s.dtype = all_dtypes[combo % 5];
          s.op = all_ops[(combo / 5) % 4];
          s.seed = ++combo;
          s.fuse = combo % 2;
          run_spec(&s, &o);
          s.kind = DLCP_COLL_ALLGATHER;
          s.algo = ag_algos[a];
          run_spec(&s, &o);
        }
        for (size_t a = 0; a < 4; a++) {
          s.kind = DLCP_COLL_BROADCAST;
          s.algo = bc_algos[a];
          s.root = (uint32_t)(combo % worlds[w]);
          s.seed = ++combo;
          run_spec(&s, &o);
        }
      }
    }
  }
}

/* REDUCE (the chain to the root, pipelined, and the binomial tree):
 * every world, root, count, dtype and op, in and out of place, in one
 * segment and in several; the root has the reduction. */
static void test_reduce(void **state) {
  (void)state;
  const uint32_t worlds[] = {1, 2, 3, 4, 5, 8, 13};
  unsigned combo = 0;
  for (size_t w = 0; w < 7; w++) {
    uint64_t counts[5];
    counts_for(worlds[w], counts);
    for (size_t c = 0; c < 5; c++) {
      for (int ip = 0; ip < 2; ip++) {
        for (uint32_t k = 0; k < 5; k++) {
          spec s;
          outcome o;
          spec_init(&s);
          s.kind = DLCP_COLL_REDUCE;
          s.world = worlds[w];
          s.count = counts[c];
          s.in_place = ip;
          s.chunk = k % 3 == 0 ? 0 : s.count < 1000 ? 8 : 1024;
          s.root = k == 2 ? worlds[w] - 1 : (uint32_t)(combo % worlds[w]);
          s.algo = k == 1   ? DLCP_ALGO_AUTO
                   : k >= 3 ? DLCP_ALGO_HALVING_DOUBLING
                            : DLCP_ALGO_RING;
          s.dtype = all_dtypes[combo % 5];
          s.op = all_ops[(combo / 5) % 4];
          s.seed = ++combo;
          s.fuse = combo % 2;
          run_spec(&s, &o);
        }
      }
    }
  }
}

/* The root of a REDUCE (rank 9 of a group {4, 9}) learns its result
 * segment by segment: dlcp_coll_final_prefix grows with each summed
 * segment, in order, and is the whole vector once DONE. */
static void test_reduce_final_prefix(void **state) {
  (void)state;
  static const uint32_t group[2] = {4, 9};
  enum { N = 1024 };
  static int32_t in[N], out[N];
  for (int i = 0; i < N; i++) {
    in[i] = i;
  }
  dlcp_coll_params p;
  dlcp_coll *op;
  dlcp_coll_action a, recv[8];
  size_t nrecv = 0;
  bool done = false;
  dlcp_coll_params_default(&p);
  p.kind = DLCP_COLL_REDUCE;
  p.world = 2;
  p.rank = 1;
  p.root = 1;
  p.count = N;
  p.dtype = DLCP_INT32;
  p.sendbuf = in;
  p.recvbuf = out;
  p.chunk_bytes = N; /* 4 segments of 256 elements */
  p.members = group;
  assert_int_equal(dlcp_coll_new(&op, &p, NULL, 0), 0);
  assert_int_equal(dlcp_coll_final_prefix(op), 0);
  uint64_t want = 0;
  for (int round = 0; round < 8 && want < N; round++) {
    while (dlcp_coll_poll(op, &a, 0) == 0 &&
           a.type == DLCP_COLL_ACT_RECV) {
      assert_int_equal(a.peer, 4);
      recv[nrecv++] = a;
    }
    assert_true(nrecv > 0);
    /* the oldest receive: the predecessor's partial sum, all ones */
    dlcp_coll_action r = recv[0];
    memmove(recv, recv + 1, --nrecv * sizeof(recv[0]));
    for (uint64_t i = 0; i < r.bytes / 4; i++) {
      ((int32_t *)r.recv_buf)[i] = 1;
    }
    assert_int_equal(dlcp_coll_on_received(op, r.peer, r.tag, 0, NULL, 0, 0),
                     0);
    want += N / 4;
    (void)dlcp_coll_poll(op, &a, 0); /* runs the reduce */
    if (a.type == DLCP_COLL_ACT_RECV) {
      recv[nrecv++] = a;
    }
    done |= a.type == DLCP_COLL_ACT_DONE;
    assert_int_equal(dlcp_coll_final_prefix(op), want);
    for (uint64_t i = want - N / 4; i < want; i++) {
      assert_int_equal(out[i], (int32_t)i + 1);
    }
  }
  assert_int_equal(want, N);
  while (!done && dlcp_coll_poll(op, &a, 0) == 0 &&
         a.type != DLCP_COLL_ACT_NONE) {
    done = a.type == DLCP_COLL_ACT_DONE;
  }
  assert_true(done);
  assert_int_equal(dlcp_coll_final_prefix(op), N);
  dlcp_coll_del(op);
}

/* A group of a larger communicator: operation i runs as rank members[i]
 * (a permutation here, so every transfer crosses the renaming), for a
 * reduce, a broadcast and the ring all-reduce; and what cannot run in a
 * group is refused. */
static void test_members(void **state) {
  (void)state;
  static const uint32_t perm[] = {4, 0, 3, 1, 2};
  const dlcp_coll_kind kinds[] = {DLCP_COLL_REDUCE, DLCP_COLL_BROADCAST,
                                  DLCP_COLL_ALLREDUCE};
  for (size_t k = 0; k < 3; k++) {
    for (uint32_t root = 0; root < 5; root += 2) {
      spec s;
      outcome o;
      spec_init(&s);
      s.kind = kinds[k];
      s.world = 5;
      s.count = 4099;
      s.chunk = 1024;
      s.root = root;
      s.members = perm;
      s.seed = 40u + k * 5u + root;
      run_spec(&s, &o);
    }
  }
  dlcp_coll_params p;
  dlcp_coll *op;
  int32_t buf[8] = {0};
  dlcp_coll_params_default(&p);
  p.world = 5;
  p.rank = 1;
  p.count = 8;
  p.dtype = DLCP_INT32;
  p.recvbuf = buf;
  p.members = perm;
  p.loss_bound = 0.1;
  assert_int_equal(dlcp_coll_new(&op, &p, NULL, 0),
                   DLCP_ERR_INVALID_ARGUMENT);
  p.loss_bound = 0.0;
  p.algo = DLCP_ALGO_RING_BYPASS;
  assert_int_equal(dlcp_coll_new(&op, &p, NULL, 0),
                   DLCP_ERR_INVALID_ARGUMENT);
  p.algo = DLCP_ALGO_RING;
  p.kind = DLCP_COLL_REDUCE;
  p.root = 5;
  assert_int_equal(dlcp_coll_new(&op, &p, NULL, 0),
                   DLCP_ERR_INVALID_ARGUMENT);
  p.root = 4;
  p.algo = DLCP_ALGO_PS;
  assert_int_equal(dlcp_coll_new(&op, &p, NULL, 0),
                   DLCP_ERR_INVALID_ARGUMENT);
}

static void test_barrier(void **state) {
  (void)state;
  for (uint32_t n = 1; n <= 16; n++) {
    spec s;
    spec_init(&s);
    s.kind = DLCP_COLL_BARRIER;
    s.algo = DLCP_ALGO_AUTO;
    s.world = n;
    s.seed = n;
    s.jitter_ns = 3000;
    outcome o;
    run_spec(&s, &o);
    /* ceil(log2 n) rounds of one note latency (5 us) each. */
    uint32_t rounds = 0;
    for (uint32_t d = 1; d < n; d *= 2) {
      rounds++;
    }
    assert_int_equal(o.makespan, (dlcp_tstamp)rounds * 5000u);
  }
}

/* RAT on real hierarchies: two levels, uneven racks, three levels. */
static void test_rat_topologies(void **state) {
  (void)state;
  uint32_t two[16 * 2], uneven[5], three[16 * 3], ragged[40 * 3];
  /* 40 ranks in racks of 1 to 6, 2 or 3 racks a pod, pods in 2 halls; a
   * rack id is reused in every pod, a pod id in every hall. */
  static const uint8_t rack_sizes[] = {3, 1, 6, 2, 5, 4, 1, 3, 6, 2, 4, 3};
  for (uint32_t r = 0, rack = 0, left = rack_sizes[0]; r < 40; r++) {
    if (left == 0) {
      left = rack_sizes[++rack % sizeof(rack_sizes)];
    }
    left--;
    ragged[r * 3] = rack % 3;         /* rack within its pod */
    ragged[r * 3 + 1] = rack / 3 % 2; /* pod within its hall */
    ragged[r * 3 + 2] = rack / 6;     /* hall */
  }
  for (uint32_t r = 0; r < 16; r++) {
    two[r * 2] = r / 2;     /* rack */
    two[r * 2 + 1] = r / 4; /* pod */
    three[r * 3] = r % 2;   /* rack ids reused across pods: only the */
    three[r * 3 + 1] = r / 2 % 2; /* tuple names a region */
    three[r * 3 + 2] = r / 4;
  }
  uneven[0] = uneven[1] = uneven[2] = 7;
  uneven[3] = uneven[4] = 9;
  struct {
    uint32_t n;
    const uint32_t *topo;
    uint32_t levels;
  } cases[] = {{8, two, 2}, {16, two, 2}, {5, uneven, 1},  {16, three, 3},
               {6, two, 2}, {3, NULL, 0}, {40, ragged, 3}, {37, ragged, 3}};
  /* Each case: one tree (1,000 floats are under 8 KiB), three, and one
   * tree per rank. */
  static const uint64_t per_tree = 2048;
  for (size_t i = 0; i < 3 * sizeof(cases) / sizeof(cases[0]); i++) {
    uint32_t n = cases[i / 3].n;
    uint64_t counts[3] = {1000, 3 * per_tree, n * per_tree};
    for (int kind = 0; kind < 2; kind++) {
      spec s;
      spec_init(&s);
      s.kind = kind ? DLCP_COLL_BROADCAST : DLCP_COLL_ALLREDUCE;
      s.algo = DLCP_ALGO_RAT;
      s.world = n;
      s.topo = cases[i / 3].topo;
      s.levels = cases[i / 3].levels;
      s.count = counts[i % 3] + i;
      s.root = n - 1;
      s.dtype = DLCP_FLOAT32;
      s.op = DLCP_AVG;
      s.chunk = 4096;
      outcome o;
      run_spec(&s, &o);
    }
  }
}

/* An allocator that fails its |left|-th call from now (counting down). */
typedef struct failing_mem {
  int left;
  int live; /* blocks handed out and not yet freed */
} failing_mem;

static void *fm_malloc(size_t size, void *user) {
  failing_mem *f = user;
  if (f->left-- == 0) {
    return NULL;
  }
  f->live++;
  return malloc(size);
}

static void *fm_calloc(size_t nmemb, size_t size, void *user) {
  failing_mem *f = user;
  if (f->left-- == 0) {
    return NULL;
  }
  f->live++;
  return calloc(nmemb, size);
}

static void *fm_realloc(void *ptr, size_t size, void *user) {
  failing_mem *f = user;
  if (f->left-- == 0) {
    return NULL;
  }
  f->live += ptr == NULL;
  return realloc(ptr, size);
}

static void fm_free(void *ptr, void *user) {
  failing_mem *f = user;
  f->live -= ptr != NULL;
  free(ptr);
}

/* Building a RAT plan fails cleanly at every allocation: DLCP_ERR_NOMEM,
 * nothing leaked, and with enough memory the operation is made. */
static void test_rat_out_of_memory(void **state) {
  (void)state;
  static const uint32_t labels[6 * 2] = {0, 0, 0, 0, 1, 0, 0, 1, 1, 1, 0, 2};
  static float buf[60];
  dlcp_coll_params p;
  dlcp_coll_params_default(&p);
  p.algo = DLCP_ALGO_RAT;
  p.world = 6;
  p.rank = 2;
  p.count = 60;
  p.recvbuf = buf;
  p.topo = labels;
  p.topo_levels = 2;
  for (int k = 0;; k++) {
    failing_mem f = {k, 0};
    dlcp_mem m = {&f, fm_malloc, fm_free, fm_calloc, fm_realloc};
    dlcp_coll *op = NULL;
    int rv = dlcp_coll_new(&op, &p, &m, 0);
    if (rv == 0) {
      assert_true(k > 3); /* the topology's index, the plan, the executor */
      dlcp_coll_del(op);
      assert_int_equal(f.live, 0);
      break;
    }
    assert_int_equal(rv, DLCP_ERR_NOMEM);
    assert_null(op);
    assert_int_equal(f.live, 0);
  }
}

/* AUTO resolves per the documented rule and says what it picked. */
static void test_auto_rule(void **state) {
  (void)state;
  dlcp_coll_params p;
  dlcp_coll_params_default(&p);
  /* Between hosts: on powers of two RD to 16 KiB, HD above; other
   * worlds DIRECT while a rank sends at most 16 KiB, then to 64 KiB PS on
   * up to 8 ranks and HD on more, the ring above. */
  p.world = 4;
  p.count = 4096; /* 16 KiB: log2 n whole exchanges */
  assert_int_equal(dlcp_coll_resolve_algo(&p), DLCP_ALGO_RECURSIVE_DOUBLING);
  p.count = 4097;
  assert_int_equal(dlcp_coll_resolve_algo(&p), DLCP_ALGO_HALVING_DOUBLING);
  p.count = 32u << 20; /* 128 MiB */
  assert_int_equal(dlcp_coll_resolve_algo(&p), DLCP_ALGO_HALVING_DOUBLING);
  p.world = 64;
  p.count = 1024;
  assert_int_equal(dlcp_coll_resolve_algo(&p), DLCP_ALGO_RECURSIVE_DOUBLING);
  p.world = 7;
  p.count = 682; /* 2728 B, 16368 B sent: one step */
  assert_int_equal(dlcp_coll_resolve_algo(&p), DLCP_ALGO_DIRECT);
  p.count = 683; /* on few ranks: two PS steps */
  assert_int_equal(dlcp_coll_resolve_algo(&p), DLCP_ALGO_PS);
  p.count = 16384; /* 64 KiB */
  assert_int_equal(dlcp_coll_resolve_algo(&p), DLCP_ALGO_PS);
  p.count = 16385;
  assert_int_equal(dlcp_coll_resolve_algo(&p), DLCP_ALGO_RING);
  p.count = 2u << 20; /* 8 MiB */
  assert_int_equal(dlcp_coll_resolve_algo(&p), DLCP_ALGO_RING);
  p.world = 17; /* many ranks: no incast */
  p.count = 16384;
  assert_int_equal(dlcp_coll_resolve_algo(&p), DLCP_ALGO_HALVING_DOUBLING);
  p.count = 16385;
  assert_int_equal(dlcp_coll_resolve_algo(&p), DLCP_ALGO_RING);
  /* Ranks sharing memory: DIRECT while a rank sends at most 24 KiB; on a
   * power-of-two world RD to 4 KiB and HD above; on others HD to 512 KiB
   * and the ring above. */
  p.same_host = true;
  p.world = 4;
  p.count = 2048; /* 8 KiB, 24 KiB sent */
  assert_int_equal(dlcp_coll_resolve_algo(&p), DLCP_ALGO_DIRECT);
  p.count = 2049;
  assert_int_equal(dlcp_coll_resolve_algo(&p), DLCP_ALGO_HALVING_DOUBLING);
  p.world = 8;
  p.count = 1024; /* 4 KiB, 28 KiB sent */
  assert_int_equal(dlcp_coll_resolve_algo(&p), DLCP_ALGO_RECURSIVE_DOUBLING);
  p.count = 1025;
  assert_int_equal(dlcp_coll_resolve_algo(&p), DLCP_ALGO_HALVING_DOUBLING);
  p.world = 4;
  const uint64_t pow2_counts[] = {65536, 131072, 262144, 4u << 20, 32u << 20};
  for (size_t i = 0; i < sizeof(pow2_counts) / sizeof(pow2_counts[0]); i++) {
    p.count = pow2_counts[i]; /* 256 KiB .. 128 MiB */
    assert_int_equal(dlcp_coll_resolve_algo(&p), DLCP_ALGO_HALVING_DOUBLING);
  }
  p.world = 16;
  assert_int_equal(dlcp_coll_resolve_algo(&p), DLCP_ALGO_HALVING_DOUBLING);
  p.world = 5;
  p.count = 1536; /* 6 KiB, 24 KiB sent */
  assert_int_equal(dlcp_coll_resolve_algo(&p), DLCP_ALGO_DIRECT);
  p.count = 2048; /* 8 KiB, not a power of two: HD's fold */
  assert_int_equal(dlcp_coll_resolve_algo(&p), DLCP_ALGO_HALVING_DOUBLING);
  p.count = 131072; /* 512 KiB */
  assert_int_equal(dlcp_coll_resolve_algo(&p), DLCP_ALGO_HALVING_DOUBLING);
  p.count = 131073;
  assert_int_equal(dlcp_coll_resolve_algo(&p), DLCP_ALGO_RING);
  p.world = 3;
  p.count = 4u << 20; /* 16 MiB */
  assert_int_equal(dlcp_coll_resolve_algo(&p), DLCP_ALGO_RING);
  p.world = 8;
  p.same_host = false;
  p.topo = rack_of_pairs;
  p.topo_levels = 1;
  assert_int_equal(dlcp_coll_resolve_algo(&p), DLCP_ALGO_RAT);
  p.kind = DLCP_COLL_REDUCE_SCATTER;
  assert_int_equal(dlcp_coll_resolve_algo(&p), DLCP_ALGO_RING);
  p.algo = DLCP_ALGO_HALVING_DOUBLING;
  assert_int_equal(dlcp_coll_resolve_algo(&p), -1);
  p.algo = DLCP_ALGO_DIRECT; /* an all-reduce only */
  assert_int_equal(dlcp_coll_resolve_algo(&p), -1);
  p.kind = DLCP_COLL_BROADCAST;
  assert_int_equal(dlcp_coll_resolve_algo(&p), -1);
  p.kind = DLCP_COLL_BARRIER;
  assert_int_equal(dlcp_coll_resolve_algo(&p), DLCP_ALGO_HALVING_DOUBLING);
  /* ... and a run reports it. */
  spec s;
  spec_init(&s);
  s.algo = DLCP_ALGO_AUTO;
  s.world = 4;
  s.count = 100;
  outcome o;
  run_spec(&s, &o);
}

/* p = 0.05 with pieces lost in transit: exact wherever delivered, the same
 * missing ranges everywhere, delivered >= 95%. */
/* An all-reduce no larger than what the driver delivers whole runs exact
 * whatever its loss bound: nothing missing, and no agreement at its end
 * (its NOTEs are those of the same run without a bound); one byte more and
 * the agreement runs: on 6 ranks, ranks 4 and 5 fold their lists into 0
 * and 1, ranks 0-3 run two rounds of recursive doubling and 0 and 1 send
 * the union back, 12 NOTEs. */
static void test_exact_when_delivered_whole(void **state) {
  (void)state;
  for (size_t a = 0; a < N_ALLREDUCE_ALGOS; a++) {
    spec s;
    spec_init(&s);
    s.algo = allreduce_algos[a];
    s.world = 6;
    s.count = 1000;
    s.dtype = DLCP_INT32;
    s.topo = rack_of_pairs;
    s.levels = 1;
    s.seed = 90 + a;
    outcome exact, whole, agreed;
    run_spec(&s, &exact);
    s.loss = 0.05;
    s.exact_bytes = 4000;
    run_spec(&s, &whole);
    assert_int_equal(whole.notes, exact.notes);
    assert_int_equal(whole.nmissing, 0);
    assert_true(whole.delivered == 1.0);
    s.exact_bytes = 3999;
    run_spec(&s, &agreed);
    assert_int_equal(agreed.notes, exact.notes + 4 * 2 + 2 + 2);
  }
}

static void test_loss_bounded(void **state) {
  (void)state;
  for (size_t a = 0; a < N_ALLREDUCE_ALGOS; a++) {
    for (uint32_t n = 5; n <= 8; n += 3) {
      spec s;
      spec_init(&s);
      s.algo = allreduce_algos[a];
      s.world = n;
      s.count = 10007;
      s.dtype = a % 2 ? DLCP_FLOAT32 : DLCP_INT32;
      s.op = DLCP_SUM;
      /* Each transfer may lose p / 2(n-1) of its 16-byte pieces: segments
       * must be large enough for that to be at least one piece.  DIRECT
       * and RECURSIVE_DOUBLING move more whole vectors (n(n-1), and
       * log2(p2) p2 + 2(n-p2)), so each transfer gets a smaller share of p:
       * one segment per vector keeps that share above one piece. */
      bool whole_vectors = s.algo == DLCP_ALGO_DIRECT ||
                           s.algo == DLCP_ALGO_RECURSIVE_DOUBLING;
      s.chunk = whole_vectors ? 1u << 20 : 16384;
      s.loss = 0.05;
      s.segment_loss = 0.03;
      s.topo = rack_of_pairs;
      s.levels = 1;
      s.seed = 77 + a;
      outcome o, fused;
      run_spec(&s, &o);
      assert_true(o.lost_bytes > 0); /* the case really lost data */
      assert_true(o.nmissing > 0);
      assert_true(o.delivered >= 0.95 && o.delivered < 1.0);
      /* Reduced on arrival: the same holes, the same result. */
      s.fuse = true;
      run_spec(&s, &fused);
      assert_int_equal(fused.lost_bytes, o.lost_bytes);
      assert_int_equal(fused.nmissing, o.nmissing);
      assert_true(fused.delivered == o.delivered);
      s.fuse = false;
      /* The same lossy network with loss bound 0: every transfer must be
       * delivered whole, and the result is exact (run_spec checks). */
      s.loss = 0.0;
      run_spec(&s, &o);
      assert_int_equal(o.lost_bytes, 0);
      assert_int_equal(o.nmissing, 0);
    }
  }
  /* The other kinds too. */
  const dlcp_coll_kind kinds[] = {DLCP_COLL_REDUCE_SCATTER,
                                  DLCP_COLL_ALLGATHER, DLCP_COLL_BROADCAST};
  for (size_t k = 0; k < 3; k++) {
    spec s;
    spec_init(&s);
    s.kind = kinds[k];
    s.world = 6;
    s.count = 9001;
    s.chunk = 8192;
    s.loss = 0.05;
    s.segment_loss = 0.03;
    s.root = 2;
    outcome o;
    run_spec(&s, &o);
    assert_true(o.lost_bytes > 0);
  }
}

/* Loss bound without loss in transit: nothing missing; and loss with the
 * bypass ring's dynamic transfers. */
static void test_loss_edge_cases(void **state) {
  (void)state;
  spec s;
  spec_init(&s);
  s.world = 5;
  s.count = 5000;
  s.loss = 0.05;
  s.chunk = 1024;
  outcome o;
  run_spec(&s, &o);
  assert_int_equal(o.nmissing, 0);
  s.algo = DLCP_ALGO_RING_BYPASS;
  s.chunk = 4096; /* whole chunks: enough pieces per transfer to lose one */
  s.segment_loss = 0.03;
  s.slow_rank = 1;
  s.slow_ns = 40000;
  s.alpha = 1.05;
  s.step_hint = 1000;
  s.trans_hint = 6000;
  run_spec(&s, &o);
  assert_true(o.bypasses > 0);
  assert_true(o.lost_bytes > 0);
}

/*
 * The straggler, in the seed's model: a rank whose reduce steps take
 * T + dT for a while (a transient slowdown, the seed's fluctuation dT),
 * here 50 us per step during the first 60 us of a reduce-scatter whose
 * steps take T = 3 us.  The bypass ring must finish measurably faster than
 * the ring, in the same virtual-time setting, and have bypassed.  The
 * hints come from a clean warm-up run, as a runtime would carry them from
 * the previous iteration.
 */
static void test_straggler_bypass_faster(void **state) {
  (void)state;
  spec s;
  spec_init(&s);
  s.world = 8;
  s.count = 8192;
  s.dtype = DLCP_FLOAT32;
  s.op = DLCP_SUM;
  s.chunk = 1u << 20;
  s.compute_ns = 3000;
  s.jitter_ns = 500;
  s.seed = 3;
  s.algo = DLCP_ALGO_RING_BYPASS;
  s.slow_rank = 2;
  outcome warm;
  run_spec(&s, &warm); /* slow_ns 0: a clean run to learn T, T_trans */
  assert_int_equal(warm.bypasses, 0);
  assert_true(warm.trans_ns > 0);

  s.slow_ns = 50000;
  s.slow_until_ns = 60000;
  s.algo = DLCP_ALGO_RING;
  outcome ring;
  run_spec(&s, &ring);
  s.algo = DLCP_ALGO_RING_BYPASS;
  s.step_hint = warm.step_ns;
  s.trans_hint = warm.trans_ns;
  outcome byp;
  run_spec(&s, &byp);
  print_message("straggler (transient): ring %llu ns, bypass %llu ns, "
                "%u bypasses\n",
                (unsigned long long)ring.makespan,
                (unsigned long long)byp.makespan, byp.bypasses);
  assert_true(byp.bypasses > 0);
  /* Measurably: at least 3% (the seed's eq. 1 predicts T + T_trans per
   * bypassed chain, about 11 us of ~215 us here). */
  assert_true(byp.makespan * 100 <= ring.makespan * 97);
}

/*
 * A T learnt far too high (a cold first operation, or a denial that raised
 * it) on a one-lane ring with a straggler slow in every operation: every
 * later wait holds the straggler's delay, so those waits alone can never
 * bring T below it.  Carrying each operation's estimates to the next, as
 * the runtime does, the ring must bypass again within a few operations.
 */
static void test_bypass_forgets_high_step(void **state) {
  (void)state;
  spec s;
  spec_init(&s);
  s.world = 4;
  s.count = 6007;
  s.dtype = DLCP_INT32;
  s.chunk = 1u << 20; /* one lane */
  s.compute_ns = 3000;
  s.jitter_ns = 500;
  s.slow_rank = 1;
  s.slow_ns = 50000;
  s.alpha = 1.2;
  s.algo = DLCP_ALGO_RING_BYPASS;
  s.step_hint = 200000;
  s.trans_hint = 8000;
  uint32_t bypasses = 0;
  for (uint32_t i = 0; i < 6; i++) {
    s.seed = 40 + i;
    outcome o;
    run_spec(&s, &o);
    bypasses += o.bypasses;
    if (o.step_ns) {
      s.step_hint = o.step_ns;
    }
    if (o.trans_ns) {
      s.trans_hint = o.trans_ns;
    }
  }
  print_message("high T: %u bypasses in 6 operations\n", bypasses);
  assert_true(bypasses > 0);
}

/*
 * A straggler slow for the whole operation: every chunk's final value
 * needs the slow rank's own reduce, so no ring variant can hide that rank's
 * delay from the makespan; the bypass shortens the other chains only.  The
 * test pins what holds: exact results under many bypasses and cascades of
 * requests, and no slowdown against the plain ring.
 */
static void test_straggler_persistent(void **state) {
  (void)state;
  const uint32_t worlds[] = {3, 4, 5, 8};
  for (size_t w = 0; w < 4; w++) {
    for (uint32_t slow = 0; slow < worlds[w]; slow += 2) {
      spec s;
      spec_init(&s);
      s.world = worlds[w];
      s.count = 6007;
      s.dtype = DLCP_INT32;
      s.chunk = 2048; /* several lanes: concurrent requests */
      s.compute_ns = 3000;
      s.jitter_ns = 2000;
      s.seed = 11 + slow;
      s.slow_rank = (int32_t)slow;
      s.slow_ns = 50000;
      s.alpha = 1.2;
      s.step_hint = 1000;
      s.trans_hint = 8000;
      outcome ring, byp;
      s.algo = DLCP_ALGO_RING;
      run_spec(&s, &ring);
      s.algo = DLCP_ALGO_RING_BYPASS;
      run_spec(&s, &byp);
      if (worlds[w] >= 4) {
        assert_true(byp.bypasses > 0);
      }
      assert_true(byp.makespan <= ring.makespan + ring.makespan / 50);
    }
  }
}

/* Randomised bypass runs: world, size, segmenting, jitter, which rank is
 * slow, compute model, alpha near 1 (many requests, cascades of them
 * between neighbours), with and without hints and loss.  Exactness is all
 * that is asserted, plus that the protocol was exercised. */
static void test_bypass_randomized(void **state) {
  (void)state;
  uint32_t total = 0;
  for (uint64_t seed = 1; seed <= 40; seed++) {
    dlcp_rng g;
    dlcp_rng_seed(&g, seed);
    spec s;
    spec_init(&s);
    s.algo = DLCP_ALGO_RING_BYPASS;
    s.kind = seed % 3 ? DLCP_COLL_ALLREDUCE : DLCP_COLL_REDUCE_SCATTER;
    s.world = 3 + (uint32_t)dlcp_rng_below(&g, 8);
    s.count = 1 + dlcp_rng_below(&g, 12000);
    s.chunk = 256 + dlcp_rng_below(&g, 8192);
    s.compute_ns = 1000 + dlcp_rng_below(&g, 4000);
    s.jitter_ns = dlcp_rng_below(&g, 20000);
    s.slow_rank = (int32_t)dlcp_rng_below(&g, s.world);
    s.slow_ns = 10000 + dlcp_rng_below(&g, 80000);
    s.alpha = seed % 4 ? 1.01 : 1.5;
    if (seed % 2) {
      s.step_hint = 500;
      s.trans_hint = 3000;
    }
    if (seed % 5 == 0) {
      s.loss = 0.05;
      s.segment_loss = 0.05;
    }
    s.seed = seed;
    outcome o;
    run_spec(&s, &o);
    total += o.bypasses;
  }
  assert_true(total > 100);
}

/*
 * Bypasses racing with empty chunks and jittered notes.  With count n - 1
 * one chunk is empty and its slots complete as soon as their scratch bank
 * is free, possibly before the slot a lane is waiting for.  A ring that
 * armed requests from that (or for a receive not yet posted) cancelled a
 * receive still waiting for its bank, and the next receive of that bank
 * was posted over one an earlier step was still filling: wrong sums
 * (found on real processes; the first case below is the virtual-time
 * reproduction).  Then 300 randomized runs with heavy data jitter,
 * jittered notes and alpha near 1, which request on almost every slot.
 */
static void test_bypass_empty_chunk_races(void **state) {
  (void)state;
  spec s;
  spec_init(&s);
  s.algo = DLCP_ALGO_RING_BYPASS;
  s.world = 9;
  s.count = 8;
  s.in_place = true;
  s.compute_ns = 257;
  s.jitter_ns = 55163;
  s.note_jitter_ns = 323;
  s.alpha = 1.01;
  s.seed = 1976;
  outcome o;
  run_spec(&s, &o);
  assert_true(o.bypasses > 0);
  uint32_t total = 0;
  for (uint64_t seed = 1; seed <= 300; seed++) {
    dlcp_rng g;
    dlcp_rng_seed(&g, seed * 7919);
    spec_init(&s);
    s.algo = DLCP_ALGO_RING_BYPASS;
    s.world = 3 + (uint32_t)dlcp_rng_below(&g, 8);
    const uint64_t counts[] = {s.world - 1, 1, 1000 + s.world, 100003};
    s.count = counts[dlcp_rng_below(&g, 4)];
    s.in_place = dlcp_rng_below(&g, 2);
    s.compute_ns = 100 + dlcp_rng_below(&g, 4000);
    s.jitter_ns = dlcp_rng_below(&g, 200000);
    s.note_jitter_ns = dlcp_rng_below(&g, 40000);
    s.alpha = 1.01;
    if (dlcp_rng_below(&g, 2)) {
      s.slow_rank = (int32_t)dlcp_rng_below(&g, s.world);
      s.slow_ns = 10000 + dlcp_rng_below(&g, 80000);
    }
    s.seed = seed;
    run_spec(&s, &o);
    total += o.bypasses;
  }
  assert_true(total > 300);
}

/* Reduce-scatter with a persistent straggler: the makespan stays the slow
 * rank's, but every rank owning a bypassable chunk finishes earlier. */
static void test_straggler_reduce_scatter(void **state) {
  (void)state;
  spec s;
  spec_init(&s);
  s.kind = DLCP_COLL_REDUCE_SCATTER;
  s.world = 8;
  s.count = 8192;
  s.dtype = DLCP_FLOAT32;
  s.chunk = 1u << 20;
  s.compute_ns = 3000;
  s.seed = 5;
  s.slow_rank = 2;
  s.slow_ns = 50000;
  s.step_hint = 1000;
  s.trans_hint = 8400;
  outcome ring, byp;
  s.algo = DLCP_ALGO_RING;
  run_spec(&s, &ring);
  s.algo = DLCP_ALGO_RING_BYPASS;
  run_spec(&s, &byp);
  print_message("reduce-scatter, persistent straggler: mean completion "
                "ring %llu ns, bypass %llu ns\n",
                (unsigned long long)ring.mean_done,
                (unsigned long long)byp.mean_done);
  assert_true(byp.bypasses > 0);
  assert_true(byp.makespan <= ring.makespan);
  /* The owners of bypassable chunks finish T + T_trans earlier each. */
  assert_true(byp.mean_done + 5000 <= ring.mean_done);
}

/* ---- golden plans -------------------------------------------------------- */

static void check_golden(const char *name, const dlcp_coll_params *p) {
  char buf[65536];
  dlcp_ssize n = dlcp_coll_plan_dump(p, buf, sizeof(buf));
  assert_true(n > 0);
  const char *dir = getenv("DLCP_SOURCE_DIR");
  if (!dir) {
    fail_msg("DLCP_SOURCE_DIR is not set (ctest sets it)");
  }
  char path[1024];
  snprintf(path, sizeof(path), "%s/tests/golden/coll/%s.txt", dir, name);
  const char *upd = getenv("DLCP_UPDATE_GOLDEN");
  if (upd && strcmp(upd, "1") == 0) {
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    assert_int_equal(fwrite(buf, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    return;
  }
  FILE *f = fopen(path, "r");
  if (!f) {
    fail_msg("missing golden file %s (run with DLCP_UPDATE_GOLDEN=1)", path);
  }
  char want[65536];
  size_t m = fread(want, 1, sizeof(want), f);
  fclose(f);
  if (m != (size_t)n || memcmp(want, buf, m) != 0) {
    fail_msg("plan differs from %s:\n%.*s", path, (int)n, buf);
  }
}

/*
 * dlcp_coll_reuse: every kind and algorithm whose plan can be kept, every
 * world, count, dtype and op, in and out of place, reduced on arrival or
 * not, with reordering jitter.  Each rank's operation first runs to the
 * end on other inputs in other buffers, then takes the spec's parameters
 * by dlcp_coll_reuse: run_spec checks the result exactly, and the harness
 * (seeded, virtual time) must see the very same run as with new
 * operations, to the nanosecond.
 */
static void test_reuse_runs_as_new(void **state) {
  (void)state;
  static const struct {
    dlcp_coll_kind kind;
    dlcp_algo algo;
  } cases[] = {{DLCP_COLL_ALLREDUCE, DLCP_ALGO_RING},
               {DLCP_COLL_ALLREDUCE, DLCP_ALGO_PS},
               {DLCP_COLL_ALLREDUCE, DLCP_ALGO_HALVING_DOUBLING},
               {DLCP_COLL_ALLREDUCE, DLCP_ALGO_DIRECT},
               {DLCP_COLL_ALLREDUCE, DLCP_ALGO_RECURSIVE_DOUBLING},
               {DLCP_COLL_ALLREDUCE, DLCP_ALGO_AUTO},
               {DLCP_COLL_REDUCE_SCATTER, DLCP_ALGO_RING},
               {DLCP_COLL_REDUCE_SCATTER, DLCP_ALGO_PS},
               {DLCP_COLL_ALLGATHER, DLCP_ALGO_RING},
               {DLCP_COLL_ALLGATHER, DLCP_ALGO_PS},
               {DLCP_COLL_BROADCAST, DLCP_ALGO_HALVING_DOUBLING},
               {DLCP_COLL_REDUCE, DLCP_ALGO_RING},
               {DLCP_COLL_BARRIER, DLCP_ALGO_AUTO}};
  const uint32_t worlds[] = {1, 2, 3, 4, 8};
  unsigned combo = 0;
  for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
    for (size_t w = 0; w < 5; w++) {
      uint64_t counts[5];
      counts_for(worlds[w], counts);
      for (size_t c = 1; c < 5; c++) {
        for (int ip = 0; ip < 2; ip++) {
          spec s;
          spec_init(&s);
          s.kind = cases[k].kind;
          s.algo = cases[k].algo;
          s.world = worlds[w];
          s.count = counts[c];
          s.in_place = ip;
          s.dtype = all_dtypes[combo % 5];
          s.op = all_ops[(combo / 5) % 4];
          s.root = (uint32_t)(combo % worlds[w]);
          s.chunk = s.count < 1000 ? 8 : 1024;
          s.seed = ++combo;
          s.fuse = combo % 2;
          s.jitter_ns = 3000;
          s.note_jitter_ns = 2000;
          outcome fresh, reused;
          run_spec(&s, &fresh);
          s.reuse = true;
          run_spec(&s, &reused);
          assert_int_equal(reused.makespan, fresh.makespan);
          assert_int_equal(reused.mean_done, fresh.mean_done);
        }
      }
    }
  }
}

/* What dlcp_coll_reuse refuses, leaving the operation as it was: another
 * geometry, a plan that changes as it runs or reads borrowed labels, a
 * loss bound, an operation not yet reported DONE. */
static void test_reuse_refused(void **state) {
  (void)state;
  int32_t buf[64] = {0};
  dlcp_coll_params p;
  dlcp_coll_params_default(&p);
  p.kind = DLCP_COLL_ALLREDUCE;
  p.algo = DLCP_ALGO_RING;
  p.world = 1;
  p.count = 64;
  p.dtype = DLCP_INT32;
  p.op = DLCP_SUM;
  p.recvbuf = buf;
  dlcp_coll *op;
  assert_int_equal(dlcp_coll_new(&op, &p, NULL, 0), 0);
  /* Not yet DONE. */
  assert_int_equal(dlcp_coll_reuse(op, &p, 0), DLCP_ERR_INVALID_ARGUMENT);
  dlcp_coll_action a;
  assert_int_equal(dlcp_coll_poll(op, &a, 0), 0);
  assert_int_equal(a.type, DLCP_COLL_ACT_DONE);
  dlcp_coll_params q = p;
  q.count = 63;
  assert_int_equal(dlcp_coll_reuse(op, &q, 0), DLCP_ERR_INVALID_ARGUMENT);
  q = p;
  q.dtype = DLCP_FLOAT32;
  assert_int_equal(dlcp_coll_reuse(op, &q, 0), DLCP_ERR_INVALID_ARGUMENT);
  q = p;
  q.loss_bound = 0.1;
  assert_int_equal(dlcp_coll_reuse(op, &q, 0), DLCP_ERR_INVALID_ARGUMENT);
  q = p;
  q.reduce_on_arrival = true;
  assert_int_equal(dlcp_coll_reuse(op, &q, 0), DLCP_ERR_INVALID_ARGUMENT);
  q = p;
  q.recvbuf = NULL;
  assert_int_equal(dlcp_coll_reuse(op, &q, 0), DLCP_ERR_INVALID_ARGUMENT);
  q = p;
  q.rank = 1; /* invalid for world 1 */
  assert_int_equal(dlcp_coll_reuse(op, &q, 0), DLCP_ERR_INVALID_ARGUMENT);
  /* Refusals left it whole: the same parameters run again. */
  assert_int_equal(dlcp_coll_reuse(op, &p, 0), 0);
  assert_int_equal(dlcp_coll_poll(op, &a, 0), 0);
  assert_int_equal(a.type, DLCP_COLL_ACT_DONE);
  dlcp_coll_del(op);
  /* Plans that change as they run or were built from borrowed labels. */
  static const uint32_t labels[2] = {0, 0};
  const dlcp_algo never[] = {DLCP_ALGO_RING_BYPASS, DLCP_ALGO_RAT};
  for (size_t i = 0; i < 2; i++) {
    q = p;
    q.algo = never[i];
    q.topo = labels;
    q.topo_levels = 1;
    assert_int_equal(dlcp_coll_new(&op, &q, NULL, 0), 0);
    assert_int_equal(dlcp_coll_poll(op, &a, 0), 0);
    assert_int_equal(a.type, DLCP_COLL_ACT_DONE);
    assert_int_equal(dlcp_coll_reuse(op, &q, 0), DLCP_ERR_INVALID_ARGUMENT);
    dlcp_coll_del(op);
  }
}

static void test_golden_plans(void **state) {
  (void)state;
  static int32_t dummy_in[64], dummy_out[64];
  static const uint32_t racks[4] = {0, 0, 1, 1};
  dlcp_coll_params p;
  dlcp_coll_params_default(&p);
  p.world = 3;
  p.rank = 1;
  p.count = 10;
  p.dtype = DLCP_INT32;
  p.algo = DLCP_ALGO_RING;
  p.chunk_bytes = 8;
  check_golden("allreduce_ring_n3_r1", &p);
  /* Six ranks: four scratch banks, a receive posted three steps ahead;
   * two banks (one step ahead) when receives are not posted ahead, or
   * when the chunk is above recv_ahead_bytes. */
  p.world = 6;
  p.count = 12;
  p.chunk_bytes = 0;
  check_golden("allreduce_ring_n6_r1", &p);
  p.recv_ahead_bytes = 4;
  check_golden("allreduce_ring_n6_r1_two_banks", &p);
  p.recv_ahead_bytes = DLCP_COLL_DEFAULT_RECV_AHEAD_BYTES;
  p.world = 3;
  p.chunk_bytes = 8;
  p.algo = DLCP_ALGO_HALVING_DOUBLING;
  p.rank = 0;
  p.count = 7;
  p.dtype = DLCP_FLOAT32;
  p.op = DLCP_AVG;
  p.chunk_bytes = 1u << 20;
  check_golden("allreduce_hd_n3_r0", &p);
  p.rank = 1;
  check_golden("allreduce_hd_n3_r1", &p);
  /* Four ranks: the first (half-vector) exchange goes to the farthest
   * rank without labels (rank 0 with 2, then 1), and to the rack-mate in
   * racks {0, 1} {2, 3} (0 with 1, then 2). */
  p.world = 4;
  p.rank = 0;
  p.count = 8;
  check_golden("allreduce_hd_n4_r0", &p);
  p.topo = racks;
  p.topo_levels = 1;
  check_golden("allreduce_hd_n4_r0_racks", &p);
  p.topo = NULL;
  p.topo_levels = 0;
  p.world = 3;
  p.algo = DLCP_ALGO_PS;
  p.rank = 2;
  p.count = 5;
  check_golden("allreduce_ps_n3_r2", &p);
  p.algo = DLCP_ALGO_RAT;
  p.world = 4;
  p.rank = 1;
  p.count = 4 * 2048; /* 8 KiB a tree: one tree per rank */
  p.op = DLCP_SUM;
  p.topo = racks;
  p.topo_levels = 1;
  check_golden("allreduce_rat_n4_r1", &p);
  /* Receives not posted ahead (recv_ahead_bytes 0, the simulator's TCP
   * baselines): the result lands in place once the send up is done. */
  p.recv_ahead_bytes = 0;
  check_golden("allreduce_rat_n4_r1_in_place", &p);
  p.recv_ahead_bytes = DLCP_COLL_DEFAULT_RECV_AHEAD_BYTES;
  /* Too small for 8 KiB a tree: one tree, rooted at rank 0. */
  p.count = 8;
  check_golden("allreduce_rat_n4_r1_one_tree", &p);
  /* Three levels: racks {0,1,2} {3} {4,5} in a pod, {6,7} in another of
   * the same hall, {8} alone in a hall of its own; rank 4 aggregates its
   * rack in some trees, its pod or hall in others, and is a leaf in the
   * rest. */
  static const uint32_t levels3[9 * 3] = {0, 0, 0, 0, 0, 0, 0, 0, 0,
                                          1, 0, 0, 2, 0, 0, 2, 0, 0,
                                          0, 1, 0, 0, 1, 0, 0, 0, 1};
  p.world = 9;
  p.rank = 4;
  p.count = 9 * 2048;
  p.topo = levels3;
  p.topo_levels = 3;
  check_golden("allreduce_rat_3level_n9_r4", &p);
  /* Three trees (8 KiB each), turns 0, 1 and 2: rooted at the member
   * each turn picks from the top (hall, pod, rack, member: ranks 0, 8
   * and 4), which is where that turn puts every other region's
   * aggregator; rank 4 is the root of tree 2. */
  p.count = 3 * 2048;
  check_golden("allreduce_rat_3level_n9_r4_three_trees", &p);
  p.count = 20;
  p.kind = DLCP_COLL_BROADCAST;
  p.root = 7;
  check_golden("broadcast_rat_3level_n9_r4", &p);
  p.kind = DLCP_COLL_ALLREDUCE;
  /* Recursive doubling: r0 folds out; r1 takes the fold in and is the
   * lower partner (reduces in place); on 4 ranks r1 is the higher partner
   * at step 1 (reduces its own into the received copy, copies it back)
   * and the lower at step 2. */
  p.algo = DLCP_ALGO_RECURSIVE_DOUBLING;
  p.topo = NULL;
  p.topo_levels = 0;
  p.world = 3;
  p.rank = 0;
  p.count = 7;
  p.op = DLCP_AVG;
  check_golden("allreduce_rd_n3_r0", &p);
  p.rank = 1;
  check_golden("allreduce_rd_n3_r1", &p);
  p.world = 4;
  p.op = DLCP_MIN;
  check_golden("allreduce_rd_n4_r1", &p);
  dlcp_coll_params_default(&p);
  p.kind = DLCP_COLL_REDUCE_SCATTER;
  p.algo = DLCP_ALGO_RING;
  p.world = 3;
  p.rank = 0;
  p.count = 7;
  p.dtype = DLCP_INT32;
  p.sendbuf = dummy_in;
  p.recvbuf = dummy_out; /* out of place: a final copy */
  check_golden("reduce_scatter_ring_n3_r0", &p);
  dlcp_coll_params_default(&p);
  p.kind = DLCP_COLL_BROADCAST;
  p.algo = DLCP_ALGO_HALVING_DOUBLING;
  p.world = 5;
  p.rank = 2;
  p.root = 1;
  p.count = 6;
  check_golden("broadcast_binomial_n5_r2", &p);
  /* The chain to root 3 of a group of 4: rank 1 (the communicator's rank
   * 2) is second on it, after rank 0 (7), before rank 2 (5); two scratch
   * slots alternate. */
  static const uint32_t group[4] = {7, 2, 5, 3};
  dlcp_coll_params_default(&p);
  p.kind = DLCP_COLL_REDUCE;
  p.algo = DLCP_ALGO_RING;
  p.world = 4;
  p.rank = 1;
  p.root = 3;
  p.count = 10;
  p.dtype = DLCP_INT32;
  p.op = DLCP_AVG;
  p.chunk_bytes = 12;
  p.members = group;
  check_golden("reduce_ring_group_n4_r1", &p);
  dlcp_coll_params_default(&p);
  p.kind = DLCP_COLL_BARRIER;
  p.world = 5;
  p.rank = 3;
  check_golden("barrier_n5_r3", &p);
}

/* ---- parameters and failures -------------------------------------------- */

static void test_invalid_params(void **state) {
  (void)state;
  int32_t buf[8];
  dlcp_coll *op;
  dlcp_coll_params p;
  dlcp_coll_params_default(&p);
  p.world = 4;
  p.count = 8;
  p.recvbuf = buf;
  p.rank = 4;
  assert_int_equal(dlcp_coll_new(&op, &p, NULL, 0), DLCP_ERR_INVALID_ARGUMENT);
  assert_null(op);
  p.rank = 0;
  p.bypass_alpha = 0.9;
  assert_int_equal(dlcp_coll_new(&op, &p, NULL, 0), DLCP_ERR_INVALID_ARGUMENT);
  p.bypass_alpha = 0;
  p.loss_bound = 1.0;
  assert_int_equal(dlcp_coll_new(&op, &p, NULL, 0), DLCP_ERR_INVALID_ARGUMENT);
  p.loss_bound = 0;
  p.kind = DLCP_COLL_REDUCE_SCATTER;
  p.algo = DLCP_ALGO_RAT;
  assert_int_equal(dlcp_coll_new(&op, &p, NULL, 0), DLCP_ERR_INVALID_ARGUMENT);
  p.kind = DLCP_COLL_BROADCAST;
  p.root = 4;
  assert_int_equal(dlcp_coll_new(&op, &p, NULL, 0), DLCP_ERR_INVALID_ARGUMENT);
  p.root = 0;
  p.topo_levels = 1;
  assert_int_equal(dlcp_coll_new(&op, &p, NULL, 0), DLCP_ERR_INVALID_ARGUMENT);
  p.topo_levels = 0;
  p.recvbuf = NULL;
  assert_int_equal(dlcp_coll_new(&op, &p, NULL, 0), DLCP_ERR_INVALID_ARGUMENT);
  p.recvbuf = buf;
  p.world = DLCP_COLL_MAX_WORLD + 1;
  assert_int_equal(dlcp_coll_new(&op, &p, NULL, 0), DLCP_ERR_LIMIT);
  p.world = 4;
  p.dtype = (dlcp_dtype)17;
  assert_int_equal(dlcp_coll_new(&op, &p, NULL, 0), DLCP_ERR_INVALID_ARGUMENT);
}

/* Polls |op| until NONE, returning the actions. */
static size_t drain(dlcp_coll *op, dlcp_coll_action *acts, size_t max,
                    dlcp_tstamp now) {
  size_t k = 0;
  for (;;) {
    dlcp_coll_action a;
    (void)dlcp_coll_poll(op, &a, now);
    if (a.type == DLCP_COLL_ACT_NONE) {
      return k;
    }
    assert_true(k < max);
    acts[k++] = a;
  }
}

/* Runs rank 0 of a 4-rank all-reduce alone, completing every transfer
 * as soon as it is posted, and records each SEND's (peer, stage) in the
 * order posted.  Returns the number of SENDs. */
static size_t send_stages(dlcp_algo algo, uint32_t peers[], uint32_t stages[],
                          size_t max) {
  int32_t buf[4096] = {0};
  dlcp_coll *op;
  dlcp_coll_params p;
  dlcp_coll_params_default(&p);
  p.algo = algo;
  p.world = 4;
  p.count = 4096;
  p.dtype = DLCP_INT32;
  p.recvbuf = buf;
  p.chunk_bytes = 2048; /* two segments per step */
  assert_int_equal(dlcp_coll_new(&op, &p, NULL, 0), 0);
  size_t nsends = 0;
  bool done = false;
  for (dlcp_tstamp now = 1; !done; now++) {
    dlcp_coll_action acts[64];
    size_t k = drain(op, acts, 64, now);
    assert_true(k > 0); /* every transfer completes at once: no stall */
    for (size_t i = 0; i < k; i++) {
      const dlcp_coll_action *a = &acts[i];
      if (a->type == DLCP_COLL_ACT_SEND) {
        assert_true(nsends < max);
        peers[nsends] = a->peer;
        stages[nsends++] = a->stage;
        assert_int_equal(dlcp_coll_on_sent(op, a->peer, a->tag, 0, now), 0);
      } else if (a->type == DLCP_COLL_ACT_RECV) {
        assert_int_equal(dlcp_coll_on_received(op, a->peer, a->tag, 0, NULL,
                                               0, now),
                         0);
      } else if (a->type == DLCP_COLL_ACT_DONE) {
        done = true;
      }
    }
  }
  dlcp_coll_del(op);
  return nsends;
}

/* A SEND's stage is the receives on its chain of dependencies: in
 * halving-doubling each step's sends are one stage later than the last
 * (they carry what the step before received), so drivers can send a
 * peer's early step ahead of another peer's later one.  Only pairwise
 * exchanges get stages: a ring's sends are not exchanges (it sends to its
 * successor, receives from its predecessor), a parameter server's stages
 * each go to every peer. */
static void test_send_stages(void **state) {
  (void)state;
  uint32_t peers[64], stages[64];
  size_t n = send_stages(DLCP_ALGO_HALVING_DOUBLING, peers, stages, 64);
  /* 4 segments to the distance-2 peer, 2 and 2 to the neighbour (the
   * reduce-scatter's quarter, then the all-gather's), 4 back. */
  static const uint32_t want_stage[12] = {0, 0, 0, 0, 1, 1, 2, 2,
                                          3, 3, 3, 3};
  assert_int_equal(n, 12);
  for (size_t i = 0; i < n; i++) {
    assert_int_equal(stages[i], want_stage[i]);
    assert_int_equal(peers[i], i < 4 || i >= 8 ? peers[0] : peers[4]);
  }
  assert_true(peers[0] != peers[4]);
  n = send_stages(DLCP_ALGO_RING, peers, stages, 64);
  assert_int_equal(n, 12); /* 2 (n - 1) steps, 2 segments each */
  for (size_t i = 0; i < n; i++) {
    assert_int_equal(stages[i], 0);
    assert_int_equal(peers[i], 1);
  }
  /* The sharded parameter server exchanges with every peer at once: no
   * stage is the same on every rank's critical path, one stage too. */
  n = send_stages(DLCP_ALGO_PS, peers, stages, 64);
  assert_true(n > 0);
  for (size_t i = 0; i < n; i++) {
    assert_int_equal(stages[i], 0);
  }
}

/* A failed transfer fails the operation, names the peer, and tells the
 * other ranks, which fail naming the same peer. */
static void test_failure_names_peer_everywhere(void **state) {
  (void)state;
  int32_t b0[30] = {0}, b1[30] = {0};
  dlcp_coll *op0, *op1;
  dlcp_coll_params p;
  dlcp_coll_params_default(&p);
  p.algo = DLCP_ALGO_RING;
  p.world = 3;
  p.count = 30;
  p.dtype = DLCP_INT32;
  p.recvbuf = b0;
  assert_int_equal(dlcp_coll_new(&op0, &p, NULL, 0), 0);
  p.rank = 1;
  p.recvbuf = b1;
  assert_int_equal(dlcp_coll_new(&op1, &p, NULL, 0), 0);
  dlcp_coll_action acts[64];
  size_t k = drain(op0, acts, 64, 100);
  uint32_t tag = UINT32_MAX;
  for (size_t i = 0; i < k; i++) {
    if (acts[i].type == DLCP_COLL_ACT_RECV && acts[i].peer == 2) {
      tag = acts[i].tag;
    }
  }
  assert_true(tag != UINT32_MAX);
  assert_int_equal(dlcp_coll_on_received(op0, 2, tag + 1000, 0, NULL, 0, 101),
                   DLCP_ERR_UNKNOWN_TRANSFER);
  assert_int_equal(
      dlcp_coll_on_received(op0, 2, tag, DLCP_ERR_TIMEOUT, NULL, 0, 101), 0);
  k = drain(op0, acts, 64, 102);
  assert_int_equal(k, 2);
  assert_int_equal(acts[0].type, DLCP_COLL_ACT_NOTE);
  assert_int_equal(acts[0].peer, 1);
  assert_true(acts[0].value == DLCP_COLL_NOTE(DLCP_COLL_NOTE_ABORT, 2));
  assert_int_equal(acts[1].type, DLCP_COLL_ACT_DONE);
  dlcp_coll_result res;
  dlcp_coll_get_result(op0, &res);
  assert_int_equal(res.status, DLCP_ERR_TIMEOUT);
  assert_int_equal(res.failed_peer, 2);
  /* Rank 1 hears of it. */
  assert_int_equal(dlcp_coll_on_note(op1, 0, acts[0].value, 103), 0);
  k = drain(op1, acts, 64, 104);
  assert_true(k >= 1);
  assert_int_equal(acts[k - 1].type, DLCP_COLL_ACT_DONE);
  dlcp_coll_get_result(op1, &res);
  assert_int_equal(res.status, DLCP_ERR_PEER_ABORTED);
  assert_int_equal(res.failed_peer, 2);
  dlcp_coll_del(op0);
  dlcp_coll_del(op1);
}

/* A barrier waits on notes, which have no timer of their own: the
 * operation says whom it waits on, round by round, and since when. */
static void test_awaited_note_names_the_round_peer(void **state) {
  (void)state;
  dlcp_coll *op;
  dlcp_coll_params p;
  dlcp_coll_action acts[16];
  uint32_t peer = UINT32_MAX;
  dlcp_tstamp since = 0;
  dlcp_coll_params_default(&p);
  p.kind = DLCP_COLL_BARRIER;
  p.world = 8;
  p.rank = 1;
  assert_int_equal(dlcp_coll_new(&op, &p, NULL, 10), 0);
  assert_false(dlcp_coll_awaited_note(op, &peer, &since));
  /* Rounds 0, 1, 2: rank 1 waits on 1 - 2^k (mod 8): 0, 7, 5. */
  const uint32_t from[3] = {0, 7, 5};
  for (uint32_t k = 0; k < 3; k++) {
    size_t n = drain(op, acts, 16, 100 * k + 10);
    assert_int_equal(n, 1);
    assert_int_equal(acts[0].type, DLCP_COLL_ACT_NOTE);
    assert_true(dlcp_coll_awaited_note(op, &peer, &since));
    assert_int_equal(peer, from[k]);
    assert_int_equal(since, 100 * k + 10); /* the round's note went out */
    assert_int_equal(dlcp_coll_on_note(op, from[k],
                                       DLCP_COLL_NOTE(DLCP_COLL_NOTE_BARRIER,
                                                      k), 100 * k + 50), 0);
  }
  assert_int_equal(drain(op, acts, 16, 400), 1);
  assert_int_equal(acts[0].type, DLCP_COLL_ACT_DONE);
  assert_false(dlcp_coll_awaited_note(op, &peer, &since));
  dlcp_coll_del(op);

  /* An all-reduce waits on transfers (with their own timers), not notes. */
  int32_t b[64] = {0};
  dlcp_coll_params_default(&p);
  p.algo = DLCP_ALGO_RING;
  p.world = 4;
  p.count = 64;
  p.dtype = DLCP_INT32;
  p.recvbuf = b;
  assert_int_equal(dlcp_coll_new(&op, &p, NULL, 0), 0);
  assert_true(drain(op, acts, 16, 1) > 0);
  assert_false(dlcp_coll_awaited_note(op, &peer, &since));
  dlcp_coll_del(op);
}

/* Holes reported on an operation with loss bound 0 are a contract
 * violation: the operation fails instead of returning inexact data. */
static void test_holes_without_loss_bound_fail(void **state) {
  (void)state;
  int32_t b[30] = {0};
  dlcp_coll *op;
  dlcp_coll_params p;
  dlcp_coll_params_default(&p);
  p.algo = DLCP_ALGO_RING;
  p.world = 2;
  p.count = 30;
  p.dtype = DLCP_INT32;
  p.recvbuf = b;
  assert_int_equal(dlcp_coll_new(&op, &p, NULL, 0), 0);
  dlcp_coll_action acts[64];
  size_t k = drain(op, acts, 64, 0);
  for (size_t i = 0; i < k; i++) {
    if (acts[i].type == DLCP_COLL_ACT_RECV) {
      dlcp_coll_range hole = {0, 4};
      assert_int_equal(dlcp_coll_on_received(op, acts[i].peer, acts[i].tag,
                                             0, &hole, 1, 1),
                       0);
      break;
    }
  }
  k = drain(op, acts, 64, 2);
  assert_int_equal(acts[k - 1].type, DLCP_COLL_ACT_DONE);
  dlcp_coll_result res;
  dlcp_coll_get_result(op, &res);
  assert_int_equal(res.status, DLCP_ERR_SIZE_MISMATCH);
  dlcp_coll_del(op);
}

/* Runs PS rank 2 of 3 alone: its shard is its own 1e8, then peer 0's
 * 1.0, then peer 1's -1e8, summed in that order (float: 0; the other
 * order would give 1).  Peer 1's first half arrives before peer 0's
 * receive is over and, fused, must wait in scratch until the reduce of
 * peer 0's is done; its second half comes after and is reduced straight
 * in.  Returns the shard's first element as the peers are sent it, after
 * checking every element equals it. */
static float ps_chain_result(bool fuse) {
  enum { COUNT = 3 * 700 };
  static float buf[COUNT];
  for (size_t i = 0; i < COUNT; i++) {
    buf[i] = 1e8f;
  }
  dlcp_coll *op;
  dlcp_coll_params p;
  dlcp_coll_params_default(&p);
  p.algo = DLCP_ALGO_PS;
  p.rank = 2;
  p.world = 3;
  p.count = COUNT;
  p.dtype = DLCP_FLOAT32;
  p.recvbuf = buf;
  p.sendbuf = buf;
  p.chunk_bytes = 1 << 20; /* one transfer per peer */
  p.reduce_on_arrival = fuse;
  assert_int_equal(dlcp_coll_new(&op, &p, NULL, 0), 0);
  dlcp_coll_action acts[64], from[2];
  size_t k = drain(op, acts, 64, 0);
  int have[2] = {0, 0};
  for (size_t i = 0; i < k; i++) {
    if (acts[i].type == DLCP_COLL_ACT_RECV) {
      assert_true(acts[i].peer < 2 && !have[acts[i].peer]);
      from[acts[i].peer] = acts[i];
      have[acts[i].peer] = 1;
    }
  }
  assert_true(have[0] && have[1]);
  size_t bytes = (size_t)from[0].bytes, half = bytes / 2 / 4 * 4;
  assert_int_equal(from[1].bytes, bytes);
  static float one[COUNT], minus[COUNT];
  for (size_t i = 0; i < COUNT; i++) {
    one[i] = 1.0f;
    minus[i] = -1e8f;
  }
  /* What a driver does with a piece: place it, or copy it. */
  uint8_t *d1 = from[1].recv_buf, *d0 = from[0].recv_buf;
  assert_true((from[0].recv_place != NULL) == fuse);
  assert_true((from[1].recv_place != NULL) == fuse);
  if (fuse) {
    assert_int_equal(from[0].recv_place_unit, 4);
    from[1].recv_place(from[1].recv_place_user, d1, (uint8_t *)minus, half);
    from[0].recv_place(from[0].recv_place_user, d0, (uint8_t *)one, bytes);
  } else {
    memcpy(d1, minus, half);
    memcpy(d0, one, bytes);
  }
  assert_int_equal(dlcp_coll_on_received(op, 0, from[0].tag, 0, NULL, 0, 1),
                   0);
  assert_int_equal(drain(op, acts, 64, 1), 0);
  if (fuse) {
    from[1].recv_place(from[1].recv_place_user, d1 + half,
                       (uint8_t *)minus + half, bytes - half);
  } else {
    memcpy(d1 + half, (uint8_t *)minus + half, bytes - half);
  }
  assert_int_equal(dlcp_coll_on_received(op, 1, from[1].tag, 0, NULL, 0, 2),
                   0);
  k = drain(op, acts, 64, 2);
  const float *shard = NULL;
  for (size_t i = 0; i < k; i++) {
    if (acts[i].type == DLCP_COLL_ACT_SEND) {
      shard = acts[i].send_buf;
      assert_int_equal(acts[i].bytes, bytes);
    }
  }
  assert_non_null(shard);
  float v = shard[0];
  for (size_t i = 0; i < bytes / 4; i++) {
    assert_true(shard[i] == v);
  }
  dlcp_coll_del(op);
  return v;
}

/* Reduced on arrival, a receive whose reduce waits for another still sums
 * in the plan's order, bit for bit as without. */
static void test_reduce_on_arrival_keeps_order(void **state) {
  (void)state;
  assert_true(ps_chain_result(false) == 0.0f);
  assert_true(ps_chain_result(true) == 0.0f);
}

int main(void) {
  for (uint32_t r = 0; r < MAXR; r++) {
    rack_of_pairs[r] = r / 2;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_allreduce_matrix),
      cmocka_unit_test(test_allreduce_world16),
      cmocka_unit_test(test_every_dtype_and_op),
      cmocka_unit_test(test_random_floats_tolerance),
      cmocka_unit_test(test_order_sensitive_values),
      cmocka_unit_test(test_reduce_scatter_allgather_broadcast),
      cmocka_unit_test(test_reduce),
      cmocka_unit_test(test_members),
      cmocka_unit_test(test_reduce_final_prefix),
      cmocka_unit_test(test_barrier),
      cmocka_unit_test(test_awaited_note_names_the_round_peer),
      cmocka_unit_test(test_rat_topologies),
      cmocka_unit_test(test_rat_out_of_memory),
      cmocka_unit_test(test_auto_rule),
      cmocka_unit_test(test_exact_when_delivered_whole),
      cmocka_unit_test(test_loss_bounded),
      cmocka_unit_test(test_loss_edge_cases),
      cmocka_unit_test(test_straggler_bypass_faster),
      cmocka_unit_test(test_straggler_persistent),
      cmocka_unit_test(test_reuse_runs_as_new),
      cmocka_unit_test(test_reuse_refused),
      cmocka_unit_test(test_bypass_forgets_high_step),
      cmocka_unit_test(test_straggler_reduce_scatter),
      cmocka_unit_test(test_bypass_randomized),
      cmocka_unit_test(test_bypass_empty_chunk_races),
      cmocka_unit_test(test_golden_plans),
      cmocka_unit_test(test_invalid_params),
      cmocka_unit_test(test_failure_names_peer_everywhere),
      cmocka_unit_test(test_holes_without_loss_bound_fail),
      cmocka_unit_test(test_reduce_on_arrival_keeps_order),
      cmocka_unit_test(test_send_stages),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
