/*
 * The rate controller keeps its rate as a double in bits per second: the
 * multiplicative decrease needs fractions, and a double holds any realistic
 * rate (up to 2^53 bps) exactly enough.  Pacing converts the rate into an
 * integer inter-packet gap in ns, rounding up.
 */
#include "proto/rate.h"

#include <stdbool.h>

void dlcp_rate_params_default(dlcp_rate_params *p, uint64_t line_rate_bps) {
  p->line_rate_bps = line_rate_bps;
  p->min_rate_bps = line_rate_bps / 1000 > 0 ? line_rate_bps / 1000 : 1;
  p->t_low_ns = 12500;
  p->t_high_ns = 125000;
  p->alpha_bps = 40000000;
  p->beta = 0.8;
  p->ecn_gain = 1.0 / 16.0;
  p->ack_every = 10;
  p->hai_after = 5;
  p->delay_filter = 4;
  p->min_window_bytes = 2 * 1500;
  p->queue_pkts = DLCP_RATE_DEFAULT_QUEUE_PKTS;
  p->pkt_bytes = 1500;
  p->rise_to_share = false;
  /* One RTT at line rate (the seed's start), over a 50 us RTT; without
   * overflow: line_rate_bps * 50e-6 / 8. */
  uint64_t iw = line_rate_bps / 160000;
  p->initial_window_bytes = iw > p->min_window_bytes ? iw
                                                     : p->min_window_bytes;
}

int dlcp_rate_params_check(const dlcp_rate_params *p) {
  if (p->line_rate_bps == 0 || p->min_rate_bps == 0 ||
      p->min_rate_bps > p->line_rate_bps || p->t_high_ns <= p->t_low_ns ||
      !(p->beta > 0.0 && p->beta <= 1.0) ||
      !(p->ecn_gain > 0.0 && p->ecn_gain <= 1.0) || p->ack_every == 0 ||
      p->delay_filter == 0 || p->delay_filter > DLCP_RATE_FILTER_MAX ||
      p->min_window_bytes == 0 || p->initial_window_bytes == 0 ||
      (p->queue_pkts > 0 && p->pkt_bytes == 0)) {
    return DLCP_ERR_CONFIG;
  }
  return 0;
}

void dlcp_rate_init(dlcp_rate *r, const dlcp_rate_params *p) {
  r->params = *p;
  r->rate_bps = (double)p->line_rate_bps;
  r->base_rtt_ns = 0;
  r->srtt_ns = 0;
  r->prev_rtt_ns = 0;
  r->samples = 0;
  r->calm_since_ns = 0;
  /* DCTCP starts at 1: the first marks cut by half, before the estimate
   * has learnt anything milder. */
  r->ecn_alpha = 1.0;
  r->epoch_acked = 0;
  r->epoch_marked = 0;
  r->epoch_end_ns = 0;
  r->hold_until_ns = 0;
  r->window_bytes = (double)p->initial_window_bytes;
}

static dlcp_duration window_rtt(const dlcp_rate *r, double scale);

/* How far T_low and T_high stretch so that T_high holds queue_pkts of
 * the flow's own packets at its current rate (the "own queue" rule). */
static double threshold_scale(const dlcp_rate *r) {
  const dlcp_rate_params *p = &r->params;
  if (p->queue_pkts == 0) {
    return 1.0;
  }
  double own_ns =
      (double)p->queue_pkts * (double)p->pkt_bytes * 8e9 / r->rate_bps;
  double scale = own_ns / (double)p->t_high_ns;
  return scale > 1.0 ? scale : 1.0;
}

/* The rate stays within [min, line], and never below what the smallest
 * window sends per RTT: a pacer slower than the window's floor only
 * starves a flow that many others share a marking queue with (each mark
 * halves it again while the window cannot shrink any further; seed's PS
 * scenario: a 100 KB pull paced down to 0.18 Gbit/s ended 250 us after its
 * host's others, docs/protocol.md). */
static void clamp(dlcp_rate *r) {
  const dlcp_rate_params *p = &r->params;
  double lo = (double)p->min_rate_bps;
  /* The seed's T_high, not the stretched one: stretched, the floor would
   * fall with the rate it bounds. */
  dlcp_duration rtt = window_rtt(r, 1.0);
  if (rtt > 0) {
    double window_floor = (double)p->min_window_bytes * 8e9 / (double)rtt;
    lo = window_floor > lo ? window_floor : lo;
  }
  if (lo > (double)p->line_rate_bps) {
    lo = (double)p->line_rate_bps;
  }
  if (r->rate_bps > (double)p->line_rate_bps) {
    r->rate_bps = (double)p->line_rate_bps;
  }
  if (r->rate_bps < lo) {
    r->rate_bps = lo;
  }
}

