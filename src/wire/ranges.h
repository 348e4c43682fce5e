/*
 * ranges.h: the wire format of a list of element ranges, as the
 * collectives' loss agreement (src/coll/agree.c) sends it: 16 bytes per
 * range, little-endian offset u64 then length u64, no header (the count
 * travels in the NOTE before it).
 */
#ifndef DLCP_WIRE_RANGES_H
#define DLCP_WIRE_RANGES_H

#include <stddef.h>
#include <stdint.h>

#define DLCP_WIRE_RANGE_LEN 16u

/* dlcp_wire_put_range writes range |i| of a list starting at |b|. */
void dlcp_wire_put_range(uint8_t *b, size_t i, uint64_t offset, uint64_t len);

/* dlcp_wire_get_range reads range |i| of the list at |b| (unchecked: the
 * reader checks the values against its vector). */
void dlcp_wire_get_range(const uint8_t *b, size_t i, uint64_t *offset,
                         uint64_t *len);

#endif /* DLCP_WIRE_RANGES_H */
