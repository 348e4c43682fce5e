/*
 * mlt_tune.h: MLT's rate-control parameters for a segment size.
 *
 * The seed's thresholds (12.5 / 125 us) and step (40 Mbps per ACK of 10
 * packets) fit MTU-sized packets through switches.  A path with large
 * datagrams (loopback, 64 KiB) has host processing, not switch queues, in
 * its RTT: each ACK then covers 45x the bytes and a batch of received
 * datagrams delays it by ~100 us.  So the step scales with the segment
 * (the same increase per byte acknowledged), and the thresholds scale 20x
 * beyond jumbo frames.  Policy of the protocol, so it lives here and every
 * driver that picks a segment size derives its config the same way.
 */
#ifndef DLCP_PROTO_MLT_TUNE_H
#define DLCP_PROTO_MLT_TUNE_H

#include <stdint.h>

#include "proto/mlt.h"

/* The segment the seed's alpha was given for (a 1500-byte frame). */
#define DLCP_MLT_TUNE_REF_SEGMENT 1456u
/* Beyond jumbo frames the RTT is host processing: thresholds x20. */
#define DLCP_MLT_TUNE_JUMBO_SEGMENT 9000u
#define DLCP_MLT_TUNE_HOST_RTT_FACTOR 20u

/*
 * dlcp_mlt_config_tune_segment sets |cfg->segment_size| to |segment_size|
 * and scales |cfg|'s alpha_bps and, beyond jumbo frames, t_low_ns and
 * t_high_ns from the values |cfg| holds (the defaults, normally).  Call it
 * before applying explicit threshold overrides.
 */
void dlcp_mlt_config_tune_segment(dlcp_mlt_config *cfg, uint32_t segment_size);

#endif /* DLCP_PROTO_MLT_TUNE_H */
