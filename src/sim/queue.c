/*
 * queue.c: a port's queueing discipline: K strict-priority FIFO queues in
 * one buffer, with per-queue ECN marking, selective dropping and optional
 * trimming.
 *
 * Admission of a packet to queue q (its priority, clamped to K-1) runs:
 *   1. ECN/RED with min = max = threshold (the DCTCP/MLT configuration):
 *      if q already holds >= threshold bytes, an ECT packet is marked CE
 *      and a non-ECT packet is dropped.  This is the selective-drop rule
 *      MLT relies on: "unimportant" gradient packets are sent non-ECT and
 *      so are the first to go when a queue builds up.
 *   2. Buffer: per port, the port's bytes plus the packet must fit in
 *      buffer_bytes; with a shared pool, the pool must have room and the
 *      queue must stay within the dynamic threshold alpha * (free pool).
 *   3. A data packet that step 1 or 2 would drop is instead trimmed to a
 *      header (NDP) when trimming is on, and the header joins queue 0 so
 *      the receiver learns of the loss at once.
 * A queue's byte count includes the packet being serialized from it,
 * because that packet still occupies buffer until its last bit leaves.
 * Packets flagged LOSSLESS (collective NOTEs, aggregation chains) skip
 * steps 1 and 2: they model a PFC-protected class whose few bytes always
 * find headroom, and are only CE-marked.  Step 1 may instead be RED with min < max and a
 * marking probability (red_max_bytes > 0).  Packets of a priority that
 * switch PFC makes lossless (pfc.c) skip the selective drop, and step 2 is
 * their ingress headroom check instead of the egress buffer.
 */
#include "sim/net.h"

#include <string.h>

void dlcp_sim_port_init(dlcp_sim_port *port, const dlcp_sim_port_config *cfg,
                        dlcp_sim_buffer_pool *shared) {
  memset(port->q, 0, sizeof(port->q));
  port->cfg = cfg;
  port->shared = shared;
  port->bytes = 0;
  port->pfc_bytes = 0;
  port->busy = false;
  port->nonempty = 0;
}

static bool has_room(const dlcp_sim_port *port, const dlcp_sim_queue *q,
                     uint64_t bytes) {
  const dlcp_sim_buffer_pool *pool = port->shared;
  if (pool) {
    if (pool->used_bytes + bytes > pool->size_bytes) {
      return false;
    }
    double limit = pool->alpha * (double)(pool->size_bytes - pool->used_bytes);
    return (double)(q->bytes + bytes) <= limit;
  }
  return port->bytes - port->pfc_bytes + bytes <= port->cfg->buffer_bytes;
}

void dlcp_sim_port_append(dlcp_sim_port *port, uint32_t qi,
                          dlcp_sim_packet *pkt) {
  dlcp_sim_queue *q = &port->q[qi];
  pkt->qidx = (uint8_t)qi;
  pkt->next = NULL;
  if (q->tail) {
    q->tail->next = pkt;
  } else {
    q->head = pkt;
  }
  q->tail = pkt;
  port->nonempty |= (uint8_t)(1u << qi);
  q->pkts++;
  q->bytes += pkt->size_bytes;
  q->enq_pkts++;
  if (q->bytes > q->max_bytes) {
    q->max_bytes = q->bytes;
  }
  port->bytes += pkt->size_bytes;
  if (port->shared) {
    port->shared->used_bytes += pkt->size_bytes;
  }
  if (port->net && port->net->pfc_in) {
    dlcp_sim_pfc_count_in(port, pkt);
  }
}

/* Trims |pkt| to a header and queues it at priority 0, the NDP way. */
static dlcp_sim_verdict trim(dlcp_sim_port *port, dlcp_sim_queue *from,
                             dlcp_sim_packet *pkt) {
  /* A packet already no larger than a header keeps its size. */
  uint32_t hdr = pkt->size_bytes < port->cfg->trim_bytes
                     ? pkt->size_bytes
                     : port->cfg->trim_bytes;
  if (!has_room(port, &port->q[0], hdr)) {
    from->drops_buffer++;
    return DLCP_SIM_DROP_BUFFER;
  }
  pkt->flags |= DLCP_SIM_PKT_F_TRIMMED;
  pkt->size_bytes = hdr;
  pkt->prio = 0; /* and at every later hop: headers go first */
  from->trims++;
  dlcp_sim_port_append(port, 0, pkt);
  return DLCP_SIM_TRIMMED;
}

