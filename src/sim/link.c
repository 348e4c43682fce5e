/*
 * link.c: a port's transmitter and the pipe behind it.
 *
 * The transmitter serializes one packet at a time: it takes the next packet
 * from the port's queues (strict priority), holds it for size * 8 / rate,
 * then hands it to the pipe and starts the next one, so a port is never
 * idle while it has packets.  The pipe delays each packet by the
 * propagation delay and then delivers it to the far node.  Random loss
 * (gray failure) is drawn from the link's own seeded generator when a
 * packet finishes serializing, so the loss pattern of one link does not
 * depend on traffic elsewhere.  A link that goes down loses everything
 * queued for it, the packet being serialized, what is in flight on it, and
 * whatever it is asked to send while down.
 */
#include "sim/net.h"

static void tx_start(dlcp_sim_port *port, dlcp_sim_ps now);

static void pipe_arrive(void *obj, void *arg, dlcp_sim_ps now) {
  dlcp_sim_port *port = obj;
  dlcp_sim_packet *pkt = arg;
  dlcp_sim_net *net = port->net;
  if (!port->up) {
    port->drops_down++;
    dlcp_sim_packet_free(net->pool, pkt);
    return;
  }
  if (net->nodes[port->peer].kind == DLCP_SIM_NODE_HOST) {
    dlcp_sim_host_receive(net, port->peer, pkt, now);
  } else {
    dlcp_sim_switch_receive(net, port->peer, pkt, now);
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
  if (port->loss > 0.0 && dlcp_rng_unit(&port->rng) < port->loss) {
    port->drops_loss++;
    dlcp_sim_packet_free(net->pool, pkt);
  } else {
    dlcp_sim_engine_at(net->engine, now + port->delay_ps, pipe_arrive, port,
                       pkt);
  }
  tx_start(port, now);
}

static void tx_start(dlcp_sim_port *port, dlcp_sim_ps now) {
  dlcp_sim_packet *pkt = dlcp_sim_port_dequeue(port);
  if (!pkt) {
    return;
  }
  port->busy = true;
  dlcp_sim_engine_at(port->net->engine,
                     now + dlcp_sim_serialization_ps(pkt->size_bytes,
                                                     port->rate_bps),
                     tx_done, port, pkt);
}

void dlcp_sim_port_flush(dlcp_sim_port *port) {
  dlcp_sim_packet *pkt;
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
