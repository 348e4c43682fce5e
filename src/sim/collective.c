/*
 * collective.c: collective training jobs in the simulator, driving the
 * unchanged src/coll state machines, and the PAUSE fault.
 *
 * Model.  A job has n ranks on n hosts.  Each rank repeats: compute for
 * compute_time, then run one dlcp_coll all-reduce (the algorithm of the
 * scenario), then the next iteration as soon as its own all-reduce is
 * DONE; nothing else synchronizes the ranks.  The driver is collsim's
 * (tests/support/collsim.c) with the network in place of its latency
 * model:
 *   SEND/RECV   a transfer is keyed by (job, iteration, sender, receiver,
 *               tag); when both ends have posted it, it becomes one flow
 *               of |bytes| x scale bytes through the scenario's transport
 *               (MLT: one tensor, posted with the RECV's loss bound;
 *               DCTCP: one connection).  When the receiver holds it, the
 *               state machine's bytes are copied from the SEND's buffer
 *               into the RECV's (holes MLT reports are zero-filled and
 *               passed on); the sender's on_sent follows its completion
 *               (the last ACK, or MLT's STOP).
 *   NOTE        one lossless packet on queue 0 (IPv4 + TCP + 24 bytes),
 *               following one ECMP path per host pair, so notes between
 *               two hosts stay in order, like the runtime's TCP channel.
 *   CANCEL_RECV forgets an unmatched receive.
 *   deadlines   one engine timer per rank (only the straggler bypass).
 * Events from the transports are applied to the state machine at once (an
 * on_* call only records), but the state machine is polled from an event
 * of its own at the same instant: the transport that reported is still on
 * the stack, holding flow pointers, and polling may add flows (which can
 * move the flow table).
 *
 * Buffers.  The state machines reduce real memory, so every rank owns a
 * float32 vector; its contents are small integers chosen so every sum is
 * exact, and each DONE is checked against the exact sum (verify_errors).
 * Memory would be n x bytes (plus scratch), so the vector is |scale| times
 * smaller than the simulated one and every transfer goes on the wire
 * |scale| times larger (the pipelining chunk is scaled the same way, so
 * the plan has the same transfers).  scale 0 picks the smallest power of
 * two that keeps n x bytes / scale within 32 MiB.
 *
 * Placement.  Hosts are taken round-robin over the racks (as many as
 * |ranks|), then numbered rack by rack in host order, so a ring crosses
 * each rack boundary once and RAT's regions are contiguous.  RAT's labels
 * are the rack (the ToR) and, in a fat-tree, the pod.
 *
 * PAUSE.  Every |every| from |at|, |k| of the candidate hosts (the first
 * job's ranks, or all hosts) are chosen with a seeded shuffle and their
 * NICs stop sending for |duration|; pauses nest.
 */
#include <stdlib.h>
#include <string.h>

#include "coll/coll.h"
#include "coll/match.h"
#include "proto/rng.h"
#include "sim/sim.h"

#define COLL_MEM_BUDGET (32ull << 20) /* simulated vectors, all ranks */
#define NOTE_BYTES 64u                /* IPv4 + TCP + job, iter, rank, value */

/* A transfer: the matcher's record (coll/match.h), then the simulator's
 * part, kept across recycled slots (the hole array) or reset at removal. */
typedef struct sim_xfer {
  coll_xfer m;
  bool recv_done, send_done;
  dlcp_coll_range *holes;
  size_t nholes, holes_cap;
} sim_xfer;

typedef struct pending_note {
  uint32_t iter, peer;
  uint64_t value;
} pending_note;

typedef struct coll_rank {
  struct coll_job *job;
  uint32_t rank, host;
  uint32_t iter; /* the iteration being computed or reduced */
  dlcp_coll *op; /* NULL while computing or when finished */
  float *buf;
  bool poll_queued, finished;
  dlcp_sim_ps coll_start;
  dlcp_sim_timer timer; /* bypass deadline */
  dlcp_duration step_hint_ns, trans_hint_ns;
  pending_note *notes;
  uint32_t nnotes, notes_cap;
} coll_rank;

typedef struct coll_job {
  dlcp_sim *sim;
  uint32_t id;
  dlcp_sim_coll_spec spec;
  dlcp_algo algo;
  uint32_t n;
  coll_rank *ranks;
  uint32_t *rank_of_host; /* DLCP_SIM_NONE if the host is not in the job */
  uint32_t *labels;
  uint32_t levels;
  uint64_t count; /* float32 elements per rank */
  uint32_t scale;
  uint64_t chunk;
  float *expected;
  dlcp_sim_coll_iter *it;
  uint64_t verify_errors;
  double min_delivered;
  uint32_t bypasses;
  uint32_t ranks_finished;
  int status;
  int32_t failed_rank;
  bool done;
} coll_job;

