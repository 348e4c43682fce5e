/*
 * sim.c: assembling and running a simulation.
 *
 * dlcp_sim_new turns a configuration into a running world in a fixed
 * order (network, routes, per-host transports, faults, workload), so that
 * the same configuration always creates the same objects with the same
 * ids.  Flows with a known start time are scheduled up front; flows that
 * wait on a barrier (PS pulls, next iterations) are scheduled when the
 * barrier's last flow finishes.  The run stops when every flow has
 * finished: leftover timers and in-flight ACKs cannot change any result.
 */
#include "sim/sim.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/rate.h"

void dlcp_sim_config_default(dlcp_sim_config *cfg) {
  memset(cfg, 0, sizeof(*cfg));
  cfg->seed = 1;
  cfg->topo.kind = DLCP_SIM_TOPO_LEAF_SPINE;
  cfg->topo.hosts_per_tor = 2;
  cfg->topo.tors = 2;
  cfg->topo.spines = 2;
  cfg->topo.k = 4;
  cfg->topo.host_rate_bps = dlcp_sim_speed_from_gbps(100);
  cfg->topo.fabric_rate_bps = dlcp_sim_speed_from_gbps(100);
  cfg->topo.link_delay_ps = dlcp_sim_time_from_us(3);
  cfg->sw.nqueues = 8;
  cfg->sw.port_buffer_bytes = 512000;
  cfg->sw.shared_buffer_bytes = 0;
  cfg->sw.dt_alpha = 1.0;
  for (uint32_t i = 0; i < DLCP_SIM_MAX_QUEUES; i++) {
    cfg->sw.ecn_threshold_bytes[i] = 65ull * 1500;
  }
  cfg->sw.trimming = false;
  cfg->sw.trim_bytes = 64;
  cfg->host.nic_buffer_bytes = 8000000;
  cfg->host.nic_ecn_threshold_bytes = UINT64_MAX;
  cfg->transport.kind = DLCP_SIM_TRANSPORT_DCTCP;
  cfg->transport.mss_bytes = 1460;
  cfg->transport.header_bytes = 40;
  cfg->transport.ack_bytes = 64;
  cfg->transport.lb = DLCP_SIM_LB_ECMP;
  dlcp_sim_dctcp_config *d = &cfg->transport.dctcp;
  d->rto_min_ps = dlcp_sim_time_from_ms(1);
  d->rto_init_ps = dlcp_sim_time_from_ms(1);
  d->rto_max_ps = dlcp_sim_time_from_ms(200);
  d->init_cwnd_pkts = 20;
  d->dupack_threshold = 3;
  d->delayed_ack = false;
  d->cwr_fast_retransmit = true;
  d->delayed_ack_ps = dlcp_sim_time_from_us(40);
  d->g = 1.0 / 16.0;
  d->alpha_init = 1.0;
  d->persistent = true;
  dlcp_sim_mlt_config *m = &cfg->transport.mlt;
  m->loss_bound = 0.0;
  m->npaths = 4;
  m->path_burst = 1;
  m->eager_bytes = 0;
  m->segment_bytes = 0;
  m->importance = DLCP_SIM_MLT_IMPORTANT_ALL;
  m->layers = 0;
  m->t_low_ps = dlcp_sim_time_from_ns(12500);
  m->t_high_ps = dlcp_sim_time_from_ns(125000);
  m->queue_pkts = DLCP_RATE_DEFAULT_QUEUE_PKTS;
  m->ack_every = 10;
  m->burst_pkts = 16;
  m->probe_timeout_ps = dlcp_sim_time_from_ms(1);
  m->min_drain_ps = dlcp_sim_time_from_us(20);
  /* PIAS: a geometric ladder from 10 KB (x4 per queue); PIAS derives its
   * thresholds from the flow-size distribution, and the experiments set
   * them from their workload's (scripts/results). */
  cfg->transport.pias.nthresholds = DLCP_SIM_MAX_QUEUES - 1;
  for (uint32_t i = 0; i < DLCP_SIM_MAX_QUEUES - 1; i++) {
    cfg->transport.pias.thresholds_bytes[i] = 10000ull << (2 * i);
  }
  cfg->transport.pfabric.probe_after = 5;
  cfg->stop_ps = 10ull * DLCP_SIM_PS_PER_S;
  cfg->agg.mem_bytes = 1u << 20;
  cfg->agg.block_elems = 64;
  cfg->agg.static_parts = 1;
  cfg->agg.queue_pkts = 1024;
  cfg->agg.resend_ps = dlcp_sim_time_from_ms(1);
  snprintf(cfg->name, sizeof(cfg->name), "default");
}

