/*
 * scenario.c: reading scenarios: the load, the document's top level and
 * the network's sections (topology, switch, host, transport, outputs).
 *
 * The text becomes a tree with origins (scenario_tree.c) that is walked
 * against a fixed schema: every map's keys are checked against the fields
 * it may contain, every scalar is parsed with its unit and range
 * (scenario_field.c), and the first problem stops the load with one line
 * naming the file, line, dotted field path and what was expected.
 * Workloads and faults are read by scenario_workload.c.  Nothing the user
 * wrote is ignored silently.
 */
#include "sim/scenario.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/scenario_schema.h"

static int topo_node(dlcp_scn *s, const dlcp_scn_node *n, const char *path) {
  static const char *const keys[] = {"name", "kind", "group", NULL};
  int rv = dlcp_scn_check_keys(s, n, path, keys);
  if (rv != 0) {
    return rv;
  }
  dlcp_sim_topo_config *t = &s->cfg->topo;
  dlcp_sim_topo_node *nodes =
      realloc(t->nodes, (t->nnodes + 1) * sizeof(*nodes));
  if (!nodes) {
    return DLCP_ERR_NOMEM;
  }
  t->nodes = nodes;
  dlcp_sim_topo_node *node = &nodes[t->nnodes];
  memset(node, 0, sizeof(*node));
  node->group = t->nnodes;
  dlcp_scn_where(node->where, n);
  dlcp_scn_set_field(node->field, path);
  t->nnodes++;
  static const char *const kinds[] = {"host", "switch", NULL};
  int kind = -1;
  rv = dlcp_scn_get_name(s, n, path, "name", node->name, true, n);
  if (rv == 0) {
    rv = dlcp_scn_get_enum(s, n, path, "kind", kinds, &kind);
  }
  if (rv == 0 && kind < 0) {
    char field[256];
    dlcp_scn_join(field, sizeof(field), path, "kind");
    rv = dlcp_scn_fail(s, n, field, "expected host or switch");
  }
  node->is_host = kind == 0;
  if (rv == 0) {
    rv = dlcp_scn_get_u32(s, n, path, "group", &node->group, 0, UINT32_MAX - 1);
  }
  return rv;
}

static int topo_link(dlcp_scn *s, const dlcp_scn_node *n, const char *path) {
  static const char *const keys[] = {"a", "b", "rate", "delay", NULL};
  int rv = dlcp_scn_check_keys(s, n, path, keys);
  if (rv != 0) {
    return rv;
  }
  dlcp_sim_topo_config *t = &s->cfg->topo;
  dlcp_sim_topo_link *links =
      realloc(t->links, (t->nlinks + 1) * sizeof(*links));
  if (!links) {
    return DLCP_ERR_NOMEM;
  }
  t->links = links;
  dlcp_sim_topo_link *l = &links[t->nlinks++];
  memset(l, 0, sizeof(*l));
  l->rate_bps = t->host_rate_bps;
  l->delay_ps = t->link_delay_ps;
  dlcp_scn_where(l->where, n);
  dlcp_scn_set_field(l->field, path);
  rv = dlcp_scn_get_name(s, n, path, "a", l->a, true, n);
  if (rv == 0) {
    rv = dlcp_scn_get_name(s, n, path, "b", l->b, true, n);
  }
  if (rv == 0) {
    rv = dlcp_scn_get_rate(s, n, path, "rate", &l->rate_bps);
  }
  if (rv == 0) {
    rv = dlcp_scn_get_time(s, n, path, "delay", &l->delay_ps);
  }
  return rv;
}

static int section_topology(dlcp_scn *s, const dlcp_scn_node *n) {
  static const char *const keys[] = {
      "kind",        "hosts_per_tor", "tors",       "spines", "k",
      "host_rate",   "fabric_rate",   "link_rate",  "link_delay",
      "base_rtt",    "nodes",         "links",      NULL};
  const char *p = "topology";
  int rv = dlcp_scn_check_keys(s, n, p, keys);
  if (rv != 0) {
    return rv;
  }
  dlcp_sim_topo_config *t = &s->cfg->topo;
  static const char *const kinds[] = {"leaf_spine", "fat_tree", "explicit",
                                      NULL};
  int kind = (int)t->kind;
  if ((rv = dlcp_scn_get_enum(s, n, p, "kind", kinds, &kind)) != 0) {
    return rv;
  }
  t->kind = (dlcp_sim_topo_kind)kind;
  uint64_t link_rate = 0;
  if ((rv = dlcp_scn_get_u32(s, n, p, "hosts_per_tor", &t->hosts_per_tor, 1,
                             4096)) ||
      (rv = dlcp_scn_get_u32(s, n, p, "tors", &t->tors, 1, 4096)) ||
      (rv = dlcp_scn_get_u32(s, n, p, "spines", &t->spines, 1, 1024)) ||
      (rv = dlcp_scn_get_u32(s, n, p, "k", &t->k, 2, 64)) ||
      (rv = dlcp_scn_get_rate(s, n, p, "link_rate", &link_rate))) {
    return rv;
  }
  if (link_rate) {
    t->host_rate_bps = t->fabric_rate_bps = link_rate;
  }
  if ((rv = dlcp_scn_get_rate(s, n, p, "host_rate", &t->host_rate_bps)) ||
      (rv = dlcp_scn_get_rate(s, n, p, "fabric_rate", &t->fabric_rate_bps)) ||
      (rv = dlcp_scn_get_time(s, n, p, "link_delay", &t->link_delay_ps)) ||
      (rv = dlcp_scn_get_time(s, n, p, "base_rtt", &t->base_rtt_ps))) {
    return rv;
  }
  if (t->kind == DLCP_SIM_TOPO_FAT_TREE && t->k % 2 != 0) {
    const dlcp_scn_node *kn = dlcp_scn_map_get(n, "k");
    return dlcp_scn_fail(s, kn ? kn : n, "topology.k",
                         "expected an even k in [2, 64]");
  }
  if (t->kind == DLCP_SIM_TOPO_LEAF_SPINE && t->hosts_per_tor * t->tors >
                                                 65536) {
    return dlcp_scn_fail(s, n, "topology.tors", "expected at most 65536 hosts");
  }
  const dlcp_scn_node *nodes = dlcp_scn_map_get(n, "nodes");
  const dlcp_scn_node *links = dlcp_scn_map_get(n, "links");
  if (t->kind == DLCP_SIM_TOPO_EXPLICIT) {
    if (!nodes || nodes->kind != DLCP_SCN_SEQ || !links ||
        links->kind != DLCP_SCN_SEQ) {
      return dlcp_scn_fail(s, nodes ? nodes : n, "topology.nodes",
                  "expected lists 'nodes' and 'links' for an explicit "
                  "topology");
    }
    if ((rv = dlcp_scn_for_each_map(s, nodes, "topology.nodes", topo_node)) ||
        (rv = dlcp_scn_for_each_map(s, links, "topology.links", topo_link))) {
      return rv;
    }
  } else if (nodes || links) {
    return dlcp_scn_fail(s, nodes ? nodes : links, nodes ? "topology.nodes"
                                                : "topology.links",
                "expected kind: explicit for a node/link list");
  }
  return 0;
}

