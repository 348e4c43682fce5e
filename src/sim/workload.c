/*
 * workload.c: turning workload descriptions into flows.
 *
 * Explicit flows map one to one.  An incast adds one flow per sender to a
 * common receiver; unlisted senders are drawn with a seeded Fisher-Yates
 * shuffle, so the seed decides who sends.  A parameter-server job adds,
 * per iteration, a push flow from every worker to every server and a pull
 * flow back, chained by barriers: server s's pulls wait for all pushes to
 * s; worker w's next pushes wait for all pulls to w plus the compute time.
 * A PS job may instead follow a training profile (per-tensor partitions
 * pushed as backward propagation produces them).  Background traffic
 * draws Poisson flows from a published flow-size distribution.  Flow ids
 * follow creation order, which is what makes results reproducible.
 */
#include <errno.h>
#include <math.h>
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
  flow->expect_next = DLCP_SIM_NONE;
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
  b[sim->nbarriers] = (dlcp_sim_barrier){remaining, delay, 0, 0, 0};
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
      snprintf(err, errlen, "%s: field '%s.src': expected a host name or an "
               "index in 0..%u (the topology has %u hosts), got '%s'",
               s->where, s->field, net->nhosts - 1, net->nhosts, s->src);
      return DLCP_ERR_CONFIG;
    }
    if (dst == DLCP_SIM_NONE) {
      snprintf(err, errlen, "%s: field '%s.dst': expected a host name or an "
               "index in 0..%u (the topology has %u hosts), got '%s'",
               s->where, s->field, net->nhosts - 1, net->nhosts, s->dst);
      return DLCP_ERR_CONFIG;
    }
    if (dst == src) {
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
    if (s->path != DLCP_SIM_PATH_ANY) {
      sim->flows[id].path = s->path;
      sim->flows[id].path_pinned = true;
    }
  }
  return 0;
}