void dlcp_sim_config_free(dlcp_sim_config *cfg) {
  free(cfg->topo.nodes);
  free(cfg->topo.links);
  free(cfg->flows);
  for (uint32_t i = 0; i < cfg->nincasts; i++) {
    free(cfg->incasts[i].senders);
  }
  free(cfg->incasts);
  for (uint32_t i = 0; cfg->ps && i < cfg->nps; i++) {
    free(cfg->ps[i].tensor_bytes);
    free(cfg->ps[i].tensor_bwd_ps);
  }
  free(cfg->ps);
  for (uint32_t i = 0; cfg->colls && i < cfg->ncolls; i++) {
    free(cfg->colls[i].hosts);
    free(cfg->colls[i].stragglers);
  }
  free(cfg->colls);
  free(cfg->backgrounds);
  cfg->backgrounds = NULL;
  cfg->nbackgrounds = 0;
  free(cfg->faults);
  free(cfg->pcaps);
  cfg->pcaps = NULL;
  cfg->npcaps = 0;
  cfg->topo.nodes = NULL;
  cfg->topo.links = NULL;
  cfg->flows = NULL;
  cfg->incasts = NULL;
  cfg->ps = NULL;
  cfg->colls = NULL;
  cfg->faults = NULL;
  cfg->topo.nnodes = cfg->topo.nlinks = 0;
  cfg->nflows = cfg->nincasts = cfg->nps = cfg->ncolls = cfg->nfaults = 0;
}

int dlcp_sim_config_add_flow(dlcp_sim_config *cfg, const char *src,
                             const char *dst, uint64_t size_bytes,
                             dlcp_sim_ps start_ps, uint32_t prio) {
  dlcp_sim_flow_spec *f =
      realloc(cfg->flows, (cfg->nflows + 1) * sizeof(*cfg->flows));
  if (!f) {
    return DLCP_ERR_NOMEM;
  }
  cfg->flows = f;
  dlcp_sim_flow_spec *s = &f[cfg->nflows++];
  memset(s, 0, sizeof(*s));
  snprintf(s->src, sizeof(s->src), "%s", src);
  snprintf(s->dst, sizeof(s->dst), "%s", dst);
  s->size_bytes = size_bytes;
  s->start_ps = start_ps;
  s->prio = prio;
  s->lb = -1;
  s->path = DLCP_SIM_PATH_ANY;
  snprintf(s->where, sizeof(s->where), "flows[%u]", cfg->nflows - 1);
  snprintf(s->field, sizeof(s->field), "workload.flows[%u]", cfg->nflows - 1);
  return 0;
}

int dlcp_sim_config_add_fault(dlcp_sim_config *cfg, dlcp_sim_fault_kind kind,
                              const char *a, const char *b, double loss,
                              dlcp_sim_ps at_ps) {
  dlcp_sim_fault_spec *f =
      realloc(cfg->faults, (cfg->nfaults + 1) * sizeof(*cfg->faults));
  if (!f) {
    return DLCP_ERR_NOMEM;
  }
  cfg->faults = f;
  dlcp_sim_fault_spec *s = &f[cfg->nfaults++];
  memset(s, 0, sizeof(*s));
  s->kind = kind;
  snprintf(s->a, sizeof(s->a), "%s", a);
  snprintf(s->b, sizeof(s->b), "%s", b ? b : "");
  s->loss = loss;
  s->at_ps = at_ps;
  snprintf(s->where, sizeof(s->where), "faults[%u]", cfg->nfaults - 1);
  snprintf(s->field, sizeof(s->field), "faults[%u]", cfg->nfaults - 1);
  return 0;
}

