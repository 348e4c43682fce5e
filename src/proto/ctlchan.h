/*
 * ctlchan.h: MLT's control messages over the datagram channel, reliable
 * and in order, sans-I/O.
 *
 * The seed sends START, PROBE, BITMAP, STOP ... over TCP.  A lost segment
 * then waits for TCP's retransmission timeout, 200 ms at least on Linux,
 * which is the very tail MLT exists to remove (issue 14: 7-17 of 100
 * iterations over 200 ms at 1 % loss).  Here each control message travels
 * in a CDATA datagram (wire.h), or several (below), with a sequence
 * number each; the peer answers with a CACK (cumulative next + a
 * 32-message selective bitmap); a message not acknowledged within the
 * RTO (the channel's own srtt + 4 rttvar, measured on prompt messages
 * and on the message each CACK echoes, less the hold the CACK reports up
 * to the ack delay; pieces' on first pieces; or the caller's estimate
 * before the first sample; plus the peer's ack delay unless the message
 * is prompt; doubling per retransmission up to a cap) is sent again.  The
 * receiver delivers messages in sequence order exactly once: duplicates are
 * dropped (and acknowledged again), early ones wait for the gap.  At most
 * DLCP_CTLCHAN_WINDOW messages are in flight; more wait.
 *
 * Acknowledgements are delayed and piggybacked, as TCP's and QUIC's: every
 * CDATA carries the cumulative acknowledgement of the other direction, and
 * a lone in-order message is acknowledged by a CACK only if nothing went
 * back within the ack delay.  Control messages mostly come in exchanges
 * (START and the data it asks for, PROBE and BITMAP, a barrier's NOTEs
 * both ways), so the reply acknowledges for free: a CACK per message
 * cost 2.5-3x the latency of a 4-64 KiB all-reduce between hosts, its
 * datagram and its wake-up being most of the work (docs/protocol.md).  A
 * quarter window of unacknowledged messages, a duplicate or a gap is
 * acknowledged at once: those are what the peer's window and loss
 * recovery wait on.
 *
 * A message longer than the channel's piece size (what fills one frame
 * of the path, as a data segment does) goes as consecutive pieces, each
 * its own CDATA with its own sequence number, acknowledgement and
 * retransmission; the receiver joins them in order and delivers the
 * message once whole.  One datagram that IP fragments instead is lost
 * with any of its fragments, and the kernel keeps the other fragments
 * of an incomplete one for 30 s: at 1 % loss on the 4-host testbed
 * (MTU 1500) they filled its reassembly memory and every fragmented
 * message was dropped until they expired, a 16 KiB all-reduce taking
 * 28 s (docs/protocol.md).  Only the last piece of a prompt message is
 * prompt (no ack delay in its timeout).  A burst of pieces reaches the
 * peer at the bottleneck's pace, not at once, so the receiver
 * acknowledges pieces every DLCP_CTLCHAN_PIECE_ACKS (and a message of
 * more pieces than that at the piece before the last and once whole),
 * every acknowledgement of something new restarts the timeouts of what
 * is still in flight (RFC 6298's rule), and the pieces of such long
 * messages have their own RTT estimator.  A shorter message in pieces
 * whose next piece has not come within a quarter of the latest round
 * trip is reported by a CACK of the pieces it has, and a message
 * acknowledged in part is acknowledged at once when whole.  A last piece
 * left alone in flight, and a copy sent on the peer's selective bits, are
 * expected the latest round trip (from the CACK's echo) and a quarter
 * after their sending (RACK).
 *
 * A message whose answer is not a control message (a START is answered by
 * data, a BITMAP by retransmissions, a STOP or FINISH by nothing) has no
 * reply to ride on: both ends know it by its type, so it is "prompt" at
 * both.  The receiver acknowledges it at once and the sender's RTO leaves
 * out the ack delay, so losing one costs a few RTTs, not the ack delay on
 * top (1 ms in the runtime: two or three lost STARTs, BITMAPs or STOPs per
 * 4 MiB all-reduce at 1 % loss were its whole tail, issue 14).  Prompt
 * messages are also the RTT samples: their acknowledgement is not held.
 *
 * A timeout shorter than the peer takes to answer sends copies for
 * nothing: a peer whose process waits for a core answers late, and 128
 * ranks on 2 cores sent a third of their control datagrams twice.  The
 * receiver can tell such copies apart: a copy of a message it delivered
 * but had not yet acknowledged was needless, whatever the network did (a
 * copy of an acknowledged message may mean only that the acknowledgement
 * was lost, and proves nothing).  Its next CACK, sent at once, names the
 * latest such copy.  The sender remembers its last DLCP_CTLCHAN_RESENT_LOG
 * messages sent again after their timeout; for one of those it takes the
 * time from the first transmission to this report (less the ack delay,
 * which a message not prompt has on top of its timeout) as an RTT sample,
 * once the estimate has a round trip of its own.
 */
#ifndef DLCP_PROTO_CTLCHAN_H
#define DLCP_PROTO_CTLCHAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dlcp/dlcp_types.h"

/* Messages (pieces) in flight, and those a receiver keeps ahead of a
 * gap. */
