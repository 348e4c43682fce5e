/*
 * rdzv_wire.c: the rendezvous store's message headers and values, and the
 * mesh hello (formats in rdzv_wire.h).
 */
#include "wire/rdzv_wire.h"

#include "wire/bytes.h"
#include "wire/wire.h"

void dlcp_rdzv_put_request(uint8_t *b, dlcp_rdzv_op op, uint16_t key_len,
                           uint32_t value_len) {
  b = dlcp_put_u16(b, DLCP_RDZV_MAGIC);
  b = dlcp_put_u8(b, DLCP_RDZV_VERSION);
  b = dlcp_put_u8(b, (uint8_t)op);
  b = dlcp_put_u16(b, key_len);
  b = dlcp_put_u16(b, 0);
  dlcp_put_u32(b, value_len);
}

void dlcp_rdzv_get_request(const uint8_t *b, dlcp_rdzv_request_hdr *h) {
  h->magic = dlcp_get_u16(b);
  h->version = dlcp_get_u8(b + 2);
  h->op = dlcp_get_u8(b + 3);
  h->key_len = dlcp_get_u16(b + 4);
  h->reserved = dlcp_get_u16(b + 6);
  h->value_len = dlcp_get_u32(b + 8);
}

void dlcp_rdzv_put_response(uint8_t *b, dlcp_rdzv_status status,
                            uint32_t value_len) {
  b = dlcp_put_u16(b, DLCP_RDZV_MAGIC);
  b = dlcp_put_u8(b, DLCP_RDZV_VERSION);
  b = dlcp_put_u8(b, (uint8_t)status);
  b = dlcp_put_u32(b, 0);
  dlcp_put_u32(b, value_len);
}

int dlcp_rdzv_get_response(const uint8_t *b, dlcp_rdzv_status *status,
                           uint32_t *value_len) {
  uint32_t len = dlcp_get_u32(b + 8);
  if (dlcp_get_u16(b) != DLCP_RDZV_MAGIC ||
      dlcp_get_u8(b + 2) != DLCP_RDZV_VERSION ||
      dlcp_get_u8(b + 3) > DLCP_RDZV_REJECTED || len > DLCP_RDZV_MAX_ANSWER) {
    return DLCP_ERR_BAD_MAGIC;
  }
  *status = (dlcp_rdzv_status)dlcp_get_u8(b + 3);
  *value_len = len;
  return 0;
}

void dlcp_rdzv_put_hello(uint8_t *b, const dlcp_rdzv_hello *h) {
  b = dlcp_put_u32(b, h->rank);
  b = dlcp_put_u32(b, h->world);
  b = dlcp_put_u32(b, h->job);
  dlcp_put_u64(b, h->incarnation);
}

void dlcp_rdzv_get_hello(const uint8_t *b, dlcp_rdzv_hello *h) {
  h->rank = dlcp_get_u32(b);
  h->world = dlcp_get_u32(b + 4);
  h->job = dlcp_get_u32(b + 8);
  h->incarnation = dlcp_get_u64(b + 12);
}

void dlcp_rdzv_put_wait(uint8_t *b, uint32_t timeout_ms) {
  dlcp_put_u32(b, timeout_ms);
}

uint32_t dlcp_rdzv_get_wait(const uint8_t *b) { return dlcp_get_u32(b); }

void dlcp_rdzv_put_gather(uint8_t *b, const dlcp_rdzv_gather *g) {
  b = dlcp_put_u32(b, g->timeout_ms);
  b = dlcp_put_u32(b, g->first);
  dlcp_put_u32(b, g->count);
}

void dlcp_rdzv_get_gather(const uint8_t *b, dlcp_rdzv_gather *g) {
  g->timeout_ms = dlcp_get_u32(b);
  g->first = dlcp_get_u32(b + 4);
  g->count = dlcp_get_u32(b + 8);
}

int dlcp_rdzv_gathered_open(dlcp_rdzv_gathered *g, const uint8_t *b,
                            size_t len) {
  if (len < 4 || dlcp_get_u32(b) == 0) {
    return DLCP_ERR_BAD_LENGTH;
  }
  g->count = dlcp_get_u32(b);
  g->p = b + 4;
  g->left = len - 4;
  g->read = 0;
  return 0;
}

int dlcp_rdzv_gathered_next(dlcp_rdzv_gathered *g, const uint8_t **value,
                            uint32_t *len) {
  uint32_t n;
  if (g->read == g->count) {
    return g->left == 0 ? 0 : DLCP_ERR_BAD_LENGTH;
  }
  if (g->left < 4) {
    return DLCP_ERR_BAD_LENGTH;
  }
  n = dlcp_get_u32(g->p);
  if (n > g->left - 4) {
    return DLCP_ERR_BAD_LENGTH;
  }
  *value = g->p + 4;
  *len = n;
  g->p += 4 + (size_t)n;
  g->left -= 4 + (size_t)n;
  g->read++;
  return 1;
}

void dlcp_mesh_put_hello(uint8_t *b, uint32_t job, uint32_t rank) {
  b = dlcp_put_u32(b, DLCP_MESH_HELLO_MAGIC);
  b = dlcp_put_u32(b, DLCP_WIRE_VERSION);
  b = dlcp_put_u32(b, job);
  dlcp_put_u32(b, rank);
}

int dlcp_mesh_get_hello(const uint8_t *b, uint32_t job, uint32_t *rank) {
  if (dlcp_get_u32(b) != DLCP_MESH_HELLO_MAGIC) {
    return DLCP_ERR_BAD_MAGIC;
  }
  if (dlcp_get_u32(b + 4) != DLCP_WIRE_VERSION) {
    return DLCP_ERR_BAD_VERSION;
  }
  if (dlcp_get_u32(b + 8) != job) {
    return DLCP_ERR_FOREIGN_JOB;
  }
  *rank = dlcp_get_u32(b + 12);
  return 0;
}