typedef struct pause_state {
  dlcp_sim *sim;
  uint32_t k;
  dlcp_sim_ps duration, every;
  uint32_t *cand;
  uint32_t ncand;
  dlcp_rng rng;
} pause_state;

typedef struct dlcp_sim_colls {
  dlcp_sim *sim;
  coll_job *jobs;
  uint32_t njobs;
  coll_match xfers; /* of sim_xfer */
  pause_state *pauses;
  uint32_t npauses;
  uint64_t npaused; /* pauses started */
} dlcp_sim_colls;

static uint64_t ns_of(dlcp_sim_ps t) { return dlcp_sim_time_to_ns(t); }

static void *zalloc(const dlcp_sim *sim, size_t n, size_t size) {
  return sim->mem->calloc(n ? n : 1, size, sim->mem->user);
}

/* ---- transfers ---------------------------------------------------------- */

static sim_xfer *xfer_at(const dlcp_sim_colls *c, uint32_t i) {
  return (sim_xfer *)(void *)coll_match_at(&c->xfers, i);
}

/* Transfer |i| is over at both ends: its slot is recycled, its hole array
 * kept for the next transfer in it. */
static void xremove(dlcp_sim_colls *c, uint32_t i) {
  sim_xfer *x = xfer_at(c, i);
  x->nholes = 0;
  x->recv_done = x->send_done = false;
  coll_match_remove(&c->xfers, i);
}

/* ---- ranks --------------------------------------------------------------- */

static void job_fail(coll_job *job, uint32_t rank, int status,
                     dlcp_sim_ps now);
static void rank_process(coll_rank *rk, dlcp_sim_ps now);

static void poll_event(void *obj, void *arg, dlcp_sim_ps now) {
  (void)arg;
  rank_process(obj, now);
}

/* Polls |rk| from an event of its own at |now| (see the model above). */
static void queue_poll(coll_rank *rk, dlcp_sim_ps now) {
  if (rk->poll_queued || !rk->op) {
    return;
  }
  rk->poll_queued = true;
  dlcp_sim_engine_at_cold(&rk->job->sim->engine, now, poll_event, rk, NULL);
}

static void timer_fire(void *obj, dlcp_sim_ps now) {
  rank_process(obj, now);
}

/* Rank r's input: small integers, so that any summation order is exact in
 * float32 (|sum| < 2^24 for n <= DLCP_COLL_MAX_WORLD). */
static float input_value(uint32_t r, uint64_t j) {
  return (float)((7u * r + j) % 13u);
}

static void fill_input(const coll_job *job, coll_rank *rk) {
  for (uint64_t j = 0; j < job->count; j++) {
    rk->buf[j] = input_value(rk->rank, j);
  }
}

/* Compares a DONE rank's output with the exact sum; elements reported
 * missing must be zero instead. */
static void verify(coll_job *job, const coll_rank *rk,
                   const dlcp_coll_result *res) {
  size_t m = 0;
  for (uint64_t j = 0; j < job->count; j++) {
    while (m < res->nmissing &&
           res->missing[m].offset + res->missing[m].len <= j) {
      m++;
    }
    bool missing = m < res->nmissing && res->missing[m].offset <= j;
    float want = missing ? 0.0f : job->expected[j];
    if (rk->buf[j] != want) {
      job->verify_errors++;
    }
  }
}

static void compute_done(void *obj, void *arg, dlcp_sim_ps now);

static void start_compute(coll_rank *rk, dlcp_sim_ps now) {
  coll_job *job = rk->job;
  dlcp_sim_coll_iter *it = &job->it[rk->iter];
  if (now < it->start_ps) {
    it->start_ps = now;
  }
  fill_input(job, rk);
  dlcp_sim_engine_at_cold(&job->sim->engine, now + job->spec.compute_ps,
                          compute_done, rk, NULL);
}

