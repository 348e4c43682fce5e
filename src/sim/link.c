/*
 * link.c: a port's transmitter and the pipe behind it.
 *
 * The transmitter serializes one packet at a time: it takes the next packet
 * from the port's queues (strict priority), holds it for size * 8 / rate,
 * then hands it to the pipe and starts the next one, so a port is never
 * idle while it has packets.  The pipe delays each packet by the
 * propagation delay and then delivers it to the far node; because the
 * delay is constant the pipe is a FIFO, and only its head has an event in
 * the engine (one event per packet still, but the event heap holds at most
 * two events per port instead of one per packet in flight).  Random loss
 * (gray failure) is drawn from the link's own seeded generator when a
 * packet finishes serializing, so the loss pattern of one link does not
 * depend on traffic elsewhere.  A link that goes down loses everything
 * queued for it, the packet being serialized, what is in flight on it, and
 * whatever it is asked to send while down.
 */
#include "sim/net.h"

static void tx_start(dlcp_sim_port *port, dlcp_sim_ps now);

/* The head of the pipe has arrived at the far node. */
static void pipe_arrive(void *obj, void *arg, dlcp_sim_ps now) {
  dlcp_sim_port *port = obj;
  dlcp_sim_net *net = port->net;
  (void)arg;
  uint32_t mask = port->pipe_cap - 1;
  dlcp_sim_packet *pkt = port->pipe[port->pipe_head].pkt;
  port->pipe_head = (port->pipe_head + 1) & mask;
  if (--port->pipe_len > 0) {
    /* Queue the next arrival before delivering this one, as if every
     * packet in the pipe had its own event queued when it entered. */
    dlcp_sim_engine_at(net->engine, port->pipe[port->pipe_head].due,
                       pipe_arrive, port, NULL);
    /* The next arrival is one packet time away: fetch its line now. */
    __builtin_prefetch(port->pipe[port->pipe_head].pkt);
  }
  if (!port->up) {
    port->drops_down++;
    dlcp_sim_packet_free(net->pool, pkt);
    return;
  }
  pkt->ingress = port->id;
  if (net->nodes[port->peer].kind == DLCP_SIM_NODE_HOST) {
    dlcp_sim_host_receive(net, port->peer, pkt, now);
  } else {
    dlcp_sim_switch_receive(net, port->peer, pkt, now);
  }
}

/* Doubles the pipe ring, unwrapping it. */
static int pipe_grow(dlcp_sim_port *port) {
  const dlcp_mem *mem = port->net->mem;
  uint32_t ncap = port->pipe_cap ? port->pipe_cap * 2 : 64;
  struct dlcp_sim_pipe_slot *n =
      mem->malloc(ncap * sizeof(*n), mem->user);
  if (!n) {
    return DLCP_ERR_NOMEM;
  }
  for (uint32_t i = 0; i < port->pipe_len; i++) {
    n[i] = port->pipe[(port->pipe_head + i) & (port->pipe_cap - 1)];
  }
  mem->free(port->pipe, mem->user);
  port->pipe = n;
  port->pipe_cap = ncap;
  port->pipe_head = 0;
  return 0;
}

/* Puts |pkt| into the pipe: every packet spends the same delay there, so
 * arrivals are in entry order and only the head needs an event. */
static void pipe_enter(dlcp_sim_port *port, dlcp_sim_packet *pkt,
                       dlcp_sim_ps now) {
  if (port->pipe_len == port->pipe_cap && pipe_grow(port) != 0) {
    dlcp_sim_engine_fail(port->net->engine, DLCP_ERR_NOMEM);
    dlcp_sim_packet_free(port->net->pool, pkt);
    return;
  }
  dlcp_sim_ps due = now + port->delay_ps;
  uint32_t tail = (port->pipe_head + port->pipe_len) & (port->pipe_cap - 1);
  port->pipe[tail].due = due;
  port->pipe[tail].pkt = pkt;
  if (port->pipe_len++ == 0) {
    dlcp_sim_engine_at(port->net->engine, due, pipe_arrive, port, NULL);
  }
}

