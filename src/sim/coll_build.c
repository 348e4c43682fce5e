/*
 * coll_build.c: building the collective jobs of a scenario: placing ranks
 * on hosts, sizing their buffers, and setting up INA jobs.
 *
 * Placement.  Ranks go on the hosts the scenario lists, in that order
 * (several jobs may list the same hosts: they then share them).
 * Otherwise a job takes hosts no earlier job has (as a cluster's scheduler
 * would): round-robin over the racks (as many as |ranks|), then numbered
 * rack by rack in host order, so a ring crosses each rack boundary once
 * and RAT's regions are contiguous; an INA job (CINA's, a tree's) takes
 * only hosts attached to an aggregation switch, which under a single
 * switch are its first free hosts; listed hosts in other racks reach a
 * single switch through the fabric.
 * RAT's labels are the rack (the ToR) and, in a fat-tree, the pod.
 *
 * Buffers.  See collective.c: vectors are |scale| times smaller than the
 * simulated ones, scale 0 picking the smallest power of two that keeps
 * n x bytes / scale within 32 MiB.  INA datagrams carry the real vector,
 * so INA jobs are never scaled and are bounded at 256 MiB instead.
 */
#include <stdio.h>
#include <string.h>

#include "sim/coll_job.h"

#define COLL_MEM_BUDGET (32ull << 20) /* simulated vectors, all ranks */
#define INA_MEM_BUDGET (256ull << 20) /* INA jobs' vectors, all ranks */

/* The hosts the scenario listed, in rank order. */
static int place_listed(coll_job *job, char *err, size_t errlen) {
  dlcp_sim *sim = job->sim;
  const dlcp_sim_coll_spec *s = &job->spec;
  for (uint32_t r = 0; r < job->n; r++) {
    uint32_t h = dlcp_sim_host_lookup(&sim->net, s->hosts[r]);
    if (h == DLCP_SIM_NONE || job->rank_of_host[h] != DLCP_SIM_NONE) {
      snprintf(err, errlen,
               "%s: field '%s.hosts[%u]': expected a host of "
               "the topology not listed before, got '%s'",
               s->where, s->field, r, s->hosts[r]);
      return DLCP_ERR_CONFIG;
    }
    job->ranks[r].host = h;
    job->rank_of_host[h] = r;
  }
  return 0;
}

/* Round-robin over the racks' |eligible| hosts, numbered rack by rack;
 * returns the hosts placed. */
static uint32_t place_round_robin(coll_job *job, const uint32_t *rack,
                                  uint32_t nracks, const bool *eligible,
                                  bool *taken) {
  const dlcp_sim_net *net = &job->sim->net;
  uint32_t H = net->nhosts, n = job->n;
  /* Round-robin: the i-th pass takes the i-th eligible host of every
   * rack. */
  uint32_t picked = 0;
  for (uint32_t pass = 0; picked < n; pass++) {
    bool any = false;
    for (uint32_t r = 0; r < nracks && picked < n; r++) {
      uint32_t seen = 0;
      for (uint32_t h = 0; h < H; h++) {
        if (eligible[h] && rack[h] == r && seen++ == pass) {
          taken[h] = true;
          picked++;
          any = true;
          break;
        }
      }
    }
    if (!any) {
      break;
    }
  }
  /* Number ranks rack by rack, in host order within a rack. */
  uint32_t rk = 0;
  for (uint32_t r = 0; r < nracks; r++) {
    for (uint32_t h = 0; h < H; h++) {
      if (taken[h] && rack[h] == r) {
        job->ranks[rk].host = h;
        job->rank_of_host[h] = rk;
        rk++;
      }
    }
  }
  return rk;
}

/* Chooses the job's hosts and fills job->ranks[].host and the RAT labels:
 * the listed ones, or round-robin over the racks' hosts that earlier jobs
 * left free (|used|, which this job's hosts join), INA jobs' among those
 * attached to an aggregation switch. */