static bool trimmable(const dlcp_sim_port *port, const dlcp_sim_packet *pkt) {
  return port->cfg->trimming && pkt->kind == DLCP_SIM_PKT_DATA &&
         !(pkt->flags & DLCP_SIM_PKT_F_TRIMMED);
}

/* RED's decision on a queue of |bytes| (see dlcp_sim_port_config). */
static bool red_above(dlcp_sim_port *port, uint64_t bytes) {
  const dlcp_sim_port_config *c = port->cfg;
  if (bytes < c->red_min_bytes) {
    return false;
  }
  if (bytes >= c->red_max_bytes) {
    return true;
  }
  double p = c->red_max_p * (double)(bytes - c->red_min_bytes) /
             (double)(c->red_max_bytes - c->red_min_bytes);
  return dlcp_rng_unit(&port->red_rng) < p;
}

dlcp_sim_verdict dlcp_sim_port_enqueue(dlcp_sim_port *port,
                                       dlcp_sim_packet *pkt) {
  if (port->cfg->pfabric) {
    return dlcp_sim_pfabric_enqueue(port, pkt);
  }
  uint32_t qi = pkt->prio < port->cfg->nqueues ? pkt->prio
                                               : port->cfg->nqueues - 1;
  dlcp_sim_queue *q = &port->q[qi];
  bool above = port->cfg->red_max_bytes > 0
                   ? red_above(port, q->bytes)
                   : q->bytes >= port->cfg->ecn_threshold_bytes[qi];
  if (port->cfg->ecn_port_threshold_bytes &&
      port->bytes >= port->cfg->ecn_port_threshold_bytes) {
    above = true;
  }
  bool lossless = (pkt->flags & DLCP_SIM_PKT_F_LOSSLESS) != 0;
  bool pfc = dlcp_sim_pfc_lossless(port, pkt, qi);

  if (above && pkt->ecn == DLCP_SIM_ECN_NOT_ECT && !lossless && !pfc) {
    if (trimmable(port, pkt)) {
      return trim(port, q, pkt);
    }
    q->drops_selective++;
    return DLCP_SIM_DROP_SELECTIVE;
  }
  if (pfc) {
    if (!dlcp_sim_pfc_admit(port, pkt, qi)) {
      q->drops_buffer++;
      return DLCP_SIM_DROP_BUFFER;
    }
  } else if (!lossless && !has_room(port, q, pkt->size_bytes)) {
    if (trimmable(port, pkt)) {
      return trim(port, q, pkt);
    }
    q->drops_buffer++;
    return DLCP_SIM_DROP_BUFFER;
  }
  dlcp_sim_verdict verdict = DLCP_SIM_ENQUEUED;
  if (above && pkt->ecn == DLCP_SIM_ECN_ECT) {
    pkt->ecn = DLCP_SIM_ECN_CE;
    q->marks++;
    verdict = DLCP_SIM_MARKED;
  }
  dlcp_sim_port_append(port, qi, pkt);
  return verdict;
}

dlcp_sim_packet *dlcp_sim_port_dequeue(dlcp_sim_port *port) {
  if (port->nonempty == 0) {
    return NULL;
  }
  if (port->cfg->pfabric) {
    return dlcp_sim_pfabric_dequeue(port);
  }
  /* The lowest set bit is the most urgent non-empty queue: no scan over
   * empty queues (each a separate cache line).  PFC-paused priorities
   * wait. */
  uint8_t ready = port->nonempty & (uint8_t)~port->pfc_paused;
  if (ready == 0) {
    return NULL;
  }
  uint32_t i = (uint32_t)__builtin_ctz(ready);
  dlcp_sim_queue *q = &port->q[i];
  dlcp_sim_packet *pkt = q->head;
  q->head = pkt->next;
  if (!q->head) {
    q->tail = NULL;
    port->nonempty &= (uint8_t)~(1u << i);
  } else {
    /* Likely the next packet this port sends, one serialization from
     * now: start bringing its line in. */
    __builtin_prefetch(q->head);
  }
  q->pkts--;
  pkt->next = NULL;
  return pkt;
}

void dlcp_sim_port_release(dlcp_sim_port *port, const dlcp_sim_packet *pkt) {
  port->q[pkt->qidx].bytes -= pkt->size_bytes;
  port->bytes -= pkt->size_bytes;
  if (port->shared) {
    port->shared->used_bytes -= pkt->size_bytes;
  }
  if (port->net && port->net->pfc_in) {
    dlcp_sim_pfc_count_out(port, pkt);
  }
}
