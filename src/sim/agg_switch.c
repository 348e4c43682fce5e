/*
 * agg_switch.c: the aggregation switch role, and the bytes of INA packets.
 *
 * Role.  One switch of the network (aggregation.switch) runs the
 * src/proto/agg core, the same object dlcp-switch runs per worker thread.
 * An INA datagram a host addresses to the switch (dst DLCP_SIM_NONE)
 * crosses the host's link like any packet (queueing, ECN, loss) and is
 * handed here when it reaches that switch (switch.c).  The switch
 * processes packets one at a time in arrival order, |per_packet_ps| each
 * (a software switch's CPU, or 0 for a line-rate pipeline): a packet that
 * arrives while the processor is busy waits for it in a FIFO of at most
 * |queue_pkts| packets (a NIC ring, a socket buffer); one that finds it
 * full is dropped and counted, and the hosts' re-sends recover it.
 * The core's answers (results, NACKs) leave at the instant their packet is
 * processed, through the switch's egress port towards the host, with the
 * ECN codepoint the core chose (the OR of the contributions') on the
 * queue the host's own packets used.  The core's timers (result re-sends,
 * leases) run on one engine timer.  The address cookie the core keys
 * workers by is the host index.
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
#include <stdio.h>
#include <string.h>

#include "proto/agg.h"
#include "sim/sim.h"

/* IPv4 + UDP headers around a datagram on the wire. */
#define INA_IP_UDP_BYTES 28u

typedef struct ina_slot {
  uint8_t *bytes;
  uint32_t len, cap;
  uint32_t next_free; /* DLCP_SIM_NONE at the end of the free list */
} ina_slot;

