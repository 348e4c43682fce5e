/*
 * coll_cina.c: the hosts' half of CINA (RA-INA/CINA seed, chapter 4) in
 * the simulator: each rank of a `cina` job is the master of a host with
 * |gpus_per_host| GPUs.
 *
 * Model.  The n GPUs of a host ring-reduce their vectors to the master
 * (the last GPU) in k pipelined chunks through shared memory: the seed's
 * n + k - 2 steps, each moving one chunk (K/k bytes of a K-byte vector)
 * at the intra-host rate plus the intra-host latency.  The master holds
 * chunk c reduced after n - 1 + c steps (one GPU has nothing to reduce:
 * all at once), and that is when chunk c is summed into the master's
 * buffer and its groups are released to the master's src/coll/ina state
 * machine (dlcp_ina_release): the seed's overlap, where a master forwards
 * its first aggregated chunk to its ToR at once while the rest of the
 * host's ring-reduce goes on.  The intra-host traffic itself is not on
 * the simulated network (it never leaves the host); its time is the
 * seed's formula.  Until a chunk is released its part of the buffer is
 * zero, so a group sent early would make the checked sum wrong.
 *
 * Each master contributes to its rack's switch of aggregation.chain
 * (CINA), .tree (HINA) or .trees (MTINA) as rank tor_rank of a core of
 * world tor_world (agg_switch.c runs the chain or trees); the final sum
 * comes back as that core's RESULT.  Every master scales its block
 * floating point for all the GPUs of the job (scale_world; the exponents
 * are agreed over every GPU's input), its sum counting as its GPUs'
 * inputs, as the runtime's masters do.  The final sum then
 * reaches the other GPUs of the host through shared memory, which is not
 * timed (the seed's formula ends when the masters hold it too).
 *
 * GPU g of master r has the input dlcp_sim_coll_input(r * n + g, j), so a
 * master's contribution is their sum and the job's exact result the sum
 * over all N = masters * n GPUs.
 */
#include <math.h>
#include <string.h>

#include "sim/coll_job.h"

float dlcp_sim_coll_rank_input(const coll_job *job, uint32_t r, uint64_t j) {
  if (!job->spec.cina) {
    return dlcp_sim_coll_input(r, j);
  }
  uint32_t n = job->spec.cina_gpus;
  float sum = 0.0f;
  for (uint32_t g = 0; g < n; g++) {
    sum += dlcp_sim_coll_input(r * n + g, j);
  }
  return sum;
}

int dlcp_sim_coll_cina_setup(coll_job *job, char *err, size_t errlen) {
  dlcp_sim *sim = job->sim;
  const dlcp_sim_coll_spec *s = &job->spec;
  /* ina_check (coll_build.c) has made sure the aggregation section
   * matches the algorithm. */
  uint32_t *hosts = dlcp_sim_coll_zalloc(sim, job->n, sizeof(uint32_t));
  job->cina_tor_rank = dlcp_sim_coll_zalloc(sim, job->n, sizeof(uint32_t));
  job->cina_tor_world = dlcp_sim_coll_zalloc(sim, job->n, sizeof(uint32_t));
  if (!hosts || !job->cina_tor_rank || !job->cina_tor_world) {
    sim->mem->free(hosts, sim->mem->user);
    return DLCP_ERR_NOMEM;
  }
  for (uint32_t r = 0; r < job->n; r++) {
    hosts[r] = job->ranks[r].host;
  }
  size_t group_bytes =
      4u * (size_t)sim->cfg.agg.block_elems * job->ina_group_blocks;
  /* The seed's switches never refuse a child switch (a refusal would
   * cost a re-send interval): a pool holds every group the masters can
   * have in flight, two windows (a master is at most a window ahead of
   * the slowest, which is at most a window ahead of its own low mark),
   * for every job sharing the switches. */
  uint32_t window = s->ina_window ? s->ina_window : 64u;
  uint64_t blocks = 2ull * window * job->ina_group_blocks;
  int rv = dlcp_sim_agg_chain_job(sim, hosts, job->n, group_bytes, blocks,
                                  job->cina_tor_rank, job->cina_tor_world);
  sim->mem->free(hosts, sim->mem->user);
  if (rv == DLCP_ERR_LIMIT) {
    snprintf(err, errlen,
             "%s: field '%s.memory': expected room for two windows of "
             "groups of every job at each aggregating switch (this job: "
             "%llu blocks of %u int32 for window %u)",
             sim->cfg.agg.where, sim->cfg.agg.field,
             (unsigned long long)blocks, sim->cfg.agg.block_elems, window);
    return DLCP_ERR_CONFIG;
  }
  if (rv == DLCP_ERR_INVALID_ARGUMENT) {
    snprintf(err, errlen,
             "%s: field '%s.hosts': expected hosts below the aggregating "
             "switches: one or more below each switch of a chain and each "
             "leaf of a tree, a switch with hosts in every tree, at most 64 "
             "workers per switch, and as many below each switch as the "
             "first such job",
             s->where, s->field);
    return DLCP_ERR_CONFIG;
  }
  return rv;
}