dlcp_sim_packet *dlcp_sim_packet_new(dlcp_sim *sim) {
  dlcp_sim_packet *pkt = dlcp_sim_packet_alloc(&sim->pool);
  if (!pkt) {
    dlcp_sim_engine_fail(&sim->engine, DLCP_ERR_NOMEM);
  }
  return pkt;
}

void dlcp_sim_packet_drop(dlcp_sim *sim, dlcp_sim_packet *pkt) {
  dlcp_sim_packet_free(&sim->pool, pkt);
}

void dlcp_sim_send(dlcp_sim *sim, uint32_t host, dlcp_sim_packet *pkt,
                   dlcp_sim_ps now) {
  dlcp_sim_host_send(&sim->net, host, pkt, now);
}

static void conn_timer_fire(void *obj, dlcp_sim_ps now) {
  dlcp_sim_conn_timer *ct = obj;
  dlcp_sim *sim = ct->sim;
  sim->ops->on_timer(sim->host_state[ct->host], ct->conn, now);
}

void dlcp_sim_conn_timer_init(dlcp_sim_conn_timer *ct, dlcp_sim *sim,
                              uint32_t host, void *conn) {
  dlcp_sim_timer_init(&ct->timer, &sim->engine, conn_timer_fire, ct);
  ct->sim = sim;
  ct->host = host;
  ct->conn = conn;
}

static void host_rx(void *ctx, uint32_t host, dlcp_sim_packet *pkt,
                    dlcp_sim_ps now) {
  dlcp_sim *sim = ctx;
  if (pkt->kind == DLCP_SIM_PKT_NOTE) {
    dlcp_sim_coll_on_note(sim, host, pkt, now);
    return;
  }
  if (pkt->kind == DLCP_SIM_PKT_INA) {
    dlcp_sim_ina_on_packet(sim, host, pkt, now);
    return;
  }
  /* The transport validates the packet: MLT's control and ACK packets do
   * not name a flow. */
  sim->ops->on_packet(sim->host_state[host], pkt, now);
}

/* The receiver of |flow| learns that it will come, once. */
static void expect(dlcp_sim *sim, dlcp_sim_flow *flow, dlcp_sim_ps now) {
  if (flow->expected || flow->start_ps != DLCP_SIM_PS_NEVER ||
      !sim->ops->flow_expect) {
    return;
  }
  flow->expected = true;
  int rv = sim->ops->flow_expect(sim->host_state[flow->dst], flow, now);
  if (rv != 0) {
    dlcp_sim_engine_fail(&sim->engine, rv);
  }
}

static void expect_event(void *obj, void *arg, dlcp_sim_ps now) {
  dlcp_sim *sim = obj;
  expect(sim, &sim->flows[(uintptr_t)arg], now);
}

static void flow_start_event(void *obj, void *arg, dlcp_sim_ps now) {
  dlcp_sim *sim = obj;
  dlcp_sim_flow *flow = &sim->flows[(uintptr_t)arg];
  flow->start_ps = now;
  int rv = sim->ops->flow_start(sim->host_state[flow->src], flow, now);
  if (rv != 0) {
    dlcp_sim_engine_fail(&sim->engine, rv);
    return;
  }
  if (flow->expect_next != DLCP_SIM_NONE) {
    expect(sim, &sim->flows[flow->expect_next], now);
  }
}

void dlcp_sim_flow_start_now(dlcp_sim *sim, uint32_t id, dlcp_sim_ps now) {
  sim->flows[id].release_ps = now;
  flow_start_event(sim, (void *)(uintptr_t)id, now);
}

bool dlcp_sim_expects(const dlcp_sim *sim) {
  return sim->ops->flow_expect != NULL;
}

void dlcp_sim_flow_expect_now(dlcp_sim *sim, uint32_t id, dlcp_sim_ps now) {
  expect(sim, &sim->flows[id], now);
}

