/*
 * workload.c: turning workload descriptions into flows.
 *
 * Explicit flows map one to one.  An incast adds one flow per sender to a
 * common receiver; unlisted senders are drawn with a seeded Fisher-Yates
 * shuffle, so the seed decides who sends.  A parameter-server job adds,
 * per iteration, a push flow from every worker to every server and a pull
 * flow back, chained by barriers: server s's pulls wait for all pushes to
 * s; worker w's next pushes wait for all pulls to w plus the compute time.
 * Flow ids follow creation order, which is what makes results
 * reproducible.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/sim.h"

uint32_t dlcp_sim_host_lookup(const dlcp_sim_net *net, const char *name) {
  uint32_t node = dlcp_sim_net_find_node(net, name);
  if (node != DLCP_SIM_NONE) {
    return net->nodes[node].host;
  }
  /* A bare number is a host index. */
  if (name[0] >= '0' && name[0] <= '9') {
    char *end;
    errno = 0;
    unsigned long v = strtoul(name, &end, 10);
    if (errno == 0 && *end == '\0' && v < net->nhosts) {
      return (uint32_t)v;
    }
  }
  return DLCP_SIM_NONE;
}

static void *grow(const dlcp_mem *mem, void *ptr, uint32_t *cap,
                  uint32_t need, size_t elem) {
  if (need <= *cap) {
    return ptr;
  }
  uint32_t ncap = *cap ? *cap : 64;
  while (ncap < need) {
    ncap *= 2;
  }
  void *p = mem->realloc(ptr, (size_t)ncap * elem, mem->user);
  if (p) {
    *cap = ncap;
  }
  return p;
}

uint32_t dlcp_sim_flow_add(dlcp_sim *sim, uint32_t src, uint32_t dst,
                           uint64_t size, dlcp_sim_ps release, uint32_t prio,
                           dlcp_sim_flow_group group) {
  dlcp_sim_flow *f = grow(sim->mem, sim->flows, &sim->flows_cap,
                          sim->nflows + 1, sizeof(*f));
  if (!f) {
    return DLCP_SIM_NONE;
  }
  sim->flows = f;
  dlcp_sim_flow *flow = &f[sim->nflows];
  memset(flow, 0, sizeof(*flow));
  flow->id = sim->nflows;
  flow->src = src;
  flow->dst = dst;
  flow->size_bytes = size;
  flow->prio = prio;
  flow->lb = (uint8_t)sim->cfg.transport.lb;
  flow->group = group;
  flow->release_ps = release;
  flow->start_ps = DLCP_SIM_PS_NEVER;
  flow->finish_ps = DLCP_SIM_PS_NEVER;
  flow->rx_done_ps = DLCP_SIM_PS_NEVER;
  flow->barrier = DLCP_SIM_NONE;
  flow->xfer = DLCP_SIM_NONE;
  flow->loss_bound = -1.0;
  return sim->nflows++;
}

static uint32_t add_barrier(dlcp_sim *sim, uint32_t remaining,
                            dlcp_sim_ps delay) {
  dlcp_sim_barrier *b = grow(sim->mem, sim->barriers, &sim->barriers_cap,
                             sim->nbarriers + 1, sizeof(*b));
  if (!b) {
    return DLCP_SIM_NONE;
  }
  sim->barriers = b;
  b[sim->nbarriers] = (dlcp_sim_barrier){remaining, delay, 0, 0};
  return sim->nbarriers++;
}

static int add_release(dlcp_sim *sim, uint32_t flow) {
  uint32_t *r = grow(sim->mem, sim->release, &sim->release_cap,
                     sim->nrelease + 1, sizeof(*r));
  if (!r) {
    return DLCP_ERR_NOMEM;
  }
  sim->release = r;
  sim->release[sim->nrelease++] = flow;
  return 0;
}

static int check_prio(const dlcp_sim *sim, uint32_t prio, const char *where,
                      const char *field, char *err, size_t errlen) {
  if (prio >= sim->cfg.sw.nqueues) {
    snprintf(err, errlen, "%s: field '%s.priority': expected an integer in "
             "[0, %u] (switch.queues - 1)", where, field,
             sim->cfg.sw.nqueues - 1);
    return DLCP_ERR_CONFIG;
  }
  return 0;
}

