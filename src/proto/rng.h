/*
 * rng.h: the seeded pseudo-random generator the core uses wherever it needs
 * randomness (importance sampling, random path choice).  xoshiro256** seeded
 * through splitmix64: fast, small state, and the same seed always gives the
 * same stream, which is what makes the tests and the simulator repeatable.
 */
#ifndef DLCP_PROTO_RNG_H
#define DLCP_PROTO_RNG_H

#include <stdint.h>

typedef struct dlcp_rng {
  uint64_t s[4];
} dlcp_rng;

/* dlcp_rng_seed fills |rng| from |seed|; any seed, 0 included, is valid. */
void dlcp_rng_seed(dlcp_rng *rng, uint64_t seed);

/* dlcp_rng_next returns the next 64 uniformly distributed bits. */
uint64_t dlcp_rng_next(dlcp_rng *rng);

/* dlcp_rng_below returns a uniform integer in [0, bound); bound > 0. */
uint64_t dlcp_rng_below(dlcp_rng *rng, uint64_t bound);

/* dlcp_rng_unit returns a uniform double in [0, 1). */
double dlcp_rng_unit(dlcp_rng *rng);

/* dlcp_rng_mix returns splitmix64's finalizer of |z|: a stateless hash
 * whose every output bit depends on every input bit, for draws that must
 * follow from a key (a seed and an id) rather than from a stream; inline
 * because the simulator's switches hash every ECMP packet with it. */
static inline uint64_t dlcp_rng_mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

#endif /* DLCP_PROTO_RNG_H */
