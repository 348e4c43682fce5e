/*
 * wire.c: encoders and decoders for the MLT messages laid out in wire.h.
 *
 * Model: every message is a 16-byte preamble plus a fixed body, except
 * DATA (header + payload), START (header + entries) and BITMAP (header +
 * varint range list).  Decoders treat their input as hostile: each one
 * checks the preamble with dlcp_wire_peek(), requires the preamble length to
 * equal the bytes it was given, then checks every field before reading the
 * next, so no read ever goes past |buflen| and nothing they accept can make
 * a later consumer misbehave (overflowing offsets, ranges outside the
 * tensor, zero transfer ids).  Decoders are also canonical: every message
 * they accept is exactly what the matching encoder writes for the decoded
 * values, which the fuzz targets check byte for byte.  Encoders apply the
 * same rules to their arguments so that the library never emits a message
 * its own peer would reject.
 *
 * Error codes: DLCP_ERR_TRUNCATED when bytes are missing, DLCP_ERR_BAD_LENGTH
 * for framing problems (length fields, counts, varints, trailing bytes) and
 * DLCP_ERR_INVALID_ARGUMENT for field values the format forbids (reserved
 * bits, zero ids, ranges outside the window).
 */
#include "wire/wire.h"

#include <string.h>

#include "wire/bits.h"
#include "wire/bytes.h"

/* Offsets of the preamble fields. */
#define OFF_MAGIC 0
#define OFF_VERSION 2
#define OFF_TYPE 3
#define OFF_JOB 4
#define OFF_XFER 8
#define OFF_LEN 12

/* A varint of a 32-bit value takes at most 5 bytes (5 * 7 >= 32). */
#define VARINT_MAX 5u

/* Checks that |len| is a possible total length for a message of |type|.
 * Fixed-size messages must match exactly; variable ones must hold their
 * fixed part and stay within the channel's maximum. */
static int type_len_ok(uint8_t type, uint32_t len) {
  switch (type) {
  case DLCP_WIRE_DATA:
    /* The payload is never empty. */
    return len > DLCP_WIRE_DATA_HDR_LEN && len <= DLCP_WIRE_DGRAM_MAX;
  case DLCP_WIRE_ACK:
    return len == DLCP_WIRE_ACK_LEN;
  case DLCP_WIRE_START:
    return len >= DLCP_WIRE_START_HDR_LEN + DLCP_WIRE_START_ENTRY_LEN &&
           len <= DLCP_WIRE_CTRL_MAX &&
           (len - DLCP_WIRE_START_HDR_LEN) % DLCP_WIRE_START_ENTRY_LEN == 0;
  case DLCP_WIRE_PROBE:
    return len == DLCP_WIRE_PROBE_LEN;
  case DLCP_WIRE_BITMAP:
    return len >= DLCP_WIRE_BITMAP_HDR_LEN && len <= DLCP_WIRE_CTRL_MAX;
  case DLCP_WIRE_STOP:
    return len == DLCP_WIRE_STOP_LEN;
  case DLCP_WIRE_FINISH:
    return len == DLCP_WIRE_FINISH_LEN;
  case DLCP_WIRE_NOTE:
    return len == DLCP_WIRE_NOTE_LEN;
  case DLCP_WIRE_EAGER:
    return len >= DLCP_WIRE_EAGER_HDR_LEN && len <= DLCP_WIRE_CTRL_MAX;
  case DLCP_WIRE_CDATA:
    return len > DLCP_WIRE_CDATA_HDR_LEN && len <= DLCP_WIRE_DGRAM_MAX;
  case DLCP_WIRE_CACK:
    return len == DLCP_WIRE_CACK_LEN;
  case DLCP_WIRE_OFFER:
    return len == DLCP_WIRE_OFFER_LEN;
  default:
    return 0;
  }
}

int dlcp_wire_peek(dlcp_wire_preamble *pre, const uint8_t *buf, size_t buflen) {
  uint8_t type;
  uint32_t len;

  if (buf == NULL || buflen < DLCP_WIRE_PREAMBLE_LEN) {
    return DLCP_ERR_TRUNCATED;
  }
  if (dlcp_get_u16(buf + OFF_MAGIC) != DLCP_WIRE_MAGIC) {
    return DLCP_ERR_BAD_MAGIC;
  }
  if (dlcp_get_u8(buf + OFF_VERSION) != DLCP_WIRE_VERSION) {
    return DLCP_ERR_BAD_VERSION;
  }
  type = dlcp_get_u8(buf + OFF_TYPE);
  if (type < DLCP_WIRE_DATA || type > DLCP_WIRE_OFFER) {
    return DLCP_ERR_BAD_TYPE;
  }
  len = dlcp_get_u32(buf + OFF_LEN);
  if (!type_len_ok(type, len)) {
    return DLCP_ERR_BAD_LENGTH;
  }
  if (pre != NULL) {
    pre->type = type;
    pre->job = dlcp_get_u32(buf + OFF_JOB);
    pre->xfer = dlcp_get_u32(buf + OFF_XFER);
    pre->len = len;
  }
  return 0;
}

