/*
 * scenario_workload.c: the workload and faults sections of a scenario
 * (explicit flows, incasts, parameter-server jobs, collective jobs,
 * background traffic; link loss, link down/up, rank pauses) ->
 * dlcp_sim_config.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll/coll.h"
#include "sim/scenario_schema.h"

static int flow_item(dlcp_scn *s, const dlcp_scn_node *n, const char *path) {
  static const char *const keys[] = {"src",   "dst",      "size",
                                     "start", "priority", "load_balancing",
                                     "path",  NULL};
  int rv = dlcp_scn_check_keys(s, n, path, keys);
  if (rv != 0) {
    return rv;
  }
  dlcp_sim_config *c = s->cfg;
  if ((rv = dlcp_sim_config_add_flow(c, "", "", 0, 0, 0)) != 0) {
    return rv;
  }
  dlcp_sim_flow_spec *f = &c->flows[c->nflows - 1];
  dlcp_scn_where(f->where, n);
  dlcp_scn_set_field(f->field, path);
  if ((rv = dlcp_scn_get_name(s, n, path, "src", f->src, true, n)) ||
      (rv = dlcp_scn_get_name(s, n, path, "dst", f->dst, true, n))) {
    return rv;
  }
  if (!dlcp_scn_map_get(n, "size")) {
    char field[256];
    dlcp_scn_join(field, sizeof(field), path, "size");
    return dlcp_scn_fail(s, n, field, "expected this field to be present");
  }
  int lb = -1;
  if ((rv = dlcp_scn_get_size(s, n, path, "size", &f->size_bytes, 1,
                              1ull << 40)) ||
      (rv = dlcp_scn_get_time(s, n, path, "start", &f->start_ps)) ||
      (rv = dlcp_scn_get_u32(s, n, path, "priority", &f->prio, 0,
                             DLCP_SIM_MAX_QUEUES - 1)) ||
      (rv = dlcp_scn_get_enum(s, n, path, "load_balancing", dlcp_scn_lb_words,
                              &lb)) ||
      (rv = dlcp_scn_get_u32(s, n, path, "path", &f->path, 0, 1u << 30))) {
    return rv;
  }
  f->lb = lb;
  return 0;
}

/* A sequence of host names into *out (calloc'd, one spare entry). */
static int host_list(dlcp_scn *s, const dlcp_scn_node *seq, const char *field,
                     char (**out)[DLCP_SIM_NAME_MAX]) {
  *out = calloc(seq->n + 1, sizeof(**out));
  if (!*out) {
    return DLCP_ERR_NOMEM;
  }
  for (size_t i = 0; i < seq->n; i++) {
    const char *t = "";
    int rv = dlcp_scn_scalar(s, seq->items[i], field, &t);
    if (rv != 0) {
      return rv;
    }
    if (t[0] == '\0' || strlen(t) >= DLCP_SIM_NAME_MAX) {
      return dlcp_scn_fail(s, seq->items[i], field, "expected host names");
    }
    snprintf((*out)[i], DLCP_SIM_NAME_MAX, "%s", t);
  }
  return 0;
}

static int incast_item(dlcp_scn *s, const dlcp_scn_node *n, const char *path) {
  static const char *const keys[] = {"receiver", "senders",  "size",
                                     "start",    "priority", NULL};
  int rv = dlcp_scn_check_keys(s, n, path, keys);
  if (rv != 0) {
    return rv;
  }
  dlcp_sim_config *c = s->cfg;
  dlcp_sim_incast_spec *arr =
      realloc(c->incasts, (c->nincasts + 1) * sizeof(*arr));
  if (!arr) {
    return DLCP_ERR_NOMEM;
  }
  c->incasts = arr;
  dlcp_sim_incast_spec *in = &arr[c->nincasts++];
  memset(in, 0, sizeof(*in));
  dlcp_scn_where(in->where, n);
  dlcp_scn_set_field(in->field, path);
  char field[256];
  if ((rv = dlcp_scn_get_name(s, n, path, "receiver", in->receiver, true, n))) {
    return rv;
  }
  const dlcp_scn_node *snd = dlcp_scn_map_get(n, "senders");
  dlcp_scn_join(field, sizeof(field), path, "senders");
  if (!snd) {
    return dlcp_scn_fail(s, n, field, "expected this field to be present");
  }
  if (snd->kind == DLCP_SCN_SEQ) {
    if ((rv = host_list(s, snd, field, &in->senders))) {
      return rv;
    }
    in->nsenders_listed = (uint32_t)snd->n;
  } else if ((rv = dlcp_scn_get_u32(s, n, path, "senders", &in->nsenders, 1,
                                    65535))) {
    return rv;
  }
  dlcp_scn_join(field, sizeof(field), path, "size");
  if (!dlcp_scn_map_get(n, "size")) {
    return dlcp_scn_fail(s, n, field, "expected this field to be present");
  }
  if ((rv = dlcp_scn_get_size(s, n, path, "size", &in->size_bytes, 1,
                              1ull << 40)) ||
      (rv = dlcp_scn_get_time(s, n, path, "start", &in->start_ps)) ||
      (rv = dlcp_scn_get_u32(s, n, path, "priority", &in->prio, 0,
                             DLCP_SIM_MAX_QUEUES - 1))) {
    return rv;
  }
  return 0;
}