static int place(coll_job *job, bool *used, char *err, size_t errlen) {
  dlcp_sim *sim = job->sim;
  dlcp_sim_net *net = &sim->net;
  uint32_t H = net->nhosts, n = job->n;
  uint32_t *rack = dlcp_sim_coll_zalloc(sim, H, sizeof(*rack));
  bool *taken = dlcp_sim_coll_zalloc(sim, H, sizeof(*taken));
  bool *eligible = dlcp_sim_coll_zalloc(sim, H, sizeof(*eligible));
  int rv = 0;
  if (!rack || !taken || !eligible) {
    rv = DLCP_ERR_NOMEM;
    goto out;
  }
  bool ina = dlcp_sim_coll_is_ina(job->algo);
  uint32_t nracks = 0, nfree = 0, nattached = 0;
  for (uint32_t h = 0; h < H; h++) {
    rack[h] = dlcp_sim_net_host_rack(net, h);
    nracks = rack[h] + 1 > nracks ? rack[h] + 1 : nracks;
    bool attached =
        !ina || dlcp_sim_agg_position(sim, dlcp_sim_host_nic(net, h)->peer) !=
                    DLCP_SIM_NONE;
    nattached += attached;
    eligible[h] = attached && !used[h];
    nfree += eligible[h];
  }
  if (job->spec.hosts) {
    rv = place_listed(job, err, errlen);
  } else if (place_round_robin(job, rack, nracks, eligible, taken) != n) {
    const char *which = ina ? " attached to the aggregation switch" : "";
    if (nfree == nattached) {
      snprintf(err, errlen,
               "%s: field '%s.ranks': expected at most as many ranks as "
               "hosts%s",
               job->spec.where, job->spec.field, which);
    } else {
      snprintf(err, errlen,
               "%s: field '%s.ranks': expected at most as many ranks as "
               "hosts%s that earlier jobs left free (%u of %u are free; "
               "jobs share hosts only when they list them)",
               job->spec.where, job->spec.field, which, nfree, nattached);
    }
    rv = DLCP_ERR_CONFIG;
  }
  if (rv != 0) {
    goto out;
  }
  for (uint32_t r = 0; r < n; r++) {
    used[job->ranks[r].host] = true;
  }
  /* Labels: level 0 the rack; level 1 the pod in a fat-tree. */
  bool fat = sim->cfg.topo.kind == DLCP_SIM_TOPO_FAT_TREE;
  job->levels = fat ? 2 : 1;
  job->labels =
      dlcp_sim_coll_zalloc(sim, (size_t)n * job->levels, sizeof(uint32_t));
  if (!job->labels) {
    rv = DLCP_ERR_NOMEM;
    goto out;
  }
  for (uint32_t i = 0; i < n; i++) {
    uint32_t rr = rack[job->ranks[i].host];
    job->labels[i * job->levels] = rr;
    if (fat) {
      job->labels[i * job->levels + 1] = rr / (sim->cfg.topo.k / 2);
    }
  }
out:
  sim->mem->free(rack, sim->mem->user);
  sim->mem->free(taken, sim->mem->user);
  sim->mem->free(eligible, sim->mem->user);
  return rv;
}

/* What an INA or RA-INA job needs: an aggregation switch its ranks are
 * attached to, at most DLCP_AGG_MAX_WORLD ranks, no loss bound, no
 * scaling, groups that fit a datagram. */
