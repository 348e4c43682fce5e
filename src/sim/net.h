/*
 * net.h: the network model: nodes (hosts and switches), their egress ports,
 * the links between them, and routing.
 *
 * A cable between two nodes is two directed ports, one per direction.  A
 * port is htsim's queue + pipe pair: K strict-priority queues sharing a
 * buffer (queue.c), a transmitter that serializes one packet at a time at
 * the port's rate, and a pipe that delays it by the propagation delay and
 * may lose it (link.c).  Switches forward by destination host over
 * shortest paths, choosing among equal-cost next hops by flow hash (ECMP),
 * at random per packet (spraying) or by the packet's path id (source
 * routing) (switch.c).  Hosts have one port, their NIC, and hand arriving
 * packets to the simulation's transport through |host_rx| (host.c).
 */
#ifndef DLCP_SIM_NET_H
#define DLCP_SIM_NET_H

#include <stdbool.h>
#include <stdint.h>

#include "dlcp/dlcp_types.h"
#include "proto/rng.h"
#include "sim/engine.h"
#include "sim/packet.h"

#define DLCP_SIM_MAX_QUEUES 8u
#define DLCP_SIM_NONE UINT32_MAX
#define DLCP_SIM_NAME_MAX 32u

/* What a port did with a packet offered to it (queue.c). */
typedef enum dlcp_sim_verdict {
  DLCP_SIM_ENQUEUED = 0,      /* queued unchanged */
  DLCP_SIM_MARKED = 1,        /* queued, ECN CE set (queue above threshold) */
  DLCP_SIM_TRIMMED = 2,       /* payload cut, header queued at priority 0 */
  DLCP_SIM_DROP_SELECTIVE = 3, /* non-ECT packet above the ECN threshold */
  DLCP_SIM_DROP_BUFFER = 4    /* no buffer space */
} dlcp_sim_verdict;

/* Queueing policy of a port; shared by every port of one kind. */
typedef struct dlcp_sim_port_config {
  uint32_t nqueues;      /* strict-priority queues, 1..8; queue 0 first */
  uint64_t buffer_bytes; /* per-port buffer (unused with a shared pool) */
  /* Per-queue ECN/RED threshold in bytes: a packet that arrives to find at
   * least this many bytes in its queue is marked CE if ECT, or dropped if
   * not ECT.  UINT64_MAX disables marking for that queue. */
  uint64_t ecn_threshold_bytes[DLCP_SIM_MAX_QUEUES];
  /* A threshold on the port's bytes in all its queues together, OR-ed
   * with the per-queue rule (thresholds or RED): a packet that arrives to
   * find at least this many bytes on the port is marked CE if ECT, or
   * dropped if not ECT.  With strict priority a starved queue holds its
   * packets while the queue being served stays under its own threshold,
   * so per-queue thresholds alone let the port fill to its buffer.
   * 0 (the default): none. */
  uint64_t ecn_port_threshold_bytes;
  bool trimming;       /* cut data packets to a header instead of dropping */
  uint32_t trim_bytes; /* size of a trimmed packet on the wire */
  /* pFabric's discipline instead of the K FIFOs (pfabric_queue.c). */
  bool pfabric;
  /* RED on the instantaneous queue (replaces the per-queue thresholds
   * when red_max_bytes > 0): below min nothing, from max on every packet,
   * in between with probability red_max_p * (q - min) / (max - min), an
   * ECT packet is marked and a not-ECT one dropped. */
  uint64_t red_min_bytes;
  uint64_t red_max_bytes;
  double red_max_p;
} dlcp_sim_port_config;

/*
 * Priority flow control (IEEE 802.1Qbb, pfc.c).  A switch counts, per
 * ingress link and lossless priority, the bytes it holds that arrived on
 * that link.  When the count reaches xoff it sends PAUSE for that
 * priority to the transmitter at the link's other end, which stops
 * starting packets of that priority one link delay later; at or below
 * xon it sends RESUME.  Packets of a lossless priority skip the egress
 * buffer limit and the selective drop: they are admitted while their
 * ingress count stays within xoff + headroom (the buffer reserved for what
 * is in flight while the PAUSE travels), and dropped beyond it (counted,
 * a misconfigured headroom).
 */