/* workload.ps.profile: a bare model name (workloads/profiles/NAME.csv in
 * the source tree) or a CSV path, relative to the scenario's directory. */
static int ps_profile(dlcp_scn *s, const dlcp_scn_node *n, const char *path,
                      dlcp_sim_ps_spec *ps) {
  char field[256];
  dlcp_scn_join(field, sizeof(field), path, "profile");
  const char *t = "";
  int rv = dlcp_scn_scalar(s, n, field, &t);
  if (rv != 0) {
    return rv;
  }
  char file[1024];
  size_t len = strlen(t);
  bool is_path =
      strchr(t, '/') || (len > 4 && strcmp(t + len - 4, ".csv") == 0);
  if (t[0] == '\0' || (!is_path && strspn(t, "abcdefghijklmnopqrstuvwxyz"
                                             "0123456789_-") != len)) {
    return dlcp_scn_fail(
        s, n, field,
        "expected a model name (resnet50, vgg16, "
        "vgg19, googlenet, transformer) or a profile CSV path");
  }
  if (!is_path) {
    snprintf(file, sizeof(file), "%s/%s.csv", dlcp_sim_profile_dir, t);
  } else if (t[0] == '/') {
    snprintf(file, sizeof(file), "%s", t);
  } else {
    snprintf(file, sizeof(file), "%s/%s", s->dir, t);
  }
  char why[512];
  rv = dlcp_sim_profile_load(ps, file, why, sizeof(why));
  if (rv == DLCP_ERR_NOMEM) {
    return rv;
  }
  if (rv != 0) {
    return dlcp_scn_fail(s, n, field,
                         "expected a readable training profile: %s", why);
  }
  return 0;
}

