/*
 * rate_test: MLT's congestion controller on synthetic RTT / ECN sequences,
 * with the seed's defaults (T_low 12.5 us, T_high 125 us above the base
 * RTT, alpha 40 Mbps per 10 packets, beta 0.8) and DCTCP's g = 1/16.
 * Every expected rate is computed by hand from the rules in rate.h.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "proto/rate.h"

#define LINE 10000000000ull /* 10 Gbps */
#define ALPHA 40000000.0
#define BIG (1ull << 40) /* bytes in flight: the flow uses its whole rate */

/* A controller whose window never limits (a huge initial window, so the
 * window is the BDP at the rate after every ACK): the rate rules alone. */
static dlcp_rate make(double start_bps) {
  dlcp_rate_params p;
  dlcp_rate_params_default(&p, LINE);
  p.initial_window_bytes = BIG;
  p.delay_filter = 1; /* every sample on its own: the rules alone */
  dlcp_rate r;
  dlcp_rate_init(&r, &p);
  r.rate_bps = start_bps;
  return r;
}

/* An ACK that reports no bytes: the seed's alpha is the whole increase
 * (the congestion-avoidance term needs the bytes). */
static dlcp_rate_move ack(dlcp_rate *r, dlcp_duration rtt, uint32_t acked,
                          uint32_t ce, dlcp_tstamp now) {
  dlcp_rate_ack a = {.rtt_ns = rtt, .acked_pkts = acked, .ce_pkts = ce,
                     .inflight_bytes = BIG};
  return dlcp_rate_on_ack(r, &a, now);
}

static dlcp_rate_move ack_bytes(dlcp_rate *r, dlcp_duration rtt,
                                uint32_t acked, uint64_t inflight,
                                dlcp_tstamp now) {
  dlcp_rate_ack a = {.rtt_ns = rtt, .acked_pkts = acked,
                     .inflight_bytes = inflight,
                     .acked_bytes = (uint64_t)acked * 1500};
  return dlcp_rate_on_ack(r, &a, now);
}

static void assert_rate(const dlcp_rate *r, double want) {
  double diff = r->rate_bps - want;
  double tol = want * 1e-12 + 1e-3;
  if (diff < -tol || diff > tol) {
    fail_msg("rate %.3f bps, want %.3f bps", r->rate_bps, want);
  }
}

static void test_defaults_are_the_seeds(void **state) {
  (void)state;
  dlcp_rate_params p;
  dlcp_rate_params_default(&p, LINE);
  assert_int_equal(p.t_low_ns, 12500);
  assert_int_equal(p.t_high_ns, 125000);
  assert_int_equal(p.alpha_bps, 40000000);
  assert_true(p.beta == 0.8);
  assert_true(p.ecn_gain == 1.0 / 16.0);
  assert_int_equal(p.queue_pkts, 16);
  assert_int_equal(p.pkt_bytes, 1500);
  dlcp_rate r;
  dlcp_rate_init(&r, &p);
  assert_rate(&r, (double)LINE); /* starts at line rate */
  assert_int_equal(r.base_rtt_ns, 0);
}

/* A VM path: 100 us of base RTT is not queueing.  Only what lies above
 * the smallest RTT seen counts against the thresholds. */
static void test_thresholds_are_above_base(void **state) {
  (void)state;
  dlcp_rate r = make(5e9);
  assert_int_equal(ack(&r, 100000, 10, 0, 0), DLCP_RATE_INCREASE);
  assert_int_equal(r.base_rtt_ns, 100000);
  assert_rate(&r, 5e9 + ALPHA);
  /* 10 us above base, rising: still below T_low */
  assert_int_equal(ack(&r, 110000, 10, 0, 1000), DLCP_RATE_INCREASE);
  assert_rate(&r, 5e9 + 2 * ALPHA);
  /* 200 us above base: 1 - 0.8 (1 - 125/200) = 0.7 (the window out of
   * the way: test_cut_starts_from_window_rate has it in the way) */
  r.window_bytes = 1e15;
  assert_int_equal(ack(&r, 300000, 10, 0, 2000), DLCP_RATE_DECREASE_DELAY);
  double cut1 = (5e9 + 2 * ALPHA) * 0.7;
  assert_rate(&r, cut1);
  /* The next cut waits one RTT (300 us) for the first one to show. */
  assert_int_equal(ack(&r, 300000, 10, 0, 3000), DLCP_RATE_HOLD);
  assert_rate(&r, cut1);
  r.window_bytes = 1e15;
  assert_int_equal(ack(&r, 400000, 10, 0, 302000), DLCP_RATE_DECREASE_DELAY);
  /* q = 300 us: 1 - 0.8 (1 - 125/300) = 0.5333... */
  assert_rate(&r, cut1 * (1.0 - 0.8 * (1.0 - 125.0 / 300.0)));
  /* A smaller RTT lowers the base. */
  ack(&r, 90000, 10, 0, 800000);
  assert_int_equal(r.base_rtt_ns, 90000);
}