/* Decodes the preamble of a message that must be of |type| and exactly
 * |buflen| bytes long (a datagram, or a control message already framed). */
static int decode_whole(dlcp_wire_preamble *pre, const uint8_t *buf,
                        size_t buflen, uint8_t type) {
  int rv = dlcp_wire_peek(pre, buf, buflen);

  if (rv != 0) {
    return rv;
  }
  if (pre->type != type) {
    return DLCP_ERR_BAD_TYPE;
  }
  if (buflen < pre->len) {
    return DLCP_ERR_TRUNCATED;
  }
  if (buflen > pre->len) {
    return DLCP_ERR_BAD_LENGTH;
  }
  return 0;
}

static uint8_t *put_preamble(uint8_t *buf, uint8_t type, uint32_t job,
                             uint32_t xfer, uint32_t len) {
  uint8_t *p = buf;

  p = dlcp_put_u16(p, (uint16_t)DLCP_WIRE_MAGIC);
  p = dlcp_put_u8(p, (uint8_t)DLCP_WIRE_VERSION);
  p = dlcp_put_u8(p, type);
  p = dlcp_put_u32(p, job);
  p = dlcp_put_u32(p, xfer);
  return dlcp_put_u32(p, len);
}

/* ---- DATA ---- */

dlcp_ssize dlcp_wire_data_encode(uint8_t *buf, size_t buflen,
                                 const dlcp_wire_data *d) {
  uint8_t *p;

  if (d == NULL || (d->flags & ~DLCP_WIRE_FLAGS_KNOWN) != 0 ||
      d->payload_len == 0 || d->payload_len > DLCP_WIRE_MAX_SEG ||
      d->xfer == 0 || d->offset > UINT64_MAX - d->payload_len) {
    return DLCP_ERR_INVALID_ARGUMENT;
  }
  if (buf == NULL || buflen < DLCP_WIRE_DATA_HDR_LEN) {
    return DLCP_ERR_BUFFER_TOO_SMALL;
  }
  p = put_preamble(buf, DLCP_WIRE_DATA, d->job, d->xfer,
                   DLCP_WIRE_DATA_HDR_LEN + (uint32_t)d->payload_len);
  p = dlcp_put_u8(p, d->flags);
  p = dlcp_put_u8(p, d->path);
  p = dlcp_put_u16(p, d->layer);
  p = dlcp_put_u32(p, d->tensor);
  p = dlcp_put_u32(p, d->seq);
  p = dlcp_put_u64(p, d->offset);
  dlcp_put_u64(p, d->tx_ts);
  return DLCP_WIRE_DATA_HDR_LEN;
}

/* The DATA fields after a preamble already checked against the datagram's
 * length. */
static int data_fields(dlcp_wire_data *d, const dlcp_wire_preamble *pre,
                       const uint8_t *buf) {
  uint32_t plen;
  uint64_t offset;
  uint8_t flags;
  /* peek bounded len to (44, DGRAM_MAX], so the payload is 1..MAX_SEG. */
  plen = pre->len - DLCP_WIRE_DATA_HDR_LEN;
  flags = dlcp_get_u8(buf + 16);
  offset = dlcp_get_u64(buf + 28);
  if (pre->xfer == 0 || (flags & ~DLCP_WIRE_FLAGS_KNOWN) != 0) {
    return DLCP_ERR_INVALID_ARGUMENT;
  }
  /* The receiver adds the length to the offset; that must not wrap. */
  if (offset > UINT64_MAX - plen) {
    return DLCP_ERR_BAD_OFFSET;
  }
  d->job = pre->job;
  d->xfer = pre->xfer;
  d->flags = flags;
  d->path = dlcp_get_u8(buf + 17);
  d->layer = dlcp_get_u16(buf + 18);
  d->tensor = dlcp_get_u32(buf + 20);
  d->seq = dlcp_get_u32(buf + 24);
  d->offset = offset;
  d->tx_ts = dlcp_get_u64(buf + 36);
  d->payload_len = (uint16_t)plen;
  return 0;
}

int dlcp_wire_data_decode(dlcp_wire_data *d, const uint8_t **payload,
                          const uint8_t *buf, size_t buflen) {
  dlcp_wire_preamble pre;
  int rv = decode_whole(&pre, buf, buflen, DLCP_WIRE_DATA);

  if (rv == 0) {
    rv = data_fields(d, &pre, buf);
  }
  if (rv == 0 && payload != NULL) {
    *payload = buf + DLCP_WIRE_DATA_HDR_LEN;
  }
  return rv;
}

