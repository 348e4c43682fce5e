/*
 * agg_switch.c: the aggregation switch role, CINA's chain of them, and the
 * bytes of INA packets.
 *
 * Role.  One switch of the network (aggregation.switch), or each switch of
 * CINA's chain (aggregation.chain), runs a src/proto/agg core, the same
 * object dlcp-switch runs per worker thread.
 * An INA datagram a host addresses to the switch (dst DLCP_SIM_NONE, or
 * from another rack routed towards a host attached to the single switch:
 * dlcp_sim_agg_address) crosses the links like any packet (queueing, ECN,
 * loss) and is handed here when it reaches that switch (switch.c).  The
 * switch processes packets one at a time in arrival order, |per_packet_ps| each
 * (a software switch's CPU, or 0 for a line-rate pipeline): a packet that
 * arrives while the processor is busy waits for it in a FIFO of at most
 * |queue_pkts| packets (a NIC ring, a socket buffer); one that finds it
 * full is dropped and counted, and the hosts' re-sends recover it.  With
 * PFC on the packet's priority (PANAMA's lossless fabric for aggregation
 * traffic) the FIFO is no limit: its packets are held against the link
 * they came in on, as a port's queue holds them, and past xoff that link
 * is PAUSEd until the processor has drained it to xon; so are the chain's
 * hops between switches, which ride a lossless class.
 * The core's answers (results, NACKs) leave at the instant their packet is
 * processed, through the switch's egress port towards the host, with the
 * ECN codepoint the core chose (the OR of the contributions') on the
 * queue the host's own packets used.  The core's timers (result re-sends,
 * leases) run on one engine timer per switch.  The address cookie the
 * core keys workers by is the host index (CHILD_COOKIE + rank for a child
 * switch of a chain or tree).
 *
 * Chains and trees (CINA, HINA and MTINA, the seed's chapter 4).  The
 * switches of cfg.agg.chain each sum their masters (the job's ranks below
 * them) and the partial sums of their child switches, which are more
 * workers of their core (ranks after the masters).  Forwarding is the
 * core's own (src/proto/agg.h, "Chains"), as in dlcp-switch: each core is
 * configured with its parent and its place there in every tree it is in
 * (MTINA: group g in tree g mod ntrees), so a group complete at a switch
 * with a parent goes up as one contribution, re-sent until the parent's
 * final comes back; the final becomes the result there, is sent to the
 * masters and passed down to the child switches, re-sent until
 * acknowledged, and every copy is acknowledged up.  CINA's chain is the
 * path ToR0 -> ToR1 -> ... -> ToR(L-1) (each ToR the parent of the one
 * before, every one with masters); HINA's tree has the ToRs as leaves
 * under an aggregation and core tier without masters.  The hops between
 * switches ride a lossless class (the seed assumes a lossless fabric, as
 * PFC gives); a switch's cookie for another switch is SWITCH_COOKIE plus
 * its index, the hosts' their host index.  Several jobs may share the
 * chain or trees (and every switch's pool): the first job's masters set
 * each switch's world and place, and a later job must have as many
 * masters below each switch (dlcp_sim_agg_chain_job).
 *
 * Bytes.  A simulated packet is a fixed record, so an INA datagram's bytes
 * (header and int32 payload, which the core and the hosts really add up)
 * live out of line in a store of slots, slot |msg| of the packet.  The
 * packet pool calls back when an INA packet is freed, wherever that
 * happens (delivered, or dropped by a queue, a lossy link or a downed
 * one), and the slot goes back on the free list; slots keep their memory,
 * so the steady state allocates nothing.  The first 32 bytes (the INA
 * header) are also copied into the packet's |hdr|, so pcap captures show
 * them.
 */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "proto/agg.h"
#include "sim/sim.h"

_Static_assert(DLCP_SIM_AGG_MAX_TREES <= DLCP_AGG_MAX_TREES,
               "every tree of a scenario is a tree of the core");

/* IPv4 + UDP headers around a datagram on the wire. */
#define INA_IP_UDP_BYTES 28u

typedef struct ina_slot {
  uint8_t *bytes;
  uint32_t len, cap;
  uint32_t next_free; /* DLCP_SIM_NONE at the end of the free list */
  uint32_t from;      /* a hop between switches: the sender's role */
} ina_slot;

struct agg_role;

