/*
 * fuzz_ina_host.c: drives one rank's in-network all-reduce (src/coll/ina,
 * the host side) with whatever a switch, or anyone on its path, could
 * send it.  The first four bytes choose the operation:
 *
 *   byte 0    bit 0 RA-INA (else plain INA), bits 1-2 its claims (never,
 *             always, auto), bit 3 PANAMA's window (cc; bit 4: two trees)
 *   byte 1    world 2..5 (low 2 bits), rank (the rest, mod world)
 *   byte 2    window 1..16 groups
 *   byte 3    1..32 groups (plain INA: of 1..3 blocks, byte 2's high
 *             bits); bit 7: none ready until released (CINA's master)
 *
 * and the rest is a program of operations:
 *
 *   0 t       advance time by t * 100 ns
 *   1 ....    a RESULT: group, nblocks, ECN flags, cap (2 bytes), the IP
 *             ECN codepoint, the value of every element, and a byte whose
 *             bits make it another job's, another token's, another
 *             world's or another rank's
 *   2 ....    a NACK: group, reason (any byte), low (2 bytes), the WAITING
 *             bitmap's byte, the same corruption byte
 *   3 ....    a GRANT: group, the corruption byte
 *   4 L ...   a raw datagram of L bytes
 *   5 g       release groups [0, g) (the host's input is ready up to there)
 *
 * After every operation the rank is polled until it has nothing to do.
 * Invariants (abort on violation): nothing crashes or leaks; poll ends in
 * bounded steps; every datagram it writes decodes as a CONTRIB, CLAIM or
 * ACK of its own job, token, rank and world, a CONTRIB or CLAIM for one
 * of its groups; DONE comes at most once, and then with a failure or
 * every group reduced by the switch or given to the ring; a failure is
 * sticky; the groups counted never exceed the operation's; after a poll
 * the next deadline is in the future; RA-INA's ring part packs and
 * unpacks within its buffers.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "coll/ina.h"
#include "wire/agg_wire.h"
#include "wire/bytes.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

enum { ELEMS = 4, JOB = 9, FIRST = 100, MAX_POLLS = 100000 };
static const uint64_t TOKEN = 0x0123456789ABCDEFu;

static uint8_t take(const uint8_t **p, const uint8_t *end) {
  return *p < end ? *(*p)++ : 0;
}

typedef struct run {
  dlcp_ina *h;
  dlcp_ina_params p;
  uint32_t ngroups;
  dlcp_tstamp now;
  bool done;
  int status;
} run;

/* A header for this rank's job, corrupted as |bad|'s bits say. */
static dlcp_agg_hdr header(const run *r, uint8_t type, uint8_t group,
                           uint8_t bad) {
  dlcp_agg_hdr h;

  memset(&h, 0, sizeof(h));
  h.type = type;
  h.job = bad & 1u ? JOB + 1 : JOB;
  h.token = bad & 2u ? TOKEN ^ 1u : TOKEN;
  h.world = (uint8_t)(bad & 4u ? r->p.world + 1u : r->p.world);
  h.rank = (uint8_t)(bad & 8u ? (r->p.rank + 1u) % h.world : r->p.rank);
  /* Mostly this operation's groups, sometimes just outside them. */
  h.group = FIRST + (uint32_t)group % (r->ngroups + 2u) - 1u;
  h.nblocks = (uint8_t)r->p.group_blocks;
  h.elems = ELEMS;
  return h;
}

static void deliver(run *r, const dlcp_agg_hdr *h, const uint8_t *payload,
                    uint8_t ecn) {
  static uint8_t buf[DLCP_AGG_DGRAM_MAX];
  size_t plen = dlcp_agg_payload_len(h);

  if (dlcp_agg_hdr_encode(buf, sizeof(buf), h) != DLCP_AGG_HDR_LEN) {
    return; /* a header the wire cannot carry */
  }
  memcpy(buf + DLCP_AGG_HDR_LEN, payload, plen);
  (void)dlcp_ina_on_packet(r->h, buf, DLCP_AGG_HDR_LEN + plen, ecn, r->now);
}

