/*
 * rate.h: MLT's congestion controller, one per connection, shared by the
 * runtime and the simulator.
 *
 * The seed's controller (MLT 4.2.3.3) is TIMELY-like: start at line rate,
 * turn every ACK's echoed time stamp into an RTT sample, add alpha below
 * T_low, cut by 1 - beta(1 - T_high/rtt) above T_high.  Taken literally it
 * fails at both ends of the RTT scale (docs/protocol.md gives the
 * measurements): a VM's kernel stack reads as queueing, and a datacenter
 * port overflows before the RTT ever reaches 125 us.  So, keeping the
 * seed's delay signal and defaults:
 *
 *   delay    q = rtt - base, base the smallest RTT seen (min filter),
 *            rtt the smallest of the last delay_filter samples (4: a
 *            queue raises every sample, a host's scheduling jitter only
 *            some): T_low and T_high are queueing delay above the base.
 *              q < T_low                      increase
 *              q > T_high                     rate *= 1 - beta(1 - T_high/q)
 *              T_low..T_high, rtt not rising  increase (TIMELY: gradient <= 0)
 *              T_low..T_high, rtt rising      hold
 *   own queue  T_low and T_high are stretched (in proportion) so that
 *            T_high is at least queue_pkts of the flow's own packets at
 *            its rate: a queue that holds fewer than that many of its
 *            packets is not one its cut could drain.  At 100 Gbit/s the
 *            seed's 125 us is hundreds of packets and nothing changes;
 *            at 100 Mbit/s it is one packet, and beside TCP, which keeps
 *            a queue standing at the marking threshold, every RTT cut
 *            the rate again while TCP took the link (docs/protocol.md,
 *            "Beside TCP").  In packets per flow this is TCP Vegas's
 *            rule, and Swift's flow-based scaling of its target delay
 *            for flows with small windows.
 *   ECN      ACKs echo how many of the packets they cover arrived CE
 *            marked.  The marked fraction F feeds DCTCP's estimate
 *            a = (1 - g) a + g F once per RTT, and an ACK that echoes any
 *            mark cuts the rate by a / 2 (at most once per RTT) and never
 *            increases it.
 *   decrease at most one per RTT (the delay cut and the ECN cut alike):
 *            the samples of one RTT describe the same queue.  A cut
 *            applies to the rate the window allows (window / RTT)
 *            when that is below the nominal rate: a flow held back by its
 *            own host (many peers sharing one NIC) or by its application
 *            would otherwise cut a rate it is not using, many RTTs in a
 *            row, while the queue stays full.
 *   increase alpha per ack_every packets acknowledged (the seed's alpha
 *            per ACK of 10 packets, whatever the ACK frequency), or one
 *            packet of window per base RTT (DCTCP's congestion avoidance,
 *            as a rate) when that is more: with a hundred flows sharing a
 *            100 Gbit/s port a 40 Mbit/s step takes milliseconds to win
 *            back a cut (docs/protocol.md); once the
 *            path has been calm (no mark, no cut, q < T_low) for more than
 *            hai_after base RTTs, the step doubles with every further calm
 *            RTT (capped at the rate itself), so a flow recovers from a
 *            pause within a few RTTs instead of creeping back from the
 *            floor at alpha per ACK, while a flow sharing a marking queue
 *            stays additive (TIMELY's hyper-active increase, in RTTs).
 *   share    (rise_to_share only) a receiver that grants windows
 *            (dlcp_mlt_rx_share) grants
 *            each sender two BDPs of its downlink divided among the
 *            connections sending to it, so grant / (2 x base RTT) is its
 *            fair share of that link.  Once the path has been calm for a
 *            base RTT, a rate below that share jumps to it: a flow its
 *            host served last (shortest remaining first) or that was cut
 *            while many shared the receiver would otherwise creep back
 *            from a few Gbit/s after the others ended (docs/protocol.md).
 *   window   bytes in flight are bounded by a window that starts at
 *            initial_window_bytes, grows by the bytes each ACK covers
 *            (doubling per RTT, as TCP's slow start) while at least half
 *            of it is in flight, up to rate x RTT (the smoothed RTT, at
 *            most base + T_high, stretched by the own-queue rule: on a host
 *            stack the base RTT is a lucky minimum)
 *            (a BDP at the current rate), and follows that target down
 *            at once when the rate is cut; never below min_window_bytes.
 *            After an idle spell (dlcp_rate_restart) it starts again from
 *            the initial window: the rate a connection learnt in its last
 *            burst says nothing about the port its next burst meets.  The
 *            window is what makes an N-to-1 incast self-limiting: its
 *            senders' windows shrink with their rates, so together they
 *            cannot keep a port overflowing.
 *
 * The rate stays within [min, line], and never below the smallest window
 * per the window's RTT (a pacer below that would hold back a flow its
 * window already keeps at its floor).  Pure computation: time is an
 * argument, nothing is read or allocated.
 */
#ifndef DLCP_PROTO_RATE_H
#define DLCP_PROTO_RATE_H

#include <stdbool.h>
#include <stdint.h>

#include "dlcp/dlcp_types.h"

#define DLCP_RATE_FILTER_MAX 16u
/* queue_pkts's default: the own queue behind T_high, in packets.  32 was
 * faster beside TCP but took the short flows' p99 with it
 * (docs/protocol.md, "Beside TCP"). */