static void rank_done(coll_rank *rk, dlcp_sim_ps now) {
  coll_job *job = rk->job;
  dlcp_sim *sim = job->sim;
  dlcp_coll_result res;
  dlcp_coll_get_result(rk->op, &res);
  if (res.status != 0) {
    job_fail(job, rk->rank, res.status, now);
    return;
  }
  verify(job, rk, &res);
  if (res.delivered_fraction < job->min_delivered) {
    job->min_delivered = res.delivered_fraction;
  }
  job->bypasses += res.bypasses;
  rk->step_hint_ns = res.step_ns;
  rk->trans_hint_ns = res.trans_ns;
  dlcp_coll_del(rk->op);
  rk->op = NULL;
  dlcp_sim_timer_cancel(&rk->timer);
  dlcp_sim_coll_iter *it = &job->it[rk->iter];
  if (it->end_ps == DLCP_SIM_PS_NEVER || now > it->end_ps) {
    it->end_ps = now;
  }
  if (now - rk->coll_start > it->coll_ps) {
    it->coll_ps = now - rk->coll_start;
  }
  if (++it->ranks_done == job->n) {
    dlcp_sim_ps prev = rk->iter == 0 ? job->spec.start_ps
                                     : job->it[rk->iter - 1].end_ps;
    it->duration_ps = now - prev;
  }
  if (now > sim->last_finish_ps) {
    sim->last_finish_ps = now;
  }
  if (++rk->iter < job->spec.iterations) {
    start_compute(rk, now);
    return;
  }
  rk->finished = true;
  if (++job->ranks_finished == job->n && !job->done) {
    job->done = true;
    sim->busy--;
  }
}

static void send_note(coll_rank *rk, uint32_t peer, uint64_t value,
                      dlcp_sim_ps now) {
  coll_job *job = rk->job;
  dlcp_sim *sim = job->sim;
  dlcp_sim_packet *pkt = dlcp_sim_packet_new(sim);
  if (!pkt) {
    return;
  }
  pkt->kind = DLCP_SIM_PKT_NOTE;
  pkt->flow = DLCP_SIM_NONE; /* one ECMP path per host pair: in order */
  pkt->src = rk->host;
  pkt->dst = job->ranks[peer].host;
  pkt->size_bytes = NOTE_BYTES;
  pkt->prio = 0;
  pkt->ecn = DLCP_SIM_ECN_ECT;
  pkt->lb = DLCP_SIM_LB_ECMP;
  pkt->flags = DLCP_SIM_PKT_F_LOSSLESS | DLCP_SIM_PKT_F_MSG_END;
  uint32_t words[3] = {job->id, rk->iter, rk->rank};
  memcpy(pkt->hdr, words, sizeof(words));
  memcpy(pkt->hdr + sizeof(words), &value, sizeof(value));
  pkt->hdr_len = (uint16_t)(sizeof(words) + sizeof(value));
  dlcp_sim_send(sim, rk->host, pkt, now);
}

/* Both ends posted transfer |xi|: it becomes a flow. */
static void xfer_start(coll_job *job, uint32_t xi, dlcp_sim_ps now) {
  dlcp_sim *sim = job->sim;
  dlcp_sim_colls *c = sim->colls;
  const coll_xfer *x = coll_match_at(&c->xfers, xi);
  uint32_t id = dlcp_sim_flow_add(sim, job->ranks[x->src].host,
                                  job->ranks[x->dst].host,
                                  x->bytes * job->scale, now, job->spec.prio,
                                  DLCP_SIM_GROUP_COLL);
  if (id == DLCP_SIM_NONE) {
    dlcp_sim_engine_fail(&sim->engine, DLCP_ERR_NOMEM);
    return;
  }
  dlcp_sim_flow *f = &sim->flows[id];
  f->iteration = x->iter;
  f->xfer = xi;
  f->loss_bound = x->loss_bound;
  dlcp_sim_flow_start_now(sim, id, now);
}

