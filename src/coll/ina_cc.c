/*
 * ina_cc.c: PANAMA's window for aggregation traffic (model in ina_cc.h).
 */
#include "coll/ina_cc.h"

#define GAIN (1.0 / 16.0)

static void clamp(dlcp_ina_cc *cc) {
  if (cc->cwnd > cc->max) {
    cc->cwnd = cc->max;
  }
  if (cc->cwnd < 1.0) {
    cc->cwnd = 1.0;
  }
}

static void new_round(dlcp_ina_cc *cc) {
  cc->round = (uint32_t)cc->cwnd;
  cc->acked = cc->marked = 0;
}

void dlcp_ina_cc_init(dlcp_ina_cc *cc, uint32_t init, uint32_t max) {
  cc->max = max ? max : 1u;
  cc->cwnd = init;
  clamp(cc);
  cc->ssthresh = cc->max;
  cc->alpha = 1.0;
  cc->cuts = 0;
  new_round(cc);
}

void dlcp_ina_cc_on_result(dlcp_ina_cc *cc, bool marked, uint32_t cap_groups) {
  cc->acked++;
  cc->marked += marked;
  if (cc->cwnd < cc->ssthresh && !marked) {
    cc->cwnd += 1.0;
  } else {
    cc->cwnd += 1.0 / cc->cwnd;
  }
  if (cc->acked >= cc->round) {
    double f = (double)cc->marked / (double)cc->acked;
    cc->alpha = (1.0 - GAIN) * cc->alpha + GAIN * f;
    if (cc->marked > 0) {
      cc->cwnd *= 1.0 - cc->alpha / 2.0;
      cc->ssthresh = cc->cwnd;
      cc->cuts++;
    }
    clamp(cc);
    new_round(cc);
  }
  if (cap_groups < cc->cwnd) {
    cc->cwnd = cap_groups;
  }
  clamp(cc);
}

uint32_t dlcp_ina_cc_window(const dlcp_ina_cc *cc) {
  return (uint32_t)cc->cwnd;
}
