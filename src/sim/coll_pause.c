/*
 * coll_pause.c: the PAUSE fault.  Every |every| from |at|, |k| of the
 * candidate hosts (the first collective job's ranks, or all hosts) are
 * chosen with a seeded shuffle and their NICs stop sending for
 * |duration|; pauses nest.
 */
#include <stdio.h>

#include "sim/coll_job.h"

static void pause_resume(void *obj, void *arg, dlcp_sim_ps now) {
  dlcp_sim *sim = obj;
  uint32_t host = (uint32_t)(uintptr_t)arg;
  dlcp_sim_port_pause(dlcp_sim_host_nic(&sim->net, host), false, now);
}

static void pause_tick(void *obj, void *arg, dlcp_sim_ps now) {
  pause_state *ps = obj;
  dlcp_sim *sim = ps->sim;
  (void)arg;
  if (dlcp_sim_finished(sim)) {
    return;
  }
  /* Partial Fisher-Yates over the candidates: the first k are chosen. */
  uint32_t k = ps->k < ps->ncand ? ps->k : ps->ncand;
  for (uint32_t i = 0; i < k; i++) {
    uint32_t j = i + (uint32_t)dlcp_rng_below(&ps->rng, ps->ncand - i);
    uint32_t t = ps->cand[i];
    ps->cand[i] = ps->cand[j];
    ps->cand[j] = t;
    dlcp_sim_port_pause(dlcp_sim_host_nic(&sim->net, ps->cand[i]), true, now);
    dlcp_sim_engine_at_cold(&sim->engine, now + ps->duration, pause_resume, sim,
                            (void *)(uintptr_t)ps->cand[i]);
    sim->colls->npaused++;
  }
  dlcp_sim_engine_at_cold(&sim->engine, now + ps->every, pause_tick, ps, NULL);
}

int dlcp_sim_coll_schedule_pauses(dlcp_sim *sim, char *err, size_t errlen) {
  uint32_t n = 0;
  for (uint32_t i = 0; i < sim->cfg.nfaults; i++) {
    n += sim->cfg.faults[i].kind == DLCP_SIM_FAULT_PAUSE;
  }
  if (n == 0) {
    return 0;
  }
  if (!sim->colls) {
    sim->colls = dlcp_sim_coll_zalloc(sim, 1, sizeof(*sim->colls));
    if (!sim->colls) {
      return DLCP_ERR_NOMEM;
    }
    sim->colls->sim = sim;
  }
  dlcp_sim_colls *c = sim->colls;
  c->pauses = dlcp_sim_coll_zalloc(sim, n, sizeof(*c->pauses));
  if (!c->pauses) {
    return DLCP_ERR_NOMEM;
  }
  const dlcp_sim_net *net = &sim->net;
  for (uint32_t i = 0; i < sim->cfg.nfaults; i++) {
    const dlcp_sim_fault_spec *f = &sim->cfg.faults[i];
    if (f->kind != DLCP_SIM_FAULT_PAUSE) {
      continue;
    }
    pause_state *ps = &c->pauses[c->npauses++];
    ps->sim = sim;
    ps->k = f->pause_ranks;
    ps->duration = f->pause_ps;
    ps->every = f->every_ps;
    dlcp_rng_seed(&ps->rng, sim->cfg.seed ^ (0x9A05Eull + i));
    bool jobs = c->njobs > 0;
    uint32_t ncand = jobs ? c->jobs[0].n : net->nhosts;
    ps->cand = dlcp_sim_coll_zalloc(sim, ncand, sizeof(uint32_t));
    if (!ps->cand) {
      return DLCP_ERR_NOMEM;
    }
    for (uint32_t j = 0; j < ncand; j++) {
      ps->cand[j] = jobs ? c->jobs[0].ranks[j].host : j;
    }
    ps->ncand = ncand;
    if (ps->k == 0 || ps->k > ncand || ps->every == 0 || ps->duration == 0) {
      snprintf(err, errlen,
               "%s: field '%s.pause': expected 1..%u ranks "
               "and every, duration > 0",
               f->where, f->field, ncand);
      return DLCP_ERR_CONFIG;
    }
    dlcp_sim_engine_at_cold(&sim->engine, f->at_ps, pause_tick, ps, NULL);
  }
  return 0;
}

uint64_t dlcp_sim_coll_pauses(const dlcp_sim *sim) {
  return sim->colls ? sim->colls->npaused : 0;
}
