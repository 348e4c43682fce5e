/*
 * topo.c: topology builders.
 *
 * Leaf-spine: |tors| racks of |hosts_per_tor| hosts; every ToR connects to
 * every spine.  The oversubscription of a ToR is
 *   hosts_per_tor * host_rate / (spines * fabric_rate).
 * Fat-tree (Al-Fares et al.): k pods, each with k/2 edge and k/2
 * aggregation switches; edge switches serve k/2 hosts and connect to every
 * aggregation switch of their pod; aggregation switch j of a pod connects to
 * cores j*k/2 .. j*k/2 + k/2 - 1; k^3/4 hosts in all, full bisection when
 * all rates are equal.  Explicit: the scenario lists nodes and links.
 *
 * Hosts are created first, so host index == node id for the generated
 * topologies, and a switch's uplinks are created in the order of the
 * switches above it, which is the order source routing's path ids count in.
 */
#include <stdio.h>
#include <string.h>

#include "sim/sim.h"

uint32_t dlcp_sim_topo_diameter(const dlcp_sim_topo_config *cfg) {
  switch (cfg->kind) {
  case DLCP_SIM_TOPO_LEAF_SPINE:
    return cfg->tors > 1 ? 4 : 2;
  case DLCP_SIM_TOPO_FAT_TREE:
    return 6;
  case DLCP_SIM_TOPO_EXPLICIT:
    break;
  }
  return 0;
}

dlcp_sim_ps dlcp_sim_topo_link_delay(const dlcp_sim_topo_config *cfg) {
  uint32_t hops = dlcp_sim_topo_diameter(cfg);
  if (cfg->base_rtt_ps > 0 && hops > 0) {
    return cfg->base_rtt_ps / (2ull * hops);
  }
  return cfg->link_delay_ps;
}

#define CHECK_NODE(id)                                                         \
  do {                                                                         \
    if ((id) == DLCP_SIM_NONE) {                                               \
      return DLCP_ERR_NOMEM;                                                   \
    }                                                                          \
  } while (0)

static int build_leaf_spine(dlcp_sim_net *net, const dlcp_sim_topo_config *c,
                            char *err, size_t errlen) {
  if (c->hosts_per_tor == 0 || c->tors == 0 ||
      (c->tors > 1 && c->spines == 0)) {
    snprintf(err, errlen,
             "topology: leaf_spine needs hosts_per_tor >= 1, tors >= 1 and "
             "spines >= 1 when tors > 1");
    return DLCP_ERR_CONFIG;
  }
  dlcp_sim_ps delay = dlcp_sim_topo_link_delay(c);
  char name[DLCP_SIM_NAME_MAX];
  uint32_t nhosts = c->hosts_per_tor * c->tors;
  for (uint32_t h = 0; h < nhosts; h++) {
    snprintf(name, sizeof(name), "h%u", h);
    CHECK_NODE(dlcp_sim_net_add_node(net, DLCP_SIM_NODE_HOST, name,
                                     h / c->hosts_per_tor, 0));
  }
  uint32_t tor0 = net->nnodes;
  for (uint32_t t = 0; t < c->tors; t++) {
    snprintf(name, sizeof(name), "tor%u", t);
    CHECK_NODE(dlcp_sim_net_add_node(net, DLCP_SIM_NODE_SWITCH, name, t, 1));
  }
  uint32_t spine0 = net->nnodes;
  uint32_t nspines = c->tors > 1 ? c->spines : 0;
  for (uint32_t s = 0; s < nspines; s++) {
    snprintf(name, sizeof(name), "spine%u", s);
    CHECK_NODE(dlcp_sim_net_add_node(net, DLCP_SIM_NODE_SWITCH, name, 0, 2));
  }
  for (uint32_t h = 0; h < nhosts; h++) {
    CHECK_NODE(dlcp_sim_net_add_cable(net, h, tor0 + h / c->hosts_per_tor,
                                      c->host_rate_bps, delay));
  }
  for (uint32_t t = 0; t < c->tors; t++) {
    for (uint32_t s = 0; s < nspines; s++) {
      CHECK_NODE(dlcp_sim_net_add_cable(net, tor0 + t, spine0 + s,
                                        c->fabric_rate_bps, delay));
    }
  }
  return 0;
}

