/*
 * output.c: results.
 *
 * Four CSV files and one JSON summary, written only from simulated
 * quantities so that a configuration and seed reproduce them byte for
 * byte: flows.csv (one row per flow, in order of completion, ties by id,
 * unfinished flows last), links.csv (per directed link: bytes, utilisation
 * over the run, drop/mark/trim counters, queue high-water mark),
 * queues.csv (per port queue that saw traffic), iterations.csv (PS jobs:
 * per-iteration start, end and duration), collectives.csv (collective
 * jobs: per job and iteration, start, end, duration and the slowest
 * rank's all-reduce) and summary.json.  Times are in
 * microseconds with six decimals, i.e. exact to the picosecond.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "coll/coll.h"
#include "sim/sim.h"

static double ps_us(dlcp_sim_ps t) {
  return (double)t / 1e6;
}

static const char *host_name(const dlcp_sim *sim, uint32_t host) {
  return sim->net.nodes[sim->net.hosts[host]].name;
}

/* The hosts a job's summary line names (summary.json has them all). */
#define SUMMARY_HOSTS 8u

/* |s| as a JSON string: names come from the scenario and may hold any
 * character but NUL. */
static void json_str(FILE *f, const char *s) {
  fputc('"', f);
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\') {
      fprintf(f, "\\%c", c);
    } else if (c < 0x20) {
      fprintf(f, "\\u%04x", c);
    } else {
      fputc(c, f);
    }
  }
  fputc('"', f);
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return (x > y) - (x < y);
}

int dlcp_sim_fct_stats_get(const dlcp_sim *sim, int group,
                           dlcp_sim_fct_stats *st) {
  memset(st, 0, sizeof(*st));
  uint64_t *fct = malloc((sim->nflows + 1) * sizeof(*fct));
  if (!fct) {
    return DLCP_ERR_NOMEM;
  }
  uint32_t n = 0;
  double sum = 0;
  for (uint32_t i = 0; i < sim->nflows; i++) {
    const dlcp_sim_flow *f = &sim->flows[i];
    if (f->finish_ps == DLCP_SIM_PS_NEVER ||
        (group >= 0 && (int)f->group != group)) {
      continue;
    }
    fct[n++] = f->finish_ps - f->start_ps;
    sum += (double)(f->finish_ps - f->start_ps);
  }
  if (n > 0) {
    qsort(fct, n, sizeof(*fct), cmp_u64);
    st->count = n;
    st->mean_us = sum / n / 1e6;
    /* Nearest-rank percentiles. */
    st->p50_us = ps_us(fct[(n * 50 + 99) / 100 - 1]);
    st->p99_us = ps_us(fct[(n * 99 + 99) / 100 - 1]);
    st->max_us = ps_us(fct[n - 1]);
  }
  free(fct);
  return 0;
}

static const char *group_name(dlcp_sim_flow_group g) {
  switch (g) {
  case DLCP_SIM_GROUP_EXPLICIT:
    return "explicit";
  case DLCP_SIM_GROUP_INCAST:
    return "incast";
  case DLCP_SIM_GROUP_PS_PUSH:
    return "ps_push";
  case DLCP_SIM_GROUP_PS_PULL:
    return "ps_pull";
  case DLCP_SIM_GROUP_COLL:
    return "collective";
  case DLCP_SIM_GROUP_BACKGROUND:
    return "background";
  }
  return "?";
}

/* A flows.csv row, formatted by hand: printf's floating point was a third
 * of a run that wrote two million rows (a 1,024-rank ring).  Times go as
 * microseconds with six decimals from the integer picoseconds, which is
 * what "%.6f" of ps / 1e6 printed, exactly. */
typedef struct row {
  char b[512]; /* 17 fields, two names of DLCP_SIM_NAME_MAX */
  size_t n;
} row;

/* Appends |s| (a name or a word) and |sep| unless it is NUL. */
static void row_str(row *r, const char *s, char sep) {
  size_t len = strnlen(s, DLCP_SIM_NAME_MAX);
  memcpy(r->b + r->n, s, len);
  r->n += len;
  if (sep) {
    r->b[r->n++] = sep;
  }
}

/* Appends |v|'s decimal digits, at least |width| of them, and |sep|. */
static void row_digits(row *r, uint64_t v, int width, char sep) {
  char d[24];
  int k = 0;
  do {
    d[k++] = (char)('0' + v % 10);
    v /= 10;
  } while (v || k < width);
  while (k > 0) {
    r->b[r->n++] = d[--k];
  }
  r->b[r->n++] = sep;
}

static void row_u64(row *r, uint64_t v, char sep) {
  row_digits(r, v, 1, sep);
}

/* Appends |t| in microseconds with six decimals, or nothing for NEVER. */
static void row_us(row *r, dlcp_sim_ps t, char sep) {
  if (t != DLCP_SIM_PS_NEVER) {
    row_digits(r, t / 1000000, 1, '.');
    row_digits(r, t % 1000000, 6, sep);
  } else {
    r->b[r->n++] = sep;
  }
}