/* The own-queue rule: at 100 Mbit/s the seed's 125 us is less than one
 * 1500-byte packet, so T_high stretches to queue_pkts (here 8) of the
 * flow's packets at its rate (960 us at 100 Mbit/s) and T_low to a tenth of that; the window
 * covers the smoothed RTT up to the stretched T_high. */
static void test_own_queue_stretches_thresholds(void **state) {
  (void)state;
  dlcp_rate r = make(1e8 - ALPHA);
  r.params.queue_pkts = 8;
  /* base 1 ms (the window's floor, 3000 B per RTT, is 24 Mbit/s) */
  assert_int_equal(ack(&r, 1000000, 10, 0, 0), DLCP_RATE_INCREASE);
  assert_rate(&r, 1e8);
  /* q = 500 us, rising: within the band, hold (125 us would cut) */
  assert_int_equal(ack(&r, 1500000, 10, 0, 1000), DLCP_RATE_HOLD);
  assert_rate(&r, 1e8);
  /* q = 1920 us, twice T_high: 1 - 0.8 (1 - 1/2) = 0.6 */
  r.window_bytes = 1e15;
  assert_int_equal(ack(&r, 2920000, 10, 0, 2000), DLCP_RATE_DECREASE_DELAY);
  assert_rate(&r, 0.6e8);
  /* srtt 1.29 ms is above base + 125 us but below base + 1600 us (T_high
   * at 60 Mbit/s): the window is the rate over the whole srtt. */
  assert_true(r.srtt_ns > 1125000 && r.srtt_ns < 2600000);
  assert_true(r.window_bytes == 0.6e8 * (double)r.srtt_ns / 8e9);
  /* At 60 Mbit/s T_low is 160 us, T_high 1600 us: q = 1000 us, once
   * the cut's hold has passed, falling, is the band: increase. */
  assert_int_equal(ack(&r, 2000000, 10, 0, 3000000), DLCP_RATE_INCREASE);
  assert_rate(&r, 0.6e8 + ALPHA);

  /* queue_pkts 0: the seed's thresholds, q = 500 us cuts. */
  dlcp_rate s = make(1e8);
  s.params.queue_pkts = 0;
  ack(&s, 1000000, 10, 0, 0);
  s.window_bytes = 1e15;
  assert_int_equal(ack(&s, 1500000, 10, 0, 1000), DLCP_RATE_DECREASE_DELAY);
  /* At 10 Gbit/s the default 16 packets are 19.2 us: the seed's
   * thresholds hold. */
  dlcp_rate f = make(1e10);
  ack(&f, 1000000, 10, 0, 0);
  f.window_bytes = 1e15;
  assert_int_equal(ack(&f, 1200000, 10, 0, 1000), DLCP_RATE_DECREASE_DELAY);
  assert_rate(&f, 1e10 * (1.0 - 0.8 * (1.0 - 125.0 / 200.0)));
}

/* With delay_filter 4 (the default) the delay signal is the smallest of
 * the last 4 samples: jitter that raises some samples is ignored, a
 * queue that raises all of them is not. */
static void test_delay_filter_ignores_jitter(void **state) {
  (void)state;
  dlcp_rate r = make(5e9);
  r.params.delay_filter = 4;
  dlcp_tstamp now = 0;
  ack(&r, 100000, 10, 0, now); /* base 100 us */
  for (int i = 0; i < 20; i++) {
    /* every other sample 400 us above base: scheduling, not a queue */
    dlcp_rate_move m = ack(&r, i % 2 ? 100000 : 500000, 10, 0, now += 1000);
    assert_int_not_equal(m, DLCP_RATE_DECREASE_DELAY);
  }
  double before = r.rate_bps;
  /* A queue: every sample 300 us above base; the 4th one is the signal. */
  for (int i = 0; i < 3; i++) {
    assert_int_not_equal(ack(&r, 400000, 10, 0, now += 1000),
                         DLCP_RATE_DECREASE_DELAY);
  }
  r.window_bytes = 1e15;
  assert_int_equal(ack(&r, 400000, 10, 0, now += 1000),
                   DLCP_RATE_DECREASE_DELAY);
  assert_true(r.rate_bps < before);
}

