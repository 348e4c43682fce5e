/*
 * ina_host.c: the hosts' side of in-network aggregation in the simulator:
 * one src/coll/ina state machine per rank of an INA or RA-INA job, the
 * same one the runtime drives over its UDP socket (src/rt/ina_run.c).
 *
 * collective.c decides when a rank's all-reduce starts and what it
 * reduces; here its INA operation is driven as the runtime's loop does:
 * poll the core until it has nothing to send, put every datagram on the
 * host's NIC addressed to the aggregation switch (dlcp_sim_agg_address:
 * one hop away or through the fabric; ECN-capable, on the job's queue),
 * hand every INA packet that reaches the host to the core, and arm one
 * engine timer at the core's deadline.
 * A RESULT that arrives after its operation ended (the switch re-sent it
 * because an ACK was lost) is acknowledged statelessly, as the runtime
 * does.  When the core reports DONE, collective.c is told
 * (dlcp_sim_coll_ina_done), and it ends the operation with
 * dlcp_sim_ina_end once it has what it needs (RA-INA's ring groups).
 *
 * On the wire a job is job id (its collective index + 1) and a token drawn
 * from the run's seed.
 */
#include <string.h>

#include "coll/ina.h"
#include "proto/rng.h"
#include "sim/sim.h"

typedef struct ina_rank {
  struct ina_job *job;
  uint32_t rank, host;
  dlcp_ina *op; /* NULL outside an operation */
  uint32_t first_group, ngroups; /* the operation's groups */
  dlcp_sim_timer timer;
} ina_rank;

typedef struct ina_job {
  struct dlcp_sim_ina *ina;
  uint32_t id; /* the collective job */
  uint32_t n, prio;
  uint64_t token;
  ina_rank *ranks;
  uint32_t *rank_of_host; /* DLCP_SIM_NONE if the host is not in the job */
} ina_job;

struct dlcp_sim_ina {
  dlcp_sim *sim;
  ina_job *jobs; /* one per collective job; n == 0 if not an INA job */
  uint32_t njobs;
  uint8_t *buf; /* one datagram from dlcp_ina_poll */
  size_t buflen;
};

static dlcp_tstamp ns_of(dlcp_sim_ps t) {
  return dlcp_sim_time_to_ns(t);
}

static void send_dgram(ina_rank *rk, const uint8_t *dgram, size_t len,
                       dlcp_sim_ps now) {
  dlcp_sim *sim = rk->job->ina->sim;
  dlcp_sim_packet *pkt =
      dlcp_sim_ina_packet_new(sim, dgram, len, rk->job->prio, DLCP_SIM_ECN_ECT);
  if (!pkt) {
    return;
  }
  pkt->src = rk->host;
  dlcp_sim_agg_address(sim, rk->host, pkt); /* to the aggregation switch */
  dlcp_sim_send(sim, rk->host, pkt, now);
}

/* Polls |rk|'s operation until it has nothing to send, then arms its
 * deadline; tells collective.c once it is DONE. */
static void process(ina_rank *rk, dlcp_sim_ps now) {
  struct dlcp_sim_ina *ina = rk->job->ina;
  for (int round = 0; round < 1000 && rk->op; round++) {
    dlcp_ina_action act;
    for (;;) {
      (void)dlcp_ina_poll(rk->op, &act, ina->buf, ina->buflen, ns_of(now));
      if (act.type != DLCP_INA_ACT_SEND) {
        break;
      }
      send_dgram(rk, ina->buf, act.len, now);
    }
    if (act.type == DLCP_INA_ACT_DONE) {
      dlcp_sim_timer_cancel(&rk->timer);
      dlcp_sim_coll_ina_done(ina->sim, rk->job->id, rk->rank, now);
      return;
    }
    if (!dlcp_sim_timer_follow(&rk->timer, dlcp_ina_next_deadline(rk->op),
                               now)) {
      return;
    }
    /* A deadline at or before now: polling again fires it. */
  }
  if (rk->op) {
    dlcp_sim_engine_fail(&ina->sim->engine, DLCP_ERR_LIMIT);
  }
}

static void timer_fire(void *obj, dlcp_sim_ps now) {
  process(obj, now);
}

static ina_job *job_at(const dlcp_sim *sim, uint32_t job) {
  struct dlcp_sim_ina *ina = sim->ina;
  return ina && job < ina->njobs && ina->jobs[job].n ? &ina->jobs[job] : NULL;
}

int dlcp_sim_ina_job_add(dlcp_sim *sim, uint32_t job, uint32_t njobs,
                         const uint32_t *hosts, uint32_t n, uint32_t prio) {
  const dlcp_mem *mem = sim->mem;
  struct dlcp_sim_ina *ina = sim->ina;
  if (!ina) {
    ina = mem->calloc(1, sizeof(*ina), mem->user);
    if (!ina) {
      return DLCP_ERR_NOMEM;
    }
    sim->ina = ina;
    ina->sim = sim;
    ina->jobs = mem->calloc(njobs, sizeof(*ina->jobs), mem->user);
    ina->buflen = DLCP_AGG_DGRAM_MAX;
    ina->buf = mem->malloc(ina->buflen, mem->user);
    if (!ina->jobs || !ina->buf) {
      return DLCP_ERR_NOMEM;
    }
    ina->njobs = njobs;
  }
  ina_job *j = &ina->jobs[job];
  j->ina = ina;
  j->id = job;
  j->prio = prio;
  dlcp_rng rng;
  dlcp_rng_seed(&rng, sim->cfg.seed ^ (0x1AA70000ull + job));
  j->token = dlcp_rng_next(&rng);
  j->ranks = mem->calloc(n, sizeof(*j->ranks), mem->user);
  j->rank_of_host = mem->malloc(sim->net.nhosts * sizeof(uint32_t), mem->user);
  if (!j->ranks || !j->rank_of_host) {
    return DLCP_ERR_NOMEM;
  }
  j->n = n;
  memset(j->rank_of_host, 0xff, sim->net.nhosts * sizeof(uint32_t));
  for (uint32_t r = 0; r < n; r++) {
    ina_rank *rk = &j->ranks[r];
    rk->job = j;
    rk->rank = r;
    rk->host = hosts[r];
    j->rank_of_host[hosts[r]] = r;
    dlcp_sim_timer_init(&rk->timer, &sim->engine, timer_fire, rk);
  }
  return 0;
}