/* qsort context-free comparison needs the flows; sort indices by a key
 * array instead. */
typedef struct flow_key {
  dlcp_sim_ps finish;
  uint32_t id;
} flow_key;

static int cmp_key(const void *a, const void *b) {
  const flow_key *x = a, *y = b;
  if (x->finish != y->finish) {
    return x->finish < y->finish ? -1 : 1;
  }
  return (x->id > y->id) - (x->id < y->id);
}

int dlcp_sim_write_flows_csv(const dlcp_sim *sim, FILE *f) {
  flow_key *keys = malloc((sim->nflows + 1) * sizeof(*keys));
  if (!keys) {
    return DLCP_ERR_NOMEM;
  }
  for (uint32_t i = 0; i < sim->nflows; i++) {
    keys[i].finish = sim->flows[i].finish_ps;
    keys[i].id = i;
  }
  qsort(keys, sim->nflows, sizeof(*keys), cmp_key);
  fprintf(f, "id,group,iteration,src,dst,size_bytes,priority,start_us,"
             "finish_us,fct_us,rx_done_us,pkts_sent,retransmits,timeouts,"
             "ecn_echoes,delivered_bytes,status\n");
  for (uint32_t k = 0; k < sim->nflows; k++) {
    const dlcp_sim_flow *fl = &sim->flows[keys[k].id];
    row r = {.n = 0};
    row_u64(&r, fl->id, ',');
    row_str(&r, group_name(fl->group), ',');
    row_u64(&r, fl->iteration, ',');
    row_str(&r, host_name(sim, fl->src), ',');
    row_str(&r, host_name(sim, fl->dst), ',');
    row_u64(&r, fl->size_bytes, ',');
    row_u64(&r, fl->prio, ',');
    row_us(&r, fl->start_ps, ',');
    bool finished = fl->finish_ps != DLCP_SIM_PS_NEVER;
    row_us(&r, fl->finish_ps, ',');
    row_us(&r, finished ? fl->finish_ps - fl->start_ps : DLCP_SIM_PS_NEVER,
           ',');
    row_us(&r, fl->rx_done_ps, ',');
    row_u64(&r, fl->pkts_sent, ',');
    row_u64(&r, fl->retransmits, ',');
    row_u64(&r, fl->timeouts, ',');
    row_u64(&r, fl->ecn_echoes, ',');
    row_u64(&r, fl->delivered_bytes, ',');
    int64_t status = fl->status;
    if (status < 0) {
      row_str(&r, "-", '\0');
    }
    row_u64(&r, (uint64_t)(status < 0 ? -status : status), '\n');
    fwrite(r.b, 1, r.n, f);
  }
  free(keys);
  return 0;
}

typedef struct port_totals {
  uint64_t marks, drops_selective, drops_buffer, trims, max_bytes;
} port_totals;

static port_totals port_sum(const dlcp_sim_port *p) {
  port_totals t = {0, 0, 0, 0, 0};
  for (uint32_t q = 0; q < DLCP_SIM_MAX_QUEUES; q++) {
    t.marks += p->q[q].marks;
    t.drops_selective += p->q[q].drops_selective;
    t.drops_buffer += p->q[q].drops_buffer;
    t.trims += p->q[q].trims;
    t.max_bytes += p->q[q].max_bytes;
  }
  return t;
}

static void write_links_csv(const dlcp_sim *sim, FILE *f) {
  const dlcp_sim_net *net = &sim->net;
  double end_s = (double)dlcp_sim_end_time(sim) / 1e12;
  fprintf(f, "port,from,to,rate_gbps,tx_bytes,tx_pkts,data_payload_bytes,"
             "utilisation,marks,drops_selective,drops_buffer,drops_loss,"
             "drops_down,trims,max_queue_bytes\n");
  for (uint32_t i = 0; i < net->nports; i++) {
    const dlcp_sim_port *p = &net->ports[i];
    port_totals t = port_sum(p);
    double util = end_s > 0 ? (double)p->tx_bytes * 8.0 /
                                  ((double)p->rate_bps * end_s)
                            : 0.0;
    fprintf(f, "%u,%s,%s,%.3f,%llu,%llu,%llu,%.6f,%llu,%llu,%llu,%llu,%llu,"
               "%llu,%llu\n",
            i, net->nodes[p->node].name, net->nodes[p->peer].name,
            dlcp_sim_speed_to_gbps(p->rate_bps),
            (unsigned long long)p->tx_bytes, (unsigned long long)p->tx_pkts,
            (unsigned long long)p->tx_data_payload_bytes, util,
            (unsigned long long)t.marks,
            (unsigned long long)t.drops_selective,
            (unsigned long long)t.drops_buffer,
            (unsigned long long)p->drops_loss,
            (unsigned long long)p->drops_down, (unsigned long long)t.trims,
            (unsigned long long)t.max_bytes);
  }
}

