/*
 * agg_test.c: the INA wire format, the aggregation switch core (hand-built
 * packets, literal times) and whole all-reduces of plain INA and RA-INA
 * through the seeded in-memory star network (tests/support/inanet) with
 * loss of every packet type, duplication, reordering, several jobs on one
 * small pool and forged packets.
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
#include "coll/ina.h"
#include "coll/ina_cc.h"
#include "collsim.h"
#include "inanet.h"
#include "proto/agg.h"
#include "proto/rng.h"
#include "wire/agg_wire.h"
#include "wire/bytes.h"

#define ELEMS 4u /* block size of the hand-built tests */
#define BUF (DLCP_AGG_HDR_LEN + 4u * 255u * 256u)

static uint8_t out_buf[BUF];

/* ---- helpers ----------------------------------------------------------- */

static dlcp_agg_hdr hdr(uint8_t type, uint32_t group, uint8_t rank,
                        uint8_t world, uint8_t nblocks) {
  dlcp_agg_hdr h;

  memset(&h, 0, sizeof(h));
  h.type = type;
  h.job = 7;
  h.token = 0x1122334455667788u;
  h.group = group;
  h.rank = rank;
  h.world = world;
  h.nblocks = nblocks;
  h.elems = ELEMS;
  return h;
}

/* Encodes |h| with a payload of every element equal to |v|. */
static size_t pkt(uint8_t *buf, const dlcp_agg_hdr *h, int32_t v) {
  size_t n = dlcp_agg_payload_len(h) / 4u;

  assert_int_equal(dlcp_agg_hdr_encode(buf, BUF, h), DLCP_AGG_HDR_LEN);
  for (size_t i = 0; i < n; i++) {
    dlcp_put_u32(buf + DLCP_AGG_HDR_LEN + 4u * i, (uint32_t)v);
  }
  return DLCP_AGG_HDR_LEN + 4u * n;
}

static int contrib(dlcp_agg *a, uint32_t group, uint8_t rank, uint8_t world,
                   uint8_t nblocks, uint8_t flags, int32_t v, uint8_t ecn,
                   dlcp_tstamp now) {
  static uint8_t b[BUF];
  dlcp_agg_hdr h = hdr(DLCP_AGG_CONTRIB, group, rank, world, nblocks);

  h.flags = flags;
  return dlcp_agg_on_packet(a, b, pkt(b, &h, v), ecn, 100u + rank, now);
}

/* Rank 0 of a 2-rank job |job| (not contrib's job 7) contributes its
 * 2-block group |group|, from address 50. */
static int contrib_of(dlcp_agg *a, uint32_t job, uint32_t group,
                      dlcp_tstamp now) {
  static uint8_t b[BUF];
  dlcp_agg_hdr h = hdr(DLCP_AGG_CONTRIB, group, 0, 2, 2);

  h.job = job;
  return dlcp_agg_on_packet(a, b, pkt(b, &h, 4), 0, 50, now);
}

static int ack(dlcp_agg *a, uint32_t group, uint8_t rank, uint8_t world,
               dlcp_tstamp now) {
  static uint8_t b[BUF]; /* pkt writes the header only for an ACK */
  dlcp_agg_hdr h = hdr(DLCP_AGG_ACK, group, rank, world, 1);

  return dlcp_agg_on_packet(a, b, pkt(b, &h, 0), 0, 100u + rank, now);
}

/* Polls one datagram; returns its decoded header (type 0 if none). */
static dlcp_agg_hdr poll1(dlcp_agg *a, dlcp_agg_send *s,
                          const uint8_t **payload, dlcp_tstamp now) {
  dlcp_agg_hdr h;

  memset(&h, 0, sizeof(h));
  if (dlcp_agg_poll(a, s, out_buf, sizeof(out_buf), now) == 1) {
    assert_int_equal(dlcp_agg_decode(&h, payload, out_buf, s->len), 0);
  }
  return h;
}

/* The hand-built tests' switch: |naggs| aggregators of ELEMS, re-sends
 * every 1 us, a 100 us lease, jobs idle after 50 us. */
static void small_config(dlcp_agg_config *c, uint32_t naggs,
                         dlcp_agg_policy pol, uint32_t parts) {
  dlcp_agg_config_default(c);
  c->block_elems = ELEMS;
  c->mem_bytes = naggs * 4u * ELEMS;
  c->policy = pol;
  c->static_parts = parts;
  c->resend_ns = 1000;
  c->lease_ns = 100000;
  c->idle_ns = 50000;
}

static dlcp_agg *small_switch(uint32_t naggs, dlcp_agg_policy pol,
                              uint32_t parts) {
  dlcp_agg_config c;
  dlcp_agg *a;

  small_config(&c, naggs, pol, parts);
  assert_int_equal(dlcp_agg_new(&a, &c, NULL, 0), 0);
  return a;
}

/* ---- wire -------------------------------------------------------------- */

static void test_wire_roundtrip_and_rejects(void **state) {
  uint8_t b[BUF];
  dlcp_agg_hdr h = hdr(DLCP_AGG_CONTRIB, 5, 1, 3, 2), d;
  const uint8_t *payload;
  size_t len;

  (void)state;
  h.low = 4;
  h.flags = DLCP_AGG_FLAG_RING | DLCP_AGG_FLAG_RETX;
  len = pkt(b, &h, -3);
  assert_int_equal(len, 32 + 2 * 4 * 4);
  assert_int_equal(dlcp_agg_decode(&d, &payload, b, len), 0);
  /* field by field: the struct has padding */
  assert_int_equal(d.type, h.type);
  assert_int_equal(d.job, h.job);
  assert_int_equal(d.token, h.token);
  assert_int_equal(d.group, h.group);
  assert_int_equal(d.low, h.low);
  assert_int_equal(d.rank, h.rank);
  assert_int_equal(d.world, h.world);
  assert_int_equal(d.nblocks, h.nblocks);
  assert_int_equal(d.flags, h.flags);
  assert_int_equal(d.elems, h.elems);
  assert_int_equal(d.aux, h.aux);
  assert_ptr_equal(payload, b + 32);
  assert_int_equal((int32_t)dlcp_get_u32(payload + 28), -3);
  /* framing */
  assert_int_equal(dlcp_agg_decode(&d, &payload, b, 31), DLCP_ERR_TRUNCATED);
  assert_int_equal(dlcp_agg_decode(&d, &payload, b, len - 1),
                   DLCP_ERR_TRUNCATED);
  assert_int_equal(dlcp_agg_decode(&d, &payload, b, len + 1),
                   DLCP_ERR_BAD_LENGTH);
  b[0] ^= 1;
  assert_int_equal(dlcp_agg_decode(&d, &payload, b, len), DLCP_ERR_BAD_MAGIC);
  b[0] ^= 1;
  b[2] = 1; /* before CLAIM, GRANT and WAITING */
  assert_int_equal(dlcp_agg_decode(&d, &payload, b, len),
                   DLCP_ERR_BAD_VERSION);
  b[2] = DLCP_AGG_WIRE_VERSION;
  b[3] = 9;
  assert_int_equal(dlcp_agg_decode(&d, &payload, b, len), DLCP_ERR_BAD_TYPE);
  b[3] = DLCP_AGG_CONTRIB;
  /* fields */
  h.rank = 3;
  assert_int_equal(dlcp_agg_hdr_encode(b, BUF, &h), DLCP_ERR_INVALID_ARGUMENT);
  h.rank = 1;
  h.flags = 0x10;
  assert_int_equal(dlcp_agg_hdr_encode(b, BUF, &h), DLCP_ERR_INVALID_ARGUMENT);
  h.flags = DLCP_AGG_ECN_CE; /* a host never sets ECN bits in the header */
  assert_int_equal(dlcp_agg_hdr_encode(b, BUF, &h), DLCP_ERR_INVALID_ARGUMENT);
  h = hdr(DLCP_AGG_NACK, 1, 0, 1, 1);
  h.aux = 0;
  assert_int_equal(dlcp_agg_hdr_encode(b, BUF, &h), DLCP_ERR_INVALID_ARGUMENT);
  h.aux = DLCP_AGG_NACK_WAITING + 1;
  assert_int_equal(dlcp_agg_hdr_encode(b, BUF, &h), DLCP_ERR_INVALID_ARGUMENT);
  h.aux = DLCP_AGG_NACK_RING;
  h.low = 1; /* only TOO_BIG carries a pool size */
  assert_int_equal(dlcp_agg_hdr_encode(b, BUF, &h), DLCP_ERR_INVALID_ARGUMENT);
  h.low = 0;
  assert_int_equal(dlcp_agg_hdr_encode(b, BUF, &h), DLCP_AGG_HDR_LEN);
  assert_int_equal(dlcp_agg_decode(&d, &payload, b, 32), 0);
  assert_null(payload);
  /* TOO_BIG: a pool of 1..nblocks-1 aggregators, nothing else */
  h = hdr(DLCP_AGG_NACK, 1, 0, 1, 4);
  h.aux = DLCP_AGG_NACK_TOO_BIG;
  assert_int_equal(dlcp_agg_hdr_encode(b, BUF, &h), DLCP_ERR_INVALID_ARGUMENT);
  h.low = 4;
  assert_int_equal(dlcp_agg_hdr_encode(b, BUF, &h), DLCP_ERR_INVALID_ARGUMENT);
  h.low = 3;
  assert_int_equal(dlcp_agg_hdr_encode(b, BUF, &h), DLCP_AGG_HDR_LEN);
  assert_int_equal(dlcp_agg_decode(&d, &payload, b, 32), 0);
  assert_int_equal(d.aux, DLCP_AGG_NACK_TOO_BIG);
  assert_int_equal(d.low, 3);
  b[20] = 4; /* low = nblocks on the wire */
  assert_int_equal(dlcp_agg_decode(&d, &payload, b, 32),
                   DLCP_ERR_INVALID_ARGUMENT);
  /* ACK: RETX only (it acknowledges a result that came again) */
  h = hdr(DLCP_AGG_ACK, 1, 0, 2, 1);
  h.flags = DLCP_AGG_FLAG_RETX;
  assert_int_equal(dlcp_agg_hdr_encode(b, BUF, &h), DLCP_AGG_HDR_LEN);
  h.flags = DLCP_AGG_FLAG_RING;
  assert_int_equal(dlcp_agg_hdr_encode(b, BUF, &h), DLCP_ERR_INVALID_ARGUMENT);
  /* WAITING: 8 bytes of bitmap, no bit at or above world */
  h = hdr(DLCP_AGG_NACK, 1, 0, 2, 1);
  h.aux = DLCP_AGG_NACK_WAITING;
  assert_int_equal(dlcp_agg_payload_len(&h), DLCP_AGG_WAITING_LEN);
  assert_int_equal(dlcp_agg_hdr_encode(b, BUF, &h), DLCP_AGG_HDR_LEN);
  memset(b + DLCP_AGG_HDR_LEN, 0, DLCP_AGG_WAITING_LEN);
  b[DLCP_AGG_HDR_LEN] = 0x02;
  assert_int_equal(dlcp_agg_decode(&d, &payload, b, 32), DLCP_ERR_TRUNCATED);
  assert_int_equal(dlcp_agg_decode(&d, &payload, b, 41), DLCP_ERR_BAD_LENGTH);
  assert_int_equal(dlcp_agg_decode(&d, &payload, b, 40), 0);
  assert_ptr_equal(payload, b + DLCP_AGG_HDR_LEN);
  b[DLCP_AGG_HDR_LEN] = 0x04; /* rank 2 of a world of 2 */
  assert_int_equal(dlcp_agg_decode(&d, &payload, b, 40),
                   DLCP_ERR_INVALID_ARGUMENT);
  h = hdr(DLCP_AGG_RESULT, 1, 0, 1, 255);
  h.elems = 65; /* 255 * 65 * 4 + 32 > 65507 */
  assert_int_equal(dlcp_agg_hdr_encode(b, BUF, &h), DLCP_ERR_INVALID_ARGUMENT);
  h.elems = 64;
  assert_int_equal(dlcp_agg_hdr_encode(b, 31, &h), DLCP_ERR_BUFFER_TOO_SMALL);
}

/* ---- the switch --------------------------------------------------------- */

static void test_switch_sum_result_ack_free(void **state) {
  dlcp_agg *a = small_switch(8, DLCP_AGG_SHARED, 1);
  dlcp_agg_send s;
  const uint8_t *p;
  dlcp_agg_hdr r;
  dlcp_agg_stats st;

  (void)state;
  assert_int_equal(contrib(a, 0, 0, 2, 2, 0, 5, 0, 100), 0);
  assert_int_equal(poll1(a, &s, &p, 100).type, 0); /* nothing yet */
  /* a duplicate of an incomplete group is not added twice; the answer
   * says who has contributed (rank 0), so the sender knows rank 1 is
   * missing */
  assert_int_equal(contrib(a, 0, 0, 2, 2, 0, 5, 0, 101), 0);
  r = poll1(a, &s, &p, 101);
  assert_int_equal(r.type, DLCP_AGG_NACK);
  assert_int_equal(r.aux, DLCP_AGG_NACK_WAITING);
  assert_int_equal(r.rank, 0);
  assert_int_equal(s.addr, 100u);
  assert_int_equal(dlcp_get_u64(p), 1u);
  assert_int_equal(contrib(a, 0, 1, 2, 2, 0, -7, DLCP_AGG_ECN_CE, 102), 0);
  for (uint8_t rank = 0; rank < 2; rank++) {
    r = poll1(a, &s, &p, 102);
    assert_int_equal(r.type, DLCP_AGG_RESULT);
    assert_int_equal(r.rank, rank);
    assert_int_equal(s.addr, 100u + rank);
    assert_int_equal(r.flags, DLCP_AGG_ECN_CE); /* the OR of both */
    assert_int_equal(s.ecn, DLCP_AGG_ECN_ECT0); /* the OR is inside */
    assert_int_equal(r.aux, 8); /* the 2 it holds + 6 free, one job */
    for (uint32_t i = 0; i < 2 * ELEMS; i++) {
      assert_int_equal((int32_t)dlcp_get_u32(p + 4 * i), -2);
    }
  }
  /* rank 1's result was lost: its re-sent contribution gets it again */
  assert_int_equal(contrib(a, 0, 1, 2, 2, 0, -7, 0, 103), 0);
  r = poll1(a, &s, &p, 103);
  assert_int_equal(r.type, DLCP_AGG_RESULT);
  assert_int_equal(r.rank, 1);
  assert_int_equal((int32_t)dlcp_get_u32(p), -2);
  assert_int_equal(ack(a, 0, 0, 2, 104), 0);
  dlcp_agg_get_stats(a, &st);
  assert_int_equal(st.aggs_used, 2);
  assert_int_equal(ack(a, 0, 1, 2, 105), 0);
  dlcp_agg_get_stats(a, &st);
  assert_int_equal(st.aggs_used, 0);
  assert_int_equal(st.freed, 1);
  assert_int_equal(st.contrib, 2);
  assert_int_equal(st.duplicates, 2);
  assert_int_equal(st.results_sent, 3);
  assert_int_equal(st.resent, 1);
  /* a late ACK and a late contribution of the freed group */
  assert_int_equal(ack(a, 0, 1, 2, 106), DLCP_ERR_UNKNOWN_TRANSFER);
  assert_int_equal(contrib(a, 0, 1, 2, 2, 0, -7, 0, 107), 0);
  r = poll1(a, &s, &p, 107);
  assert_int_equal(r.type, DLCP_AGG_NACK);
  assert_int_equal(r.aux, DLCP_AGG_NACK_GONE);
  dlcp_agg_del(a);
}