int dlcp_wire_data_decode_header(dlcp_wire_data *d, const uint8_t *hdr,
                                 size_t hdr_len, size_t dgram_len) {
  dlcp_wire_preamble pre;
  if (hdr_len < DLCP_WIRE_DATA_HDR_LEN) {
    return DLCP_ERR_TRUNCATED;
  }
  int rv = dlcp_wire_peek(&pre, hdr, hdr_len);

  if (rv != 0) {
    return rv;
  }
  if (pre.type != DLCP_WIRE_DATA) {
    return DLCP_ERR_BAD_TYPE;
  }
  if (dgram_len != pre.len) {
    return dgram_len < pre.len ? DLCP_ERR_TRUNCATED : DLCP_ERR_BAD_LENGTH;
  }
  return data_fields(d, &pre, hdr);
}

int dlcp_wire_data_check_bounds(const dlcp_wire_data *d, uint64_t size,
                                uint32_t seg_size) {
  uint64_t rest;
  uint64_t want;

  /* seg_size 0 would divide by zero; size 0 has no segment at all. */
  if (d == NULL || seg_size == 0 || d->offset >= size ||
      d->offset % seg_size != 0) {
    return DLCP_ERR_BAD_OFFSET;
  }
  /* Every segment is full except possibly the last one. */
  rest = size - d->offset;
  want = rest < seg_size ? rest : seg_size;
  if (d->payload_len != want) {
    return DLCP_ERR_BAD_OFFSET;
  }
  return 0;
}

/* ---- ACK ---- */

dlcp_ssize dlcp_wire_ack_encode(uint8_t *buf, size_t buflen,
                                const dlcp_wire_ack *a) {
  uint8_t *p;

  if (a == NULL || a->xfer == 0 || a->ce > a->covered) {
    return DLCP_ERR_INVALID_ARGUMENT;
  }
  if (buf == NULL || buflen < DLCP_WIRE_ACK_LEN) {
    return DLCP_ERR_BUFFER_TOO_SMALL;
  }
  p = put_preamble(buf, DLCP_WIRE_ACK, a->job, a->xfer, DLCP_WIRE_ACK_LEN);
  p = dlcp_put_u64(p, a->echo_ts);
  p = dlcp_put_u32(p, a->rx_pkts);
  p = dlcp_put_u32(p, a->seq);
  p = dlcp_put_u16(p, a->covered);
  p = dlcp_put_u16(p, a->ce);
  p = dlcp_put_u32(p, a->grant);
  p = dlcp_put_u32(p, a->hold_ns);
  dlcp_put_u32(p, 0);
  return DLCP_WIRE_ACK_LEN;
}

int dlcp_wire_ack_decode(dlcp_wire_ack *a, const uint8_t *buf, size_t buflen) {
  dlcp_wire_preamble pre;
  int rv = decode_whole(&pre, buf, buflen, DLCP_WIRE_ACK);

  if (rv != 0) {
    return rv;
  }
  uint16_t covered = dlcp_get_u16(buf + 32);
  uint16_t ce = dlcp_get_u16(buf + 34);
  if (pre.xfer == 0 || ce > covered || dlcp_get_u32(buf + 44) != 0) {
    return DLCP_ERR_INVALID_ARGUMENT;
  }
  a->job = pre.job;
  a->xfer = pre.xfer;
  a->echo_ts = dlcp_get_u64(buf + 16);
  a->rx_pkts = dlcp_get_u32(buf + 24);
  a->seq = dlcp_get_u32(buf + 28);
  a->covered = covered;
  a->ce = ce;
  a->grant = dlcp_get_u32(buf + 36);
  a->hold_ns = dlcp_get_u32(buf + 40);
  return 0;
}

/* ---- CDATA, CACK ---- */

dlcp_ssize dlcp_wire_cdata_encode_header(uint8_t *buf, size_t buflen,
                                         const dlcp_wire_cdata *h) {
  uint8_t *p;

  if (h == NULL || h->inner_len == 0 ||
      h->inner_len > DLCP_WIRE_DGRAM_MAX - DLCP_WIRE_CDATA_HDR_LEN ||
      h->rest > DLCP_WIRE_CTRL_MAX - h->inner_len) {
    return DLCP_ERR_INVALID_ARGUMENT;
  }
  if (buf == NULL || buflen < DLCP_WIRE_CDATA_HDR_LEN) {
    return DLCP_ERR_BUFFER_TOO_SMALL;
  }
  p = put_preamble(buf, DLCP_WIRE_CDATA, h->job, h->rest,
                   (uint32_t)(DLCP_WIRE_CDATA_HDR_LEN + h->inner_len));
  p = dlcp_put_u32(p, h->cseq);
  p = dlcp_put_u32(p, h->ack);
  dlcp_put_u64(p, h->tx_ts);
  return DLCP_WIRE_CDATA_HDR_LEN;
}

int dlcp_wire_cdata_decode(dlcp_wire_cdata *h, const uint8_t *buf,
                           size_t buflen) {
  dlcp_wire_preamble pre;
  int rv = decode_whole(&pre, buf, buflen, DLCP_WIRE_CDATA);

  if (rv != 0) {
    return rv;
  }
  if (pre.xfer > DLCP_WIRE_CTRL_MAX - (pre.len - DLCP_WIRE_CDATA_HDR_LEN)) {
    return DLCP_ERR_BAD_LENGTH;
  }
  h->job = pre.job;
  h->rest = pre.xfer;
  h->cseq = dlcp_get_u32(buf + 16);
  h->ack = dlcp_get_u32(buf + 20);
  h->tx_ts = dlcp_get_u64(buf + 24);
  h->inner = buf + DLCP_WIRE_CDATA_HDR_LEN;
  h->inner_len = pre.len - DLCP_WIRE_CDATA_HDR_LEN;
  return 0;
}