static int ps_item(dlcp_scn *s, const dlcp_scn_node *n, const char *path) {
  static const char *const keys[] = {"workers",
                                     "servers",
                                     "model_size",
                                     "iterations",
                                     "compute_time",
                                     "start",
                                     "priority",
                                     "profile",
                                     "partition",
                                     "layer_priorities",
                                     "profile_scale",
                                     "compression",
                                     "post_ahead",
                                     "forward_overlap",
                                     "placement",
                                     NULL};
  int rv = dlcp_scn_check_keys(s, n, path, keys);
  if (rv != 0) {
    return rv;
  }
  dlcp_sim_config *c = s->cfg;
  dlcp_sim_ps_spec *arr = realloc(c->ps, (c->nps + 1) * sizeof(*arr));
  if (!arr) {
    return DLCP_ERR_NOMEM;
  }
  c->ps = arr;
  dlcp_sim_ps_spec *ps = &arr[c->nps++];
  memset(ps, 0, sizeof(*ps));
  ps->iterations = 1;
  dlcp_scn_where(ps->where, n);
  dlcp_scn_set_field(ps->field, path);
  ps->partition_bytes = 4000000;
  ps->profile_scale = 1.0;
  ps->compression = 1.0;
  ps->post_ahead = true;
  if ((rv = dlcp_scn_get_bool(s, n, path, "post_ahead", &ps->post_ahead)) ||
      (rv = dlcp_scn_get_bool(s, n, path, "forward_overlap",
                              &ps->forward_overlap))) {
    return rv;
  }
  const dlcp_scn_node *prof = dlcp_scn_map_get(n, "profile");
  if (prof && (dlcp_scn_map_get(n, "model_size") ||
               dlcp_scn_map_get(n, "compute_time"))) {
    char field[256];
    dlcp_scn_join(field, sizeof(field), path, "profile");
    return dlcp_scn_fail(s, prof, field,
                         "expected either a profile or model_size "
                         "and compute_time, not both");
  }
  if (prof && (rv = ps_profile(s, prof, path, ps)) != 0) {
    return rv;
  }
  static const char *const needs_profile[] = {
      "partition", "layer_priorities", "profile_scale", "compression",
      "forward_overlap", "placement", NULL};
  for (const char *const *k = needs_profile; !prof && *k; k++) {
    if (dlcp_scn_map_get(n, *k)) {
      char field[256];
      dlcp_scn_join(field, sizeof(field), path, *k);
      return dlcp_scn_fail(
          s, dlcp_scn_map_get(n, *k), field,
          "expected a profile (this field acts on its tensors)");
    }
  }
  static const char *const placements[] = {"round_robin", "balanced", NULL};
  int placement = 0;
  if ((rv = dlcp_scn_get_size(s, n, path, "partition", &ps->partition_bytes, 1,
                              1ull << 40)) ||
      (rv = dlcp_scn_get_u32(s, n, path, "layer_priorities",
                             &ps->layer_priorities, 0, DLCP_SIM_MAX_QUEUES)) ||
      (rv = dlcp_scn_get_double(s, n, path, "profile_scale", &ps->profile_scale,
                                1e-6, 1.0)) ||
      (rv = dlcp_scn_get_double(s, n, path, "compression", &ps->compression,
                                1.0, 1e6)) ||
      (rv = dlcp_scn_get_enum(s, n, path, "placement", placements,
                              &placement))) {
    return rv;
  }
  ps->balanced_placement = placement == 1;
  if (ps->ntensors > 0 &&
      (ps->profile_scale != 1.0 || ps->compression != 1.0)) {
    ps->model_bytes = 0;
    for (uint32_t t = 0; t < ps->ntensors; t++) {
      double b = (double)ps->tensor_bytes[t] * ps->profile_scale /
                 ps->compression / 4.0;
      ps->tensor_bytes[t] = 4 * (uint64_t)ceil(b);
      ps->model_bytes += ps->tensor_bytes[t];
      ps->tensor_bwd_ps[t] = (dlcp_sim_ps)llround((double)ps->tensor_bwd_ps[t] *
                                                  ps->profile_scale);
    }
    ps->forward_ps =
        (dlcp_sim_ps)llround((double)ps->forward_ps * ps->profile_scale);
  }
  static const char *const required[] = {"workers", "servers", "model_size",
                                         NULL};
  for (const char *const *r = required; *r; r++) {
    if (prof && strcmp(*r, "model_size") == 0) {
      continue;
    }
    if (!dlcp_scn_map_get(n, *r)) {
      char field[256];
      dlcp_scn_join(field, sizeof(field), path, *r);
      return dlcp_scn_fail(s, n, field, "expected this field to be present");
    }
  }
  if ((rv = dlcp_scn_get_u32(s, n, path, "workers", &ps->workers, 1, 65535)) ||
      (rv = dlcp_scn_get_u32(s, n, path, "servers", &ps->servers, 1, 65535)) ||
      (rv = dlcp_scn_get_size(s, n, path, "model_size", &ps->model_bytes, 1,
                              1ull << 40)) ||
      (rv = dlcp_scn_get_u32(s, n, path, "iterations", &ps->iterations, 1,
                             10000)) ||
      (rv = dlcp_scn_get_time(s, n, path, "compute_time", &ps->compute_ps)) ||
      (rv = dlcp_scn_get_time(s, n, path, "start", &ps->start_ps)) ||
      (rv = dlcp_scn_get_u32(s, n, path, "priority", &ps->prio, 0,
                             DLCP_SIM_MAX_QUEUES - 1))) {
    return rv;
  }
  return 0;
}

/* window, rto, group_blocks, cc, claim, min_bytes, exponents: only for
 * the algorithms through the switch (0 keeps src/coll/ina's defaults;
 * RA-INA's groups have one block per rank; cc none keeps the window fixed,
 * panama lets it follow ECN; claim never (the default), always or auto:
 * RA-INA's header-only claims; min_bytes, ina and ra_ina only: smaller
 * all-reduces run as ring, PANAMA's 40 MB by default with cc panama;
 * exponents agreed (the default) or given). */