/* DCTCP's estimate, once per RTT epoch. */
static void ecn_epoch(dlcp_rate *r, uint32_t acked, uint32_t ce,
                      dlcp_duration rtt_ns, dlcp_tstamp now) {
  r->epoch_acked += acked;
  r->epoch_marked += ce;
  if (now < r->epoch_end_ns) {
    return;
  }
  if (r->epoch_acked > 0) {
    double f = (double)r->epoch_marked / (double)r->epoch_acked;
    double g = r->params.ecn_gain;
    r->ecn_alpha = (1.0 - g) * r->ecn_alpha + g * f;
  }
  r->epoch_acked = 0;
  r->epoch_marked = 0;
  r->epoch_end_ns = now + rtt_ns;
}

/* The additive step: the seed's alpha per ack_every packets, or one
 * packet per base RTT of window growth (DCTCP's congestion avoidance)
 * when that is more, then doubled once per base RTT the path has been
 * calm (no mark, no cut, queueing below T_low) beyond hai_after RTTs. */
static dlcp_rate_move increase(dlcp_rate *r, const dlcp_rate_ack *ack,
                               uint32_t acked, dlcp_tstamp now) {
  const dlcp_rate_params *p = &r->params;
  double step = (double)p->alpha_bps * (double)acked / (double)p->ack_every;
  if (ack->acked_bytes > 0 && r->window_bytes > 0.0) {
    /* window += mss * acked / window, as a rate: * 8 / base RTT */
    double mss = (double)ack->acked_bytes / (double)acked;
    double ca = 8e9 * mss * (double)ack->acked_bytes / r->window_bytes /
                (double)r->base_rtt_ns;
    step = ca > step ? ca : step;
  }
  uint64_t calm_rtts =
      now > r->calm_since_ns ? (now - r->calm_since_ns) / r->base_rtt_ns : 0;
  if (p->hai_after > 0 && calm_rtts > p->hai_after) {
    uint64_t k = calm_rtts - p->hai_after;
    double grown = step * (double)(1ull << (k < 32 ? k : 32));
    step = grown < r->rate_bps ? grown : r->rate_bps;
  }
  r->rate_bps += step;
  return DLCP_RATE_INCREASE;
}

/* The receiver's fair share, from its grant of two BDPs divided among its
 * senders, taken at once when the path has been calm for a base RTT. */
static void rise_to_share(dlcp_rate *r, uint64_t grant_bytes,
                          dlcp_tstamp now) {
  if (!r->params.rise_to_share || grant_bytes == 0 ||
      now < r->calm_since_ns + r->base_rtt_ns) {
    return;
  }
  double share = (double)grant_bytes * 8e9 / (2.0 * (double)r->base_rtt_ns);
  if (share > r->rate_bps) {
    r->rate_bps = share;
  }
}

/* The RTT the window covers: the smoothed RTT, but no more than the base
 * plus T_high, stretched by |scale| (the own-queue rule).  On a host
 * stack (loopback, a VM) the base RTT is a lucky minimum and the typical
 * RTT several times it; a window of rate x base there caps the flow far
 * below its rate (loopback 4-rank 64 MiB ring: 160-340 ms against 113-125
 * ms).  Beyond base + T_high the excess is queueing the rate control is
 * cutting anyway; below the stretched T_high, a flow with a small share
 * would otherwise keep a few packets in flight over an RTT that others'
 * standing queue makes milliseconds long (docs/protocol.md, "Beside
 * TCP"). */
static dlcp_duration window_rtt(const dlcp_rate *r, double scale) {
  dlcp_duration cap =
      r->base_rtt_ns + (dlcp_duration)((double)r->params.t_high_ns * scale);
  return r->srtt_ns < cap ? r->srtt_ns : cap;
}

/* The rate a cut starts from: the nominal rate, or the one the window
 * allows (a window per base RTT) if that is less.  The window only grows
 * while it is used, so it tracks what the flow achieves. */
static void cut_from_window(dlcp_rate *r, double scale) {
  double allowed = r->window_bytes * 8e9 / (double)window_rtt(r, scale);
  if (allowed < r->rate_bps) {
    r->rate_bps = allowed;
  }
}