static void tx_done(void *obj, void *arg, dlcp_sim_ps now) {
  dlcp_sim_port *port = obj;
  dlcp_sim_packet *pkt = arg;
  dlcp_sim_net *net = port->net;
  dlcp_sim_port_release(port, pkt);
  port->busy = false;
  if (!port->up) {
    /* The link failed while this packet was being serialized. */
    port->drops_down++;
    dlcp_sim_packet_free(net->pool, pkt);
    return;
  }
  port->tx_pkts++;
  port->tx_bytes += pkt->size_bytes;
  if (pkt->kind == DLCP_SIM_PKT_DATA &&
      !(pkt->flags & DLCP_SIM_PKT_F_TRIMMED)) {
    port->tx_data_payload_bytes += pkt->payload_bytes;
  }
  /* Lossless packets still consume a draw, so the loss pattern seen by
   * data does not depend on how much control traffic shares the link. */
  if (port->loss > 0.0 && dlcp_rng_unit(&port->rng) < port->loss &&
      !(pkt->flags & DLCP_SIM_PKT_F_LOSSLESS)) {
    port->drops_loss++;
    dlcp_sim_packet_free(net->pool, pkt);
  } else {
    if (port->pcap) {
      dlcp_sim_pcap_record(port->pcap, port, pkt, now);
    }
    pipe_enter(port, pkt, now);
  }
  tx_start(port, now);
}

static void tx_start(dlcp_sim_port *port, dlcp_sim_ps now) {
  if (port->paused) {
    return;
  }
  dlcp_sim_packet *pkt = dlcp_sim_port_dequeue(port);
  if (!pkt) {
    return;
  }
  port->busy = true;
  /* dlcp_sim_serialization_ps with the port's precomputed 8e12 / rate;
   * the remainder term (and its division) vanishes at round rates. */
  uint64_t bytes = pkt->size_bytes;
  dlcp_sim_ps ser = bytes * port->ser_q;
  if (port->ser_r) {
    ser += bytes * port->ser_r / port->rate_bps;
  }
  dlcp_sim_engine_at(port->net->engine, now + ser, tx_done, port, pkt);
}

void dlcp_sim_port_pause(dlcp_sim_port *port, bool pause, dlcp_sim_ps now) {
  if (pause) {
    port->paused++;
    return;
  }
  if (port->paused > 0 && --port->paused == 0 && !port->busy && port->up) {
    tx_start(port, now);
  }
}

void dlcp_sim_port_pfc(dlcp_sim_port *port, uint32_t prio, bool pause,
                       dlcp_sim_ps now) {
  uint8_t bit = (uint8_t)(1u << prio);
  if (pause) {
    port->pfc_paused |= bit;
    return;
  }
  port->pfc_paused &= (uint8_t)~bit;
  if (!port->busy && port->up) {
    tx_start(port, now);
  }
}

void dlcp_sim_port_flush(dlcp_sim_port *port) {
  dlcp_sim_packet *pkt;
  /* Paused priorities go too: the link is gone. */
  port->pfc_paused = 0;
  while ((pkt = dlcp_sim_port_dequeue(port)) != NULL) {
    dlcp_sim_port_release(port, pkt);
    port->drops_down++;
    dlcp_sim_packet_free(port->net->pool, pkt);
  }
}

void dlcp_sim_port_send(dlcp_sim_port *port, dlcp_sim_packet *pkt,
                        dlcp_sim_ps now) {
  dlcp_sim_net *net = port->net;
  if (!port->up) {
    port->drops_down++;
    dlcp_sim_packet_free(net->pool, pkt);
    return;
  }
  dlcp_sim_verdict v = dlcp_sim_port_enqueue(port, pkt);
  if (v == DLCP_SIM_DROP_BUFFER || v == DLCP_SIM_DROP_SELECTIVE) {
    dlcp_sim_packet_free(net->pool, pkt);
    return;
  }
  if (!port->busy) {
    tx_start(port, now);
  }
}