static void write_queues_csv(const dlcp_sim *sim, FILE *f) {
  const dlcp_sim_net *net = &sim->net;
  fprintf(f, "port,from,to,queue,enq_pkts,marks,drops_selective,"
             "drops_buffer,trims,max_bytes\n");
  for (uint32_t i = 0; i < net->nports; i++) {
    const dlcp_sim_port *p = &net->ports[i];
    for (uint32_t qi = 0; qi < p->cfg->nqueues; qi++) {
      const dlcp_sim_queue *q = &p->q[qi];
      if (q->enq_pkts == 0 && q->drops_buffer == 0 &&
          q->drops_selective == 0) {
        continue;
      }
      fprintf(f, "%u,%s,%s,%u,%llu,%llu,%llu,%llu,%llu,%llu\n", i,
              net->nodes[p->node].name, net->nodes[p->peer].name, qi,
              (unsigned long long)q->enq_pkts, (unsigned long long)q->marks,
              (unsigned long long)q->drops_selective,
              (unsigned long long)q->drops_buffer,
              (unsigned long long)q->trims,
              (unsigned long long)q->max_bytes);
    }
  }
}

/* Per PS iteration: first push start and last pull finish. */
static void iteration_span(const dlcp_sim *sim, uint32_t it, dlcp_sim_ps *start,
                           dlcp_sim_ps *end, bool *complete) {
  *start = DLCP_SIM_PS_NEVER;
  *end = 0;
  *complete = true;
  for (uint32_t i = 0; i < sim->nflows; i++) {
    const dlcp_sim_flow *f = &sim->flows[i];
    if (f->iteration != it || (f->group != DLCP_SIM_GROUP_PS_PUSH &&
                               f->group != DLCP_SIM_GROUP_PS_PULL)) {
      continue;
    }
    if (f->group == DLCP_SIM_GROUP_PS_PUSH && f->start_ps < *start) {
      *start = f->start_ps;
    }
    if (f->finish_ps == DLCP_SIM_PS_NEVER) {
      *complete = false;
    } else if (f->group == DLCP_SIM_GROUP_PS_PULL && f->finish_ps > *end) {
      *end = f->finish_ps;
    }
  }
}

static void write_iterations_csv(const dlcp_sim *sim, FILE *f) {
  fprintf(f, "iteration,start_us,end_us,duration_us\n");
  for (uint32_t it = 0; it < sim->ps_iterations; it++) {
    dlcp_sim_ps s, e;
    bool complete;
    iteration_span(sim, it, &s, &e, &complete);
    if (!complete || s == DLCP_SIM_PS_NEVER) {
      fprintf(f, "%u,,,\n", it);
      continue;
    }
    fprintf(f, "%u,%.6f,%.6f,%.6f\n", it, ps_us(s), ps_us(e), ps_us(e - s));
  }
}

static void write_collectives_csv(const dlcp_sim *sim, FILE *f) {
  fprintf(f, "job,algo,ranks,bytes,iteration,start_us,end_us,duration_us,"
             "collective_us,agree_us\n");
  for (uint32_t j = 0; j < dlcp_sim_coll_jobs(sim); j++) {
    dlcp_sim_coll_report r;
    dlcp_sim_coll_get_report(sim, j, &r);
    for (uint32_t i = 0; i < r.iterations; i++) {
      const dlcp_sim_coll_iter *it = &r.iter[i];
      fprintf(f, "%u,%s,%u,%llu,%u,", j, r.algo_name, r.ranks,
              (unsigned long long)r.bytes, i);
      if (it->ranks_done < r.ranks) {
        fprintf(f, ",,,,\n");
        continue;
      }
      fprintf(f, "%.6f,%.6f,%.6f,%.6f,%.6f\n", ps_us(it->start_ps),
              ps_us(it->end_ps), ps_us(it->duration_ps), ps_us(it->coll_ps),
              ps_us(it->agree_ps));
    }
  }
}


/* PFC's counters over every switch ingress (pfc.c). */
typedef struct pfc_totals {
  uint64_t pauses, headroom_drops;
  dlcp_sim_ps paused_ps;
} pfc_totals;

static pfc_totals pfc_totals_of(const dlcp_sim *sim) {
  pfc_totals t = {0, 0, 0};
  for (uint32_t p = 0; sim->net.pfc_in && p < sim->net.nports; p++) {
    t.pauses += sim->net.pfc_in[p].pauses;
    t.headroom_drops += sim->net.pfc_in[p].headroom_drops;
    t.paused_ps += sim->net.pfc_in[p].paused_ps;
  }
  return t;
}