typedef struct dlcp_sim_pfc_config {
  uint8_t prio_mask; /* lossless priorities (queue indices); 0: no PFC */
  uint64_t xoff_bytes;
  uint64_t xon_bytes;
  uint64_t headroom_bytes;
} dlcp_sim_pfc_config;

/* A switch ingress: the far end of directed port i, indexed by i. */
typedef struct dlcp_sim_pfc_ingress {
  uint64_t bytes[DLCP_SIM_MAX_QUEUES];
  dlcp_sim_ps paused_since[DLCP_SIM_MAX_QUEUES];
  uint8_t xoff_sent; /* priorities this ingress holds paused upstream */
  uint64_t pauses;   /* PAUSE frames sent upstream */
  dlcp_sim_ps paused_ps; /* summed over priorities, as the sender saw it */
  uint64_t headroom_drops;
} dlcp_sim_pfc_ingress;

/* A switch's shared packet memory with dynamic thresholds (Choudhury &
 * Hahne): a queue may grow while its length stays below alpha times the
 * memory still free. */
typedef struct dlcp_sim_buffer_pool {
  uint64_t size_bytes;
  uint64_t used_bytes;
  double alpha;
} dlcp_sim_buffer_pool;

typedef struct dlcp_sim_queue {
  dlcp_sim_packet *head;
  dlcp_sim_packet *tail;
  uint64_t bytes; /* queued bytes, the packet being serialized included */
  uint32_t pkts;
  uint64_t max_bytes; /* high-water mark of |bytes| */
  uint64_t enq_pkts;
  uint64_t marks;
  uint64_t drops_selective;
  uint64_t drops_buffer;
  uint64_t trims;
} dlcp_sim_queue;

typedef struct dlcp_sim_port {
  /* The fields every packet touches come first, within 64 bytes. */
  struct dlcp_sim_net *net;
  /* The pipe: packets in flight with their arrival times, in arrival
   * order (the delay is the same for all, so FIFO), in a ring that grows
   * on demand.  Only the head has an event in the engine, which keeps the
   * event heap small; the times live here, not in the (cold) packets. */
  struct dlcp_sim_pipe_slot {
    dlcp_sim_ps due;
    dlcp_sim_packet *pkt;
  } *pipe;
  uint32_t pipe_head, pipe_len, pipe_cap; /* cap: 0 or a power of two */
  uint32_t peer;        /* node at the far end */
  dlcp_sim_ps delay_ps; /* propagation delay */
  /* Serialization without a division per packet: 8e12 / rate_bps as
   * quotient and remainder (see dlcp_sim_serialization_ps). */
  uint64_t ser_q;
  const dlcp_sim_port_config *cfg;
  bool up;
  bool busy;          /* a packet is being serialized */
  uint8_t paused;     /* > 0: the transmitter starts nothing (PAUSE) */
  uint8_t nonempty;   /* bit q set iff queue q holds a packet waiting */
  uint8_t pfc_paused; /* bit q set: priority q PAUSEd by the next hop */
  uint64_t ser_r;
  uint64_t rate_bps;  /* > 0 */
  uint64_t bytes;               /* bytes held by this port, all queues */
  uint64_t pfc_bytes; /* ... of which admitted as lossless (pfc.c): they
                         live in ingress buffer, not this port's */
  dlcp_sim_buffer_pool *shared; /* NULL: cfg->buffer_bytes per port */
  double loss;        /* probability a transmitted packet is lost, [0,1] */
  uint32_t id;
  uint32_t node;      /* owner (transmitting) node */
  uint32_t reverse;   /* port of the opposite direction */
  uint32_t cable;     /* index of the duplex cable (both directions) */
  struct dlcp_sim_pcap *pcap; /* capture of this cable, or NULL */
  dlcp_sim_queue q[DLCP_SIM_MAX_QUEUES];
  dlcp_rng rng; /* this link's loss draws */
  dlcp_rng red_rng; /* RED's marking draws */
  /* Counters over the whole run. */
  uint64_t tx_pkts;
  uint64_t tx_bytes;
  uint64_t tx_data_payload_bytes; /* payload of DATA packets sent */
  uint64_t drops_loss;            /* random (gray-failure) loss */
  uint64_t drops_down;            /* sent into or on a downed link */
} dlcp_sim_port;