static void test_band_follows_gradient(void **state) {
  (void)state;
  dlcp_rate r = make(6e9);
  ack(&r, 100000, 10, 0, 0); /* base 100 us, q 0: increase */
  assert_rate(&r, 6e9 + ALPHA);
  assert_int_equal(ack(&r, 130000, 10, 0, 1), DLCP_RATE_HOLD); /* rising */
  assert_rate(&r, 6e9 + ALPHA);
  /* flat: TIMELY increases on gradient <= 0 */
  assert_int_equal(ack(&r, 130000, 10, 0, 2), DLCP_RATE_INCREASE);
  assert_rate(&r, 6e9 + 2 * ALPHA);
  assert_int_equal(ack(&r, 120000, 10, 0, 3), DLCP_RATE_INCREASE);
  assert_rate(&r, 6e9 + 3 * ALPHA);
  assert_int_equal(ack(&r, 140000, 10, 0, 4), DLCP_RATE_HOLD);
  /* just under T_high above base: rising holds, falling increases */
  assert_int_equal(ack(&r, 225000 - 1, 10, 0, 5), DLCP_RATE_HOLD);
  assert_int_equal(ack(&r, 224000, 10, 0, 6), DLCP_RATE_INCREASE);
  assert_rate(&r, 6e9 + 4 * ALPHA);
}

/* alpha stands for ack_every (10) packets: an ACK covering 2 adds a
 * fifth of it. */
static void test_increase_scales_with_acked_packets(void **state) {
  (void)state;
  dlcp_rate r = make(1e9);
  ack(&r, 50000, 2, 0, 0);
  assert_rate(&r, 1e9 + ALPHA / 5);
  ack(&r, 50000, 0, 0, 1); /* counts as one */
  assert_rate(&r, 1e9 + ALPHA / 5 + ALPHA / 10);
}

static void test_ecn_cuts_dctcp_style(void **state) {
  (void)state;
  dlcp_rate r = make(8e9);
  /* Half the packets marked: a = 15/16 * 1 + 1/16 * 0.5, cut by a / 2. */
  assert_int_equal(ack(&r, 50000, 10, 5, 0), DLCP_RATE_DECREASE_ECN);
  double a = 15.0 / 16.0 + 0.5 / 16.0;
  assert_true(r.ecn_alpha == a);
  assert_rate(&r, 8e9 * (1.0 - a / 2.0));
  double after = 8e9 * (1.0 - a / 2.0);
  /* Within the RTT: no second cut, and a marked ACK never increases,
   * even with the delay far below T_low. */
  assert_int_equal(ack(&r, 50000, 10, 10, 10000), DLCP_RATE_HOLD);
  assert_rate(&r, after);
  /* The epoch (50 us) is over: a takes its two ACKs' 11 marks of 20. */
  assert_int_equal(ack(&r, 50000, 10, 1, 50000), DLCP_RATE_DECREASE_ECN);
  double a2 = 15.0 / 16.0 * a + (11.0 / 20.0) / 16.0;
  assert_true(r.ecn_alpha > a2 - 1e-12 && r.ecn_alpha < a2 + 1e-12);
  assert_rate(&r, after * (1.0 - a2 / 2.0));
  /* Unmarked ACKs after the cut increase again. */
  assert_int_equal(ack(&r, 50000, 10, 0, 60000), DLCP_RATE_INCREASE);
}

/* A flow limited by its host (many peers on one NIC) has a nominal rate
 * far above what its window lets through; a cut starts from the window's
 * rate (window / base RTT), or it would take many RTTs to bite. */
static void test_cut_starts_from_window_rate(void **state) {
  (void)state;
  dlcp_rate r = make((double)LINE);
  r.window_bytes = 12500; /* 1 Gbps over a 100 us RTT */
  assert_int_equal(ack(&r, 100000, 10, 1, 0), DLCP_RATE_DECREASE_ECN);
  double alpha = 15.0 / 16.0 + 0.1 / 16.0;
  assert_rate(&r, 1e9 * (1.0 - alpha / 2.0));
  /* The window follows the rate down: a BDP at the new rate. */
  assert_int_equal(dlcp_rate_window_bytes(&r),
                   (uint64_t)(r.rate_bps * 100000 / 8e9));
}