/* transport.pias.thresholds: an increasing list of 1..7 sizes. */
static int pias_thresholds(dlcp_scn *s, const dlcp_scn_node *n) {
  static const char field[] = "transport.pias.thresholds";
  dlcp_sim_pias_config *c = &s->cfg->transport.pias;
  if (n->kind != DLCP_SCN_SEQ || n->n < 1 || n->n > DLCP_SIM_MAX_QUEUES - 1) {
    return dlcp_scn_fail(s, n, field, "expected a list of 1 to %u sizes",
                DLCP_SIM_MAX_QUEUES - 1);
  }
  for (size_t i = 0; i < n->n; i++) {
    int rv = dlcp_scn_parse_size(s, n->items[i], "transport.pias.thresholds[]",
                        &c->thresholds_bytes[i], 1, 1ull << 50);
    if (rv != 0) {
      return rv;
    }
    if (i > 0 && c->thresholds_bytes[i] <= c->thresholds_bytes[i - 1]) {
      return dlcp_scn_fail(s, n->items[i], "transport.pias.thresholds[]",
                  "expected increasing thresholds");
    }
  }
  c->nthresholds = (uint32_t)n->n;
  return 0;
}

/* transport.pias / pfabric / ndp: the baselines' own parameters. */
static int section_baselines(dlcp_scn *s, const dlcp_scn_node *n) {
  static const char *const pias_keys[] = {"thresholds", NULL};
  static const char *const pfabric_keys[] = {"init_cwnd", "rto",
                                             "probe_after", NULL};
  static const char *const ndp_keys[] = {"init_window", "rto", NULL};
  dlcp_sim_transport_config *t = &s->cfg->transport;
  const dlcp_scn_node *v;
  int rv = 0;
  if ((v = dlcp_scn_map_get(n, "pias"))) {
    const dlcp_scn_node *th = dlcp_scn_map_get(v, "thresholds");
    if ((rv = dlcp_scn_check_keys(s, v, "transport.pias", pias_keys)) ||
        (th && (rv = pias_thresholds(s, th)))) {
      return rv;
    }
  }
  if ((v = dlcp_scn_map_get(n, "pfabric"))) {
    const char *p = "transport.pfabric";
    dlcp_sim_pfabric_config *c = &t->pfabric;
    if ((rv = dlcp_scn_check_keys(s, v, p, pfabric_keys)) ||
        (rv = dlcp_scn_get_u32(s, v, p, "init_cwnd", &c->init_cwnd_pkts, 0,
                               1000000)) ||
        (rv = dlcp_scn_get_time(s, v, p, "rto", &c->rto_ps)) ||
        (rv = dlcp_scn_get_u32(s, v, p, "probe_after", &c->probe_after, 1,
                               1000))) {
      return rv;
    }
  }
  if ((v = dlcp_scn_map_get(n, "ndp"))) {
    const char *p = "transport.ndp";
    dlcp_sim_ndp_config *c = &t->ndp;
    if ((rv = dlcp_scn_check_keys(s, v, p, ndp_keys)) ||
        (rv = dlcp_scn_get_u32(s, v, p, "init_window", &c->init_window_pkts, 0,
                      1000000)) ||
        (rv = dlcp_scn_get_time(s, v, p, "rto", &c->rto_ps))) {
      return rv;
    }
  }
  return 0;
}

