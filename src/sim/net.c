/*
 * net.c: building the network and keeping its routes.
 *
 * Nodes and cables are added one by one (by topo.c or a test), then
 * dlcp_sim_net_finalize groups each node's egress ports and computes the
 * routing tables.  Routes are shortest paths by hop count towards every
 * destination host, found by one breadth-first search per host over the
 * links that are up; hosts are endpoints only and never forward.  Equal-
 * cost next hops are kept in port-creation order, which the topology
 * builders make meaningful (a ToR's uplinks are in spine order), so source
 * routing by path id is predictable.  When a link changes state the live
 * table is rebuilt at once: routing converges instantly, the model most
 * simulators use; the fixed table, computed with every link up, never
 * changes (see switch.c for why source routing uses it).
 */
#include "sim/net.h"

#include <stdio.h>
#include <string.h>

static void *mem_grow(const dlcp_mem *mem, void *ptr, uint32_t *cap,
                      uint32_t need, size_t elem) {
  if (need <= *cap) {
    return ptr;
  }
  uint32_t ncap = *cap ? *cap : 16;
  while (ncap < need) {
    ncap *= 2;
  }
  void *p = mem->realloc(ptr, (size_t)ncap * elem, mem->user);
  if (p) {
    *cap = ncap;
  }
  return p;
}

int dlcp_sim_net_init(dlcp_sim_net *net, dlcp_sim_engine *engine,
                      dlcp_sim_packet_pool *pool, const dlcp_mem *mem,
                      uint64_t seed) {
  memset(net, 0, sizeof(*net));
  net->mem = dlcp_sim_mem(mem);
  net->engine = engine;
  net->pool = pool;
  /* Independent streams: ECMP salt, spraying, and (per port) loss. */
  dlcp_rng salt;
  dlcp_rng_seed(&salt, seed ^ 0x5EC3A17ull);
  net->ecmp_salt = dlcp_rng_next(&salt);
  dlcp_rng_seed(&net->spray_rng, seed ^ 0x5B4A7ull);
  net->dt_alpha = 1.0;
  return 0;
}

static void routes_free(const dlcp_mem *mem, struct dlcp_sim_routes *r) {
  mem->free(r->cells, mem->user);
  mem->free(r->ports, mem->user);
  mem->free(r->host_up, mem->user);
  memset(r, 0, sizeof(*r));
}

void dlcp_sim_net_free(dlcp_sim_net *net) {
  const dlcp_mem *mem = net->mem;
  if (!mem) {
    return;
  }
  mem->free(net->nodes, mem->user);
  for (uint32_t i = 0; i < net->nports; i++) {
    mem->free(net->ports[i].pipe, mem->user);
  }
  mem->free(net->ports, mem->user);
  mem->free(net->hosts, mem->user);
  mem->free(net->node_ports, mem->user);
  mem->free(net->pfc_in, mem->user);
  mem->free(net->host_class, mem->user);
  mem->free(net->host_attach, mem->user);
  mem->free(net->host_port, mem->user);
  mem->free(net->class_node, mem->user);
  routes_free(mem, &net->live);
  routes_free(mem, &net->fixed);
  memset(net, 0, sizeof(*net));
}

uint32_t dlcp_sim_net_add_node(dlcp_sim_net *net, dlcp_sim_node_kind kind,
                               const char *name, uint32_t group,
                               uint32_t tier) {
  dlcp_sim_node *nodes = mem_grow(net->mem, net->nodes, &net->nodes_cap,
                                  net->nnodes + 1, sizeof(*nodes));
  if (!nodes) {
    return DLCP_SIM_NONE;
  }
  net->nodes = nodes;
  dlcp_sim_node *n = &nodes[net->nnodes];
  memset(n, 0, sizeof(*n));
  n->kind = kind;
  n->id = net->nnodes;
  n->host = DLCP_SIM_NONE;
  n->group = group;
  n->tier = tier;
  snprintf(n->name, sizeof(n->name), "%s", name);
  return net->nnodes++;
}

static uint32_t add_port(dlcp_sim_net *net, uint32_t from, uint32_t to,
                         uint64_t rate_bps, dlcp_sim_ps delay_ps,
                         uint32_t cable) {
  dlcp_sim_port *ports = mem_grow(net->mem, net->ports, &net->ports_cap,
                                  net->nports + 1, sizeof(*ports));
  if (!ports) {
    return DLCP_SIM_NONE;
  }
  net->ports = ports;
  dlcp_sim_port *p = &ports[net->nports];
  memset(p, 0, sizeof(*p));
  p->id = net->nports;
  p->node = from;
  p->peer = to;
  p->cable = cable;
  p->rate_bps = rate_bps;
  p->delay_ps = delay_ps;
  p->up = true;
  return net->nports++;
}