dlcp_rate_move dlcp_rate_on_ack(dlcp_rate *r, const dlcp_rate_ack *ack,
                                dlcp_tstamp now) {
  const dlcp_rate_params *p = &r->params;
  dlcp_duration rtt_ns = ack->rtt_ns;
  uint32_t acked_pkts = ack->acked_pkts, ce_pkts = ack->ce_pkts;
  if (rtt_ns == 0) {
    rtt_ns = 1;
  }
  if (acked_pkts == 0) {
    acked_pkts = 1;
  }
  if (ce_pkts > acked_pkts) {
    ce_pkts = acked_pkts;
  }
  if (r->base_rtt_ns == 0) {
    r->calm_since_ns = now;
  }
  if (r->base_rtt_ns == 0 || rtt_ns < r->base_rtt_ns) {
    r->base_rtt_ns = rtt_ns;
  }
  r->srtt_ns = r->srtt_ns == 0 ? rtt_ns : (7 * r->srtt_ns + rtt_ns) / 8;
  /* The delay signal: the smallest of the last delay_filter samples.  A
   * queue raises every sample; scheduling jitter on a host stack raises
   * some, and the minimum drops it. */
  r->recent[r->samples % p->delay_filter] = rtt_ns;
  dlcp_duration sig = rtt_ns;
  uint32_t n = r->samples + 1 < p->delay_filter ? (uint32_t)r->samples + 1
                                                 : p->delay_filter;
  for (uint32_t i = 0; i < n; i++) {
    sig = r->recent[i] < sig ? r->recent[i] : sig;
  }
  dlcp_duration q = sig - r->base_rtt_ns;
  double scale = threshold_scale(r);
  double t_low = (double)p->t_low_ns * scale;
  double t_high = (double)p->t_high_ns * scale;
  /* The gradient needs two samples; the first counts as "not rising". */
  bool rising = r->samples > 0 && sig > r->prev_rtt_ns;
  r->prev_rtt_ns = sig;
  r->samples++;
  ecn_epoch(r, acked_pkts, ce_pkts, rtt_ns, now);

  dlcp_rate_move move = DLCP_RATE_HOLD;
  bool may_cut = now >= r->hold_until_ns;
  if (ce_pkts > 0 || (double)q >= t_low) {
    r->calm_since_ns = now;
  }
  if (ce_pkts > 0) {
    if (may_cut) {
      cut_from_window(r, scale);
      r->rate_bps *= 1.0 - r->ecn_alpha / 2.0;
      move = DLCP_RATE_DECREASE_ECN;
    }
  } else if ((double)q > t_high) {
    /* Above T_high the queue is too long whatever its trend, so the
     * decrease is checked before the gradient (TIMELY's order). */
    if (may_cut) {
      double ratio = t_high / (double)q;
      cut_from_window(r, scale);
      r->rate_bps *= 1.0 - p->beta * (1.0 - ratio);
      move = DLCP_RATE_DECREASE_DELAY;
    }
  } else if ((double)q < t_low || !rising) {
    move = increase(r, ack, acked_pkts, now);
    rise_to_share(r, ack->grant_bytes, now);
  }
  if (move == DLCP_RATE_DECREASE_ECN || move == DLCP_RATE_DECREASE_DELAY) {
    /* The next sample that can show this cut's effect is one RTT away. */
    r->hold_until_ns = now + rtt_ns;
  }
  clamp(r);
  /* The window grows by what was acknowledged, towards a BDP at the rate,
   * while at least half of it is in use (a flow held back by its host or
   * its application does not inflate it), and follows a lower target
   * down at once. */
  double target =
      r->rate_bps * (double)window_rtt(r, threshold_scale(r)) / 8e9;
  bool used = (double)(ack->inflight_bytes + ack->acked_bytes) * 2.0 >=
              r->window_bytes;
  if (move != DLCP_RATE_DECREASE_ECN && move != DLCP_RATE_DECREASE_DELAY &&
      used && r->window_bytes < target) {
    r->window_bytes += (double)ack->acked_bytes;
  }
  if (r->window_bytes > target) {
    r->window_bytes = target;
  }
  if (r->window_bytes < (double)p->min_window_bytes) {
    r->window_bytes = (double)p->min_window_bytes;
  }
  return move;
}

uint64_t dlcp_rate_window_bytes(const dlcp_rate *r) {
  return r->window_bytes >= 1.8e19 ? UINT64_MAX : (uint64_t)r->window_bytes;
}

void dlcp_rate_restart(dlcp_rate *r) {
  double iw = (double)r->params.initial_window_bytes;
  if (r->window_bytes > iw) {
    r->window_bytes = iw;
  }
}

dlcp_duration dlcp_rate_tx_time(const dlcp_rate *r, uint64_t bytes) {
  double ns = (double)bytes * 8.0 * 1e9 / r->rate_bps;
  dlcp_duration whole = (dlcp_duration)ns;
  return (double)whole < ns ? whole + 1 : whole;
}