static void json_colls(const dlcp_sim *sim, FILE *f) {
  fprintf(f, "  \"collectives\": [");
  for (uint32_t j = 0; j < dlcp_sim_coll_jobs(sim); j++) {
    dlcp_sim_coll_report r;
    dlcp_sim_coll_get_report(sim, j, &r);
    fprintf(f,
            "%s\n    {\"job\": %u, \"algo\": \"%s\", \"kind\": \"%s\", "
            "\"ranks\": %u, "
            "\"bytes\": %llu, \"scale\": %u, \"done\": %s, "
            "\"status\": %d, \"failed_rank\": %d, "
            "\"verify_errors\": %llu, \"min_delivered\": %.6f, "
            "\"bypasses\": %u, ",
            j ? "," : "", j, r.algo_name,
            dlcp_coll_kind_name(r.kind), r.ranks, (unsigned long long)r.bytes,
            r.scale, r.done ? "true" : "false", r.status, r.failed_rank,
            (unsigned long long)r.verify_errors, r.min_delivered, r.bypasses);
    fprintf(f, "\"hosts\": [");
    for (uint32_t k = 0; k < r.ranks; k++) {
      fputs(k ? ", " : "", f);
      json_str(f, host_name(sim, dlcp_sim_coll_rank_host(sim, j, k)));
    }
    fprintf(f, "], ");
    if (r.algo == DLCP_ALGO_INA || r.algo == DLCP_ALGO_RA_INA) {
      fprintf(f, "\"ina_groups\": %llu, \"ring_groups\": %llu, "
                 "\"ina_retransmits\": %llu, \"ina_results\": %llu, "
                 "\"ina_results_marked\": %llu, \"ina_cwnd_cuts\": %llu, ",
              (unsigned long long)r.ina_groups,
              (unsigned long long)r.ring_groups,
              (unsigned long long)r.ina_retransmits,
              (unsigned long long)r.ina_results,
              (unsigned long long)r.ina_results_marked,
              (unsigned long long)r.ina_cwnd_cuts);
    }
    fprintf(f, "\"iterations\": [");
    for (uint32_t i = 0; i < r.iterations; i++) {
      const dlcp_sim_coll_iter *it = &r.iter[i];
      if (it->ranks_done < r.ranks) {
        fprintf(f, "%snull", i ? ", " : "");
      } else {
        fprintf(f,
                "%s{\"duration_us\": %.6f, \"collective_us\": %.6f, "
                "\"agree_us\": %.6f}",
                i ? ", " : "", ps_us(it->duration_ps), ps_us(it->coll_ps),
                ps_us(it->agree_ps));
      }
    }
    fprintf(f, "]}");
  }
  fprintf(f, "%s],\n", dlcp_sim_coll_jobs(sim) ? "\n  " : "");
  fprintf(f, "  \"pauses\": %llu,\n",
          (unsigned long long)dlcp_sim_coll_pauses(sim));
  dlcp_agg_stats as;
  uint64_t qdrops;
  if (dlcp_sim_agg_get_stats(sim, &as, &qdrops)) {
    fprintf(f, "  \"aggregation\": {\"switch\": ");
    json_str(f, sim->cfg.agg.node);
    fprintf(f, ", \"chain\": %u, "
               "\"chain_forwards\": %llu, \"chain_forward_resends\": %llu, "
               "\"parent_nacks\": %llu, \"aggregators\": "
               "%u, \"contributions\": %llu, \"claims\": %llu, "
               "\"ring_verdicts\": %llu, \"results_sent\": %llu, "
               "\"resent\": %llu, \"freed\": %llu, \"nacks_sent\": %llu, "
               "\"malformed\": %llu, \"foreign\": %llu, "
               "\"queue_drops\": %llu},\n",
            sim->cfg.agg.nchain,
            (unsigned long long)as.forwards,
            (unsigned long long)as.forward_resends,
            (unsigned long long)as.parent_nacks, as.aggs_total,
            (unsigned long long)as.contrib, (unsigned long long)as.claims,
            (unsigned long long)as.ring_verdicts,
            (unsigned long long)as.results_sent,
            (unsigned long long)as.resent, (unsigned long long)as.freed,
            (unsigned long long)as.nacks_sent,
            (unsigned long long)as.malformed,
            (unsigned long long)as.foreign, (unsigned long long)qdrops);
  }
  if (sim->net.pfc_in) {
    pfc_totals p = pfc_totals_of(sim);
    fprintf(f, "  \"pfc\": {\"pause_frames\": %llu, \"paused_us\": %.6f, "
               "\"headroom_drops\": %llu},\n",
            (unsigned long long)p.pauses, ps_us(p.paused_ps),
            (unsigned long long)p.headroom_drops);
  }
}

typedef struct net_totals {
  uint64_t marks, drops_selective, drops_buffer, drops_loss, drops_down,
      trims, noroute, retransmits, timeouts, tx_bytes;
} net_totals;

static net_totals totals(const dlcp_sim *sim) {
  net_totals t;
  memset(&t, 0, sizeof(t));
  const dlcp_sim_net *net = &sim->net;
  for (uint32_t i = 0; i < net->nports; i++) {
    const dlcp_sim_port *p = &net->ports[i];
    port_totals pt = port_sum(p);
    t.marks += pt.marks;
    t.drops_selective += pt.drops_selective;
    t.drops_buffer += pt.drops_buffer;
    t.trims += pt.trims;
    t.drops_loss += p->drops_loss;
    t.drops_down += p->drops_down;
    t.tx_bytes += p->tx_bytes;
  }
  for (uint32_t i = 0; i < net->nnodes; i++) {
    t.noroute += net->nodes[i].drops_noroute;
  }
  for (uint32_t i = 0; i < sim->nflows; i++) {
    t.retransmits += sim->flows[i].retransmits;
    t.timeouts += sim->flows[i].timeouts;
  }
  return t;
}