static int ina_check(const coll_job *job, char *err, size_t errlen) {
  const dlcp_sim *sim = job->sim;
  const dlcp_sim_coll_spec *s = &job->spec;
  uint64_t group_bytes =
      4ull * sim->cfg.agg.block_elems * job->ina_group_blocks;
  const char *field = NULL, *want = NULL;
  bool multi = dlcp_sim_agg_chain_len(sim) > 0;
  bool tree = multi && sim->cfg.agg.tree;
  bool trees = multi && sim->cfg.agg.trees;
  if (!sim->agg || multi != s->cina || tree != s->hina ||
      trees != s->mtina) {
    field = "algo",
    want = s->mtina  ? "an aggregation section with trees"
           : s->hina ? "an aggregation section with a tree"
           : s->cina ? "an aggregation section with a chain"
           : multi   ? "an aggregation section naming one switch (a chain "
                       "is for cina, a tree for hina, trees for mtina)"
                     : "an aggregation section naming the switch";
  } else if (job->n > (s->cina ? DLCP_INA_MAX_SCALE_WORLD
                               : DLCP_AGG_MAX_WORLD)) {
    field = "ranks", want = "at most 64 ranks";
  } else if (s->loss_bound != 0.0) {
    field = "loss_bound", want = "0 (INA is exact)";
  } else if (s->scale > 1 ||
             (double)s->bytes * job->n > (double)INA_MEM_BUDGET) {
    field = "scale", want = "1, and bytes * ranks <= 256 MiB (INA datagrams "
                            "carry the real vector)";
  } else if (job->ina_group_blocks > DLCP_AGG_MAX_BLOCKS ||
             group_bytes + DLCP_AGG_HDR_LEN > DLCP_AGG_DGRAM_MAX) {
    field = "group_blocks", want = "a group within one datagram (64 KB)";
  }
  if (field) {
    snprintf(err, errlen, "%s: field '%s.%s': expected %s", s->where, s->field,
             field, want);
    return DLCP_ERR_CONFIG;
  }
  return 0;
}

/* After placement: checks that every rank reaches the aggregation switch,
 * agrees on the groups' exponents and registers the job. */
static int ina_setup(coll_job *job, char *err, size_t errlen) {
  dlcp_sim *sim = job->sim;
  uint32_t *hosts = dlcp_sim_coll_zalloc(sim, job->n, sizeof(*hosts));
  if (!hosts) {
    return DLCP_ERR_NOMEM;
  }
  for (uint32_t r = 0; r < job->n; r++) {
    hosts[r] = job->ranks[r].host;
    if (!dlcp_sim_agg_reachable(sim, hosts[r])) {
      snprintf(err, errlen,
               "%s: field '%s.hosts[%u]': expected a host "
               "attached to the aggregation switch %s (to a switch of its "
               "chain or trees; ranks elsewhere reach a single switch only "
               "if a host is attached to it)",
               job->spec.where, job->spec.field, r, sim->cfg.agg.node);
      sim->mem->free(hosts, sim->mem->user);
      return DLCP_ERR_CONFIG;
    }
  }
  int rv = dlcp_sim_ina_job_add(sim, job->id, sim->colls->njobs, hosts, job->n,
                                job->spec.prio);
  sim->mem->free(hosts, sim->mem->user);
  if (rv == 0 && job->spec.cina) {
    rv = dlcp_sim_coll_cina_setup(job, err, errlen);
  }
  uint32_t gelems = sim->cfg.agg.block_elems * job->ina_group_blocks;
  job->ina_ngroups = dlcp_ina_ngroups(job->count, sim->cfg.agg.block_elems,
                                      job->ina_group_blocks);
  /* Every rank's exponents of its input, which is the same in every
   * iteration; the ranks agree on them with an all-reduce MAX before each
   * operation, as the runtime (collective.c), whose result must be
   * |ina_exps|.  CINA: a master's over every GPU's input of its host, as
   * the runtime agrees over every rank's before its hosts reduce (a
   * master's sum may then be |gpus| times one input's bound:
   * dlcp_ina_params.inputs). */
  job->ina_exps = dlcp_sim_coll_zalloc(sim, job->ina_ngroups, sizeof(int32_t));
  int32_t *mine = dlcp_sim_coll_zalloc(sim, job->ina_ngroups, sizeof(int32_t));
  if (rv == 0 && (!job->ina_exps || !mine)) {
    rv = DLCP_ERR_NOMEM;
  }
  uint32_t gpus = job->spec.cina && job->spec.cina_gpus > 1
                      ? job->spec.cina_gpus : 1;
  for (uint32_t v = 0; rv == 0 && v < job->n * gpus; v++) {
    coll_rank *rk = &job->ranks[v / gpus];
    if (v % gpus == 0) {
      rk->exps = dlcp_sim_coll_zalloc(sim, job->ina_ngroups, sizeof(int32_t));
      rk->agree_buf =
          dlcp_sim_coll_zalloc(sim, job->ina_ngroups, sizeof(int32_t));
      if (!rk->exps || !rk->agree_buf) {
        rv = DLCP_ERR_NOMEM;
        break;
      }
    }
    if (gpus > 1) {
      for (uint64_t j = 0; j < job->count; j++) {
        rk->buf[j] = dlcp_sim_coll_input(v, j);
      }
    } else {
      dlcp_sim_coll_fill_input(job, rk);
    }
    rv = dlcp_ina_exponents(rk->buf, job->count, gelems, mine);
    for (uint32_t g = 0; rv == 0 && g < job->ina_ngroups; g++) {
      if (v % gpus == 0 || mine[g] > rk->exps[g]) {
        rk->exps[g] = mine[g];
      }
      if (v == 0 || mine[g] > job->ina_exps[g]) {
        job->ina_exps[g] = mine[g];
      }
    }
  }
  sim->mem->free(mine, sim->mem->user);
  return rv;
}

