/*
 * ina_cc.h: PANAMA's congestion control for a host's in-network
 * aggregation traffic (the PANAMA seed), as a window of outstanding groups.
 *
 * Results are the implicit acknowledgements: every switch ORs the ECN
 * codepoints of a group's contributions into its result, so a result
 * marked CE says some contribution of the group crossed a congested queue
 * on its way up, and the result's own IP header says whether it crossed
 * one on its way down to this rank (the caller decides; coll/ina.c counts
 * either).
 * The window follows DCTCP (Alizadeh et al., SIGCOMM 2010): slow start
 * (one group more per result) until the first mark, then one group per
 * window of results; once per window, alpha = (1 - g) alpha + g F with F
 * the fraction of marked results and g = 1/16, and a window with marks
 * cuts cwnd to cwnd (1 - alpha / 2).  Timeouts leave it alone: PANAMA
 * runs on a lossless (PFC) fabric where a timeout means corruption, and a
 * group's result is mostly late because another rank's contribution is
 * (measured: halving on timeouts made a rank whose peers were slower cut
 * its window to one group and an 8-rank iteration take 6.3 ms instead of
 * 0.8).  The switch's cap (the aggregators the job may hold, carried in every
 * result and converted to groups by the caller) bounds it from above, as
 * PANAMA's cwnd_cap; |max| (the operation's fixed window) too, and the
 * window never drops below one group.
 *
 * Plain arithmetic on caller-owned state: no allocation, no clock.
 */
#ifndef DLCP_COLL_INA_CC_H
#define DLCP_COLL_INA_CC_H

#include <stdbool.h>
#include <stdint.h>

typedef struct dlcp_ina_cc {
  double cwnd;     /* groups */
  double ssthresh; /* groups; slow start below it */
  double alpha;    /* DCTCP's estimate of the marked fraction */
  uint32_t max;    /* the window never exceeds this */
  uint32_t round;  /* results left in this window's round */
  uint32_t acked, marked; /* results of this round, and marked ones */
  uint64_t cuts;   /* windows cut for marks */
} dlcp_ina_cc;

/* dlcp_ina_cc_init starts at |init| groups (clamped to 1..|max|),
 * alpha 1 (DCTCP's start: the first marked round halves the window). */
void dlcp_ina_cc_init(dlcp_ina_cc *cc, uint32_t init, uint32_t max);

/* A group's first result: |marked| if its ECN bits say CE; |cap_groups|
 * the switch's cap in groups (UINT32_MAX: none). */
void dlcp_ina_cc_on_result(dlcp_ina_cc *cc, bool marked, uint32_t cap_groups);

/* The groups that may be outstanding now: 1..max. */
uint32_t dlcp_ina_cc_window(const dlcp_ina_cc *cc);

#endif /* DLCP_COLL_INA_CC_H */