static int section_transport(dlcp_scn *s, const dlcp_scn_node *n) {
  static const char *const keys[] = {
      "kind",         "mss",         "header",           "ack_size",
      "load_balancing", "rto_min",   "rto_init",         "rto_max",
      "init_cwnd",    "dupack_threshold", "delayed_ack", "delayed_ack_timeout",
      "g",            "alpha_init",  "loss_bound",       "paths",
      "importance",   "layers",      "segment_size",     "t_low",
      "t_high",       "queue_pkts",  "ack_every",        "burst",
      "probe_timeout", "min_drain",  "pias",             "pfabric",
      "ndp",          "srpt",        "cwr_fast_retransmit", "path_burst",
      "eager_bytes",  "persistent",  NULL};
  const char *p = "transport";
  int rv = dlcp_scn_check_keys(s, n, p, keys);
  if (rv != 0) {
    return rv;
  }
  dlcp_sim_transport_config *t = &s->cfg->transport;
  dlcp_sim_dctcp_config *d = &t->dctcp;
  static const char *const kinds[] = {"dctcp", "mlt",     "tcp",
                                      "pias",  "pfabric", "ndp", NULL};
  static const char *const importance[] = {"all", "none", "magnitude", NULL};
  dlcp_sim_mlt_config *m = &t->mlt;
  int kind = (int)t->kind, lb = (int)t->lb, imp = (int)m->importance;
  if ((rv = dlcp_scn_get_enum(s, n, p, "kind", kinds, &kind)) ||
      (rv = dlcp_scn_get_u32(s, n, p, "mss", &t->mss_bytes, 64, 9000)) ||
      (rv = dlcp_scn_get_u32(s, n, p, "header", &t->header_bytes, 0, 512)) ||
      (rv = dlcp_scn_get_u32(s, n, p, "ack_size", &t->ack_bytes, 20, 1500)) ||
      (rv = dlcp_scn_get_enum(s, n, p, "load_balancing", dlcp_scn_lb_words,
                              &lb)) ||
      (rv = dlcp_scn_get_time(s, n, p, "rto_min", &d->rto_min_ps)) ||
      (rv = dlcp_scn_get_time(s, n, p, "rto_init", &d->rto_init_ps)) ||
      (rv = dlcp_scn_get_time(s, n, p, "rto_max", &d->rto_max_ps)) ||
      (rv = dlcp_scn_get_u32(s, n, p, "init_cwnd", &d->init_cwnd_pkts, 1,
                             1000000)) ||
      (rv = dlcp_scn_get_u32(s, n, p, "dupack_threshold", &d->dupack_threshold,
                             1, 1000)) ||
      (rv = dlcp_scn_get_bool(s, n, p, "delayed_ack", &d->delayed_ack)) ||
      (rv = dlcp_scn_get_bool(s, n, p, "cwr_fast_retransmit",
                              &d->cwr_fast_retransmit)) ||
      (rv = dlcp_scn_get_bool(s, n, p, "persistent", &d->persistent)) ||
      (rv = dlcp_scn_get_time(s, n, p, "delayed_ack_timeout",
                              &d->delayed_ack_ps)) ||
      (rv = dlcp_scn_get_double(s, n, p, "g", &d->g, 0.0, 1.0)) ||
      (rv = dlcp_scn_get_double(s, n, p, "alpha_init", &d->alpha_init, 0.0,
                                1.0)) ||
      (rv = dlcp_scn_get_double(s, n, p, "loss_bound", &m->loss_bound, 0.0,
                                0.999999)) ||
      (rv = dlcp_scn_get_u32(s, n, p, "paths", &m->npaths, 1, 256)) ||
      (rv = dlcp_scn_get_u32(s, n, p, "path_burst", &m->path_burst, 1,
                             65536)) ||
      (rv = dlcp_scn_get_u32(s, n, p, "eager_bytes", &m->eager_bytes, 0,
                             65536)) ||
      (rv = dlcp_scn_get_enum(s, n, p, "importance", importance, &imp)) ||
      (rv = dlcp_scn_get_u32(s, n, p, "layers", &m->layers, 0, 65535)) ||
      (rv = dlcp_scn_get_u32(s, n, p, "segment_size", &m->segment_bytes, 0,
                             9000)) ||
      (rv = dlcp_scn_get_time(s, n, p, "t_low", &m->t_low_ps)) ||
      (rv = dlcp_scn_get_time(s, n, p, "t_high", &m->t_high_ps)) ||
      (rv = dlcp_scn_get_u32(s, n, p, "queue_pkts", &m->queue_pkts, 0,
                             1000000)) ||
      (rv =
           dlcp_scn_get_u32(s, n, p, "ack_every", &m->ack_every, 1, 1000000)) ||
      (rv = dlcp_scn_get_u32(s, n, p, "burst", &m->burst_pkts, 1, 1000000)) ||
      (rv =
           dlcp_scn_get_time(s, n, p, "probe_timeout", &m->probe_timeout_ps)) ||
      (rv = dlcp_scn_get_time(s, n, p, "min_drain", &m->min_drain_ps)) ||
      (rv = dlcp_scn_get_bool(s, n, p, "srpt", &m->srpt))) {
    return rv;
  }
  m->importance = (dlcp_sim_mlt_importance)imp;
  if (m->segment_bytes != 0 && m->segment_bytes < 64) {
    return dlcp_scn_fail(s, dlcp_scn_map_get(n, "segment_size"),
                         "transport.segment_size",
                         "expected 0 (derived from the MTU) or 64..9000 bytes");
  }
  if (m->t_high_ps / 1000 <= m->t_low_ps / 1000) {
    return dlcp_scn_fail(s, n, "transport.t_high",
                "expected t_high > t_low (at nanosecond resolution)");
  }
  if (m->probe_timeout_ps < DLCP_SIM_PS_PER_NS) {
    return dlcp_scn_fail(s, n, "transport.probe_timeout",
                         "expected at least 1ns");
  }
  t->kind = (dlcp_sim_transport_kind)kind;
  t->lb = (dlcp_sim_lb)lb;
  const dlcp_scn_node *persistent = dlcp_scn_map_get(n, "persistent");
  if (!dlcp_sim_kind_is_tcp(t->kind)) {
    /* On by default, where there are connections to keep. */
    if (d->persistent && persistent) {
      return dlcp_scn_fail(s, persistent, "transport.persistent",
                           "expected false: only dctcp, tcp and pias keep "
                           "connections");
    }
    d->persistent = false;
  }
  if (d->rto_min_ps == 0 || d->rto_init_ps == 0 ||
      d->rto_max_ps < d->rto_min_ps) {
    return dlcp_scn_fail(s, n, "transport.rto_max",
                "expected 0 < rto_min <= rto_max and rto_init > 0");
  }
  s->mtu = t->mss_bytes + t->header_bytes;
  return section_baselines(s, n);
}

/* switch.red: {min, max, max_p}, min < max. */
static int switch_red(dlcp_scn *s, const dlcp_scn_node *n) {
  static const char *const keys[] = {"min", "max", "max_p", NULL};
  static const char *const required[] = {"min", "max", "max_p", NULL};
  const char *p = "switch.red";
  dlcp_sim_switch_config *w = &s->cfg->sw;
  int rv = dlcp_scn_check_keys(s, n, p, keys);
  if (rv || (rv = dlcp_scn_require(s, n, p, required)) ||
      (rv = dlcp_scn_get_size(s, n, p, "min", &w->red_min_bytes, 0,
                              1ull << 40)) ||
      (rv = dlcp_scn_get_size(s, n, p, "max", &w->red_max_bytes, 1,
                              1ull << 40)) ||
      (rv = dlcp_scn_get_double(s, n, p, "max_p", &w->red_max_p, 0.0, 1.0))) {
    return rv;
  }
  if (w->red_min_bytes >= w->red_max_bytes) {
    return dlcp_scn_fail(s, dlcp_scn_map_get(n, "max"), "switch.red.max",
                "expected max > min");
  }
  return 0;
}

