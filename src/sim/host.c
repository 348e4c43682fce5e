/*
 * host.c: a host's NIC.
 *
 * A host has exactly one port, its NIC, with the host queueing
 * configuration (deep buffer, no ECN by default).  Packets a transport
 * sends go through that port like any other, so a host that sends to many
 * peers at once is limited by its own line rate; packets that arrive for
 * the host are handed to the simulation's transport layer.
 */
#include "sim/net.h"

dlcp_sim_port *dlcp_sim_host_nic(dlcp_sim_net *net, uint32_t host) {
  const dlcp_sim_node *n = &net->nodes[net->hosts[host]];
  return &net->ports[net->node_ports[n->first_port]];
}

void dlcp_sim_host_send(dlcp_sim_net *net, uint32_t host,
                        dlcp_sim_packet *pkt, dlcp_sim_ps now) {
  /* Source routing consumes the path id digit by digit along the way. */
  pkt->path_rest = pkt->path;
  pkt->ingress = DLCP_SIM_NONE;
  dlcp_sim_port_send(dlcp_sim_host_nic(net, host), pkt, now);
}

void dlcp_sim_host_receive(dlcp_sim_net *net, uint32_t node,
                           dlcp_sim_packet *pkt, dlcp_sim_ps now) {
  uint32_t host = net->nodes[node].host;
  if (pkt->dst != host || !net->host_rx) {
    net->misdelivered++;
    dlcp_sim_packet_free(net->pool, pkt);
    return;
  }
  net->host_rx(net->host_rx_ctx, host, pkt, now);
}