#define DLCP_RATE_DEFAULT_QUEUE_PKTS 16u

typedef struct dlcp_rate_params {
  uint64_t line_rate_bps; /* start rate and ceiling, > 0 */
  uint64_t min_rate_bps;  /* floor, > 0, <= line_rate_bps */
  dlcp_duration t_low_ns; /* queueing delay above the base RTT */
  dlcp_duration t_high_ns; /* > t_low_ns */
  uint64_t alpha_bps;      /* additive increase per ack_every packets */
  double beta;             /* multiplicative decrease factor, in (0, 1] */
  double ecn_gain;         /* DCTCP's g, in (0, 1] */
  uint32_t ack_every;      /* packets an increase of alpha stands for */
  uint32_t hai_after;      /* calm base RTTs before the step grows;
                              0 = never */
  uint32_t delay_filter;   /* the delay signal is the smallest of the last
                              this many RTT samples, 1..DLCP_RATE_FILTER_MAX
                              (1 = every sample on its own) */
  uint64_t min_window_bytes;     /* floor of the in-flight bound, > 0 */
  uint64_t initial_window_bytes; /* bound before the first RTT sample, > 0 */
  uint32_t queue_pkts;     /* the "own queue" rule above: the thresholds
                              stand for at least this many of the flow's
                              packets queued; 0 = off */
  uint32_t pkt_bytes;      /* a packet on the wire, > 0 when queue_pkts */
  bool rise_to_share;      /* the "share" rule above; default off */
} dlcp_rate_params;

/* What an ACK did to the rate (for tests and counters). */
typedef enum dlcp_rate_move {
  DLCP_RATE_HOLD = 0,
  DLCP_RATE_INCREASE = 1,
  DLCP_RATE_DECREASE_DELAY = 2,
  DLCP_RATE_DECREASE_ECN = 3,
} dlcp_rate_move;

typedef struct dlcp_rate {
  dlcp_rate_params params;
  double rate_bps;
  dlcp_duration base_rtt_ns; /* min filter; 0 before the first sample */
  dlcp_duration srtt_ns;     /* smoothed RTT (1/8); 0 before */
  dlcp_duration prev_rtt_ns; /* the previous delay signal */
  dlcp_duration recent[DLCP_RATE_FILTER_MAX]; /* the last samples */
  uint64_t samples;
  dlcp_tstamp calm_since_ns; /* since when no mark, no cut, q < T_low */
  double ecn_alpha;       /* DCTCP's estimate of the marked fraction */
  uint64_t epoch_acked;   /* packets acknowledged in this RTT epoch */
  uint64_t epoch_marked;  /* of which CE marked */
  dlcp_tstamp epoch_end_ns;  /* the epoch's end: update ecn_alpha */
  dlcp_tstamp hold_until_ns; /* no decrease before (one RTT after one) */
  double window_bytes;       /* the in-flight bound */
} dlcp_rate;

/* dlcp_rate_params_default fills the seed's defaults for a |line_rate_bps|
 * link (T_low 12.5 us, T_high 125 us above base, alpha 40 Mbps, beta 0.8),
 * DCTCP's g = 1/16, ack_every 10, TIMELY's hai_after 5, queue_pkts 16 of
 * 1500 bytes, a window floor of 2 full packets (of 1500 bytes) and an initial window of one BDP at line
 * rate over a 50 us RTT (the seed's start at line rate). */
void dlcp_rate_params_default(dlcp_rate_params *p, uint64_t line_rate_bps);

/* dlcp_rate_params_check returns 0 or DLCP_ERR_CONFIG. */
int dlcp_rate_params_check(const dlcp_rate_params *p);

/* dlcp_rate_init starts at line rate with no RTT sample. */
void dlcp_rate_init(dlcp_rate *r, const dlcp_rate_params *p);

/* One ACK's news for dlcp_rate_on_ack. */
typedef struct dlcp_rate_ack {
  dlcp_duration rtt_ns;    /* the RTT sample, > 0 */
  uint32_t acked_pkts;     /* data packets the ACK covers (0 counts as 1) */
  uint32_t ce_pkts;        /* of which CE marked (clamped to acked_pkts) */
  uint64_t inflight_bytes; /* the sender's bytes in flight when the ACK
                              came: whether the window is in use */
  uint64_t acked_bytes;    /* bytes the ACK covers: the window's growth */
  uint64_t grant_bytes;    /* the receiver's window grant; 0: none */
} dlcp_rate_ack;

/* dlcp_rate_on_ack applies one ACK at |now| and returns what it did. */
dlcp_rate_move dlcp_rate_on_ack(dlcp_rate *r, const dlcp_rate_ack *ack,
                                dlcp_tstamp now);

/* dlcp_rate_window_bytes returns the in-flight bound now. */
uint64_t dlcp_rate_window_bytes(const dlcp_rate *r);

/* dlcp_rate_restart tells the controller that the connection was idle
 * (nothing in flight for a while) and is sending again: the window
 * starts again from the initial window; the rate is kept. */
void dlcp_rate_restart(dlcp_rate *r);

/* dlcp_rate_tx_time returns how long |bytes| take at the current rate, in
 * ns, rounded up so pacing never exceeds the rate. */
dlcp_duration dlcp_rate_tx_time(const dlcp_rate *r, uint64_t bytes);

#endif /* DLCP_PROTO_RATE_H */