dlcp_ssize dlcp_wire_cack_encode(uint8_t *buf, size_t buflen,
                                 const dlcp_wire_cack *c) {
  uint8_t *p;

  if (c == NULL) {
    return DLCP_ERR_INVALID_ARGUMENT;
  }
  if (buf == NULL || buflen < DLCP_WIRE_CACK_LEN) {
    return DLCP_ERR_BUFFER_TOO_SMALL;
  }
  if (c->early == 0 && c->early_seq != 0) {
    return DLCP_ERR_INVALID_ARGUMENT;
  }
  p = put_preamble(buf, DLCP_WIRE_CACK, c->job, c->hold_ns, DLCP_WIRE_CACK_LEN);
  p = dlcp_put_u32(p, c->next);
  p = dlcp_put_u32(p, c->sack);
  p = dlcp_put_u32(p, c->early);
  p = dlcp_put_u32(p, c->early_seq);
  dlcp_put_u64(p, c->echo_ts);
  return DLCP_WIRE_CACK_LEN;
}

int dlcp_wire_cack_decode(dlcp_wire_cack *c, const uint8_t *buf,
                          size_t buflen) {
  dlcp_wire_preamble pre;
  int rv = decode_whole(&pre, buf, buflen, DLCP_WIRE_CACK);

  if (rv != 0) {
    return rv;
  }
  c->job = pre.job;
  c->hold_ns = pre.xfer;
  c->next = dlcp_get_u32(buf + 16);
  c->sack = dlcp_get_u32(buf + 20);
  c->early = dlcp_get_u32(buf + 24);
  c->early_seq = dlcp_get_u32(buf + 28);
  c->echo_ts = dlcp_get_u64(buf + 32);
  if (c->early == 0 && c->early_seq != 0) {
    return DLCP_ERR_INVALID_ARGUMENT;
  }
  return 0;
}

/* ---- START ---- */

static int start_entry_ok(const dlcp_wire_start_entry *e) {
  uint64_t nsegs;

  if (e->xfer == 0 || e->loss_ppm >= DLCP_WIRE_PPM ||
      e->seg_size < DLCP_WIRE_MIN_SEG || e->seg_size > DLCP_WIRE_MAX_SEG) {
    return 0;
  }
  /* BITMAP counts segments in 32 bits, so the tensor must not have more. */
  nsegs = e->size / e->seg_size + (e->size % e->seg_size != 0);
  return nsegs <= UINT32_MAX;
}

static void start_entry_read(dlcp_wire_start_entry *e, const uint8_t *p) {
  e->tensor = dlcp_get_u32(p);
  e->xfer = dlcp_get_u32(p + 4);
  e->size = dlcp_get_u64(p + 8);
  e->loss_ppm = dlcp_get_u32(p + 16);
  e->seg_size = dlcp_get_u32(p + 20);
  e->grant = dlcp_get_u32(p + 24);
}

dlcp_ssize dlcp_wire_start_encode(uint8_t *buf, size_t buflen, uint32_t job,
                                  const dlcp_wire_start_entry *entries,
                                  size_t n) {
  size_t len;
  size_t i;
  uint8_t *p;

  if (entries == NULL || n == 0 || n > UINT16_MAX) {
    return DLCP_ERR_INVALID_ARGUMENT;
  }
  /* A START longer than the decoders accept could never be delivered. */
  len = DLCP_WIRE_START_HDR_LEN + n * DLCP_WIRE_START_ENTRY_LEN;
  if (len > DLCP_WIRE_CTRL_MAX) {
    return DLCP_ERR_INVALID_ARGUMENT;
  }
  for (i = 0; i < n; ++i) {
    if (!start_entry_ok(&entries[i])) {
      return DLCP_ERR_INVALID_ARGUMENT;
    }
  }
  if (buf == NULL || buflen < len) {
    return DLCP_ERR_BUFFER_TOO_SMALL;
  }
  p = put_preamble(buf, DLCP_WIRE_START, job, 0, (uint32_t)len);
  p = dlcp_put_u16(p, (uint16_t)n);
  p = dlcp_put_u16(p, 0);
  for (i = 0; i < n; ++i) {
    const dlcp_wire_start_entry *e = &entries[i];

    p = dlcp_put_u32(p, e->tensor);
    p = dlcp_put_u32(p, e->xfer);
    p = dlcp_put_u64(p, e->size);
    p = dlcp_put_u32(p, e->loss_ppm);
    p = dlcp_put_u32(p, e->seg_size);
    p = dlcp_put_u32(p, e->grant);
    p = dlcp_put_u32(p, 0);
  }
  return (dlcp_ssize)len;
}