uint32_t dlcp_sim_net_add_cable(dlcp_sim_net *net, uint32_t a, uint32_t b,
                                uint64_t rate_bps, dlcp_sim_ps delay_ps) {
  if (a >= net->nnodes || b >= net->nnodes || a == b || rate_bps == 0 ||
      net->finalized) {
    return DLCP_SIM_NONE;
  }
  uint32_t cable = net->nports / 2;
  uint32_t ab = add_port(net, a, b, rate_bps, delay_ps, cable);
  if (ab == DLCP_SIM_NONE) {
    return DLCP_SIM_NONE;
  }
  uint32_t ba = add_port(net, b, a, rate_bps, delay_ps, cable);
  if (ba == DLCP_SIM_NONE) {
    net->nports--;
    return DLCP_SIM_NONE;
  }
  net->ports[ab].reverse = ba;
  net->ports[ba].reverse = ab;
  return ab;
}

uint32_t dlcp_sim_net_find_node(const dlcp_sim_net *net, const char *name) {
  for (uint32_t i = 0; i < net->nnodes; i++) {
    if (strcmp(net->nodes[i].name, name) == 0) {
      return i;
    }
  }
  return DLCP_SIM_NONE;
}

uint32_t dlcp_sim_net_find_port(const dlcp_sim_net *net, uint32_t a,
                                uint32_t b) {
  for (uint32_t i = 0; i < net->nports; i++) {
    if (net->ports[i].node == a && net->ports[i].peer == b) {
      return i;
    }
  }
  return DLCP_SIM_NONE;
}

uint32_t dlcp_sim_net_host_rack(const dlcp_sim_net *net, uint32_t host) {
  const dlcp_sim_node *n = &net->nodes[net->hosts[host]];
  const dlcp_sim_port *nic = &net->ports[net->node_ports[n->first_port]];
  return net->nodes[nic->peer].group;
}

/* The destination classes (net.h, "Routing"): each host's attachment
 * node, and that node's port to it. */
static int classes_compute(dlcp_sim_net *net) {
  const dlcp_mem *mem = net->mem;
  uint32_t *class_of_node = mem->malloc(net->nnodes * sizeof(uint32_t),
                                        mem->user);
  net->host_class = mem->malloc((net->nhosts + 1) * sizeof(uint32_t),
                                mem->user);
  net->host_attach = mem->malloc((net->nhosts + 1) * sizeof(uint32_t),
                                 mem->user);
  net->host_port = mem->malloc((net->nhosts + 1) * sizeof(uint32_t),
                               mem->user);
  net->class_node = mem->malloc((net->nhosts + 1) * sizeof(uint32_t),
                                mem->user);
  if (!class_of_node || !net->host_class || !net->host_attach ||
      !net->host_port || !net->class_node) {
    mem->free(class_of_node, mem->user);
    return DLCP_ERR_NOMEM;
  }
  for (uint32_t i = 0; i < net->nnodes; i++) {
    class_of_node[i] = DLCP_SIM_NONE;
  }
  net->nclasses = 0;
  for (uint32_t h = 0; h < net->nhosts; h++) {
    const dlcp_sim_node *n = &net->nodes[net->hosts[h]];
    const dlcp_sim_port *nic = &net->ports[net->node_ports[n->first_port]];
    uint32_t a = nic->peer;
    if (class_of_node[a] == DLCP_SIM_NONE) {
      class_of_node[a] = net->nclasses;
      net->class_node[net->nclasses++] = a;
    }
    net->host_class[h] = class_of_node[a];
    net->host_attach[h] = a;
    net->host_port[h] = nic->reverse;
  }
  mem->free(class_of_node, mem->user);
  return 0;
}

/*
 * Rewrites |r|'s candidate lists node by node, each distinct list of a
 * node once, keeping the order within a list (ECMP and source routing
 * index it).  Computed class by class, every cell had its own copy, and a
 * switch's lists lay a class's worth of nodes apart: at 1,024 hosts (a
 * k = 16 fat tree) the lists filled ~1 MB and a hop's read of its list
 * was a cache miss.  A switch has a handful of distinct lists (its up
 * ports, or one port down), so side by side they stay in cache.
 */