static int build_fat_tree(dlcp_sim_net *net, const dlcp_sim_topo_config *c,
                          char *err, size_t errlen) {
  uint32_t k = c->k;
  if (k < 2 || k % 2 != 0 || k > 64) {
    snprintf(err, errlen, "topology: fat_tree needs an even k in [2, 64]");
    return DLCP_ERR_CONFIG;
  }
  uint32_t half = k / 2;
  dlcp_sim_ps delay = dlcp_sim_topo_link_delay(c);
  char name[DLCP_SIM_NAME_MAX];
  uint32_t nhosts = k * k * k / 4;
  for (uint32_t h = 0; h < nhosts; h++) {
    snprintf(name, sizeof(name), "h%u", h);
    /* Rack = global edge switch index. */
    CHECK_NODE(dlcp_sim_net_add_node(net, DLCP_SIM_NODE_HOST, name, h / half,
                                     0));
  }
  uint32_t edge0 = net->nnodes;
  for (uint32_t p = 0; p < k; p++) {
    for (uint32_t i = 0; i < half; i++) {
      snprintf(name, sizeof(name), "edge%u_%u", p, i);
      CHECK_NODE(dlcp_sim_net_add_node(net, DLCP_SIM_NODE_SWITCH, name,
                                       p * half + i, 1));
    }
  }
  uint32_t agg0 = net->nnodes;
  for (uint32_t p = 0; p < k; p++) {
    for (uint32_t i = 0; i < half; i++) {
      snprintf(name, sizeof(name), "agg%u_%u", p, i);
      CHECK_NODE(dlcp_sim_net_add_node(net, DLCP_SIM_NODE_SWITCH, name, p, 2));
    }
  }
  uint32_t core0 = net->nnodes;
  for (uint32_t i = 0; i < half * half; i++) {
    snprintf(name, sizeof(name), "core%u", i);
    CHECK_NODE(dlcp_sim_net_add_node(net, DLCP_SIM_NODE_SWITCH, name, 0, 3));
  }
  for (uint32_t h = 0; h < nhosts; h++) {
    CHECK_NODE(dlcp_sim_net_add_cable(net, h, edge0 + h / half,
                                      c->host_rate_bps, delay));
  }
  for (uint32_t p = 0; p < k; p++) {
    for (uint32_t e = 0; e < half; e++) {
      for (uint32_t a = 0; a < half; a++) {
        CHECK_NODE(dlcp_sim_net_add_cable(net, edge0 + p * half + e,
                                          agg0 + p * half + a,
                                          c->fabric_rate_bps, delay));
      }
    }
  }
  for (uint32_t p = 0; p < k; p++) {
    for (uint32_t a = 0; a < half; a++) {
      for (uint32_t j = 0; j < half; j++) {
        CHECK_NODE(dlcp_sim_net_add_cable(net, agg0 + p * half + a,
                                          core0 + a * half + j,
                                          c->fabric_rate_bps, delay));
      }
    }
  }
  return 0;
}

