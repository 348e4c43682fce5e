/*
 * fuzz_agg_switch.c: drives one small aggregation switch (8 aggregators of
 * 4 elements, window 64) with a fuzzer-chosen program of operations:
 *
 *   0 t       advance time by t microseconds and fire the timers
 *   1 ....    a well-formed CONTRIB: job (bit 0 of a byte picks one of two
 *             ids, bit 1 a wrong token, bit 2 a chain place: rank 1 of 2
 *             at the parent, bit 3 another, rank 0 of 3), group, rank,
 *             world 1..4, nblocks 1..3 or 9 (more than the pool), the RING
 *             flag, the value, the ECN codepoint
 *   2 ....    a well-formed ACK: job, group, rank, world, low
 *   3 L ...   a raw datagram of L bytes
 *   4 ....    a well-formed CLAIM: as CONTRIB, without the payload
 *   5 ....    a well-formed RESULT from the parent of the group's tree
 *             (bit 2 of the flags byte: from the other tree's): job,
 *             group, rank, world, nblocks, the value; or, bit 1 of the
 *             flags byte, a NACK BUSY from that parent
 *
 * The switch is in two trees (MTINA; even groups in tree 0, odd ones in
 * tree 1): in tree 0 its parent is PARENT and its place is the one the
 * jobs name (CINA's chain in the runtime), in tree 1 its parent is
 * PARENT2 and its place is configured, rank 2 of 3 (a static tree's).
 * An input of odd length makes it one of dlcp-switch's two threads'
 * cores (dlcp_agg_config.shards 2, shard bit 1 of the length), which
 * count a job's lowest group among their own groups only (eviction).
 *
 * Invariants (abort on violation): nothing crashes or leaks; every packet
 * is counted in exactly one outcome; aggregators in use never exceed the
 * pool; every datagram the switch writes decodes and is a RESULT, a
 * NACK or a GRANT, or to the parent of its group's tree a CONTRIB
 * (without a chain place) or an ACK; a RESULT or an upward CONTRIB of a
 * group whose every contribution and parent's result carried value v in
 * every element (no raw datagram naming it) holds k * v in every element,
 * 1 <= k <= 4 (the largest world), so no sum takes in another group's
 * aggregators or a contribution twice over a world of 2; a TOO_BIG
 * refusal names the pool of 8 and answers only a group larger than it;
 * after the timers and a dry poll, the deadline lies in the future.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proto/agg.h"
#include "wire/agg_wire.h"
#include "wire/bytes.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

enum { ELEMS = 4, NAGGS = 8, PARENT = 99, PARENT2 = 98, NGROUPS = 80 };

/* The value every element of job j's group g was given so far (by the
 * contributions and the parents' results sent to the switch), MIXED once
 * two differed or a raw datagram named the group, NONE before any. */
enum { NONE = -1, MIXED = -2 };
static int16_t given[3][NGROUPS];

static void give(uint32_t job, uint32_t group, int16_t v) {
  if (job < 1 || job > 2 || group >= NGROUPS) {
    return;
  }
  int16_t *g = &given[job][group];
  *g = *g == NONE ? v : *g == v ? v : MIXED;
}

/* Whether a sum written for job |h|'s group is k * v in every element,
 * 1 <= k <= 4, where the group was only ever given v. */
static bool sum_consistent(const dlcp_agg_hdr *h, const uint8_t *payload) {
  if (h->job < 1 || h->job > 2 || h->group >= NGROUPS ||
      given[h->job][h->group] < 0) {
    return true;
  }
  uint32_t v = (uint32_t)given[h->job][h->group];
  uint32_t e0 = dlcp_get_u32(payload);
  size_t n = dlcp_agg_payload_len(h) / 4;
  for (size_t i = 1; i < n; i++) {
    if (dlcp_get_u32(payload + 4 * i) != e0) {
      return false;
    }
  }
  for (uint32_t k = 1; k <= 4; k++) {
    if (e0 == k * v) {
      return true;
    }
  }
  return false;
}

/* The parent of |group|'s tree. */
static uint64_t parent_of(uint32_t group) {
  return group % 2u ? PARENT2 : PARENT;
}

static uint8_t take(const uint8_t **p, const uint8_t *end) {
  return *p < end ? *(*p)++ : 0;
}