/* The window covers the smoothed RTT, not just the base: on a host stack
 * the base is a lucky minimum.  But no more than base + T_high. */
static void test_window_covers_smoothed_rtt(void **state) {
  (void)state;
  dlcp_rate r = make(1e9);
  ack(&r, 20000, 10, 0, 0); /* base and srtt 20 us */
  r.rate_bps = 1e9;
  r.window_bytes = 1e15;
  for (int i = 1; i <= 40; i++) { /* srtt converges to 100 us */
    ack(&r, 100000, 10, 0, (dlcp_tstamp)i);
    r.rate_bps = 1e9;
  }
  assert_int_equal(r.base_rtt_ns, 20000);
  assert_true(r.srtt_ns > 99000 && r.srtt_ns <= 100000);
  r.window_bytes = 1e15;
  ack(&r, 100000, 10, 0, 100);
  /* 1.04 Gbps x srtt, not x 20 us */
  assert_int_equal(dlcp_rate_window_bytes(&r),
                   (uint64_t)(r.rate_bps * (double)r.srtt_ns / 8e9));
  /* A 1 ms RTT (980 us above base) counts only up to base + T_high; at
   * 1 Gbit/s T_high is 16 packets of 1500 B, 192 us (own queue). */
  for (int i = 0; i < 80; i++) {
    r.rate_bps = 1e9;
    r.hold_until_ns = UINT64_MAX; /* no cuts: only the window matters */
    ack(&r, 1000000, 10, 0, 200 + (dlcp_tstamp)i);
  }
  r.window_bytes = 1e15;
  r.rate_bps = 1e9;
  ack(&r, 1000000, 10, 0, 400);
  assert_int_equal(dlcp_rate_window_bytes(&r),
                   (uint64_t)(1e9 * 212000.0 / 8e9));
}

/* After a pause cut the rate to the floor, a calm path (no mark, queue
 * below T_low) brings it back to line rate within a dozen RTTs: alpha for
 * the first 5 calm RTTs, then the step doubles with every calm RTT. */
static void test_recovers_fast_after_a_pause(void **state) {
  (void)state;
  dlcp_rate r = make(1e7); /* the floor, line / 1000 */
  /* The window's floor (2 packets per RTT, 1.2 Gbps at 20 us) out of the
   * way: the rule under test is the increase. */
  r.params.min_window_bytes = 1;
  double want = 1e7;
  int i;
  for (i = 1; want < (double)LINE; i++) {
    /* one ACK per base RTT (20 us); calm since the first */
    assert_int_equal(ack(&r, 20000, 10, 0, (dlcp_tstamp)i * 20000),
                     DLCP_RATE_INCREASE);
    uint64_t calm = (uint64_t)i - 1;
    double step = ALPHA;
    if (calm > 5) {
      step = ALPHA * (double)(1u << (calm - 5));
      step = step < want ? step : want;
    }
    want += step;
    if (want > (double)LINE) {
      want = (double)LINE;
    }
    assert_rate(&r, want);
  }
  assert_int_equal(i - 1, 13); /* 13 RTTs from line / 1000 to line */
  /* A mark ends the calm: the step is alpha again for 5 RTTs. */
  ack(&r, 20000, 10, 1, 300000);
  double cut = r.rate_bps;
  ack(&r, 20000, 10, 0, 400000);
  assert_rate(&r, cut + ALPHA);
}

static dlcp_rate_move ack_granted(dlcp_rate *r, dlcp_duration rtt,
                                  uint32_t ce, uint64_t grant,
                                  dlcp_tstamp now) {
  dlcp_rate_ack a = {.rtt_ns = rtt, .acked_pkts = 10, .ce_pkts = ce,
                     .inflight_bytes = BIG, .grant_bytes = grant};
  return dlcp_rate_on_ack(r, &a, now);
}

/* A receiver's grant is two BDPs of its link over its senders: once the
 * path has been calm for a base RTT, a rate below grant / (2 base RTT)
 * starts there; not before, not on a mark, and never downwards. */