struct dlcp_sim_agg {
  dlcp_sim *sim;
  struct agg_role *roles; /* one per aggregating switch, in chain order */
  uint32_t nroles;
  uint32_t *pos_of_node; /* per node: its role, or DLCP_SIM_NONE */
  /* The single switch: a host attached to it, towards which ranks in
   * other racks route their datagrams (DLCP_SIM_NONE with a chain, or if
   * no host is attached: then every rank must be). */
  uint32_t far_dst;
  dlcp_sim_ps per_packet_ps;
  uint32_t queue_pkts; /* the processor's FIFO bound, per switch */
  uint8_t *out; /* one datagram written by dlcp_agg_poll */
  uint8_t *fwd; /* one datagram a chain or tree writes */
  size_t out_cap;
  uint8_t *prio; /* per host: the queue its last packet used */
  uint8_t chain_prio; /* the queue of the chain's hops (the job's) */
  ina_slot *slots;
  uint32_t nslots, slots_cap, free_slot;
  /* Blocks the chain jobs registered so far may hold at each switch at
   * once (dlcp_sim_agg_chain_job). */
  uint64_t reserved_blocks;
};

/* ---- bytes of INA packets ---------------------------------------------- */

static void release_slot(void *ctx, dlcp_sim_packet *pkt) {
  struct dlcp_sim_agg *a = ctx;
  if (pkt->msg < a->nslots) {
    a->slots[pkt->msg].next_free = a->free_slot;
    a->free_slot = pkt->msg;
  }
}

static uint32_t store(struct dlcp_sim_agg *a, const uint8_t *bytes,
                      size_t len) {
  const dlcp_mem *mem = a->sim->mem;
  uint32_t s = a->free_slot;
  if (s == DLCP_SIM_NONE) {
    if (a->nslots == a->slots_cap) {
      uint32_t ncap = a->slots_cap ? a->slots_cap * 2 : 256;
      ina_slot *n = mem->realloc(a->slots, ncap * sizeof(*n), mem->user);
      if (!n) {
        return DLCP_SIM_NONE;
      }
      a->slots = n;
      a->slots_cap = ncap;
    }
    s = a->nslots++;
    a->slots[s] = (ina_slot){NULL, 0, 0, DLCP_SIM_NONE, DLCP_SIM_NONE};
  } else {
    a->free_slot = a->slots[s].next_free;
  }
  ina_slot *sl = &a->slots[s];
  if (sl->cap < len) {
    uint8_t *b = mem->realloc(sl->bytes, len, mem->user);
    if (!b) {
      sl->next_free = a->free_slot;
      a->free_slot = s;
      return DLCP_SIM_NONE;
    }
    sl->bytes = b;
    sl->cap = (uint32_t)len;
  }
  memcpy(sl->bytes, bytes, len);
  sl->len = (uint32_t)len;
  return s;
}

dlcp_sim_packet *dlcp_sim_ina_packet_new(dlcp_sim *sim, const uint8_t *dgram,
                                         size_t len, uint32_t prio,
                                         uint8_t ecn) {
  struct dlcp_sim_agg *a = sim->agg;
  if (!a || len < DLCP_AGG_HDR_LEN || len > DLCP_AGG_DGRAM_MAX) {
    return NULL;
  }
  dlcp_sim_packet *pkt = dlcp_sim_packet_new(sim);
  if (!pkt) {
    return NULL;
  }
  uint32_t s = store(a, dgram, len);
  if (s == DLCP_SIM_NONE) {
    dlcp_sim_packet_drop(sim, pkt); /* still a DATA packet: no release */
    dlcp_sim_engine_fail(&sim->engine, DLCP_ERR_NOMEM);
    return NULL;
  }
  pkt->kind = DLCP_SIM_PKT_INA;
  pkt->msg = s;
  pkt->flow = DLCP_SIM_NONE;
  pkt->size_bytes = (uint32_t)len + INA_IP_UDP_BYTES;
  pkt->payload_bytes = (uint32_t)(len - DLCP_AGG_HDR_LEN);
  pkt->prio = (uint8_t)prio;
  pkt->ecn = ecn;
  pkt->lb = DLCP_SIM_LB_ECMP;
  memcpy(pkt->hdr, dgram, DLCP_AGG_HDR_LEN);
  pkt->hdr_len = DLCP_AGG_HDR_LEN;
  return pkt;
}