struct dlcp_sim_agg {
  dlcp_sim *sim;
  dlcp_agg *core;
  uint32_t node; /* the switch */
  dlcp_sim_ps per_packet_ps;
  dlcp_sim_ps busy_until; /* the processor's next free instant */
  uint32_t queue_pkts, waiting; /* the FIFO's bound and its packets */
  uint64_t queue_drops;
  dlcp_sim_timer timer;
  uint8_t *out; /* one datagram written by dlcp_agg_poll */
  size_t out_cap;
  uint8_t *prio; /* per host: the queue its last packet used */
  ina_slot *slots;
  uint32_t nslots, slots_cap, free_slot;
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
    a->slots[s] = (ina_slot){NULL, 0, 0, DLCP_SIM_NONE};
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

/* ---- the switch role ----------------------------------------------------- */

static dlcp_tstamp ns_of(dlcp_sim_ps t) {
  return dlcp_sim_time_to_ns(t);
}

/* Sends every answer the core has queued, then arms its next deadline. */
static void flush(struct dlcp_sim_agg *a, dlcp_sim_ps now) {
  dlcp_sim *sim = a->sim;
  dlcp_sim_net *net = &sim->net;
  dlcp_agg_send out;
  while (dlcp_agg_poll(a->core, &out, a->out, a->out_cap, ns_of(now)) == 1) {
    uint32_t host = (uint32_t)out.addr;
    dlcp_sim_packet *pkt = dlcp_sim_ina_packet_new(
        sim, a->out, out.len, host < net->nhosts ? a->prio[host] : 0, out.ecn);
    if (!pkt) {
      return;
    }
    pkt->src = host; /* the switch has no host index; pcap shows the peer */
    pkt->dst = host;
    pkt->ingress = DLCP_SIM_NONE;
    uint32_t port = dlcp_sim_switch_route(net, a->node, pkt);
    if (port == DLCP_SIM_NONE) {
      net->nodes[a->node].drops_noroute++;
      dlcp_sim_packet_drop(sim, pkt);
      continue;
    }
    dlcp_sim_port_send(&net->ports[port], pkt, now);
  }
  if (dlcp_sim_timer_follow(&a->timer, dlcp_agg_next_deadline(a->core), now)) {
    dlcp_sim_timer_arm(&a->timer, now);
  }
}

static void process(struct dlcp_sim_agg *a, dlcp_sim_packet *pkt,
                    dlcp_sim_ps now) {
  dlcp_sim *sim = a->sim;
  size_t len;
  const uint8_t *bytes = dlcp_sim_ina_packet_bytes(sim, pkt, &len);
  if (pkt->src < sim->net.nhosts) {
    a->prio[pkt->src] = pkt->prio;
  }
  /* A rejected packet is counted by the core (dlcp_agg_get_stats). */
  (void)dlcp_agg_on_packet(a->core, bytes, len, pkt->ecn, pkt->src, ns_of(now));
  dlcp_sim_packet_drop(sim, pkt);
  flush(a, now);
}

static void process_event(void *obj, void *arg, dlcp_sim_ps now) {
  struct dlcp_sim_agg *a = obj;
  a->waiting--;
  process(a, arg, now);
}

static void arrive(void *ctx, dlcp_sim_packet *pkt, dlcp_sim_ps now) {
  struct dlcp_sim_agg *a = ctx;
  if (a->per_packet_ps == 0) {
    process(a, pkt, now);
    return;
  }
  if (a->waiting == a->queue_pkts) {
    a->queue_drops++;
    dlcp_sim_packet_drop(a->sim, pkt);
    return;
  }
  a->waiting++;
  dlcp_sim_ps start = a->busy_until > now ? a->busy_until : now;
  a->busy_until = start + a->per_packet_ps;
  dlcp_sim_engine_at(&a->sim->engine, a->busy_until, process_event, a, pkt);
}

static void timer_fire(void *obj, dlcp_sim_ps now) {
  struct dlcp_sim_agg *a = obj;
  dlcp_agg_on_timer(a->core, ns_of(now));
  flush(a, now);
}

int dlcp_sim_agg_build(dlcp_sim *sim, char *err, size_t errlen) {
  const dlcp_sim_agg_config *c = &sim->cfg.agg;
  if (c->node[0] == '\0') {
    return 0;
  }
  dlcp_sim_net *net = &sim->net;
  uint32_t node = DLCP_SIM_NONE;
  for (uint32_t i = 0; i < net->nnodes; i++) {
    if (strcmp(net->nodes[i].name, c->node) == 0 &&
        net->nodes[i].kind == DLCP_SIM_NODE_SWITCH) {
      node = i;
    }
  }
  if (node == DLCP_SIM_NONE) {
    snprintf(err, errlen,
             "%s: field '%s.switch': expected the name of a "
             "switch of the topology, got '%s'",
             c->where, c->field, c->node);
    return DLCP_ERR_CONFIG;
  }
  const dlcp_mem *mem = sim->mem;
  struct dlcp_sim_agg *a = mem->calloc(1, sizeof(*a), mem->user);
  if (!a) {
    return DLCP_ERR_NOMEM;
  }
  sim->agg = a;
  a->sim = sim;
  a->node = node;
  a->per_packet_ps = c->per_packet_ps;
  a->queue_pkts = c->queue_pkts;
  a->free_slot = DLCP_SIM_NONE;
  dlcp_agg_config ac;
  dlcp_agg_config_default(&ac);
  ac.mem_bytes = c->mem_bytes;
  ac.block_elems = c->block_elems;
  ac.policy = c->static_partition ? DLCP_AGG_STATIC : DLCP_AGG_SHARED;
  ac.static_parts = c->static_parts;
  ac.max_jobs = c->static_parts > ac.max_jobs ? c->static_parts : ac.max_jobs;
  ac.resend_ns = ns_of(c->resend_ps);
  /* Answers are flushed after every packet, but one timer may re-send
   * the results of every group at once. */
  ac.out_queue = 1u << 16;
  int rv = dlcp_agg_new(&a->core, &ac, mem, 0);
  if (rv == DLCP_ERR_CONFIG) {
    snprintf(err, errlen,
             "%s: field '%s.memory': expected room for at "
             "least one block of %u int32 (and a valid configuration)",
             c->where, c->field, c->block_elems);
  }
  if (rv != 0) {
    return rv;
  }
  a->out_cap = DLCP_AGG_HDR_LEN + 4u * DLCP_AGG_MAX_BLOCKS * c->block_elems;
  a->out = mem->malloc(a->out_cap, mem->user);
  a->prio = mem->calloc(net->nhosts, 1, mem->user);
  if (!a->out || !a->prio) {
    return DLCP_ERR_NOMEM;
  }
  dlcp_sim_timer_init(&a->timer, &sim->engine, timer_fire, a);
  net->agg_node = node;
  net->agg_rx = arrive;
  net->agg_rx_ctx = a;
  sim->pool.release_ina = release_slot;
  sim->pool.release_ctx = a;
  return 0;
}

uint32_t dlcp_sim_agg_node(const dlcp_sim *sim) {
  return sim->agg ? sim->agg->node : DLCP_SIM_NONE;
}

bool dlcp_sim_agg_get_stats(const dlcp_sim *sim, dlcp_agg_stats *st,
                            uint64_t *queue_drops) {
  if (!sim->agg) {
    return false;
  }
  dlcp_agg_get_stats(sim->agg->core, st);
  *queue_drops = sim->agg->queue_drops;
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
  dlcp_agg_del(a->core);
  for (uint32_t i = 0; i < a->nslots; i++) {
    mem->free(a->slots[i].bytes, mem->user);
  }
  mem->free(a->slots, mem->user);
  mem->free(a->out, mem->user);
  mem->free(a->prio, mem->user);
  mem->free(a, mem->user);
  sim->agg = NULL;
}
