/*
 * fuzz_start.c: libFuzzer target for dlcp_wire_start_decode().  Every
 * entry of an accepted START is read back and the message re-encoded; the
 * bytes must match the input exactly.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "wire/wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  dlcp_wire_start_entry *e;
  uint8_t *out;
  uint32_t job, n, i;

  if (dlcp_wire_start_decode(&job, &n, data, size) != 0) {
    return 0;
  }
  if (n == 0 ||
      size != DLCP_WIRE_START_HDR_LEN + (size_t)n * DLCP_WIRE_START_ENTRY_LEN) {
    abort();
  }
  e = calloc(n, sizeof(*e));
  out = malloc(size);
  if (e == NULL || out == NULL) {
    abort();
  }
  for (i = 0; i < n; ++i) {
    dlcp_wire_start_entry_get(&e[i], data, i);
    if (e[i].xfer == 0 || e[i].loss_ppm >= DLCP_WIRE_PPM ||
        e[i].seg_size < DLCP_WIRE_MIN_SEG ||
        e[i].seg_size > DLCP_WIRE_MAX_SEG) {
      abort();
    }
  }
  if (dlcp_wire_start_encode(out, size, job, e, n) != (dlcp_ssize)size ||
      memcmp(out, data, size) != 0) {
    abort();
  }
  free(out);
  free(e);
  return 0;
}