int dlcp_wire_start_decode(uint32_t *job, uint32_t *n, const uint8_t *buf,
                           size_t buflen) {
  dlcp_wire_preamble pre;
  dlcp_wire_start_entry e;
  uint32_t count;
  uint32_t i;
  int rv = decode_whole(&pre, buf, buflen, DLCP_WIRE_START);

  if (rv != 0) {
    return rv;
  }
  count = dlcp_get_u16(buf + 16);
  if (count == 0 ||
      pre.len != DLCP_WIRE_START_HDR_LEN + count * DLCP_WIRE_START_ENTRY_LEN) {
    return DLCP_ERR_BAD_LENGTH;
  }
  /* START names many transfers, so its own xfer field is unused. */
  if (pre.xfer != 0 || dlcp_get_u16(buf + 18) != 0) {
    return DLCP_ERR_INVALID_ARGUMENT;
  }
  for (i = 0; i < count; ++i) {
    const uint8_t *p =
        buf + DLCP_WIRE_START_HDR_LEN + (size_t)i * DLCP_WIRE_START_ENTRY_LEN;

    start_entry_read(&e, p);
    if (!start_entry_ok(&e) || dlcp_get_u32(p + 28) != 0) {
      return DLCP_ERR_INVALID_ARGUMENT;
    }
  }
  if (job != NULL) {
    *job = pre.job;
  }
  if (n != NULL) {
    *n = count;
  }
  return 0;
}

void dlcp_wire_start_entry_get(dlcp_wire_start_entry *e, const uint8_t *buf,
                               uint32_t index) {
  start_entry_read(e, buf + DLCP_WIRE_START_HDR_LEN +
                          (size_t)index * DLCP_WIRE_START_ENTRY_LEN);
}

/* ---- PROBE, STOP, FINISH ---- */

dlcp_ssize dlcp_wire_probe_encode(uint8_t *buf, size_t buflen,
                                  const dlcp_wire_probe *pr) {
  uint8_t *p;

  if (pr == NULL || pr->xfer == 0) {
    return DLCP_ERR_INVALID_ARGUMENT;
  }
  if (buf == NULL || buflen < DLCP_WIRE_PROBE_LEN) {
    return DLCP_ERR_BUFFER_TOO_SMALL;
  }
  p = put_preamble(buf, DLCP_WIRE_PROBE, pr->job, pr->xfer,
                   DLCP_WIRE_PROBE_LEN);
  p = dlcp_put_u32(p, pr->round);
  dlcp_put_u32(p, pr->sent);
  return DLCP_WIRE_PROBE_LEN;
}

int dlcp_wire_probe_decode(dlcp_wire_probe *pr, const uint8_t *buf,
                           size_t buflen) {
  dlcp_wire_preamble pre;
  int rv = decode_whole(&pre, buf, buflen, DLCP_WIRE_PROBE);

  if (rv != 0) {
    return rv;
  }
  if (pre.xfer == 0) {
    return DLCP_ERR_INVALID_ARGUMENT;
  }
  pr->job = pre.job;
  pr->xfer = pre.xfer;
  pr->round = dlcp_get_u32(buf + 16);
  pr->sent = dlcp_get_u32(buf + 20);
  return 0;
}

/* A status is 0 or a negative error code; a positive one means nothing. */
static uint32_t status_to_wire(int32_t status) {
  return (uint32_t)status;
}

static int32_t status_from_wire(uint32_t v) {
  /* Two's complement conversion without implementation-defined casts. */
  if (v <= INT32_MAX) {
    return (int32_t)v;
  }
  return (int32_t)(v - 0x80000000u) - INT32_MAX - 1;
}

dlcp_ssize dlcp_wire_stop_encode(uint8_t *buf, size_t buflen,
                                 const dlcp_wire_stop *s) {
  uint8_t *p;

  if (s == NULL || s->xfer == 0 || s->status > 0) {
    return DLCP_ERR_INVALID_ARGUMENT;
  }
  if (buf == NULL || buflen < DLCP_WIRE_STOP_LEN) {
    return DLCP_ERR_BUFFER_TOO_SMALL;
  }
  p = put_preamble(buf, DLCP_WIRE_STOP, s->job, s->xfer, DLCP_WIRE_STOP_LEN);
  p = dlcp_put_u32(p, status_to_wire(s->status));
  p = dlcp_put_u32(p, s->have);
  dlcp_put_u64(p, s->bytes);
  return DLCP_WIRE_STOP_LEN;
}

int dlcp_wire_stop_decode(dlcp_wire_stop *s, const uint8_t *buf,
                          size_t buflen) {
  dlcp_wire_preamble pre;
  int32_t status;
  int rv = decode_whole(&pre, buf, buflen, DLCP_WIRE_STOP);

  if (rv != 0) {
    return rv;
  }
  status = status_from_wire(dlcp_get_u32(buf + 16));
  if (pre.xfer == 0 || status > 0) {
    return DLCP_ERR_INVALID_ARGUMENT;
  }
  s->job = pre.job;
  s->xfer = pre.xfer;
  s->status = status;
  s->have = dlcp_get_u32(buf + 20);
  s->bytes = dlcp_get_u64(buf + 24);
  return 0;
}

