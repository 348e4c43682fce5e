/*
 * mlt.h: the MLT connection, sans-I/O.
 *
 * A dlcp_mlt_conn is one end of the MLT association between two peers.  It
 * carries any number of concurrent tensor transfers in both directions.  It
 * performs no I/O and is told the time: the driver (src/rt on a real
 * network, src/sim in the simulator, tests/support/netsim in the tests)
 * feeds it events and executes the actions it returns.
 *
 *   events in    dlcp_mlt_post_send / dlcp_mlt_post_recv   (application)
 *                dlcp_mlt_on_datagram  (DATA, ACK from the datagram channel)
 *                dlcp_mlt_on_control   (START, PROBE, BITMAP, STOP, FINISH
 *                                       from the reliable channel, one whole
 *                                       message per call)
 *                dlcp_mlt_abort        (the driver lost the peer)
 *   actions out  dlcp_mlt_poll, called until it returns DLCP_MLT_ACT_NONE:
 *                a datagram or a control message to send, or a completion
 *   time         every call takes |now|; dlcp_mlt_next_deadline says when
 *                poll has something to do next (pacing, probe and stall
 *                timers).  Poll also fires expired timers.
 *
 * A transfer runs as in the MLT seed (section 4.2.3): the receiver posts a
 * buffer and a loss bound p and sends START; the sender cuts the tensor
 * into segments and sends them in any order, paced by the TIMELY-like rate
 * controller, over K paths; the receiver places each segment by offset and
 * ACKs every 10th packet echoing its time stamp.  A sender that has sent
 * everything without a STOP waits one drain interval, then sends PROBE.
 * A receiver that holds at least (1 - p) of the bytes answers a PROBE
 * with STOP and completes, zero-filling (or, for parameters, keeping)
 * and reporting what is missing;
 * otherwise it answers with a BITMAP of missing segments, the sender
 * retransmits exactly those, and the cycle repeats.  A receiver that holds
 * everything stops at once.  p = 0 makes the transfer fully reliable.
 * The bound is spent at PROBE time rather than as soon as (1 - p) has
 * arrived, so on a clean network nothing is dropped: it replaces
 * retransmission rounds, never first transmissions.  Buffers are used in place: the sender never copies the
 * tensor; the receiver writes each payload once, into the posted buffer.
 */
#ifndef DLCP_PROTO_MLT_H
#define DLCP_PROTO_MLT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dlcp/dlcp_types.h"

typedef struct dlcp_mlt_conn dlcp_mlt_conn;

/* The smallest |buf| dlcp_mlt_poll accepts: room for any fixed-size message
 * and a useful bitmap window.  Larger buffers give larger bitmap windows;
 * DLCP_WIRE_CTRL_MAX (1 MiB) always holds a whole bitmap of a 1 GiB tensor. */
#define DLCP_MLT_MIN_BUF 4096u

/* The largest eager transfer with control datagrams, 64 KiB: the channel
 * sends its EAGER in pieces of a frame, at once, with no pacing or window
 * of the data path to hold a larger burst back. */
#define DLCP_MLT_CTL_DGRAM_EAGER_MAX 65536u

/*
 * Receiver-driven windows.  All connections of one host may share one
 * dlcp_mlt_rx_share (owned by the driver, which must keep it alive while
 * they exist; NULL in the config = off).  The driver sets bdp_bytes, the
 * host's downlink rate x base RTT; the connections keep |active|, the
 * receives in progress on the host, and |active_conns|, the connections
 * with a receive that shares the link now: one whose data has begun, or
 * of stage 0, which may begin at any moment.  Every ACK then grants the
 * peer a window of 2 x bdp / active_conns: an N-to-1 incast shares the
 * receiver's link (two BDPs: the pipe and as much queue), a lone sender
 * is granted the whole path, and a connection's share does not shrink
 * with the receives a collective posts on the others ahead of their
 * data, however many, nor with its later stages' (a halving-doubling
 * rank's next partner, which cannot send before this exchange is over).
 * A
 * START grants 2 x bdp x (this connection's receives) / active, but never
 * more than what the STARTs whose data has not arrived yet left of the
 * two BDPs (at least the window floor): receives
 * posted together would otherwise each grant a share computed before the
 * next was posted, and their first windows together overflow the port.
 * The sender bounds its window by the grant.
 */