const uint8_t *dlcp_sim_ina_packet_bytes(const dlcp_sim *sim,
                                         const dlcp_sim_packet *pkt,
                                         size_t *len) {
  const struct dlcp_sim_agg *a = sim->agg;
  if (!a || pkt->kind != DLCP_SIM_PKT_INA || pkt->msg >= a->nslots) {
    *len = 0;
    return NULL;
  }
  *len = a->slots[pkt->msg].len;
  return a->slots[pkt->msg].bytes;
}

/* ---- switches ------------------------------------------------------------ */

/* The core's cookie for the switch of role i is SWITCH_COOKIE + i (hosts
 * are below). */
#define SWITCH_COOKIE (1ull << 40)

typedef struct agg_role {
  struct dlcp_sim_agg *agg;
  dlcp_agg *core;
  dlcp_agg_config cfg;    /* its core's (re-created with the trees) */
  uint32_t node, pos;     /* the switch and its index in cfg.agg.chain */
  /* In tree t (of cfg.agg.ntrees; a chain or HINA's tree is tree 0): the
   * parent's index (DLCP_SIM_NONE: the root, or not in the tree), the
   * child switches and this switch's rank at its parent. */
  uint32_t parent[DLCP_SIM_AGG_MAX_TREES];
  uint32_t *children[DLCP_SIM_AGG_MAX_TREES];
  uint32_t nchildren[DLCP_SIM_AGG_MAX_TREES];
  uint32_t child_rank[DLCP_SIM_AGG_MAX_TREES];
  dlcp_sim_ps busy_until; /* the processor's next free instant */
  uint32_t waiting;       /* packets in its FIFO */
  uint64_t queue_drops;
  dlcp_sim_timer timer;
  /* The job's masters below this switch (ranks 0..nmasters-1 of its
   * core; its children in a tree are the next ranks), and its core's
   * world (masters + children, the same in every tree it is in). */
  uint32_t *masters, nmasters;
  uint32_t world;
} agg_role;

static dlcp_tstamp ns_of(dlcp_sim_ps t) {
  return dlcp_sim_time_to_ns(t);
}

static bool is_multi(const struct dlcp_sim_agg *a) {
  return a->sim->cfg.agg.nchain > 0;
}

/* The port of switch |node| whose link leads to node |peer|, or
 * DLCP_SIM_NONE. */
static uint32_t port_to(const dlcp_sim_net *net, uint32_t node,
                        uint32_t peer) {
  const dlcp_sim_node *n = &net->nodes[node];
  for (uint32_t i = 0; i < n->nports; i++) {
    uint32_t p = net->node_ports[n->first_port + i];
    if (net->ports[p].peer == peer) {
      return p;
    }
  }
  return DLCP_SIM_NONE;
}

/* Puts an answer of |r|'s switch on the port towards host |host|. */
static void send_to_host(agg_role *r, const uint8_t *dgram, size_t len,
                         uint32_t host, uint8_t ecn, dlcp_sim_ps now) {
  struct dlcp_sim_agg *a = r->agg;
  dlcp_sim *sim = a->sim;
  dlcp_sim_net *net = &sim->net;
  dlcp_sim_packet *pkt = dlcp_sim_ina_packet_new(
      sim, dgram, len, host < net->nhosts ? a->prio[host] : 0, ecn);
  if (!pkt) {
    return;
  }
  pkt->src = host; /* the switch has no host index; pcap shows the peer */
  pkt->dst = host;
  pkt->ingress = DLCP_SIM_NONE;
  uint32_t port = dlcp_sim_switch_route(net, r->node, pkt);
  if (port == DLCP_SIM_NONE) {
    net->nodes[r->node].drops_noroute++;
    dlcp_sim_packet_drop(sim, pkt);
    return;
  }
  dlcp_sim_port_send(&net->ports[port], pkt, now);
}

/* Puts a datagram for switch |to| (|r|'s parent or child) on the fabric,
 * on a lossless class: on the link between them if there is one (a
 * tree's edges), else routed towards one of |to|'s masters and taken by
 * the switch itself (a chain's hops through the spines).  Routed hops are
 * source-routed: partial sums going up take the first uplink and finals
 * coming down the second, so with two spines or more the two streams
 * never share a link, as the seed's model prices each once. */