typedef enum dlcp_sim_node_kind {
  DLCP_SIM_NODE_HOST = 0,
  DLCP_SIM_NODE_SWITCH = 1
} dlcp_sim_node_kind;

typedef struct dlcp_sim_node {
  dlcp_sim_node_kind kind;
  uint32_t id;
  uint32_t host;  /* host index for hosts, DLCP_SIM_NONE for switches */
  uint32_t group; /* rack (hosts), pod or layer (switches); for placement */
  uint32_t tier;  /* 0 host, 1 ToR/edge, 2 spine/agg, 3 core */
  char name[DLCP_SIM_NAME_MAX];
  uint32_t first_port; /* into net->node_ports (CSR, filled at finalize) */
  uint32_t nports;
  dlcp_sim_buffer_pool pool; /* switches with a shared buffer */
  uint64_t drops_noroute;    /* packets with no usable next hop */
} dlcp_sim_node;

/* Called for every packet that reaches its destination host; the callee
 * owns |pkt|. */
typedef void (*dlcp_sim_host_rx_fn)(void *ctx, uint32_t host,
                                    dlcp_sim_packet *pkt, dlcp_sim_ps now);
/* Called for every INA packet that reaches switch |node| addressed to an
 * aggregation switch: from a host (dst DLCP_SIM_NONE), or from another
 * aggregation switch (flag TO_AGG, the target switch in |flow|).  Returns
 * true if it took |pkt| (the switch has that role and is the target);
 * false leaves it to ordinary forwarding. */
typedef bool (*dlcp_sim_agg_rx_fn)(void *ctx, uint32_t node,
                                   dlcp_sim_packet *pkt, dlcp_sim_ps now);

typedef struct dlcp_sim_net {
  const dlcp_mem *mem;
  dlcp_sim_engine *engine;
  dlcp_sim_packet_pool *pool;
  dlcp_sim_node *nodes;
  uint32_t nnodes, nodes_cap;
  dlcp_sim_port *ports;
  uint32_t nports, ports_cap;
  uint32_t *hosts; /* host index -> node id */
  uint32_t nhosts;
  uint32_t *node_ports; /* egress port ids grouped by node */
  /* Routing.  Every host has one link, to its attachment node (its ToR):
   * the paths to a host are the paths to its attachment node and that
   * link, so routes are kept per attachment node, a destination class
   * shared by the hosts on one ToR (a table of nodes x ToRs instead of
   * nodes x hosts: at 1,024 hosts 8x smaller, most of it in cache).  For
   * node n and class c the equal-cost egress ports are ports[off ..
   * off+cnt) with off, cnt = cells[n * nclasses + c]; at the attachment
   * node itself the port is host_port[h].  |live| skips downed links and
   * is recomputed on every link change (a host whose link is down is
   * unreachable from everywhere, host_up); |fixed| is computed once with
   * every link up, and is what source routing follows, so a source-routed
   * packet sent towards a dead link is lost rather than silently
   * rerouted. */
  uint32_t *host_class;  /* per host: its class */
  uint32_t *host_attach; /* per host: its attachment node */
  uint32_t *host_port;   /* per host: the attachment node's port to it */
  uint32_t *class_node;  /* per class: the attachment node */
  uint32_t nclasses;
  struct dlcp_sim_routes {
    struct dlcp_sim_route_cell {
      uint32_t off;
      uint32_t cnt;
    } *cells; /* one 8-byte cell per (node, class) */
    uint32_t *ports;
    uint32_t nports, ports_cap;
    uint8_t *host_up; /* per host: its link is up (always, in |fixed|) */
  } live, fixed;
  dlcp_sim_port_config switch_port_cfg;
  dlcp_sim_port_config host_port_cfg;
  uint64_t shared_buffer_bytes; /* 0: per-port buffers */
  double dt_alpha;
  dlcp_sim_pfc_config pfc;      /* switch ports */
  dlcp_sim_pfc_ingress *pfc_in; /* per port; NULL without PFC */
  uint64_t ecmp_salt;     /* seeds the flow hash */
  dlcp_rng spray_rng;     /* per-packet spraying choices */
  dlcp_sim_host_rx_fn host_rx;
  void *host_rx_ctx;
  uint64_t misdelivered; /* reached a host that is not the destination */
  /* The switches with the aggregation role (agg_switch.c); NULL if none.
   * An INA packet from a host that reaches a switch without the role has
   * no route (hosts must be attached to one: the scenario checks). */
  dlcp_sim_agg_rx_fn agg_rx;
  void *agg_rx_ctx;
  bool finalized;
} dlcp_sim_net;