static void do_action(coll_rank *rk, const dlcp_coll_action *a,
                      dlcp_sim_ps now) {
  coll_job *job = rk->job;
  dlcp_sim_colls *c = job->sim->colls;
  switch (a->type) {
  case DLCP_COLL_ACT_SEND:
  case DLCP_COLL_ACT_RECV: {
    if (a->peer >= job->n || a->peer == rk->rank || a->bytes == 0) {
      job_fail(job, rk->rank, DLCP_ERR_INVALID_ARGUMENT, now);
      return;
    }
    uint32_t xi;
    switch (coll_match_post(&c->xfers, job->id, rk->iter, rk->rank, a, &xi)) {
    case COLL_MATCH_WAITING:
      return;
    case COLL_MATCH_READY:
      xfer_start(job, xi, now);
      return;
    case COLL_MATCH_DUPLICATE:
    case COLL_MATCH_REUSED:
    case COLL_MATCH_SIZE_MISMATCH:
      /* A reused key or a size mismatch: a contract violation. */
      job_fail(job, rk->rank, DLCP_ERR_SIZE_MISMATCH, now);
      return;
    case COLL_MATCH_NOMEM:
      dlcp_sim_engine_fail(&job->sim->engine, DLCP_ERR_NOMEM);
      return;
    }
    return;
  }
  case DLCP_COLL_ACT_CANCEL_RECV:
    if (coll_match_cancel(&c->xfers, job->id, rk->iter, a->peer, rk->rank,
                          a->tag) != 0) {
      job_fail(job, rk->rank, DLCP_ERR_UNKNOWN_TRANSFER, now);
    }
    return;
  case DLCP_COLL_ACT_NOTE:
    if (a->peer >= job->n || a->peer == rk->rank) {
      job_fail(job, rk->rank, DLCP_ERR_INVALID_ARGUMENT, now);
      return;
    }
    send_note(rk, a->peer, a->value, now);
    return;
  case DLCP_COLL_ACT_DONE:
    rank_done(rk, now);
    return;
  case DLCP_COLL_ACT_NONE:
    return;
  }
}

/* Polls rank |rk| until it has nothing to do, then arms its deadline. */
static void rank_process(coll_rank *rk, dlcp_sim_ps now) {
  coll_job *job = rk->job;
  dlcp_sim *sim = job->sim;
  rk->poll_queued = false;
  uint64_t now_ns = ns_of(now);
  for (int round = 0; round < 1000; round++) {
    if (!rk->op || job->status != 0) {
      return;
    }
    for (;;) {
      dlcp_coll_action a;
      int rv = dlcp_coll_poll(rk->op, &a, now_ns);
      if (a.type == DLCP_COLL_ACT_NONE) {
        break;
      }
      if (rv != 0 && a.type != DLCP_COLL_ACT_DONE) {
        job_fail(job, rk->rank, rv, now);
        return;
      }
      do_action(rk, &a, now);
      if (a.type == DLCP_COLL_ACT_DONE || sim->engine.error ||
          job->status != 0) {
        return;
      }
    }
    dlcp_tstamp dl = dlcp_coll_next_deadline(rk->op);
    if (dl == DLCP_TSTAMP_NEVER || dl > DLCP_SIM_PS_NEVER / 1000) {
      dlcp_sim_timer_cancel(&rk->timer);
      return;
    }
    dlcp_sim_ps at = dlcp_sim_time_from_ns(dl);
    if (at > now) {
      dlcp_sim_timer_arm(&rk->timer, at);
      return;
    }
    /* A deadline at or before now: polling again fires it. */
  }
  job_fail(job, rk->rank, DLCP_ERR_LIMIT, now);
}

static void compute_done(void *obj, void *arg, dlcp_sim_ps now) {
  coll_rank *rk = obj;
  coll_job *job = rk->job;
  (void)arg;
  if (job->status != 0) {
    return;
  }
  dlcp_coll_params p;
  dlcp_coll_params_default(&p);
  p.kind = DLCP_COLL_ALLREDUCE;
  p.algo = job->algo;
  p.rank = rk->rank;
  p.world = job->n;
  p.sendbuf = NULL;
  p.recvbuf = rk->buf;
  p.count = job->count;
  p.dtype = DLCP_FLOAT32;
  p.op = DLCP_SUM;
  p.chunk_bytes = job->chunk;
  p.topo = job->labels;
  p.topo_levels = job->levels;
  p.loss_bound = job->spec.loss_bound;
  p.bypass_step_hint_ns = rk->step_hint_ns;
  p.bypass_trans_hint_ns = rk->trans_hint_ns;
  int rv = dlcp_coll_new(&rk->op, &p, job->sim->mem, ns_of(now));
  if (rv != 0) {
    rk->op = NULL;
    job_fail(job, rk->rank, rv, now);
    return;
  }
  rk->coll_start = now;
  /* Notes that arrived for this iteration before it began. */
  uint32_t keep = 0;
  for (uint32_t i = 0; i < rk->nnotes; i++) {
    pending_note n = rk->notes[i];
    if (n.iter == rk->iter) {
      (void)dlcp_coll_on_note(rk->op, n.peer, n.value, ns_of(now));
    } else {
      rk->notes[keep++] = n;
    }
  }
  rk->nnotes = keep;
  rank_process(rk, now);
}