typedef struct dlcp_mlt_rx_share {
  uint64_t bdp_bytes; /* set by the driver; 0 = grant nothing */
  uint32_t active;    /* maintained by the connections */
  uint32_t active_conns; /* connections with receives sharing the link */
  uint64_t granted;   /* START grants whose data has not arrived yet */
} dlcp_mlt_rx_share;

/* Routes per path the drivers offer where the fabric hashes source ports
 * (ECMP): one number for both, so that they spread a path alike. */
#define DLCP_MLT_ECMP_ROUTES 4u

typedef struct dlcp_mlt_config {
  uint32_t job;          /* job token on every message; others are dropped */
  uint32_t segment_size; /* payload bytes per DATA packet, chosen by the
                            receiver and announced in START (64..65463) */
  uint32_t npaths;       /* K paths, path ids 0..K-1, round-robin; 1..256 */
  uint32_t nroutes;      /* routes per path (pathset.h, "Routes"): the
                            drivers' distinct sources for a path, such as
                            UDP source ports an ECMP fabric hashes; 1
                            (the default) where a path is its route;
                            1..DLCP_PATHSET_MAX_ROUTES */
  uint32_t path_burst;   /* consecutive packets on one path before the next
                            (1, the seed's per-packet spraying; a driver
                            that sends a path's packets in one batch sets
                            its batch, so the batches leave in sequence
                            order); 1..65536 */
  uint32_t nprio;        /* P switch priorities for layer tagging; 1..8 */
  uint64_t line_rate_bps;  /* start rate and ceiling of the rate control:
                              the path's line rate */
  uint64_t min_rate_bps;   /* floor of the rate control */
  dlcp_duration t_low_ns;  /* rate control thresholds, queueing delay above
                              the measured base RTT (12.5 us, 125 us) */
  dlcp_duration t_high_ns;
  uint32_t queue_pkts;     /* T_high is at least this many of the flow's
                              own packets queued at its rate, T_low in
                              proportion (rate.h, "own queue"); 0 = off;
                              16 */
  uint64_t alpha_bps;      /* additive increase (40 Mbps) */
  double beta;             /* multiplicative decrease (0.8) */
  double ecn_gain;         /* DCTCP's g for the CE fraction (1/16) */
  uint64_t min_window_bytes;     /* floor of the in-flight bound (2 packets
                                    of 1500 bytes) */
  uint64_t initial_window_bytes; /* in-flight bound before the first RTT
                                    sample; 0 = line rate x initial_rtt_ns
                                    (the seed's start at line rate) */
  bool rise_to_share;      /* a calm sender rises to the rate its
                              receiver's grant shares out (rate.h);
                              false */
  uint32_t ack_every;      /* receiver ACKs every this many packets of the
                              connection (10), and a round's last packet
                              when the transfer goes on */
  uint32_t burst_pkts;     /* packets the pacer may send back to back after
                              an idle period, for batching drivers (>= 1) */
  dlcp_duration initial_rtt_ns;     /* RTT estimate before the first ACK */
  dlcp_duration min_drain_ns;       /* least wait between the last packet of
                                       a round and its PROBE */
  dlcp_duration probe_timeout_ns;   /* first PROBE re-send timeout; doubles */
  dlcp_duration max_probe_timeout_ns;
  dlcp_duration stall_timeout_ns;   /* a transfer with no progress for this
                                       long fails with DLCP_ERR_TIMEOUT */
  uint32_t max_rounds_without_progress; /* then DLCP_ERR_NO_PROGRESS */
  uint32_t max_transfers;  /* concurrent transfers per direction, incl. START
                              messages waiting for a matching post_send */
  uint64_t max_inflight_bytes; /* a fixed cap on data sent but not yet
                                  acknowledged, per connection, on top of
                                  the rate control's window (about one BDP
                                  at the current rate); 0 = none.  Bounds
                                  the queue a receiver that cannot keep up
                                  builds (host-bound paths such as
                                  loopback). */
  uint32_t eager_max_bytes; /* a transfer of at most this many bytes goes
                               as one EAGER control message, with no START,
                               DATA or STOP: one one-way trip instead of
                               three, for latency-bound collective steps.
                               Reliable (the loss bound does not apply),
                               unpaced, untagged.  0 = off (the default);
                               at most DLCP_WIRE_CTRL_MAX - 24, and
                               dlcp_mlt_poll's |buf| must hold 24 more
                               (48 with control_datagrams).
                               Both ends must use the same value. */
  dlcp_mlt_rx_share *rx_share; /* receiver-driven windows; NULL = off */
  bool control_datagrams; /* START, PROBE, BITMAP, STOP, FINISH and EAGER
                             go as CDATA datagrams (priority 0) with the
                             connection's own RTT-based retransmission
                             and duplicate suppression, never waiting for
                             a TCP timeout: dlcp_mlt_poll returns them as
                             DLCP_MLT_ACT_DATAGRAM and they come back
                             through dlcp_mlt_on_datagram.  Off: they are
                             DLCP_MLT_ACT_CONTROL for a reliable stream.
                             Needs eager_max_bytes <=
                             DLCP_MLT_CTL_DGRAM_EAGER_MAX; both ends must
                             agree. */
  /* The largest datagram the driver carries (one that appends bytes of its
   * own, such as an auth trailer, leaves room for them here): DATA packets
   * (segment_size plus header) and control datagrams stay within it.
   * Default DLCP_WIRE_DGRAM_MAX. */
  uint32_t datagram_max;
  dlcp_duration control_ack_delay_ns; /* how long a control datagram's
                             acknowledgement may wait for a reply to ride
                             on (ctlchan.h); the sender's control RTO
                             allows for it.  Both ends must agree. */
  uint64_t seed;           /* seeds the connection's generator */
} dlcp_mlt_config;