static int build_explicit(dlcp_sim *sim, char *err, size_t errlen) {
  const dlcp_sim_net *net = &sim->net;
  for (uint32_t i = 0; i < sim->cfg.nflows; i++) {
    const dlcp_sim_flow_spec *s = &sim->cfg.flows[i];
    uint32_t src = dlcp_sim_host_lookup(net, s->src);
    uint32_t dst = dlcp_sim_host_lookup(net, s->dst);
    if (src == DLCP_SIM_NONE) {
      snprintf(err, errlen, "%s: field '%s.src': expected a host name or index, "
               "got '%s'", s->where, s->field, s->src);
      return DLCP_ERR_CONFIG;
    }
    if (dst == DLCP_SIM_NONE || dst == src) {
      snprintf(err, errlen, "%s: field '%s.dst': expected a host other than "
               "src, got '%s'", s->where, s->field, s->dst);
      return DLCP_ERR_CONFIG;
    }
    if (s->size_bytes == 0) {
      snprintf(err, errlen, "%s: field '%s.size': expected > 0 bytes", s->where,
               s->field);
      return DLCP_ERR_CONFIG;
    }
    int rv = check_prio(sim, s->prio, s->where, s->field, err, errlen);
    if (rv != 0) {
      return rv;
    }
    uint32_t id = dlcp_sim_flow_add(sim, src, dst, s->size_bytes, s->start_ps, s->prio,
                           DLCP_SIM_GROUP_EXPLICIT);
    if (id == DLCP_SIM_NONE) {
      return DLCP_ERR_NOMEM;
    }
    if (s->lb >= 0) {
      sim->flows[id].lb = (uint8_t)s->lb;
    }
    sim->flows[id].path = s->path;
  }
  return 0;
}

static int build_incast(dlcp_sim *sim, const dlcp_sim_incast_spec *s,
                        dlcp_rng *rng, char *err, size_t errlen) {
  const dlcp_sim_net *net = &sim->net;
  uint32_t rcv = dlcp_sim_host_lookup(net, s->receiver);
  if (rcv == DLCP_SIM_NONE) {
    snprintf(err, errlen, "%s: field '%s.receiver': expected a host name or "
             "index, got '%s'", s->where, s->field, s->receiver);
    return DLCP_ERR_CONFIG;
  }
  int rv = check_prio(sim, s->prio, s->where, s->field, err, errlen);
  if (rv != 0) {
    return rv;
  }
  if (s->size_bytes == 0) {
    snprintf(err, errlen, "%s: field '%s.size': expected > 0 bytes", s->where,
               s->field);
    return DLCP_ERR_CONFIG;
  }
  uint32_t n = s->nsenders_listed ? s->nsenders_listed : s->nsenders;
  if (n == 0 || n > net->nhosts - 1) {
    snprintf(err, errlen, "%s: field '%s.senders': expected 1..%u senders",
             s->where, s->field, net->nhosts - 1);
    return DLCP_ERR_CONFIG;
  }
  uint32_t *cand = sim->mem->malloc(net->nhosts * sizeof(*cand),
                                    sim->mem->user);
  if (!cand) {
    return DLCP_ERR_NOMEM;
  }
  if (s->nsenders_listed) {
    for (uint32_t i = 0; i < n; i++) {
      cand[i] = dlcp_sim_host_lookup(net, s->senders[i]);
      if (cand[i] == DLCP_SIM_NONE || cand[i] == rcv) {
        snprintf(err, errlen, "%s: field '%s.senders': expected hosts other "
                 "than the receiver, got '%s'", s->where, s->field,
                 s->senders[i]);
        sim->mem->free(cand, sim->mem->user);
        return DLCP_ERR_CONFIG;
      }
    }
  } else {
    uint32_t m = 0;
    for (uint32_t h = 0; h < net->nhosts; h++) {
      if (h != rcv) {
        cand[m++] = h;
      }
    }
    /* Partial Fisher-Yates: the first n slots become a uniform sample. */
    for (uint32_t i = 0; i < n; i++) {
      uint32_t j = i + (uint32_t)dlcp_rng_below(rng, m - i);
      uint32_t t = cand[i];
      cand[i] = cand[j];
      cand[j] = t;
    }
  }
  rv = 0;
  for (uint32_t i = 0; i < n && rv == 0; i++) {
    if (dlcp_sim_flow_add(sim, cand[i], rcv, s->size_bytes, s->start_ps, s->prio,
                 DLCP_SIM_GROUP_INCAST) == DLCP_SIM_NONE) {
      rv = DLCP_ERR_NOMEM;
    }
  }
  sim->mem->free(cand, sim->mem->user);
  return rv;
}