/* switch.pfc: {priorities: all | [queue...], xoff, xon, headroom}. */
static int switch_pfc(dlcp_scn *s, const dlcp_scn_node *n) {
  static const char *const keys[] = {"priorities", "xoff", "xon", "headroom",
                                     NULL};
  static const char *const required[] = {"priorities", "xoff", "headroom",
                                         NULL};
  const char *p = "switch.pfc";
  dlcp_sim_pfc_config *c = &s->cfg->sw.pfc;
  int rv = dlcp_scn_check_keys(s, n, p, keys);
  if (rv || (rv = dlcp_scn_require(s, n, p, required)) ||
      (rv =
           dlcp_scn_get_size(s, n, p, "xoff", &c->xoff_bytes, 1, 1ull << 40)) ||
      (rv = dlcp_scn_get_size(s, n, p, "headroom", &c->headroom_bytes, 0,
                              1ull << 40))) {
    return rv;
  }
  c->xon_bytes = c->xoff_bytes > 2 * s->mtu ? c->xoff_bytes - 2 * s->mtu : 0;
  if ((rv = dlcp_scn_get_size(s, n, p, "xon", &c->xon_bytes, 0,
                              c->xoff_bytes))) {
    return rv;
  }
  const dlcp_scn_node *pr = dlcp_scn_map_get(n, "priorities");
  c->prio_mask = 0;
  if (pr->kind == DLCP_SCN_SCALAR && strcmp(pr->str, "all") == 0) {
    c->prio_mask = 0xFF;
    return 0;
  }
  if (pr->kind != DLCP_SCN_SEQ || pr->n == 0) {
    return dlcp_scn_fail(s, pr, "switch.pfc.priorities",
                "expected all, or a list of queue indices 0..7");
  }
  for (size_t i = 0; i < pr->n; i++) {
    uint64_t q = 0;
    const char *t = "";
    char *end;
    if ((rv =
             dlcp_scn_scalar(s, pr->items[i], "switch.pfc.priorities[]", &t))) {
      return rv;
    }
    q = strtoull(t, &end, 10);
    if (t[0] < '0' || t[0] > '9' || *end || q >= DLCP_SIM_MAX_QUEUES) {
      return dlcp_scn_fail(s, pr->items[i], "switch.pfc.priorities[]",
                  "expected a queue index in [0, 7], got '%s'", t);
    }
    c->prio_mask |= (uint8_t)(1u << q);
  }
  return 0;
}

/* switch.ecn_port_threshold: a size, or off (the default).  pFabric's
 * ports neither mark nor drop by thresholds, so the two do not mix. */
static int switch_port_threshold(dlcp_scn *s, const dlcp_scn_node *n) {
  const char *f = "switch.ecn_port_threshold";
  const dlcp_scn_node *e = dlcp_scn_map_get(n, "ecn_port_threshold");
  dlcp_sim_switch_config *w = &s->cfg->sw;
  if (!e) {
    return 0;
  }
  if (e->kind == DLCP_SCN_SCALAR && strcmp(e->str, "off") == 0) {
    w->ecn_port_threshold_bytes = 0;
    return 0;
  }
  int rv = dlcp_scn_parse_size(s, e, f, &w->ecn_port_threshold_bytes, 1,
                               1ull << 40);
  if (rv == 0 && w->pfabric) {
    return dlcp_scn_fail(s, e, f,
                         "expected off with switch.scheduling: pfabric");
  }
  return rv;
}

static int section_switch(dlcp_scn *s, const dlcp_scn_node *n) {
  static const char *const keys[] = {
      "queues",    "port_buffer", "shared_buffer", "dt_alpha",
      "ecn_threshold", "ecn_port_threshold", "trimming", "trim_size",
      "scheduling", "red",        "pfc",           NULL};
  static const char *const scheduling[] = {"strict", "pfabric", NULL};
  const char *p = "switch";
  int rv = dlcp_scn_check_keys(s, n, p, keys);
  if (rv != 0) {
    return rv;
  }
  dlcp_sim_switch_config *w = &s->cfg->sw;
  uint64_t trim = w->trim_bytes;
  int sched = w->pfabric ? 1 : 0;
  if ((rv = dlcp_scn_get_u32(s, n, p, "queues", &w->nqueues, 1,
                             DLCP_SIM_MAX_QUEUES)) ||
      (rv = dlcp_scn_get_size(s, n, p, "port_buffer", &w->port_buffer_bytes,
                              1500, 1ull << 40)) ||
      (rv = dlcp_scn_get_size(s, n, p, "shared_buffer", &w->shared_buffer_bytes,
                              0, 1ull << 40)) ||
      (rv = dlcp_scn_get_double(s, n, p, "dt_alpha", &w->dt_alpha, 1.0 / 64,
                                64)) ||
      (rv = dlcp_scn_get_bool(s, n, p, "trimming", &w->trimming)) ||
      (rv = dlcp_scn_get_size(s, n, p, "trim_size", &trim, 20, 1500)) ||
      (rv = dlcp_scn_get_enum(s, n, p, "scheduling", scheduling, &sched))) {
    return rv;
  }
  w->trim_bytes = (uint32_t)trim;
  w->pfabric = sched == 1;
  const dlcp_scn_node *sub;
  if ((sub = dlcp_scn_map_get(n, "red")) && (rv = switch_red(s, sub))) {
    return rv;
  }
  if ((sub = dlcp_scn_map_get(n, "pfc")) && (rv = switch_pfc(s, sub))) {
    return rv;
  }
  if ((rv = switch_port_threshold(s, n)) != 0) {
    return rv;
  }
  const dlcp_scn_node *e = dlcp_scn_map_get(n, "ecn_threshold");
  if (e) {
    /* One value for every queue, or a list with one value per queue;
     * "off" disables marking (and so selective dropping). */
    size_t count = e->kind == DLCP_SCN_SEQ ? e->n : 1;
    if (e->kind == DLCP_SCN_MAP ||
        (e->kind == DLCP_SCN_SEQ && e->n != w->nqueues)) {
      return dlcp_scn_fail(s, e, "switch.ecn_threshold",
                  "expected one size, or a list of %u sizes (one per queue)",
                  w->nqueues);
    }
    for (size_t i = 0; i < DLCP_SIM_MAX_QUEUES; i++) {
      const dlcp_scn_node *v =
          e->kind == DLCP_SCN_SEQ ? e->items[i < count ? i : count - 1] : e;
      char field[64];
      snprintf(field, sizeof(field), "switch.ecn_threshold%s",
               e->kind == DLCP_SCN_SEQ ? "[]" : "");
      if (v->kind == DLCP_SCN_SCALAR && strcmp(v->str, "off") == 0) {
        w->ecn_threshold_bytes[i] = UINT64_MAX;
        continue;
      }
      if ((rv = dlcp_scn_parse_size(s, v, field, &w->ecn_threshold_bytes[i], 0,
                           1ull << 40)) != 0) {
        return rv;
      }
    }
  }
  return 0;
}

