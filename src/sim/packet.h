/*
 * packet.h: the simulated packet and its pool.
 *
 * A packet is a fixed-size record, never a byte buffer: the network model
 * only needs the fields switches act on (size, priority, ECN, path) and the
 * transports keep their own header fields here too.  A driver that runs a
 * real protocol core (MLT) can carry its encoded header in |hdr|.  Packets
 * come from a free list refilled in chunks, so the per-packet path never
 * calls malloc.
 */
#ifndef DLCP_SIM_PACKET_H
#define DLCP_SIM_PACKET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dlcp/dlcp_types.h"
#include "sim/simtime.h"

/* ECN codepoints (RFC 3168), as in the IP header's two low TOS bits. */
typedef enum dlcp_sim_ecn {
  DLCP_SIM_ECN_NOT_ECT = 0,
  DLCP_SIM_ECN_ECT = 2, /* ECT(0) */
  DLCP_SIM_ECN_CE = 3
} dlcp_sim_ecn;

/* How switches choose among equal-cost next hops for this packet. */
typedef enum dlcp_sim_lb {
  DLCP_SIM_LB_ECMP = 0,  /* hash of the flow: one path per flow */
  DLCP_SIM_LB_SPRAY = 1, /* uniformly random next hop per packet */
  DLCP_SIM_LB_SOURCE = 2 /* the packet's path id picks the next hops */
} dlcp_sim_lb;

/* Packet kinds; transports interpret the rest of the fields. */
typedef enum dlcp_sim_pkt_kind {
  DLCP_SIM_PKT_DATA = 0,
  DLCP_SIM_PKT_ACK = 1,
  DLCP_SIM_PKT_CTRL = 2,
  /* A collective's NOTE (collective.c): lossless, queue 0, to the host */
  DLCP_SIM_PKT_NOTE = 3,
  /* An in-network aggregation datagram (agg_switch.c, ina_host.c): its
   * bytes live out of line in the payload store, slot |msg|, released
   * with the packet; dst DLCP_SIM_NONE addresses the aggregation switch */
  DLCP_SIM_PKT_INA = 4
} dlcp_sim_pkt_kind;

/* Room for a driver's encoded header (MLT DATA: 44 bytes, ACK: 32). */
#define DLCP_SIM_PKT_HDR_MAX 56

/* Flag bits. */
#define DLCP_SIM_PKT_F_TRIMMED 0x01u /* payload cut by a trimming switch */
#define DLCP_SIM_PKT_F_RETX 0x02u    /* a retransmission */
#define DLCP_SIM_PKT_F_ECE 0x04u     /* ACK echoes congestion (DCTCP) */
/* Rides a lossless class (MLT's control channel): never dropped for
 * buffer, ECN or random loss; only a downed link loses it. */
#define DLCP_SIM_PKT_F_LOSSLESS 0x08u
#define DLCP_SIM_PKT_F_MSG_END 0x10u /* last fragment of a control message */
/* An INA datagram between aggregation switches (CINA's chain): routed
 * towards host |dst| and taken by the switch whose node id is in |flow|. */
#define DLCP_SIM_PKT_F_TO_AGG 0x20u
/* With F_TO_AGG: a host's datagram to the single aggregation switch in
 * another rack, which takes it from host |src|. */
#define DLCP_SIM_PKT_F_FROM_HOST 0x40u

/*
 * Two cache lines.  The first holds everything the network touches on
 * every hop (queues, routing, transmitter); the second is the transport's:
 * DCTCP's sequence fields or, for a driver running a real protocol core,
 * the encoded header.  Packets are 64-byte aligned in the pool, so a hop
 * costs one line.
 */
typedef struct dlcp_sim_packet {
  struct dlcp_sim_packet *next; /* free list or port queue link */
  uint32_t flow;                /* flow id, or DLCP_SIM_NONE */
  uint32_t src;                 /* host index of the sender */
  uint32_t dst;                 /* host index of the receiver */
  uint32_t size_bytes;          /* bytes on the wire, headers included */
  uint32_t payload_bytes;       /* application bytes carried */
  uint32_t path;                /* path id chosen by the sender */
  uint32_t path_rest;           /* undecoded digits of |path| (see net.c) */
  uint32_t msg;                 /* driver's out-of-line message id */
  uint8_t kind;                 /* dlcp_sim_pkt_kind */
  uint8_t prio;                 /* switch queue, 0 = most urgent */
  uint8_t ecn;                  /* dlcp_sim_ecn */
  uint8_t lb;                   /* dlcp_sim_lb */
  uint8_t flags;                /* DLCP_SIM_PKT_F_* */
  uint8_t qidx;                 /* queue the packet sits in (set by port) */
  uint16_t hdr_len;             /* bytes used in |hdr| */
  /* pFabric's priority: the flow's remaining bytes when the packet was
   * sent, smaller first (pfabric_queue.c); 0 for control packets. */
  uint64_t rank;
  /* The port whose link delivered the packet to the switch it is queued
   * at (PFC's ingress accounting, pfc.c); DLCP_SIM_NONE from a host. */
  uint32_t ingress;
  /* What ECMP hashes beside the hosts (switch.c): 0 for a transport whose
   * flows are its connections, so the flow id stands for the 5-tuple;
   * else 1 + the index of the UDP socket the packet left from (MLT sends
   * each path from its own port, and a switch sees ports, not tensors). */
  uint16_t sport;
  /* The transport's line starts at byte 64. */
  _Alignas(64) union {
    struct {
      uint64_t seq;        /* transport sequence (segment index) */
      uint64_t ack;        /* cumulative ACK (next expected segment) */
      dlcp_sim_ps tx_ps;   /* sender time stamp */
      dlcp_sim_ps echo_ps; /* time stamp echoed by an ACK */
    };
    uint8_t hdr[DLCP_SIM_PKT_HDR_MAX]; /* opaque header bytes for a driver */
  };
} dlcp_sim_packet;

_Static_assert(sizeof(dlcp_sim_packet) == 128, "a packet is two cache lines");

typedef struct dlcp_sim_packet_pool {
  const dlcp_mem *mem;
  dlcp_sim_packet *free_list;
  void **chunks; /* every chunk ever allocated, freed at the end */
  size_t nchunks;
  size_t chunks_cap;
  uint64_t live; /* packets currently allocated */
  uint64_t peak; /* high-water mark of |live| */
  /* Called when an INA packet is freed, wherever that happens (delivered,
   * or dropped anywhere in the network), so its out-of-line bytes go back
   * to their store; NULL if no INA packet is ever made. */
  void (*release_ina)(void *ctx, dlcp_sim_packet *pkt);
  void *release_ctx;
} dlcp_sim_packet_pool;

void dlcp_sim_packet_pool_init(dlcp_sim_packet_pool *pool,
                               const dlcp_mem *mem);
void dlcp_sim_packet_pool_free(dlcp_sim_packet_pool *pool);

/* dlcp_sim_packet_alloc returns a zeroed packet, or NULL if memory ran
 * out.  The caller owns it until it hands it to the network or frees it. */
dlcp_sim_packet *dlcp_sim_packet_alloc(dlcp_sim_packet_pool *pool);

/* dlcp_sim_packet_free returns |pkt| to the pool. */
void dlcp_sim_packet_free(dlcp_sim_packet_pool *pool, dlcp_sim_packet *pkt);

#endif /* DLCP_SIM_PACKET_H */