/* dlcp_mlt_config_default fills the seed's defaults: 10 Gbps line rate,
 * 8 priorities, one path, 1456-byte segments, ACK every 10 packets. */
void dlcp_mlt_config_default(dlcp_mlt_config *cfg);

/* dlcp_mlt_config_check returns 0 or DLCP_ERR_CONFIG if a field is out of
 * its range. */
int dlcp_mlt_config_check(const dlcp_mlt_config *cfg);

/* dlcp_mlt_config_eager returns whether a transfer of |len| bytes goes as
 * one EAGER message under |cfg| (both ends decide by size alone), so a
 * driver can tell without the connection. */
bool dlcp_mlt_config_eager(const dlcp_mlt_config *cfg, uint64_t len);

/*
 * A priority function chooses the switch priority (0 = most urgent, below
 * the connection's nprio) of the packet carrying bytes [offset, offset+len)
 * of |tensor|.  It must not call back into the connection.
 */
typedef uint8_t (*dlcp_mlt_prio_fn)(void *user, uint32_t tensor,
                                    uint32_t layer, uint64_t offset,
                                    uint32_t len);

typedef enum dlcp_mlt_importance {
  /* every packet is important (ECN-capable): nothing is preferentially
   * dropped; the default, and right for parameters or non-float data */
  DLCP_MLT_IMPORTANCE_ALL = 0,
  /* float32 gradients: a packet is important when its mean |g| exceeds
   * the median |g| estimated from a 5% sample of the tensor */
  DLCP_MLT_IMPORTANCE_F32_MAGNITUDE = 1,
  /* no packet is important: all may be dropped first under congestion */
  DLCP_MLT_IMPORTANCE_NONE = 2,
} dlcp_mlt_importance;

typedef struct dlcp_mlt_send {
  uint32_t tensor;   /* matched with the receiver's tensor id, FIFO */
  const void *buf;   /* borrowed: must stay valid and unchanged until the
                        transfer's completion is polled */
  uint64_t len;      /* bytes; must equal the receiver's posted length */
  uint32_t layer;    /* model layer of the tensor */
  uint32_t nlayers;  /* layers in the model; 0 = priority 0 for all */
  uint32_t stage;    /* a collective's stage (dlcp_coll_action.stage):
                        the priority is lowered by this many levels, at
                        most to nprio - 1, so earlier stages go first */
  dlcp_mlt_prio_fn prio_fn; /* NULL: layer * nprio / nlayers */
  void *prio_user;
  dlcp_mlt_importance importance;
  uint64_t user_data; /* returned in the completion */
} dlcp_mlt_send;