static void test_rises_to_the_receivers_share(void **state) {
  (void)state;
  dlcp_rate r = make(1e9);
  r.params.rise_to_share = true;
  r.params.min_window_bytes = 1; /* the window's floor out of the way */
  /* 25,000 bytes over 2 x 20 us: a 5 Gbps share (one of two senders). */
  uint64_t grant = 25000;
  double share = 25000.0 * 8e9 / 40000.0;
  /* The first ACK sets the base RTT and starts the calm: no rise. */
  assert_int_equal(ack_granted(&r, 20000, 0, grant, 0), DLCP_RATE_INCREASE);
  assert_rate(&r, 1e9 + ALPHA);
  assert_int_equal(ack_granted(&r, 20000, 0, grant, 19999),
                   DLCP_RATE_INCREASE);
  assert_rate(&r, 1e9 + 2 * ALPHA);
  /* A base RTT of calm: the share. */
  assert_int_equal(ack_granted(&r, 20000, 0, grant, 20000),
                   DLCP_RATE_INCREASE);
  assert_rate(&r, share);
  /* A mark cuts and restarts the calm; the share waits another base RTT
   * (the queue at 5 us above base is below T_low: calm again). */
  assert_int_equal(ack_granted(&r, 20000, 1, grant, 30000),
                   DLCP_RATE_DECREASE_ECN);
  double cut = r.rate_bps;
  assert_true(cut < share);
  assert_int_equal(ack_granted(&r, 25000, 0, grant, 49999),
                   DLCP_RATE_INCREASE);
  assert_rate(&r, cut + ALPHA);
  assert_int_equal(ack_granted(&r, 25000, 0, grant, 50000),
                   DLCP_RATE_INCREASE);
  assert_rate(&r, share);
  /* A quarter of that grant (eight senders now) is below the rate: only
   * the usual increase. */
  assert_int_equal(ack_granted(&r, 20000, 0, grant / 4, 60000),
                   DLCP_RATE_INCREASE);
  assert_rate(&r, share + ALPHA);
  /* No grant (the runtime's receivers), or the rule off (the default):
   * no rise, however calm. */
  for (int off = 0; off < 2; off++) {
    dlcp_rate q = make(1e9);
    q.params.rise_to_share = off == 0;
    q.params.min_window_bytes = 1;
    for (dlcp_tstamp t = 0; t <= 100000; t += 20000) {
      ack_granted(&q, 20000, 0, off ? grant : 0, t);
    }
    assert_true(q.rate_bps < 2e9);
  }
}

/* Under marks a flow still gains a packet of window per RTT (DCTCP's
 * congestion avoidance) when that is more than the seed's alpha. */
static void test_congestion_avoidance_floor(void **state) {
  (void)state;
  dlcp_rate r = make(1e9);
  ack(&r, 100000, 10, 1, 0); /* base 100 us; marked: a cut, no calm */
  double rate = r.rate_bps;
  double win = r.window_bytes;
  /* 2 packets acknowledged, 15 in flight: window += 1500 * 3000 / win */
  assert_int_equal(ack_bytes(&r, 100000, 2, 22500, 1000), DLCP_RATE_INCREASE);
  double ca = 8e9 * 1500.0 * 3000.0 / win / 100000.0;
  assert_true(ca > ALPHA / 5);
  assert_rate(&r, rate + ca);
}

/* The window: the initial one until ACKs come, then it grows by what
 * each ACK covers (slow start) while in use, never beyond a BDP at the
 * rate; an idle connection starts again from the initial window. */
static void test_window_slow_start_and_restart(void **state) {
  (void)state;
  dlcp_rate_params p;
  dlcp_rate_params_default(&p, LINE);
  assert_int_equal(p.initial_window_bytes, 62500); /* 10 Gbps x 50 us */
  p.initial_window_bytes = 3000;
  dlcp_rate r;
  dlcp_rate_init(&r, &p);
  r.rate_bps = 1e9;
  assert_int_equal(dlcp_rate_window_bytes(&r), 3000);
  ack_bytes(&r, 100000, 2, 3000, 0);
  assert_int_equal(dlcp_rate_window_bytes(&r), 6000);
  ack_bytes(&r, 100000, 4, 6000, 1);
  assert_int_equal(dlcp_rate_window_bytes(&r), 12000);
  ack_bytes(&r, 100000, 4, 12000, 2);
  /* 18000 would exceed the BDP at the rate */
  uint64_t bdp = (uint64_t)(r.rate_bps * 100000 / 8e9);
  assert_true(bdp < 18000);
  assert_int_equal(dlcp_rate_window_bytes(&r), bdp);
  /* Unused (1 packet in flight of 11): no growth beyond the target's. */
  r.rate_bps = 2e9;
  ack_bytes(&r, 100000, 1, 1500, 3);
  assert_int_equal(dlcp_rate_window_bytes(&r), bdp);
  dlcp_rate_restart(&r);
  assert_int_equal(dlcp_rate_window_bytes(&r), 3000);
  /* The floor: 2 packets whatever the rate. */
  r.rate_bps = 1e7;
  ack(&r, 100000, 1, 1, 1000000);
  assert_int_equal(dlcp_rate_window_bytes(&r), 3000);
}