static int build_incast(dlcp_sim *sim, const dlcp_sim_incast_spec *s,
                        dlcp_rng *rng, char *err, size_t errlen) {
  const dlcp_sim_net *net = &sim->net;
  uint32_t rcv = dlcp_sim_host_lookup(net, s->receiver);
  if (rcv == DLCP_SIM_NONE) {
    snprintf(err, errlen, "%s: field '%s.receiver': expected a host name or "
             "an index in 0..%u (the topology has %u hosts), got '%s'",
             s->where, s->field, net->nhosts - 1, net->nhosts, s->receiver);
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

/* A profile's partitions in the order backward propagation produces them
 * (last tensor first): sizes, when each is ready after the start of the
 * iteration's forward pass, and how much of the forward pass is left
 * from the start of its tensor's layer (forward_overlap). */
typedef struct ps_parts {
  uint32_t n;
  uint64_t *bytes;
  dlcp_sim_ps *ready;
  dlcp_sim_ps *fwd_left;
  uint8_t *prio;
  uint32_t *server; /* index into the job's servers */
} ps_parts;

/* Assigns the partitions to servers in the order they are produced:
 * round-robin, or each to the server with the fewest bytes so far (the
 * lowest index among equals). */
static int ps_place(const dlcp_sim *sim, const dlcp_sim_ps_spec *s,
                    ps_parts *p) {
  uint32_t S = s->servers;
  if (!s->balanced_placement) {
    for (uint32_t c = 0; c < p->n; c++) {
      p->server[c] = c % S;
    }
    return 0;
  }
  uint64_t *load = sim->mem->calloc(S, sizeof(*load), sim->mem->user);
  if (!load) {
    return DLCP_ERR_NOMEM;
  }
  for (uint32_t c = 0; c < p->n; c++) {
    uint32_t best = 0;
    for (uint32_t k = 1; k < S; k++) {
      if (load[k] < load[best]) {
        best = k;
      }
    }
    load[best] += p->bytes[c];
    p->server[c] = best;
  }
  sim->mem->free(load, sim->mem->user);
  return 0;
}

static int ps_partition(const dlcp_sim *sim, const dlcp_sim_ps_spec *s,
                        ps_parts *p) {
  uint64_t P = s->partition_bytes ? s->partition_bytes : s->model_bytes;
  uint64_t n = 0;
  for (uint32_t t = 0; t < s->ntensors; t++) {
    n += (s->tensor_bytes[t] + P - 1) / P;
  }
  if (n > UINT32_MAX / 2) {
    return DLCP_ERR_NOMEM;
  }
  p->n = (uint32_t)n;
  p->bytes = sim->mem->malloc(n * sizeof(*p->bytes), sim->mem->user);
  p->ready = sim->mem->malloc(n * sizeof(*p->ready), sim->mem->user);
  p->fwd_left = sim->mem->malloc(n * sizeof(*p->fwd_left), sim->mem->user);
  p->prio = sim->mem->malloc(n * sizeof(*p->prio), sim->mem->user);
  p->server = sim->mem->malloc(n * sizeof(*p->server), sim->mem->user);
  if (!p->bytes || !p->ready || !p->fwd_left || !p->prio || !p->server) {
    return DLCP_ERR_NOMEM;
  }
  double bwd_total = 0;
  for (uint32_t t = 0; t < s->ntensors; t++) {
    bwd_total += (double)s->tensor_bwd_ps[t];
  }
  uint32_t last = sim->cfg.sw.nqueues - 1;
  dlcp_sim_ps ready = s->forward_ps;
  uint32_t c = 0;
  for (uint32_t t = s->ntensors; t-- > 0;) {
    ready += s->tensor_bwd_ps[t];
    /* Tensors t.. take the share of the forward pass that they take of
     * the backward pass (all of it without backward times). */
    dlcp_sim_ps fwd_left =
        bwd_total > 0 ? (dlcp_sim_ps)llround((double)s->forward_ps *
                                             (double)(ready - s->forward_ps) /
                                             bwd_total)
                      : s->forward_ps;
    uint64_t q = s->prio + (uint64_t)t * s->layer_priorities / s->ntensors;
    for (uint64_t left = s->tensor_bytes[t]; left > 0;) {
      uint64_t b = left < P ? left : P;
      p->bytes[c] = b;
      p->prio[c] = (uint8_t)(q < last ? q : last);
      p->fwd_left[c] = fwd_left;
      p->ready[c++] = ready;
      left -= b;
    }
  }
  return ps_place(sim, s, p);
}

/*
 * Receives posted ahead (dlcp_sim_ps_spec.post_ahead): a server learns of
 * a worker's push of a partition when the job starts (the first) or when
 * it starts that partition's pull to the worker (the next iteration's).
 * |pull| holds, per (worker, partition) pair, the last pull added
 * (DLCP_SIM_NONE before the first).
 */
typedef struct ps_links {
  uint32_t *pull;
} ps_links;

static int ps_links_init(dlcp_sim *sim, ps_links *l, uint32_t workers,
                         uint32_t parts) {
  size_t n = (size_t)workers * parts;
  l->pull = sim->mem->malloc(n * sizeof(*l->pull), sim->mem->user);
  if (!l->pull) {
    return DLCP_ERR_NOMEM;
  }
  for (size_t i = 0; i < n; i++) {
    l->pull[i] = DLCP_SIM_NONE;
  }
  return 0;
}

static void ps_links_free(dlcp_sim *sim, ps_links *l) {
  if (l->pull) {
    sim->mem->free(l->pull, sim->mem->user);
  }
  l->pull = NULL;
}

/* A push of pair |k| was added: a first push, or the pull before it
 * leads to it. */
static void ps_link_push(dlcp_sim *sim, const dlcp_sim_ps_spec *s,
                         const ps_links *l, size_t k, uint32_t push) {
  if (!s->post_ahead) {
    return;
  }
  if (l->pull[k] == DLCP_SIM_NONE) {
    sim->flows[push].expect_at_start = true;
  } else {
    sim->flows[l->pull[k]].expect_next = push;
  }
}

/*
 * PS driven by a training profile (see dlcp_sim_ps_spec): per iteration
 * and partition c, every worker pushes c to server c mod S once its layer's
 * backward pass is done; server c mod S pulls c back to every worker when
 * it has all W pushes; a worker's next iteration starts (forward pass)
 * when it has every partition.
 */
static int build_ps_profile(dlcp_sim *sim, const dlcp_sim_ps_spec *s,
                            const uint32_t *server, const uint32_t *worker) {
  uint32_t W = s->workers;
  ps_parts parts = {0, NULL, NULL, NULL, NULL, NULL};
  int rv = ps_partition(sim, s, &parts);
  uint32_t prev_worker_barrier0 = DLCP_SIM_NONE;
  ps_links links = {NULL};
  if (rv == 0) {
    rv = ps_links_init(sim, &links, W, parts.n);
  }
  for (uint32_t it = 0; it < s->iterations && rv == 0; it++) {
    uint32_t part_barrier0 = sim->nbarriers;
    for (uint32_t c = 0; c < parts.n && rv == 0; c++) {
      rv = add_barrier(sim, W, 0) == DLCP_SIM_NONE ? DLCP_ERR_NOMEM : 0;
    }
    uint32_t worker_barrier0 = sim->nbarriers;
    for (uint32_t i = 0; i < W && rv == 0; i++) {
      rv = add_barrier(sim, parts.n, 0) == DLCP_SIM_NONE ? DLCP_ERR_NOMEM : 0;
    }
    for (uint32_t i = 0; i < W && rv == 0; i++) {
      if (it > 0) {
        sim->barriers[prev_worker_barrier0 + i].first = sim->nrelease;
      }
      for (uint32_t c = 0; c < parts.n && rv == 0; c++) {
        uint32_t id = dlcp_sim_flow_add(
            sim, worker[i], server[parts.server[c]], parts.bytes[c],
            it == 0 ? s->start_ps + parts.ready[c] : DLCP_SIM_PS_NEVER,
            parts.prio[c], DLCP_SIM_GROUP_PS_PUSH);
        if (id == DLCP_SIM_NONE) {
          rv = DLCP_ERR_NOMEM;
          break;
        }
        dlcp_sim_flow *f = &sim->flows[id];
        f->iteration = it;
        f->barrier = part_barrier0 + c;
        /* With forward_overlap the worker's barrier is due when its
         * forward pass ends (the pulls' barrier_offset_ps), so only the
         * backward pass is left. */
        f->release_offset_ps = s->forward_overlap
                                   ? parts.ready[c] - s->forward_ps
                                   : parts.ready[c];
        ps_link_push(sim, s, &links, i * parts.n + c, id);
        if (it > 0) {
          rv = add_release(sim, id);
          sim->barriers[prev_worker_barrier0 + i].count++;
        }
      }
    }
    for (uint32_t c = 0; c < parts.n && rv == 0; c++) {
      sim->barriers[part_barrier0 + c].first = sim->nrelease;
      for (uint32_t i = 0; i < W && rv == 0; i++) {
        uint32_t id = dlcp_sim_flow_add(sim, server[parts.server[c]],
                                        worker[i], parts.bytes[c],
                                        DLCP_SIM_PS_NEVER,
                                        parts.prio[c], DLCP_SIM_GROUP_PS_PULL);
        if (id == DLCP_SIM_NONE) {
          rv = DLCP_ERR_NOMEM;
          break;
        }
        sim->flows[id].iteration = it;
        sim->flows[id].barrier = worker_barrier0 + i;
        if (s->forward_overlap) {
          sim->flows[id].barrier_offset_ps = parts.fwd_left[c];
        }
        links.pull[i * parts.n + c] = id;
        rv = add_release(sim, id);
        sim->barriers[part_barrier0 + c].count++;
      }
    }
    prev_worker_barrier0 = worker_barrier0;
  }
  ps_links_free(sim, &links);
  sim->mem->free(parts.bytes, sim->mem->user);
  sim->mem->free(parts.ready, sim->mem->user);
  sim->mem->free(parts.fwd_left, sim->mem->user);
  sim->mem->free(parts.prio, sim->mem->user);
  sim->mem->free(parts.server, sim->mem->user);
  return rv;
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
  ps_links links = {NULL};
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
  if (s->ntensors > 0) {
    rv = build_ps_profile(sim, s, server, worker);
    goto iterations;
  }
  uint64_t base = s->model_bytes / S, extra = s->model_bytes % S;
  /* Barrier ids of the previous iteration's per-worker "all pulls in". */
  uint32_t prev_worker_barrier0 = DLCP_SIM_NONE;
  rv = ps_links_init(sim, &links, W, S);
  if (rv != 0) {
    goto done;
  }
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
        ps_link_push(sim, s, &links, i * S + j, id);
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
        links.pull[i * S + j] = id;
        rv = add_release(sim, id);
        if (rv != 0) {
          goto done;
        }
        sim->barriers[server_barrier0 + j].count++;
      }
    }
    prev_worker_barrier0 = worker_barrier0;
  }
