/*
 * agg_wire.c: encode and decode of the INA datagrams (layout in
 * agg_wire.h).  The encoder and the decoder share one field check, so
 * whatever is encoded decodes and whatever decodes re-encodes to the same
 * bytes.
 */
#include "wire/agg_wire.h"

#include "wire/bytes.h"

size_t dlcp_agg_payload_len(const dlcp_agg_hdr *h) {
  if (h->type == DLCP_AGG_NACK && h->aux == DLCP_AGG_NACK_WAITING) {
    return DLCP_AGG_WAITING_LEN;
  }
  if (h->type != DLCP_AGG_CONTRIB && h->type != DLCP_AGG_RESULT) {
    return 0;
  }
  return (size_t)h->nblocks * h->elems * 4u;
}

/* The field rules of agg_wire.h, type by type.  Returns 0 or
 * DLCP_ERR_BAD_TYPE / DLCP_ERR_INVALID_ARGUMENT. */
static int hdr_check(const dlcp_agg_hdr *h) {
  if (h->type < DLCP_AGG_CONTRIB || h->type > DLCP_AGG_GRANT) {
    return DLCP_ERR_BAD_TYPE;
  }
  if (h->world == 0 || h->world > DLCP_AGG_MAX_WORLD ||
      h->rank >= h->world || h->nblocks == 0 || h->elems == 0 ||
      h->elems > DLCP_AGG_MAX_BLOCK_ELEMS ||
      (h->flags & ~DLCP_AGG_FLAGS_KNOWN) != 0) {
    return DLCP_ERR_INVALID_ARGUMENT;
  }
  switch ((dlcp_agg_type)h->type) {
  case DLCP_AGG_CONTRIB:
    if ((h->flags & DLCP_AGG_FLAG_ECN_MASK) != 0 ||
        (h->aux != 0 &&
         (DLCP_AGG_CHAIN_WORLD(h->aux) > DLCP_AGG_MAX_WORLD ||
          DLCP_AGG_CHAIN_RANK(h->aux) >= DLCP_AGG_CHAIN_WORLD(h->aux)))) {
      return DLCP_ERR_INVALID_ARGUMENT;
    }
    break;
  case DLCP_AGG_CLAIM:
    if ((h->flags & DLCP_AGG_FLAG_ECN_MASK) != 0 || h->aux != 0) {
      return DLCP_ERR_INVALID_ARGUMENT;
    }
    break;
  case DLCP_AGG_ACK:
    if ((h->flags & ~DLCP_AGG_FLAG_RETX) != 0 || h->aux != 0) {
      return DLCP_ERR_INVALID_ARGUMENT;
    }
    break;
  case DLCP_AGG_GRANT:
    if (h->flags != 0 || h->low != 0 || h->aux != 0) {
      return DLCP_ERR_INVALID_ARGUMENT;
    }
    break;
  case DLCP_AGG_RESULT:
    if ((h->flags & ~DLCP_AGG_FLAG_ECN_MASK) != 0 || h->low != 0) {
      return DLCP_ERR_INVALID_ARGUMENT;
    }
    break;
  case DLCP_AGG_NACK:
    if (h->flags != 0 || h->aux < DLCP_AGG_NACK_RING ||
        h->aux > DLCP_AGG_NACK_WAITING) {
      return DLCP_ERR_INVALID_ARGUMENT;
    }
    /* Only TOO_BIG and BUSY carry a number: the pool the refusal was
     * measured against, which is smaller than the group it refuses
     * (TOO_BIG), or the job's partition or share of the pool (BUSY). */
    if (h->aux == DLCP_AGG_NACK_TOO_BIG ? h->low == 0 || h->low >= h->nblocks
                                        : h->aux != DLCP_AGG_NACK_BUSY &&
                                              h->low != 0) {
      return DLCP_ERR_INVALID_ARGUMENT;
    }
    break;
  }
  if (DLCP_AGG_HDR_LEN + dlcp_agg_payload_len(h) > DLCP_AGG_DGRAM_MAX) {
    return DLCP_ERR_INVALID_ARGUMENT;
  }
  return 0;
}

dlcp_ssize dlcp_agg_hdr_encode(uint8_t *buf, size_t buflen,
                               const dlcp_agg_hdr *h) {
  uint8_t *p = buf;
  int rv = hdr_check(h);

  if (rv != 0) {
    return DLCP_ERR_INVALID_ARGUMENT;
  }
  if (buflen < DLCP_AGG_HDR_LEN) {
    return DLCP_ERR_BUFFER_TOO_SMALL;
  }
  p = dlcp_put_u16(p, (uint16_t)DLCP_AGG_WIRE_MAGIC);
  p = dlcp_put_u8(p, (uint8_t)DLCP_AGG_WIRE_VERSION);
  p = dlcp_put_u8(p, h->type);
  p = dlcp_put_u32(p, h->job);
  p = dlcp_put_u64(p, h->token);
  p = dlcp_put_u32(p, h->group);
  p = dlcp_put_u32(p, h->low);
  p = dlcp_put_u8(p, h->rank);
  p = dlcp_put_u8(p, h->world);
  p = dlcp_put_u8(p, h->nblocks);
  p = dlcp_put_u8(p, h->flags);
  p = dlcp_put_u16(p, h->elems);
  dlcp_put_u16(p, h->aux);
  return (dlcp_ssize)DLCP_AGG_HDR_LEN;
}

int dlcp_agg_decode(dlcp_agg_hdr *h, const uint8_t **payload,
                    const uint8_t *buf, size_t buflen) {
  dlcp_agg_hdr d;
  size_t want;
  int rv;

  if (buflen < DLCP_AGG_HDR_LEN) {
    return DLCP_ERR_TRUNCATED;
  }
  if (dlcp_get_u16(buf) != DLCP_AGG_WIRE_MAGIC) {
    return DLCP_ERR_BAD_MAGIC;
  }
  if (buf[2] != DLCP_AGG_WIRE_VERSION) {
    return DLCP_ERR_BAD_VERSION;
  }
  if (buflen > DLCP_AGG_DGRAM_MAX) {
    return DLCP_ERR_BAD_LENGTH;
  }
  d.type = buf[3];
  d.job = dlcp_get_u32(buf + 4);
  d.token = dlcp_get_u64(buf + 8);
  d.group = dlcp_get_u32(buf + 16);
  d.low = dlcp_get_u32(buf + 20);
  d.rank = buf[24];
  d.world = buf[25];
  d.nblocks = buf[26];
  d.flags = buf[27];
  d.elems = dlcp_get_u16(buf + 28);
  d.aux = dlcp_get_u16(buf + 30);
  rv = hdr_check(&d);
  if (rv != 0) {
    return rv;
  }
  want = DLCP_AGG_HDR_LEN + dlcp_agg_payload_len(&d);
  if (buflen < want) {
    return DLCP_ERR_TRUNCATED;
  }
  if (buflen > want) {
    return DLCP_ERR_BAD_LENGTH;
  }
  if (d.type == DLCP_AGG_NACK && d.aux == DLCP_AGG_NACK_WAITING &&
      d.world < 64u &&
      (dlcp_get_u64(buf + DLCP_AGG_HDR_LEN) >> d.world) != 0) {
    return DLCP_ERR_INVALID_ARGUMENT;
  }
  *h = d;
  *payload = want > DLCP_AGG_HDR_LEN ? buf + DLCP_AGG_HDR_LEN : NULL;
  return 0;
}