void dlcp_sim_flow_cancel(dlcp_sim *sim, uint32_t id, dlcp_sim_ps now) {
  dlcp_sim_flow *flow = &sim->flows[id];
  if (flow->start_ps != DLCP_SIM_PS_NEVER || flow->status != 0) {
    return;
  }
  flow->status = DLCP_ERR_CANCELED;
  sim->flows_canceled++;
  if (flow->expected && sim->ops->flow_unexpect) {
    int rv = sim->ops->flow_unexpect(sim->host_state[flow->dst], flow, now);
    if (rv != 0) {
      dlcp_sim_engine_fail(&sim->engine, rv);
    }
  }
}

static void schedule_flow(dlcp_sim *sim, uint32_t id, dlcp_sim_ps at) {
  sim->flows[id].release_ps = at;
  dlcp_sim_engine_at_cold(&sim->engine, at, flow_start_event, sim,
                     (void *)(uintptr_t)id);
}

void dlcp_sim_flow_delivered(dlcp_sim *sim, dlcp_sim_flow *flow,
                             dlcp_sim_ps now) {
  if (flow->rx_done_ps == DLCP_SIM_PS_NEVER) {
    flow->rx_done_ps = now;
    if (flow->xfer != DLCP_SIM_NONE) {
      dlcp_sim_coll_flow_delivered(sim, flow, now);
    }
  }
}

void dlcp_sim_flow_finished(dlcp_sim *sim, dlcp_sim_flow *flow,
                            dlcp_sim_ps now) {
  if (flow->finish_ps != DLCP_SIM_PS_NEVER) {
    return;
  }
  flow->finish_ps = now;
  sim->flows_done++;
  sim->last_finish_ps = now;
  if (flow->xfer != DLCP_SIM_NONE) {
    dlcp_sim_coll_flow_finished(sim, flow, now);
  }
  if (flow->barrier == DLCP_SIM_NONE) {
    return;
  }
  dlcp_sim_barrier *b = &sim->barriers[flow->barrier];
  dlcp_sim_ps due = now + flow->barrier_offset_ps;
  b->due_ps = due > b->due_ps ? due : b->due_ps;
  if (--b->remaining > 0) {
    return;
  }
  for (uint32_t i = 0; i < b->count; i++) {
    uint32_t id = sim->release[b->first + i];
    schedule_flow(sim, id,
                  b->due_ps + b->delay_ps + sim->flows[id].release_offset_ps);
  }
}

static int schedule_faults(dlcp_sim *sim, char *err, size_t errlen) {
  dlcp_sim_net *net = &sim->net;
  for (uint32_t i = 0; i < sim->cfg.nfaults; i++) {
    const dlcp_sim_fault_spec *f = &sim->cfg.faults[i];
    if (f->kind == DLCP_SIM_FAULT_PAUSE) {
      continue; /* after the workload: it pauses the collective's ranks */
    }
    if (f->kind == DLCP_SIM_FAULT_LOSS && strcmp(f->a, "*") == 0) {
      for (uint32_t p = 0; p < net->nports; p++) {
        net->ports[p].loss = f->loss;
      }
      continue;
    }
    uint32_t a = dlcp_sim_net_find_node(net, f->a);
    uint32_t b = dlcp_sim_net_find_node(net, f->b);
    uint32_t port = (a == DLCP_SIM_NONE || b == DLCP_SIM_NONE)
                        ? DLCP_SIM_NONE
                        : dlcp_sim_net_find_port(net, a, b);
    if (port == DLCP_SIM_NONE) {
      snprintf(err, errlen, "%s: field '%s.link': expected two adjacent "
               "nodes, got '%s' - '%s'", f->where, f->field, f->a, f->b);
      return DLCP_ERR_CONFIG;
    }
    switch (f->kind) {
    case DLCP_SIM_FAULT_LOSS:
      net->ports[port].loss = f->loss;
      net->ports[net->ports[port].reverse].loss = f->loss;
      break;
    case DLCP_SIM_FAULT_DOWN:
    case DLCP_SIM_FAULT_UP:
      dlcp_sim_net_schedule_link(net, port, f->kind == DLCP_SIM_FAULT_UP,
                                 f->at_ps);
      break;
    case DLCP_SIM_FAULT_PAUSE:
      break;
    }
  }
  return 0;
}