/* pFabric and NDP are end hosts and switches together: pFabric's hosts
 * send every packet not ECN-capable and count on the switch to drop the
 * least urgent one, NDP's count on it to trim.  Over another switch a
 * threshold drops their packets, and the run measures a broken transport
 * (NDP over the ECN switches of a k = 16 fat tree: a flow timed out down
 * to one packet a round trip and ended after 105 ms).  Checked once the
 * switch section is read; the error is at the switch's field if the
 * scenario sets it, else at transport.kind. */
static int switch_for(dlcp_scn *s, const dlcp_scn_node *root, const char *key,
                      const char *field, const char *want, const char *why) {
  const dlcp_scn_node *sw = dlcp_scn_map_get(root, "switch");
  const dlcp_scn_node *at = sw ? dlcp_scn_map_get(sw, key) : NULL;
  if (!at) {
    at = dlcp_scn_map_get(dlcp_scn_map_get(root, "transport"), "kind");
  }
  return dlcp_scn_fail(s, at ? at : root, field,
                       "expected %s with transport.kind: %s", want, why);
}

static int transport_needs_its_switch(dlcp_scn *s, const dlcp_scn_node *root) {
  const dlcp_sim_config *c = s->cfg;
  if (c->transport.kind == DLCP_SIM_TRANSPORT_NDP && !c->sw.trimming) {
    return switch_for(s, root, "trimming", "switch.trimming", "true",
                      "ndp (NDP's switches trim packets to headers; see "
                      "scenarios/ndp-incast.yaml)");
  }
  if (c->transport.kind == DLCP_SIM_TRANSPORT_PFABRIC && !c->sw.pfabric) {
    return switch_for(s, root, "scheduling", "switch.scheduling", "pfabric",
                      "pfabric (pFabric's switches serve and drop by "
                      "remaining size; see scenarios/pfabric-incast.yaml)");
  }
  return 0;
}

static int section_host(dlcp_scn *s, const dlcp_scn_node *n) {
  static const char *const keys[] = {"nic_buffer", "nic_ecn_threshold", NULL};
  const char *p = "host";
  int rv = dlcp_scn_check_keys(s, n, p, keys);
  if (rv != 0) {
    return rv;
  }
  dlcp_sim_host_config *h = &s->cfg->host;
  if ((rv = dlcp_scn_get_size(s, n, p, "nic_buffer", &h->nic_buffer_bytes, 1500,
                     1ull << 40))) {
    return rv;
  }
  const dlcp_scn_node *e = dlcp_scn_map_get(n, "nic_ecn_threshold");
  if (e && !(e->kind == DLCP_SCN_SCALAR && strcmp(e->str, "off") == 0)) {
    rv = dlcp_scn_parse_size(s, e, "host.nic_ecn_threshold",
                    &h->nic_ecn_threshold_bytes, 0, 1ull << 40);
  }
  return rv;
}

/* The index of switch |name| among a->chain, added if new; NONE if the
 * list is full. */
static uint32_t switch_index(dlcp_sim_agg_config *a, const char *name) {
  for (uint32_t i = 0; i < a->nchain; i++) {
    if (strcmp(a->chain[i], name) == 0) {
      return i;
    }
  }
  if (a->nchain == DLCP_SIM_AGG_MAX_CHAIN) {
    return DLCP_SIM_NONE;
  }
  snprintf(a->chain[a->nchain], DLCP_SIM_NAME_MAX, "%s", name);
  return a->nchain++;
}

/* One aggregation tree, number |ti|: [[child, parent], ...] (HINA's, or
 * one of MTINA's): every switch has at most one parent, one switch (the
 * root) has none, and following parents never comes back.  |f| names the
 * field. */
static int aggregation_tree(dlcp_scn *s, const dlcp_scn_node *t,
                            dlcp_sim_agg_config *a, uint32_t ti,
                            const char *f) {
  uint32_t *parent = a->parent[ti];
  bool *member = a->member[ti];
  if (t->kind != DLCP_SCN_SEQ || t->n == 0 ||
      t->n >= DLCP_SIM_AGG_MAX_CHAIN) {
    return dlcp_scn_fail(s, t, f,
                         "expected a list of 1..%u [child, parent] pairs "
                         "of switch names",
                         DLCP_SIM_AGG_MAX_CHAIN - 1);
  }
  for (size_t i = 0; i < t->n; i++) {
    const dlcp_scn_node *e = t->items[i];
    const char *name[2] = {"", ""};
    if (e->kind != DLCP_SCN_SEQ || e->n != 2) {
      return dlcp_scn_fail(s, e, f,
                           "expected [child, parent] pairs of switch names");
    }
    for (size_t k = 0; k < 2; k++) {
      int rv = dlcp_scn_scalar(s, e->items[k], f, &name[k]);
      if (rv != 0) {
        return rv;
      }
      if (name[k][0] == '\0' || strlen(name[k]) >= DLCP_SIM_NAME_MAX) {
        return dlcp_scn_fail(s, e->items[k], f,
                             "expected names of 1..%u characters",
                             DLCP_SIM_NAME_MAX - 1);
      }
    }
    uint32_t c = switch_index(a, name[0]), p = switch_index(a, name[1]);
    if (c == DLCP_SIM_NONE || p == DLCP_SIM_NONE) {
      return dlcp_scn_fail(s, e, f, "expected at most %u switches",
                           DLCP_SIM_AGG_MAX_CHAIN);
    }
    if (c == p || parent[c] != DLCP_SIM_NONE) {
      return dlcp_scn_fail(s, e, f,
                           "expected one parent per switch, another "
                           "switch than itself ('%s')",
                           name[0]);
    }
    parent[c] = p;
    member[c] = member[p] = true;
  }
  uint32_t roots = 0;
  for (uint32_t i = 0; i < a->nchain; i++) {
    uint32_t up = i, steps = 0;
    while (parent[up] != DLCP_SIM_NONE && steps <= a->nchain) {
      up = parent[up];
      steps++;
    }
    if (steps > a->nchain) {
      return dlcp_scn_fail(s, t, f, "expected a tree, got a cycle through "
                           "'%s'", a->chain[i]);
    }
    roots += member[i] && parent[i] == DLCP_SIM_NONE;
  }
  if (roots != 1) {
    return dlcp_scn_fail(s, t, f,
                         "expected one root (a switch without parent), "
                         "got %u",
                         roots);
  }
  snprintf(a->node, DLCP_SIM_NAME_MAX, "%s", a->chain[0]);
  return 0;
}