static int ina_fields(dlcp_scn *s, const dlcp_scn_node *n, const char *path,
                      dlcp_sim_coll_spec *cs) {
  static const char *const only_ina[] = {"window", "rto",       "group_blocks",
                                         "cc",     "claim",     "min_bytes",
                                         "exponents", NULL};
  static const char *const ccs[] = {"none", "panama", NULL};
  static const char *const exponents[] = {"agreed", "given", NULL};
  static const char *const claims[] = {"never", "always", "auto", NULL};
  /* CINA's ranks are plain INA ranks at their rack's switch. */
  bool ina = cs->algo == DLCP_ALGO_INA || cs->algo == DLCP_ALGO_RA_INA;
  char field[256];
  for (const char *const *k = only_ina; *k; k++) {
    const dlcp_scn_node *v = dlcp_scn_map_get(n, *k);
    dlcp_scn_join(field, sizeof(field), path, *k);
    if (v && (!ina || (cs->algo == DLCP_ALGO_RA_INA &&
                       strcmp(*k, "group_blocks") == 0))) {
      return dlcp_scn_fail(s, v, field, "expected algo %s for this field",
                           ina ? "ina (RA-INA groups one block per rank)"
                               : "ina or ra_ina");
    }
    if (v && cs->algo == DLCP_ALGO_INA && strcmp(*k, "claim") == 0) {
      return dlcp_scn_fail(s, v, field, "expected algo ra_ina for this "
                           "field (plain INA waits for aggregators)");
    }
    if (v && cs->cina && strcmp(*k, "min_bytes") == 0) {
      return dlcp_scn_fail(s, v, field, "expected algo ina or ra_ina for "
                           "this field (a chain or tree job has no ring "
                           "to fall back to)");
    }
  }
  int rv;
  if ((rv = dlcp_scn_get_u32(s, n, path, "window", &cs->ina_window, 1,
                             DLCP_INA_MAX_WINDOW)) ||
      (rv = dlcp_scn_get_time(s, n, path, "rto", &cs->ina_rto_ps)) ||
      (rv = dlcp_scn_get_u32(s, n, path, "group_blocks", &cs->ina_group_blocks,
                             1, DLCP_AGG_MAX_BLOCKS))) {
    return rv;
  }
  int cc = 0;
  if ((rv = dlcp_scn_get_enum(s, n, path, "cc", ccs, &cc)) != 0) {
    return rv;
  }
  cs->ina_cc = cc == 1;
  cs->ina_min_bytes = cs->ina_cc && !cs->cina ? DLCP_SIM_PANAMA_MIN_BYTES : 0;
  if ((rv = dlcp_scn_get_size(s, n, path, "min_bytes", &cs->ina_min_bytes, 0,
                              1ull << 50)) != 0) {
    return rv;
  }
  int claim = DLCP_INA_CLAIM_NEVER;
  if ((rv = dlcp_scn_get_enum(s, n, path, "claim", claims, &claim)) != 0) {
    return rv;
  }
  cs->ina_claim = (dlcp_ina_claim)claim;
  int given = 0;
  if ((rv = dlcp_scn_get_enum(s, n, path, "exponents", exponents, &given)) !=
      0) {
    return rv;
  }
  cs->ina_exps_given = given == 1;
  if (dlcp_scn_map_get(n, "rto") && cs->ina_rto_ps < DLCP_SIM_PS_PER_NS) {
    dlcp_scn_join(field, sizeof(field), path, "rto");
    return dlcp_scn_fail(s, dlcp_scn_map_get(n, "rto"), field,
                         "expected at least 1ns");
  }
  return 0;
}

/* gpus_per_host, chunks, intra_rate, intra_latency: CINA's intra-host
 * ring-reduce, only for algo cina. */
static int cina_fields(dlcp_scn *s, const dlcp_scn_node *n, const char *path,
                       dlcp_sim_coll_spec *cs) {
  static const char *const only_cina[] = {"gpus_per_host", "chunks",
                                          "intra_rate", "intra_latency", NULL};
  char field[256];
  for (const char *const *k = only_cina; *k; k++) {
    const dlcp_scn_node *v = dlcp_scn_map_get(n, *k);
    if (v && !cs->cina) {
      dlcp_scn_join(field, sizeof(field), path, *k);
      return dlcp_scn_fail(s, v, field,
                           "expected algo cina, hina or mtina for this "
                           "field");
    }
  }
  cs->cina_gpus = 1;
  cs->cina_chunks = 1;
  cs->cina_intra_bps = dlcp_sim_speed_from_gbps(2400.0);
  int rv;
  if ((rv = dlcp_scn_get_u32(s, n, path, "gpus_per_host", &cs->cina_gpus, 1,
                             64)) ||
      (rv = dlcp_scn_get_u32(s, n, path, "chunks", &cs->cina_chunks, 1,
                             1u << 20)) ||
      (rv = dlcp_scn_get_rate(s, n, path, "intra_rate", &cs->cina_intra_bps)) ||
      (rv = dlcp_scn_get_time(s, n, path, "intra_latency",
                              &cs->cina_intra_ps))) {
    return rv;
  }
  return 0;
}

/* One straggler, {rank, delay, receives: first | all}, of the collective
 * job being read (the last one).  Ranks are checked against the job's
 * size when it is built. */