#define DLCP_CTLCHAN_WINDOW 128u
/* The smallest piece size: a first piece holds the message's preamble. */
#define DLCP_CTLCHAN_MIN_PIECE 64u
/* Later messages the peer must have received before a skipped one counts
 * as lost rather than reordered. */
#define DLCP_CTLCHAN_REORDER 3u
/* In-order pieces of a long message acknowledged together at most. */
#define DLCP_CTLCHAN_PIECE_ACKS 8u
/* Messages sent again that a sender remembers, to learn from the peer
 * that a copy came before it had answered the first (see below). */
#define DLCP_CTLCHAN_RESENT_LOG 16u
/* The buffers of long messages a channel keeps for the next ones: a
 * sender's full-size piece buffers up to this many bytes (two 64 KiB
 * EAGERs in flight, in pieces of any frame), and a receiver's buffer for
 * joining pieces while no longer.  Allocating and freeing ~64 KiB per
 * EAGER made glibc give the top of its heap back to the kernel and fault
 * it in again message after message (docs/protocol.md). */
#define DLCP_CTLCHAN_KEEP_BYTES (160u << 10)

typedef struct dlcp_ctlchan_out {
  uint8_t *bytes; /* owned copy of the control message (a piece of it) */
  uint32_t len;
  bool full_size; /* |bytes| holds max_piece bytes: a piece of a long
                     message, whose buffer may be kept for another */
  uint32_t rest;  /* bytes of its message in the pieces after it */
  bool acked;
  bool sent;
  bool resend_now; /* found lost by the peer's selective bits: the next
                      transmission is due at once and keeps its timeout */
  bool resent_fast; /* ... and was made: no second one before a timeout */
  bool prompt;      /* acknowledged at once by the peer (see above) */
  bool grouped;     /* one of more than DLCP_CTLCHAN_PIECE_ACKS pieces of
                       its message, which the peer acknowledges in groups
                       and at once when whole */
  bool sample;      /* its acknowledgement is an RTT sample: a prompt
                       message's, or a grouped message's first piece */
  bool resent;      /* sent more than once: its ack is an RTT sample only
                       through the CACK's echo (see ack_one) */
  dlcp_tstamp sent_at; /* first transmission */
  dlcp_tstamp due;   /* next (re)transmission */
  dlcp_duration rto; /* this message's current timeout */
} dlcp_ctlchan_out;

/* A message sent again: what its timeout would have needed to be, once
 * the peer says the copy was needless. */
typedef struct dlcp_ctlchan_resent {
  uint32_t seq;
  bool valid;
  bool prompt;
  bool grouped;
  dlcp_tstamp sent_at; /* first transmission */
} dlcp_ctlchan_resent;

typedef struct dlcp_ctlchan {
  const dlcp_mem *mem;
  uint32_t job;
  uint32_t max_piece; /* the most bytes of a message one CDATA carries */
  /* sender: a ring of messages from |una| (oldest unacknowledged) on */
  dlcp_ctlchan_out *out;
  /* full-size piece buffers kept for the next long message: a list
   * linked through each buffer's first bytes, |spare_bytes| in all */
  uint8_t *spare;
  uint32_t spare_bytes;
  uint32_t cap, head, count; /* ring capacity (power of two), first, size */
  uint32_t una;              /* sequence number of out[head] */
  /* receiver */
  uint32_t next; /* next sequence number to deliver */
  uint8_t *early[DLCP_CTLCHAN_WINDOW]; /* by seq % WINDOW, or NULL */
  uint32_t early_len[DLCP_CTLCHAN_WINDOW];
  uint32_t early_rest[DLCP_CTLCHAN_WINDOW];
  uint32_t nearly; /* early messages held */
  /* the message being joined from its pieces: NULL, or |joined_len| of
   * its |joined_total| bytes, in |join_buf| (|join_cap| bytes, kept
   * between messages up to DLCP_CTLCHAN_KEEP_BYTES) */
  uint8_t *joined;
  uint8_t *join_buf;
  uint32_t join_cap;
  uint32_t joined_len, joined_total;
  uint32_t joined_pieces; /* pieces of it taken so far */
  bool joined_grouped;    /* it has more than DLCP_CTLCHAN_PIECE_ACKS */
  dlcp_duration ack_delay;
  dlcp_duration min_rto; /* no timeout is shorter (see dlcp_ctlchan_init) */
  dlcp_tstamp cack_at;  /* a CACK is owed from then; NEVER: none owed */
  /* the message being joined has waited too long for its next piece
   * from then: a CACK reports the pieces it has (NEVER: none waits) */
  dlcp_tstamp tail_at;
  uint32_t unacked_rx;  /* in-order messages since our last acknowledgement */
  uint32_t acked_next;  /* the cumulative ack we last sent */
  /* copies of delivered messages that came before acked_next covered
   * them, for the next CACK: count (saturating) and the latest's seq */
  uint32_t early_copies, early_copy_seq;
  dlcp_tstamp ts_recent;    /* what our next CACK echoes (on_cdata) */
  dlcp_tstamp ts_recent_at; /* when that CDATA arrived (the CACK's hold) */
  /* sender: the latest messages sent again, a ring */
  dlcp_ctlchan_resent resent_log[DLCP_CTLCHAN_RESENT_LOG];
  uint32_t resent_next;
  /* retransmissions: copies sent again; needless: of those sent after
   * their timeout, copies the peer got before it had acknowledged the
   * first; duplicates: copies received of messages we had acknowledged
   * or held (our acknowledgement may be lost); copies received before
   * we had acknowledged go to the next CACK (early_copies) */
  uint64_t retransmissions, needless, duplicates;
  /* RFC 6298's estimator over whole messages (prompt ones, and the one
   * a CACK echoes), and one over first pieces (see ack_one); 0: no
   * sample */
  dlcp_duration srtt, rttvar;
  dlcp_duration piece_srtt, piece_rttvar;
  /* the round trip of the transmission the latest CACK that acknowledged
   * something echoed, its hold taken out up to the ack delay (0: none
   * yet): RACK's RTT of the most recently delivered, for the timeouts of
   * messages alone in flight */
  dlcp_duration latest_rtt;
} dlcp_ctlchan;