/* Puts |len| payload bytes that arrived for a receive at |dst| (inside the
 * posted buffer) in the receiver's own way, e.g. reduces them into what
 * |dst| holds (see dlcp_mlt_recv.place). */
typedef void (*dlcp_mlt_place_fn)(void *user, uint8_t *dst,
                                  const uint8_t *payload, size_t len);

typedef struct dlcp_mlt_recv {
  uint32_t tensor;
  void *buf;          /* borrowed: written until the completion is polled,
                         never after */
  uint64_t len;
  double loss_bound;  /* p in [0, 1): the fraction that may be missing;
                         0 = fully reliable */
  bool keep_previous; /* the buffer holds parameters: missing ranges keep
                         its previous values (the seed's rule for
                         parameters) instead of being zero-filled (the
                         rule for gradients, the default) */
  /* NULL: payloads are copied into |buf|.  Otherwise each segment's
   * payload is handed to place(place_user, buf + offset, payload, len)
   * exactly once (never a duplicate), and missing ranges are left as they
   * were (as with keep_previous): the caller reduces on arrival instead of
   * receiving into a scratch buffer and reducing it afterwards, one pass
   * over memory instead of three.  |place_unit| (> 0) must divide the
   * connection's segment size and |len|, so every piece is whole elements;
   * dlcp_mlt_post_recv returns DLCP_ERR_INVALID_ARGUMENT otherwise.  The
   * zero-copy path (dlcp_mlt_data_dest) is not used for such a receive. */
  dlcp_mlt_place_fn place;
  void *place_user;
  uint32_t place_unit;
  /* A collective's stage (dlcp_coll_action.stage), as its sender's: a
   * receive of a later stage (> 0) posted ahead of its data leaves its
   * connection out of the host's ACK grants until its first DATA
   * arrives (see dlcp_mlt_rx_share). */
  uint32_t stage;
  uint64_t user_data;
} dlcp_mlt_recv;

/* A byte range of a tensor. */
typedef struct dlcp_mlt_range {
  uint64_t offset;
  uint64_t len;
} dlcp_mlt_range;

typedef struct dlcp_mlt_completion {
  uint64_t user_data;
  uint32_t tensor;
  uint32_t xfer;         /* transfer id (0 if the transfer never started) */
  bool is_send;
  int status;            /* 0 or a negative DLCP_ERR_* */
  uint64_t bytes;        /* the tensor's length */
  uint64_t delivered_bytes; /* receiver: bytes it holds; sender: bytes the
                               receiver reported in STOP */
  double delivered_fraction; /* delivered_bytes / bytes (1 if bytes == 0) */
  uint64_t packets;      /* sender: data packets sent; receiver: received */
  uint64_t retransmissions; /* sender: packets sent more than once */
  uint64_t duplicates;   /* receiver: packets for segments already held */
  uint32_t rounds;       /* PROBE rounds */
  dlcp_tstamp start_ns;  /* when the transfer was posted */
  dlcp_tstamp end_ns;
  /* receiver: the byte ranges that were not delivered (zero-filled, or
   * left as they were with keep_previous), in increasing order.  Owned by the connection; valid until the next
   * dlcp_mlt_poll or dlcp_mlt_conn_del. */
  const dlcp_mlt_range *missing;
  size_t nmissing;
} dlcp_mlt_completion;

typedef enum dlcp_mlt_act_type {
  DLCP_MLT_ACT_NONE = 0,
  DLCP_MLT_ACT_DATAGRAM, /* send buf[0..len) then payload[0..payload_len)
                            as one datagram on path |path| */
  DLCP_MLT_ACT_CONTROL,  /* send buf[0..len) on the reliable channel */
  DLCP_MLT_ACT_COMPLETE, /* a transfer finished: see completion */
  DLCP_MLT_ACT_NOTE,     /* a NOTE the peer's driver sent with
                            dlcp_mlt_send_note arrived: buf[0..len) */
} dlcp_mlt_act_type;