static int straggler_item(dlcp_scn *s, const dlcp_scn_node *n,
                          const char *path) {
  static const char *const keys[] = {"rank", "delay", "receives", NULL};
  static const char *const required[] = {"rank", "delay", NULL};
  static const char *const receives[] = {"first", "all", NULL};
  dlcp_sim_coll_spec *cs = &s->cfg->colls[s->cfg->ncolls - 1];
  dlcp_sim_straggler st = {0};
  int every = 0;
  int rv;
  if ((rv = dlcp_scn_check_keys(s, n, path, keys)) ||
      (rv = dlcp_scn_require(s, n, path, required)) ||
      (rv = dlcp_scn_get_u32(s, n, path, "rank", &st.rank, 0,
                             DLCP_COLL_MAX_WORLD - 1)) ||
      (rv = dlcp_scn_get_time(s, n, path, "delay", &st.delay)) ||
      (rv = dlcp_scn_get_enum(s, n, path, "receives", receives, &every))) {
    return rv;
  }
  st.every = every == 1;
  dlcp_scn_where(st.where, n);
  dlcp_scn_set_field(st.field, path);
  for (uint32_t i = 0; i < cs->nstragglers; i++) {
    if (cs->stragglers[i].rank == st.rank) {
      char field[256];
      dlcp_scn_join(field, sizeof(field), path, "rank");
      return dlcp_scn_fail(s, dlcp_scn_map_get(n, "rank"), field,
                           "expected a rank no other straggler has, got %u",
                           st.rank);
    }
  }
  dlcp_sim_straggler *arr =
      realloc(cs->stragglers, (cs->nstragglers + 1) * sizeof(*arr));
  if (!arr) {
    return DLCP_ERR_NOMEM;
  }
  cs->stragglers = arr;
  arr[cs->nstragglers++] = st;
  return 0;
}

/* kind, reduce_time, reduce_rate, straggler: one {rank, delay, receives}
 * or a list of them (not through the switch: src/coll/ina reduces nothing
 * on the hosts' CPU and runs all-reduce only); bypass: {alpha, step,
 * transfer} (ring_bypass only). */
static int cpu_fields(dlcp_scn *s, const dlcp_scn_node *n, const char *path,
                      dlcp_sim_coll_spec *cs) {
  static const char *const kinds[] = {"allreduce", "reduce_scatter", NULL};
  static const char *const bypass_keys[] = {"alpha", "step", "transfer", NULL};
  static const char *const not_ina[] = {"kind", "reduce_time", "reduce_rate",
                                        "straggler", NULL};
  bool ina = cs->algo == DLCP_ALGO_INA || cs->algo == DLCP_ALGO_RA_INA;
  char field[256];
  for (const char *const *k = not_ina; ina && *k; k++) {
    const dlcp_scn_node *v = dlcp_scn_map_get(n, *k);
    if (v) {
      dlcp_scn_join(field, sizeof(field), path, *k);
      return dlcp_scn_fail(s, v, field,
                           "expected an algorithm other than ina and ra_ina "
                           "for this field");
    }
  }
  int kind = 0;
  int rv;
  if ((rv = dlcp_scn_get_enum(s, n, path, "kind", kinds, &kind)) ||
      (rv = dlcp_scn_get_time(s, n, path, "reduce_time", &cs->reduce_ps)) ||
      (rv = dlcp_scn_get_rate(s, n, path, "reduce_rate", &cs->reduce_bps))) {
    return rv;
  }
  cs->kind = kind ? DLCP_COLL_REDUCE_SCATTER : DLCP_COLL_ALLREDUCE;
  const dlcp_scn_node *v = dlcp_scn_map_get(n, "straggler");
  if (v) {
    dlcp_scn_join(field, sizeof(field), path, "straggler");
    if ((rv = dlcp_scn_for_each_map(s, v, field, straggler_item))) {
      return rv;
    }
  }
  v = dlcp_scn_map_get(n, "bypass");
  if (v) {
    dlcp_scn_join(field, sizeof(field), path, "bypass");
    if (cs->algo != DLCP_ALGO_RING_BYPASS) {
      return dlcp_scn_fail(s, v, field,
                           "expected algo ring_bypass for this field");
    }
    if ((rv = dlcp_scn_check_keys(s, v, field, bypass_keys)) ||
        (rv = dlcp_scn_get_double(s, v, field, "alpha", &cs->bypass_alpha, 0.0,
                                  1e6)) ||
        (rv = dlcp_scn_get_time(s, v, field, "step", &cs->bypass_step_ps)) ||
        (rv = dlcp_scn_get_time(s, v, field, "transfer",
                                &cs->bypass_trans_ps))) {
      return rv;
    }
    const dlcp_scn_node *a = dlcp_scn_map_get(v, "alpha");
    if (a && cs->bypass_alpha <= 1.0) {
      char alpha[256];
      dlcp_scn_join(alpha, sizeof(alpha), field, "alpha");
      return dlcp_scn_fail(s, a, alpha,
                           "expected a number above 1 (at alpha <= 1 every "
                           "ordinary step would trigger a bypass)");
    }
  }
  return 0;
}