static int build_explicit(dlcp_sim_net *net, const dlcp_sim_topo_config *c,
                          char *err, size_t errlen) {
  if (c->nnodes == 0) {
    snprintf(err, errlen, "topology: explicit topology has no nodes");
    return DLCP_ERR_CONFIG;
  }
  for (uint32_t i = 0; i < c->nnodes; i++) {
    const dlcp_sim_topo_node *n = &c->nodes[i];
    if (dlcp_sim_net_find_node(net, n->name) != DLCP_SIM_NONE) {
      snprintf(err, errlen, "%s: field '%s.name': expected a unique node "
               "name, '%s' is used twice", n->where, n->field, n->name);
      return DLCP_ERR_CONFIG;
    }
    CHECK_NODE(dlcp_sim_net_add_node(
        net, n->is_host ? DLCP_SIM_NODE_HOST : DLCP_SIM_NODE_SWITCH, n->name,
        n->group, n->is_host ? 0 : 1));
  }
  for (uint32_t i = 0; i < c->nlinks; i++) {
    const dlcp_sim_topo_link *l = &c->links[i];
    uint32_t a = dlcp_sim_net_find_node(net, l->a);
    uint32_t b = dlcp_sim_net_find_node(net, l->b);
    if (a == DLCP_SIM_NONE || b == DLCP_SIM_NONE || a == b) {
      snprintf(err, errlen, "%s: field '%s': expected two distinct node "
               "names from topology.nodes, got '%s' - '%s'", l->where,
               l->field, l->a, l->b);
      return DLCP_ERR_CONFIG;
    }
    if (dlcp_sim_net_find_port(net, a, b) != DLCP_SIM_NONE) {
      snprintf(err, errlen, "%s: field '%s': expected at most one link "
               "between '%s' and '%s'", l->where, l->field, l->a, l->b);
      return DLCP_ERR_CONFIG;
    }
    CHECK_NODE(dlcp_sim_net_add_cable(net, a, b, l->rate_bps, l->delay_ps));
  }
  /* Hosts need exactly one link; say which one does not. */
  for (uint32_t i = 0; i < c->nnodes; i++) {
    if (!c->nodes[i].is_host) {
      continue;
    }
    uint32_t links = 0;
    for (uint32_t p = 0; p < net->nports; p++) {
      links += net->ports[p].node == i;
    }
    if (links != 1) {
      snprintf(err, errlen, "%s: field '%s': expected host '%s' to have "
               "exactly one link, it has %u", c->nodes[i].where,
               c->nodes[i].field, c->nodes[i].name, links);
      return DLCP_ERR_CONFIG;
    }
  }
  return 0;
}

int dlcp_sim_topo_build(dlcp_sim_net *net, const dlcp_sim_topo_config *cfg,
                        char *err, size_t errlen) {
  switch (cfg->kind) {
  case DLCP_SIM_TOPO_LEAF_SPINE:
    return build_leaf_spine(net, cfg, err, errlen);
  case DLCP_SIM_TOPO_FAT_TREE:
    return build_fat_tree(net, cfg, err, errlen);
  case DLCP_SIM_TOPO_EXPLICIT:
    return build_explicit(net, cfg, err, errlen);
  }
  snprintf(err, errlen, "topology: unknown kind");
  return DLCP_ERR_CONFIG;
}

dlcp_sim_ps dlcp_sim_base_rtt(const dlcp_sim_config *cfg) {
  const dlcp_sim_topo_config *t = &cfg->topo;
  uint32_t hops = dlcp_sim_topo_diameter(t);
  if (hops > 0) {
    return 2ull * hops * dlcp_sim_topo_link_delay(t);
  }
  dlcp_sim_ps worst = 0;
  for (uint32_t i = 0; t->links && i < t->nlinks; i++) {
    if (t->links[i].delay_ps > worst) {
      worst = t->links[i].delay_ps;
    }
  }
  return 8 * worst;
}

uint32_t dlcp_sim_bdp_pkts(const dlcp_sim_config *cfg) {
  uint64_t mtu = cfg->transport.mss_bytes + cfg->transport.header_bytes;
  double bytes = (double)cfg->topo.host_rate_bps / 8.0 *
                 ((double)dlcp_sim_base_rtt(cfg) / 1e12);
  uint64_t pkts = (uint64_t)(bytes / (double)mtu + 0.5);
  return pkts < 1 ? 1 : (uint32_t)pkts;
}