/* Loss-tolerant transports may finish a flow with part of it missing;
 * nothing is lost silently, so it is counted and reported. */
typedef struct delivery {
  uint32_t partial; /* finished at the receiver with bytes missing */
  uint32_t failed;  /* transport reported an error (not a withdrawn
                       receive: those are counted as canceled) */
  double min_fraction;
} delivery;

static delivery delivery_of(const dlcp_sim *sim) {
  delivery d = {0, 0, 1.0};
  for (uint32_t i = 0; i < sim->nflows; i++) {
    const dlcp_sim_flow *fl = &sim->flows[i];
    d.failed += fl->status != 0 && fl->status != DLCP_ERR_CANCELED;
    if (fl->rx_done_ps != DLCP_SIM_PS_NEVER &&
        fl->delivered_bytes < fl->size_bytes) {
      double frac = (double)fl->delivered_bytes / (double)fl->size_bytes;
      d.partial++;
      d.min_fraction = frac < d.min_fraction ? frac : d.min_fraction;
    }
  }
  return d;
}

static const char *topo_name(dlcp_sim_topo_kind k) {
  switch (k) {
  case DLCP_SIM_TOPO_LEAF_SPINE:
    return "leaf_spine";
  case DLCP_SIM_TOPO_FAT_TREE:
    return "fat_tree";
  case DLCP_SIM_TOPO_EXPLICIT:
    return "explicit";
  }
  return "?";
}

static void json_fct(FILE *f, const char *name, const dlcp_sim_fct_stats *s,
                     bool last) {
  fprintf(f, "    \"%s\": {\"count\": %u, \"mean_us\": %.6f, \"p50_us\": "
             "%.6f, \"p99_us\": %.6f, \"max_us\": %.6f}%s\n",
          name, s->count, s->mean_us, s->p50_us, s->p99_us, s->max_us,
          last ? "" : ",");
}

/* The MLT counters the summary prints, in its order: the key in
 * summary.json, and the words around the number on stdout's mlt line
 * (after |sep|).  One table, so both print the same counters. */
static const struct {
  const char *key;
  size_t off; /* in dlcp_mlt_stats */
  const char *sep, *before, *after;
} MLT_COUNTERS[] = {
    {"window_timeouts", offsetof(dlcp_mlt_stats, window_timeouts), "", "",
     " window timeouts"},
    {"acks_quiet", offsetof(dlcp_mlt_stats, acks_quiet), ", ", "",
     " quiet ACKs"},
    {"bitmaps_early", offsetof(dlcp_mlt_stats, bitmaps_early), "; ",
     "holes asked for ", " times early"},
    {"bitmaps_unprompted", offsetof(dlcp_mlt_stats, bitmaps_unprompted), ", ",
     "", " on a round's last packet"},
    {"control_retx", offsetof(dlcp_mlt_stats, control_retx), "; ", "",
     " control datagrams sent again"},
    {"cuts_ecn", offsetof(dlcp_mlt_stats, cuts_ecn), "; ", "rate cuts ",
     " for ECN"},
    {"cuts_delay", offsetof(dlcp_mlt_stats, cuts_delay), ", ", "",
     " for delay"},
    {"paths_left_out", offsetof(dlcp_mlt_stats, paths_left_out), "; ", "",
     " paths left out"},
    {"paths_rerouted", offsetof(dlcp_mlt_stats, paths_rerouted), ", ", "",
     " rerouted"},
};
#define MLT_NCOUNTERS (sizeof(MLT_COUNTERS) / sizeof(MLT_COUNTERS[0]))

static unsigned long long mlt_counter(const dlcp_mlt_stats *m, size_t i) {
  uint64_t v;
  memcpy(&v, (const char *)m + MLT_COUNTERS[i].off, sizeof(v));
  return (unsigned long long)v;
}