/* True if |pkt|, arrived over a link, rides lossless priority |qi|
 * (inline: every enqueue asks, and without PFC the answer is one load). */
static inline bool dlcp_sim_pfc_class(const dlcp_sim_net *net,
                                      const dlcp_sim_packet *pkt,
                                      uint32_t qi) {
  return net && net->pfc_in && pkt->ingress != DLCP_SIM_NONE &&
         (net->pfc.prio_mask & (1u << qi)) != 0;
}

/* The same at switch port |port|. */
static inline bool dlcp_sim_pfc_lossless(const dlcp_sim_port *port,
                                         const dlcp_sim_packet *pkt,
                                         uint32_t qi) {
  return dlcp_sim_pfc_class(port->net, pkt, qi);
}

/* Network construction (net.c). */
int dlcp_sim_net_init(dlcp_sim_net *net, dlcp_sim_engine *engine,
                      dlcp_sim_packet_pool *pool, const dlcp_mem *mem,
                      uint64_t seed);
void dlcp_sim_net_free(dlcp_sim_net *net);
/* Adds a node and returns its id, or DLCP_SIM_NONE if memory ran out. */
uint32_t dlcp_sim_net_add_node(dlcp_sim_net *net, dlcp_sim_node_kind kind,
                               const char *name, uint32_t group,
                               uint32_t tier);
/* Adds a duplex cable a<->b; returns the a->b port id or DLCP_SIM_NONE. */
uint32_t dlcp_sim_net_add_cable(dlcp_sim_net *net, uint32_t a, uint32_t b,
                                uint64_t rate_bps, dlcp_sim_ps delay_ps);
/* Builds the per-node port lists and the routing tables.  Fails with
 * DLCP_ERR_CONFIG if a host does not have exactly one cable. */
int dlcp_sim_net_finalize(dlcp_sim_net *net);
/* Finds a node by name; DLCP_SIM_NONE if there is none. */
uint32_t dlcp_sim_net_find_node(const dlcp_sim_net *net, const char *name);
/* Finds the port from node a to node b; DLCP_SIM_NONE if not adjacent. */
uint32_t dlcp_sim_net_find_port(const dlcp_sim_net *net, uint32_t a,
                                uint32_t b);
/* Brings both directions of |cable| (a port id of either direction) up or
 * down and recomputes the live routes. */
int dlcp_sim_net_set_link(dlcp_sim_net *net, uint32_t port, bool up);
/* Schedules dlcp_sim_net_set_link at |at|. */
void dlcp_sim_net_schedule_link(dlcp_sim_net *net, uint32_t port, bool up,
                                dlcp_sim_ps at);
/* Rack of a host: the group of the switch its NIC connects to. */
uint32_t dlcp_sim_net_host_rack(const dlcp_sim_net *net, uint32_t host);

/* Port queueing (queue.c). */
void dlcp_sim_port_init(dlcp_sim_port *port, const dlcp_sim_port_config *cfg,
                        dlcp_sim_buffer_pool *shared);
/* Offers |pkt| to the port's queues.  On a DROP verdict the caller still
 * owns |pkt|; otherwise the port does. */
dlcp_sim_verdict dlcp_sim_port_enqueue(dlcp_sim_port *port,
                                       dlcp_sim_packet *pkt);
/* Removes the next packet to serialize (strict priority, FIFO within a
 * queue) or returns NULL.  Its bytes stay counted until
 * dlcp_sim_port_release. */
dlcp_sim_packet *dlcp_sim_port_dequeue(dlcp_sim_port *port);
void dlcp_sim_port_release(dlcp_sim_port *port, const dlcp_sim_packet *pkt);
/* Appends |pkt| to queue |qi| of |port| and counts its bytes. */
void dlcp_sim_port_append(dlcp_sim_port *port, uint32_t qi,
                          dlcp_sim_packet *pkt);