static int routes_compact(dlcp_sim_net *net, struct dlcp_sim_routes *r) {
  const dlcp_mem *mem = net->mem;
  uint32_t cap = r->nports + 1;
  uint32_t *out = mem->malloc((size_t)cap * sizeof(*out), mem->user);
  /* This node's distinct lists so far: indices of their first cells. */
  uint32_t *distinct = mem->malloc(((size_t)net->nclasses + 1) *
                                       sizeof(*distinct), mem->user);
  if (!out || !distinct) {
    mem->free(out, mem->user);
    mem->free(distinct, mem->user);
    return DLCP_ERR_NOMEM;
  }
  uint32_t nout = 0;
  for (uint32_t n = 0; n < net->nnodes; n++) {
    struct dlcp_sim_route_cell *row = &r->cells[(size_t)n * net->nclasses];
    uint32_t ndistinct = 0;
    for (uint32_t c = 0; c < net->nclasses; c++) {
      const uint32_t *list = &r->ports[row[c].off];
      uint32_t cnt = row[c].cnt;
      uint32_t off = nout;
      for (uint32_t d = 0; d < ndistinct; d++) {
        const struct dlcp_sim_route_cell *seen = &row[distinct[d]];
        if (seen->cnt == cnt &&
            memcmp(&out[seen->off], list, cnt * sizeof(*list)) == 0) {
          off = seen->off;
          break;
        }
      }
      if (off == nout && cnt > 0) {
        memcpy(&out[nout], list, cnt * sizeof(*list));
        nout += cnt;
        distinct[ndistinct++] = c;
      }
      row[c].off = off;
    }
  }
  mem->free(distinct, mem->user);
  mem->free(r->ports, mem->user);
  r->ports = out;
  r->ports_cap = cap;
  r->nports = nout;
  return 0;
}

/*
 * Recomputes |r|: for every destination class, a BFS from its attachment
 * node over up links (or all links if |all_links|) gives each node's
 * distance to it; a node's candidates are its ports whose peer is one hop
 * closer.  (Hosts do not forward, so every path to a host runs through
 * its attachment node: the candidates are those towards the host.)
 */
static int routes_compute(dlcp_sim_net *net, struct dlcp_sim_routes *r,
                          bool all_links) {
  const dlcp_mem *mem = net->mem;
  size_t cells = (size_t)net->nnodes * net->nclasses;
  if (!r->cells) {
    r->cells = mem->malloc((cells + 1) * sizeof(*r->cells), mem->user);
    r->host_up = mem->malloc(net->nhosts + 1, mem->user);
    if (!r->cells || !r->host_up) {
      return DLCP_ERR_NOMEM;
    }
  }
  for (uint32_t h = 0; h < net->nhosts; h++) {
    const dlcp_sim_node *n = &net->nodes[net->hosts[h]];
    r->host_up[h] =
        all_links || net->ports[net->node_ports[n->first_port]].up;
  }
  uint32_t *dist = mem->malloc(net->nnodes * sizeof(*dist), mem->user);
  uint32_t *fifo = mem->malloc(net->nnodes * sizeof(*fifo), mem->user);
  if (!dist || !fifo) {
    mem->free(dist, mem->user);
    mem->free(fifo, mem->user);
    return DLCP_ERR_NOMEM;
  }
  int rv = 0;
  r->nports = 0;
  for (uint32_t c = 0; c < net->nclasses; c++) {
    uint32_t dst = net->class_node[c];
    for (uint32_t i = 0; i < net->nnodes; i++) {
      dist[i] = UINT32_MAX;
    }
    uint32_t head = 0, tail = 0;
    dist[dst] = 0;
    fifo[tail++] = dst;
    while (head < tail) {
      uint32_t u = fifo[head++];
      const dlcp_sim_node *nu = &net->nodes[u];
      if (nu->kind == DLCP_SIM_NODE_HOST && u != dst) {
        continue; /* hosts do not forward */
      }
      for (uint32_t k = 0; k < nu->nports; k++) {
        const dlcp_sim_port *p = &net->ports[net->node_ports[nu->first_port + k]];
        if ((all_links || p->up) && dist[p->peer] == UINT32_MAX) {
          dist[p->peer] = dist[u] + 1;
          fifo[tail++] = p->peer;
        }
      }
    }
    for (uint32_t n = 0; n < net->nnodes; n++) {
      const dlcp_sim_node *nn = &net->nodes[n];
      size_t cell = (size_t)n * net->nclasses + c;
      r->cells[cell].off = r->nports;
      r->cells[cell].cnt = 0;
      if (nn->kind != DLCP_SIM_NODE_SWITCH || dist[n] == UINT32_MAX) {
        continue;
      }
      for (uint32_t k = 0; k < nn->nports; k++) {
        uint32_t pid = net->node_ports[nn->first_port + k];
        const dlcp_sim_port *p = &net->ports[pid];
        if ((all_links || p->up) && dist[p->peer] + 1 == dist[n]) {
          uint32_t *np = mem_grow(mem, r->ports, &r->ports_cap, r->nports + 1,
                                  sizeof(*np));
          if (!np) {
            rv = DLCP_ERR_NOMEM;
            goto done;
          }
          r->ports = np;
          r->ports[r->nports++] = pid;
          r->cells[cell].cnt++;
        }
      }
    }
  }
done:
  mem->free(dist, mem->user);
  mem->free(fifo, mem->user);
  return rv == 0 ? routes_compact(net, r) : rv;
}