dlcp_ssize dlcp_wire_finish_encode(uint8_t *buf, size_t buflen,
                                   const dlcp_wire_finish *f) {
  uint8_t *p;

  if (f == NULL || f->xfer == 0 || f->status > 0) {
    return DLCP_ERR_INVALID_ARGUMENT;
  }
  if (buf == NULL || buflen < DLCP_WIRE_FINISH_LEN) {
    return DLCP_ERR_BUFFER_TOO_SMALL;
  }
  p = put_preamble(buf, DLCP_WIRE_FINISH, f->job, f->xfer,
                   DLCP_WIRE_FINISH_LEN);
  p = dlcp_put_u32(p, status_to_wire(f->status));
  dlcp_put_u32(p, f->sent);
  return DLCP_WIRE_FINISH_LEN;
}

int dlcp_wire_finish_decode(dlcp_wire_finish *f, const uint8_t *buf,
                            size_t buflen) {
  dlcp_wire_preamble pre;
  int32_t status;
  int rv = decode_whole(&pre, buf, buflen, DLCP_WIRE_FINISH);

  if (rv != 0) {
    return rv;
  }
  status = status_from_wire(dlcp_get_u32(buf + 16));
  if (pre.xfer == 0 || status > 0) {
    return DLCP_ERR_INVALID_ARGUMENT;
  }
  f->job = pre.job;
  f->xfer = pre.xfer;
  f->status = status;
  f->sent = dlcp_get_u32(buf + 20);
  return 0;
}

/* ---- NOTE ---- */

dlcp_ssize dlcp_wire_note_encode(uint8_t *buf, size_t buflen,
                                 const dlcp_wire_note *n) {
  uint8_t *p;

  if (n == NULL) {
    return DLCP_ERR_INVALID_ARGUMENT;
  }
  if (buf == NULL || buflen < DLCP_WIRE_NOTE_LEN) {
    return DLCP_ERR_BUFFER_TOO_SMALL;
  }
  p = put_preamble(buf, DLCP_WIRE_NOTE, n->job, 0, DLCP_WIRE_NOTE_LEN);
  p = dlcp_put_u32(p, n->op);
  p = dlcp_put_u32(p, 0);
  dlcp_put_u64(p, n->value);
  return DLCP_WIRE_NOTE_LEN;
}

int dlcp_wire_note_decode(dlcp_wire_note *n, const uint8_t *buf,
                          size_t buflen) {
  dlcp_wire_preamble pre;
  int rv = decode_whole(&pre, buf, buflen, DLCP_WIRE_NOTE);

  if (rv != 0) {
    return rv;
  }
  if (pre.xfer != 0 || dlcp_get_u32(buf + 20) != 0) {
    return DLCP_ERR_INVALID_ARGUMENT;
  }
  n->job = pre.job;
  n->op = dlcp_get_u32(buf + 16);
  n->value = dlcp_get_u64(buf + 24);
  return 0;
}

/* ---- OFFER ---- */

dlcp_ssize dlcp_wire_offer_encode(uint8_t *buf, size_t buflen,
                                  const dlcp_wire_offer *o) {
  uint8_t *p;

  if (o == NULL) {
    return DLCP_ERR_INVALID_ARGUMENT;
  }
  if (buf == NULL || buflen < DLCP_WIRE_OFFER_LEN) {
    return DLCP_ERR_BUFFER_TOO_SMALL;
  }
  p = put_preamble(buf, DLCP_WIRE_OFFER, o->job, 0, DLCP_WIRE_OFFER_LEN);
  p = dlcp_put_u32(p, o->tensor);
  p = dlcp_put_u32(p, 0);
  dlcp_put_u64(p, o->size);
  return DLCP_WIRE_OFFER_LEN;
}

int dlcp_wire_offer_decode(dlcp_wire_offer *o, const uint8_t *buf,
                           size_t buflen) {
  dlcp_wire_preamble pre;
  int rv = decode_whole(&pre, buf, buflen, DLCP_WIRE_OFFER);

  if (rv != 0) {
    return rv;
  }
  if (pre.xfer != 0 || dlcp_get_u32(buf + 20) != 0) {
    return DLCP_ERR_INVALID_ARGUMENT;
  }
  o->job = pre.job;
  o->tensor = dlcp_get_u32(buf + 16);
  o->size = dlcp_get_u64(buf + 24);
  return 0;
}

/* ---- EAGER ---- */