/* Ranks 0 and 1 of 2 contribute 1 and 2 to group |g| (one block) at |t0|
 * and |t1|, and the results go out at |t1|. */
static void complete_pair(dlcp_agg *a, uint32_t g, dlcp_tstamp t0,
                          dlcp_tstamp t1) {
  dlcp_agg_send s;
  const uint8_t *p;
  assert_int_equal(contrib(a, g, 0, 2, 1, 0, 1, 0, t0), 0);
  assert_int_equal(contrib(a, g, 1, 2, 1, 0, 2, 0, t1), 0);
  while (poll1(a, &s, &p, t1).type != 0) {
  }
}

static void test_switch_resend_timer_and_lease(void **state) {
  dlcp_agg *a = small_switch(8, DLCP_AGG_SHARED, 1);
  dlcp_agg_send s;
  const uint8_t *p;
  dlcp_agg_stats st;

  (void)state;
  complete_pair(a, 0, 0, 10);
  assert_int_equal(ack(a, 0, 0, 2, 20), 0);
  assert_int_equal(dlcp_agg_next_deadline(a), 1010);
  dlcp_agg_on_timer(a, 1009);
  assert_int_equal(poll1(a, &s, &p, 1009).type, 0);
  dlcp_agg_on_timer(a, 1010);
  /* only rank 1, which never acknowledged, gets it again */
  assert_int_equal(poll1(a, &s, &p, 1010).rank, 1);
  assert_int_equal(poll1(a, &s, &p, 1010).type, 0);
  /* an incomplete group is reclaimed after the lease */
  assert_int_equal(contrib(a, 1, 0, 2, 1, 0, 1, 0, 2000), 0);
  dlcp_agg_on_timer(a, 2000 + 100000);
  dlcp_agg_get_stats(a, &st);
  assert_int_equal(st.reclaimed, 1);
  assert_int_equal(st.aggs_used, 1); /* group 0's, for rank 1's ACK */
  while (poll1(a, &s, &p, 102000).type != 0) { /* group 0's re-sends */
  }
  /* and its workers, none of which has its result, start it again: no
   * GONE, the sum is of the contributions sent since */
  assert_int_equal(contrib(a, 1, 1, 2, 1, 0, 2, 0, 103000), 0);
  assert_int_equal(poll1(a, &s, &p, 103000).type, 0);
  assert_int_equal(contrib(a, 1, 0, 2, 1, 0, 1, 0, 103001), 0);
  for (uint8_t rank = 0; rank < 2; rank++) {
    dlcp_agg_hdr r = poll1(a, &s, &p, 103001);
    assert_int_equal(r.type, DLCP_AGG_RESULT);
    assert_int_equal(r.rank, rank);
    assert_int_equal((int32_t)dlcp_get_u32(p), 3);
  }
  dlcp_agg_del(a);
}

/* The job's lowest group gets room from its own incomplete groups above
 * it that lie in the way (agg_rt_test's test_overlap once waited 10 s on
 * this, then failed): a 64-aggregator pool, an RA-INA group of 30 at
 * 0-29, plain INA's group 1 of 32 at 30-61 (rank 0's contribution),
 * then the RA-INA group ends: 30 and 2 free, and group 0 needs 32. */
static void test_switch_lowest_group_evicts(void **state) {
  dlcp_agg *a = small_switch(64, DLCP_AGG_SHARED, 1);
  dlcp_agg_send s;
  const uint8_t *p;
  dlcp_agg_hdr r;
  dlcp_agg_stats st;

  (void)state;
  assert_int_equal(contrib(a, 5, 0, 2, 30, DLCP_AGG_FLAG_RING, 1, 0, 0), 0);
  assert_int_equal(contrib(a, 1, 0, 2, 32, 0, 1, 0, 1), 0);
  assert_int_equal(poll1(a, &s, &p, 1).type, 0); /* both claimed */
  assert_int_equal(contrib(a, 5, 1, 2, 30, DLCP_AGG_FLAG_RING, 2, 0, 2), 0);
  while (poll1(a, &s, &p, 2).type != 0) {
  }
  assert_int_equal(ack(a, 5, 0, 2, 3), 0);
  assert_int_equal(ack(a, 5, 1, 2, 3), 0);
  dlcp_agg_get_stats(a, &st);
  assert_int_equal(st.aggs_used, 32);
  /* group 1 gained a contribution within the re-send interval (1000): it
   * may be about to complete, and the lowest waits (BUSY) */
  assert_int_equal(contrib(a, 0, 1, 2, 32, 0, 2, 0, 1000), 0);
  r = poll1(a, &s, &p, 1000);
  assert_int_equal(r.aux, DLCP_AGG_NACK_BUSY);
  /* rank 0 re-sends it (its window reaches it; rank 1's does not): no
   * gain, so an interval after the last it is evicted all the same, and
   * the lowest takes 0-31 */
  assert_int_equal(contrib(a, 1, 0, 2, 32, 0, 1, 0, 1000), 0);
  assert_int_equal(poll1(a, &s, &p, 1000).aux, DLCP_AGG_NACK_WAITING);
  assert_int_equal(contrib(a, 0, 1, 2, 32, 0, 2, 0, 1001), 0);
  assert_int_equal(poll1(a, &s, &p, 1001).type, 0);
  dlcp_agg_get_stats(a, &st);
  assert_int_equal(st.evicted, 1);
  assert_int_equal(st.aggs_used, 32);
  assert_int_equal(contrib(a, 0, 0, 2, 32, 0, 1, 0, 1002), 0);
  for (uint8_t rank = 0; rank < 2; rank++) {
    r = poll1(a, &s, &p, 1002);
    assert_int_equal(r.type, DLCP_AGG_RESULT);
    assert_int_equal(r.group, 0);
    assert_int_equal((int32_t)dlcp_get_u32(p + 4 * (32 * ELEMS - 1)), 3);
  }
  assert_int_equal(ack(a, 0, 0, 2, 1003), 0);
  assert_int_equal(ack(a, 0, 1, 2, 1003), 0);
  /* group 1 starts again from rank 0's contribution sent again: its
   * first one was evicted, not added twice */
  assert_int_equal(contrib(a, 1, 0, 2, 32, 0, 1, 0, 1004), 0);
  assert_int_equal(poll1(a, &s, &p, 1004).type, 0);
  assert_int_equal(contrib(a, 1, 1, 2, 32, 0, 2, 0, 1005), 0);
  r = poll1(a, &s, &p, 1005);
  assert_int_equal(r.type, DLCP_AGG_RESULT);
  assert_int_equal(r.group, 1);
  assert_int_equal((int32_t)dlcp_get_u32(p), 3);
  dlcp_agg_del(a);
  /* Another job's idle group, not its lowest, gives way too: job 7's
   * group 1 (31 blocks) at 0-30, job 9's groups 1 and 0 (2 blocks) at
   * 31-32 and 33-34; job 7's group 1 ends, and its group 0 (32) finds 31
   * and 29 free. */
  a = small_switch(64, DLCP_AGG_SHARED, 1);
  assert_int_equal(contrib(a, 1, 0, 2, 31, 0, 1, 0, 0), 0);
  assert_int_equal(contrib_of(a, 9, 1, 0), 0);
  assert_int_equal(contrib_of(a, 9, 0, 0), 0);
  assert_int_equal(contrib(a, 1, 1, 2, 31, 0, 2, 0, 0), 0);
  while (poll1(a, &s, &p, 0).type != 0) {
  }
  assert_int_equal(ack(a, 1, 0, 2, 0), 0);
  assert_int_equal(ack(a, 1, 1, 2, 0), 0);
  assert_int_equal(contrib(a, 0, 0, 2, 32, 0, 1, 0, 999), 0);
  r = poll1(a, &s, &p, 999);
  assert_int_equal(r.aux, DLCP_AGG_NACK_BUSY);
  assert_int_equal(contrib(a, 0, 0, 2, 32, 0, 1, 0, 1000), 0);
  assert_int_equal(poll1(a, &s, &p, 1000).type, 0);
  dlcp_agg_get_stats(a, &st);
  assert_int_equal(st.evicted, 1);
  assert_int_equal(st.aggs_used, 32 + 2); /* job 9's lowest stays */
  /* job 9's group 1, sent again, claims anew */
  assert_int_equal(contrib_of(a, 9, 1, 1001), 0);
  assert_int_equal(poll1(a, &s, &p, 1001).type, 0);
  dlcp_agg_del(a);
}

/* Sharded (dlcp-switch's threads), an instance's lowest group is the
 * first at or above the mark that it holds: with the mark at 0, group 1
 * for the odd groups' instance, which evicts for it; unsharded, group 0
 * is the lowest and group 1 waits (BUSY). */
static void test_switch_sharded_lowest(void **state) {
  (void)state;
  for (uint32_t shards = 1; shards <= 2; shards++) {
    dlcp_agg_config c;
    dlcp_agg *a;
    dlcp_agg_send s;
    const uint8_t *p;
    dlcp_agg_stats st;

    small_config(&c, 64, DLCP_AGG_SHARED, 1);
    c.shards = shards;
    c.shard = shards - 1u;
    assert_int_equal(dlcp_agg_new(&a, &c, NULL, 0), 0);
    /* RA-INA's 7 at 0-14, plain 3 at 15-30, RA-INA's 9 and 11 at 31-46
     * and 47-61; 7 ends: 15 and 2 free, and group 1 needs 16 */
    assert_int_equal(contrib(a, 7, 0, 2, 15, DLCP_AGG_FLAG_RING, 1, 0, 0), 0);
    assert_int_equal(contrib(a, 3, 0, 2, 16, 0, 1, 0, 0), 0);
    assert_int_equal(contrib(a, 9, 0, 2, 16, DLCP_AGG_FLAG_RING, 1, 0, 0), 0);
    assert_int_equal(contrib(a, 11, 0, 2, 15, DLCP_AGG_FLAG_RING, 1, 0, 0),
                     0);
    assert_int_equal(contrib(a, 7, 1, 2, 15, DLCP_AGG_FLAG_RING, 2, 0, 0), 0);
    while (poll1(a, &s, &p, 0).type != 0) {
    }
    assert_int_equal(ack(a, 7, 0, 2, 0), 0);
    assert_int_equal(ack(a, 7, 1, 2, 0), 0);
    assert_int_equal(contrib(a, 1, 1, 2, 16, 0, 2, 0, 1000), 0);
    dlcp_agg_hdr r = poll1(a, &s, &p, 1000);
    dlcp_agg_get_stats(a, &st);
    if (shards == 1) {
      assert_int_equal(r.aux, DLCP_AGG_NACK_BUSY);
      assert_int_equal(st.evicted, 0);
    } else {
      assert_int_equal(r.type, 0); /* claimed */
      assert_int_equal(st.evicted, 1); /* group 3, in the way */
      assert_int_equal(st.aggs_used, 16 + 16 + 15);
    }
    dlcp_agg_del(a);
  }
  /* a shard beyond the shards is refused */
  {
    dlcp_agg_config c;
    dlcp_agg *a;

    small_config(&c, 64, DLCP_AGG_SHARED, 1);
    c.shards = 2;
    c.shard = 2;
    assert_int_equal(dlcp_agg_new(&a, &c, NULL, 0), DLCP_ERR_CONFIG);
    c.shards = 257;
    c.shard = 0;
    assert_int_equal(dlcp_agg_new(&a, &c, NULL, 0), DLCP_ERR_CONFIG);
  }
}

/* A worker acknowledging twice shows a re-send was needless: the re-send
 * interval doubles (up to 64x) and groups freed without a re-send ease it
 * back by 1/16 of the excess. */
static void test_switch_resend_backs_off(void **state) {
  dlcp_agg *a = small_switch(8, DLCP_AGG_SHARED, 1);
  dlcp_agg_send s;
  const uint8_t *p;
  dlcp_agg_stats st;

  (void)state;
  complete_pair(a, 0, 0, 0);
  assert_int_equal(ack(a, 0, 0, 2, 10), 0);
  dlcp_agg_on_timer(a, 1000); /* rank 1 gets it again */
  assert_int_equal(poll1(a, &s, &p, 1000).rank, 1);
  /* rank 0 acknowledges again (a late duplicate): 2000 from now on */
  assert_int_equal(ack(a, 0, 0, 2, 1100), 0);
  assert_int_equal(dlcp_agg_next_deadline(a), 1000 + 2000);
  /* rank 1's two acknowledgements: the group is freed, then stale */
  assert_int_equal(ack(a, 0, 1, 2, 1200), 0);
  assert_int_equal(ack(a, 0, 1, 2, 1300), DLCP_ERR_UNKNOWN_TRANSFER);
  dlcp_agg_get_stats(a, &st);
  assert_int_equal(st.resend_backoffs, 2); /* 4000 now */
  /* a group done without a re-send takes back (4000 - 1000) / 16 */
  complete_pair(a, 1, 2000, 2000);
  assert_int_equal(dlcp_agg_next_deadline(a), 2000 + 4000);
  assert_int_equal(ack(a, 1, 0, 2, 2100), 0);
  assert_int_equal(ack(a, 1, 1, 2, 2100), 0);
  assert_int_equal(contrib(a, 2, 0, 2, 1, 0, 1, 0, 3000), 0);
  assert_int_equal(contrib(a, 2, 1, 2, 1, 0, 2, 0, 3000), 0);
  assert_int_equal(dlcp_agg_next_deadline(a), 3000 + 4000 - 3000 / 16);
  /* never beyond 64x */
  for (int i = 0; i < 20; i++) {
    (void)ack(a, 0, 1, 2, 3100);
  }
  assert_int_equal(dlcp_agg_next_deadline(a), 3000 + 64 * 1000);
  dlcp_agg_del(a);
}

static void test_switch_forged_and_config(void **state) {
  dlcp_agg *a = small_switch(8, DLCP_AGG_SHARED, 1);
  uint8_t b[BUF];
  dlcp_agg_hdr h = hdr(DLCP_AGG_CONTRIB, 0, 1, 2, 1);
  dlcp_agg_send s;
  const uint8_t *p;
  dlcp_agg_stats st;

  (void)state;
  assert_int_equal(contrib(a, 0, 0, 2, 1, 0, 1, 0, 0), 0);
  h.token ^= 1; /* job 7's id with another token */
  assert_int_equal(dlcp_agg_on_packet(a, b, pkt(b, &h, 1000), 0, 9, 1),
                   DLCP_ERR_FOREIGN_JOB);
  h.type = DLCP_AGG_ACK;
  assert_int_equal(dlcp_agg_on_packet(a, b, pkt(b, &h, 0), 0, 9, 1),
                   DLCP_ERR_FOREIGN_JOB);
  assert_int_equal(poll1(a, &s, &p, 1).type, 0); /* never answered */
  /* a result sent to the switch, garbage */
  h = hdr(DLCP_AGG_RESULT, 0, 0, 2, 1);
  assert_int_equal(dlcp_agg_on_packet(a, b, pkt(b, &h, 0), 0, 9, 1),
                   DLCP_ERR_BAD_TYPE);
  assert_int_equal(dlcp_agg_on_packet(a, b, 5, 0, 9, 1), DLCP_ERR_TRUNCATED);
  /* another world for the same job, another block size: CONFIG */
  assert_int_equal(contrib(a, 1, 0, 3, 1, 0, 1, 0, 2), 0);
  assert_int_equal(poll1(a, &s, &p, 2).aux, DLCP_AGG_NACK_CONFIG);
  h = hdr(DLCP_AGG_CONTRIB, 0, 0, 1, 1);
  h.job = 8;
  h.elems = ELEMS + 1;
  assert_int_equal(dlcp_agg_on_packet(a, b, pkt(b, &h, 0), 0, 9, 3), 0);
  assert_int_equal(poll1(a, &s, &p, 3).aux, DLCP_AGG_NACK_CONFIG);
  /* the honest rank 1 completes the group untouched by the forgeries */
  assert_int_equal(contrib(a, 0, 1, 2, 1, 0, 2, 0, 4), 0);
  assert_int_equal((int32_t)dlcp_get_u32(p = (poll1(a, &s, &p, 4), out_buf +
                                                  DLCP_AGG_HDR_LEN)),
                   3);
  dlcp_agg_get_stats(a, &st);
  assert_int_equal(st.foreign, 2);
  assert_int_equal(st.malformed, 2);
  assert_int_equal(st.packets, 8);
  dlcp_agg_del(a);
}

