/*
 * ranges.c: the range list format (ranges.h).
 */
#include "wire/ranges.h"

#include "wire/bytes.h"

void dlcp_wire_put_range(uint8_t *b, size_t i, uint64_t offset,
                         uint64_t len) {
  uint8_t *p = b + i * DLCP_WIRE_RANGE_LEN;
  dlcp_put_u64(dlcp_put_u64(p, offset), len);
}

void dlcp_wire_get_range(const uint8_t *b, size_t i, uint64_t *offset,
                         uint64_t *len) {
  const uint8_t *p = b + i * DLCP_WIRE_RANGE_LEN;
  *offset = dlcp_get_u64(p);
  *len = dlcp_get_u64(p + 8);
}