/* pFabric's port discipline (pfabric_queue.c): one queue ordered by
 * packet rank; same contracts as dlcp_sim_port_enqueue/dequeue. */
dlcp_sim_verdict dlcp_sim_pfabric_enqueue(dlcp_sim_port *port,
                                          dlcp_sim_packet *pkt);
dlcp_sim_packet *dlcp_sim_pfabric_dequeue(dlcp_sim_port *port);

/* Transmission (link.c): queue |pkt| on |port| and start sending if idle.
 * Takes ownership of |pkt|. */
void dlcp_sim_port_send(dlcp_sim_port *port, dlcp_sim_packet *pkt,
                        dlcp_sim_ps now);

/* Pauses (|pause|) or resumes |port|'s transmitter: a paused port
 * finishes the packet it is serializing and then sends nothing until every
 * pause was resumed (pauses nest).  Queued packets wait; arrivals are
 * still queued (and dropped if the buffer is full). */
void dlcp_sim_port_pause(dlcp_sim_port *port, bool pause, dlcp_sim_ps now);

/* PFC: priority |prio| of |port|'s transmitter is paused or resumed. */
void dlcp_sim_port_pfc(dlcp_sim_port *port, uint32_t prio, bool pause,
                       dlcp_sim_ps now);

/* PFC's accounting (pfc.c), called by the queues of switch ports.  init
 * allocates the per-ingress state if net->pfc has lossless priorities. */
int dlcp_sim_pfc_init(dlcp_sim_net *net);

/* Headroom admission of a lossless packet; counts a drop when false. */
bool dlcp_sim_pfc_admit(dlcp_sim_port *port, const dlcp_sim_packet *pkt,
                        uint32_t qi);
/* |pkt| joined / left a queue of |port|. */
void dlcp_sim_pfc_count_in(dlcp_sim_port *port, const dlcp_sim_packet *pkt);
void dlcp_sim_pfc_count_out(dlcp_sim_port *port, const dlcp_sim_packet *pkt);
/* The same for a switch's own consumer of packets (the aggregation
 * processor's queue), which holds lossless packets of priority |qi| as a
 * port's queue does: admission within xoff + headroom (false counts a
 * headroom drop), then hold and release against the ingress. */
bool dlcp_sim_pfc_room(dlcp_sim_net *net, const dlcp_sim_packet *pkt,
                       uint32_t qi);
void dlcp_sim_pfc_hold(dlcp_sim_net *net, const dlcp_sim_packet *pkt,
                       uint32_t qi);
void dlcp_sim_pfc_release(dlcp_sim_net *net, const dlcp_sim_packet *pkt,
                          uint32_t qi);

/* Drops every packet waiting in |port| (the link went down). */
void dlcp_sim_port_flush(dlcp_sim_port *port);

/* Capture (pcap.c): |pkt| left |port| at |now| and is on the wire. */
struct dlcp_sim_pcap;
void dlcp_sim_pcap_record(struct dlcp_sim_pcap *cap,
                          const dlcp_sim_port *port,
                          const dlcp_sim_packet *pkt, dlcp_sim_ps now);

/* Forwarding (switch.c): |pkt| arrived at switch |node|. */
void dlcp_sim_switch_receive(dlcp_sim_net *net, uint32_t node,
                             dlcp_sim_packet *pkt, dlcp_sim_ps now);
/* The egress port a switch picks for |pkt|, or DLCP_SIM_NONE. */
uint32_t dlcp_sim_switch_route(dlcp_sim_net *net, uint32_t node,
                               dlcp_sim_packet *pkt);

/* Hosts (host.c). */
/* Sends |pkt| from host |host| through its NIC; takes ownership. */
void dlcp_sim_host_send(dlcp_sim_net *net, uint32_t host,
                        dlcp_sim_packet *pkt, dlcp_sim_ps now);
void dlcp_sim_host_receive(dlcp_sim_net *net, uint32_t node,
                           dlcp_sim_packet *pkt, dlcp_sim_ps now);
/* The NIC port of |host|. */
dlcp_sim_port *dlcp_sim_host_nic(dlcp_sim_net *net, uint32_t host);

#endif /* DLCP_SIM_NET_H */