/* Polls until NONE, checking every action. */
static void drain(run *r) {
  static uint8_t buf[DLCP_AGG_DGRAM_MAX];
  dlcp_ina_result res;

  for (int i = 0;; i++) {
    dlcp_ina_action act;
    int rv = dlcp_ina_poll(r->h, &act, buf, sizeof(buf), r->now);

    if (i == MAX_POLLS || (rv != 0 && rv != r->status && r->status != 0)) {
      abort();
    }
    if (rv != 0) {
      r->status = rv;
    }
    if (act.type == DLCP_INA_ACT_NONE) {
      break;
    }
    if (act.type == DLCP_INA_ACT_DONE) {
      if (r->done) {
        abort();
      }
      r->done = true;
      continue;
    }
    dlcp_agg_hdr h;
    const uint8_t *payload;

    if (act.type != DLCP_INA_ACT_SEND || act.len > sizeof(buf) ||
        dlcp_agg_decode(&h, &payload, buf, act.len) != 0 ||
        h.job != JOB || h.token != TOKEN || h.rank != r->p.rank ||
        h.world != r->p.world ||
        (h.type != DLCP_AGG_CONTRIB && h.type != DLCP_AGG_CLAIM &&
         h.type != DLCP_AGG_ACK) ||
        (h.type != DLCP_AGG_ACK &&
         (h.group < FIRST || h.group >= FIRST + r->ngroups))) {
      abort();
    }
  }
  dlcp_ina_get_result(r->h, &res);
  if (res.status != r->status || res.ina_groups > r->ngroups ||
      res.ring_groups > r->ngroups - res.ina_groups ||
      (r->done && res.status == 0 &&
       res.ina_groups + res.ring_groups != r->ngroups)) {
    abort();
  }
  if (!r->done && dlcp_ina_next_deadline(r->h) <= r->now) {
    abort();
  }
}

/* RA-INA's ring part, once done: pack and unpack through a buffer of
 * exactly its size. */
