/*
 * simtime.h: simulated time and link speeds.
 *
 * Inside the simulator every instant and every duration is a 64-bit count
 * of picoseconds (dlcp_sim_ps).  Picoseconds make the serialization time of
 * one byte exact at every common line rate (80 ps at 100 Gbps, 20 ps at
 * 400 Gbps) while 2^64 ps still spans 213 days of simulated time.  Speeds
 * are bits per second in a uint64_t.  The helpers follow htsim's
 * timeFromUs / speedFromGbps; conversion to the core's nanoseconds happens
 * only where the simulator calls the protocol core.
 */
#ifndef DLCP_SIM_SIMTIME_H
#define DLCP_SIM_SIMTIME_H

#include <math.h>
#include <stdint.h>

/* Picoseconds of simulated time since the start of the run. */
typedef uint64_t dlcp_sim_ps;

/* "Never": later than any reachable simulated instant. */
#define DLCP_SIM_PS_NEVER UINT64_MAX

#define DLCP_SIM_PS_PER_NS 1000ull
#define DLCP_SIM_PS_PER_US 1000000ull
#define DLCP_SIM_PS_PER_MS 1000000000ull
#define DLCP_SIM_PS_PER_S 1000000000000ull

static inline dlcp_sim_ps dlcp_sim_time_from_ns(uint64_t ns) {
  return ns * DLCP_SIM_PS_PER_NS;
}

/* Rounds to the nearest picosecond; |us| must be >= 0. */
static inline dlcp_sim_ps dlcp_sim_time_from_us(double us) {
  return (dlcp_sim_ps)llround(us * 1e6);
}

static inline dlcp_sim_ps dlcp_sim_time_from_ms(double ms) {
  return (dlcp_sim_ps)llround(ms * 1e9);
}

static inline double dlcp_sim_time_to_us(dlcp_sim_ps t) {
  return (double)t / 1e6;
}

/* Converts to the core's nanoseconds, truncating. */
static inline uint64_t dlcp_sim_time_to_ns(dlcp_sim_ps t) {
  return t / DLCP_SIM_PS_PER_NS;
}

/* Link speed in bits per second from Gbit/s (rounded to 1 bit/s). */
static inline uint64_t dlcp_sim_speed_from_gbps(double gbps) {
  return (uint64_t)llround(gbps * 1e9);
}

static inline double dlcp_sim_speed_to_gbps(uint64_t bps) {
  return (double)bps / 1e9;
}

/*
 * dlcp_sim_serialization_ps returns the time |bytes| take on a wire of
 * |rate_bps| (> 0), rounded down to the picosecond.  It splits 8e12 / rate
 * into quotient and remainder so that nothing overflows for |bytes| up to
 * 2^24 (any packet, any rate up to 1 Tbit/s), and the result is exact
 * whenever the rate divides 8e12, which every round rate in Mbit/s does.
 */
static inline dlcp_sim_ps dlcp_sim_serialization_ps(uint64_t bytes,
                                                    uint64_t rate_bps) {
  const uint64_t bit_ps = 8ull * DLCP_SIM_PS_PER_S;
  uint64_t q = bit_ps / rate_bps;
  uint64_t r = bit_ps % rate_bps;
  return bytes * q + (bytes * r) / rate_bps;
}

#endif /* DLCP_SIM_SIMTIME_H */