iterations:
  if (rv == 0 && s->iterations > sim->ps_iterations) {
    sim->ps_iterations = s->iterations;
  }
done:
  ps_links_free(sim, &links);
  sim->mem->free(order, sim->mem->user);
  return rv;
}

/* Published flow-size CDFs in bytes, linearly interpolated: web search
 * (DCTCP, Alizadeh et al. 2010) and data mining (VL2, Greenberg et al.
 * 2009), as used by pFabric, PIAS and NDP (the DCTCP_CDF and VL2_CDF files
 * of github.com/datacenter/empirical-traffic-gen). */
typedef struct cdf_point {
  double bytes, p;
} cdf_point;

static const cdf_point websearch_cdf[] = {
    {0, 0},        {10000, 0.15}, {20000, 0.2},  {30000, 0.3},
    {50000, 0.4},  {80000, 0.53}, {200000, 0.6}, {1e6, 0.7},
    {2e6, 0.8},    {5e6, 0.9},    {1e7, 0.97},   {3e7, 1.0}};
static const cdf_point datamining_cdf[] = {
    {0, 0},      {180, 0.1},    {216, 0.2},  {560, 0.3},   {900, 0.4},
    {1100, 0.5}, {1870, 0.6},   {3160, 0.7}, {10000, 0.8}, {400000, 0.9},
    {3.16e6, 0.95}, {1e8, 0.98}, {1e9, 1.0}};