static void write_summary_json(const dlcp_sim *sim, FILE *f) {
  const dlcp_sim_net *net = &sim->net;
  net_totals t = totals(sim);
  dlcp_sim_fct_stats all, g[DLCP_SIM_NGROUPS];
  dlcp_sim_fct_stats_get(sim, -1, &all);
  for (int i = 0; i < (int)DLCP_SIM_NGROUPS; i++) {
    dlcp_sim_fct_stats_get(sim, i, &g[i]);
  }
  fprintf(f, "{\n");
  fprintf(f, "  \"scenario\": ");
  json_str(f, sim->cfg.name);
  fprintf(f, ",\n");
  fprintf(f, "  \"seed\": %llu,\n", (unsigned long long)sim->cfg.seed);
  fprintf(f, "  \"transport\": \"%s\",\n", sim->ops->name);
  fprintf(f, "  \"topology\": {\"kind\": \"%s\", \"hosts\": %u, \"nodes\": "
             "%u, \"links\": %u},\n",
          topo_name(sim->cfg.topo.kind), net->nhosts, net->nnodes,
          net->nports / 2);
  fprintf(f, "  \"sim_end_us\": %.6f,\n", ps_us(dlcp_sim_end_time(sim)));
  fprintf(f, "  \"events\": %llu,\n",
          (unsigned long long)sim->engine.nevents);
  fprintf(f,
          "  \"flows\": {\"total\": %u, \"finished\": %u, \"canceled\": "
          "%u},\n",
          sim->nflows, sim->flows_done, sim->flows_canceled);
  fprintf(f, "  \"fct\": {\n");
  json_fct(f, "all", &all, false);
  json_fct(f, "explicit", &g[0], false);
  json_fct(f, "incast", &g[1], false);
  json_fct(f, "ps_push", &g[2], false);
  json_fct(f, "ps_pull", &g[3], false);
  json_fct(f, "collective", &g[4], false);
  json_fct(f, "background", &g[5], true);
  fprintf(f, "  },\n");
  fprintf(f, "  \"iterations\": [");
  for (uint32_t it = 0; it < sim->ps_iterations; it++) {
    dlcp_sim_ps s, e;
    bool complete;
    iteration_span(sim, it, &s, &e, &complete);
    if (complete && s != DLCP_SIM_PS_NEVER) {
      fprintf(f, "%s%.6f", it ? ", " : "", ps_us(e - s));
    } else {
      fprintf(f, "%snull", it ? ", " : "");
    }
  }
  fprintf(f, "],\n");
  json_colls(sim, f);
  delivery d = delivery_of(sim);
  fprintf(f, "  \"delivery\": {\"partial_flows\": %u, \"failed_flows\": %u, "
             "\"min_fraction\": %.6f},\n",
          d.partial, d.failed, d.min_fraction);
  fprintf(f, "  \"counters\": {\"tx_bytes\": %llu, \"ecn_marks\": %llu, "
             "\"drops_selective\": %llu, \"drops_buffer\": %llu, "
             "\"drops_loss\": %llu, \"drops_link_down\": %llu, "
             "\"drops_no_route\": %llu, \"trims\": %llu, "
             "\"retransmits\": %llu, \"timeouts\": %llu, "
             "\"peak_packets\": %llu}",
          (unsigned long long)t.tx_bytes, (unsigned long long)t.marks,
          (unsigned long long)t.drops_selective,
          (unsigned long long)t.drops_buffer,
          (unsigned long long)t.drops_loss, (unsigned long long)t.drops_down,
          (unsigned long long)t.noroute, (unsigned long long)t.trims,
          (unsigned long long)t.retransmits, (unsigned long long)t.timeouts,
          (unsigned long long)sim->pool.peak);
  dlcp_mlt_stats m;
  if (dlcp_sim_mlt_sum(sim, &m)) {
    fprintf(f, ",\n  \"mlt\": {");
    for (size_t i = 0; i < MLT_NCOUNTERS; i++) {
      fprintf(f, "%s\"%s\": %llu", i > 0 ? ", " : "", MLT_COUNTERS[i].key,
              mlt_counter(&m, i));
    }
    fprintf(f, "}");
  }
  fprintf(f, "\n}\n");
}

typedef void (*writer_fn)(const dlcp_sim *sim, FILE *f);

static void flows_writer(const dlcp_sim *sim, FILE *f) {
  dlcp_sim_write_flows_csv(sim, f);
}

static int write_file(const dlcp_sim *sim, const char *dir, const char *name,
                      writer_fn fn, char *err, size_t errlen) {
  char path[4096];
  snprintf(path, sizeof(path), "%s/%s", dir, name);
  FILE *f = fopen(path, "w");
  if (!f) {
    snprintf(err, errlen, "%s: cannot create: %s", path, strerror(errno));
    return DLCP_ERR_SYSTEM;
  }
  fn(sim, f);
  if (ferror(f) || fclose(f) != 0) {
    snprintf(err, errlen, "%s: write failed", path);
    return DLCP_ERR_SYSTEM;
  }
  return 0;
}

int dlcp_sim_prepare_outdir(const char *dir, char *err, size_t errlen) {
  struct stat st;
  char probe[4096];
  FILE *f;
  if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
    snprintf(err, errlen, "%s: cannot create directory: %s", dir,
             strerror(errno));
    return DLCP_ERR_SYSTEM;
  }
  if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
    snprintf(err, errlen, "%s: not a directory", dir);
    return DLCP_ERR_SYSTEM;
  }
  /* Permissions alone do not tell (read-only mounts, root): try it. */
  snprintf(probe, sizeof(probe), "%s/.dlcp-sim-write-test", dir);
  f = fopen(probe, "w");
  if (f == NULL) {
    snprintf(err, errlen, "%s: cannot create files in it: %s", dir,
             strerror(errno));
    return DLCP_ERR_SYSTEM;
  }
  fclose(f);
  remove(probe);
  return 0;
}