typedef struct dlcp_mlt_action {
  dlcp_mlt_act_type type;
  size_t len;               /* bytes written at the start of |buf| */
  const uint8_t *payload;   /* DATAGRAM: points into the application's
                               tensor (no copy), or NULL */
  size_t payload_len;
  uint8_t priority;         /* DATAGRAM: 0 = most urgent (DSCP class) */
  uint8_t path;             /* DATAGRAM: path id */
  uint32_t route;           /* DATAGRAM: the path's route now, below
                               npaths * nroutes (dlcp_pathset_route) */
  bool ect;                 /* DATAGRAM: send ECN-capable (important) */
  dlcp_mlt_completion completion; /* COMPLETE */
} dlcp_mlt_action;

typedef struct dlcp_mlt_stats {
  uint64_t data_sent, data_retx, data_received, data_duplicate;
  uint64_t data_reordered; /* arrived after a packet sent later than it */
  uint64_t data_overtaken_in_host; /* read after a packet sent later than
                                      it, though it reached the host first
                                      (by its arrival time stamp) */
  uint64_t acks_sent, acks_received;
  uint64_t acks_quiet; /* receiver: ACKs of packets no regular ACK
                          answered, sent once none came for the
                          reordering window */
  uint64_t control_sent, control_received;
  uint64_t control_retx;       /* control datagrams sent again (RTO) */
  uint64_t control_needless;   /* of those sent after their timeout,
                                  copies the peer got before it had
                                  acknowledged the first: the timeout was
                                  shorter than the peer's answer */
  uint64_t control_duplicates; /* control datagrams received again after
                                  we had acknowledged them */
  uint64_t dropped_malformed; /* failed to decode */
  uint64_t dropped_foreign;   /* another job's token */
  uint64_t dropped_stale;     /* unknown or finished transfer */
  uint64_t dropped_invalid;   /* decodes, but contradicts the transfer
                                 (offset outside the tensor, wrong tensor) */
  uint64_t ce_received;       /* data packets that arrived CE marked */
  uint64_t ce_echoed;         /* CE marks the peer's ACKs reported */
  uint64_t cuts_ecn, cuts_delay; /* rate decreases by cause */
  uint64_t retx_in_flight_skipped; /* sender: requests made before the
                                      round just sent could arrive, whose
                                      ranges of that round were left out */
  uint64_t bitmaps_early;     /* receiver: BITMAPs asking for a first
                                 round's holes while it is still sent */
  uint64_t bitmaps_unprompted; /* receiver: BITMAPs sent on a round's last
                                  packet, before any PROBE */
  uint64_t stops_deferred;    /* receiver: PROBEs that found the bound met
                                 while the transfer's data still arrived
                                 (the STOP waited for it to stop) */
  uint64_t window_timeouts;   /* sender: full windows presumed drained
                                 after no ACK for two drain intervals */
  uint64_t paths_left_out;    /* sender: spells for which a path that lost
                                 far more than the others was left out of
                                 the rotation (pathset.h) */
  uint64_t paths_rerouted;    /* sender: paths moved to their next route,
                                 left out or losing half (pathset.h) */
  /* Sender: how long the receiver held the packets its ACKs answer
   * (each ACK's hold_ns: the time from the packet's arrival at the
   * receiving host to the ACK, spent waiting for the receiving process
   * to run, in its batches, or on purpose, as a quiet ACK's reordering
   * window), summed over acks_received, and the longest. */
  uint64_t ack_hold_ns;
  dlcp_duration ack_hold_max_ns;
  double rate_bps;            /* the rate controller's current rate */
  uint64_t window_bytes;      /* its in-flight bound */
  dlcp_duration srtt_ns;
  dlcp_duration rttvar_ns;
  /* The RTT estimate the window's timeout follows: the sending transfer's
   * priority class's, or the connection's until that class has one. */
  dlcp_duration window_srtt_ns;
  dlcp_duration window_rttvar_ns;
  dlcp_duration base_rtt_ns;  /* smallest RTT seen; 0 before the first */
} dlcp_mlt_stats;

/*
 * dlcp_mlt_conn_new creates a connection in |*pconn| with a copy of |cfg|;
 * |mem| (NULL = default) must outlive it.  The caller owns the connection
 * and frees it with dlcp_mlt_conn_del.
 * Returns 0, DLCP_ERR_CONFIG or DLCP_ERR_NOMEM.
 */
int dlcp_mlt_conn_new(dlcp_mlt_conn **pconn, const dlcp_mlt_config *cfg,
                      const dlcp_mem *mem, dlcp_tstamp now);