static const cdf_point *cdf_of(dlcp_sim_flow_dist d, size_t *n) {
  if (d == DLCP_SIM_DIST_DATAMINING) {
    *n = sizeof(datamining_cdf) / sizeof(datamining_cdf[0]);
    return datamining_cdf;
  }
  *n = sizeof(websearch_cdf) / sizeof(websearch_cdf[0]);
  return websearch_cdf;
}

static double cdf_mean(const cdf_point *c, size_t n) {
  double m = 0;
  for (size_t i = 1; i < n; i++) {
    m += (c[i].p - c[i - 1].p) * (c[i].bytes + c[i - 1].bytes) / 2.0;
  }
  return m;
}

static uint64_t cdf_draw(const cdf_point *c, size_t n, double u) {
  size_t i = 1;
  while (i < n - 1 && u > c[i].p) {
    i++;
  }
  double span = c[i].p - c[i - 1].p;
  double x = c[i - 1].bytes +
             (span > 0 ? (u - c[i - 1].p) / span : 0.0) *
                 (c[i].bytes - c[i - 1].bytes);
  return x < 1.0 ? 1 : (uint64_t)(x + 0.5);
}

/* Poisson arrivals at load x hosts x host rate / mean size, uniform
 * distinct (src, dst) pairs. */
static int build_background(dlcp_sim *sim, const dlcp_sim_background_spec *b,
                            dlcp_rng *rng, char *err, size_t errlen) {
  uint32_t n = sim->net.nhosts;
  if (n < 2) {
    snprintf(err, errlen, "%s: field '%s': expected at least 2 hosts",
             b->where, b->field);
    return DLCP_ERR_CONFIG;
  }
  int rv = check_prio(sim, b->prio, b->where, b->field, err, errlen);
  if (rv != 0) {
    return rv;
  }
  size_t np;
  const cdf_point *cdf = cdf_of(b->dist, &np);
  double per_s = b->load * (double)n * (double)sim->cfg.topo.host_rate_bps /
                 (8.0 * cdf_mean(cdf, np));
  double t = 0, end = (double)b->duration_ps;
  for (;;) {
    t += -log(1.0 - dlcp_rng_unit(rng)) / per_s * 1e12;
    if (t >= end) {
      return 0;
    }
    uint32_t src = (uint32_t)dlcp_rng_below(rng, n);
    uint32_t dst = (uint32_t)dlcp_rng_below(rng, n - 1);
    dst += dst >= src;
    uint64_t size = cdf_draw(cdf, np, dlcp_rng_unit(rng));
    if (dlcp_sim_flow_add(sim, src, dst, size,
                          b->start_ps + (dlcp_sim_ps)t, b->prio,
                          DLCP_SIM_GROUP_BACKGROUND) == DLCP_SIM_NONE) {
      return DLCP_ERR_NOMEM;
    }
  }
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
  for (uint32_t i = 0; i < sim->cfg.nbackgrounds && rv == 0; i++) {
    rv = build_background(sim, &sim->cfg.backgrounds[i], &rng, err, errlen);
  }
  if (rv == 0) {
    rv = dlcp_sim_coll_build(sim, err, errlen);
  }
  return rv;
}