/* With 3 aggregators, two groups of 2 blocks cannot both be held: the
 * second gets BUSY (plain INA) or a ring verdict (RA-INA) that stays the
 * same for every worker even after the pool frees up. */
static void test_switch_claims_and_verdicts(void **state) {
  dlcp_agg *a = small_switch(3, DLCP_AGG_SHARED, 1);
  dlcp_agg_send s;
  const uint8_t *p;
  dlcp_agg_stats st;

  (void)state;
  assert_int_equal(contrib(a, 0, 0, 2, 2, 0, 1, 0, 0), 0);
  assert_int_equal(contrib(a, 1, 0, 2, 2, 0, 1, 0, 1), 0);
  assert_int_equal(poll1(a, &s, &p, 1).aux, DLCP_AGG_NACK_BUSY);
  assert_int_equal(contrib(a, 1, 1, 2, 2, DLCP_AGG_FLAG_RING, 1, 0, 2), 0);
  assert_int_equal(poll1(a, &s, &p, 2).aux, DLCP_AGG_NACK_RING);
  /* group 0 completes and is freed */
  assert_int_equal(contrib(a, 0, 1, 2, 2, 0, 1, 0, 3), 0);
  while (poll1(a, &s, &p, 3).type != 0) {
  }
  assert_int_equal(ack(a, 0, 0, 2, 4), 0);
  assert_int_equal(ack(a, 0, 1, 2, 4), 0);
  /* the pool is free, but group 1's verdict stands */
  assert_int_equal(contrib(a, 1, 0, 2, 2, DLCP_AGG_FLAG_RING, 1, 0, 5), 0);
  assert_int_equal(poll1(a, &s, &p, 5).aux, DLCP_AGG_NACK_RING);
  /* group 2 claims; a 4-block group can never fit */
  assert_int_equal(contrib(a, 2, 0, 2, 2, DLCP_AGG_FLAG_RING, 1, 0, 6), 0);
  assert_int_equal(poll1(a, &s, &p, 6).type, 0);
  assert_int_equal(contrib(a, 3, 0, 2, 4, DLCP_AGG_FLAG_RING, 1, 0, 7), 0);
  assert_int_equal(poll1(a, &s, &p, 7).aux, DLCP_AGG_NACK_RING);
  /* plain INA's 4-block group is refused at once, naming the pool of 3,
   * and so is every copy of it: the pool never grows */
  for (uint8_t r = 0; r < 2; r++) {
    dlcp_agg_hdr h;

    assert_int_equal(contrib(a, 4, r, 2, 4, 0, 1, 0, 7), 0);
    h = poll1(a, &s, &p, 7);
    assert_int_equal(h.type, DLCP_AGG_NACK);
    assert_int_equal(h.aux, DLCP_AGG_NACK_TOO_BIG);
    assert_int_equal(h.low, 3);
    assert_int_equal(h.nblocks, 4);
    assert_int_equal(h.rank, r);
    assert_int_equal(s.addr, 100u + r);
  }
  dlcp_agg_get_stats(a, &st);
  assert_int_equal(st.claims, 2);
  assert_int_equal(st.claim_failures, 5);
  assert_int_equal(st.ring_verdicts, 2);
  assert_int_equal(st.too_big, 2);
  /* low-water marks: once both workers are past group 4, everything
   * below is stale */
  {
    uint8_t b[BUF];
    dlcp_agg_hdr h = hdr(DLCP_AGG_ACK, 2, 0, 2, 2);

    h.low = 5;
    assert_int_equal(dlcp_agg_on_packet(a, b, pkt(b, &h, 0), 0, 100, 8),
                     DLCP_ERR_UNKNOWN_TRANSFER);
    h.rank = 1;
    assert_int_equal(dlcp_agg_on_packet(a, b, pkt(b, &h, 0), 0, 101, 8),
                     DLCP_ERR_UNKNOWN_TRANSFER);
  }
  assert_int_equal(contrib(a, 4, 0, 2, 1, 0, 1, 0, 9), 0);
  assert_int_equal(poll1(a, &s, &p, 9).aux, DLCP_AGG_NACK_GONE);
  assert_int_equal(contrib(a, 5 + 4096, 0, 2, 1, 0, 1, 0, 9), 0);
  assert_int_equal(poll1(a, &s, &p, 9).aux, DLCP_AGG_NACK_AHEAD);
  dlcp_agg_del(a);
}

/* A static partition holds its job's lowest groups only: a group beyond
 * the span the partition can hold, counted from the slowest worker's
 * low-water mark, is refused BUSY even when room is free, and every BUSY
 * names the partition, so that the hosts size their windows to it. */
static void test_switch_partition_span(void **state) {
  dlcp_agg *a = small_switch(8, DLCP_AGG_STATIC, 2); /* partitions of 4 */
  dlcp_agg_send s;
  const uint8_t *p;
  dlcp_agg_hdr h;

  (void)state;
  /* 2-block groups: the partition holds groups 0 and 1 */
  assert_int_equal(contrib(a, 2, 0, 2, 2, 0, 1, 0, 0), 0);
  h = poll1(a, &s, &p, 0);
  assert_int_equal(h.aux, DLCP_AGG_NACK_BUSY);
  assert_int_equal(h.low, 4);
  assert_int_equal(contrib(a, 1, 0, 2, 2, 0, 1, 0, 0), 0);
  assert_int_equal(poll1(a, &s, &p, 0).type, 0); /* claimed */
  /* RA-INA's groups are not held back: they get aggregators or a verdict */
  assert_int_equal(contrib(a, 3, 0, 2, 2, DLCP_AGG_FLAG_RING, 1, 0, 0), 0);
  assert_int_equal(poll1(a, &s, &p, 0).type, 0);
  /* a full partition's BUSY names it too */
  assert_int_equal(contrib(a, 0, 0, 2, 2, 0, 1, 0, 0), 0);
  h = poll1(a, &s, &p, 0);
  assert_int_equal(h.aux, DLCP_AGG_NACK_BUSY);
  assert_int_equal(h.low, 4);
  dlcp_agg_del(a);
}

/* A shared pool holds nothing that is one job's own: its BUSY says 0. */
/* A shared pool's BUSY names the job's share of it, the pool over the
 * active jobs, so that its hosts size their windows to it. */
static void test_switch_shared_busy_names_share(void **state) {
  dlcp_agg *a = small_switch(4, DLCP_AGG_SHARED, 1);
  dlcp_agg_send s;
  const uint8_t *p;
  dlcp_agg_hdr h;

  (void)state;
  assert_int_equal(contrib(a, 0, 0, 2, 2, 0, 1, 0, 0), 0);
  assert_int_equal(contrib(a, 1, 0, 2, 2, 0, 1, 0, 0), 0);
  assert_int_equal(contrib(a, 2, 0, 2, 2, 0, 1, 0, 0), 0);
  h = poll1(a, &s, &p, 0);
  assert_int_equal(h.aux, DLCP_AGG_NACK_BUSY);
  assert_int_equal(h.low, 4); /* alone: the whole pool */
  /* a second job finds the pool full: each has half of it */
  assert_int_equal(contrib_of(a, 8, 0, 1), 0);
  h = poll1(a, &s, &p, 1);
  assert_int_equal(h.aux, DLCP_AGG_NACK_BUSY);
  assert_int_equal(h.low, 2);
  assert_int_equal(contrib(a, 2, 0, 2, 2, 0, 1, 0, 2), 0);
  assert_int_equal(poll1(a, &s, &p, 2).low, 2);
  dlcp_agg_del(a);
}

/* A job that holds no aggregators and has sent nothing for idle_ns stops
 * counting in the shares: the others' BUSY names the whole pool again,
 * though its registration lasts the lease.  It counts again as soon as it
 * sends. */
static void test_switch_idle_job_leaves_the_share(void **state) {
  dlcp_agg *a = small_switch(4, DLCP_AGG_SHARED, 1); /* idle 50 us */
  dlcp_agg_send s;
  dlcp_agg_stats st;
  const uint8_t *p;
  dlcp_agg_hdr h;

  (void)state;
  assert_int_equal(contrib(a, 0, 0, 2, 2, 0, 1, 0, 0), 0);
  assert_int_equal(contrib(a, 1, 0, 2, 2, 0, 1, 0, 0), 0);
  assert_int_equal(contrib_of(a, 8, 0, 50), 0);
  assert_int_equal(poll1(a, &s, &p, 50).low, 2); /* two jobs: half each */
  /* job 8 holds nothing; job 7's groups hold their lease till 100 us */
  assert_int_equal(dlcp_agg_next_deadline(a), 50 + 50000);
  dlcp_agg_on_timer(a, 50 + 50000);
  dlcp_agg_get_stats(a, &st);
  assert_int_equal(st.jobs_active, 2);
  assert_int_equal(st.jobs_sharing, 1);
  assert_int_equal(contrib(a, 2, 0, 2, 2, 0, 1, 0, 50100), 0);
  h = poll1(a, &s, &p, 50100);
  assert_int_equal(h.aux, DLCP_AGG_NACK_BUSY);
  assert_int_equal(h.low, 4); /* alone again: the whole pool */
  /* job 7's groups complete, so job 8's lowest group waits for their
   * ACKs (an idle incomplete one would be evicted for it) */
  assert_int_equal(contrib(a, 0, 1, 2, 2, 0, 1, 0, 50150), 0);
  assert_int_equal(contrib(a, 1, 1, 2, 2, 0, 1, 0, 50150), 0);
  while (poll1(a, &s, &p, 50150).type != 0) {
  }
  assert_int_equal(contrib_of(a, 8, 0, 50200), 0);
  assert_int_equal(poll1(a, &s, &p, 50200).low, 2);
  dlcp_agg_get_stats(a, &st);
  assert_int_equal(st.jobs_sharing, 2);
  dlcp_agg_del(a);
}

static void test_switch_static_partitions(void **state) {
  dlcp_agg *a = small_switch(4, DLCP_AGG_STATIC, 2);
  uint8_t b[BUF];
  dlcp_agg_hdr h;
  dlcp_agg_send s;
  const uint8_t *p;

  (void)state;
  /* job 7 owns aggregators 0-1: a second 2-block group does not fit */
  assert_int_equal(contrib(a, 0, 0, 2, 2, 0, 1, 0, 0), 0);
  assert_int_equal(contrib(a, 1, 0, 2, 1, 0, 1, 0, 0), 0);
  assert_int_equal(poll1(a, &s, &p, 0).aux, DLCP_AGG_NACK_BUSY);
  /* a 3-block group would fit the pool of 4 but never the partition of 2 */
  assert_int_equal(contrib(a, 2, 0, 2, 3, 0, 1, 0, 0), 0);
  h = poll1(a, &s, &p, 0);
  assert_int_equal(h.aux, DLCP_AGG_NACK_TOO_BIG);
  assert_int_equal(h.low, 2);
  /* job 8 gets its own partition although job 7 wants more */
  h = hdr(DLCP_AGG_CONTRIB, 0, 0, 1, 2);
  h.job = 8;
  assert_int_equal(dlcp_agg_on_packet(a, b, pkt(b, &h, 4), 0, 50, 1), 0);
  assert_int_equal(poll1(a, &s, &p, 1).type, DLCP_AGG_RESULT);
  /* a third job finds no partition */
  h.job = 9;
  assert_int_equal(dlcp_agg_on_packet(a, b, pkt(b, &h, 4), 0, 51, 2), 0);
  assert_int_equal(poll1(a, &s, &p, 2).aux, DLCP_AGG_NACK_NO_JOB);
  dlcp_agg_del(a);
}

/* ---- a host's RTO ------------------------------------------------------ */

/* Passes the switch's next datagram to |h| at |now|. */
static void result_to(dlcp_agg *a, dlcp_ina *h, dlcp_tstamp now) {
  dlcp_agg_send s;
  uint8_t b[BUF];

  assert_int_equal(dlcp_agg_poll(a, &s, b, sizeof(b), now), 1);
  assert_int_equal(dlcp_ina_on_packet(h, b, s.len, 0, now), 0);
}

/* Polls |h| for its next contribution and hands it to the switch. */
static void contrib_from(dlcp_ina *h, dlcp_agg *a, dlcp_tstamp now) {
  dlcp_ina_action act;
  static uint8_t b[BUF];

  assert_int_equal(dlcp_ina_poll(h, &act, b, sizeof(b), now), 0);
  assert_int_equal(act.type, DLCP_INA_ACT_SEND);
  if (act.len == DLCP_AGG_HDR_LEN) { /* the ACK goes first */
    assert_int_equal(dlcp_agg_on_packet(a, b, act.len, 0, 100, now), 0);
    assert_int_equal(dlcp_ina_poll(h, &act, b, sizeof(b), now), 0);
    assert_int_equal(act.type, DLCP_INA_ACT_SEND);
  }
  assert_int_equal(dlcp_agg_on_packet(a, b, act.len, 0, 100, now), 0);
}

/* Parameters of one INT32 operation of job 7 in groups of one block:
 * |count| elements from |in| into |out|, the rest src/coll/ina's defaults. */
static void int32_params(dlcp_ina_params *p, const int32_t *in, int32_t *out,
                         uint64_t count) {
  dlcp_ina_params_default(p);
  p->job = 7;
  p->token = 0x1234;
  p->dtype = DLCP_INT32;
  p->sendbuf = in;
  p->recvbuf = out;
  p->count = count;
  p->block_elems = ELEMS;
  p->group_blocks = 1;
}

/* A host of INT32 groups of one block with PANAMA's window, starting at 2
 * groups, one per tree of |trees| (0: one window). */
static dlcp_ina *cc_host(const int32_t *in, int32_t *out, uint64_t count,
                         uint32_t trees) {
  dlcp_ina_params p;
  dlcp_ina *h;

  int32_params(&p, in, out, count);
  p.cc = true;
  p.cc_init = 2;
  p.cc_trees = trees;
  assert_int_equal(dlcp_ina_new(&h, &p, NULL, 0), 0);
  return h;
}

/* A group's result that takes 5000 against a configured RTO of 1000 makes
 * the RTO srtt + 4 rttvar = 15000 (RFC 6298's first sample); a timeout
 * doubles it for the re-send, and a group sent twice is no sample (Karn),
 * so it stays doubled. */
static void test_ina_rto_follows_the_switch(void **state) {
  dlcp_agg *a = small_switch(8, DLCP_AGG_SHARED, 1);
  dlcp_ina *h;
  dlcp_ina_params p;
  int32_t in[2 * ELEMS] = {1, 2, 3, 4, 5, 6, 7, 8}, out[2 * ELEMS];

  (void)state;
  int32_params(&p, in, out, 2 * ELEMS);
  p.window = 1;
  p.rto_ns = 1000;
  assert_int_equal(dlcp_ina_new(&h, &p, NULL, 0), 0);
  contrib_from(h, a, 0);
  assert_int_equal(dlcp_ina_next_deadline(h), 1000);
  result_to(a, h, 5000);
  contrib_from(h, a, 5000); /* group 0's ACK, then group 1 */
  assert_int_equal(dlcp_ina_next_deadline(h), 5000 + 15000);
  /* group 1's result is lost; the re-send's answer is no sample */
  uint8_t drop[BUF];
  dlcp_agg_send s;
  assert_int_equal(dlcp_agg_poll(a, &s, drop, sizeof(drop), 5000), 1);
  contrib_from(h, a, 20000);
  assert_int_equal(dlcp_ina_next_deadline(h), 20000 + 2 * 15000);
  result_to(a, h, 30000);
  dlcp_ina_result r;
  dlcp_ina_get_result(h, &r);
  assert_int_equal(r.ina_groups, 2);
  assert_int_equal(r.retransmits, 1);
  assert_memory_equal(in, out, sizeof(in));
  dlcp_ina_del(h);
  dlcp_agg_del(a);
}

