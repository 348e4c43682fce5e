/*
 * bytes.h: little-endian load and store helpers for the wire formats.
 *
 * Every access goes through single bytes and shifts, or memcpy, so the
 * helpers work at any alignment and on any host byte order without
 * unaligned casts (which are undefined behaviour in C and trap on some
 * targets).  Compilers fold these into plain loads and stores on
 * little-endian machines.  Callers check lengths first: the helpers never
 * do.
 */
#ifndef DLCP_WIRE_BYTES_H
#define DLCP_WIRE_BYTES_H

#include <stdint.h>
#include <string.h>

/* The 32-bit ones are a memcpy, byte-swapped on a big-endian host: the
 * same bytes as shifts, but a loop of them vectorizes (GCC 12 does not
 * merge four byte stores inside a loop it vectorizes), which the INA
 * hosts' scaling and the switch's sums are. */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define DLCP_WIRE_LE32(v) __builtin_bswap32(v)
#else
#define DLCP_WIRE_LE32(v) (v)
#endif

static inline uint8_t *dlcp_put_u8(uint8_t *p, uint8_t v) {
  p[0] = v;
  return p + 1;
}

static inline uint8_t *dlcp_put_u16(uint8_t *p, uint16_t v) {
  p[0] = (uint8_t)v;
  p[1] = (uint8_t)(v >> 8);
  return p + 2;
}

static inline uint8_t *dlcp_put_u32(uint8_t *p, uint32_t v) {
  v = DLCP_WIRE_LE32(v);
  memcpy(p, &v, 4);
  return p + 4;
}

static inline uint8_t *dlcp_put_u64(uint8_t *p, uint64_t v) {
  dlcp_put_u32(p, (uint32_t)v);
  dlcp_put_u32(p + 4, (uint32_t)(v >> 32));
  return p + 8;
}

static inline uint8_t dlcp_get_u8(const uint8_t *p) {
  return p[0];
}

static inline uint16_t dlcp_get_u16(const uint8_t *p) {
  return (uint16_t)(p[0] | (uint16_t)(p[1] << 8));
}

static inline uint32_t dlcp_get_u32(const uint8_t *p) {
  uint32_t v;
  memcpy(&v, p, 4);
  return DLCP_WIRE_LE32(v);
}

static inline uint64_t dlcp_get_u64(const uint8_t *p) {
  return (uint64_t)dlcp_get_u32(p) | ((uint64_t)dlcp_get_u32(p + 4) << 32);
}

#endif /* DLCP_WIRE_BYTES_H */
