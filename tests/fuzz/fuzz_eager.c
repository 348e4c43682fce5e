/*
 * fuzz_eager.c: libFuzzer target for dlcp_wire_eager_decode().  Whatever
 * the decoder accepts must re-encode to exactly the input with the payload
 * pointer right behind the header (decoders are canonical); anything else
 * is a finding and aborts.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "wire/wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  dlcp_wire_eager e;
  const uint8_t *payload = NULL;
  size_t payload_len = 0;
  uint8_t *out;

  if (dlcp_wire_eager_decode(&e, &payload, &payload_len, data, size) != 0) {
    return 0;
  }
  if (payload_len > size || payload != data + (size - payload_len)) {
    abort();
  }
  out = malloc(size ? size : 1);
  if (out == NULL) {
    abort();
  }
  if (dlcp_wire_eager_encode(out, size, &e, payload, payload_len) !=
          (dlcp_ssize)size ||
      memcmp(out, data, size) != 0) {
    abort();
  }
  free(out);
  return 0;
}
