/*
 * xoshiro256** (Blackman and Vigna) with splitmix64 seeding.  The generator
 * lives in the caller's state, never in a global, so two connections or two
 * simulated hosts draw independent, reproducible streams.
 */
#include "proto/rng.h"

static uint64_t rotl(uint64_t x, int k) {
  return (x << k) | (x >> (64 - k));
}

static uint64_t splitmix64(uint64_t *x) {
  return dlcp_rng_mix(*x += 0x9E3779B97F4A7C15ull);
}

void dlcp_rng_seed(dlcp_rng *rng, uint64_t seed) {
  for (int i = 0; i < 4; i++) {
    rng->s[i] = splitmix64(&seed);
  }
}

uint64_t dlcp_rng_next(dlcp_rng *rng) {
  uint64_t *s = rng->s;
  uint64_t result = rotl(s[1] * 5, 7) * 9;
  uint64_t t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = rotl(s[3], 45);
  return result;
}

uint64_t dlcp_rng_below(dlcp_rng *rng, uint64_t bound) {
  /* Rejection keeps the result exactly uniform: draws from the incomplete
   * last block of size (2^64 mod bound) are thrown away. */
  uint64_t threshold = (0 - bound) % bound;
  for (;;) {
    uint64_t r = dlcp_rng_next(rng);
    if (r >= threshold) {
      return r % bound;
    }
  }
}

double dlcp_rng_unit(dlcp_rng *rng) {
  return (double)(dlcp_rng_next(rng) >> 11) * 0x1.0p-53;
}