static void send_to_switch(agg_role *r, const agg_role *to, bool up,
                           const uint8_t *dgram, size_t len, uint8_t ecn,
                           dlcp_sim_ps now) {
  struct dlcp_sim_agg *a = r->agg;
  dlcp_sim *sim = a->sim;
  dlcp_sim_net *net = &sim->net;
  dlcp_sim_packet *pkt =
      dlcp_sim_ina_packet_new(sim, dgram, len, a->chain_prio, ecn);
  if (!pkt) {
    return;
  }
  pkt->src = r->nmasters ? r->masters[0] : 0;
  pkt->dst = to->nmasters ? to->masters[0] : 0;
  pkt->flow = to->node;
  a->slots[pkt->msg].from = r->pos;
  pkt->flags |= DLCP_SIM_PKT_F_TO_AGG | DLCP_SIM_PKT_F_LOSSLESS;
  pkt->lb = DLCP_SIM_LB_SOURCE;
  pkt->path = pkt->path_rest = up ? 0u : 1u;
  pkt->ingress = DLCP_SIM_NONE;
  uint32_t port = port_to(net, r->node, to->node);
  if (port == DLCP_SIM_NONE && to->nmasters) {
    port = dlcp_sim_switch_route(net, r->node, pkt);
  }
  if (port == DLCP_SIM_NONE) {
    net->nodes[r->node].drops_noroute++;
    dlcp_sim_packet_drop(sim, pkt);
    return;
  }
  dlcp_sim_port_send(&net->ports[port], pkt, now);
}

/* Hands a datagram to |r|'s core as if it came from |cookie|. */
static void core_input(agg_role *r, const uint8_t *bytes, size_t len,
                       uint8_t ecn, uint64_t cookie, dlcp_sim_ps now) {
  /* A rejected packet is counted by the core (dlcp_agg_get_stats). */
  (void)dlcp_agg_on_packet(r->core, bytes, len, ecn, cookie, ns_of(now));
}

/* ---- the switch role ----------------------------------------------------- */

/* Sends every answer the core has queued, then arms its next deadline. */
static void flush(agg_role *r, dlcp_sim_ps now) {
  struct dlcp_sim_agg *a = r->agg;
  dlcp_agg_send out;
  while (dlcp_agg_poll(r->core, &out, a->out, a->out_cap, ns_of(now)) == 1) {
    if (out.addr < SWITCH_COOKIE) {
      send_to_host(r, a->out, out.len, (uint32_t)out.addr, out.ecn, now);
      continue;
    }
    /* To the parent or a child: up to the parent of the group's tree. */
    const agg_role *to = &a->roles[out.addr - SWITCH_COOKIE];
    dlcp_agg_hdr h;
    const uint8_t *payload;
    bool up = dlcp_agg_decode(&h, &payload, a->out, out.len) == 0 &&
              r->parent[h.group % r->cfg.ntrees] == to->pos;
    send_to_switch(r, to, up, a->out, out.len, out.ecn, now);
  }
  if (dlcp_sim_timer_follow(&r->timer, dlcp_agg_next_deadline(r->core), now)) {
    dlcp_sim_timer_arm(&r->timer, now);
  }
}

static void process(agg_role *r, dlcp_sim_packet *pkt, dlcp_sim_ps now) {
  struct dlcp_sim_agg *a = r->agg;
  dlcp_sim *sim = a->sim;
  size_t len;
  const uint8_t *bytes = dlcp_sim_ina_packet_bytes(sim, pkt, &len);
  if ((pkt->flags & DLCP_SIM_PKT_F_TO_AGG) &&
      !(pkt->flags & DLCP_SIM_PKT_F_FROM_HOST)) {
    core_input(r, bytes, len, pkt->ecn,
               SWITCH_COOKIE + a->slots[pkt->msg].from, now);
  } else {
    if (pkt->src < sim->net.nhosts) {
      a->prio[pkt->src] = pkt->prio;
      a->chain_prio = pkt->prio;
    }
    core_input(r, bytes, len, pkt->ecn, pkt->src, now);
  }
  dlcp_sim_packet_drop(sim, pkt);
  flush(r, now);
}

static void process_event(void *obj, void *arg, dlcp_sim_ps now) {
  agg_role *r = obj;
  dlcp_sim_packet *pkt = arg;
  r->waiting--;
  if (dlcp_sim_pfc_class(&r->agg->sim->net, pkt, pkt->qidx)) {
    dlcp_sim_pfc_release(&r->agg->sim->net, pkt, pkt->qidx);
  }
  process(r, pkt, now);
}