int dlcp_sim_net_finalize(dlcp_sim_net *net) {
  const dlcp_mem *mem = net->mem;
  if (net->finalized) {
    return DLCP_ERR_INVALID_ARGUMENT;
  }
  net->node_ports = mem->malloc((net->nports + 1) * sizeof(uint32_t),
                                mem->user);
  net->hosts = mem->malloc((net->nnodes + 1) * sizeof(uint32_t), mem->user);
  if (!net->node_ports || !net->hosts) {
    return DLCP_ERR_NOMEM;
  }
  /* Counting sort of ports by owner keeps creation order within a node. */
  for (uint32_t i = 0; i < net->nnodes; i++) {
    net->nodes[i].nports = 0;
  }
  for (uint32_t i = 0; i < net->nports; i++) {
    net->nodes[net->ports[i].node].nports++;
  }
  uint32_t off = 0;
  for (uint32_t i = 0; i < net->nnodes; i++) {
    net->nodes[i].first_port = off;
    off += net->nodes[i].nports;
    net->nodes[i].nports = 0;
  }
  for (uint32_t i = 0; i < net->nports; i++) {
    dlcp_sim_node *n = &net->nodes[net->ports[i].node];
    net->node_ports[n->first_port + n->nports++] = i;
  }
  net->nhosts = 0;
  for (uint32_t i = 0; i < net->nnodes; i++) {
    dlcp_sim_node *n = &net->nodes[i];
    if (n->kind == DLCP_SIM_NODE_HOST) {
      if (n->nports != 1) {
        return DLCP_ERR_CONFIG;
      }
      n->host = net->nhosts;
      net->hosts[net->nhosts++] = i;
    } else if (net->shared_buffer_bytes > 0) {
      n->pool.size_bytes = net->shared_buffer_bytes;
      n->pool.alpha = net->dt_alpha;
    }
  }
  for (uint32_t i = 0; i < net->nports; i++) {
    dlcp_sim_port *p = &net->ports[i];
    dlcp_sim_node *n = &net->nodes[p->node];
    p->net = net;
    if (n->kind == DLCP_SIM_NODE_HOST) {
      dlcp_sim_port_init(p, &net->host_port_cfg, NULL);
    } else {
      dlcp_sim_port_init(p, &net->switch_port_cfg,
                         net->shared_buffer_bytes > 0 ? &n->pool : NULL);
    }
    dlcp_rng_seed(&p->rng, net->ecmp_salt ^ (0xA5A5ull + i));
    dlcp_rng_seed(&p->red_rng, net->ecmp_salt ^ (0x4ED0000ull + i));
    p->ser_q = 8ull * DLCP_SIM_PS_PER_S / p->rate_bps;
    p->ser_r = 8ull * DLCP_SIM_PS_PER_S % p->rate_bps;
  }
  net->finalized = true;
  int rv = classes_compute(net);
  if (rv == 0) {
    rv = routes_compute(net, &net->fixed, true);
  }
  if (rv != 0) {
    return rv;
  }
  return routes_compute(net, &net->live, false);
}

int dlcp_sim_net_set_link(dlcp_sim_net *net, uint32_t port, bool up) {
  dlcp_sim_port *p = &net->ports[port];
  dlcp_sim_port *q = &net->ports[p->reverse];
  if (p->up == up) {
    return 0;
  }
  p->up = up;
  q->up = up;
  if (!up) {
    dlcp_sim_port_flush(p);
    dlcp_sim_port_flush(q);
  }
  return routes_compute(net, &net->live, false);
}

static void link_event(void *obj, void *arg, dlcp_sim_ps now) {
  dlcp_sim_net *net = obj;
  uintptr_t code = (uintptr_t)arg;
  (void)now;
  int rv = dlcp_sim_net_set_link(net, (uint32_t)(code >> 1), (code & 1) != 0);
  if (rv != 0) {
    dlcp_sim_engine_fail(net->engine, rv);
  }
}

void dlcp_sim_net_schedule_link(dlcp_sim_net *net, uint32_t port, bool up,
                                dlcp_sim_ps at) {
  uintptr_t code = ((uintptr_t)port << 1) | (up ? 1u : 0u);
  dlcp_sim_engine_at_cold(net->engine, at, link_event, net, (void *)code);
}