static int collective_item(dlcp_scn *s, const dlcp_scn_node *n,
                           const char *path) {
  static const char *const keys[] = {
      "algo",         "bytes",         "ranks",      "iterations",
      "compute_time", "start",         "priority",   "loss_bound",
      "chunk",        "scale",         "hosts",      "window",
      "rto",          "group_blocks",  "gpus_per_host", "chunks",
      "intra_rate",   "intra_latency", "kind",       "reduce_time",
      "reduce_rate",  "straggler",     "bypass",     "cc",
      "claim",        "min_bytes",     "exponents",  NULL};
  int rv = dlcp_scn_check_keys(s, n, path, keys);
  if (rv != 0) {
    return rv;
  }
  dlcp_sim_config *c = s->cfg;
  dlcp_sim_coll_spec *arr = realloc(c->colls, (c->ncolls + 1) * sizeof(*arr));
  if (!arr) {
    return DLCP_ERR_NOMEM;
  }
  c->colls = arr;
  dlcp_sim_coll_spec *cs = &arr[c->ncolls++];
  memset(cs, 0, sizeof(*cs));
  cs->algo = DLCP_ALGO_RING;
  cs->iterations = 1;
  dlcp_scn_where(cs->where, n);
  dlcp_scn_set_field(cs->field, path);
  char field[256];
  if (!dlcp_scn_map_get(n, "bytes")) {
    dlcp_scn_join(field, sizeof(field), path, "bytes");
    return dlcp_scn_fail(s, n, field, "expected this field to be present");
  }
  /* The src/coll algorithms, then the simulator's CINA, HINA and MTINA
   * (INA jobs through aggregation.chain / .tree / .trees). */
  const char *algos[DLCP_COLL_NALGOS + 4] = {NULL};
  for (unsigned a = 0; a < DLCP_COLL_NALGOS; a++) {
    algos[a] = dlcp_algo_short_name((dlcp_algo)a);
  }
  algos[DLCP_COLL_NALGOS] = "cina";
  algos[DLCP_COLL_NALGOS + 1] = "hina";
  algos[DLCP_COLL_NALGOS + 2] = "mtina";
  int algo = 1;
  if ((rv = dlcp_scn_get_enum(s, n, path, "algo", algos, &algo)) ||
      (rv =
           dlcp_scn_get_size(s, n, path, "bytes", &cs->bytes, 4, 1ull << 40)) ||
      (rv = dlcp_scn_get_u32(s, n, path, "iterations", &cs->iterations, 1,
                             10000)) ||
      (rv = dlcp_scn_get_time(s, n, path, "compute_time", &cs->compute_ps)) ||
      (rv = dlcp_scn_get_time(s, n, path, "start", &cs->start_ps)) ||
      (rv = dlcp_scn_get_u32(s, n, path, "priority", &cs->prio, 0,
                             DLCP_SIM_MAX_QUEUES - 1)) ||
      (rv = dlcp_scn_get_double(s, n, path, "loss_bound", &cs->loss_bound, 0.0,
                                0.99)) ||
      (rv = dlcp_scn_get_size(s, n, path, "chunk", &cs->chunk_bytes, 4,
                              1ull << 40)) ||
      (rv = dlcp_scn_get_u32(s, n, path, "scale", &cs->scale, 1, 1u << 30))) {
    return rv;
  }
  cs->hina = algo == (int)DLCP_COLL_NALGOS + 1;
  cs->mtina = algo == (int)DLCP_COLL_NALGOS + 2;
  cs->cina = algo == (int)DLCP_COLL_NALGOS || cs->hina || cs->mtina;
  cs->algo = cs->cina ? DLCP_ALGO_INA : (dlcp_algo)algo;
  /* ranks: all (the default) or a count; or the hosts, listed. */
  const dlcp_scn_node *r = dlcp_scn_map_get(n, "ranks");
  if (r && !(r->kind == DLCP_SCN_SCALAR && strcmp(r->str, "all") == 0) &&
      (rv = dlcp_scn_get_u32(s, n, path, "ranks", &cs->ranks, 1, 4096))) {
    return rv;
  }
  const dlcp_scn_node *h = dlcp_scn_map_get(n, "hosts");
  if (h) {
    dlcp_scn_join(field, sizeof(field), path, "hosts");
    if (r || h->kind != DLCP_SCN_SEQ || h->n == 0 || h->n > 4096) {
      return dlcp_scn_fail(s, h, field,
                           "expected a list of 1..4096 host "
                           "names (the ranks in order), without 'ranks'");
    }
    if ((rv = host_list(s, h, field, &cs->hosts))) {
      return rv;
    }
    cs->nhosts = (uint32_t)h->n;
  }
  if ((rv = ina_fields(s, n, path, cs))) {
    return rv;
  }
  if ((rv = cina_fields(s, n, path, cs))) {
    return rv;
  }
  return cpu_fields(s, n, path, cs);
}

