/*
 * fuzz_agg.c: libFuzzer target for dlcp_agg_decode().  Whatever the
 * decoder accepts must re-encode (header by dlcp_agg_hdr_encode, payload
 * as it came) to exactly the input; anything else is a finding and aborts.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "wire/agg_wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static uint8_t out[DLCP_AGG_DGRAM_MAX];
  dlcp_agg_hdr h;
  const uint8_t *payload;
  size_t plen;

  if (dlcp_agg_decode(&h, &payload, data, size) != 0) {
    return 0;
  }
  plen = dlcp_agg_payload_len(&h);
  if (size != DLCP_AGG_HDR_LEN + plen ||
      (plen > 0) != (payload != NULL) ||
      dlcp_agg_hdr_encode(out, sizeof(out), &h) != DLCP_AGG_HDR_LEN) {
    abort();
  }
  if (plen > 0) {
    memcpy(out + DLCP_AGG_HDR_LEN, payload, plen);
  }
  if (memcmp(out, data, size) != 0) {
    abort();
  }
  return 0;
}