static void job_fail(coll_job *job, uint32_t rank, int status,
                     dlcp_sim_ps now) {
  (void)now;
  if (job->status != 0) {
    return;
  }
  job->status = status;
  job->failed_rank = (int32_t)rank;
  if (!job->done) {
    job->done = true;
    job->sim->busy--;
  }
}

static void job_start(void *obj, void *arg, dlcp_sim_ps now) {
  coll_job *job = obj;
  (void)arg;
  for (uint32_t r = 0; r < job->n; r++) {
    start_compute(&job->ranks[r], now);
  }
}

/* ---- building jobs ------------------------------------------------------- */

/* Chooses the job's hosts (round-robin over racks) and numbers them rack
 * by rack; fills job->ranks[].host and the RAT labels. */
static int place(coll_job *job, char *err, size_t errlen) {
  dlcp_sim *sim = job->sim;
  const dlcp_sim_net *net = &sim->net;
  uint32_t H = net->nhosts, n = job->n;
  uint32_t *rack = zalloc(sim, H, sizeof(*rack));
  bool *taken = zalloc(sim, H, sizeof(*taken));
  int rv = 0;
  if (!rack || !taken) {
    rv = DLCP_ERR_NOMEM;
    goto out;
  }
  uint32_t nracks = 0;
  for (uint32_t h = 0; h < H; h++) {
    rack[h] = dlcp_sim_net_host_rack(net, h);
    nracks = rack[h] + 1 > nracks ? rack[h] + 1 : nracks;
  }
  /* Round-robin: the i-th pass takes the i-th host of every rack. */
  uint32_t picked = 0;
  for (uint32_t pass = 0; picked < n; pass++) {
    bool any = false;
    for (uint32_t r = 0; r < nracks && picked < n; r++) {
      uint32_t seen = 0;
      for (uint32_t h = 0; h < H; h++) {
        if (rack[h] == r && seen++ == pass) {
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
  if (rk != n) {
    snprintf(err, errlen, "%s: field '%s.ranks': expected at most %u hosts",
             job->spec.where, job->spec.field, H);
    rv = DLCP_ERR_CONFIG;
    goto out;
  }
  /* Labels: level 0 the rack; level 1 the pod in a fat-tree. */
  bool fat = sim->cfg.topo.kind == DLCP_SIM_TOPO_FAT_TREE;
  job->levels = fat ? 2 : 1;
  job->labels = zalloc(sim, (size_t)n * job->levels, sizeof(uint32_t));
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
  return rv;
}

static int build_job(dlcp_sim *sim, uint32_t id, char *err, size_t errlen) {
  dlcp_sim_colls *c = sim->colls;
  coll_job *job = &c->jobs[id];
  const dlcp_sim_coll_spec *s = &sim->cfg.colls[id];
  const dlcp_sim_net *net = &sim->net;
  job->sim = sim;
  job->id = id;
  job->spec = *s;
  job->algo = s->algo;
  job->min_delivered = 1.0;
  job->failed_rank = -1;
  job->n = s->ranks ? s->ranks : net->nhosts;
  if (job->n < 1 || job->n > net->nhosts || job->n > DLCP_COLL_MAX_WORLD) {
    snprintf(err, errlen, "%s: field '%s.ranks': expected 1..%u ranks",
             s->where, s->field,
             net->nhosts < DLCP_COLL_MAX_WORLD ? net->nhosts
                                               : DLCP_COLL_MAX_WORLD);
    return DLCP_ERR_CONFIG;
  }
  if (s->prio >= sim->cfg.sw.nqueues) {
    snprintf(err, errlen, "%s: field '%s.priority': expected an integer in "
             "[0, %u] (switch.queues - 1)", s->where, s->field,
             sim->cfg.sw.nqueues - 1);
    return DLCP_ERR_CONFIG;
  }
  /* Scale: the smallest power of two keeping the vectors in budget. */
  uint32_t scale = s->scale;
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
    snprintf(err, errlen, "%s: field '%s.bytes': expected at least "
             "4 * scale (%u) bytes", s->where, s->field, scale);
    return DLCP_ERR_CONFIG;
  }
  uint64_t chunk = s->chunk_bytes ? s->chunk_bytes
                                  : DLCP_COLL_DEFAULT_CHUNK_BYTES;
  job->chunk = chunk / scale ? chunk / scale : sizeof(float);
  uint64_t wire = job->count * sizeof(float) * scale;
  if (wire > sim->coll_max_flow) {
    /* No transfer is larger than the whole vector (the halving-doubling
     * fold sends all of it). */
    sim->coll_max_flow = wire;
  }
  job->ranks = zalloc(sim, job->n, sizeof(*job->ranks));
  job->rank_of_host = zalloc(sim, net->nhosts, sizeof(uint32_t));
  job->it = zalloc(sim, s->iterations, sizeof(*job->it));
  job->expected = zalloc(sim, job->count, sizeof(float));
  if (!job->ranks || !job->rank_of_host || !job->it || !job->expected) {
    return DLCP_ERR_NOMEM;
  }
  memset(job->rank_of_host, 0xff, net->nhosts * sizeof(uint32_t));
  int rv = place(job, err, errlen);
  if (rv != 0) {
    return rv;
  }
  dlcp_coll_params p;
  dlcp_coll_params_default(&p);
  p.kind = DLCP_COLL_ALLREDUCE;
  p.algo = job->algo;
  p.world = job->n;
  p.count = job->count;
  p.topo = job->labels;
  p.topo_levels = job->levels;
  int algo = dlcp_coll_resolve_algo(&p);
  if (algo < 0) {
    snprintf(err, errlen, "%s: field '%s.algo': expected an all-reduce "
             "algorithm", s->where, s->field);
    return DLCP_ERR_CONFIG;
  }
  job->algo = (dlcp_algo)algo;
  for (uint64_t j = 0; j < job->count; j++) {
    float sum = 0.0f;
    for (uint32_t r = 0; r < job->n; r++) {
      sum += input_value(r, j);
    }
    job->expected[j] = sum;
  }
  for (uint32_t r = 0; r < job->n; r++) {
    coll_rank *rk = &job->ranks[r];
    rk->job = job;
    rk->rank = r;
    rk->buf = zalloc(sim, job->count, sizeof(float));
    if (!rk->buf) {
      return DLCP_ERR_NOMEM;
    }
    dlcp_sim_timer_init(&rk->timer, &sim->engine, timer_fire, rk);
  }
  for (uint32_t i = 0; i < s->iterations; i++) {
    job->it[i].start_ps = DLCP_SIM_PS_NEVER;
    job->it[i].end_ps = DLCP_SIM_PS_NEVER;
  }
  sim->busy++;
  dlcp_sim_engine_at_cold(&sim->engine, s->start_ps, job_start, job, NULL);
  return 0;
}

int dlcp_sim_coll_build(dlcp_sim *sim, char *err, size_t errlen) {
  if (sim->cfg.ncolls == 0) {
    return 0;
  }
  dlcp_sim_colls *c = zalloc(sim, 1, sizeof(*c));
  if (!c) {
    return DLCP_ERR_NOMEM;
  }
  sim->colls = c;
  c->sim = sim;
  c->jobs = zalloc(sim, sim->cfg.ncolls, sizeof(*c->jobs));
  if (!c->jobs ||
      coll_match_init(&c->xfers, sim->mem, sizeof(sim_xfer)) != 0) {
    return DLCP_ERR_NOMEM;
  }
  c->njobs = sim->cfg.ncolls;
  for (uint32_t i = 0; i < c->njobs; i++) {
    int rv = build_job(sim, i, err, errlen);
    if (rv != 0) {
      return rv;
    }
  }
  return 0;
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
    }
    mem->free(job->ranks, mem->user);
    mem->free(job->rank_of_host, mem->user);
    mem->free(job->labels, mem->user);
    mem->free(job->expected, mem->user);
    mem->free(job->it, mem->user);
  }
  for (uint32_t i = 0; i < coll_match_slots(&c->xfers); i++) {
    mem->free(xfer_at(c, i)->holes, mem->user);
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

/* ---- events from the transports ---------------------------------------- */

static sim_xfer *xfer_of(dlcp_sim *sim, const dlcp_sim_flow *flow) {
  dlcp_sim_colls *c = sim->colls;
  if (!c || flow->xfer >= coll_match_slots(&c->xfers) ||
      xfer_at(c, flow->xfer)->m.state != COLL_XFER_RUNNING) {
    return NULL;
  }
  return xfer_at(c, flow->xfer);
}

static void xfer_maybe_free(dlcp_sim *sim, const dlcp_sim_flow *flow) {
  sim_xfer *x = xfer_at(sim->colls, flow->xfer);
  if (x->send_done && x->recv_done) {
    xremove(sim->colls, flow->xfer);
  }
}

void dlcp_sim_coll_flow_hole(dlcp_sim *sim, const dlcp_sim_flow *flow,
                             uint64_t off, uint64_t len) {
  sim_xfer *x = xfer_of(sim, flow);
  if (!x || len == 0) {
    return;
  }
  uint32_t scale = sim->colls->jobs[x->m.job].scale;
  /* Wire bytes [off, off+len) stand for buffer bytes [off/S, ceil). */
  uint64_t a = off / scale, b = (off + len + scale - 1) / scale;
  b = b < x->m.bytes ? b : x->m.bytes;
  if (a >= b) {
    return;
  }
  if (x->nholes == x->holes_cap) {
    size_t ncap = x->holes_cap ? x->holes_cap * 2 : 8;
    dlcp_coll_range *n = sim->mem->realloc(x->holes, ncap * sizeof(*n),
                                           sim->mem->user);
    if (!n) {
      dlcp_sim_engine_fail(&sim->engine, DLCP_ERR_NOMEM);
      return;
    }
    x->holes = n;
    x->holes_cap = ncap;
  }
  x->holes[x->nholes++] = (dlcp_coll_range){a, b - a};
}

void dlcp_sim_coll_flow_delivered(dlcp_sim *sim, const dlcp_sim_flow *flow,
                                  dlcp_sim_ps now) {
  sim_xfer *x = xfer_of(sim, flow);
  if (!x || x->recv_done) {
    return;
  }
  coll_job *job = &sim->colls->jobs[x->m.job];
  coll_rank *rk = &job->ranks[x->m.dst];
  x->recv_done = true;
  if (job->status == 0 && rk->op && rk->iter == x->m.iter) {
    /* What the network carried, as the runtime's receive buffer would
     * hold it: the sender's bytes, zeros in the holes. */
    memcpy(x->m.recv_buf, x->m.send_buf, (size_t)x->m.bytes);
    for (size_t i = 0; i < x->nholes; i++) {
      memset((uint8_t *)x->m.recv_buf + x->holes[i].offset, 0,
             (size_t)x->holes[i].len);
    }
    int rv = dlcp_coll_on_received(rk->op, x->m.src, x->m.tag, 0, x->holes,
                                   x->nholes, ns_of(now));
    /* Other errors fail the operation, which reports them at DONE. */
    if (rv == DLCP_ERR_UNKNOWN_TRANSFER) {
      job_fail(job, rk->rank, rv, now);
    }
    queue_poll(rk, now);
  }
  xfer_maybe_free(sim, flow);
}

void dlcp_sim_coll_flow_finished(dlcp_sim *sim, const dlcp_sim_flow *flow,
                                 dlcp_sim_ps now) {
  sim_xfer *x = xfer_of(sim, flow);
  if (!x || x->send_done) {
    return;
  }
  coll_job *job = &sim->colls->jobs[x->m.job];
  coll_rank *rk = &job->ranks[x->m.src];
  x->send_done = true;
  if (job->status == 0 && rk->op && rk->iter == x->m.iter) {
    int rv = dlcp_coll_on_sent(rk->op, x->m.dst, x->m.tag, 0, ns_of(now));
    if (rv == DLCP_ERR_UNKNOWN_TRANSFER) {
      job_fail(job, rk->rank, rv, now);
    }
    queue_poll(rk, now);
  }
  xfer_maybe_free(sim, flow);
}

void dlcp_sim_coll_flow_failed(dlcp_sim *sim, const dlcp_sim_flow *flow,
                               bool is_send, int status, dlcp_sim_ps now) {
  sim_xfer *x = xfer_of(sim, flow);
  if (!x) {
    return;
  }
  coll_job *job = &sim->colls->jobs[x->m.job];
  uint32_t r = is_send ? x->m.src : x->m.dst;
  coll_rank *rk = &job->ranks[r];
  if (is_send ? x->send_done : x->recv_done) {
    return;
  }
  if (is_send) {
    x->send_done = true;
  } else {
    x->recv_done = true;
  }
  if (job->status == 0 && rk->op && rk->iter == x->m.iter) {
    if (is_send) {
      (void)dlcp_coll_on_sent(rk->op, x->m.dst, x->m.tag, status, ns_of(now));
    } else {
      (void)dlcp_coll_on_received(rk->op, x->m.src, x->m.tag, status, NULL, 0,
                                  ns_of(now));
    }
    queue_poll(rk, now);
  }
  xfer_maybe_free(sim, flow);
}

void dlcp_sim_coll_on_note(dlcp_sim *sim, uint32_t host, dlcp_sim_packet *pkt,
                           dlcp_sim_ps now) {
  dlcp_sim_colls *c = sim->colls;
  uint32_t words[3];
  uint64_t value;
  memcpy(words, pkt->hdr, sizeof(words));
  memcpy(&value, pkt->hdr + sizeof(words), sizeof(value));
  dlcp_sim_packet_drop(sim, pkt);
  if (!c || words[0] >= c->njobs) {
    return;
  }
  coll_job *job = &c->jobs[words[0]];
  uint32_t r = job->rank_of_host[host];
  if (r == DLCP_SIM_NONE || words[2] >= job->n || job->status != 0) {
    return;
  }
  coll_rank *rk = &job->ranks[r];
  uint32_t iter = words[1];
  if (rk->op && rk->iter == iter) {
    (void)dlcp_coll_on_note(rk->op, words[2], value, ns_of(now));
    queue_poll(rk, now);
    return;
  }
  if (rk->finished || iter < rk->iter || (iter == rk->iter && rk->op)) {
    return; /* for an operation that is over */
  }
  /* For an iteration this rank has not begun: keep it. */
  if (rk->nnotes == rk->notes_cap) {
    uint32_t ncap = rk->notes_cap ? rk->notes_cap * 2 : 8;
    pending_note *n = sim->mem->realloc(rk->notes, ncap * sizeof(*n),
                                        sim->mem->user);
    if (!n) {
      dlcp_sim_engine_fail(&sim->engine, DLCP_ERR_NOMEM);
      return;
    }
    rk->notes = n;
    rk->notes_cap = ncap;
  }
  rk->notes[rk->nnotes++] = (pending_note){iter, words[2], value};
}

/* ---- pauses ------------------------------------------------------------- */

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
    dlcp_sim_port_pause(dlcp_sim_host_nic(&sim->net, ps->cand[i]), true,
                        now);
    dlcp_sim_engine_at_cold(&sim->engine, now + ps->duration, pause_resume,
                            sim, (void *)(uintptr_t)ps->cand[i]);
    sim->colls->npaused++;
  }
  dlcp_sim_engine_at_cold(&sim->engine, now + ps->every, pause_tick, ps,
                          NULL);
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
    sim->colls = zalloc(sim, 1, sizeof(*sim->colls));
    if (!sim->colls) {
      return DLCP_ERR_NOMEM;
    }
    sim->colls->sim = sim;
  }
  dlcp_sim_colls *c = sim->colls;
  c->pauses = zalloc(sim, n, sizeof(*c->pauses));
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
    ps->cand = zalloc(sim, ncand, sizeof(uint32_t));
    if (!ps->cand) {
      return DLCP_ERR_NOMEM;
    }
    for (uint32_t j = 0; j < ncand; j++) {
      ps->cand[j] = jobs ? c->jobs[0].ranks[j].host : j;
    }
    ps->ncand = ncand;
    if (ps->k == 0 || ps->k > ncand || ps->every == 0 || ps->duration == 0) {
      snprintf(err, errlen, "%s: field '%s.pause': expected 1..%u ranks "
               "and every, duration > 0", f->where, f->field, ncand);
      return DLCP_ERR_CONFIG;
    }
    dlcp_sim_engine_at_cold(&sim->engine, f->at_ps, pause_tick, ps, NULL);
  }
  return 0;
}

/* ---- reports ------------------------------------------------------------ */

uint32_t dlcp_sim_coll_jobs(const dlcp_sim *sim) {
  return sim->colls ? sim->colls->njobs : 0;
}

uint64_t dlcp_sim_coll_pauses(const dlcp_sim *sim) {
  return sim->colls ? sim->colls->npaused : 0;
}

void dlcp_sim_coll_get_report(const dlcp_sim *sim, uint32_t id,
                              dlcp_sim_coll_report *r) {
  memset(r, 0, sizeof(*r));
  r->failed_rank = -1;
  if (id >= dlcp_sim_coll_jobs(sim)) {
    return;
  }
  const coll_job *job = &sim->colls->jobs[id];
  r->algo = job->algo;
  r->ranks = job->n;
  r->scale = job->scale;
  r->bytes = job->count * sizeof(float) * job->scale;
  r->iterations = job->spec.iterations;
  r->iter = job->it;
  r->verify_errors = job->verify_errors;
  r->min_delivered = job->min_delivered;
  r->bypasses = job->bypasses;
  r->status = job->status;
  r->failed_rank = job->failed_rank;
  r->done = job->done && job->status == 0;
}