static void ring_part(const run *r) {
  uint64_t n = dlcp_ina_ring_elems(r->h);
  int32_t *v;

  if (n > (uint64_t)r->p.count) {
    abort();
  }
  v = malloc(4u * (size_t)n + 1u);
  if (v == NULL) {
    abort();
  }
  dlcp_ina_ring_pack(r->h, v);
  dlcp_ina_ring_unpack(r->h, v);
  free(v);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static uint8_t payload[DLCP_AGG_HDR_LEN + 4u * ELEMS * 255u];
  static uint8_t raw[DLCP_AGG_DGRAM_MAX];
  const uint8_t *p = data, *end = data + size;
  uint8_t b0 = take(&p, end), b1 = take(&p, end), b2 = take(&p, end),
          b3 = take(&p, end);
  int32_t *in, *out;
  run r;

  memset(&r, 0, sizeof(r));
  dlcp_ina_params_default(&r.p);
  r.p.job = JOB;
  r.p.token = TOKEN;
  r.p.world = 2u + (b1 & 3u);
  r.p.rank = (uint32_t)(b1 >> 2) % r.p.world;
  r.p.mode = b0 & 1u ? DLCP_INA_RING_FALLBACK : DLCP_INA_WAIT;
  r.p.claim = b0 & 1u ? (dlcp_ina_claim)((b0 >> 1) % 3u)
                      : DLCP_INA_CLAIM_NEVER;
  r.p.cc = (b0 & 8u) != 0;
  r.p.cc_trees = b0 & 16u ? 2u : 1u;
  r.p.dtype = DLCP_INT32;
  r.p.op = DLCP_SUM;
  r.p.block_elems = ELEMS;
  r.p.group_blocks = b0 & 1u ? r.p.world : 1u + (uint32_t)(b2 >> 4) % 3u;
  r.p.window = 1u + (b2 & 15u);
  /* A window that starts below |window| and follows the results' pace. */
  r.p.window_bytes = (uint64_t)(1u + (b0 >> 5)) *
                     (DLCP_AGG_HDR_LEN + 4u * ELEMS * r.p.group_blocks);
  r.p.first_group = FIRST;
  r.p.rto_ns = 1000;
  r.p.max_retx = 5;
  r.ngroups = 1u + b3 % 32u;
  if (b3 & 0x80u) {
    r.p.ready_groups = 0;
  }
  r.p.count = (uint64_t)r.ngroups * ELEMS * r.p.group_blocks;
  in = calloc((size_t)r.p.count, sizeof(int32_t));
  out = calloc((size_t)r.p.count, sizeof(int32_t));
  if (in == NULL || out == NULL) {
    abort();
  }
  for (uint64_t i = 0; i < r.p.count; i++) {
    in[i] = (int32_t)(i % 7u) - 3;
  }
  r.p.sendbuf = in;
  r.p.recvbuf = out;
  if (dlcp_ina_new(&r.h, &r.p, NULL, 0) != 0) {
    free(in);
    free(out);
    return 0; /* a combination the core refuses, as documented */
  }
  drain(&r);
  while (p < end) {
    uint8_t op = take(&p, end) % 6u;

    if (op == 0) {
      r.now += 100u * (dlcp_tstamp)take(&p, end);
    } else if (op == 1) {
      uint8_t group = take(&p, end), nb = take(&p, end);
      uint8_t flags = take(&p, end), c0 = take(&p, end), c1 = take(&p, end);
      uint8_t ecn = take(&p, end), value = take(&p, end);
      dlcp_agg_hdr h = header(&r, DLCP_AGG_RESULT, group, take(&p, end));

      if (nb & 0x80u) {
        h.nblocks = (uint8_t)(1u + nb % 8u); /* not the group's size */
      }
      h.flags = flags & DLCP_AGG_FLAG_ECN_MASK;
      h.aux = (uint16_t)(c0 | c1 << 8);
      for (size_t i = 0; i < 4u * ELEMS * h.nblocks; i += 4) {
        dlcp_put_u32(payload + i, (uint32_t)(int32_t)(int8_t)value);
      }
      deliver(&r, &h, payload, ecn & 3u);
    } else if (op == 2) {
      uint8_t group = take(&p, end), reason = take(&p, end);
      uint8_t l0 = take(&p, end), l1 = take(&p, end), bits = take(&p, end);
      dlcp_agg_hdr h = header(&r, DLCP_AGG_NACK, group, take(&p, end));

      h.aux = reason;
      h.low = (uint32_t)(l0 | l1 << 8);
      memset(payload, 0, DLCP_AGG_WAITING_LEN);
      payload[0] = (uint8_t)(bits & ((1u << r.p.world) - 1u));
      deliver(&r, &h, payload, 0);
    } else if (op == 3) {
      uint8_t group = take(&p, end);
      dlcp_agg_hdr h = header(&r, DLCP_AGG_GRANT, group, take(&p, end));

      h.nblocks = (uint8_t)r.p.group_blocks;
      deliver(&r, &h, payload, 0);
    } else if (op == 4) {
      size_t len = take(&p, end);

      if (len > (size_t)(end - p)) {
        len = (size_t)(end - p);
      }
      memcpy(raw, p, len);
      p += len;
      (void)dlcp_ina_on_packet(r.h, raw, len, 0, r.now);
    } else {
      dlcp_ina_release(r.h, take(&p, end));
    }
    drain(&r);
  }
  if (r.done && r.status == 0 && r.p.mode == DLCP_INA_RING_FALLBACK) {
    ring_part(&r);
  }
  dlcp_ina_del(r.h);
  free(in);
  free(out);
  return 0;
}