/* dlcp_mlt_conn_del frees |conn| (NULL is fine).  Outstanding transfers are
 * dropped without completions; their buffers are no longer referenced. */
void dlcp_mlt_conn_del(dlcp_mlt_conn *conn);

/*
 * dlcp_mlt_post_send starts sending the tensor |req->buf|.  Sending begins
 * when the receiver's START for |req->tensor| arrives (or at once if it
 * already has).  Returns 0, DLCP_ERR_INVALID_ARGUMENT, DLCP_ERR_LIMIT or
 * DLCP_ERR_NOMEM.
 */
int dlcp_mlt_post_send(dlcp_mlt_conn *conn, const dlcp_mlt_send *req,
                       dlcp_tstamp now);

/*
 * dlcp_mlt_post_recv posts |req->buf| to receive tensor |req->tensor| and
 * queues the START that tells the sender to go.  Returns 0,
 * DLCP_ERR_INVALID_ARGUMENT, DLCP_ERR_LIMIT or DLCP_ERR_NOMEM.
 */
int dlcp_mlt_post_recv(dlcp_mlt_conn *conn, const dlcp_mlt_recv *req,
                       dlcp_tstamp now);

/*
 * dlcp_mlt_on_datagram processes one datagram.  Anything that is not a
 * valid DATA or ACK of this job and a live transfer is counted and
 * dropped.  Returns 0 if the datagram was used, or the negative code saying
 * why it was dropped (never fatal: the connection stays usable).
 */
int dlcp_mlt_on_datagram(dlcp_mlt_conn *conn, const uint8_t *buf,
                         size_t len, dlcp_tstamp now);

/*
 * What a driver may know of how a datagram arrived, beyond its bytes.
 * |ce|: its IP ECN field said CE (a switch on the way was congested); the
 * receiver echoes the marks in its ACKs and the sender's rate control
 * cuts on them, DCTCP-style.  |at|: when it reached this host (a kernel
 * receive time stamp on the |now| clock), 0 if unknown; what the packet
 * then waited for this host to read it is the host's delay, which the
 * congestion signal leaves out (the receiver reports it in its ACKs, the
 * sender subtracts it and its own).  A time after |now| is ignored.
 */
typedef struct dlcp_mlt_arrival {
  bool ce;
  dlcp_tstamp at;
} dlcp_mlt_arrival;

/*
 * dlcp_mlt_on_datagram_arrived is dlcp_mlt_on_datagram with what the
 * driver knows of the datagram's arrival (|arr| may be NULL: nothing).
 */
int dlcp_mlt_on_datagram_arrived(dlcp_mlt_conn *conn, const uint8_t *buf,
                                 size_t len, const dlcp_mlt_arrival *arr,
                                 dlcp_tstamp now);

/*
 * dlcp_mlt_on_control processes one whole control message (the driver
 * frames the stream using the preamble's length).  Same return convention
 * as dlcp_mlt_on_datagram.
 */
int dlcp_mlt_on_control(dlcp_mlt_conn *conn, const uint8_t *buf, size_t len,
                        dlcp_tstamp now);

/*
 * dlcp_mlt_poll fires expired timers and returns the next action in |act|.
 * Messages are written to |buf| (|buflen| >= DLCP_MLT_MIN_BUF), which the
 * caller owns.  Call until act->type is DLCP_MLT_ACT_NONE.
 * Returns 0, or DLCP_ERR_BUFFER_TOO_SMALL.
 */
int dlcp_mlt_poll(dlcp_mlt_conn *conn, dlcp_mlt_action *act, uint8_t *buf,
                  size_t buflen, dlcp_tstamp now);

/*
 * dlcp_mlt_poll_control is dlcp_mlt_poll without DATA packets: ACKs,
 * control messages and completions only, for a driver whose NIC has no
 * room for data now (the data waits; dlcp_mlt_next_deadline still says it
 * is due, dlcp_mlt_next_control_deadline when this has work).  Same
 * returns as dlcp_mlt_poll.
 */
int dlcp_mlt_poll_control(dlcp_mlt_conn *conn, dlcp_mlt_action *act,
                          uint8_t *buf, size_t buflen, dlcp_tstamp now);