static bool arrive(void *ctx, uint32_t node, dlcp_sim_packet *pkt,
                   dlcp_sim_ps now) {
  struct dlcp_sim_agg *a = ctx;
  uint32_t pos = a->pos_of_node[node];
  if (pos == DLCP_SIM_NONE ||
      ((pkt->flags & DLCP_SIM_PKT_F_TO_AGG) && pkt->flow != node)) {
    return false;
  }
  agg_role *r = &a->roles[pos];
  if (a->per_packet_ps == 0) {
    process(r, pkt, now);
    return true;
  }
  if (dlcp_sim_pfc_class(&a->sim->net, pkt, pkt->qidx)) {
    if (!dlcp_sim_pfc_room(&a->sim->net, pkt, pkt->qidx)) {
      dlcp_sim_packet_drop(a->sim, pkt); /* a headroom drop, counted */
      return true;
    }
    dlcp_sim_pfc_hold(&a->sim->net, pkt, pkt->qidx);
  } else if (r->waiting >= a->queue_pkts &&
             !(pkt->flags & DLCP_SIM_PKT_F_LOSSLESS)) {
    r->queue_drops++;
    dlcp_sim_packet_drop(a->sim, pkt);
    return true;
  }
  r->waiting++;
  dlcp_sim_ps start = r->busy_until > now ? r->busy_until : now;
  r->busy_until = start + a->per_packet_ps;
  dlcp_sim_engine_at(&a->sim->engine, r->busy_until, process_event, r, pkt);
  return true;
}

static void timer_fire(void *obj, dlcp_sim_ps now) {
  agg_role *r = obj;
  dlcp_agg_on_timer(r->core, ns_of(now));
  flush(r, now);
}

/* The node named |name| if it is a switch, else DLCP_SIM_NONE. */
static uint32_t switch_named(const dlcp_sim_net *net, const char *name) {
  for (uint32_t i = 0; i < net->nnodes; i++) {
    if (strcmp(net->nodes[i].name, name) == 0 &&
        net->nodes[i].kind == DLCP_SIM_NODE_SWITCH) {
      return i;
    }
  }
  return DLCP_SIM_NONE;
}

static int role_init(struct dlcp_sim_agg *a, agg_role *r, uint32_t node,
                     uint32_t pos, char *err, size_t errlen) {
  const dlcp_sim_agg_config *c = &a->sim->cfg.agg;
  r->agg = a;
  r->node = node;
  r->pos = pos;
  for (uint32_t t = 0; t < DLCP_SIM_AGG_MAX_TREES; t++) {
    r->parent[t] = c->nchain ? c->parent[t][pos] : DLCP_SIM_NONE;
  }
  dlcp_agg_config ac;
  dlcp_agg_config_default(&ac);
  ac.ntrees = c->ntrees ? c->ntrees : 1;
  ac.mem_bytes = c->mem_bytes;
  ac.block_elems = c->block_elems;
  ac.policy = c->static_partition ? DLCP_AGG_STATIC : DLCP_AGG_SHARED;
  ac.static_parts = c->static_parts;
  ac.max_jobs = c->static_parts > ac.max_jobs ? c->static_parts : ac.max_jobs;
  ac.resend_ns = ns_of(c->resend_ps);
  /* Answers are flushed after every packet, but one timer may re-send
   * the results of every group at once. */
  ac.out_queue = 1u << 16;
  r->cfg = ac;
  int rv = dlcp_agg_new(&r->core, &ac, a->sim->mem, 0);
  if (rv == DLCP_ERR_CONFIG) {
    snprintf(err, errlen,
             "%s: field '%s.memory': expected room for at "
             "least one block of %u int32 (and a valid configuration)",
             c->where, c->field, c->block_elems);
  }
  if (rv != 0) {
    return rv;
  }
  dlcp_sim_timer_init(&r->timer, &a->sim->engine, timer_fire, r);
  return 0;
}