/* The floor is line / 1000, or what the smallest window sends per the
 * window's RTT (base + T_high at most) when that is more: a pacer below it
 * would hold a flow under its own window. */
static void test_clamped_to_line_and_floor(void **state) {
  (void)state;
  for (int k = 0; k < 2; k++) {
    dlcp_rate r = make((double)LINE - 1e7);
    if (k == 1) {
      r.params.min_window_bytes = 1;
    }
    ack(&r, 1000, 10, 0, 0);
    assert_rate(&r, (double)LINE);
    for (int i = 1; i <= 100; i++) {
      ack(&r, 100000000, 10, 0, (dlcp_tstamp)i * 200000000); /* 100 ms */
    }
    /* base 1 us: the window's RTT is 1 + 125 us */
    assert_rate(&r, k == 0 ? 3000 * 8e9 / 126000.0
                           : (double)r.params.min_rate_bps);
  }
}

static void test_tx_time_rounds_up(void **state) {
  (void)state;
  dlcp_rate r = make(1e9); /* 1 Gbps: 1 byte = 8 ns */
  assert_int_equal(dlcp_rate_tx_time(&r, 1500), 12000);
  r.rate_bps = 3e9; /* 1500 B = 4000 ns exactly; 1 B = 2.67 -> 3 */
  assert_int_equal(dlcp_rate_tx_time(&r, 1500), 4000);
  assert_int_equal(dlcp_rate_tx_time(&r, 1), 3);
}

static void test_params_checked(void **state) {
  (void)state;
  dlcp_rate_params p;
  dlcp_rate_params_default(&p, LINE);
  assert_int_equal(dlcp_rate_params_check(&p), 0);
  p.t_high_ns = p.t_low_ns;
  assert_int_equal(dlcp_rate_params_check(&p), DLCP_ERR_CONFIG);
  dlcp_rate_params_default(&p, LINE);
  p.pkt_bytes = 0;
  assert_int_equal(dlcp_rate_params_check(&p), DLCP_ERR_CONFIG);
  p.queue_pkts = 0; /* off: the packet size is not used */
  assert_int_equal(dlcp_rate_params_check(&p), 0);
  dlcp_rate_params_default(&p, LINE);
  p.beta = 1.5;
  assert_int_equal(dlcp_rate_params_check(&p), DLCP_ERR_CONFIG);
  dlcp_rate_params_default(&p, LINE);
  p.min_rate_bps = LINE + 1;
  assert_int_equal(dlcp_rate_params_check(&p), DLCP_ERR_CONFIG);
  dlcp_rate_params_default(&p, LINE);
  p.ecn_gain = 0.0;
  assert_int_equal(dlcp_rate_params_check(&p), DLCP_ERR_CONFIG);
  dlcp_rate_params_default(&p, LINE);
  p.min_window_bytes = 0;
  assert_int_equal(dlcp_rate_params_check(&p), DLCP_ERR_CONFIG);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_defaults_are_the_seeds),
      cmocka_unit_test(test_thresholds_are_above_base),
      cmocka_unit_test(test_band_follows_gradient),
      cmocka_unit_test(test_delay_filter_ignores_jitter),
      cmocka_unit_test(test_increase_scales_with_acked_packets),
      cmocka_unit_test(test_ecn_cuts_dctcp_style),
      cmocka_unit_test(test_cut_starts_from_window_rate),
      cmocka_unit_test(test_window_covers_smoothed_rtt),
      cmocka_unit_test(test_recovers_fast_after_a_pause),
      cmocka_unit_test(test_congestion_avoidance_floor),
      cmocka_unit_test(test_rises_to_the_receivers_share),
      cmocka_unit_test(test_window_slow_start_and_restart),
      cmocka_unit_test(test_own_queue_stretches_thresholds),
      cmocka_unit_test(test_clamped_to_line_and_floor),
      cmocka_unit_test(test_tx_time_rounds_up),
      cmocka_unit_test(test_params_checked),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
