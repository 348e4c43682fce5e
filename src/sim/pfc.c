/*
 * pfc.c: priority flow control (IEEE 802.1Qbb) at switch ingresses.
 *
 * A switch accounts every packet of a lossless priority it holds to the
 * link it arrived on (pkt->ingress, the upstream transmitter's port id)
 * and to its queue index.  Crossing xoff upwards sends PAUSE for that
 * priority upstream; falling to xon or below sends RESUME.  Frames are not
 * serialized (64 bytes are noise next to the data) but travel the link's
 * propagation delay, so the headroom must absorb what the upstream port
 * sends for one round trip of that link plus a packet it had begun.  Real
 * PAUSE frames carry a quanta and are refreshed; an explicit XOFF/XON pair
 * is the same as a refresh that never lapses.  A paused priority stops the
 * upstream transmitter from starting packets of that priority only: other
 * priorities keep flowing, and every flow of the paused priority that
 * shares the link waits, whatever its destination (head-of-line blocking,
 * visible in the victims' FCTs and in the pause counters).  Lossless
 * bytes are held in the ingress's buffer: they do not count against the
 * egress port's buffer that lossy priorities are admitted by (with a
 * shared buffer they still take pool memory).
 */
#include "sim/net.h"

int dlcp_sim_pfc_init(dlcp_sim_net *net) {
  if (net->pfc.prio_mask == 0) {
    return 0;
  }
  net->pfc_in = net->mem->calloc(net->nports, sizeof(*net->pfc_in),
                                 net->mem->user);
  return net->pfc_in ? 0 : DLCP_ERR_NOMEM;
}

bool dlcp_sim_pfc_room(dlcp_sim_net *net, const dlcp_sim_packet *pkt,
                       uint32_t qi) {
  dlcp_sim_pfc_ingress *in = &net->pfc_in[pkt->ingress];
  if (in->bytes[qi] + pkt->size_bytes <=
      net->pfc.xoff_bytes + net->pfc.headroom_bytes) {
    return true;
  }
  in->headroom_drops++;
  return false;
}

bool dlcp_sim_pfc_admit(dlcp_sim_port *port, const dlcp_sim_packet *pkt,
                        uint32_t qi) {
  return dlcp_sim_pfc_room(port->net, pkt, qi);
}

static void pfc_frame(void *obj, void *arg, dlcp_sim_ps now) {
  uintptr_t a = (uintptr_t)arg;
  dlcp_sim_port_pfc(obj, (uint32_t)(a >> 1), (a & 1u) != 0, now);
}

/* Sends PAUSE or RESUME for |prio| to the transmitter of |upstream|. */
static void send_frame(dlcp_sim_net *net, uint32_t upstream, uint32_t prio,
                       bool pause) {
  dlcp_sim_port *up = &net->ports[upstream];
  dlcp_sim_pfc_ingress *in = &net->pfc_in[upstream];
  dlcp_sim_ps now = net->engine->now;
  dlcp_sim_ps at = now + up->delay_ps;
  if (pause) {
    in->pauses++;
    in->paused_since[prio] = at;
  } else {
    in->paused_ps += at - in->paused_since[prio];
  }
  dlcp_sim_engine_at_cold(net->engine, at, pfc_frame, up,
                          (void *)(uintptr_t)((prio << 1) | (pause ? 1u : 0u)));
}

void dlcp_sim_pfc_hold(dlcp_sim_net *net, const dlcp_sim_packet *pkt,
                       uint32_t qi) {
  dlcp_sim_pfc_ingress *in = &net->pfc_in[pkt->ingress];
  in->bytes[qi] += pkt->size_bytes;
  uint8_t bit = (uint8_t)(1u << qi);
  if (in->bytes[qi] >= net->pfc.xoff_bytes && !(in->xoff_sent & bit)) {
    in->xoff_sent |= bit;
    send_frame(net, pkt->ingress, qi, true);
  }
}

void dlcp_sim_pfc_release(dlcp_sim_net *net, const dlcp_sim_packet *pkt,
                          uint32_t qi) {
  dlcp_sim_pfc_ingress *in = &net->pfc_in[pkt->ingress];
  in->bytes[qi] -= pkt->size_bytes;
  uint8_t bit = (uint8_t)(1u << qi);
  if ((in->xoff_sent & bit) && in->bytes[qi] <= net->pfc.xon_bytes) {
    in->xoff_sent &= (uint8_t)~bit;
    send_frame(net, pkt->ingress, qi, false);
  }
}

void dlcp_sim_pfc_count_in(dlcp_sim_port *port, const dlcp_sim_packet *pkt) {
  if (dlcp_sim_pfc_lossless(port, pkt, pkt->qidx)) {
    dlcp_sim_pfc_hold(port->net, pkt, pkt->qidx);
    port->pfc_bytes += pkt->size_bytes;
  }
}

void dlcp_sim_pfc_count_out(dlcp_sim_port *port, const dlcp_sim_packet *pkt) {
  if (dlcp_sim_pfc_lossless(port, pkt, pkt->qidx)) {
    dlcp_sim_pfc_release(port->net, pkt, pkt->qidx);
    port->pfc_bytes -= pkt->size_bytes;
  }
}
