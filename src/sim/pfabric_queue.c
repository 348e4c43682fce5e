/*
 * pfabric_queue.c: pFabric's switch port (Alizadeh et al., SIGCOMM 2013,
 * section 4.1): one small buffer whose packets carry a priority, the
 * remaining size of their flow (|rank|, smaller is more urgent).
 *
 *   Dequeue  the most urgent packet's flow is served, but by its EARLIEST
 *            packet in the queue (the paper's starvation-prevention rule:
 *            a flow's packets leave in order even when a later one carries
 *            a smaller remaining size).
 *   Enqueue  if the buffer has room the packet joins; otherwise the least
 *            urgent packet in the buffer is dropped to make room, unless
 *            the arriving packet is itself the least urgent (ties: the
 *            arriving packet is dropped, the queue's older packet kept).
 *
 * No ECN and no priority queues: pFabric needs neither.  Packets flagged
 * LOSSLESS (the simulator's control channels) are never chosen as victims
 * and always admitted.  Both scans are linear in the queue, which pFabric
 * keeps short (about two BDPs of buffer per port); host NICs keep the
 * strict-priority FIFOs (pfabric.c maps the rank onto them).  PFC and RED
 * do not apply to pFabric ports.
 */
#include "sim/net.h"

/* Removes |pkt| (after |prev|, or the head if |prev| is NULL) from queue
 * 0 and uncounts its bytes. */
static void unlink_pkt(dlcp_sim_port *port, dlcp_sim_packet *prev,
                       dlcp_sim_packet *pkt) {
  dlcp_sim_queue *q = &port->q[0];
  if (prev) {
    prev->next = pkt->next;
  } else {
    q->head = pkt->next;
  }
  if (q->tail == pkt) {
    q->tail = prev;
  }
  if (!q->head) {
    port->nonempty &= (uint8_t)~1u;
  }
  q->pkts--;
  pkt->next = NULL;
}

static bool has_room(const dlcp_sim_port *port, uint64_t bytes) {
  const dlcp_sim_buffer_pool *pool = port->shared;
  if (pool) {
    return pool->used_bytes + bytes <= pool->size_bytes;
  }
  return port->bytes + bytes <= port->cfg->buffer_bytes;
}

dlcp_sim_verdict dlcp_sim_pfabric_enqueue(dlcp_sim_port *port,
                                          dlcp_sim_packet *pkt) {
  dlcp_sim_queue *q = &port->q[0];
  bool lossless = (pkt->flags & DLCP_SIM_PKT_F_LOSSLESS) != 0;
  while (!lossless && !has_room(port, pkt->size_bytes)) {
    dlcp_sim_packet *victim = NULL, *victim_prev = NULL, *prev = NULL;
    for (dlcp_sim_packet *p = q->head; p; prev = p, p = p->next) {
      if (!(p->flags & DLCP_SIM_PKT_F_LOSSLESS) &&
          (!victim || p->rank >= victim->rank)) {
        victim = p;
        victim_prev = prev;
      }
    }
    if (!victim || victim->rank <= pkt->rank) {
      q->drops_buffer++;
      return DLCP_SIM_DROP_BUFFER;
    }
    unlink_pkt(port, victim_prev, victim);
    dlcp_sim_port_release(port, victim);
    q->drops_buffer++;
    dlcp_sim_packet_free(port->net->pool, victim);
  }
  dlcp_sim_port_append(port, 0, pkt);
  return DLCP_SIM_ENQUEUED;
}

dlcp_sim_packet *dlcp_sim_pfabric_dequeue(dlcp_sim_port *port) {
  dlcp_sim_queue *q = &port->q[0];
  const dlcp_sim_packet *best = q->head;
  for (const dlcp_sim_packet *p = q->head; p; p = p->next) {
    if (p->rank < best->rank) {
      best = p;
    }
  }
  /* The earliest queued packet of the most urgent packet's flow. */
  dlcp_sim_packet *prev = NULL, *p = q->head;
  while (p->flow != best->flow || p->src != best->src) {
    prev = p;
    p = p->next;
  }
  unlink_pkt(port, prev, p);
  return p;
}