/* aggregation.trees: MTINA's trees, each as aggregation.tree. */
static int aggregation_trees(dlcp_scn *s, const dlcp_scn_node *t,
                             dlcp_sim_agg_config *a) {
  if (t->kind != DLCP_SCN_SEQ || t->n < 2 || t->n > DLCP_SIM_AGG_MAX_TREES) {
    return dlcp_scn_fail(s, t, "aggregation.trees",
                         "expected a list of 2..%u trees, each a list of "
                         "[child, parent] pairs",
                         DLCP_SIM_AGG_MAX_TREES);
  }
  for (size_t i = 0; i < t->n; i++) {
    char f[64];
    snprintf(f, sizeof(f), "aggregation.trees[%zu]", i);
    int rv = aggregation_tree(s, t->items[i], a, (uint32_t)i, f);
    if (rv != 0) {
      return rv;
    }
  }
  a->ntrees = (uint32_t)t->n;
  return 0;
}

/* aggregation.switch (one switch), aggregation.chain (CINA's switches in
 * chain order), aggregation.tree (HINA's) or aggregation.trees (MTINA's):
 * exactly one of them. */
static int aggregation_switches(dlcp_scn *s, const dlcp_scn_node *n,
                                dlcp_sim_agg_config *a) {
  static const char *const keys[] = {"switch", "chain", "tree", "trees"};
  const dlcp_scn_node *given = NULL;
  const char *key = NULL;
  for (size_t i = 0; i < 4; i++) {
    const dlcp_scn_node *v = dlcp_scn_map_get(n, keys[i]);
    if (v && given) {
      char f[64];
      snprintf(f, sizeof(f), "aggregation.%s", keys[i]);
      return dlcp_scn_fail(s, v, f, "expected one of 'switch', 'chain', "
                           "'tree' and 'trees'");
    }
    if (v) {
      given = v;
      key = keys[i];
    }
  }
  a->nchain = 0;
  a->ntrees = 1;
  a->tree = a->trees = false;
  for (uint32_t t = 0; t < DLCP_SIM_AGG_MAX_TREES; t++) {
    for (uint32_t i = 0; i < DLCP_SIM_AGG_MAX_CHAIN; i++) {
      a->parent[t][i] = DLCP_SIM_NONE;
      a->member[t][i] = false;
    }
  }
  const dlcp_scn_node *chain = key && strcmp(key, "chain") == 0 ? given : NULL;
  if (key && strcmp(key, "tree") == 0) {
    a->tree = true;
    return aggregation_tree(s, given, a, 0, "aggregation.tree");
  }
  if (key && strcmp(key, "trees") == 0) {
    a->trees = true;
    return aggregation_trees(s, given, a);
  }
  if (!chain) {
    return dlcp_scn_get_name(s, n, "aggregation", "switch", a->node, true, n);
  }
  if (chain->kind != DLCP_SCN_SEQ || chain->n == 0 ||
      chain->n > DLCP_SIM_AGG_MAX_CHAIN) {
    return dlcp_scn_fail(s, chain, "aggregation.chain",
                         "expected a list of 1..%u switch names (ToR0 first)",
                         DLCP_SIM_AGG_MAX_CHAIN);
  }
  for (size_t i = 0; i < chain->n; i++) {
    const char *t = "";
    int rv = dlcp_scn_scalar(s, chain->items[i], "aggregation.chain", &t);
    if (rv != 0) {
      return rv;
    }
    if (t[0] == '\0' || strlen(t) >= DLCP_SIM_NAME_MAX) {
      return dlcp_scn_fail(s, chain->items[i], "aggregation.chain",
                           "expected names of 1..%u characters",
                           DLCP_SIM_NAME_MAX - 1);
    }
    for (size_t j = 0; j < i; j++) {
      if (strcmp(a->chain[j], t) == 0) {
        return dlcp_scn_fail(s, chain->items[i], "aggregation.chain",
                             "expected each switch once, got '%s' twice", t);
      }
    }
    snprintf(a->chain[i], DLCP_SIM_NAME_MAX, "%s", t);
    a->parent[0][i] = i + 1 < chain->n ? (uint32_t)i + 1 : DLCP_SIM_NONE;
    a->member[0][i] = true;
  }
  a->nchain = (uint32_t)chain->n;
  snprintf(a->node, DLCP_SIM_NAME_MAX, "%s", a->chain[0]);
  return 0;
}

