/*
 * The rate controller keeps its rate as a double in bits per second: the
 * multiplicative decrease needs fractions, and a double holds any realistic
 * rate (up to 2^53 bps) exactly enough.  Pacing converts the rate into an
 * integer inter-packet gap in ns, rounding up.
 */
#include "proto/rate.h"

void dlcp_rate_params_default(dlcp_rate_params *p, uint64_t line_rate_bps) {
  p->line_rate_bps = line_rate_bps;
  p->min_rate_bps = line_rate_bps / 1000 > 0 ? line_rate_bps / 1000 : 1;
  p->t_low_ns = 12500;
  p->t_high_ns = 125000;
  p->alpha_bps = 40000000;
  p->beta = 0.8;
}

int dlcp_rate_params_check(const dlcp_rate_params *p) {
  if (p->line_rate_bps == 0 || p->min_rate_bps == 0 ||
      p->min_rate_bps > p->line_rate_bps || p->t_high_ns <= p->t_low_ns ||
      !(p->beta > 0.0 && p->beta <= 1.0)) {
    return DLCP_ERR_CONFIG;
  }
  return 0;
}

void dlcp_rate_init(dlcp_rate *r, const dlcp_rate_params *p) {
  r->params = *p;
  r->rate_bps = (double)p->line_rate_bps;
  r->prev_rtt_ns = 0;
  r->samples = 0;
}

void dlcp_rate_on_rtt(dlcp_rate *r, dlcp_duration rtt_ns) {
  const dlcp_rate_params *p = &r->params;
  /* The gradient needs two samples; the first counts as "not rising". */
  int falling = r->samples > 0 && rtt_ns < r->prev_rtt_ns;
  /* Above T_high the queue is too long whatever its trend, so the decrease
   * is checked before the gradient (TIMELY's order). */
  if (rtt_ns < p->t_low_ns) {
    r->rate_bps += (double)p->alpha_bps;
  } else if (rtt_ns > p->t_high_ns) {
    double ratio = (double)p->t_high_ns / (double)rtt_ns;
    r->rate_bps *= 1.0 - p->beta * (1.0 - ratio);
  } else if (falling) {
    r->rate_bps += (double)p->alpha_bps;
  }
  if (r->rate_bps > (double)p->line_rate_bps) {
    r->rate_bps = (double)p->line_rate_bps;
  }
  if (r->rate_bps < (double)p->min_rate_bps) {
    r->rate_bps = (double)p->min_rate_bps;
  }
  r->prev_rtt_ns = rtt_ns;
  r->samples++;
}

dlcp_duration dlcp_rate_tx_time(const dlcp_rate *r, uint64_t bytes) {
  double ns = (double)bytes * 8.0 * 1e9 / r->rate_bps;
  dlcp_duration whole = (dlcp_duration)ns;
  return (double)whole < ns ? whole + 1 : whole;
}