/* Delivers one control message, in order, exactly once, and says whether
 * it is prompt (its acknowledgement goes back at once). */
typedef bool (*dlcp_ctlchan_deliver_fn)(void *user, const uint8_t *msg,
                                        size_t len);

/* dlcp_ctlchan_init: |ack_delay| is how long a lone in-order message may
 * wait for a CDATA going back to carry its acknowledgement (0: a CACK at
 * once); the peer's RTO must allow for it.  |min_rto| is the shortest
 * timeout the estimate may give: on a path whose round trip hardly varies
 * (a simulated fabric) srtt + 4 rttvar comes within nanoseconds of the
 * RTT, and an acknowledgement queued behind one packet more was taken for
 * a loss.  |max_piece| is the most bytes of a message one CDATA carries
 * (at least DLCP_CTLCHAN_MIN_PIECE; 0 or more than a datagram holds: as
 * many as it holds). */
void dlcp_ctlchan_init(dlcp_ctlchan *ch, const dlcp_mem *mem, uint32_t job,
                       dlcp_duration ack_delay, dlcp_duration min_rto,
                       uint32_t max_piece);
void dlcp_ctlchan_fini(dlcp_ctlchan *ch);

/* dlcp_ctlchan_send queues a copy of the control message |msg| (at most
 * DLCP_WIRE_CTRL_MAX bytes), in pieces of at most max_piece bytes;
 * |prompt| as the peer's deliver function will say of it.  Returns 0,
 * DLCP_ERR_INVALID_ARGUMENT or DLCP_ERR_NOMEM (nothing queued). */
int dlcp_ctlchan_send(dlcp_ctlchan *ch, const uint8_t *msg, size_t len,
                      bool prompt, dlcp_tstamp now);

/* dlcp_ctlchan_poll writes the next datagram due at |now| into |buf|: a
 * CACK if one is owed by now (or a message's next piece is late), else a
 * CDATA whose (re)transmission is due (carrying our acknowledgement,
 * which then settles what was owed unless a gap needs the selective
 * bits).  A new message's first timeout is the channel's srtt + 4 rttvar
 * (a grouped piece's: over pieces), or |rto| before the first sample,
 * plus the ack delay unless it is prompt; |max_rto| caps the doubling.
 * Returns its length, 0 if nothing is due, or
 * DLCP_ERR_BUFFER_TOO_SMALL. */
dlcp_ssize dlcp_ctlchan_poll(dlcp_ctlchan *ch, uint8_t *buf, size_t buflen,
                             dlcp_duration rto, dlcp_duration max_rto,
                             dlcp_tstamp now);

/* dlcp_ctlchan_on_datagram takes a CDATA or CACK datagram of this job
 * (the caller checked the type and job), arrived at |now|.  In-order
 * CDATA messages, once whole, go to |deliver|.  Returns 0, the decoder's
 * error, or, with the message dropped and the channel going on,
 * DLCP_ERR_BAD_LENGTH when its pieces disagree on its length or
 * DLCP_ERR_NOMEM when there was no memory to join them. */
int dlcp_ctlchan_on_datagram(dlcp_ctlchan *ch, const uint8_t *buf,
                             size_t len, dlcp_ctlchan_deliver_fn deliver,
                             void *user, dlcp_tstamp now);

/* dlcp_ctlchan_deadline returns when poll next has something to send
 * (a retransmission, or a CACK owed): DLCP_TSTAMP_NEVER if nothing is
 * pending. */
dlcp_tstamp dlcp_ctlchan_deadline(const dlcp_ctlchan *ch);

/* dlcp_ctlchan_unacked returns the control messages queued or in flight
 * and not yet acknowledged. */
uint32_t dlcp_ctlchan_unacked(const dlcp_ctlchan *ch);

/* dlcp_ctlchan_owes_ack returns whether a CACK is owed (now, after the
 * ack delay, or to report a message whose next piece is late). */
bool dlcp_ctlchan_owes_ack(const dlcp_ctlchan *ch);

#endif /* DLCP_PROTO_CTLCHAN_H */