/* A size of the plan in the buffers |scale| times smaller than the
 * simulated vector, at least one element, so the plan has the transfers
 * of the vector's own size. */
static uint64_t scaled_down(uint64_t bytes, uint32_t scale) {
  return bytes / scale ? bytes / scale : sizeof(float);
}

/* The transfers |t| delivers whole whatever their loss bound
 * (dlcp_coll_params.exact_bytes), as the runtime gives its eager size:
 * MLT's eager ones, and every one of a transport that never gives up
 * data.  An operation whose transfers all are runs exact, without the
 * agreement on missing ranges at its end.  Scaled as the buffers, so the
 * plan compares it with its own sizes; none stays none. */
static uint64_t exact_bytes(const dlcp_sim_transport_config *t,
                            uint32_t scale) {
  if (t->kind != DLCP_SIM_TRANSPORT_MLT) {
    return UINT64_MAX;
  }
  return t->mlt.eager_bytes / scale;
}

static int build_job(dlcp_sim *sim, uint32_t id, bool *used, char *err,
                     size_t errlen) {
  dlcp_sim_colls *c = sim->colls;
  coll_job *job = &c->jobs[id];
  const dlcp_sim_coll_spec *s = &sim->cfg.colls[id];
  const dlcp_sim_net *net = &sim->net;
  job->sim = sim;
  job->id = id;
  job->spec = *s;
  /* The spec's arrays are the caller's configuration, which dlcp_sim_new
   * copies shallowly and the caller may free: what the run reads later
   * is the job's own. */
  job->spec.stragglers = NULL;
  if (s->nstragglers) {
    job->spec.stragglers =
        dlcp_sim_coll_zalloc(sim, s->nstragglers, sizeof(*s->stragglers));
    if (!job->spec.stragglers) {
      return DLCP_ERR_NOMEM;
    }
    memcpy(job->spec.stragglers, s->stragglers,
           s->nstragglers * sizeof(*s->stragglers));
  }
  job->algo = s->algo;
  job->min_delivered = 1.0;
  job->failed_rank = -1;
  job->n = s->hosts ? s->nhosts : s->ranks ? s->ranks : net->nhosts;
  if (job->n < 1 || job->n > net->nhosts || job->n > DLCP_COLL_MAX_WORLD) {
    snprintf(err, errlen, "%s: field '%s.ranks': expected 1..%u ranks",
             s->where, s->field,
             net->nhosts < DLCP_COLL_MAX_WORLD ? net->nhosts
                                               : DLCP_COLL_MAX_WORLD);
    return DLCP_ERR_CONFIG;
  }
  for (uint32_t i = 0; i < s->nstragglers; i++) {
    const dlcp_sim_straggler *st = &s->stragglers[i];
    if (st->rank >= job->n) {
      snprintf(err, errlen,
               "%s: field '%s.rank': expected a rank in [0, %u]", st->where,
               st->field, job->n - 1);
      return DLCP_ERR_CONFIG;
    }
  }
  if (s->prio >= sim->cfg.sw.nqueues) {
    snprintf(err, errlen,
             "%s: field '%s.priority': expected an integer in "
             "[0, %u] (switch.queues - 1)",
             s->where, s->field, sim->cfg.sw.nqueues - 1);
    return DLCP_ERR_CONFIG;
  }
  job->ina_group_blocks = job->algo == DLCP_ALGO_RA_INA ? job->n
                          : s->ina_group_blocks         ? s->ina_group_blocks
                                                        : 4;
  int rv = dlcp_sim_coll_is_ina(job->algo) ? ina_check(job, err, errlen) : 0;
  if (rv != 0) {
    return rv;
  }
  /* Scale: the smallest power of two keeping the vectors in budget. */
  uint32_t scale = dlcp_sim_coll_is_ina(job->algo) ? 1 : s->scale;
  if (scale == 0) {
    scale = 1;
    while ((double)s->bytes / scale * job->n > (double)COLL_MEM_BUDGET &&
           scale < (1u << 30)) {
      scale *= 2;
    }
  }
  job->scale = scale;
  job->count = s->bytes / ((uint64_t)scale * sizeof(float));
  if (job->count == 0) {
    snprintf(err, errlen,
             "%s: field '%s.bytes': expected at least "
             "4 * scale (%u) bytes",
             s->where, s->field, scale);
    return DLCP_ERR_CONFIG;
  }
  uint64_t chunk =
      s->chunk_bytes ? s->chunk_bytes : DLCP_COLL_DEFAULT_CHUNK_BYTES;
  job->chunk = scaled_down(chunk, scale);
  job->rat_min_part = scaled_down(DLCP_COLL_RAT_MIN_PART_BYTES, scale);
  /* Posting receives further ahead only helps a transport whose receive
   * releases the sender's data (MLT's START): over the others a flow
   * starts when both ends posted, and receives posted ahead only let a
   * ring's steps overlap as separate flows that share the sender's link
   * (a ring of 64 ranks over DCTCP, 6 MB: 6.0 -> 10.4 ms). */
  job->recv_ahead = dlcp_sim_expects(sim)
                        ? scaled_down(DLCP_COLL_DEFAULT_RECV_AHEAD_BYTES, scale)
                        : 0;
  job->exact_bytes = exact_bytes(&sim->cfg.transport, scale);
  uint64_t wire = job->count * sizeof(float) * scale;
  if (wire > sim->coll_max_flow) {
    /* No transfer is larger than the whole vector (the halving-doubling
     * fold sends all of it). */
    sim->coll_max_flow = wire;
  }
  job->ranks = dlcp_sim_coll_zalloc(sim, job->n, sizeof(*job->ranks));
  job->rank_of_host = dlcp_sim_coll_zalloc(sim, net->nhosts, sizeof(uint32_t));
  job->it = dlcp_sim_coll_zalloc(sim, s->iterations, sizeof(*job->it));
  job->expected = dlcp_sim_coll_zalloc(sim, job->count, sizeof(float));
  if (!job->ranks || !job->rank_of_host || !job->it || !job->expected) {
    return DLCP_ERR_NOMEM;
  }
  memset(job->rank_of_host, 0xff, net->nhosts * sizeof(uint32_t));
  rv = place(job, used, err, errlen);
  if (rv != 0) {
    return rv;
  }
  dlcp_coll_params p;
  dlcp_coll_params_default(&p);
  p.kind = s->kind;
  p.algo = job->algo;
  p.world = job->n;
  p.count = s->bytes / sizeof(float); /* AUTO picks by the simulated size */
  p.topo = job->labels;
  p.topo_levels = job->levels;
  int algo = dlcp_sim_coll_is_ina(job->algo) ? (int)job->algo
                                             : dlcp_coll_resolve_algo(&p);
  if (algo < 0) {
    snprintf(err, errlen,
             "%s: field '%s.algo': expected an algorithm that "
             "runs %s",
             s->where, s->field, dlcp_coll_kind_name(s->kind));
    return DLCP_ERR_CONFIG;
  }
  job->algo = (dlcp_algo)algo;
  for (uint64_t j = 0; j < job->count; j++) {
    float sum = 0.0f;
    for (uint32_t r = 0; r < job->n; r++) {
      sum += dlcp_sim_coll_rank_input(job, r, j);
    }
    job->expected[j] = sum;
  }
  for (uint32_t r = 0; r < job->n; r++) {
    coll_rank *rk = &job->ranks[r];
    rk->job = job;
    rk->rank = r;
    rk->buf = dlcp_sim_coll_zalloc(sim, job->count, sizeof(float));
    if (!rk->buf) {
      return DLCP_ERR_NOMEM;
    }
    dlcp_sim_timer_init(&rk->timer, &sim->engine, dlcp_sim_coll_rank_timer, rk);
    rk->step_hint_ns = dlcp_sim_time_to_ns(s->bypass_step_ps);
    rk->trans_hint_ns = dlcp_sim_time_to_ns(s->bypass_trans_ps);
  }
  if (dlcp_sim_coll_is_ina(job->algo) &&
      (rv = ina_setup(job, err, errlen)) != 0) {
    return rv;
  }
  for (uint32_t i = 0; i < s->iterations; i++) {
    job->it[i].start_ps = DLCP_SIM_PS_NEVER;
    job->it[i].end_ps = DLCP_SIM_PS_NEVER;
  }
  sim->busy++;
  dlcp_sim_engine_at_cold(&sim->engine, s->start_ps, dlcp_sim_coll_job_start,
                          job, NULL);
  return 0;
}