int dlcp_sim_write_outputs(const dlcp_sim *sim, const char *dir, char *err,
                           size_t errlen) {
  int prv = dlcp_sim_prepare_outdir(dir, err, errlen);
  if (prv != 0) {
    return prv;
  }
  struct {
    const char *name;
    writer_fn fn;
  } files[] = {{"flows.csv", flows_writer},
               {"links.csv", write_links_csv},
               {"queues.csv", write_queues_csv},
               {"iterations.csv", write_iterations_csv},
               {"collectives.csv", write_collectives_csv},
               {"summary.json", write_summary_json}};
  for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
    if (files[i].fn == write_iterations_csv && sim->ps_iterations == 0) {
      continue;
    }
    if (files[i].fn == write_collectives_csv && !dlcp_sim_coll_jobs(sim)) {
      continue;
    }
    int rv = write_file(sim, dir, files[i].name, files[i].fn, err, errlen);
    if (rv != 0) {
      return rv;
    }
  }
  return 0;
}

void dlcp_sim_print_summary(const dlcp_sim *sim, FILE *f, double wall_s) {
  const dlcp_sim_net *net = &sim->net;
  const dlcp_sim_config *c = &sim->cfg;
  net_totals t = totals(sim);
  dlcp_sim_fct_stats all;
  dlcp_sim_fct_stats_get(sim, -1, &all);
  fprintf(f, "scenario   %s (seed %llu)\n", c->name,
          (unsigned long long)c->seed);
  fprintf(f, "topology   %s: %u hosts, %u switches, %u links",
          topo_name(c->topo.kind), net->nhosts, net->nnodes - net->nhosts,
          net->nports / 2);
  if (c->topo.kind == DLCP_SIM_TOPO_LEAF_SPINE && c->topo.tors > 1) {
    double over = (double)c->topo.hosts_per_tor *
                  (double)c->topo.host_rate_bps /
                  ((double)c->topo.spines * (double)c->topo.fabric_rate_bps);
    fprintf(f, ", oversubscription %.2f:1", over);
  }
  fprintf(f, "\n");
  bool pairs = dlcp_sim_kind_is_tcp(c->transport.kind) &&
               c->transport.dctcp.persistent && dlcp_sim_coll_jobs(sim);
  fprintf(f, "transport  %s%s, switch %u queues, %llu B/port%s\n",
          sim->ops->name,
          pairs ? " (collectives on one connection a pair)" : "", c->sw.nqueues,
          (unsigned long long)c->sw.port_buffer_bytes,
          c->sw.shared_buffer_bytes ? " (shared buffer)" : "");
  fprintf(f, "flows      %u finished of %u", sim->flows_done, sim->nflows);
  if (sim->flows_canceled) {
    /* Receives posted ahead and withdrawn (a collective's canceled
     * receive): their flows never started. */
    fprintf(f, " (%u canceled)", sim->flows_canceled);
  }
  fprintf(f, "\n");
  if (all.count) {
    fprintf(f, "fct        mean %.1f us, p50 %.1f us, p99 %.1f us, max %.1f "
               "us\n",
            all.mean_us, all.p50_us, all.p99_us, all.max_us);
  }
  for (uint32_t it = 0; it < sim->ps_iterations; it++) {
    dlcp_sim_ps s, e;
    bool complete;
    iteration_span(sim, it, &s, &e, &complete);
    if (complete && s != DLCP_SIM_PS_NEVER) {
      fprintf(f, "iteration  %u: %.1f us\n", it, ps_us(e - s));
    } else {
      fprintf(f, "iteration  %u: incomplete\n", it);
    }
  }
  for (uint32_t j = 0; j < dlcp_sim_coll_jobs(sim); j++) {
    dlcp_sim_coll_report r;
    dlcp_sim_coll_get_report(sim, j, &r);
    const char *what =
        r.kind == DLCP_COLL_REDUCE_SCATTER ? "reduce-scatter" : "all-reduce";
    fprintf(f, "collective %u: %s %s, %u ranks on ", j, r.algo_name, what,
            r.ranks);
    /* Where the job landed: its first hosts in rank order. */
    for (uint32_t k = 0; k < r.ranks && k < SUMMARY_HOSTS; k++) {
      fprintf(f, "%s%s", k ? " " : "",
              host_name(sim, dlcp_sim_coll_rank_host(sim, j, k)));
    }
    if (r.ranks > SUMMARY_HOSTS) {
      fprintf(f, " ...");
    }
    fprintf(f, ", %.3f MB", (double)r.bytes / 1e6);
    if (r.scale > 1) {
      fprintf(f, " (buffers 1/%u)", r.scale);
    }
    if (r.status != 0) {
      fprintf(f, ", FAILED: %s (rank %d)", dlcp_strerror(r.status),
              r.failed_rank);
    } else if (r.verify_errors) {
      fprintf(f, ", %llu WRONG elements",
              (unsigned long long)r.verify_errors);
    } else if (r.min_delivered < 1.0) {
      fprintf(f, ", lowest delivered %.4f", r.min_delivered);
    } else {
      fprintf(f, ", exact");
    }
    if (r.bypasses) {
      fprintf(f, ", %u bypasses", r.bypasses);
    }
    if (r.algo == DLCP_ALGO_INA || r.algo == DLCP_ALGO_RA_INA) {
      fprintf(f, ", %llu groups by the switch, %llu by ring, %llu re-sent",
              (unsigned long long)r.ina_groups,
              (unsigned long long)r.ring_groups,
              (unsigned long long)r.ina_retransmits);
    }
    fprintf(f, "\n");
    for (uint32_t i = 0; i < r.iterations; i++) {
      const dlcp_sim_coll_iter *it = &r.iter[i];
      if (it->ranks_done < r.ranks) {
        fprintf(f, "iteration  %u: incomplete\n", i);
      } else {
        fprintf(f, "iteration  %u: %.1f us (slowest %s %.1f us", i,
                ps_us(it->duration_ps), what, ps_us(it->coll_ps));
        if (it->agree_ps) {
          fprintf(f, ", of which agreeing on exponents %.1f us",
                  ps_us(it->agree_ps));
        }
        fprintf(f, ")\n");
      }
    }
  }
  if (dlcp_sim_coll_pauses(sim)) {
    fprintf(f, "pauses     %llu NIC pauses\n",
            (unsigned long long)dlcp_sim_coll_pauses(sim));
  }
  dlcp_agg_stats as;
  uint64_t qdrops;
  if (dlcp_sim_agg_get_stats(sim, &as, &qdrops)) {
    const dlcp_sim_agg_config *ac = &sim->cfg.agg;
    if (ac->nchain) {
      uint32_t root = 0;
      while (ac->parent[0][root] != DLCP_SIM_NONE) {
        root = ac->parent[0][root];
      }
      const char *kind = ac->trees ? "trees" : ac->tree ? "tree" : "chain";
      fprintf(f, "%-11s%s -> ... -> %s%s (%u switches): %llu partial "
                 "sums passed up (%llu re-sent), %llu NACKs from parents\n",
              kind, ac->tree || ac->trees ? "leaves" : ac->chain[0],
              ac->chain[root], ac->trees ? ", ..." : "", ac->nchain,
              (unsigned long long)as.forwards,
              (unsigned long long)as.forward_resends,
              (unsigned long long)as.parent_nacks);
    }
    fprintf(f, "aggregation %s%s: %u aggregators, %llu contributions, %llu "
               "claims, %llu ring verdicts, %llu results (%llu re-sent), "
               "%llu freed, %llu rejected, %llu dropped (queue full)\n",
            sim->cfg.agg.node,
            !sim->cfg.agg.nchain ? ""
            : sim->cfg.agg.trees ? " (trees, summed)"
            : sim->cfg.agg.tree  ? " (tree, summed)"
                                 : " (chain, summed)",
            as.aggs_total,
            (unsigned long long)as.contrib, (unsigned long long)as.claims,
            (unsigned long long)as.ring_verdicts,
            (unsigned long long)as.results_sent,
            (unsigned long long)as.resent, (unsigned long long)as.freed,
            (unsigned long long)(as.malformed + as.foreign),
            (unsigned long long)qdrops);
  }
  if (sim->net.pfc_in) {
    pfc_totals p = pfc_totals_of(sim);
    fprintf(f, "pfc        %llu PAUSE frames, %.1f us paused (summed over "
               "ports and priorities), %llu headroom drops\n",
            (unsigned long long)p.pauses, ps_us(p.paused_ps),
            (unsigned long long)p.headroom_drops);
  }
  fprintf(f, "network    %.3f GB sent, %llu ECN marks, drops: %llu buffer, "
             "%llu selective, %llu loss, %llu link-down, %llu no-route; "
             "%llu trims\n",
          (double)t.tx_bytes / 1e9, (unsigned long long)t.marks,
          (unsigned long long)t.drops_buffer,
          (unsigned long long)t.drops_selective,
          (unsigned long long)t.drops_loss, (unsigned long long)t.drops_down,
          (unsigned long long)t.noroute, (unsigned long long)t.trims);
  fprintf(f, "transport  %llu retransmissions, %llu timeouts\n",
          (unsigned long long)t.retransmits, (unsigned long long)t.timeouts);
  dlcp_mlt_stats m;
  if (dlcp_sim_mlt_sum(sim, &m)) {
    fprintf(f, "mlt        ");
    for (size_t k = 0; k < MLT_NCOUNTERS; k++) {
      fprintf(f, "%s%s%llu%s", MLT_COUNTERS[k].sep, MLT_COUNTERS[k].before,
              mlt_counter(&m, k), MLT_COUNTERS[k].after);
    }
    fprintf(f, "\n");
  }
  delivery d = delivery_of(sim);
  if (d.partial || d.failed) {
    fprintf(f, "delivery   %u flows partly delivered (lowest %.4f), %u "
               "failed\n", d.partial, d.min_fraction, d.failed);
  }
  fprintf(f, "time       %.3f ms simulated", ps_us(dlcp_sim_end_time(sim)) /
                                                  1e3);
  if (wall_s > 0) {
    fprintf(f, " in %.2f s wall, %llu events (%.2f M events/s)", wall_s,
            (unsigned long long)sim->engine.nevents,
            (double)sim->engine.nevents / wall_s / 1e6);
  }
  fprintf(f, "\n");
}