/* Resolves outputs.pcap into the a->b port of each cable. */
static int resolve_pcaps(dlcp_sim *sim, char *err, size_t errlen) {
  const dlcp_sim_config *cfg = &sim->cfg;
  if (cfg->npcaps == 0) {
    return 0;
  }
  sim->pcap_ports = sim->mem->calloc(cfg->npcaps, sizeof(uint32_t),
                                     sim->mem->user);
  if (!sim->pcap_ports) {
    return DLCP_ERR_NOMEM;
  }
  for (uint32_t i = 0; i < cfg->npcaps; i++) {
    const dlcp_sim_pcap_spec *p = &cfg->pcaps[i];
    uint32_t a = dlcp_sim_net_find_node(&sim->net, p->a);
    uint32_t b = dlcp_sim_net_find_node(&sim->net, p->b);
    uint32_t port = (a == DLCP_SIM_NONE || b == DLCP_SIM_NONE)
                        ? DLCP_SIM_NONE
                        : dlcp_sim_net_find_port(&sim->net, a, b);
    if (port == DLCP_SIM_NONE) {
      snprintf(err, errlen, "%s: field '%s': expected a link between two "
               "adjacent nodes, got '%s' - '%s'", p->where, p->field, p->a,
               p->b);
      return DLCP_ERR_CONFIG;
    }
    for (uint32_t j = 0; j < i; j++) {
      uint32_t q = sim->pcap_ports[j];
      if (q == port || sim->net.ports[q].reverse == port) {
        snprintf(err, errlen, "%s: field '%s': expected each link once, got "
                 "'%s' - '%s' again", p->where, p->field, p->a, p->b);
        return DLCP_ERR_CONFIG;
      }
    }
    sim->pcap_ports[i] = port;
  }
  return 0;
}

static int check_config(const dlcp_sim_config *cfg, char *err, size_t errlen) {
  const dlcp_sim_transport_config *t = &cfg->transport;
  if (cfg->sw.nqueues < 1 || cfg->sw.nqueues > DLCP_SIM_MAX_QUEUES) {
    snprintf(err, errlen, "switch: queues must be in [1, 8]");
    return DLCP_ERR_CONFIG;
  }
  if (t->mss_bytes == 0 || t->mss_bytes + t->header_bytes > 65535 ||
      t->ack_bytes == 0 || t->ack_bytes > 65535) {
    snprintf(err, errlen, "transport: mss + header and ack must be in "
             "[1, 65535] bytes");
    return DLCP_ERR_CONFIG;
  }
  if (cfg->topo.host_rate_bps == 0 || cfg->topo.fabric_rate_bps == 0) {
    snprintf(err, errlen, "topology: link rates must be > 0");
    return DLCP_ERR_CONFIG;
  }
  return 0;
}

static const dlcp_sim_transport_ops *
transport_ops(dlcp_sim_transport_kind kind) {
  switch (kind) {
  case DLCP_SIM_TRANSPORT_MLT:
    return &dlcp_sim_mlt_ops;
  case DLCP_SIM_TRANSPORT_TCP:
    return &dlcp_sim_tcp_ops;
  case DLCP_SIM_TRANSPORT_PIAS:
    return &dlcp_sim_pias_ops;
  case DLCP_SIM_TRANSPORT_PFABRIC:
    return &dlcp_sim_pfabric_ops;
  case DLCP_SIM_TRANSPORT_NDP:
    return &dlcp_sim_ndp_ops;
  case DLCP_SIM_TRANSPORT_DCTCP:
    break;
  }
  return &dlcp_sim_dctcp_ops;
}