int dlcp_sim_coll_build(dlcp_sim *sim, char *err, size_t errlen) {
  if (sim->cfg.ncolls == 0) {
    return 0;
  }
  dlcp_sim_colls *c = dlcp_sim_coll_zalloc(sim, 1, sizeof(*c));
  if (!c) {
    return DLCP_ERR_NOMEM;
  }
  sim->colls = c;
  c->sim = sim;
  c->jobs = dlcp_sim_coll_zalloc(sim, sim->cfg.ncolls, sizeof(*c->jobs));
  if (!c->jobs || coll_match_init(&c->xfers, sim->mem, sizeof(sim_xfer)) != 0) {
    return DLCP_ERR_NOMEM;
  }
  c->njobs = sim->cfg.ncolls;
  /* The hosts of the jobs built so far. */
  bool *used = dlcp_sim_coll_zalloc(sim, sim->net.nhosts, sizeof(*used));
  if (!used) {
    return DLCP_ERR_NOMEM;
  }
  int rv = 0;
  for (uint32_t i = 0; i < c->njobs && rv == 0; i++) {
    rv = build_job(sim, i, used, err, errlen);
  }
  sim->mem->free(used, sim->mem->user);
  return rv;
}

void dlcp_sim_coll_free(dlcp_sim *sim) {
  dlcp_sim_colls *c = sim->colls;
  if (!c) {
    return;
  }
  const dlcp_mem *mem = sim->mem;
  for (uint32_t i = 0; i < c->njobs; i++) {
    coll_job *job = &c->jobs[i];
    for (uint32_t r = 0; job->ranks && r < job->n; r++) {
      dlcp_coll_del(job->ranks[r].op);
      mem->free(job->ranks[r].buf, mem->user);
      mem->free(job->ranks[r].notes, mem->user);
      mem->free(job->ranks[r].ring_buf, mem->user);
      mem->free(job->ranks[r].exps, mem->user);
      mem->free(job->ranks[r].agree_buf, mem->user);
    }
    mem->free(job->spec.stragglers, mem->user);
    mem->free(job->ina_exps, mem->user);
    mem->free(job->cina_tor_rank, mem->user);
    mem->free(job->cina_tor_world, mem->user);
    mem->free(job->ranks, mem->user);
    mem->free(job->rank_of_host, mem->user);
    mem->free(job->labels, mem->user);
    mem->free(job->expected, mem->user);
    mem->free(job->it, mem->user);
  }
  for (uint32_t i = 0; i < coll_match_slots(&c->xfers); i++) {
    mem->free(((sim_xfer *)(void *)coll_match_at(&c->xfers, i))->holes,
              mem->user);
  }
  for (uint32_t i = 0; i < c->npauses; i++) {
    mem->free(c->pauses[i].cand, mem->user);
  }
  mem->free(c->pauses, mem->user);
  coll_match_free(&c->xfers);
  mem->free(c->jobs, mem->user);
  mem->free(c, mem->user);
  sim->colls = NULL;
}
