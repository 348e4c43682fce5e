/*
 * fuzz_data.c: libFuzzer target for dlcp_wire_data_decode() and
 * dlcp_wire_data_check_bounds().  An accepted datagram must re-encode to
 * the same header with the payload pointer right behind it, and the bounds
 * check must agree with plain arithmetic on a tensor that ends right after
 * the payload.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "wire/wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  dlcp_wire_data d;
  const uint8_t *payload = NULL;
  uint8_t hdr[DLCP_WIRE_DATA_HDR_LEN];
  int want;

  if (dlcp_wire_data_decode(&d, &payload, data, size) != 0) {
    return 0;
  }
  if (payload != data + DLCP_WIRE_DATA_HDR_LEN || d.payload_len == 0 ||
      size != DLCP_WIRE_DATA_HDR_LEN + (size_t)d.payload_len) {
    abort();
  }
  if (dlcp_wire_data_encode(hdr, sizeof(hdr), &d) != DLCP_WIRE_DATA_HDR_LEN ||
      memcmp(hdr, data, sizeof(hdr)) != 0) {
    abort();
  }
  /* With one segment per payload, the packet is in bounds exactly when its
   * offset is a multiple of the payload length. */
  want = d.offset % d.payload_len == 0 ? 0 : DLCP_ERR_BAD_OFFSET;
  if (dlcp_wire_data_check_bounds(&d, d.offset + d.payload_len,
                                  d.payload_len) != want) {
    abort();
  }
  /* A tensor one byte shorter never holds the payload. */
  if (dlcp_wire_data_check_bounds(&d, d.offset + d.payload_len - 1,
                                  d.payload_len) == 0) {
    abort();
  }
  (void)dlcp_wire_data_check_bounds(&d, d.tx_ts, d.seq);
  return 0;
}