/* aggregation: the switch that runs src/proto/agg and its parameters. */
static int section_aggregation(dlcp_scn *s, const dlcp_scn_node *n) {
  static const char *const keys[] = {
      "switch", "chain", "tree", "trees", "memory", "block_elems", "policy",
      "static_parts", "per_packet", "queue", "resend", NULL};
  static const char *const policies[] = {"shared", "static", NULL};
  const char *p = "aggregation";
  dlcp_sim_agg_config *a = &s->cfg->agg;
  int policy = a->static_partition ? 1 : 0;
  int rv = dlcp_scn_check_keys(s, n, p, keys);
  if (rv || (rv = aggregation_switches(s, n, a)) ||
      (rv = dlcp_scn_get_size(s, n, p, "memory", &a->mem_bytes, 4,
                              1ull << 34)) ||
      (rv = dlcp_scn_get_u32(s, n, p, "block_elems", &a->block_elems, 1,
                             DLCP_AGG_MAX_BLOCK_ELEMS)) ||
      (rv = dlcp_scn_get_enum(s, n, p, "policy", policies, &policy)) ||
      (rv = dlcp_scn_get_u32(s, n, p, "static_parts", &a->static_parts, 1,
                             4096)) ||
      (rv = dlcp_scn_get_time(s, n, p, "per_packet", &a->per_packet_ps)) ||
      (rv = dlcp_scn_get_u32(s, n, p, "queue", &a->queue_pkts, 1,
                             1u << 24)) ||
      (rv = dlcp_scn_get_time(s, n, p, "resend", &a->resend_ps))) {
    return rv;
  }
  a->static_partition = policy == 1;
  if (a->mem_bytes < 4ull * a->block_elems) {
    return dlcp_scn_fail(s, dlcp_scn_map_get(n, "memory"),
                         "aggregation.memory", "expected room for at least "
                         "one block (4 * block_elems = %u bytes)",
                         4 * a->block_elems);
  }
  if (a->resend_ps < DLCP_SIM_PS_PER_NS) {
    return dlcp_scn_fail(s, n, "aggregation.resend", "expected at least 1ns");
  }
  if (!a->static_partition && dlcp_scn_map_get(n, "static_parts")) {
    return dlcp_scn_fail(s, dlcp_scn_map_get(n, "static_parts"),
                         "aggregation.static_parts",
                         "expected policy: static for this field");
  }
  dlcp_scn_where(a->where, n);
  dlcp_scn_set_field(a->field, p);
  return 0;
}

/* outputs.pcap: a list of cables, each "a-b" or [a, b]. */
static int pcap_list(dlcp_scn *s, const dlcp_scn_node *n) {
  if (n->kind != DLCP_SCN_SEQ) {
    return dlcp_scn_fail(s, n, "outputs.pcap", "expected a list of links, each "
                "\"a-b\" or [a, b]");
  }
  for (size_t i = 0; i < n->n; i++) {
    const dlcp_scn_node *it = n->items[i];
    char field[64], a[DLCP_SIM_NAME_MAX] = "", b[DLCP_SIM_NAME_MAX] = "";
    snprintf(field, sizeof(field), "outputs.pcap[%zu]", i);
    bool ok = false;
    if (it->kind == DLCP_SCN_SCALAR) {
      const char *dash = strchr(it->str, '-');
      size_t la = dash ? (size_t)(dash - it->str) : 0;
      if (dash && la > 0 && la < DLCP_SIM_NAME_MAX && dash[1] != '\0' &&
          strlen(dash + 1) < DLCP_SIM_NAME_MAX) {
        memcpy(a, it->str, la);
        a[la] = '\0';
        snprintf(b, sizeof(b), "%s", dash + 1);
        ok = true;
      }
    } else if (it->kind == DLCP_SCN_SEQ && it->n == 2 &&
               it->items[0]->kind == DLCP_SCN_SCALAR &&
               it->items[1]->kind == DLCP_SCN_SCALAR &&
               strlen(it->items[0]->str) < DLCP_SIM_NAME_MAX &&
               strlen(it->items[1]->str) < DLCP_SIM_NAME_MAX) {
      snprintf(a, sizeof(a), "%s", it->items[0]->str);
      snprintf(b, sizeof(b), "%s", it->items[1]->str);
      ok = true;
    }
    if (!ok) {
      return dlcp_scn_fail(s, it, field, "expected a link \"a-b\" or [a, b]");
    }
    int rv = dlcp_sim_config_add_pcap(s->cfg, a, b);
    if (rv != 0) {
      return rv;
    }
    dlcp_sim_pcap_spec *p = &s->cfg->pcaps[s->cfg->npcaps - 1];
    dlcp_scn_where(p->where, it);
    dlcp_scn_set_field(p->field, field);
  }
  return 0;
}

/* Converts the whole tree into s->cfg. */
static int interpret(dlcp_scn *s, const dlcp_scn_node *root, char *out_dir,
                     size_t out_dir_len) {
  static const char *const keys[] = {"name",      "seed",     "stop_at",
                                     "topology",  "switch",   "host",
                                     "transport", "workload", "faults",
                                     "outputs",   "aggregation", NULL};
  int rv = dlcp_scn_check_keys(s, root, "", keys);
  if (rv != 0) {
    return rv;
  }
  dlcp_sim_config *c = s->cfg;
  const dlcp_scn_node *v;
  if ((v = dlcp_scn_map_get(root, "name"))) {
    const char *t = "";
    if ((rv = dlcp_scn_scalar(s, v, "name", &t))) {
      return rv;
    }
    snprintf(c->name, sizeof(c->name), "%s", t);
  }
  if ((rv = dlcp_scn_get_u64(s, root, "", "seed", &c->seed, 0, UINT64_MAX)) ||
      (rv = dlcp_scn_get_time(s, root, "", "stop_at", &c->stop_ps))) {
    return rv;
  }
  if (c->stop_ps == 0) {
    return dlcp_scn_fail(s, dlcp_scn_map_get(root, "stop_at"), "stop_at",
                         "expected > 0");
  }
  /* Transport first: sizes in "pkts" elsewhere depend on its mss. */
  s->mtu = c->transport.mss_bytes + c->transport.header_bytes;
  if ((v = dlcp_scn_map_get(root, "transport")) &&
      (rv = section_transport(s, v))) {
    return rv;
  }
  if ((v = dlcp_scn_map_get(root, "topology")) &&
      (rv = section_topology(s, v))) {
    return rv;
  }
  if ((v = dlcp_scn_map_get(root, "switch")) && (rv = section_switch(s, v))) {
    return rv;
  }
  if ((rv = transport_needs_its_switch(s, root)) != 0) {
    return rv;
  }
  if ((v = dlcp_scn_map_get(root, "host")) && (rv = section_host(s, v))) {
    return rv;
  }
  if ((v = dlcp_scn_map_get(root, "aggregation")) &&
      (rv = section_aggregation(s, v))) {
    return rv;
  }
  if ((v = dlcp_scn_map_get(root, "workload")) &&
      (rv = dlcp_scn_section_workload(s, v))) {
    return rv;
  }
  if ((v = dlcp_scn_map_get(root, "faults"))) {
    if (v->kind != DLCP_SCN_SEQ && v->kind != DLCP_SCN_MAP) {
      return dlcp_scn_fail(s, v, "faults", "expected a list of faults");
    }
    if ((rv = dlcp_scn_for_each_map(s, v, "faults", dlcp_scn_fault_item))) {
      return rv;
    }
  }
  if ((v = dlcp_scn_map_get(root, "outputs"))) {
    static const char *const okeys[] = {"dir", "pcap", NULL};
    if ((rv = dlcp_scn_check_keys(s, v, "outputs", okeys))) {
      return rv;
    }
    const dlcp_scn_node *pc = dlcp_scn_map_get(v, "pcap");
    if (pc && (rv = pcap_list(s, pc))) {
      return rv;
    }
    const dlcp_scn_node *d = dlcp_scn_map_get(v, "dir");
    const char *t = "";
    if (d) {
      if ((rv = dlcp_scn_scalar(s, d, "outputs.dir", &t))) {
        return rv;
      }
      if (t[0] == '\0' || strlen(t) >= out_dir_len) {
        return dlcp_scn_fail(s, d, "outputs.dir", "expected a directory path");
      }
      snprintf(out_dir, out_dir_len, "%s", t);
    }
  }
  return 0;
}