void dlcp_sim_ina_identity(const dlcp_sim *sim, uint32_t job,
                           uint32_t *wire_job, uint64_t *token) {
  const ina_job *j = job_at(sim, job);
  *wire_job = job + 1;
  *token = j ? j->token : 0;
}

int dlcp_sim_ina_start(dlcp_sim *sim, uint32_t job, uint32_t rank,
                       const dlcp_ina_params *p, dlcp_sim_ps now) {
  ina_job *j = job_at(sim, job);
  if (!j || rank >= j->n || j->ranks[rank].op) {
    return DLCP_ERR_INVALID_ARGUMENT;
  }
  ina_rank *rk = &j->ranks[rank];
  int rv = dlcp_ina_new(&rk->op, p, sim->mem, ns_of(now));
  if (rv != 0) {
    rk->op = NULL;
    return rv;
  }
  rk->first_group = p->first_group;
  rk->ngroups = dlcp_ina_ngroups(p->count, p->block_elems, p->group_blocks);
  process(rk, now);
  return 0;
}

void dlcp_sim_ina_kick(dlcp_sim *sim, uint32_t job, uint32_t rank,
                      dlcp_sim_ps now) {
  ina_job *j = job_at(sim, job);
  if (j && rank < j->n && j->ranks[rank].op) {
    process(&j->ranks[rank], now);
  }
}

dlcp_ina *dlcp_sim_ina_op(const dlcp_sim *sim, uint32_t job, uint32_t rank) {
  const ina_job *j = job_at(sim, job);
  return j && rank < j->n ? j->ranks[rank].op : NULL;
}

void dlcp_sim_ina_end(dlcp_sim *sim, uint32_t job, uint32_t rank) {
  ina_job *j = job_at(sim, job);
  if (j && rank < j->n) {
    dlcp_sim_timer_cancel(&j->ranks[rank].timer);
    dlcp_ina_del(j->ranks[rank].op);
    j->ranks[rank].op = NULL;
  }
}

void dlcp_sim_ina_on_packet(dlcp_sim *sim, uint32_t host, dlcp_sim_packet *pkt,
                            dlcp_sim_ps now) {
  size_t len;
  const uint8_t *bytes = dlcp_sim_ina_packet_bytes(sim, pkt, &len);
  dlcp_agg_hdr h;
  const uint8_t *payload;
  ina_job *j = NULL;
  if (bytes && dlcp_agg_decode(&h, &payload, bytes, len) == 0 && h.job > 0) {
    j = job_at(sim, h.job - 1);
  }
  uint32_t r = j ? j->rank_of_host[host] : DLCP_SIM_NONE;
  if (r == DLCP_SIM_NONE) {
    dlcp_sim_packet_drop(sim, pkt); /* not for a job of this host */
    return;
  }
  ina_rank *rk = &j->ranks[r];
  if (rk->op && h.group - rk->first_group < rk->ngroups) {
    (void)dlcp_ina_on_packet(rk->op, bytes, len, pkt->ecn, ns_of(now));
  } else {
    /* A result of an earlier operation, re-sent: acknowledge it, with a
     * mark no higher than the operation in flight's.  Every packet of the
     * operation's own groups goes to it above, even one it refuses:
     * acknowledged here with the mark after its group, such a result slid
     * the switch's window past groups the operation still needed, which
     * came back GONE (three jobs on a shared pool under link loss,
     * sim_ina_test test_jobs_share_pool_under_loss, docs/ina.md). */
    uint8_t ack[DLCP_AGG_HDR_LEN];
    uint32_t low = rk->op ? dlcp_ina_low(rk->op) : 0;
    dlcp_ssize n = dlcp_ina_ack_for(ack, sizeof(ack), bytes, len, h.job,
                                    j->token, rk->op ? &low : NULL);
    if (n > 0) {
      send_dgram(rk, ack, (size_t)n, now);
    }
  }
  dlcp_sim_packet_drop(sim, pkt);
  if (rk->op) {
    process(rk, now);
  }
}

void dlcp_sim_ina_free(dlcp_sim *sim) {
  struct dlcp_sim_ina *ina = sim->ina;
  if (!ina) {
    return;
  }
  const dlcp_mem *mem = sim->mem;
  for (uint32_t i = 0; ina->jobs && i < ina->njobs; i++) {
    ina_job *j = &ina->jobs[i];
    for (uint32_t r = 0; j->ranks && r < j->n; r++) {
      dlcp_ina_del(j->ranks[r].op);
    }
    mem->free(j->ranks, mem->user);
    mem->free(j->rank_of_host, mem->user);
  }
  mem->free(ina->jobs, mem->user);
  mem->free(ina->buf, mem->user);
  mem->free(ina, mem->user);
  sim->ina = NULL;
}