/*
 * dlcp_mlt_next_deadline returns when dlcp_mlt_poll next has work: |now| or
 * earlier if it has work already, DLCP_TSTAMP_NEVER if it is idle.
 */
dlcp_tstamp dlcp_mlt_next_deadline(const dlcp_mlt_conn *conn);

/*
 * dlcp_mlt_inputs counts the calls that may have given |conn| work: every
 * call on it but the polls and the queries.  A driver that polled it to
 * DLCP_MLT_ACT_NONE and finds the count unchanged need not poll it again
 * before dlcp_mlt_next_deadline (taken after that poll): with thousands of
 * connections a service pass then touches only those that have work.
 */
uint64_t dlcp_mlt_inputs(const dlcp_mlt_conn *conn);

/*
 * dlcp_mlt_next_control_deadline returns when dlcp_mlt_poll_control next
 * has work (timers, ACKs, control): the same as dlcp_mlt_next_deadline
 * without the data the connection has to send.
 */
dlcp_tstamp dlcp_mlt_next_control_deadline(const dlcp_mlt_conn *conn);

/*
 * dlcp_mlt_send_class ranks the data |conn| sends next, for a driver whose
 * connections share one NIC and serves the lowest class first (shortest
 * remaining first, in powers of two): the bit length of the bytes left in
 * the first round of the send it is on, so 0 once only retransmissions
 * remain, 17 for 64-128 KiB left.  UINT32_MAX when it has nothing to
 * send.  Transfers of equal classes make it a tie: the driver breaks it in
 * an order of its own, not by the bytes sent so far (docs/protocol.md).
 */
uint32_t dlcp_mlt_send_class(const dlcp_mlt_conn *conn);

/*
 * dlcp_mlt_cancel_recv abandons the posted receive whose user_data is
 * |user_data|: its buffer is released at once (never written again), no
 * completion is produced, and the sender is told (STOP with
 * DLCP_ERR_CANCELED), which drops its matching START or fails its send.
 * Returns 0 or DLCP_ERR_UNKNOWN_TRANSFER.
 */
int dlcp_mlt_cancel_recv(dlcp_mlt_conn *conn, uint64_t user_data,
                         dlcp_tstamp now);

/*
 * dlcp_mlt_cancel_unsent_recv is dlcp_mlt_cancel_recv for a receive the
 * application knows the peer will never send (the peers agreed on it, as
 * the straggler bypass does): a cancelled eager receive leaves no tomb.
 * A tomb lives for the stall timeout and counts against max_transfers, so
 * one per bypass exhausted the connection within a few thousand small
 * collectives.
 */
int dlcp_mlt_cancel_unsent_recv(dlcp_mlt_conn *conn, uint64_t user_data,
                                dlcp_tstamp now);

/*
 * dlcp_mlt_cancel_send abandons the posted send whose user_data is
 * |user_data| the same way: the buffer is never read again, no completion
 * is produced, and a receiver that already started is told (FINISH with
 * DLCP_ERR_CANCELED), so its receive fails instead of timing out.
 * Returns 0 or DLCP_ERR_UNKNOWN_TRANSFER.
 */
int dlcp_mlt_cancel_send(dlcp_mlt_conn *conn, uint64_t user_data,
                         dlcp_tstamp now);

/*
 * dlcp_mlt_abort fails every outstanding transfer with |status| (a negative
 * DLCP_ERR_*, e.g. DLCP_ERR_PEER_CLOSED); their completions come out of
 * dlcp_mlt_poll.  No messages are sent: the peer is gone.
 */
void dlcp_mlt_abort(dlcp_mlt_conn *conn, int status, dlcp_tstamp now);

/*
 * Zero-copy receive.  dlcp_mlt_data_dest looks at the first |hdr_len| bytes
 * (at least the 44-byte DATA header) of a datagram of |dgram_len| bytes
 * that the driver has not read yet (MSG_PEEK): if it is valid DATA for a
 * receive in progress whose segment is not held yet and whose payloads are
 * copied (no dlcp_mlt_recv.place), it returns where the payload belongs in
 * the posted buffer, else NULL.  It changes nothing.
 * The driver then reads the payload straight there and calls
 * dlcp_mlt_on_data_placed with the header, before any other call into the
 * connection; on NULL it reads the datagram whole and calls
 * dlcp_mlt_on_datagram as usual.  Either way the packet is validated and
 * counted exactly once.
 */
