/*
 * segments.h: per-segment sender and receiver state shared by the
 * baselines that acknowledge every packet selectively and spray it
 * (pfabric.c, ndp.c).
 *
 * A flow of S bytes is ceil(S / mss) segments (at least one: an empty
 * flow still sends, and has ACKed, one header-only packet).  The sender
 * keeps one state byte per segment; the receiver one "arrived" byte per
 * segment until the last one arrives, when it records the delivery.
 * Transport structs embed these as their FIRST member, so the timer's
 * |conn| (whose first int is the role) and flow_free work on either.
 */
#ifndef DLCP_SIM_SEGMENTS_H
#define DLCP_SIM_SEGMENTS_H

#include "sim/sim.h"

/* Sender segment states (a transport uses the ones it needs). */
enum {
  DLCP_SIM_SEG_NEW = 0,       /* to send (never sent, or declared lost) */
  DLCP_SIM_SEG_IN_FLIGHT = 1,
  DLCP_SIM_SEG_NACKED = 2,    /* NDP: to send again, first */
  DLCP_SIM_SEG_ACKED = 3
};

typedef struct dlcp_sim_seg_tx {
  int role; /* first: the transport's timer dispatch reads it */
  uint32_t flow;
  uint64_t nseg;
  uint8_t *st;     /* one DLCP_SIM_SEG_* per segment */
  uint64_t una;    /* lowest segment not ACKed */
  uint64_t nacked; /* segments ACKed */
} dlcp_sim_seg_tx;

typedef struct dlcp_sim_seg_rx {
  int role;
  uint32_t flow;
  uint64_t nseg;
  uint64_t got_count;
  uint8_t *got;   /* freed once every segment arrived */
  uint64_t pulls; /* NDP: PULLs sent, the number the last one carried */
} dlcp_sim_seg_rx;

/* Allocates a sender struct of |size| bytes (whose first member is a
 * dlcp_sim_seg_tx) for |flow| with its state bytes; NULL if memory ran
 * out. */
void *dlcp_sim_seg_tx_new(dlcp_sim *sim, const dlcp_sim_flow *flow,
                          size_t size, int role);
/* The receiver state of |flow|, created on its first packet; NULL (and
 * the run failed with DLCP_ERR_NOMEM) if memory ran out. */
dlcp_sim_seg_rx *dlcp_sim_seg_rx_of(dlcp_sim *sim, dlcp_sim_flow *flow,
                                    int role);
/* True if segment |seg| has arrived at |rx|. */
bool dlcp_sim_seg_rx_has(const dlcp_sim_seg_rx *rx, uint64_t seg);
/* Records segment |seg| (< rx->nseg) as arrived; on the last one, records
 * the flow as delivered. */
void dlcp_sim_seg_rx_mark(dlcp_sim *sim, dlcp_sim_seg_rx *rx,
                          dlcp_sim_flow *flow, uint64_t seg, dlcp_sim_ps now);
/* Marks |seg| ACKed at the sender (it must not be ACKed yet) and moves
 * una and the flow's bytes_acked; returns true when every segment is,
 * and then frees the state bytes (tx->st is NULL): the flow is finished
 * and its transport must not read them again. */
bool dlcp_sim_seg_tx_ack(dlcp_sim *sim, dlcp_sim_seg_tx *tx,
                         dlcp_sim_flow *flow, uint64_t seg);
/* A packet of |flow| going |to_receiver| (or back to the sender): kind,
 * ends, sprayed, not ECN-capable; NULL if memory ran out. */
dlcp_sim_packet *dlcp_sim_seg_packet(dlcp_sim *sim, const dlcp_sim_flow *flow,
                                     dlcp_sim_pkt_kind kind, bool to_receiver);
/* A data packet carrying segment |seg| of |flow|, stamped |now|. */
dlcp_sim_packet *dlcp_sim_seg_data(dlcp_sim *sim, const dlcp_sim_flow *flow,
                                   uint64_t seg, dlcp_sim_ps now);
/* A first window of |configured| packets, or one BDP if 0; a timeout of
 * |configured|, or |rtts| base RTTs if 0 (at least 1 us). */
uint32_t dlcp_sim_seg_window(const dlcp_sim *sim, uint32_t configured);
dlcp_sim_ps dlcp_sim_seg_rto(const dlcp_sim *sim, dlcp_sim_ps configured,
                             uint32_t rtts);
/* flow_free for transports built on these structs. */
void dlcp_sim_seg_flow_free(dlcp_sim *sim, dlcp_sim_flow *flow);

#endif /* DLCP_SIM_SEGMENTS_H */