/* The groups [0, end) of chunk c's end, of k chunks over |ngroups|. */
static uint32_t chunk_end(uint32_t c, uint32_t k, uint32_t ngroups) {
  return (uint32_t)(((uint64_t)(c + 1u) * ngroups + k - 1u) / k);
}

static uint32_t chunk_begin(uint32_t c, uint32_t k, uint32_t ngroups) {
  return c == 0 ? 0 : chunk_end(c - 1u, k, ngroups);
}

void dlcp_sim_coll_cina_params(coll_rank *rk, dlcp_ina_params *p) {
  coll_job *job = rk->job;
  p->rank = job->cina_tor_rank[rk->rank];
  p->world = job->cina_tor_world[rk->rank];
  /* Scaled for every GPU of the job, each master's sum counting as its
   * host's GPUs' inputs, as the runtime's masters (src/rt/ina_run.c);
   * AVG divides by all of them. */
  uint32_t gpus = job->spec.cina_gpus > 1 ? job->spec.cina_gpus : 1;
  p->scale_world = job->n * gpus;
  p->inputs = gpus;
  if (job->spec.cina_gpus > 1) {
    p->ready_groups = 0;
    memset(rk->buf, 0, job->count * sizeof(float));
  }
}

/* Chunk |c| of |rk|'s host is reduced at the master: sum it into the
 * buffer and let its groups go. */
static void chunk_reduced(void *obj, void *arg, dlcp_sim_ps now) {
  coll_rank *rk = obj;
  coll_job *job = rk->job;
  uint32_t c = (uint32_t)(uintptr_t)arg;
  dlcp_ina *op = dlcp_sim_ina_op(job->sim, job->id, rk->rank);
  if (!op || job->status != 0) {
    return;
  }
  uint32_t k = job->spec.cina_chunks, ng = job->ina_ngroups;
  uint64_t ge = (uint64_t)job->sim->cfg.agg.block_elems * job->ina_group_blocks;
  uint64_t lo = chunk_begin(c, k, ng) * ge;
  uint64_t hi = chunk_end(c, k, ng) * ge;
  for (uint64_t j = lo; j < hi && j < job->count; j++) {
    rk->buf[j] = dlcp_sim_coll_rank_input(job, rk->rank, j);
  }
  dlcp_ina_release(op, chunk_end(c, k, ng));
  dlcp_sim_ina_kick(job->sim, job->id, rk->rank, now);
}

void dlcp_sim_coll_cina_schedule(coll_rank *rk, dlcp_sim_ps now) {
  coll_job *job = rk->job;
  const dlcp_sim_coll_spec *s = &job->spec;
  if (s->cina_gpus <= 1) {
    return;
  }
  /* One step moves a chunk of K/k bytes inside the host. */
  double chunk_bytes = (double)job->count * 4.0 / s->cina_chunks;
  dlcp_sim_ps step =
      (dlcp_sim_ps)llround(chunk_bytes * 8.0 * (double)DLCP_SIM_PS_PER_S /
                           (double)s->cina_intra_bps) +
      s->cina_intra_ps;
  for (uint32_t c = 0; c < s->cina_chunks; c++) {
    dlcp_sim_engine_at_cold(&job->sim->engine,
                            now + (s->cina_gpus - 1u + c) * step, chunk_reduced,
                            rk, (void *)(uintptr_t)c);
  }
}