int dlcp_sim_agg_build(dlcp_sim *sim, char *err, size_t errlen) {
  const dlcp_sim_agg_config *c = &sim->cfg.agg;
  if (c->node[0] == '\0') {
    return 0;
  }
  dlcp_sim_net *net = &sim->net;
  uint32_t nroles = c->nchain ? c->nchain : 1;
  const dlcp_mem *mem = sim->mem;
  struct dlcp_sim_agg *a = mem->calloc(1, sizeof(*a), mem->user);
  if (!a) {
    return DLCP_ERR_NOMEM;
  }
  sim->agg = a;
  a->sim = sim;
  a->per_packet_ps = c->per_packet_ps;
  a->queue_pkts = c->queue_pkts;
  a->free_slot = DLCP_SIM_NONE;
  a->roles = mem->calloc(nroles, sizeof(*a->roles), mem->user);
  a->pos_of_node = mem->malloc(net->nnodes * sizeof(uint32_t), mem->user);
  a->out_cap = DLCP_AGG_HDR_LEN + 4u * DLCP_AGG_MAX_BLOCKS * c->block_elems;
  a->out = mem->malloc(a->out_cap, mem->user);
  a->fwd = mem->malloc(a->out_cap, mem->user);
  a->prio = mem->calloc(net->nhosts, 1, mem->user);
  if (!a->roles || !a->pos_of_node || !a->out || !a->fwd || !a->prio) {
    return DLCP_ERR_NOMEM;
  }
  memset(a->pos_of_node, 0xff, net->nnodes * sizeof(uint32_t));
  for (uint32_t i = 0; i < nroles; i++) {
    const char *name = c->nchain ? c->chain[i] : c->node;
    uint32_t node = switch_named(net, name);
    if (node == DLCP_SIM_NONE) {
      if (c->tree || c->trees) {
        snprintf(err, errlen,
                 "%s: field '%s.%s': expected names of switches of the "
                 "topology, got '%s'",
                 c->where, c->field, c->trees ? "trees" : "tree", name);
      } else if (c->nchain) {
        snprintf(err, errlen,
                 "%s: field '%s.chain[%u]': expected the name of a "
                 "switch of the topology, got '%s'",
                 c->where, c->field, i, name);
      } else {
        snprintf(err, errlen,
                 "%s: field '%s.switch': expected the name of a "
                 "switch of the topology, got '%s'",
                 c->where, c->field, name);
      }
      return DLCP_ERR_CONFIG;
    }
    int rv = role_init(a, &a->roles[i], node, i, err, errlen);
    if (rv != 0) {
      return rv;
    }
    a->nroles = i + 1;
    a->pos_of_node[node] = i;
  }
  /* A tree's edges are links: its hops are not routed (a switch without
   * masters has no host to route towards). */
  for (uint32_t t = 0; (c->tree || c->trees) && t < c->ntrees; t++) {
    for (uint32_t i = 0; i < nroles; i++) {
      uint32_t up = a->roles[i].parent[t];
      if (up != DLCP_SIM_NONE &&
          port_to(net, a->roles[i].node, a->roles[up].node) ==
              DLCP_SIM_NONE) {
        snprintf(err, errlen,
                 "%s: field '%s.%s': expected linked switches, got '%s' "
                 "and its parent '%s'",
                 c->where, c->field, c->trees ? "trees" : "tree", c->chain[i],
                 c->chain[up]);
        return DLCP_ERR_CONFIG;
      }
    }
  }
  a->far_dst = DLCP_SIM_NONE;
  for (uint32_t h = 0; !c->nchain && h < net->nhosts; h++) {
    if (dlcp_sim_host_nic(net, h)->peer == a->roles[0].node) {
      a->far_dst = h;
      break;
    }
  }
  net->agg_rx = arrive;
  net->agg_rx_ctx = a;
  sim->pool.release_ina = release_slot;
  sim->pool.release_ctx = a;
  return 0;
}

uint32_t dlcp_sim_agg_position(const dlcp_sim *sim, uint32_t node) {
  return sim->agg && node < sim->net.nnodes ? sim->agg->pos_of_node[node]
                                            : DLCP_SIM_NONE;
}

bool dlcp_sim_agg_reachable(dlcp_sim *sim, uint32_t host) {
  return sim->agg && host < sim->net.nhosts &&
         (dlcp_sim_agg_position(
              sim, dlcp_sim_host_nic(&sim->net, host)->peer) !=
              DLCP_SIM_NONE ||
          sim->agg->far_dst != DLCP_SIM_NONE);
}

void dlcp_sim_agg_address(dlcp_sim *sim, uint32_t host,
                          dlcp_sim_packet *pkt) {
  const struct dlcp_sim_agg *a = sim->agg;
  pkt->dst = DLCP_SIM_NONE;
  if (dlcp_sim_agg_position(sim, dlcp_sim_host_nic(&sim->net, host)->peer) ==
          DLCP_SIM_NONE &&
      a->far_dst != DLCP_SIM_NONE) {
    pkt->dst = a->far_dst;
    pkt->flow = a->roles[0].node;
    pkt->flags |= DLCP_SIM_PKT_F_TO_AGG | DLCP_SIM_PKT_F_FROM_HOST;
  }
}