dlcp_ssize dlcp_wire_eager_encode(uint8_t *buf, size_t buflen,
                                  const dlcp_wire_eager *e,
                                  const void *payload, size_t payload_len) {
  uint8_t *p;

  if (e == NULL || (payload == NULL && payload_len > 0) ||
      e->priority > DLCP_WIRE_PRIO_MASK ||
      payload_len > DLCP_WIRE_CTRL_MAX - DLCP_WIRE_EAGER_HDR_LEN) {
    return DLCP_ERR_INVALID_ARGUMENT;
  }
  size_t len = DLCP_WIRE_EAGER_HDR_LEN + payload_len;
  if (buf == NULL || buflen < len) {
    return DLCP_ERR_BUFFER_TOO_SMALL;
  }
  p = put_preamble(buf, DLCP_WIRE_EAGER, e->job, 0, (uint32_t)len);
  p = dlcp_put_u32(p, e->tensor);
  p = dlcp_put_u16(p, e->layer);
  p = dlcp_put_u8(p, e->priority);
  p = dlcp_put_u8(p, 0);
  if (payload_len > 0) {
    memcpy(p, payload, payload_len);
  }
  return (dlcp_ssize)len;
}

int dlcp_wire_eager_decode(dlcp_wire_eager *e, const uint8_t **payload,
                           size_t *payload_len, const uint8_t *buf,
                           size_t buflen) {
  dlcp_wire_preamble pre;
  int rv = decode_whole(&pre, buf, buflen, DLCP_WIRE_EAGER);

  if (rv != 0) {
    return rv;
  }
  uint8_t flags = dlcp_get_u8(buf + 22);
  if (pre.xfer != 0 || (flags & ~DLCP_WIRE_PRIO_MASK) != 0 ||
      dlcp_get_u8(buf + 23) != 0) {
    return DLCP_ERR_INVALID_ARGUMENT;
  }
  e->job = pre.job;
  e->tensor = dlcp_get_u32(buf + 16);
  e->layer = dlcp_get_u16(buf + 20);
  e->priority = flags & DLCP_WIRE_PRIO_MASK;
  *payload = buf + DLCP_WIRE_EAGER_HDR_LEN;
  *payload_len = pre.len - DLCP_WIRE_EAGER_HDR_LEN;
  return 0;
}

/* ---- BITMAP ---- */

static size_t varint_len(uint32_t v) {
  size_t n = 1;

  while (v >= 0x80) {
    v >>= 7;
    ++n;
  }
  return n;
}

static uint8_t *varint_put(uint8_t *p, uint32_t v) {
  while (v >= 0x80) {
    *p++ = (uint8_t)(v | 0x80);
    v >>= 7;
  }
  *p++ = (uint8_t)v;
  return p;
}

/* Reads one varint from the |avail| bytes at |p|.  Returns the bytes used,
 * or 0 if it is truncated, longer than 5 bytes, overflows 32 bits or is not
 * in its shortest form (a final zero byte after the first), which keeps the
 * encoding canonical. */
static size_t varint_get(uint32_t *v, const uint8_t *p, size_t avail) {
  uint32_t x = 0;
  size_t i;

  for (i = 0; i < VARINT_MAX && i < avail; ++i) {
    uint8_t b = p[i];

    /* The fifth byte holds bits 28-31 only and must end the number. */
    if (i == VARINT_MAX - 1 && b > 0x0F) {
      return 0;
    }
    x |= (uint32_t)(b & 0x7F) << (7 * i);
    if ((b & 0x80) == 0) {
      if (b == 0 && i > 0) {
        return 0;
      }
      *v = x;
      return i + 1;
    }
  }
  return 0;
}

dlcp_ssize dlcp_wire_bitmap_encode_words(uint8_t *buf, size_t buflen,
                                         const dlcp_wire_bitmap *hdr,
                                         const uint64_t *words) {
  size_t cap;
  size_t pos = DLCP_WIRE_BITMAP_HDR_LEN;
  uint32_t nsegs;
  uint32_t prev;
  uint32_t end;
  uint32_t nranges = 0;
  uint8_t *p;

  if (hdr == NULL || hdr->xfer == 0 || hdr->first > hdr->nsegs ||
      hdr->end > hdr->nsegs || (hdr->end != 0 && hdr->end < hdr->first) ||
      hdr->have > hdr->nsegs || (words == NULL && hdr->first < hdr->nsegs)) {
    return DLCP_ERR_INVALID_ARGUMENT;
  }
  /* Never write more than a decoder accepts. */
  cap = buflen < DLCP_WIRE_CTRL_MAX ? buflen : DLCP_WIRE_CTRL_MAX;
  if (buf == NULL || cap < DLCP_WIRE_BITMAP_HDR_LEN) {
    return DLCP_ERR_BUFFER_TOO_SMALL;
  }
  nsegs = hdr->nsegs;
  prev = hdr->first;
  /* The window ends at the caller's bound, or the tensor's end. */
  uint32_t limit = hdr->end != 0 ? hdr->end : nsegs;
  end = limit;
  while (prev < limit) {
    uint32_t start = dlcp_bits_next_missing(words, prev, limit);
    uint32_t stop;
    uint32_t gap;
    uint32_t run;

    if (start == limit) {
      break;
    }
    /* start < limit <= UINT32_MAX, so start + 1 cannot wrap. */
    stop = dlcp_bits_next_held(words, start + 1, limit);
    gap = start - prev;
    run = stop - start;
    if (varint_len(gap) + varint_len(run) > cap - pos) {
      /* Cut the window just before this range: everything in
       * [first, start) is then described exactly. */
      end = start;
      break;
    }
    p = varint_put(buf + pos, gap);
    p = varint_put(p, run);
    pos = (size_t)(p - buf);
    ++nranges;
    prev = stop;
  }
  if (limit < nsegs && end == limit && (nranges == 0 || prev == limit)) {
    /* The decoder's rule for a window short of nsegs: a range in it, and
     * a held segment before its end. */
    return DLCP_ERR_INVALID_ARGUMENT;
  }
  if (end < limit && nranges == 0) {
    /* An empty window would not move the sender forward. */
    return DLCP_ERR_BUFFER_TOO_SMALL;
  }
  p = put_preamble(buf, DLCP_WIRE_BITMAP, hdr->job, hdr->xfer, (uint32_t)pos);
  p = dlcp_put_u32(p, hdr->round);
  p = dlcp_put_u32(p, nsegs);
  p = dlcp_put_u32(p, hdr->first);
  p = dlcp_put_u32(p, end);
  p = dlcp_put_u32(p, hdr->have);
  dlcp_put_u32(p, nranges);
  return (dlcp_ssize)pos;
}