/* The window starts at window_bytes' worth of groups (4 here) and then
 * is as many groups as the switch answered per half RTO since the start
 * (between that start and |window|): results 1 us apart make it the
 * whole window of 16, results 200 us apart (2.5 per 0.5 ms) keep it at
 * the start. */
static void test_ina_window_follows_pace(void **state) {
  static const dlcp_duration gaps[] = {1000, 200000};
  static const uint32_t want[] = {16, 4};
  static int32_t in[64 * ELEMS], out[64 * ELEMS];

  (void)state;
  for (size_t k = 0; k < 2; k++) {
    dlcp_agg *a = small_switch(64, DLCP_AGG_SHARED, 1);
    dlcp_ina *h;
    dlcp_ina_params p;
    dlcp_ina_result r;
    dlcp_ina_action act;
    uint8_t b[BUF];

    int32_params(&p, in, out, 64 * ELEMS);
    p.window = 16;
    p.window_bytes = 4u * (DLCP_AGG_HDR_LEN + 4u * ELEMS) + 1u;
    p.rto_ns = 1000000;
    assert_int_equal(dlcp_ina_new(&h, &p, NULL, 0), 0);
    for (uint32_t g = 0; g < 4; g++) {
      contrib_from(h, a, 0);
    }
    assert_int_equal(dlcp_ina_poll(h, &act, b, sizeof(b), 0), 0);
    assert_int_equal(act.type, DLCP_INA_ACT_NONE); /* 4 groups out */
    dlcp_ina_get_result(h, &r);
    assert_int_equal(r.cwnd, 4);
    for (uint32_t i = 1; i <= 12; i++) {
      result_to(a, h, i * gaps[k]);
      contrib_from(h, a, i * gaps[k]);
    }
    dlcp_ina_get_result(h, &r);
    assert_int_equal(r.cwnd, want[k]);
    assert_int_equal(r.retransmits, 0);
    dlcp_ina_del(h);
    dlcp_agg_del(a);
  }
}

/* Polls |h| for its next datagram, which is lost. */
static void send_lost(dlcp_ina *h, dlcp_tstamp now) {
  dlcp_ina_action act;
  static uint8_t b[BUF];

  assert_int_equal(dlcp_ina_poll(h, &act, b, sizeof(b), now), 0);
  assert_int_equal(act.type, DLCP_INA_ACT_SEND);
}

/* A switch that answers nothing: the first timeout doubles the RTO of
 * 1000 and re-sends group 0; group 1, sent with it, times out at 2000
 * without doubling it again; group 0's re-send, unanswered, doubles it to
 * 4000.  Answers to groups sent more than once leave the back-off (Karn),
 * and the first answer to a group sent once ends it, its 500 making the
 * RTO 500 + 4 x 250. */
static void test_ina_rto_backs_off(void **state) {
  dlcp_agg *a = small_switch(8, DLCP_AGG_SHARED, 1);
  dlcp_ina *h;
  dlcp_ina_params p;
  int32_t in[4 * ELEMS] = {1, 2, 3, 4, 5, 6, 7, 8}, out[4 * ELEMS];

  (void)state;
  int32_params(&p, in, out, 4 * ELEMS);
  p.window = 2;
  p.rto_ns = 1000;
  assert_int_equal(dlcp_ina_new(&h, &p, NULL, 0), 0);
  send_lost(h, 0); /* groups 0 and 1 */
  send_lost(h, 0);
  assert_int_equal(dlcp_ina_next_deadline(h), 1000);
  send_lost(h, 1000); /* group 0 again */
  assert_int_equal(dlcp_ina_next_deadline(h), 0 + 2000);
  send_lost(h, 2000); /* group 1 again */
  assert_int_equal(dlcp_ina_next_deadline(h), 1000 + 2000);
  contrib_from(h, a, 3000); /* group 0's third send gets through */
  assert_int_equal(dlcp_ina_next_deadline(h), 2000 + 4000);
  result_to(a, h, 3500);
  assert_int_equal(dlcp_ina_next_deadline(h), 2000 + 4000);
  contrib_from(h, a, 6000); /* group 0's ACK, group 1's third send */
  result_to(a, h, 6500);
  contrib_from(h, a, 6500); /* group 1's ACK, group 2 */
  assert_int_equal(dlcp_ina_next_deadline(h), 6500 + 4000);
  result_to(a, h, 7000);
  contrib_from(h, a, 7000); /* group 2's ACK, group 3 */
  assert_int_equal(dlcp_ina_next_deadline(h), 7000 + 1500);
  result_to(a, h, 7200);
  dlcp_ina_result r;
  dlcp_ina_get_result(h, &r);
  assert_int_equal(r.ina_groups, 4);
  assert_int_equal(r.retransmits, 4);
  assert_memory_equal(in, out, sizeof(in));
  dlcp_ina_del(h);
  dlcp_agg_del(a);
}

/* Polls |h| for an ACK and returns its header. */
static dlcp_agg_hdr ack_from(dlcp_ina *h, uint8_t *b, dlcp_tstamp now) {
  dlcp_ina_action act;
  dlcp_agg_hdr d;
  const uint8_t *payload;

  assert_int_equal(dlcp_ina_poll(h, &act, b, BUF, now), 0);
  assert_int_equal(act.type, DLCP_INA_ACT_SEND);
  assert_int_equal(dlcp_agg_decode(&d, &payload, b, act.len), 0);
  assert_int_equal(d.type, DLCP_AGG_ACK);
  return d;
}

/* The low-water mark every datagram carries acknowledges the results below
 * it.  With room in the pool, results that arrive while a contribution is
 * due take no ACK of their own: the contribution's mark covers them, and
 * the switch frees their groups before it takes the contribution.  Results
 * that no contribution follows (the operation's last) are acknowledged on
 * their own, one ACK for those that arrived together; an ACK lost is made
 * good by the next datagram's mark. */
static void test_acks_ride_the_low_water_mark(void **state) {
  dlcp_agg *a = small_switch(16, DLCP_AGG_SHARED, 1);
  dlcp_ina *h;
  dlcp_ina_params p;
  int32_t in[7 * ELEMS] = {1, 2, 3, 4, 5, 6, 7}, out[7 * ELEMS];
  uint8_t b[BUF];
  dlcp_agg_hdr d;
  dlcp_agg_stats st;
  dlcp_ina_result r;
  dlcp_ina_action act;
  const uint8_t *payload;

  (void)state;
  int32_params(&p, in, out, 7 * ELEMS);
  p.window = 4;
  assert_int_equal(dlcp_ina_new(&h, &p, NULL, 0), 0);
  for (int i = 0; i < 4; i++) {
    contrib_from(h, a, 0); /* groups 0-3, each complete at once */
  }
  for (int i = 0; i < 4; i++) {
    result_to(a, h, 10); /* all four before the host polls */
  }
  /* Group 4 goes at once, its mark 4 acknowledging groups 0-3. */
  assert_int_equal(dlcp_ina_poll(h, &act, b, BUF, 10), 0);
  assert_int_equal(act.type, DLCP_INA_ACT_SEND);
  assert_int_equal(dlcp_agg_decode(&d, &payload, b, act.len), 0);
  assert_int_equal(d.type, DLCP_AGG_CONTRIB);
  assert_int_equal(d.group, 4);
  assert_int_equal(d.low, 4);
  assert_int_equal(dlcp_agg_on_packet(a, b, act.len, 0, 100, 10), 0);
  dlcp_agg_get_stats(a, &st);
  assert_int_equal(st.acks, 0);
  assert_int_equal(st.acks_implied, 4);
  assert_int_equal(st.freed, 4);
  contrib_from(h, a, 20); /* groups 5 and 6: no ACK before either */
  contrib_from(h, a, 20);
  result_to(a, h, 30); /* groups 4 and 5 */
  result_to(a, h, 30);
  d = ack_from(h, b, 30); /* nothing left to send: one ACK, lost */
  assert_int_equal(d.group, 4);
  assert_int_equal(d.low, 6);
  result_to(a, h, 40); /* group 6 */
  d = ack_from(h, b, 40);
  assert_int_equal(d.group, 6);
  assert_int_equal(d.low, 7);
  assert_int_equal(dlcp_agg_on_packet(a, b, DLCP_AGG_HDR_LEN, 0, 100, 40), 0);
  assert_int_equal(dlcp_ina_poll(h, &act, b, BUF, 40), 0);
  assert_int_equal(act.type, DLCP_INA_ACT_DONE);
  dlcp_agg_get_stats(a, &st);
  assert_int_equal(st.acks, 1);
  assert_int_equal(st.acks_implied, 6);
  assert_int_equal(st.freed, 7);
  assert_int_equal(st.aggs_used, 0);
  assert_int_equal(st.resent, 0);
  assert_int_equal(st.stale_acks, 0);
  dlcp_ina_get_result(h, &r);
  assert_int_equal(r.acks_implied, 5);
  assert_memory_equal(in, out, sizeof(in));
  dlcp_ina_del(h);
  dlcp_agg_del(a);
}

/* When the pool is what limits the job (its cap holds no more groups than
 * the rank may have out and the results it holds), the ACK goes before
 * the next contribution, so that every rank's ACK frees the group before
 * any rank's next contribution claims: one ACK, whose mark covers the
 * results that came with it. */
static void test_acks_go_first_when_the_pool_is_full(void **state) {
  dlcp_agg *a = small_switch(8, DLCP_AGG_SHARED, 1);
  dlcp_ina *h;
  dlcp_ina_params p;
  int32_t in[6 * ELEMS] = {1, 2, 3, 4, 5, 6}, out[6 * ELEMS];
  uint8_t b[BUF];
  dlcp_agg_hdr d;
  dlcp_agg_stats st;

  (void)state;
  int32_params(&p, in, out, 6 * ELEMS);
  p.window = 4;
  assert_int_equal(dlcp_ina_new(&h, &p, NULL, 0), 0);
  for (int i = 0; i < 4; i++) {
    contrib_from(h, a, 0);
  }
  for (int i = 0; i < 4; i++) {
    result_to(a, h, 10); /* cap 8 aggregators: 4 out, 4 to acknowledge */
  }
  d = ack_from(h, b, 10);
  assert_int_equal(d.group, 0);
  assert_int_equal(d.low, 4);
  assert_int_equal(dlcp_agg_on_packet(a, b, DLCP_AGG_HDR_LEN, 0, 100, 10), 0);
  dlcp_agg_get_stats(a, &st);
  assert_int_equal(st.acks, 1);
  assert_int_equal(st.acks_implied, 3);
  assert_int_equal(st.freed, 4);
  contrib_from(h, a, 20); /* group 4: the ACKs of 1-3 are not sent */
  contrib_from(h, a, 20);
  result_to(a, h, 30);
  result_to(a, h, 30);
  d = ack_from(h, b, 30);
  assert_int_equal(d.low, 6);
  assert_int_equal(dlcp_agg_on_packet(a, b, DLCP_AGG_HDR_LEN, 0, 100, 30), 0);
  dlcp_agg_get_stats(a, &st);
  assert_int_equal(st.freed, 6);
  assert_int_equal(st.aggs_used, 0);
  assert_memory_equal(in, out, sizeof(in));
  dlcp_ina_del(h);
  dlcp_agg_del(a);
}

/* A switch in a chain holds a group whose sum went up to its parent: a
 * re-sent contribution is answered WAITING, missing no rank here, so the
 * host knows the switch holds it and its RTO, doubled by the timeout of
 * the first send, is back to the configured one. */
static void test_switch_holds_group_sent_up(void **state) {
  dlcp_agg_config c;
  dlcp_agg *a;
  dlcp_ina *h;
  dlcp_ina_params p;
  int32_t in[ELEMS] = {1, 2, 3}, out[ELEMS];
  dlcp_agg_send s;
  uint8_t b[BUF];
  dlcp_ina_result r;

  (void)state;
  dlcp_agg_config_default(&c);
  c.block_elems = ELEMS;
  c.has_parent[0] = true;
  c.parent_addr[0] = 999;
  assert_int_equal(dlcp_agg_new(&a, &c, NULL, 0), 0);
  int32_params(&p, in, out, ELEMS);
  p.rto_ns = 1000;
  p.chain_place = DLCP_AGG_CHAIN_PLACE(0, 2);
  assert_int_equal(dlcp_ina_new(&h, &p, NULL, 0), 0);
  contrib_from(h, a, 0);
  assert_int_equal(dlcp_agg_poll(a, &s, b, sizeof(b), 0), 1);
  assert_int_equal(s.addr, 999); /* the partial sum, up */
  contrib_from(h, a, 1000); /* no final yet: the host re-sends */
  assert_int_equal(dlcp_ina_next_deadline(h), 1000 + 2000);
  result_to(a, h, 1100);
  dlcp_ina_get_result(h, &r);
  assert_int_equal(r.waiting, 1);
  assert_int_equal(r.missing, 0);
  assert_int_equal(dlcp_ina_next_deadline(h), 1100 + 1000);
  dlcp_ina_del(h);
  dlcp_agg_del(a);
}

/* Ranks 0 and 1 of three contribute, rank 2 never does.  Their re-sends
 * are answered WAITING with the bitmap of who contributed, so each knows
 * the group lacks rank 2; the re-sends keep the group's lease, and once
 * rank 2 comes the result clears it. */
static void test_ina_names_missing_rank(void **state) {
  dlcp_agg *a = small_switch(8, DLCP_AGG_SHARED, 1); /* lease 100000 */
  dlcp_ina *h[3];
  dlcp_ina_params p;
  int32_t in[ELEMS] = {1, 2, 3}, out[3][ELEMS];
  dlcp_ina_result r;
  dlcp_agg_stats st;

  (void)state;
  int32_params(&p, in, NULL, ELEMS);
  p.world = 3;
  p.rto_ns = 60000;
  for (uint32_t k = 0; k < 3; k++) {
    p.rank = k;
    p.recvbuf = out[k];
    assert_int_equal(dlcp_ina_new(&h[k], &p, NULL, 0), 0);
  }
  contrib_from(h[0], a, 0);
  contrib_from(h[1], a, 0);
  for (dlcp_tstamp t = 60000; t <= 180000; t += 60000) {
    for (uint32_t k = 0; k < 2; k++) {
      contrib_from(h[k], a, t); /* the re-send */
      result_to(a, h[k], t);    /* WAITING */
      dlcp_ina_get_result(h[k], &r);
      assert_int_equal(r.missing, UINT64_C(1) << 2);
      assert_int_equal(r.waiting_group, 0);
      assert_int_equal(r.busy, 0); /* not counted as progress */
      assert_int_equal(dlcp_ina_next_deadline(h[k]), t + 60000);
    }
    dlcp_agg_on_timer(a, t);
  }
  dlcp_agg_get_stats(a, &st);
  assert_int_equal(st.reclaimed, 0); /* past the first contributions' lease */
  contrib_from(h[2], a, 200000);
  for (uint32_t k = 0; k < 3; k++) {
    result_to(a, h[k], 200000);
    dlcp_ina_get_result(h[k], &r);
    assert_int_equal(r.missing, 0);
    assert_int_equal(r.waiting, k < 2 ? 3 : 0);
    assert_int_equal(out[k][2], 9);
    dlcp_ina_del(h[k]);
  }
  dlcp_agg_del(a);
}