static int background_item(dlcp_scn *s, const dlcp_scn_node *n,
                           const char *path) {
  static const char *const keys[] = {"distribution", "load",     "start",
                                     "duration",     "priority", NULL};
  static const char *const required[] = {"distribution", "load", "duration",
                                         NULL};
  static const char *const dists[] = {"websearch", "datamining", NULL};
  int rv = dlcp_scn_check_keys(s, n, path, keys);
  if (rv != 0 || (rv = dlcp_scn_require(s, n, path, required)) != 0) {
    return rv;
  }
  dlcp_sim_config *c = s->cfg;
  dlcp_sim_background_spec *arr =
      realloc(c->backgrounds, (c->nbackgrounds + 1) * sizeof(*arr));
  if (!arr) {
    return DLCP_ERR_NOMEM;
  }
  c->backgrounds = arr;
  dlcp_sim_background_spec *b = &arr[c->nbackgrounds++];
  memset(b, 0, sizeof(*b));
  dlcp_scn_where(b->where, n);
  dlcp_scn_set_field(b->field, path);
  int dist = 0;
  if ((rv = dlcp_scn_get_enum(s, n, path, "distribution", dists, &dist)) ||
      (rv = dlcp_scn_get_double(s, n, path, "load", &b->load, 1e-6, 1.0)) ||
      (rv = dlcp_scn_get_time(s, n, path, "start", &b->start_ps)) ||
      (rv = dlcp_scn_get_time(s, n, path, "duration", &b->duration_ps)) ||
      (rv = dlcp_scn_get_u32(s, n, path, "priority", &b->prio, 0,
                             DLCP_SIM_MAX_QUEUES - 1))) {
    return rv;
  }
  b->dist = (dlcp_sim_flow_dist)dist;
  return 0;
}

int dlcp_scn_section_workload(dlcp_scn *s, const dlcp_scn_node *n) {
  static const char *const keys[] = {"flows",      "incast",     "ps",
                                     "collective", "background", NULL};
  int rv = dlcp_scn_check_keys(s, n, "workload", keys);
  const dlcp_scn_node *v;
  if (rv == 0 && (v = dlcp_scn_map_get(n, "flows"))) {
    rv = dlcp_scn_for_each_map(s, v, "workload.flows", flow_item);
  }
  if (rv == 0 && (v = dlcp_scn_map_get(n, "incast"))) {
    rv = dlcp_scn_for_each_map(s, v, "workload.incast", incast_item);
  }
  if (rv == 0 && (v = dlcp_scn_map_get(n, "ps"))) {
    rv = dlcp_scn_for_each_map(s, v, "workload.ps", ps_item);
  }
  if (rv == 0 && (v = dlcp_scn_map_get(n, "collective"))) {
    rv = dlcp_scn_for_each_map(s, v, "workload.collective", collective_item);
  }
  if (rv == 0 && (v = dlcp_scn_map_get(n, "background"))) {
    rv = dlcp_scn_for_each_map(s, v, "workload.background", background_item);
  }
  return rv;
}

/* faults[i].pause: {ranks: k, every: d, duration: t, start: T}. */
static int pause_item(dlcp_scn *s, const dlcp_scn_node *n, const char *path) {
  static const char *const keys[] = {"ranks", "every", "duration", "start",
                                     NULL};
  int rv = dlcp_scn_check_keys(s, n, path, keys);
  if (rv != 0) {
    return rv;
  }
  char field[256];
  static const char *const required[] = {"ranks", "every", NULL};
  for (const char *const *r = required; *r; r++) {
    if (!dlcp_scn_map_get(n, *r)) {
      dlcp_scn_join(field, sizeof(field), path, *r);
      return dlcp_scn_fail(s, n, field, "expected this field to be present");
    }
  }
  uint32_t k = 0;
  dlcp_sim_ps every = 0, duration = 0, start = 0;
  if ((rv = dlcp_scn_get_u32(s, n, path, "ranks", &k, 1, 1u << 20)) ||
      (rv = dlcp_scn_get_time(s, n, path, "every", &every)) ||
      (rv = dlcp_scn_get_time(s, n, path, "duration", &duration)) ||
      (rv = dlcp_scn_get_time(s, n, path, "start", &start))) {
    return rv;
  }
  if (every == 0) {
    dlcp_scn_join(field, sizeof(field), path, "every");
    return dlcp_scn_fail(s, dlcp_scn_map_get(n, "every"), field,
                         "expected > 0");
  }
  rv = dlcp_sim_config_add_fault(s->cfg, DLCP_SIM_FAULT_PAUSE, "", "", 0.0,
                                 start);
  if (rv == 0) {
    dlcp_sim_fault_spec *f = &s->cfg->faults[s->cfg->nfaults - 1];
    f->pause_ranks = k;
    f->every_ps = every;
    f->pause_ps = duration ? duration : every;
    dlcp_scn_where(f->where, n);
    /* path is "faults[i].pause": the fault's own path is its prefix. */
    snprintf(f->field, sizeof(f->field), "%.*s",
             (int)(strlen(path) - strlen(".pause")), path);
  }
  return rv;
}