int dlcp_sim_new(dlcp_sim **psim, const dlcp_sim_config *cfg,
                 const dlcp_mem *mem, char *err, size_t errlen) {
  mem = dlcp_sim_mem(mem);
  if (errlen > 0) {
    err[0] = '\0';
  }
  int rv = check_config(cfg, err, errlen);
  if (rv != 0) {
    return rv;
  }
  dlcp_sim *sim = mem->calloc(1, sizeof(*sim), mem->user);
  if (!sim) {
    return DLCP_ERR_NOMEM;
  }
  sim->mem = mem;
  sim->cfg = *cfg;
  sim->ops = transport_ops(cfg->transport.kind);
  dlcp_sim_packet_pool_init(&sim->pool, mem);
  rv = dlcp_sim_engine_init(&sim->engine, mem);
  if (rv != 0) {
    goto fail;
  }
  dlcp_sim_net *net = &sim->net;
  dlcp_sim_net_init(net, &sim->engine, &sim->pool, mem, cfg->seed);
  net->switch_port_cfg.nqueues = cfg->sw.nqueues;
  net->switch_port_cfg.buffer_bytes = cfg->sw.port_buffer_bytes;
  memcpy(net->switch_port_cfg.ecn_threshold_bytes, cfg->sw.ecn_threshold_bytes,
         sizeof(cfg->sw.ecn_threshold_bytes));
  net->switch_port_cfg.ecn_port_threshold_bytes =
      cfg->sw.ecn_port_threshold_bytes;
  net->switch_port_cfg.trimming = cfg->sw.trimming;
  net->switch_port_cfg.trim_bytes = cfg->sw.trim_bytes;
  net->switch_port_cfg.pfabric = cfg->sw.pfabric;
  net->switch_port_cfg.red_min_bytes = cfg->sw.red_min_bytes;
  net->switch_port_cfg.red_max_bytes = cfg->sw.red_max_bytes;
  net->switch_port_cfg.red_max_p = cfg->sw.red_max_p;
  net->pfc = cfg->sw.pfc;
  net->host_port_cfg.nqueues = cfg->sw.nqueues;
  net->host_port_cfg.buffer_bytes = cfg->host.nic_buffer_bytes;
  for (uint32_t i = 0; i < DLCP_SIM_MAX_QUEUES; i++) {
    net->host_port_cfg.ecn_threshold_bytes[i] =
        cfg->host.nic_ecn_threshold_bytes;
  }
  net->shared_buffer_bytes = cfg->sw.shared_buffer_bytes;
  net->dt_alpha = cfg->sw.dt_alpha;
  net->host_rx = host_rx;
  net->host_rx_ctx = sim;
  rv = dlcp_sim_topo_build(net, &cfg->topo, err, errlen);
  if (rv != 0) {
    goto fail;
  }
  rv = dlcp_sim_net_finalize(net);
  if (rv == DLCP_ERR_CONFIG) {
    snprintf(err, errlen, "topology: every host needs exactly one link");
  }
  if (rv == 0) {
    rv = dlcp_sim_pfc_init(net);
  }
  if (rv == 0) {
    rv = dlcp_sim_agg_build(sim, err, errlen);
  }
  if (rv != 0) {
    goto fail;
  }
  sim->host_state = mem->calloc(net->nhosts, sizeof(void *), mem->user);
  if (!sim->host_state) {
    rv = DLCP_ERR_NOMEM;
    goto fail;
  }
  for (uint32_t h = 0; h < net->nhosts; h++) {
    rv = sim->ops->host_new(sim, h, &sim->host_state[h]);
    if (rv != 0) {
      goto fail;
    }
  }
  rv = schedule_faults(sim, err, errlen);
  if (rv != 0) {
    goto fail;
  }
  rv = resolve_pcaps(sim, err, errlen);
  if (rv != 0) {
    goto fail;
  }
  rv = dlcp_sim_workload_build(sim, err, errlen);
  if (rv != 0) {
    goto fail;
  }
  rv = dlcp_sim_coll_schedule_pauses(sim, err, errlen);
  if (rv != 0) {
    goto fail;
  }
  if (sim->ops->init) {
    rv = sim->ops->init(sim);
    if (rv != 0) {
      goto fail;
    }
  }
  for (uint32_t i = 0; i < sim->nflows; i++) {
    if (sim->flows[i].expect_at_start) {
      dlcp_sim_engine_at_cold(&sim->engine, 0, expect_event, sim,
                              (void *)(uintptr_t)i);
    }
    if (sim->flows[i].release_ps != DLCP_SIM_PS_NEVER) {
      schedule_flow(sim, i, sim->flows[i].release_ps);
    }
  }
  /* The config's spec arrays belong to the caller; forget them. */
  sim->cfg.flows = NULL;
  sim->cfg.incasts = NULL;
  sim->cfg.ps = NULL;
  sim->cfg.colls = NULL;
  sim->cfg.backgrounds = NULL;
  sim->cfg.faults = NULL;
  sim->cfg.topo.nodes = NULL;
  sim->cfg.topo.links = NULL;
  sim->cfg.pcaps = NULL;
  *psim = sim;
  return 0;
fail:
  sim->cfg.flows = NULL;
  sim->cfg.incasts = NULL;
  sim->cfg.ps = NULL;
  sim->cfg.colls = NULL;
  sim->cfg.backgrounds = NULL;
  sim->cfg.faults = NULL;
  sim->cfg.topo.nodes = NULL;
  sim->cfg.topo.links = NULL;
  sim->cfg.pcaps = NULL;
  dlcp_sim_del(sim);
  if (rv == DLCP_ERR_NOMEM && errlen > 0 && err[0] == '\0') {
    snprintf(err, errlen, "out of memory");
  }
  return rv;
}