/* With cc, a result counts as marked if its ECN bits say a contribution
 * saw CE, or if it arrived CE itself (its way down): a round of marked
 * results cuts the window.  The switch sends results ECN-capable, with
 * the OR inside. */
static void test_ina_cc_marks_both_ways(void **state) {
  for (int way = 0; way < 2; way++) {
    dlcp_agg *a = small_switch(64, DLCP_AGG_SHARED, 1);
    int32_t in[8 * ELEMS] = {1}, out[8 * ELEMS];
    dlcp_ina *h = cc_host(in, out, 8 * ELEMS, 0);
    dlcp_ina_action act;
    uint8_t b[BUF];
    dlcp_agg_send s;
    dlcp_ina_result r;

    (void)state;
    for (int k = 0; k < 2; k++) {
      assert_int_equal(dlcp_ina_poll(h, &act, b, sizeof(b), 0), 0);
      assert_int_equal(act.type, DLCP_INA_ACT_SEND);
      /* way 0: the contribution arrived CE at the switch */
      assert_int_equal(dlcp_agg_on_packet(a, b, act.len,
                                          way == 0 ? DLCP_AGG_ECN_CE : 0,
                                          100, 0),
                       0);
    }
    for (int k = 0; k < 2; k++) {
      assert_int_equal(dlcp_agg_poll(a, &s, b, sizeof(b), 1), 1);
      assert_int_equal(s.ecn, DLCP_AGG_ECN_ECT0);
      /* way 1: the result arrives CE */
      assert_int_equal(dlcp_ina_on_packet(h, b, s.len,
                                          way == 1 ? DLCP_AGG_ECN_CE
                                                   : DLCP_AGG_ECN_ECT0,
                                          1),
                       0);
    }
    dlcp_ina_get_result(h, &r);
    assert_int_equal(r.ecn_marked, 2);
    assert_int_equal(r.cwnd_cuts, 1); /* one marked round of two */
    assert_int_equal(r.cwnd, 1);      /* (2 + 2/3) * (1 - 1/2), alpha 1 */
    dlcp_ina_del(h);
    dlcp_agg_del(a);
  }
}

/* PANAMA's window (coll/ina_cc.h) on synthetic results: slow start until
 * the first mark, a DCTCP cut once per marked window, the switch's cap,
 * never below one group nor above the maximum. */
static void test_ina_cc_moves(void **state) {
  dlcp_ina_cc cc;

  (void)state;
  dlcp_ina_cc_init(&cc, 10, 64);
  assert_int_equal(dlcp_ina_cc_window(&cc), 10);
  for (int i = 0; i < 10; i++) {
    dlcp_ina_cc_on_result(&cc, false, UINT32_MAX);
  }
  assert_int_equal(dlcp_ina_cc_window(&cc), 20); /* one per result */
  assert_true(cc.alpha == 0.9375);               /* (1 - 1/16) * 1 */
  for (int i = 0; i < 19; i++) {
    dlcp_ina_cc_on_result(&cc, true, UINT32_MAX);
  }
  assert_int_equal(dlcp_ina_cc_window(&cc), 20); /* marks: +1/cwnd each */
  assert_int_equal(cc.cuts, 0);
  dlcp_ina_cc_on_result(&cc, true, UINT32_MAX); /* the round's last */
  assert_true(cc.alpha == 0.94140625);
  assert_int_equal(cc.cuts, 1);
  assert_int_equal(dlcp_ina_cc_window(&cc), 11); /* 20.98 * (1 - alpha/2) */
  dlcp_ina_cc_on_result(&cc, false, 3); /* the switch's cap */
  assert_int_equal(dlcp_ina_cc_window(&cc), 3);
  dlcp_ina_cc_on_result(&cc, false, 0); /* never below one group */
  assert_int_equal(dlcp_ina_cc_window(&cc), 1);
  assert_int_equal(cc.cuts, 1);
  dlcp_ina_cc_init(&cc, 100, 8);
  assert_int_equal(dlcp_ina_cc_window(&cc), 8);
  for (int i = 0; i < 50; i++) {
    dlcp_ina_cc_on_result(&cc, false, UINT32_MAX);
  }
  assert_int_equal(dlcp_ina_cc_window(&cc), 8);
}

/* With cc a host sends only its window's groups before results come, and
 * the window grows with unmarked results. */
static void test_ina_cc_limits_outstanding(void **state) {
  dlcp_agg *a = small_switch(64, DLCP_AGG_SHARED, 1);
  dlcp_ina *h;
  int32_t in[16 * ELEMS], out[16 * ELEMS];
  dlcp_ina_action act;
  uint8_t b[BUF];
  dlcp_ina_result r;

  (void)state;
  for (int i = 0; i < (int)(16 * ELEMS); i++) {
    in[i] = i;
  }
  h = cc_host(in, out, 16 * ELEMS, 0); /* window 64, the default */
  int sent = 0;
  while (dlcp_ina_poll(h, &act, b, sizeof(b), 0) == 0 &&
         act.type == DLCP_INA_ACT_SEND) {
    assert_int_equal(dlcp_agg_on_packet(a, b, act.len, 0, 100, 0), 0);
    sent++;
  }
  assert_int_equal(sent, 2);
  result_to(a, h, 10); /* world 1: each contribution completes its group */
  result_to(a, h, 10);
  dlcp_ina_get_result(h, &r);
  assert_int_equal(r.cwnd, 4);
  assert_int_equal(r.cwnd_cuts, 0);
  dlcp_ina_del(h);
  dlcp_agg_del(a);
}

/* PANAMA per tree (cc_trees, MTINA): groups alternate between two trees,
 * each with its own window; marks on tree 0's results cut tree 0's window
 * alone, and a full window holds its tree's next group back while the
 * other tree's has room. */
static void test_ina_cc_per_tree(void **state) {
  dlcp_agg *a = small_switch(64, DLCP_AGG_SHARED, 1);
  int32_t in[32 * ELEMS] = {1}, out[32 * ELEMS];
  dlcp_ina *h = cc_host(in, out, 32 * ELEMS, 2);
  dlcp_ina_action act;
  uint8_t b[BUF];
  dlcp_agg_send s;
  dlcp_ina_result r;

  (void)state;
  /* two windows of 2: groups 0-3 go, 0 and 2 on tree 0, 1 and 3 on 1 */
  int sent = 0;
  while (dlcp_ina_poll(h, &act, b, sizeof(b), 0) == 0 &&
         act.type == DLCP_INA_ACT_SEND) {
    assert_int_equal(dlcp_agg_on_packet(a, b, act.len, 0, 100, 0), 0);
    sent++;
  }
  assert_int_equal(sent, 4);
  dlcp_ina_get_result(h, &r);
  assert_int_equal(r.cwnd, 4);
  /* results of groups 0-3, tree 0's (even) arriving CE */
  for (uint32_t g = 0; g < 4; g++) {
    assert_int_equal(dlcp_agg_poll(a, &s, b, sizeof(b), 1), 1);
    uint32_t grp = dlcp_get_u32(b + 16);
    assert_int_equal(dlcp_ina_on_packet(h, b, s.len,
                                        grp % 2 == 0 ? DLCP_AGG_ECN_CE
                                                     : DLCP_AGG_ECN_ECT0,
                                        1),
                     0);
  }
  dlcp_ina_get_result(h, &r);
  assert_int_equal(r.cwnd_cuts, 1); /* tree 0's, once in its window */
  /* tree 0: (2 + 1/2 + 1/2.5) * (1 - 1/2), 1 group; tree 1: slow start, 4 */
  assert_int_equal(r.cwnd, 5);
  /* Groups go in order: 4 (tree 0) and 5 (tree 1), then 6 (tree 0)
   * waits for its window while 7 cannot pass it. */
  sent = 0;
  while (dlcp_ina_poll(h, &act, b, sizeof(b), 2) == 0 &&
         act.type == DLCP_INA_ACT_SEND) {
    if (act.len > DLCP_AGG_HDR_LEN) {
      sent++;
    }
  }
  assert_int_equal(sent, 2);
  dlcp_ina_del(h);
  dlcp_agg_del(a);
}

/* ---- whole all-reduces over the in-memory network ---------------------- */

#define MAXW 8

typedef struct job {
  uint32_t id;
  uint64_t token;
  uint32_t world;
  dlcp_ina_mode mode;
  dlcp_ina_claim claim; /* RA-INA's header-only claims */
  dlcp_dtype dtype;
  dlcp_redop op;
  uint64_t count;
  uint32_t group_blocks;
  uint32_t window;
  uint32_t first_group;
  dlcp_tstamp start;
  void *in[MAXW], *out[MAXW];
  int32_t *exps;
  dlcp_ina *h[MAXW];
  int host[MAXW];
} job;

static void job_init(job *j, uint32_t id, uint32_t world, dlcp_ina_mode mode,
                     dlcp_dtype dtype, uint64_t count, uint64_t seed) {
  dlcp_rng rng;
  uint32_t ge;
  uint32_t ng;

  memset(j, 0, sizeof(*j));
  j->id = id;
  j->token = 0xABCDEF0000000000u + id;
  j->world = world;
  j->mode = mode;
  j->dtype = dtype;
  j->op = DLCP_SUM;
  j->count = count;
  j->group_blocks = mode == DLCP_INA_RING_FALLBACK ? world : 4;
  j->window = 16;
  ge = 64u * j->group_blocks;
  ng = dlcp_ina_ngroups(count, 64, j->group_blocks);
  dlcp_rng_seed(&rng, seed);
  j->exps = calloc(ng + 1u, sizeof(int32_t));
  for (uint32_t r = 0; r < world; r++) {
    j->in[r] = malloc(4 * count + 4);
    j->out[r] = malloc(4 * count + 4);
    for (uint64_t i = 0; i < count; i++) {
      if (dtype == DLCP_INT32) {
        ((int32_t *)j->in[r])[i] = (int32_t)(uint32_t)dlcp_rng_next(&rng);
      } else {
        /* magnitudes spanning many binades, and some exact zeros */
        double m = ldexp(dlcp_rng_unit(&rng) * 2 - 1,
                         (int)dlcp_rng_below(&rng, 20) - 10);

        ((float *)j->in[r])[i] = (i % 97 == 0) ? 0.0f : (float)m;
      }
    }
  }
  if (dtype == DLCP_FLOAT32) {
    int32_t *loc = calloc(ng + 1u, sizeof(int32_t));

    for (uint32_t g = 0; g < ng; g++) {
      j->exps[g] = DLCP_INA_EXP_ZERO;
    }
    for (uint32_t r = 0; r < world; r++) {
      assert_int_equal(dlcp_ina_exponents(j->in[r], count, ge, loc), 0);
      for (uint32_t g = 0; g < ng; g++) {
        j->exps[g] = loc[g] > j->exps[g] ? loc[g] : j->exps[g];
      }
    }
    free(loc);
  }
}

/* Rank |r|'s parameters for one switch holding all |j->world| ranks. */
static void rank_params(const job *j, uint32_t r, dlcp_ina_params *pp) {
  dlcp_ina_params p;

  dlcp_ina_params_default(&p);
  p.job = j->id;
  p.token = j->token;
  p.rank = r;
  p.world = j->world;
  p.mode = j->mode;
  p.claim = j->claim;
  p.dtype = j->dtype;
  p.op = j->op;
  p.sendbuf = j->in[r];
  p.recvbuf = j->out[r];
  p.count = j->count;
  p.group_blocks = j->group_blocks;
  p.window = j->window;
  p.first_group = j->first_group;
  p.rto_ns = 50000;
  p.max_retx = 1000;
  p.exps = j->exps;
  *pp = p;
}

static void job_start(job *j, inanet *n) {
  for (uint32_t r = 0; r < j->world; r++) {
    dlcp_ina_params p;

    rank_params(j, r, &p);
    assert_int_equal(dlcp_ina_new(&j->h[r], &p, NULL, 0), 0);
    j->host[r] = inanet_add_host(n, j->h[r], j->id, j->token, j->start);
    assert_true(j->host[r] >= 0);
  }
}

/* Runs the ring part of RA-INA: every rank's ring groups, packed, through
 * the real ring all-reduce state machine on the collective harness.  All
 * ranks must agree on which groups those are. */
static void job_ring_part(job *j) {
  uint64_t n = dlcp_ina_ring_elems(j->h[0]);
  void *buf[MAXW];
  dlcp_coll *op[MAXW];
  collsim_config cfg;
  collsim *cs;

  for (uint32_t r = 1; r < j->world; r++) {
    assert_int_equal(dlcp_ina_ring_elems(j->h[r]), n);
  }
  if (n == 0) {
    return;
  }
  collsim_config_default(&cfg);
  cfg.world = j->world;
  cs = collsim_new(&cfg);
  assert_non_null(cs);
  for (uint32_t r = 0; r < j->world; r++) {
    dlcp_coll_params p;

    buf[r] = malloc(4 * n);
    dlcp_ina_ring_pack(j->h[r], buf[r]);
    dlcp_coll_params_default(&p);
    p.kind = DLCP_COLL_ALLREDUCE;
    p.algo = DLCP_ALGO_RING;
    p.rank = r;
    p.world = j->world;
    p.sendbuf = buf[r];
    p.recvbuf = buf[r];
    p.count = n;
    p.dtype = j->dtype;
    p.op = DLCP_SUM;
    assert_int_equal(dlcp_coll_new(&op[r], &p, NULL, 0), 0);
    collsim_set_op(cs, r, op[r]);
  }
  assert_int_equal(collsim_run(cs), 0);
  for (uint32_t r = 0; r < j->world; r++) {
    dlcp_ina_ring_unpack(j->h[r], buf[r]);
    dlcp_coll_del(op[r]);
    free(buf[r]);
  }
  collsim_del(cs);
}

/* Checks every rank's output against the exact sum: bit-exact for INT32,
 * within the documented bound for FLOAT32 plus the final rounding to
 * float.  The ring groups of RA-INA are float sums in ring order, whose
 * error is bounded by (n - 1) roundings of partial sums of at most the
 * sum of magnitudes: that term covers both. */
static void job_check(const job *j) {
  uint32_t ge = 64u * j->group_blocks;

  for (uint64_t i = 0; i < j->count; i++) {
    double exact = 0, mag = 0;
    uint32_t isum = 0;

    for (uint32_t r = 0; r < j->world; r++) {
      if (j->dtype == DLCP_INT32) {
        isum += (uint32_t)((const int32_t *)j->in[r])[i];
      } else {
        exact += ((const float *)j->in[r])[i];
        mag += fabs(((const float *)j->in[r])[i]);
      }
    }
    for (uint32_t r = 0; r < j->world; r++) {
      if (j->dtype == DLCP_INT32) {
        assert_int_equal(((const int32_t *)j->out[r])[i], (int32_t)isum);
      } else {
        double got = ((const float *)j->out[r])[i];
        double bound = dlcp_ina_error_bound(j->exps[i / ge], j->world) +
                       ldexp(mag, -24) * j->world;

        if (fabs(got - exact) > bound) {
          fail_msg("job %u rank %u elem %llu: %.9g vs exact %.9g (bound %g)",
                   j->id, r, (unsigned long long)i, got, exact, bound);
        }
      }
    }
  }
}

static void job_free(job *j) {
  for (uint32_t r = 0; r < j->world; r++) {
    dlcp_ina_del(j->h[r]);
    free(j->in[r]);
    free(j->out[r]);
  }
  free(j->exps);
}

