/*
 * One uniform draw per packet decides its fate, checked in a fixed order
 * (drop, duplicate, reorder, delay), so the probabilities are those
 * configured as long as they sum to at most 1, and a given seed replays
 * the same decisions for the same sequence of packets.
 */
#include "rt/fault.h"

void dlcp_fault_init(dlcp_fault *f, const dlcp_rt_fault *cfg, uint64_t salt) {
  f->cfg = *cfg;
  dlcp_rng_seed(&f->rng, cfg->seed ^ (salt * 0x9E3779B97F4A7C15ull));
  f->active = cfg->drop > 0 || cfg->dup > 0 || cfg->reorder > 0 ||
              cfg->delay > 0;
}

dlcp_fault_verdict dlcp_fault_decide(dlcp_fault *f, dlcp_duration *hold_ns) {
  if (!f->active) {
    return DLCP_FAULT_PASS;
  }
  double u = dlcp_rng_unit(&f->rng);
  dlcp_duration delay = (dlcp_duration)f->cfg.delay_us * 1000u;
  if (u < f->cfg.drop) {
    return DLCP_FAULT_DROP;
  }
  u -= f->cfg.drop;
  if (u < f->cfg.dup) {
    return DLCP_FAULT_DUP;
  }
  u -= f->cfg.dup;
  if (u < f->cfg.reorder) {
    *hold_ns = delay > 0 ? dlcp_rng_below(&f->rng, delay) + 1 : 1;
    return DLCP_FAULT_HOLD;
  }
  u -= f->cfg.reorder;
  if (u < f->cfg.delay) {
    *hold_ns = delay;
    return DLCP_FAULT_HOLD;
  }
  return DLCP_FAULT_PASS;
}