uint8_t *dlcp_mlt_data_dest(dlcp_mlt_conn *conn, const uint8_t *hdr,
                            size_t hdr_len, size_t dgram_len);
int dlcp_mlt_on_data_placed(dlcp_mlt_conn *conn, const uint8_t *hdr,
                            size_t hdr_len, size_t dgram_len,
                            dlcp_tstamp now);
/* The same, with what the driver knows of its arrival
 * (dlcp_mlt_on_datagram_arrived). */
int dlcp_mlt_on_data_placed_arrived(dlcp_mlt_conn *conn, const uint8_t *hdr,
                                    size_t hdr_len, size_t dgram_len,
                                    const dlcp_mlt_arrival *arr,
                                    dlcp_tstamp now);

/*
 * dlcp_mlt_on_data_apart takes a DATA datagram of |dgram_len| bytes whose
 * header (the first |hdr_len| >= 44 bytes, a copy the sender can no longer
 * change) and payload (the rest, at |payload|) lie apart: the payload may
 * be in memory the sender still writes (a shared-memory ring), as it is
 * only copied into the posted buffer or handed to its place function,
 * never interpreted.  Returns as dlcp_mlt_on_datagram.
 */
int dlcp_mlt_on_data_apart(dlcp_mlt_conn *conn, const uint8_t *hdr,
                           size_t hdr_len, const uint8_t *payload,
                           size_t dgram_len, dlcp_tstamp now);

/* dlcp_mlt_get_stats copies the connection's counters into |st|. */
void dlcp_mlt_get_stats(const dlcp_mlt_conn *conn, dlcp_mlt_stats *st);

/* dlcp_mlt_stats_add adds |st|'s counters to |sum|'s, for a driver that
 * totals its connections (ack_hold_max_ns: the larger of the two); the
 * gauges (rate_bps, window_bytes and the RTTs) of |sum| are left as they
 * are. */
void dlcp_mlt_stats_add(dlcp_mlt_stats *sum, const dlcp_mlt_stats *st);

/* dlcp_mlt_window_timeouts returns stats.window_timeouts without copying
 * the rest: a driver that reads it per packet to charge a timeout to the
 * transfer whose packet it released. */
uint64_t dlcp_mlt_window_timeouts(const dlcp_mlt_conn *conn);

/* dlcp_mlt_outstanding returns the number of transfers not yet completed. */
size_t dlcp_mlt_outstanding(const dlcp_mlt_conn *conn);

/*
 * dlcp_mlt_send_note sends the driver's own NOTE (wire.h; a collective's
 * control message) through the connection's datagram control channel:
 * reliable, in order with the other control messages, retransmitted
 * after an RTT-based timeout instead of TCP's 200 ms.  The peer's core
 * hands it to its driver as a DLCP_MLT_ACT_NOTE.  Only with
 * control_datagrams (the driver's stream carries NOTEs otherwise).
 * Returns 0, DLCP_ERR_INVALID_ARGUMENT (no control datagrams, or not a
 * NOTE) or DLCP_ERR_NOMEM.
 */
int dlcp_mlt_send_note(dlcp_mlt_conn *conn, const uint8_t *note, size_t len,
                       dlcp_tstamp now);

/*
 * dlcp_mlt_control_unacked returns the control messages sent as datagrams
 * (control_datagrams) that the peer has not acknowledged yet; 0 when
 * control messages ride the stream.  A transfer is complete here before
 * its last control message (a receiver's STOP) is safe: the driver must
 * keep polling until dlcp_mlt_control_settled, or the message is lost for
 * good and the peer's transfer runs into its stall timeout.
 */
uint32_t dlcp_mlt_control_unacked(const dlcp_mlt_conn *conn);

/*
 * dlcp_mlt_control_settled returns whether the datagram control channel
 * needs nothing more from the driver: every control message acknowledged
 * and no acknowledgement owed to the peer (one held for the ack delay
 * goes out when dlcp_mlt_next_deadline says; without it the peer
 * retransmits until it gives up).  Always true without control_datagrams.
 */
bool dlcp_mlt_control_settled(const dlcp_mlt_conn *conn);

#endif /* DLCP_PROTO_MLT_H */