static dlcp_agg *net_switch(uint64_t mem_bytes, dlcp_agg_policy pol,
                            uint32_t parts) {
  dlcp_agg_config c;
  dlcp_agg *a;

  dlcp_agg_config_default(&c);
  c.mem_bytes = mem_bytes;
  c.policy = pol;
  c.static_parts = parts;
  c.resend_ns = 100000;
  assert_int_equal(dlcp_agg_new(&a, &c, NULL, 0), 0);
  return a;
}

/* One job, |world| ranks, through a network with |cfg|'s faults. */
static void run_one(const inanet_config *cfg, uint32_t world,
                    dlcp_ina_mode mode, dlcp_dtype dtype, uint64_t count,
                    uint64_t mem, dlcp_ina_claim claim) {
  dlcp_agg *sw = net_switch(mem, DLCP_AGG_SHARED, 1);
  inanet *n = inanet_new(cfg, sw);
  job j;
  dlcp_agg_stats st;

  job_init(&j, 1, world, mode, dtype, count, cfg->seed);
  j.claim = claim;
  job_start(&j, n);
  assert_int_equal(inanet_run(n), (int)world);
  for (uint32_t r = 0; r < world; r++) {
    assert_int_equal(inanet_host_status(n, j.host[r]), 0);
  }
  if (mode == DLCP_INA_RING_FALLBACK) {
    job_ring_part(&j);
  }
  job_check(&j);
  /* every aggregator comes back once the stray results are acknowledged */
  (void)inanet_drain(n);
  dlcp_agg_get_stats(sw, &st);
  (void)st;
  job_free(&j);
  inanet_del(n);
  dlcp_agg_del(sw);
}

static void test_ina_clean_worlds(void **state) {
  inanet_config c;

  (void)state;
  inanet_config_default(&c);
  for (uint32_t w = 1; w <= MAXW; w++) {
    c.seed = w;
    run_one(&c, w, DLCP_INA_WAIT, DLCP_FLOAT32, 3000 + w, 1u << 20,
            DLCP_INA_CLAIM_NEVER);
    run_one(&c, w, DLCP_INA_WAIT, DLCP_INT32, 777, 1u << 20,
            DLCP_INA_CLAIM_NEVER);
  }
}

/* A network losing 10 % of each packet type up to |last_type|,
 * duplicating 10 % and reordering (20 us of jitter). */
static void faulty_net(inanet_config *c, uint64_t seed, int last_type) {
  inanet_config_default(c);
  c->seed = seed;
  for (int type = DLCP_AGG_CONTRIB; type <= last_type; type++) {
    c->loss[type] = 0.1;
  }
  c->dup = 0.1;
  c->jitter_ns = 20000;
}

/* Loss of each packet type in turn, then of all with duplication and
 * reordering: still exact. */
static void test_ina_loss_dup_reorder(void **state) {
  inanet_config c;

  (void)state;
  for (int type = 1; type <= 4; type++) {
    inanet_config_default(&c);
    c.seed = 100u + (uint64_t)type;
    c.loss[type] = 0.2;
    /* NACKs only exist when the pool is short: 16 KiB for 4 ranks */
    run_one(&c, 4, type == DLCP_AGG_NACK ? DLCP_INA_RING_FALLBACK
                                         : DLCP_INA_WAIT,
            DLCP_FLOAT32, 20000, type == DLCP_AGG_NACK ? 16384 : 1u << 20,
            DLCP_INA_CLAIM_NEVER);
    run_one(&c, 3, DLCP_INA_WAIT, DLCP_INT32, 5000,
            type == DLCP_AGG_NACK ? 4096 : 1u << 20, DLCP_INA_CLAIM_NEVER);
  }
  faulty_net(&c, 7, DLCP_AGG_NACK);
  run_one(&c, 5, DLCP_INA_WAIT, DLCP_FLOAT32, 30000, 1u << 20,
          DLCP_INA_CLAIM_NEVER);
  run_one(&c, 5, DLCP_INA_RING_FALLBACK, DLCP_FLOAT32, 30000, 20000,
          DLCP_INA_CLAIM_NEVER);
  run_one(&c, 8, DLCP_INA_WAIT, DLCP_INT32, 9000, 8192, DLCP_INA_CLAIM_NEVER);
}

/* RA-INA with header-only claims: exact under the loss of each packet
 * type (CLAIM and GRANT included) on a pool too small for every group,
 * and under loss, duplication and reordering of all; on a clean network
 * the switch sums exactly the contributions of the groups it aggregated,
 * none of a ring group. */
/* RA-INA alone on a pool of 4 groups with a window of 16 (no claims):
 * only the first window goes out before a result names the pool; after
 * that its groups stay within the cap, between half of it and all of it,
 * so the switch reduces most of them: 151 of 200, and 49 by ring (a
 * group sent as soon as a result came finds its aggregators still held
 * until every rank's ACK).  With the window of 16 throughout, 158 went to
 * the ring. */
static void test_ra_ina_window_follows_cap(void **state) {
  dlcp_agg *sw = net_switch(16u * 256u, DLCP_AGG_SHARED, 1);
  inanet_config c;
  inanet *n;
  job j;
  dlcp_ina_result r;

  (void)state;
  inanet_config_default(&c);
  c.seed = 21;
  n = inanet_new(&c, sw);
  /* 4 ranks: 4 blocks of 64 a group, 200 groups */
  job_init(&j, 1, 4, DLCP_INA_RING_FALLBACK, DLCP_INT32, 200u * 256u, 21);
  job_start(&j, n);
  assert_int_equal(inanet_run(n), 4);
  job_ring_part(&j);
  job_check(&j);
  for (uint32_t k = 0; k < 4; k++) {
    dlcp_ina_get_result(j.h[k], &r);
    assert_int_equal(r.status, 0);
    assert_int_equal(r.ngroups, 200);
    assert_true(r.ring_groups < 60);
    assert_int_equal(r.ina_groups + r.ring_groups, 200);
    assert_true(r.cwnd <= 4u); /* the pool's 4 groups */
  }
  job_free(&j);
  inanet_del(n);
  dlcp_agg_del(sw);
}

static void test_ra_ina_claims(void **state) {
  inanet_config c;

  (void)state;
  for (int type = DLCP_AGG_CONTRIB; type <= DLCP_AGG_GRANT; type++) {
    inanet_config_default(&c);
    c.seed = 300u + (uint64_t)type;
    c.loss[type] = 0.2;
    run_one(&c, 4, DLCP_INA_RING_FALLBACK, DLCP_FLOAT32, 20000, 16384,
            DLCP_INA_CLAIM_ALWAYS);
  }
  faulty_net(&c, 9, DLCP_AGG_GRANT);
  run_one(&c, 5, DLCP_INA_RING_FALLBACK, DLCP_FLOAT32, 30000, 20000,
          DLCP_INA_CLAIM_ALWAYS);
  run_one(&c, 3, DLCP_INA_RING_FALLBACK, DLCP_INT32, 9000, 1u << 20,
          DLCP_INA_CLAIM_AUTO);

  /* clean: no upload of a ring group */
  dlcp_agg *sw = net_switch(16384, DLCP_AGG_SHARED, 1);
  inanet_config_default(&c);
  c.seed = 11;
  inanet *n = inanet_new(&c, sw);
  job j;
  dlcp_ina_result r;
  dlcp_agg_stats st;
  job_init(&j, 1, 4, DLCP_INA_RING_FALLBACK, DLCP_INT32, 40000, 11);
  j.claim = DLCP_INA_CLAIM_ALWAYS;
  job_start(&j, n);
  assert_int_equal(inanet_run(n), 4);
  job_ring_part(&j);
  job_check(&j);
  dlcp_ina_get_result(j.h[0], &r);
  dlcp_agg_get_stats(sw, &st);
  assert_true(r.ring_groups > 0 && r.ina_groups > 0);
  assert_int_equal(st.contrib, 4u * r.ina_groups);
  assert_int_equal(r.sent, r.ina_groups); /* one CONTRIB per INA group */
  assert_int_equal(r.claims_sent, r.ngroups);
  job_free(&j);
  inanet_del(n);
  dlcp_agg_del(sw);
  /* a claim needs RA-INA */
  dlcp_ina_params p;
  dlcp_ina *h;
  int32_t x[64];
  dlcp_ina_params_default(&p);
  p.dtype = DLCP_INT32;
  p.recvbuf = x;
  p.count = 64;
  p.claim = DLCP_INA_CLAIM_ALWAYS;
  assert_int_equal(dlcp_ina_new(&h, &p, NULL, 0), DLCP_ERR_INVALID_ARGUMENT);
}

/* Drops exactly the first result to rank 1 and the first ACK of every
 * group of rank 0: the duplicate-contribution and resend paths must both
 * recover. */
static bool drop_chosen(void *user, int from, int to, uint8_t type,
                        uint32_t group, uint64_t index) {
  uint64_t *seen = user;

  (void)index;
  if (type == DLCP_AGG_RESULT && to == 1 && (seen[0] & (1u << (group % 32)))
      == 0) {
    seen[0] |= 1u << (group % 32);
    return false;
  }
  if (type == DLCP_AGG_ACK && from == 0 && (seen[1] & (1u << (group % 32)))
      == 0) {
    seen[1] |= 1u << (group % 32);
    return false;
  }
  return true;
}

static void test_ina_chosen_losses(void **state) {
  inanet_config c;
  dlcp_agg *sw = net_switch(1u << 20, DLCP_AGG_SHARED, 1);
  inanet *n;
  job j;
  uint64_t seen[2] = {0, 0};
  dlcp_agg_stats st;

  (void)state;
  inanet_config_default(&c);
  n = inanet_new(&c, sw);
  inanet_set_filter(n, drop_chosen, seen);
  job_init(&j, 3, 3, DLCP_INA_WAIT, DLCP_INT32, 64 * 4 * 20, 3);
  job_start(&j, n);
  assert_int_equal(inanet_run(n), 3);
  job_check(&j);
  (void)inanet_drain(n); /* resends after the end, answered by stray ACKs */
  dlcp_agg_get_stats(sw, &st);
  assert_int_equal(st.aggs_used, 0);
  assert_true(st.resent >= 20);
  assert_int_equal(st.freed, 20);
  job_free(&j);
  inanet_del(n);
  dlcp_agg_del(sw);
}

/* ---- CINA: a chain of switches ------------------------------------------ */

#define CHAIN_MAX 4

/* Runs |j| (its ranks split |per[0]|, |per[1]|, ... over a chain of
 * |nsw| switches, the last the root) through a network with |cfg|'s
 * faults and checks the result, every aggregator back, and that every
 * switch but the root forwarded each group it completed. */
static void run_chain(const inanet_config *cfg, job *j, const uint32_t *per,
                      uint32_t nsw) {
  dlcp_agg *sw[CHAIN_MAX];
  inanet *n = NULL;
  uint32_t r = 0;
  uint32_t ng = dlcp_ina_ngroups(j->count, 64, j->group_blocks);

  for (uint32_t s = 0; s < nsw; s++) {
    dlcp_agg_config c;

    dlcp_agg_config_default(&c);
    c.resend_ns = 100000;
    c.has_parent[0] = s + 1 < nsw;
    c.parent_addr[0] = INANET_SWITCH_COOKIE + s + 1;
    assert_int_equal(dlcp_agg_new(&sw[s], &c, NULL, 0), 0);
    if (s == 0) {
      n = inanet_new(cfg, sw[0]);
    } else {
      assert_int_equal(inanet_add_switch(n, sw[s]), (int)s);
    }
  }
  for (uint32_t s = 0; s < nsw; s++) {
    /* a switch's workers: its masters, then its child switch */
    uint32_t world = per[s] + (s > 0);
    for (uint32_t m = 0; m < per[s]; m++, r++) {
      dlcp_ina_params p;

      rank_params(j, r, &p);
      p.rank = m;
      p.world = world;
      p.scale_world = j->world;
      p.chain_place = s + 1 < nsw ? DLCP_AGG_CHAIN_PLACE(per[s + 1],
                                                          per[s + 1] + 1)
                                  : 0;
      assert_int_equal(dlcp_ina_new(&j->h[r], &p, NULL, 0), 0);
      j->host[r] = inanet_add_host_at(n, j->h[r], j->id, j->token, 0,
                                      (int)s);
      assert_true(j->host[r] >= 0);
    }
  }
  assert_int_equal(r, j->world);
  assert_int_equal(inanet_run(n), (int)j->world);
  for (r = 0; r < j->world; r++) {
    assert_int_equal(inanet_host_status(n, j->host[r]), 0);
  }
  job_check(j);
  (void)inanet_drain(n);
  for (uint32_t s = 0; s < nsw; s++) {
    dlcp_agg_stats st;

    dlcp_agg_get_stats(sw[s], &st);
    assert_int_equal(st.aggs_used, 0);
    assert_int_equal(st.malformed, 0); /* the parent's NACKs included */
    assert_true(st.freed + st.reclaimed + st.abandoned >= ng);
    if (s + 1 < nsw) {
      assert_true(st.forwards >= ng);
      assert_true(st.finals >= ng);
      assert_true(st.acks_up >= ng);
    } else {
      assert_int_equal(st.forwards, 0);
    }
    dlcp_agg_del(sw[s]);
  }
  inanet_del(n);
}

/* CINA's chain, ToR0 -> ToR1 -> ToR2: every rank gets the sum over all
 * racks, exactly, on a clean network and under the loss of each packet
 * type in turn (contributions and ACKs going up, finals coming down), and
 * of all of them with duplication and reordering. */
static void test_cina_chain(void **state) {
  static const uint32_t per3[] = {2, 3, 1}, per2[] = {4, 4};
  inanet_config c;
  job j;

  (void)state;
  inanet_config_default(&c);
  job_init(&j, 5, 6, DLCP_INA_WAIT, DLCP_INT32, 64 * 4 * 30 + 17, 5);
  run_chain(&c, &j, per3, 3);
  job_free(&j);
  job_init(&j, 6, 8, DLCP_INA_WAIT, DLCP_FLOAT32, 20000, 6);
  run_chain(&c, &j, per2, 2);
  job_free(&j);
  for (int type = DLCP_AGG_CONTRIB; type <= DLCP_AGG_ACK; type++) {
    inanet_config_default(&c);
    c.seed = 500u + (uint64_t)type;
    c.loss[type] = 0.2;
    job_init(&j, 7, 6, DLCP_INA_WAIT, DLCP_FLOAT32, 9000, c.seed);
    run_chain(&c, &j, per3, 3);
    job_free(&j);
  }
  faulty_net(&c, 13, DLCP_AGG_NACK);
  job_init(&j, 8, 6, DLCP_INA_WAIT, DLCP_INT32, 12000, 13);
  run_chain(&c, &j, per3, 3);
  job_free(&j);
}

/* Runs |j| (its ranks split |per[0]| and |per[1]| under two leaf switches)
 * through two trees, as MTINA's per spine: each leaf has a parent per
 * tree, a root with no host below it (HINA's upper tiers), and its place
 * at both is configured, since no host could name it.  Even groups are
 * summed at root 0, odd ones at root 1; |clean|: every count exact. */