int dlcp_wire_bitmap_decode(dlcp_wire_bitmap *b, const uint8_t *buf,
                            size_t buflen) {
  dlcp_wire_preamble pre;
  uint32_t nsegs, first, end, have, nranges;
  uint32_t prev;
  uint32_t i;
  const uint8_t *ranges;
  size_t avail;
  size_t pos = 0;
  int rv = decode_whole(&pre, buf, buflen, DLCP_WIRE_BITMAP);

  if (rv != 0) {
    return rv;
  }
  nsegs = dlcp_get_u32(buf + 20);
  first = dlcp_get_u32(buf + 24);
  end = dlcp_get_u32(buf + 28);
  have = dlcp_get_u32(buf + 32);
  nranges = dlcp_get_u32(buf + 36);
  ranges = buf + DLCP_WIRE_BITMAP_HDR_LEN;
  avail = pre.len - DLCP_WIRE_BITMAP_HDR_LEN;
  if (pre.xfer == 0 || first > end || end > nsegs || have > nsegs) {
    return DLCP_ERR_INVALID_ARGUMENT;
  }
  /* Each range takes at least two bytes; reject a huge count up front. */
  if (nranges > avail / 2) {
    return DLCP_ERR_BAD_LENGTH;
  }
  prev = first;
  for (i = 0; i < nranges; ++i) {
    uint32_t gap;
    uint32_t run;
    size_t k;

    k = varint_get(&gap, ranges + pos, avail - pos);
    if (k == 0) {
      return DLCP_ERR_BAD_LENGTH;
    }
    pos += k;
    k = varint_get(&run, ranges + pos, avail - pos);
    if (k == 0) {
      return DLCP_ERR_BAD_LENGTH;
    }
    pos += k;
    /* Ranges are maximal runs: after the first, a zero gap would make
     * two adjacent ranges the encoder would have merged. */
    if (run == 0 || (i > 0 && gap == 0) || gap > end - prev ||
        run > end - prev - gap) {
      return DLCP_ERR_INVALID_ARGUMENT;
    }
    prev += gap + run;
  }
  if (pos != avail) {
    return DLCP_ERR_BAD_LENGTH;
  }
  /* A cut window ends where the first range that did not fit starts, so
   * it lists at least one range and a held segment precedes its end. */
  if (end < nsegs && (nranges == 0 || prev == end)) {
    return DLCP_ERR_INVALID_ARGUMENT;
  }
  b->job = pre.job;
  b->xfer = pre.xfer;
  b->round = dlcp_get_u32(buf + 16);
  b->nsegs = nsegs;
  b->first = first;
  b->end = end;
  b->have = have;
  b->nranges = nranges;
  b->ranges = ranges;
  b->ranges_len = avail;
  return 0;
}

int dlcp_wire_bitmap_next(const dlcp_wire_bitmap *b, size_t *cursor,
                          uint32_t *prev_end, dlcp_wire_range *r) {
  uint32_t gap;
  uint32_t run;
  size_t k1;
  size_t k2;

  /* The decoder validated the list; the checks here only keep a caller
   * that walks too far (or a zeroed bitmap) from reading out of bounds. */
  if (*cursor >= b->ranges_len) {
    return 0;
  }
  k1 = varint_get(&gap, b->ranges + *cursor, b->ranges_len - *cursor);
  if (k1 == 0) {
    return 0;
  }
  k2 = varint_get(&run, b->ranges + *cursor + k1, b->ranges_len - *cursor - k1);
  if (k2 == 0) {
    return 0;
  }
  r->start = *prev_end + gap;
  r->count = run;
  *prev_end = r->start + run;
  *cursor += k1 + k2;
  return 1;
}
