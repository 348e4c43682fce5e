/*
 * fuzz_peek.c: libFuzzer target for dlcp_wire_peek(), the stream framer.
 * An accepted preamble must re-encode to the input's first 16 bytes and
 * carry a length the type allows.  When the whole message is present it is
 * handed to its type's decoder, as a stream reader would.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "wire/wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void put32(uint8_t *p, uint32_t v) {
  p[0] = (uint8_t)v;
  p[1] = (uint8_t)(v >> 8);
  p[2] = (uint8_t)(v >> 16);
  p[3] = (uint8_t)(v >> 24);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  dlcp_wire_preamble pre;
  uint8_t hdr[DLCP_WIRE_PREAMBLE_LEN];
  int rv;

  if (dlcp_wire_peek(&pre, data, size) != 0) {
    return 0;
  }
  hdr[0] = (uint8_t)(DLCP_WIRE_MAGIC & 0xFF);
  hdr[1] = (uint8_t)(DLCP_WIRE_MAGIC >> 8);
  hdr[2] = (uint8_t)DLCP_WIRE_VERSION;
  hdr[3] = pre.type;
  put32(hdr + 4, pre.job);
  put32(hdr + 8, pre.xfer);
  put32(hdr + 12, pre.len);
  if (size < DLCP_WIRE_PREAMBLE_LEN || memcmp(hdr, data, sizeof(hdr)) != 0 ||
      pre.len < DLCP_WIRE_PREAMBLE_LEN || pre.len > DLCP_WIRE_CTRL_MAX) {
    abort();
  }
  if (size < pre.len) {
    return 0;
  }
  /* Decode the framed message only: trailing bytes belong to the next. */
  switch (pre.type) {
  case DLCP_WIRE_DATA: {
    dlcp_wire_data d;
    const uint8_t *payload;

    rv = dlcp_wire_data_decode(&d, &payload, data, pre.len);
    break;
  }
  case DLCP_WIRE_ACK: {
    dlcp_wire_ack a;

    rv = dlcp_wire_ack_decode(&a, data, pre.len);
    break;
  }
  case DLCP_WIRE_START: {
    uint32_t job, n;

    rv = dlcp_wire_start_decode(&job, &n, data, pre.len);
    break;
  }
  case DLCP_WIRE_PROBE: {
    dlcp_wire_probe p;

    rv = dlcp_wire_probe_decode(&p, data, pre.len);
    break;
  }
  case DLCP_WIRE_BITMAP: {
    dlcp_wire_bitmap b;

    rv = dlcp_wire_bitmap_decode(&b, data, pre.len);
    break;
  }
  case DLCP_WIRE_STOP: {
    dlcp_wire_stop s;

    rv = dlcp_wire_stop_decode(&s, data, pre.len);
    break;
  }
  case DLCP_WIRE_FINISH: {
    dlcp_wire_finish f;

    rv = dlcp_wire_finish_decode(&f, data, pre.len);
    break;
  }
  case DLCP_WIRE_NOTE: {
    dlcp_wire_note n;

    rv = dlcp_wire_note_decode(&n, data, pre.len);
    break;
  }
  case DLCP_WIRE_OFFER: {
    dlcp_wire_offer o;

    rv = dlcp_wire_offer_decode(&o, data, pre.len);
    break;
  }
  case DLCP_WIRE_EAGER: {
    dlcp_wire_eager e;
    const uint8_t *payload;
    size_t payload_len;

    rv = dlcp_wire_eager_decode(&e, &payload, &payload_len, data, pre.len);
    if (rv == 0 && payload + payload_len != data + pre.len) {
      abort(); /* the payload must be exactly the rest of the message */
    }
    break;
  }
  case DLCP_WIRE_CDATA: {
    dlcp_wire_cdata h;

    rv = dlcp_wire_cdata_decode(&h, data, pre.len);
    if (rv == 0 &&
        (h.inner + h.inner_len != data + pre.len || h.inner_len == 0 ||
         h.inner_len + h.rest > DLCP_WIRE_CTRL_MAX)) {
      abort(); /* the inner message or piece must be exactly the rest */
    }
    break;
  }
  case DLCP_WIRE_CACK: {
    dlcp_wire_cack c;

    rv = dlcp_wire_cack_decode(&c, data, pre.len);
    break;
  }
  default:
    /* peek accepted a type it does not know. */
    abort();
  }
  /* Framing errors are peek's job: a decoder given exactly pre.len bytes
   * may reject field values but never the framing peek just accepted. */
  if (rv == DLCP_ERR_TRUNCATED || rv == DLCP_ERR_BAD_MAGIC ||
      rv == DLCP_ERR_BAD_VERSION || rv == DLCP_ERR_BAD_TYPE) {
    abort();
  }
  return 0;
}