static void run_trees(const inanet_config *cfg, job *j, const uint32_t *per,
                      bool clean) {
  enum { LEAVES = 2, TREES = 2 };
  dlcp_agg *sw[LEAVES + TREES];
  inanet *n = NULL;
  uint32_t r = 0;
  uint32_t ng = dlcp_ina_ngroups(j->count, 64, j->group_blocks);

  for (uint32_t s = 0; s < LEAVES + TREES; s++) {
    dlcp_agg_config c;

    dlcp_agg_config_default(&c);
    c.resend_ns = 100000;
    c.ntrees = TREES;
    for (uint32_t t = 0; s < LEAVES && t < TREES; t++) {
      c.has_parent[t] = true;
      c.parent_addr[t] = INANET_SWITCH_COOKIE + LEAVES + t;
      c.parent_place[t] = DLCP_AGG_CHAIN_PLACE(s, LEAVES);
    }
    assert_int_equal(dlcp_agg_new(&sw[s], &c, NULL, 0), 0);
    if (s == 0) {
      n = inanet_new(cfg, sw[0]);
    } else {
      assert_int_equal(inanet_add_switch(n, sw[s]), (int)s);
    }
  }
  for (uint32_t s = 0; s < LEAVES; s++) {
    for (uint32_t m = 0; m < per[s]; m++, r++) {
      dlcp_ina_params p;

      rank_params(j, r, &p);
      p.rank = m;
      p.world = per[s];
      p.scale_world = j->world;
      assert_int_equal(dlcp_ina_new(&j->h[r], &p, NULL, 0), 0);
      j->host[r] = inanet_add_host_at(n, j->h[r], j->id, j->token, 0,
                                      (int)s);
      assert_true(j->host[r] >= 0);
    }
  }
  assert_int_equal(r, j->world);
  assert_int_equal(inanet_run(n), (int)j->world);
  for (r = 0; r < j->world; r++) {
    assert_int_equal(inanet_host_status(n, j->host[r]), 0);
  }
  job_check(j);
  (void)inanet_drain(n);
  for (uint32_t s = 0; s < LEAVES + TREES; s++) {
    dlcp_agg_stats st;
    /* a root sums the groups of its tree: even ones at root 0 */
    uint32_t mine = s < LEAVES ? ng : (ng + 1u - (s - LEAVES)) / 2u;

    dlcp_agg_get_stats(sw[s], &st);
    assert_int_equal(st.aggs_used, 0);
    assert_int_equal(st.malformed, 0);
    assert_true(st.freed + st.reclaimed + st.abandoned >= mine);
    assert_true(st.claims >= mine);
    if (s < LEAVES) {
      assert_true(st.forwards >= ng);
      assert_true(st.finals >= ng);
      assert_true(st.acks_up >= ng);
    } else {
      assert_int_equal(st.forwards, 0);
      assert_int_equal(st.contrib, clean ? 2u * mine : st.contrib);
    }
    if (clean) {
      assert_int_equal(st.claims, mine);
      assert_int_equal(st.freed, mine);
      assert_int_equal(st.forwards, s < LEAVES ? ng : 0);
      assert_int_equal(st.finals, s < LEAVES ? ng : 0);
      assert_int_equal(st.resent + st.forward_resends, 0);
    }
    dlcp_agg_del(sw[s]);
  }
  inanet_del(n);
}

/* MTINA's trees and HINA's hostless switches in the core: exact on a
 * clean network (each root summing its half of the groups), under 20 %
 * loss of each packet type in turn, and under loss, duplication and
 * reordering of all. */
static void test_trees(void **state) {
  static const uint32_t per[] = {3, 2};
  inanet_config c;
  job j;

  (void)state;
  inanet_config_default(&c);
  job_init(&j, 5, 5, DLCP_INA_WAIT, DLCP_INT32, 64 * 4 * 31 + 5, 21);
  run_trees(&c, &j, per, true);
  job_free(&j);
  for (int type = DLCP_AGG_CONTRIB; type <= DLCP_AGG_ACK; type++) {
    inanet_config_default(&c);
    c.seed = 600u + (uint64_t)type;
    c.loss[type] = 0.2;
    job_init(&j, 6, 5, DLCP_INA_WAIT, DLCP_FLOAT32, 9000, c.seed);
    run_trees(&c, &j, per, false);
    job_free(&j);
  }
  faulty_net(&c, 17, DLCP_AGG_NACK);
  job_init(&j, 7, 5, DLCP_INA_WAIT, DLCP_INT32, 12000, 17);
  run_trees(&c, &j, per, false);
  job_free(&j);
}

/* A configured place needs a parent in its tree, a tree the switch has,
 * and a rank inside its world; the jobs may name only that place. */
static void test_tree_config(void **state) {
  dlcp_agg_config c;
  dlcp_agg *a;
  dlcp_agg_hdr h;
  dlcp_agg_send s;
  const uint8_t *pl;
  static uint8_t b[BUF];

  (void)state;
  dlcp_agg_config_default(&c);
  c.block_elems = ELEMS;
  c.ntrees = 0;
  assert_int_equal(dlcp_agg_new(&a, &c, NULL, 0), DLCP_ERR_CONFIG);
  c.ntrees = DLCP_AGG_MAX_TREES + 1;
  assert_int_equal(dlcp_agg_new(&a, &c, NULL, 0), DLCP_ERR_CONFIG);
  c.ntrees = 2;
  c.parent_place[1] = DLCP_AGG_CHAIN_PLACE(0, 2); /* no parent there */
  assert_int_equal(dlcp_agg_new(&a, &c, NULL, 0), DLCP_ERR_CONFIG);
  c.has_parent[1] = true;
  c.parent_addr[1] = 98;
  c.parent_place[1] = DLCP_AGG_CHAIN_PLACE(2, 2); /* rank outside */
  assert_int_equal(dlcp_agg_new(&a, &c, NULL, 0), DLCP_ERR_CONFIG);
  c.parent_place[1] = DLCP_AGG_CHAIN_PLACE(0, DLCP_AGG_MAX_WORLD + 1);
  assert_int_equal(dlcp_agg_new(&a, &c, NULL, 0), DLCP_ERR_CONFIG);
  c.has_parent[2] = true;
  c.parent_place[2] = DLCP_AGG_CHAIN_PLACE(0, 2); /* tree 2 of 2 */
  c.parent_place[1] = DLCP_AGG_CHAIN_PLACE(1, 2);
  assert_int_equal(dlcp_agg_new(&a, &c, NULL, 0), DLCP_ERR_CONFIG);
  c.has_parent[2] = false;
  c.parent_place[2] = 0;
  assert_int_equal(dlcp_agg_new(&a, &c, NULL, 0), 0);
  /* group 0 is in tree 0, the root's: answered here */
  h = hdr(DLCP_AGG_CONTRIB, 0, 0, 1, 1);
  assert_int_equal(dlcp_agg_on_packet(a, b, pkt(b, &h, 4), 0, 7, 0), 0);
  h = poll1(a, &s, &pl, 0);
  assert_int_equal(h.type, DLCP_AGG_RESULT);
  assert_int_equal(s.addr, 7);
  /* group 1 is in tree 1: up to 98 as rank 1 of 2, the configured place;
   * a job naming another place there is refused */
  h = hdr(DLCP_AGG_CONTRIB, 1, 0, 1, 1);
  h.aux = DLCP_AGG_CHAIN_PLACE(0, 2);
  assert_int_equal(dlcp_agg_on_packet(a, b, pkt(b, &h, 4), 0, 7, 0), 0);
  assert_int_equal(poll1(a, &s, &pl, 0).aux, DLCP_AGG_NACK_CONFIG);
  h.aux = 0;
  assert_int_equal(dlcp_agg_on_packet(a, b, pkt(b, &h, 4), 0, 7, 0), 0);
  h = poll1(a, &s, &pl, 0);
  assert_int_equal(h.type, DLCP_AGG_CONTRIB);
  assert_int_equal(s.addr, 98);
  assert_int_equal(h.rank, 1);
  assert_int_equal(h.world, 2);
  /* a final for group 1 from tree 0's parent (none) or from a host is no
   * final; from 98 it is */
  h.type = DLCP_AGG_RESULT;
  assert_int_equal(dlcp_agg_on_packet(a, b, pkt(b, &h, 9), 0, 7, 0),
                   DLCP_ERR_BAD_TYPE);
  assert_int_equal(dlcp_agg_on_packet(a, b, pkt(b, &h, 9), 0, 98, 0), 0);
  h = poll1(a, &s, &pl, 0);
  assert_int_equal(h.type, DLCP_AGG_RESULT);
  assert_int_equal(s.addr, 7);
  assert_int_equal((int32_t)dlcp_get_u32(pl), 9);
  assert_int_equal(poll1(a, &s, &pl, 0).type, DLCP_AGG_ACK);
  assert_int_equal(s.addr, 98);
  dlcp_agg_del(a);
}

/* A chain place is only for a switch with a parent, and one job has one
 * place: anything else is refused with NACK CONFIG, and a RESULT from
 * anyone but the parent is no final. */
static void test_cina_refusals(void **state) {
  dlcp_agg *root = small_switch(64, DLCP_AGG_SHARED, 1);
  dlcp_agg *leaf;
  dlcp_agg_config c;
  dlcp_agg_hdr h;
  dlcp_agg_send s;
  const uint8_t *pl;
  static uint8_t b[BUF];

  (void)state;
  h = hdr(DLCP_AGG_CONTRIB, 0, 0, 2, 1);
  h.aux = DLCP_AGG_CHAIN_PLACE(1, 2);
  assert_int_equal(dlcp_agg_on_packet(root, b, pkt(b, &h, 1), 0, 7, 0), 0);
  h = poll1(root, &s, &pl, 0);
  assert_int_equal(h.type, DLCP_AGG_NACK);
  assert_int_equal(h.aux, DLCP_AGG_NACK_CONFIG);
  dlcp_agg_del(root);

  dlcp_agg_config_default(&c);
  c.block_elems = ELEMS;
  c.has_parent[0] = true;
  c.parent_addr[0] = 99;
  assert_int_equal(dlcp_agg_new(&leaf, &c, NULL, 0), 0);
  h = hdr(DLCP_AGG_CONTRIB, 0, 0, 2, 1);
  h.aux = DLCP_AGG_CHAIN_PLACE(1, 2);
  assert_int_equal(dlcp_agg_on_packet(leaf, b, pkt(b, &h, 1), 0, 7, 0), 0);
  h = hdr(DLCP_AGG_CONTRIB, 0, 1, 2, 1);
  h.aux = DLCP_AGG_CHAIN_PLACE(0, 3); /* another place for the same job */
  assert_int_equal(dlcp_agg_on_packet(leaf, b, pkt(b, &h, 2), 0, 8, 0), 0);
  h = poll1(leaf, &s, &pl, 0);
  assert_int_equal(h.type, DLCP_AGG_NACK);
  assert_int_equal(h.aux, DLCP_AGG_NACK_CONFIG);
  h = hdr(DLCP_AGG_CONTRIB, 0, 1, 2, 1);
  h.aux = DLCP_AGG_CHAIN_PLACE(1, 2);
  assert_int_equal(dlcp_agg_on_packet(leaf, b, pkt(b, &h, 2), 0, 8, 0), 0);
  /* complete here: the partial sum (1 + 2) goes up as rank 1 of 2 */
  h = poll1(leaf, &s, &pl, 0);
  assert_int_equal(h.type, DLCP_AGG_CONTRIB);
  assert_int_equal(s.addr, 99);
  assert_int_equal(h.rank, 1);
  assert_int_equal(h.world, 2);
  assert_int_equal(h.aux, 0);
  assert_int_equal((int32_t)dlcp_get_u32(pl), 3);
  /* the parent's NACK (its group waits, or it is busy) is counted and
   * answered by nothing; from anyone else it is refused */
  dlcp_agg_hdr nack = hdr(DLCP_AGG_NACK, 0, 1, 2, 1);
  nack.aux = DLCP_AGG_NACK_BUSY;
  assert_int_equal(dlcp_agg_on_packet(leaf, b, pkt(b, &nack, 0), 0, 99, 0),
                   0);
  assert_int_equal(dlcp_agg_on_packet(leaf, b, pkt(b, &nack, 0), 0, 7, 0),
                   DLCP_ERR_BAD_TYPE);
  dlcp_agg_stats st;
  dlcp_agg_get_stats(leaf, &st);
  assert_int_equal(st.parent_nacks, 1);
  assert_int_equal(poll1(leaf, &s, &pl, 0).type, 0);
  /* a RESULT from a master is refused; the parent's is the final, and
   * the parent's cap of 3 aggregators, below this switch's own, is what
   * the results carry */
  h.type = DLCP_AGG_RESULT;
  h.low = 0;
  h.aux = 3;
  assert_int_equal(dlcp_agg_on_packet(leaf, b, pkt(b, &h, 10), 0, 7, 0),
                   DLCP_ERR_BAD_TYPE);
  assert_int_equal(dlcp_agg_on_packet(leaf, b, pkt(b, &h, 10), 0, 99, 0), 0);
  for (int k = 0; k < 2; k++) {
    dlcp_agg_hdr r = poll1(leaf, &s, &pl, 0);
    assert_int_equal(r.type, DLCP_AGG_RESULT);
    assert_int_equal(r.world, 2);
    assert_int_equal(r.aux, 3);
    assert_int_equal((int32_t)dlcp_get_u32(pl), 10);
  }
  assert_int_equal(dlcp_agg_cap(leaf, 7), 3);
  assert_int_equal(dlcp_agg_cap(leaf, 8), UINT16_MAX); /* no such job */
  dlcp_agg_hdr a = poll1(leaf, &s, &pl, 0);
  assert_int_equal(a.type, DLCP_AGG_ACK);
  assert_int_equal(s.addr, 99);
  assert_int_equal(a.rank, 1);
  dlcp_agg_del(leaf);
}

/* ECN: marks on contributions come back OR-ed in the results. */
static void test_ina_ecn(void **state) {
  inanet_config c;
  dlcp_agg *sw = net_switch(1u << 20, DLCP_AGG_SHARED, 1);
  inanet *n;
  job j;
  dlcp_ina_result r0, r1;

  (void)state;
  inanet_config_default(&c);
  c.ce = 0.05;
  n = inanet_new(&c, sw);
  job_init(&j, 4, 4, DLCP_INA_WAIT, DLCP_INT32, 64 * 4 * 100, 4);
  job_start(&j, n);
  assert_int_equal(inanet_run(n), 4);
  job_check(&j);
  dlcp_ina_get_result(j.h[0], &r0);
  dlcp_ina_get_result(j.h[1], &r1);
  /* P(a group of 4 contributions has a mark) = 1 - 0.95^4 = 0.185 */
  assert_true(r0.ecn_marked > 5 && r0.ecn_marked < 40);
  assert_int_equal(r0.ecn_marked, r1.ecn_marked); /* the same groups */
  job_free(&j);
  inanet_del(n);
  dlcp_agg_del(sw);
}

/* Several jobs on a pool smaller than their demand: all exact, all
 * finish; RA-INA never waits, plain INA waits its turn, static partitions
 * isolate. */
static void run_jobs(uint32_t njobs, dlcp_ina_mode mode, dlcp_agg_policy pol,
                     uint64_t seed, uint32_t *ring_groups,
                     dlcp_ina_claim claim) {
  inanet_config c;
  /* 24 aggregators of 64: one 4-rank group needs 4, each job keeps up to
   * 16 groups (64 aggregators) in flight */
  dlcp_agg *sw = net_switch(24u * 256u, pol, njobs);
  inanet *n;
  job j[3];
  dlcp_agg_stats st;

  inanet_config_default(&c);
  c.seed = seed;
  c.loss[DLCP_AGG_CONTRIB] = 0.02;
  c.loss[DLCP_AGG_RESULT] = 0.02;
  c.jitter_ns = 3000;
  n = inanet_new(&c, sw);
  for (uint32_t k = 0; k < njobs; k++) {
    job_init(&j[k], 10 + k, 4, mode, DLCP_FLOAT32, 40000 + 1000 * k,
             seed + k);
    j[k].start = 5000 * k;
    j[k].claim = claim;
    job_start(&j[k], n);
  }
  assert_int_equal(inanet_run(n), (int)(4 * njobs));
  for (uint32_t k = 0; k < njobs; k++) {
    dlcp_ina_result r;

    for (uint32_t q = 0; q < 4; q++) {
      assert_int_equal(inanet_host_status(n, j[k].host[q]), 0);
    }
    if (mode == DLCP_INA_RING_FALLBACK) {
      job_ring_part(&j[k]);
    }
    job_check(&j[k]);
    dlcp_ina_get_result(j[k].h[0], &r);
    ring_groups[k] = r.ring_groups;
    assert_int_equal(r.ina_groups + r.ring_groups, r.ngroups);
  }
  (void)inanet_drain(n);
  dlcp_agg_get_stats(sw, &st);
  assert_int_equal(st.aggs_used, 0);
  for (uint32_t k = 0; k < njobs; k++) {
    job_free(&j[k]);
  }
  inanet_del(n);
  dlcp_agg_del(sw);
}

