/*
 * switch.c: forwarding at a switch.
 *
 * A switch looks up the equal-cost egress ports towards the packet's
 * destination host and picks one according to the packet's load-balancing
 * mode:
 *   ECMP    a hash of (flow or socket, src, dst) salted with the run's
 *           seed and the switch id, so one connection keeps one path and
 *           different switches do not make correlated choices (hash
 *           polarization);
 *   SPRAY   a uniformly random port per packet (random packet spraying);
 *   SOURCE  the packet's path id read as a mixed-radix number: every hop
 *           with c > 1 choices takes digit path % c and divides it out.
 *           In a leaf-spine the only such hop is the source ToR, so path
 *           id p selects spine p mod S; in a fat-tree the first digit picks
 *           the aggregation switch and the second the core.
 * Source routing follows the routes computed with every link up, so a
 * packet whose path crosses a downed link is dropped there, exactly as a
 * real source-routed packet would be; ECMP and spraying use the live routes
 * and flow around failures.
 */
#include "sim/net.h"

uint32_t dlcp_sim_switch_route(dlcp_sim_net *net, uint32_t node,
                               dlcp_sim_packet *pkt) {
  const struct dlcp_sim_routes *r =
      pkt->lb == DLCP_SIM_LB_SOURCE ? &net->fixed : &net->live;
  uint32_t dst = pkt->dst;
  if (!r->host_up[dst]) {
    return DLCP_SIM_NONE;
  }
  if (node == net->host_attach[dst]) {
    return net->host_port[dst];
  }
  const struct dlcp_sim_route_cell *cell =
      &r->cells[(size_t)node * net->nclasses + net->host_class[dst]];
  uint32_t cnt = cell->cnt;
  if (cnt == 0) {
    return DLCP_SIM_NONE;
  }
  const uint32_t *cand = &r->ports[cell->off];
  if (cnt == 1) {
    return cand[0];
  }
  switch ((dlcp_sim_lb)pkt->lb) {
  case DLCP_SIM_LB_SPRAY:
    return cand[dlcp_rng_below(&net->spray_rng, cnt)];
  case DLCP_SIM_LB_SOURCE: {
    uint32_t digit = pkt->path_rest % cnt;
    pkt->path_rest /= cnt;
    return cand[digit];
  }
  case DLCP_SIM_LB_ECMP:
    break;
  }
  uint64_t conn = pkt->sport ? pkt->sport : pkt->flow;
  uint64_t h = dlcp_rng_mix(net->ecmp_salt ^ (conn << 32) ^
                            ((uint64_t)pkt->src << 16) ^ pkt->dst);
  h = dlcp_rng_mix(h ^ ((uint64_t)node * 0x9E3779B97F4A7C15ull));
  /* Multiply-shift maps the top 32 hash bits onto [0, cnt) without a
   * division (Lemire's fast range). */
  return cand[((h >> 32) * cnt) >> 32];
}

void dlcp_sim_switch_receive(dlcp_sim_net *net, uint32_t node,
                             dlcp_sim_packet *pkt, dlcp_sim_ps now) {
  /* Addressed to an aggregation switch: by a host one hop from it (dst
   * none), or, routed towards a host below it (F_TO_AGG, the switch's
   * node in |flow|), by a host in another rack or another switch of a
   * chain or tree. */
  if (pkt->kind == DLCP_SIM_PKT_INA && net->agg_rx &&
      (pkt->dst == DLCP_SIM_NONE || (pkt->flags & DLCP_SIM_PKT_F_TO_AGG)) &&
      net->agg_rx(net->agg_rx_ctx, node, pkt, now)) {
    return;
  }
  if (pkt->dst == DLCP_SIM_NONE) {
    net->nodes[node].drops_noroute++;
    dlcp_sim_packet_free(net->pool, pkt);
    return;
  }
  uint32_t port = dlcp_sim_switch_route(net, node, pkt);
  if (port == DLCP_SIM_NONE) {
    net->nodes[node].drops_noroute++;
    dlcp_sim_packet_free(net->pool, pkt);
    return;
  }
  dlcp_sim_port_send(&net->ports[port], pkt, now);
}