uint32_t dlcp_sim_agg_chain_len(const dlcp_sim *sim) {
  return sim->agg ? sim->cfg.agg.nchain : 0;
}

/* A job after the first: the switches' places in the trees were set for
 * the first, so it must have as many masters below each switch. */
static int later_chain_job(struct dlcp_sim_agg *a, const uint32_t *hosts,
                           uint32_t n, uint32_t *tor_rank,
                           uint32_t *tor_world) {
  dlcp_sim *sim = a->sim;
  const dlcp_mem *mem = sim->mem;
  uint32_t *count = mem->calloc(a->nroles, sizeof(uint32_t), mem->user);
  if (!count) {
    return DLCP_ERR_NOMEM;
  }
  int rv = 0;
  for (uint32_t k = 0; rv == 0 && k < n; k++) {
    uint32_t pos = dlcp_sim_agg_position(
        sim, dlcp_sim_host_nic(&sim->net, hosts[k])->peer);
    if (pos == DLCP_SIM_NONE) {
      rv = DLCP_ERR_INVALID_ARGUMENT;
    } else {
      tor_rank[k] = count[pos]++;
      tor_world[k] = a->roles[pos].world;
    }
  }
  for (uint32_t i = 0; rv == 0 && i < a->nroles; i++) {
    if (count[i] != a->roles[i].nmasters) {
      rv = DLCP_ERR_INVALID_ARGUMENT;
    }
  }
  mem->free(count, mem->user);
  return rv;
}

int dlcp_sim_agg_chain_job(dlcp_sim *sim, const uint32_t *hosts, uint32_t n,
                           size_t group_bytes, uint64_t blocks,
                           uint32_t *tor_rank, uint32_t *tor_world) {
  struct dlcp_sim_agg *a = sim->agg;
  const dlcp_mem *mem = sim->mem;
  if (!a || !is_multi(a) || group_bytes + DLCP_AGG_HDR_LEN > a->out_cap) {
    return DLCP_ERR_INVALID_ARGUMENT;
  }
  uint64_t pool = sim->cfg.agg.mem_bytes / (4ull * sim->cfg.agg.block_elems);
  if (a->reserved_blocks + blocks > pool) {
    return DLCP_ERR_LIMIT;
  }
  if (a->roles[0].masters) {
    int rv = later_chain_job(a, hosts, n, tor_rank, tor_world);
    if (rv == 0) {
      a->reserved_blocks += blocks;
    }
    return rv;
  }
  a->reserved_blocks += blocks;
  uint32_t ntrees = sim->cfg.agg.ntrees;
  for (uint32_t i = 0; i < a->nroles; i++) {
    agg_role *r = &a->roles[i];
    r->masters = mem->malloc(n * sizeof(uint32_t), mem->user);
    if (!r->masters) {
      return DLCP_ERR_NOMEM;
    }
    for (uint32_t t = 0; t < ntrees; t++) {
      r->children[t] = mem->malloc(a->nroles * sizeof(uint32_t), mem->user);
      if (!r->children[t]) {
        return DLCP_ERR_NOMEM;
      }
    }
  }
  for (uint32_t k = 0; k < n; k++) {
    uint32_t pos = dlcp_sim_agg_position(
        sim, dlcp_sim_host_nic(&sim->net, hosts[k])->peer);
    if (pos == DLCP_SIM_NONE) {
      return DLCP_ERR_INVALID_ARGUMENT;
    }
    agg_role *r = &a->roles[pos];
    tor_rank[k] = r->nmasters;
    r->masters[r->nmasters++] = hosts[k];
  }
  /* In each tree, a child's rank at its parent follows the parent's
   * masters. */
  const dlcp_sim_agg_config *c = &sim->cfg.agg;
  for (uint32_t t = 0; t < ntrees; t++) {
    for (uint32_t i = 0; i < a->nroles; i++) {
      uint32_t up = a->roles[i].parent[t];
      if (up != DLCP_SIM_NONE) {
        agg_role *p = &a->roles[up];
        a->roles[i].child_rank[t] = p->nmasters + p->nchildren[t];
        p->children[t][p->nchildren[t]++] = i;
      }
    }
  }
  for (uint32_t i = 0; i < a->nroles; i++) {
    agg_role *r = &a->roles[i];
    r->world = 0;
    /* A switch's core has one world: the same masters and child count in
     * every tree it is in.  A switch without masters or children would
     * never complete a group (a chain's hops are routed towards masters;
     * a tree's are links, checked at build). */
    for (uint32_t t = 0; t < ntrees; t++) {
      uint32_t w = r->nmasters + r->nchildren[t];
      if (c->member[t][i] && r->world != 0 && w != r->world) {
        return DLCP_ERR_INVALID_ARGUMENT;
      }
      if (c->member[t][i]) {
        r->world = w;
      }
    }
    if (r->world == 0 || r->world > DLCP_AGG_MAX_WORLD ||
        (!c->tree && !c->trees && r->nmasters == 0)) {
      return DLCP_ERR_INVALID_ARGUMENT;
    }
    /* Masters send every group to their switch: it is in every tree. */
    for (uint32_t t = 0; r->nmasters && t < ntrees; t++) {
      if (!c->member[t][i]) {
        return DLCP_ERR_INVALID_ARGUMENT;
      }
    }
  }
  for (uint32_t k = 0; k < n; k++) {
    uint32_t pos = dlcp_sim_agg_position(
        sim, dlcp_sim_host_nic(&sim->net, hosts[k])->peer);
    tor_world[k] = a->roles[pos].world;
  }
  /* Now that every switch's rank at its parent is known, each core is
   * made again with its parent and place in every tree it is in. */
  for (uint32_t i = 0; i < a->nroles; i++) {
    agg_role *r = &a->roles[i];
    for (uint32_t t = 0; t < ntrees; t++) {
      uint32_t up = r->parent[t];
      bool has = up != DLCP_SIM_NONE && c->member[t][i];
      r->cfg.has_parent[t] = has;
      r->cfg.parent_addr[t] = has ? SWITCH_COOKIE + up : 0;
      r->cfg.parent_place[t] =
          has ? DLCP_AGG_CHAIN_PLACE(r->child_rank[t], a->roles[up].world)
              : 0;
    }
    dlcp_agg_del(r->core);
    r->core = NULL;
    int rv = dlcp_agg_new(&r->core, &r->cfg, mem, 0);
    if (rv != 0) {
      return rv;
    }
  }
  return 0;
}