static void test_jobs_share_small_pool(void **state) {
  uint32_t ring[3];

  (void)state;
  for (uint32_t njobs = 2; njobs <= 3; njobs++) {
    run_jobs(njobs, DLCP_INA_RING_FALLBACK, DLCP_AGG_SHARED, 40 + njobs, ring,
             DLCP_INA_CLAIM_NEVER);
    for (uint32_t k = 0; k < njobs; k++) {
      assert_true(ring[k] > 0); /* the pool was too small for everyone */
    }
    run_jobs(njobs, DLCP_INA_WAIT, DLCP_AGG_SHARED, 50 + njobs, ring,
             DLCP_INA_CLAIM_NEVER);
    run_jobs(njobs, DLCP_INA_WAIT, DLCP_AGG_STATIC, 60 + njobs, ring,
             DLCP_INA_CLAIM_NEVER);
    run_jobs(njobs, DLCP_INA_RING_FALLBACK, DLCP_AGG_STATIC, 70 + njobs, ring,
             DLCP_INA_CLAIM_NEVER);
    run_jobs(njobs, DLCP_INA_RING_FALLBACK, DLCP_AGG_SHARED, 80 + njobs, ring,
             DLCP_INA_CLAIM_ALWAYS);
    for (uint32_t k = 0; k < njobs; k++) {
      assert_true(ring[k] > 0);
    }
  }
}

/* Plain INA on a static partition smaller than its window: the hosts
 * learn the partition from the first BUSY, send back the groups beyond it
 * and keep their window inside it, between half of it and all of it, so
 * that no group waits for its RTO: 200 groups in 0.74 ms, where retrying
 * them at the RTO with a window of half the partition took 1.08 ms (418
 * BUSY answers per rank and 2.79 ms with no window at all). */
static void test_ina_window_fits_partition(void **state) {
  dlcp_agg *sw = net_switch(32u * 256u, DLCP_AGG_STATIC, 2);
  inanet_config c;
  inanet *n;
  job j;

  (void)state;
  inanet_config_default(&c);
  c.seed = 11;
  c.jitter_ns = 3000;
  n = inanet_new(&c, sw);
  job_init(&j, 1, 4, DLCP_INA_WAIT, DLCP_FLOAT32, 64u * 4u * 200u, 11);
  job_start(&j, n);
  assert_int_equal(inanet_run(n), 4);
  job_check(&j);
  for (uint32_t r = 0; r < 4; r++) {
    dlcp_ina_result res;

    assert_int_equal(inanet_host_status(n, j.host[r]), 0);
    dlcp_ina_get_result(j.h[r], &res);
    /* 16 aggregators, 4-block groups: a window of 2 to 4 */
    assert_true(res.cwnd >= 2 && res.cwnd <= 4);
    assert_int_equal(res.retransmits, 0);
    assert_true(res.busy <= 4 * j.window);
    assert_true(inanet_host_end(n, j.host[r]) < 800000);
  }
  job_free(&j);
  inanet_del(n);
  dlcp_agg_del(sw);
}

/* A group of more blocks than the switch has aggregators (or than the
 * job's static partition holds) can never be aggregated.  Plain INA fails
 * at the first answer, one round trip in, naming the pool, instead of
 * retrying until its timeout; RA-INA runs every such group by ring. */
static void test_group_bigger_than_pool(void **state) {
  static const struct {
    uint64_t mem;
    dlcp_agg_policy pol;
    uint32_t parts;
  } pools[] = {{3 * 256, DLCP_AGG_SHARED, 1}, {6 * 256, DLCP_AGG_STATIC, 2}};
  inanet_config c;

  (void)state;
  inanet_config_default(&c);
  for (size_t k = 0; k < sizeof(pools) / sizeof(pools[0]); k++) {
    dlcp_agg *sw = net_switch(pools[k].mem, pools[k].pol, pools[k].parts);
    inanet *n = inanet_new(&c, sw);
    dlcp_agg_stats st;
    job j;

    job_init(&j, 1, 3, DLCP_INA_WAIT, DLCP_FLOAT32, 64 * 4 * 10, 5);
    job_start(&j, n); /* 4 blocks a group, 10 groups, all sent at once */
    assert_int_equal(inanet_run(n), 3);
    for (uint32_t r = 0; r < 3; r++) {
      dlcp_ina_result res;

      dlcp_ina_get_result(j.h[r], &res);
      assert_int_equal(inanet_host_status(n, j.host[r]), DLCP_ERR_CONFIG);
      assert_int_equal(res.status, DLCP_ERR_CONFIG);
      assert_int_equal(res.switch_pool, 3);
      assert_int_equal(res.retransmits, 0);
      assert_int_equal(res.ina_groups, 0);
      /* the first contribution's answer: two 2 us hops */
      assert_int_equal(inanet_host_end(n, j.host[r]), 4000);
    }
    dlcp_agg_get_stats(sw, &st);
    assert_int_equal(st.claims, 0);
    assert_int_equal(st.too_big, st.claim_failures);
    assert_true(st.too_big >= 3);
    job_free(&j);
    inanet_del(n);
    dlcp_agg_del(sw);
  }
  {
    dlcp_agg *sw = net_switch(3 * 256, DLCP_AGG_SHARED, 1);
    inanet *n = inanet_new(&c, sw);
    job j;

    job_init(&j, 1, 4, DLCP_INA_RING_FALLBACK, DLCP_FLOAT32, 64 * 4 * 10 + 3,
             6);
    job_start(&j, n);
    assert_int_equal(inanet_run(n), 4);
    for (uint32_t r = 0; r < 4; r++) {
      dlcp_ina_result res;

      dlcp_ina_get_result(j.h[r], &res);
      assert_int_equal(res.status, 0);
      assert_int_equal(res.ring_groups, 11);
      assert_int_equal(res.switch_pool, 0);
    }
    job_ring_part(&j);
    job_check(&j);
    job_free(&j);
    inanet_del(n);
    dlcp_agg_del(sw);
  }
}

/* A forged contribution of job 1 (right id, wrong token) injected in the
 * middle of the run: rejected, counted, and the sums stay exact. */
static void test_forged_packet_rejected(void **state) {
  inanet_config c;
  dlcp_agg *sw = net_switch(1u << 20, DLCP_AGG_SHARED, 1);
  inanet *n;
  job j;
  uint8_t b[BUF];
  dlcp_agg_hdr h;
  dlcp_agg_stats st;

  (void)state;
  inanet_config_default(&c);
  n = inanet_new(&c, sw);
  job_init(&j, 1, 2, DLCP_INA_WAIT, DLCP_INT32, 64 * 4 * 50, 9);
  job_start(&j, n);
  memset(&h, 0, sizeof(h));
  h.type = DLCP_AGG_CONTRIB;
  h.job = 1;
  h.token = 0xBAD;
  h.world = 2;
  h.nblocks = 4;
  h.elems = 64;
  for (uint32_t g = 0; g < 50; g += 7) {
    size_t len;

    h.group = g;
    len = DLCP_AGG_HDR_LEN + 4u * 256u;
    assert_int_equal(dlcp_agg_hdr_encode(b, BUF, &h), DLCP_AGG_HDR_LEN);
    memset(b + DLCP_AGG_HDR_LEN, 0x11, len - DLCP_AGG_HDR_LEN);
    assert_int_equal(inanet_inject(n, 0, b, len, 3000 + g * 100), 0);
  }
  assert_int_equal(inanet_run(n), 2);
  job_check(&j);
  dlcp_agg_get_stats(sw, &st);
  assert_int_equal(st.foreign, 8);
  job_free(&j);
  inanet_del(n);
  dlcp_agg_del(sw);
}

/* Consecutive operations of one job use consecutive group ranges; the
 * switch's window follows them. */
static void test_consecutive_operations(void **state) {
  inanet_config c;
  dlcp_agg *sw = net_switch(1u << 16, DLCP_AGG_SHARED, 1);
  uint32_t first = 0;

  (void)state;
  inanet_config_default(&c);
  for (int k = 0; k < 4; k++) {
    inanet *n = inanet_new(&c, sw);
    job j;

    job_init(&j, 1, 4, DLCP_INA_RING_FALLBACK, DLCP_FLOAT32, 64 * 4 * 3000,
             (uint64_t)k);
    j.first_group = first;
    job_start(&j, n);
    assert_int_equal(inanet_run(n), 4);
    job_ring_part(&j);
    job_check(&j);
    first += dlcp_ina_ngroups(j.count, 64, 4);
    job_free(&j);
    inanet_del(n);
  }
  dlcp_agg_del(sw);
}

static void test_scaling_bound_and_bad_input(void **state) {
  float x[130] = {0};
  int32_t e[3]; /* 130 elements in groups of 64: 3 groups */

  (void)state;
  x[3] = 0.75f;
  x[70] = -3.0f;
  assert_int_equal(dlcp_ina_exponents(x, 130, 64, e), 0);
  assert_int_equal(e[0], 0); /* 0.75 = 0.75 * 2^0 */
  assert_int_equal(e[1], 2); /* 3 = 0.75 * 2^2 */
  assert_int_equal(e[2], DLCP_INA_EXP_ZERO); /* elements 128, 129 */
  /* n = 8, E = 0: s = 30 - 3 - 0 = 27, bound 8 * 2^-28 = 2^-25 */
  assert_true(dlcp_ina_error_bound(0, 8) == ldexp(1, -25));
  assert_true(dlcp_ina_error_bound(DLCP_INA_EXP_ZERO, 8) == 0);
  x[5] = INFINITY;
  assert_int_equal(dlcp_ina_exponents(x, 130, 64, e),
                   DLCP_ERR_INVALID_ARGUMENT);
  x[5] = -INFINITY;
  assert_int_equal(dlcp_ina_exponents(x, 130, 64, e),
                   DLCP_ERR_INVALID_ARGUMENT);
  x[5] = NAN;
  assert_int_equal(dlcp_ina_exponents(x, 130, 64, e),
                   DLCP_ERR_INVALID_ARGUMENT);

  /* Data beyond the exponents agreed for it (changed after the agreement)
   * fails the send that would carry it; each value is rounded to the
   * nearest multiple of 2^-s, ties to even. */
  static const float ok[6] = {0.5f, -0.25f, 0.0f, 0x1p-29f, 0x1p-30f,
                              0x3p-30f};
  float bad[64] = {0}, out[64];
  int32_t exps[1] = {0}; /* |x| < 1 */
  uint8_t buf[DLCP_AGG_HDR_LEN + 4u * 64u];
  dlcp_ina_params p;
  dlcp_ina_action act;
  dlcp_ina *h;
  memcpy(bad, ok, sizeof(ok));
  dlcp_ina_params_default(&p);
  p.job = 1;
  p.token = 2;
  p.world = 2;
  p.dtype = DLCP_FLOAT32;
  p.op = DLCP_SUM;
  p.sendbuf = bad;
  p.recvbuf = out;
  p.count = 64;
  p.group_blocks = 1;
  p.exps = exps;
  assert_int_equal(dlcp_ina_new(&h, &p, NULL, 0), 0);
  assert_int_equal(dlcp_ina_poll(h, &act, buf, sizeof(buf), 0), 0);
  assert_int_equal(act.type, DLCP_INA_ACT_SEND);
  /* n = 2, E = 0: s = 30 - 1 - 0 = 29 */
  assert_int_equal((int32_t)dlcp_get_u32(buf + DLCP_AGG_HDR_LEN), 1 << 28);
  assert_int_equal((int32_t)dlcp_get_u32(buf + DLCP_AGG_HDR_LEN + 4),
                   -(1 << 27));
  assert_int_equal((int32_t)dlcp_get_u32(buf + DLCP_AGG_HDR_LEN + 12), 1);
  assert_int_equal((int32_t)dlcp_get_u32(buf + DLCP_AGG_HDR_LEN + 16), 0);
  assert_int_equal((int32_t)dlcp_get_u32(buf + DLCP_AGG_HDR_LEN + 20), 2);
  dlcp_ina_del(h);
  bad[9] = 3.0f;
  assert_int_equal(dlcp_ina_new(&h, &p, NULL, 0), 0);
  assert_int_equal(dlcp_ina_poll(h, &act, buf, sizeof(buf), 0),
                   DLCP_ERR_INVALID_ARGUMENT);
  dlcp_ina_del(h);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_wire_roundtrip_and_rejects),
      cmocka_unit_test(test_switch_sum_result_ack_free),
      cmocka_unit_test(test_switch_resend_timer_and_lease),
      cmocka_unit_test(test_switch_lowest_group_evicts),
      cmocka_unit_test(test_switch_sharded_lowest),
      cmocka_unit_test(test_switch_resend_backs_off),
      cmocka_unit_test(test_ina_rto_follows_the_switch),
      cmocka_unit_test(test_ina_rto_backs_off),
      cmocka_unit_test(test_ina_window_follows_pace),
      cmocka_unit_test(test_acks_ride_the_low_water_mark),
      cmocka_unit_test(test_acks_go_first_when_the_pool_is_full),
      cmocka_unit_test(test_switch_holds_group_sent_up),
      cmocka_unit_test(test_ina_names_missing_rank),
      cmocka_unit_test(test_ra_ina_claims),
      cmocka_unit_test(test_ra_ina_window_follows_cap),
      cmocka_unit_test(test_ina_cc_marks_both_ways),
      cmocka_unit_test(test_ina_cc_moves),
      cmocka_unit_test(test_ina_cc_limits_outstanding),
      cmocka_unit_test(test_ina_cc_per_tree),
      cmocka_unit_test(test_switch_forged_and_config),
      cmocka_unit_test(test_switch_claims_and_verdicts),
      cmocka_unit_test(test_switch_partition_span),
      cmocka_unit_test(test_switch_shared_busy_names_share),
      cmocka_unit_test(test_switch_idle_job_leaves_the_share),
      cmocka_unit_test(test_switch_static_partitions),
      cmocka_unit_test(test_scaling_bound_and_bad_input),
      cmocka_unit_test(test_ina_clean_worlds),
      cmocka_unit_test(test_ina_loss_dup_reorder),
      cmocka_unit_test(test_ina_chosen_losses),
      cmocka_unit_test(test_cina_chain),
      cmocka_unit_test(test_cina_refusals),
      cmocka_unit_test(test_trees),
      cmocka_unit_test(test_tree_config),
      cmocka_unit_test(test_ina_ecn),
      cmocka_unit_test(test_jobs_share_small_pool),
      cmocka_unit_test(test_ina_window_fits_partition),
      cmocka_unit_test(test_group_bigger_than_pool),
      cmocka_unit_test(test_forged_packet_rejected),
      cmocka_unit_test(test_consecutive_operations),
  };

  return cmocka_run_group_tests(tests, NULL, NULL);
}
