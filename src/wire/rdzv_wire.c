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
      dlcp_get_u8(b + 3) > DLCP_RDZV_REJECTED || len > DLCP_RDZV_MAX_VALUE) {
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