/* Sums the counters of every switch (the uint64 fields, then the pool's
 * sizes). */
static void add_stats(dlcp_agg_stats *sum, const dlcp_agg_stats *st) {
  uint64_t *d = &sum->packets;
  const uint64_t *s = &st->packets;
  for (size_t i = 0; i < offsetof(dlcp_agg_stats, aggs_total) / 8u; i++) {
    d[i] += s[i];
  }
  sum->aggs_total += st->aggs_total;
  sum->aggs_used += st->aggs_used;
  sum->jobs_active += st->jobs_active;
  sum->jobs_sharing += st->jobs_sharing;
}

bool dlcp_sim_agg_get_stats(const dlcp_sim *sim, dlcp_agg_stats *st,
                            uint64_t *queue_drops) {
  const struct dlcp_sim_agg *a = sim->agg;
  if (!a) {
    return false;
  }
  memset(st, 0, sizeof(*st));
  *queue_drops = 0;
  for (uint32_t i = 0; i < a->nroles; i++) {
    dlcp_agg_stats one;
    dlcp_agg_get_stats(a->roles[i].core, &one);
    add_stats(st, &one);
    *queue_drops += a->roles[i].queue_drops;
  }
  return true;
}

void dlcp_sim_agg_free(dlcp_sim *sim) {
  struct dlcp_sim_agg *a = sim->agg;
  if (!a) {
    return;
  }
  const dlcp_mem *mem = sim->mem;
  /* Packets still in flight go with the pool's chunks, not one by one. */
  sim->pool.release_ina = NULL;
  for (uint32_t i = 0; a->roles && i < a->nroles; i++) {
    agg_role *r = &a->roles[i];
    dlcp_agg_del(r->core);
    mem->free(r->masters, mem->user);
    for (uint32_t t = 0; t < DLCP_SIM_AGG_MAX_TREES; t++) {
      mem->free(r->children[t], mem->user);
    }
  }
  for (uint32_t i = 0; i < a->nslots; i++) {
    mem->free(a->slots[i].bytes, mem->user);
  }
  mem->free(a->roles, mem->user);
  mem->free(a->pos_of_node, mem->user);
  mem->free(a->slots, mem->user);
  mem->free(a->out, mem->user);
  mem->free(a->fwd, mem->user);
  mem->free(a->prio, mem->user);
  mem->free(a, mem->user);
  sim->agg = NULL;
}
