/*
 * rtt.h: RFC 6298's smoothed round-trip time and its variation, the one
 * estimator behind MLT's drain interval, the control channel's RTO and an
 * INA host's RTO.  Header-only: three integer updates per sample.
 */
#ifndef DLCP_PROTO_RTT_H
#define DLCP_PROTO_RTT_H

#include <stdint.h>

#include "dlcp/dlcp_types.h"

/* dlcp_rtt_hold_ns: how long this end held a packet that |arrived| before
 * acknowledging it |now|, saturated to the 32-bit hold of an ACK or CACK
 * (the peer takes it out of its RTT sample). */
static inline uint32_t dlcp_rtt_hold_ns(dlcp_tstamp arrived, dlcp_tstamp now) {
  dlcp_duration held = now > arrived ? now - arrived : 0;
  return held > UINT32_MAX ? UINT32_MAX : (uint32_t)held;
}

/* dlcp_rtt_smooth folds |sample| into an estimate that already has one
 * (gains 1/8 and 1/4). */
static inline void dlcp_rtt_smooth(dlcp_duration *srtt, dlcp_duration *rttvar,
                                   dlcp_duration sample) {
  dlcp_duration err = sample > *srtt ? sample - *srtt : *srtt - sample;
  *rttvar = (3 * *rttvar + err) / 4;
  *srtt = (7 * *srtt + sample) / 8;
}

/* dlcp_rtt_sample takes |sample| into an estimate whose |*srtt| is 0 until
 * the first one (srtt = R, rttvar = R / 2); |*srtt| stays at least 1, so
 * 0 keeps meaning "no sample". */
static inline void dlcp_rtt_sample(dlcp_duration *srtt, dlcp_duration *rttvar,
                                   dlcp_duration sample) {
  if (*srtt == 0) {
    *srtt = sample;
    *rttvar = sample / 2;
  } else {
    dlcp_rtt_smooth(srtt, rttvar, sample);
  }
  if (*srtt == 0) {
    *srtt = 1;
  }
}

/* dlcp_rtt_timeout is RFC 6298's RTO of an estimate: srtt + 4 rttvar. */
static inline dlcp_duration dlcp_rtt_timeout(dlcp_duration srtt,
                                             dlcp_duration rttvar) {
  return srtt + 4 * rttvar;
}

#endif /* DLCP_PROTO_RTT_H */