/* Hosts in rack-major round-robin order: rack 0's first host, rack 1's
 * first host, ..., then every rack's second host, and so on. */
static int ps_host_order(const dlcp_sim *sim, uint32_t *order) {
  const dlcp_sim_net *net = &sim->net;
  uint32_t n = net->nhosts;
  uint32_t *rack = sim->mem->malloc(n * sizeof(*rack), sim->mem->user);
  uint32_t *rank = sim->mem->malloc(n * sizeof(*rank), sim->mem->user);
  if (!rack || !rank) {
    sim->mem->free(rack, sim->mem->user);
    sim->mem->free(rank, sim->mem->user);
    return DLCP_ERR_NOMEM;
  }
  /* rank[h] = how many hosts of h's rack come before h. */
  for (uint32_t h = 0; h < n; h++) {
    rack[h] = dlcp_sim_net_host_rack(net, h);
    rank[h] = 0;
    for (uint32_t g = 0; g < h; g++) {
      rank[h] += rack[g] == rack[h];
    }
  }
  /* Stable selection sort by (rank, rack, host): n is at most a few
   * thousand and this runs once. */
  for (uint32_t i = 0; i < n; i++) {
    order[i] = i;
  }
  for (uint32_t i = 0; i < n; i++) {
    uint32_t best = i;
    for (uint32_t j = i + 1; j < n; j++) {
      uint32_t a = order[j], b = order[best];
      if (rank[a] < rank[b] ||
          (rank[a] == rank[b] &&
           (rack[a] < rack[b] || (rack[a] == rack[b] && a < b)))) {
        best = j;
      }
    }
    uint32_t t = order[i];
    order[i] = order[best];
    order[best] = t;
  }
  sim->mem->free(rack, sim->mem->user);
  sim->mem->free(rank, sim->mem->user);
  return 0;
}