void dlcp_sim_del(dlcp_sim *sim) {
  if (!sim) {
    return;
  }
  const dlcp_mem *mem = sim->mem;
  dlcp_sim_pcap_close(sim);
  mem->free(sim->pcap_ports, mem->user);
  for (uint32_t i = 0; i < sim->nflows; i++) {
    sim->ops->flow_free(sim, &sim->flows[i]);
  }
  if (sim->host_state) {
    for (uint32_t h = 0; h < sim->net.nhosts; h++) {
      if (sim->host_state[h]) {
        sim->ops->host_del(sim, sim->host_state[h]);
      }
    }
    mem->free(sim->host_state, mem->user);
  }
  if (sim->ops->fini) {
    sim->ops->fini(sim);
  }
  dlcp_sim_coll_free(sim);
  dlcp_sim_ina_free(sim);
  dlcp_sim_agg_free(sim);
  mem->free(sim->flows, mem->user);
  mem->free(sim->barriers, mem->user);
  mem->free(sim->release, mem->user);
  dlcp_sim_net_free(&sim->net);
  dlcp_sim_engine_free(&sim->engine);
  dlcp_sim_packet_pool_free(&sim->pool);
  mem->free(sim, mem->user);
}

int dlcp_sim_run(dlcp_sim *sim, dlcp_sim_ps until) {
  dlcp_sim_ps limit = until < sim->cfg.stop_ps ? until : sim->cfg.stop_ps;
  for (;;) {
    if (dlcp_sim_finished(sim)) {
      return 1;
    }
    int rv = dlcp_sim_engine_step(&sim->engine, limit);
    if (rv < 0) {
      return rv;
    }
    if (rv == 0) {
      /* Nothing left before |limit|: the run is over if the queue is
       * empty or the stop time was hit. */
      if (sim->engine.len == 0 || limit == sim->cfg.stop_ps) {
        return 1;
      }
      return 0;
    }
  }
}

uint32_t dlcp_sim_unfinished_flows(const dlcp_sim *sim) {
  return sim->nflows - sim->flows_done - sim->flows_canceled;
}

bool dlcp_sim_finished(const dlcp_sim *sim) {
  return sim->busy == 0 && dlcp_sim_unfinished_flows(sim) == 0 &&
         (sim->nflows > 0 || sim->colls != NULL);
}

dlcp_sim_ps dlcp_sim_end_time(const dlcp_sim *sim) {
  if (dlcp_sim_finished(sim)) {
    return sim->last_finish_ps;
  }
  return sim->engine.now;
}
