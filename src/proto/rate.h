/*
 * rate.h: MLT's minimal, TIMELY-like rate control.
 *
 * A flow starts at line rate.  Every ACK echoes a data packet's send time
 * stamp; the sender turns it into an RTT sample and updates its rate:
 *
 *   rtt < T_low                              rate += alpha
 *   rtt > T_high                             rate *= 1 - beta(1 - T_high/rtt)
 *   T_low..T_high and the RTT fell           rate += alpha
 *   T_low..T_high and the RTT did not fall   rate unchanged
 *
 * with T_low 12.5 us, T_high 125 us, alpha 40 Mbps and beta 0.8 by default
 * (the MLT seed, section 4.2.3.3).  The rate stays within [min, line].
 * MLT tolerates loss, so it needs no more than this to avoid congestion
 * collapse.
 */
#ifndef DLCP_PROTO_RATE_H
#define DLCP_PROTO_RATE_H

#include <stdint.h>

#include "dlcp/dlcp_types.h"

typedef struct dlcp_rate_params {
  uint64_t line_rate_bps; /* start rate and ceiling, > 0 */
  uint64_t min_rate_bps;  /* floor, > 0, <= line_rate_bps */
  dlcp_duration t_low_ns;
  dlcp_duration t_high_ns; /* > t_low_ns */
  uint64_t alpha_bps;      /* additive increase step */
  double beta;             /* multiplicative decrease factor, in (0, 1] */
} dlcp_rate_params;

typedef struct dlcp_rate {
  dlcp_rate_params params;
  double rate_bps;
  dlcp_duration prev_rtt_ns; /* 0 before the first sample */
  uint64_t samples;
} dlcp_rate;

/* dlcp_rate_params_default fills the seed's defaults for a |line_rate_bps|
 * link. */
void dlcp_rate_params_default(dlcp_rate_params *p, uint64_t line_rate_bps);

/* dlcp_rate_params_check returns 0 or DLCP_ERR_CONFIG. */
int dlcp_rate_params_check(const dlcp_rate_params *p);

void dlcp_rate_init(dlcp_rate *r, const dlcp_rate_params *p);

/* dlcp_rate_on_rtt applies one RTT sample. */
void dlcp_rate_on_rtt(dlcp_rate *r, dlcp_duration rtt_ns);

/* dlcp_rate_tx_time returns how long |bytes| take at the current rate, in
 * ns, rounded up so pacing never exceeds the rate. */
dlcp_duration dlcp_rate_tx_time(const dlcp_rate *r, uint64_t bytes);

#endif /* DLCP_PROTO_RATE_H */