static int build_ps(dlcp_sim *sim, const dlcp_sim_ps_spec *s, char *err,
                    size_t errlen) {
  const dlcp_sim_net *net = &sim->net;
  uint32_t W = s->workers, S = s->servers;
  if (W == 0 || S == 0 || (uint64_t)W + S > net->nhosts) {
    snprintf(err, errlen, "%s: field '%s.%s': expected workers >= 1, "
             "servers >= 1 and workers + servers <= %u hosts", s->where,
             s->field, W == 0 ? "workers" : "servers", net->nhosts);
    return DLCP_ERR_CONFIG;
  }
  if (s->model_bytes < S) {
    snprintf(err, errlen, "%s: field '%s.model_size': expected at least one "
             "byte per server", s->where, s->field);
    return DLCP_ERR_CONFIG;
  }
  if (s->iterations == 0) {
    snprintf(err, errlen, "%s: field '%s.iterations': expected >= 1",
             s->where, s->field);
    return DLCP_ERR_CONFIG;
  }
  int rv = check_prio(sim, s->prio, s->where, s->field, err, errlen);
  if (rv != 0) {
    return rv;
  }
  uint32_t *order = sim->mem->malloc(net->nhosts * sizeof(*order),
                                     sim->mem->user);
  if (!order) {
    return DLCP_ERR_NOMEM;
  }
  rv = ps_host_order(sim, order);
  if (rv != 0) {
    sim->mem->free(order, sim->mem->user);
    return rv;
  }
  const uint32_t *server = order;
  const uint32_t *worker = order + S;
  uint64_t base = s->model_bytes / S, extra = s->model_bytes % S;
  /* Barrier ids of the previous iteration's per-worker "all pulls in". */
  uint32_t prev_worker_barrier0 = DLCP_SIM_NONE;
  for (uint32_t it = 0; it < s->iterations && rv == 0; it++) {
    uint32_t server_barrier0 = sim->nbarriers;
    for (uint32_t j = 0; j < S; j++) {
      if (add_barrier(sim, W, 0) == DLCP_SIM_NONE) {
        rv = DLCP_ERR_NOMEM;
        goto done;
      }
    }
    uint32_t worker_barrier0 = sim->nbarriers;
    for (uint32_t i = 0; i < W; i++) {
      if (add_barrier(sim, S, s->compute_ps) == DLCP_SIM_NONE) {
        rv = DLCP_ERR_NOMEM;
        goto done;
      }
    }
    /* Pushes, worker-major so that one worker's pushes are contiguous and
     * its barrier releases them as one range. */
    for (uint32_t i = 0; i < W; i++) {
      if (it > 0) {
        sim->barriers[prev_worker_barrier0 + i].first = sim->nrelease;
      }
      for (uint32_t j = 0; j < S; j++) {
        uint64_t shard = base + (j < extra ? 1 : 0);
        uint32_t id = dlcp_sim_flow_add(sim, worker[i], server[j], shard,
                               it == 0 ? s->start_ps : DLCP_SIM_PS_NEVER,
                               s->prio, DLCP_SIM_GROUP_PS_PUSH);
        if (id == DLCP_SIM_NONE) {
          rv = DLCP_ERR_NOMEM;
          goto done;
        }
        sim->flows[id].iteration = it;
        sim->flows[id].barrier = server_barrier0 + j;
        if (it > 0) {
          rv = add_release(sim, id);
          if (rv != 0) {
            goto done;
          }
          sim->barriers[prev_worker_barrier0 + i].count++;
        }
      }
    }
    /* Pulls, server-major for the same reason. */
    for (uint32_t j = 0; j < S; j++) {
      uint64_t shard = base + (j < extra ? 1 : 0);
      sim->barriers[server_barrier0 + j].first = sim->nrelease;
      for (uint32_t i = 0; i < W; i++) {
        uint32_t id = dlcp_sim_flow_add(sim, server[j], worker[i], shard,
                               DLCP_SIM_PS_NEVER, s->prio,
                               DLCP_SIM_GROUP_PS_PULL);
        if (id == DLCP_SIM_NONE) {
          rv = DLCP_ERR_NOMEM;
          goto done;
        }
        sim->flows[id].iteration = it;
        sim->flows[id].barrier = worker_barrier0 + i;
        rv = add_release(sim, id);
        if (rv != 0) {
          goto done;
        }
        sim->barriers[server_barrier0 + j].count++;
      }
    }
    prev_worker_barrier0 = worker_barrier0;
  }
  if (s->iterations > sim->ps_iterations) {
    sim->ps_iterations = s->iterations;
  }
done:
  sim->mem->free(order, sim->mem->user);
  return rv;
}

int dlcp_sim_workload_build(dlcp_sim *sim, char *err, size_t errlen) {
  dlcp_rng rng;
  dlcp_rng_seed(&rng, sim->cfg.seed ^ 0x1CA57ull);
  int rv = build_explicit(sim, err, errlen);
  for (uint32_t i = 0; i < sim->cfg.nincasts && rv == 0; i++) {
    rv = build_incast(sim, &sim->cfg.incasts[i], &rng, err, errlen);
  }
  for (uint32_t i = 0; i < sim->cfg.nps && rv == 0; i++) {
    rv = build_ps(sim, &sim->cfg.ps[i], err, errlen);
  }
  if (rv == 0) {
    rv = dlcp_sim_coll_build(sim, err, errlen);
  }
  return rv;
}
