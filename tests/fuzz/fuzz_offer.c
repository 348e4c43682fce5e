/*
 * fuzz_offer.c: libFuzzer target for dlcp_wire_offer_decode().  Whatever the
 * decoder accepts must re-encode to exactly the input (decoders are
 * canonical); anything else is a finding and aborts.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "wire/wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  dlcp_wire_offer m;
  uint8_t out[DLCP_WIRE_OFFER_LEN];

  if (dlcp_wire_offer_decode(&m, data, size) != 0) {
    return 0;
  }
  if (size != DLCP_WIRE_OFFER_LEN ||
      dlcp_wire_offer_encode(out, sizeof(out), &m) != DLCP_WIRE_OFFER_LEN ||
      memcmp(out, data, size) != 0) {
    abort();
  }
  return 0;
}