int dlcp_scn_fault_item(dlcp_scn *s, const dlcp_scn_node *n, const char *path) {
  static const char *const keys[] = {"link",  "loss",  "down_at",
                                     "up_at", "pause", NULL};
  int rv = dlcp_scn_check_keys(s, n, path, keys);
  if (rv != 0) {
    return rv;
  }
  char field[256];
  const dlcp_scn_node *pause = dlcp_scn_map_get(n, "pause");
  if (pause) {
    dlcp_scn_join(field, sizeof(field), path, "pause");
    if (n->n != 1 || pause->kind != DLCP_SCN_MAP) {
      return dlcp_scn_fail(s, pause, field,
                           "expected {ranks, every, duration, "
                           "start} and no other field beside it");
    }
    return pause_item(s, pause, field);
  }
  dlcp_scn_join(field, sizeof(field), path, "link");
  const dlcp_scn_node *l = dlcp_scn_map_get(n, "link");
  char a[DLCP_SIM_NAME_MAX] = "", b[DLCP_SIM_NAME_MAX] = "";
  if (!l) {
    return dlcp_scn_fail(s, n, field, "expected this field to be present");
  }
  if (l->kind == DLCP_SCN_SCALAR && strcmp(l->str, "*") == 0) {
    snprintf(a, sizeof(a), "*");
  } else if (l->kind == DLCP_SCN_SEQ && l->n == 2 &&
             l->items[0]->kind == DLCP_SCN_SCALAR &&
             l->items[1]->kind == DLCP_SCN_SCALAR &&
             strlen(l->items[0]->str) < DLCP_SIM_NAME_MAX &&
             strlen(l->items[1]->str) < DLCP_SIM_NAME_MAX) {
    snprintf(a, sizeof(a), "%s", l->items[0]->str);
    snprintf(b, sizeof(b), "%s", l->items[1]->str);
  } else {
    return dlcp_scn_fail(s, l, field,
                         "expected [node_a, node_b] or \"*\" (every "
                         "link)");
  }
  const dlcp_scn_node *loss = dlcp_scn_map_get(n, "loss");
  const dlcp_scn_node *down = dlcp_scn_map_get(n, "down_at");
  const dlcp_scn_node *up = dlcp_scn_map_get(n, "up_at");
  if ((loss != NULL) + (down != NULL) + (up != NULL) != 1) {
    dlcp_scn_join(field, sizeof(field), path, "loss");
    return dlcp_scn_fail(s, n, field,
                         "expected exactly one of loss, down_at, up_at");
  }
  if (a[0] == '*' && !loss) {
    return dlcp_scn_fail(s, l, field,
                         "expected a single link for down_at/up_at");
  }
  double p = 0;
  dlcp_sim_ps at = 0;
  dlcp_sim_fault_kind kind = loss   ? DLCP_SIM_FAULT_LOSS
                             : down ? DLCP_SIM_FAULT_DOWN
                                    : DLCP_SIM_FAULT_UP;
  if ((rv = dlcp_scn_get_double(s, n, path, "loss", &p, 0.0, 1.0)) ||
      (rv = dlcp_scn_get_time(s, n, path, "down_at", &at)) ||
      (rv = dlcp_scn_get_time(s, n, path, "up_at", &at))) {
    return rv;
  }
  rv = dlcp_sim_config_add_fault(s->cfg, kind, a, b, p, at);
  if (rv == 0) {
    dlcp_scn_where(s->cfg->faults[s->cfg->nfaults - 1].where, l);
    dlcp_scn_set_field(s->cfg->faults[s->cfg->nfaults - 1].field, path);
  }
  return rv;
}
