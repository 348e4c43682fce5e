/*
 * bits.h: scans of the bit arrays that record which segments of a transfer
 * are held (bit i of word i / 64 set: segment i arrived).
 *
 * A word at a time: a 64 MiB transfer of 1428-byte segments is 47,000
 * bits, and the receiver walks its holes at every request it answers.
 * Bits at or past |n| in the last word are padding, whatever their value.
 */
#ifndef DLCP_WIRE_BITS_H
#define DLCP_WIRE_BITS_H

#include <stdbool.h>
#include <stdint.h>

/* Index of the first bit at or after |p|, below |n|, equal to |set|; |n| if
 * there is none. */
static inline uint32_t dlcp_bits_next(const uint64_t *words, uint32_t p,
                                      uint32_t n, bool set) {
  if (p >= n) {
    return n;
  }
  uint64_t flip = set ? 0 : ~(uint64_t)0;
  uint64_t nw = ((uint64_t)n + 63) / 64;
  uint64_t i = p / 64;
  uint64_t w = (words[i] ^ flip) & (~(uint64_t)0 << (p % 64));
  while (w == 0) {
    if (++i >= nw) {
      return n;
    }
    w = words[i] ^ flip;
  }
  uint64_t idx = i * 64 + (uint64_t)__builtin_ctzll(w);
  return idx < n ? (uint32_t)idx : n;
}

/* The first missing segment (clear bit) at or after |p|, or |n|. */
static inline uint32_t dlcp_bits_next_missing(const uint64_t *words,
                                              uint32_t p, uint32_t n) {
  return dlcp_bits_next(words, p, n, false);
}

/* The first held segment (set bit) at or after |p|, or |n|. */
static inline uint32_t dlcp_bits_next_held(const uint64_t *words, uint32_t p,
                                           uint32_t n) {
  return dlcp_bits_next(words, p, n, true);
}

#endif