static void check(dlcp_agg *a, dlcp_tstamp now) {
  static uint8_t buf[DLCP_AGG_DGRAM_MAX];
  dlcp_agg_send s;
  dlcp_agg_stats st;
  int rv;

  while ((rv = dlcp_agg_poll(a, &s, buf, sizeof(buf), now)) == 1) {
    dlcp_agg_hdr h;
    const uint8_t *payload;

    if (dlcp_agg_decode(&h, &payload, buf, s.len) != 0) {
      abort();
    }
    bool up = h.type == DLCP_AGG_CONTRIB || h.type == DLCP_AGG_ACK;
    if ((h.type != DLCP_AGG_RESULT && h.type != DLCP_AGG_NACK &&
         h.type != DLCP_AGG_GRANT && !up) ||
        up != (s.addr == PARENT || s.addr == PARENT2) ||
        (up && s.addr != parent_of(h.group)) ||
        (h.type == DLCP_AGG_CONTRIB && h.aux != 0)) {
      abort();
    }
    if (h.type == DLCP_AGG_NACK && h.aux == DLCP_AGG_NACK_TOO_BIG &&
        (h.low != NAGGS || h.nblocks <= NAGGS)) {
      abort();
    }
    if ((h.type == DLCP_AGG_RESULT || h.type == DLCP_AGG_CONTRIB) &&
        !sum_consistent(&h, payload)) {
      abort();
    }
  }
  if (rv != 0) {
    abort();
  }
  dlcp_agg_get_stats(a, &st);
  if (st.packets != st.contrib + st.duplicates + st.acks + st.nacked +
                        st.malformed + st.foreign + st.stale_acks +
                        st.claims_granted + st.finals + st.parent_nacks ||
      st.aggs_used > st.aggs_total || st.jobs_sharing > st.jobs_active) {
    abort();
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static uint8_t pkt[DLCP_AGG_DGRAM_MAX];
  const uint8_t *p = data, *end = data + size;
  dlcp_agg_config cfg;
  dlcp_agg *a;
  dlcp_tstamp now = 1;

  for (size_t j = 0; j < 3; j++) {
    for (size_t g = 0; g < NGROUPS; g++) {
      given[j][g] = NONE;
    }
  }
  dlcp_agg_config_default(&cfg);
  cfg.shards = size % 2u ? 2 : 1;
  cfg.shard = size % 2u ? (uint32_t)(size >> 1) % 2u : 0;
  cfg.mem_bytes = NAGGS * 4 * ELEMS;
  cfg.block_elems = ELEMS;
  cfg.window_groups = 64;
  cfg.max_jobs = 2;
  cfg.resend_ns = 5000;
  cfg.max_resends = 3;
  cfg.lease_ns = 50000;
  cfg.idle_ns = 20000;
  cfg.out_queue = 16;
  cfg.ntrees = 2;
  cfg.has_parent[0] = true;
  cfg.parent_addr[0] = PARENT;
  cfg.has_parent[1] = true;
  cfg.parent_addr[1] = PARENT2;
  cfg.parent_place[1] = DLCP_AGG_CHAIN_PLACE(2, 3);
  if (dlcp_agg_new(&a, &cfg, NULL, now) != 0) {
    abort();
  }
  while (p < end) {
    uint8_t op = take(&p, end) % 6;
    uint16_t place = 0;
    uint64_t from_parent = PARENT;
    dlcp_agg_hdr h;
    size_t len = DLCP_AGG_HDR_LEN;

    memset(&h, 0, sizeof(h));
    if (op == 0) {
      now += 1000u * take(&p, end);
      dlcp_agg_on_timer(a, now);
      check(a, now);
      if (dlcp_agg_next_deadline(a) <= now) {
        abort();
      }
      continue;
    }
    if (op == 3) {
      size_t l = take(&p, end);

      l = l <= (size_t)(end - p) ? l : (size_t)(end - p);
      {
        dlcp_agg_hdr raw;
        const uint8_t *payload;

        if (dlcp_agg_decode(&raw, &payload, p, l) == 0) {
          give(raw.job, raw.group, MIXED);
        }
      }
      (void)dlcp_agg_on_packet(a, p, l, 0, 0, now);
      p += l;
      check(a, now);
      continue;
    }
    {
      uint8_t j = take(&p, end);

      h.job = 1u + (j & 1u);
      h.token = (j & 2u) ? 666 : 1000u + h.job;
      place = (j & 4u) ? DLCP_AGG_CHAIN_PLACE(1, 2)
              : (j & 8u) ? DLCP_AGG_CHAIN_PLACE(0, 3) : 0;
      h.group = take(&p, end) % NGROUPS;
      h.world = (uint8_t)(1u + take(&p, end) % 4u);
      h.rank = (uint8_t)(take(&p, end) % h.world);
      {
        uint8_t b = take(&p, end);

        h.nblocks = (uint8_t)(b % 16u == 15u ? NAGGS + 1u : 1u + b % 3u);
      }
      h.elems = ELEMS;
    }
    if (op == 1 || op == 5) {
      uint8_t v = take(&p, end);
      uint8_t f = take(&p, end);

      h.type = op == 1 ? DLCP_AGG_CONTRIB
               : (f & 2u) ? DLCP_AGG_NACK : DLCP_AGG_RESULT;
      h.flags = (f & 1u) && h.type != DLCP_AGG_NACK
                    ? (op == 1 ? DLCP_AGG_FLAG_RING : DLCP_AGG_ECN_CE)
                    : 0;
      h.aux = op == 1 ? place
              : h.type == DLCP_AGG_NACK ? DLCP_AGG_NACK_BUSY : 0;
      from_parent = parent_of(h.group + ((f & 4u) ? 1u : 0u));
      len += dlcp_agg_payload_len(&h);
      for (size_t i = DLCP_AGG_HDR_LEN; i < len; i += 4) {
        dlcp_put_u32(pkt + i, v);
      }
      if (h.type != DLCP_AGG_NACK) {
        give(h.job, h.group, v);
      }
    } else if (op == 4) {
      h.type = DLCP_AGG_CLAIM;
      h.flags = (take(&p, end) & 1u) ? DLCP_AGG_FLAG_RING : 0;
    } else {
      h.type = DLCP_AGG_ACK;
      h.low = take(&p, end) % NGROUPS;
    }
    if (dlcp_agg_hdr_encode(pkt, sizeof(pkt), &h) != DLCP_AGG_HDR_LEN) {
      abort();
    }
    (void)dlcp_agg_on_packet(a, pkt, len, take(&p, end) & 3u,
                             op == 5 ? from_parent : h.rank, now);
    check(a, now);
  }
  dlcp_agg_del(a);
  return 0;
}