int dlcp_sim_scenario_load(dlcp_sim_config *cfg, const char *text, size_t len,
                           const char *file, const char *const *sets,
                           size_t nsets, char *err, size_t errlen) {
  dlcp_scn s = {cfg, err, errlen, 1500, "."};
  const char *slash = file ? strrchr(file, '/') : NULL;
  if (slash) {
    snprintf(s.dir, sizeof(s.dir), "%.*s", (int)(slash - file), file);
  }
  dlcp_sim_config_default(cfg);
  if (errlen > 0) {
    err[0] = '\0';
  }
  dlcp_scn_node *root = NULL;
  int rv = 0;
  if (text) {
    rv = dlcp_scn_parse(&s, text, len, file, 0, &root);
  }
  for (size_t i = 0; rv == 0 && i < nsets; i++) {
    rv = dlcp_scn_apply_set(&s, &root, sets[i], (unsigned)(i + 1));
  }
  if (rv == 0 && root) {
    rv = interpret(&s, root, cfg->out_dir, sizeof(cfg->out_dir));
  }
  dlcp_scn_node_free(root);
  if (rv != 0) {
    dlcp_sim_config_free(cfg);
    if (rv == DLCP_ERR_NOMEM && errlen > 0 && err[0] == '\0') {
      snprintf(err, errlen, "%s: out of memory", file);
    }
  }
  return rv;
}

int dlcp_sim_scenario_load_file(dlcp_sim_config *cfg, const char *path,
                                const char *const *sets, size_t nsets,
                                char *err, size_t errlen) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
    dlcp_sim_config_default(cfg);
    return DLCP_ERR_SYSTEM;
  }
  size_t cap = 4096, len = 0;
  char *buf = malloc(cap);
  while (buf) {
    size_t got = fread(buf + len, 1, cap - len, f);
    len += got;
    if (len < cap) {
      break;
    }
    if (cap >= (64u << 20)) {
      fclose(f);
      free(buf);
      snprintf(err, errlen, "%s: scenario larger than 64 MiB", path);
      dlcp_sim_config_default(cfg);
      return DLCP_ERR_CONFIG;
    }
    char *nbuf = realloc(buf, cap * 2);
    if (!nbuf) {
      free(buf);
      buf = NULL;
      break;
    }
    buf = nbuf;
    cap *= 2;
  }
  bool bad = ferror(f) != 0;
  fclose(f);
  if (!buf) {
    dlcp_sim_config_default(cfg);
    return DLCP_ERR_NOMEM;
  }
  if (bad) {
    free(buf);
    snprintf(err, errlen, "%s: read error", path);
    dlcp_sim_config_default(cfg);
    return DLCP_ERR_SYSTEM;
  }
  int rv = dlcp_sim_scenario_load(cfg, buf, len, path, sets, nsets, err,
                                  errlen);
  free(buf);
  return rv;
}

/*
 * The MLT seed's simulation set-up (section 5.4.2): leaf-spine with 4
 * spines, 9 ToRs and 16 hosts per ToR at 100 Gbps (4 x 100 Gbps ToR
 * uplinks, so 4:1 oversubscribed), 24 us base RTT across the fabric,
 * 512 KB per switch port, 8 queues, ECN at 65 packets, DCTCP with
 * RTO_min 1 ms, initial window 20, 3 dupACKs and no delayed ACK, flow
 * ECMP.  Traffic: parameter-server training with workers and servers 3:1
 * spread evenly over the racks.  The seed uses ResNet50 (97 MB per
 * iteration); the model is scaled down here so the run takes seconds.
 */
const char dlcp_sim_default_scenario[] =
    "name: mlt-leaf-spine-ps\n"
    "seed: 1\n"
    "topology:\n"
    "  kind: leaf_spine\n"
    "  spines: 4\n"
    "  tors: 9\n"
    "  hosts_per_tor: 16\n"
    "  host_rate: 100Gbps\n"
    "  fabric_rate: 100Gbps\n"
    "  base_rtt: 24us\n"
    "switch:\n"
    "  queues: 8\n"
    "  port_buffer: 512KB\n"
    "  ecn_threshold: 65pkts\n"
    "transport:\n"
    "  kind: dctcp\n"
    "  rto_min: 1ms\n"
    "  init_cwnd: 20\n"
    "  dupack_threshold: 3\n"
    "  delayed_ack: false\n"
    "  load_balancing: ecmp\n"
    "workload:\n"
    "  ps:\n"
    "    workers: 108\n"
    "    servers: 36\n"
    "    model_size: 3600KB\n"
    "    iterations: 2\n"
    "    compute_time: 100us\n";
