/*
 * collective.c: collective training jobs in the simulator, driving the
 * unchanged src/coll state machines.
 *
 * Model.  A job has n ranks on n hosts.  Each rank repeats: compute for
 * compute_time, then run one dlcp_coll all-reduce (the algorithm of the
 * scenario), then the next iteration as soon as its own all-reduce is
 * DONE; nothing else synchronizes the ranks.  The driver is collsim's
 * (tests/support/collsim.c) with the network in place of its latency
 * model:
 *   SEND/RECV   a transfer is keyed by (job, operation, sender, receiver,
 *               tag), the operation being the rank's count of dlcp_coll
 *               operations started (the same sequence on every rank: an
 *               iteration's all-reduce, or INA's exponent agreement and
 *               RA-INA's ring part); when both ends have posted it, it
 *               becomes one flow of |bytes| x scale bytes through the
 *               scenario's transport (MLT: one tensor, posted with the
 *               RECV's loss bound; DCTCP: one connection).  When the
 *               receiver holds it, the state machine's bytes are copied
 *               from the SEND's buffer into the RECV's (holes MLT reports
 *               are zero-filled and passed on); the sender's on_sent
 *               follows its completion (the last ACK, or MLT's STOP).
 *   CPU         a rank's state machine hears of a completed receive
 *               only once the rank's CPU is through with it: reduce_time
 *               plus its bytes at reduce_rate each (receiving, reducing,
 *               forwarding: the straggler seed's T), one at a time in
 *               arrival order, a straggler's first one of every operation
 *               (or every one) its delay more (the seed's delta T); free
 *               by default.  The bytes are copied at arrival (the sender
 *               may reuse its buffer once its side completes).  Notes
 *               cost no CPU.
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
 * INA and RA-INA.  As in the runtime, the ranks first agree on every
 * group's exponent (a dlcp_coll all-reduce MAX of one int32 per group,
 * through the transport like any other), then a rank's all-reduce runs
 * through the aggregation switch (ina_host.c drives its src/coll/ina
 * state machine); RA-INA's groups with a ring verdict are then packed and
 * all-reduced by dlcp's ring, as above, and unpacked.  The agreed
 * exponents and the result are checked like any other.
 *
 * Placement and job building: coll_build.c; the PAUSE fault:
 * coll_pause.c.
 */
#include <stdlib.h>
#include <string.h>

#include "sim/coll_job.h"

#define NOTE_BYTES 64u /* IPv4 + TCP + job, iter, rank, value */

static uint64_t ns_of(dlcp_sim_ps t) { return dlcp_sim_time_to_ns(t); }

void *dlcp_sim_coll_zalloc(const dlcp_sim *sim, size_t n, size_t size) {
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
  x->recv_done = x->send_done = x->recv_held = x->copied = false;
  x->has_flow = false;
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

void dlcp_sim_coll_rank_timer(void *obj, dlcp_sim_ps now) {
  rank_process(obj, now);
}

/* Rank r's input: small integers, so that any summation order is exact in
 * float32 (|sum| < 2^24 for n <= DLCP_COLL_MAX_WORLD). */
float dlcp_sim_coll_input(uint32_t r, uint64_t j) {
  return (float)((7u * r + j) % 13u);
}

void dlcp_sim_coll_fill_input(const coll_job *job, coll_rank *rk) {
  for (uint64_t j = 0; j < job->count; j++) {
    rk->buf[j] = dlcp_sim_coll_rank_input(job, rk->rank, j);
  }
}

/* Compares a DONE rank's output with the exact sum; elements reported
 * missing must be zero instead. */
static void verify(coll_job *job, const coll_rank *rk,
                   const dlcp_coll_result *res) {
  /* A reduce-scatter leaves the sum only in the rank's own shard (the
   * rest holds partial sums); the missing ranges index the whole vector
   * either way. */
  uint64_t from = 0, len = job->count;
  if (job->spec.kind == DLCP_COLL_REDUCE_SCATTER && !rk->ring_buf) {
    dlcp_coll_shard(job->count, job->n, rk->rank, &from, &len);
  }
  size_t m = 0;
  for (uint64_t j = from; j < from + len; j++) {
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
  dlcp_sim_coll_fill_input(job, rk);
  dlcp_sim_engine_at_cold(&job->sim->engine, now + job->spec.compute_ps,
                          compute_done, rk, NULL);
}

bool dlcp_sim_coll_is_ina(dlcp_algo algo) {
  return algo == DLCP_ALGO_INA || algo == DLCP_ALGO_RA_INA;
}

static void iteration_done(coll_rank *rk, dlcp_sim_ps now);
static void ina_start(coll_rank *rk, dlcp_sim_ps now);

/* |rk|'s dlcp_coll operation is over: gone with its deadline. */
static void op_end(coll_rank *rk) {
  dlcp_coll_del(rk->op);
  rk->op = NULL;
  dlcp_sim_timer_cancel(&rk->timer);
}

/* The all-reduce of |rk| (RA-INA: its ring part; INA: its agreement on
 * the exponents) is DONE. */
static void rank_done(coll_rank *rk, dlcp_sim_ps now) {
  coll_job *job = rk->job;
  dlcp_coll_result res;
  dlcp_coll_get_result(rk->op, &res);
  if (res.status != 0) {
    job_fail(job, rk->rank, res.status, now);
    return;
  }
  if (rk->agreeing) {
    /* The exponents agreed: the switch's part of the all-reduce next. */
    rk->agreeing = false;
    for (uint32_t g = 0; g < job->ina_ngroups; g++) {
      job->verify_errors += rk->agree_buf[g] != job->ina_exps[g];
    }
    dlcp_sim_coll_iter *it = &job->it[rk->iter];
    if (now - rk->coll_start > it->agree_ps) {
      it->agree_ps = now - rk->coll_start;
    }
    op_end(rk);
    ina_start(rk, now);
    return;
  }
  if (rk->ring_buf) {
    /* INA jobs run with loss bound 0: nothing is missing. */
    dlcp_ina_ring_unpack(dlcp_sim_ina_op(job->sim, job->id, rk->rank),
                         rk->ring_buf);
    dlcp_sim_ina_end(job->sim, job->id, rk->rank);
    job->sim->mem->free(rk->ring_buf, job->sim->mem->user);
    rk->ring_buf = NULL;
  }
  verify(job, rk, &res);
  if (res.delivered_fraction < job->min_delivered) {
    job->min_delivered = res.delivered_fraction;
  }
  job->bypasses += res.bypasses;
  rk->step_hint_ns = res.step_ns;
  rk->trans_hint_ns = res.trans_ns;
  op_end(rk);
  iteration_done(rk, now);
}

/* Records the end of |rk|'s all-reduce and starts its next iteration. */
static void iteration_done(coll_rank *rk, dlcp_sim_ps now) {
  coll_job *job = rk->job;
  dlcp_sim *sim = job->sim;
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
  uint32_t words[3] = {job->id, rk->runs - 1, rk->rank};
  memcpy(pkt->hdr, words, sizeof(words));
  memcpy(pkt->hdr + sizeof(words), &value, sizeof(value));
  pkt->hdr_len = (uint16_t)(sizeof(words) + sizeof(value));
  dlcp_sim_send(sim, rk->host, pkt, now);
}

/* Transfer |xi| of |iteration| as a flow (not started), or DLCP_SIM_NONE
 * (the engine failed: out of memory). */
static uint32_t xfer_flow(coll_job *job, uint32_t xi, uint32_t iteration) {
  dlcp_sim *sim = job->sim;
  const coll_xfer *x = coll_match_at(&sim->colls->xfers, xi);
  uint32_t id = dlcp_sim_flow_add(
      sim, job->ranks[x->src].host, job->ranks[x->dst].host,
      x->bytes * job->scale, DLCP_SIM_PS_NEVER, 0, DLCP_SIM_GROUP_COLL);
  if (id == DLCP_SIM_NONE) {
    dlcp_sim_engine_fail(&sim->engine, DLCP_ERR_NOMEM);
    return id;
  }
  dlcp_sim_flow *f = &sim->flows[id];
  f->iteration = iteration;
  f->xfer = xi;
  f->loss_bound = x->loss_bound;
  f->stage = xfer_at(sim->colls, xi)->recv_stage;
  return id;
}

/* The receiver posted transfer |xi| first: on a transport that posts
 * receives ahead its flow is made now and the receiver posts the
 * receive, as the runtime posts a collective's RECV at once (MLT: its
 * START then waits at the sender, and the data leaves as soon as the
 * SEND is posted, half a round trip earlier than a receive posted with
 * the send). */
static void xfer_expect(coll_job *job, uint32_t xi, uint32_t iteration,
                        dlcp_sim_ps now) {
  dlcp_sim *sim = job->sim;
  if (!dlcp_sim_expects(sim)) {
    return;
  }
  uint32_t id = xfer_flow(job, xi, iteration);
  if (id == DLCP_SIM_NONE) {
    return;
  }
  sim_xfer *x = xfer_at(sim->colls, xi);
  x->has_flow = true;
  x->flow = id;
  dlcp_sim_flow_expect_now(sim, id, now);
}

/* Both ends posted transfer |xi| of |iteration|: its flow starts. */
static void xfer_start(coll_job *job, uint32_t xi, uint32_t iteration,
                       dlcp_sim_ps now) {
  dlcp_sim *sim = job->sim;
  sim_xfer *x = xfer_at(sim->colls, xi);
  uint32_t id = x->has_flow ? x->flow : xfer_flow(job, xi, iteration);
  if (id == DLCP_SIM_NONE) {
    return;
  }
  /* Later stages below earlier ones, the job's priority the first. */
  uint32_t last = sim->cfg.sw.nqueues - 1;
  uint32_t prio = job->spec.prio + x->m.stage;
  sim->flows[id].prio = prio < last ? prio : last;
  dlcp_sim_flow_start_now(sim, id, now);
}

/* Rank |rk| cancels its receive from |peer| tagged |tag|: the sender
 * never posts it. */
static void xfer_cancel(coll_rank *rk, uint32_t peer, uint32_t tag,
                        dlcp_sim_ps now) {
  coll_job *job = rk->job;
  dlcp_sim *sim = job->sim;
  dlcp_sim_colls *c = sim->colls;
  uint32_t xi =
      coll_match_find(&c->xfers, job->id, rk->runs - 1, peer, rk->rank, tag);
  uint32_t flow = DLCP_SIM_NONE;
  if (xi != COLL_MATCH_NONE && xfer_at(c, xi)->has_flow) {
    flow = xfer_at(c, xi)->flow;
  }
  if (coll_match_cancel(&c->xfers, job->id, rk->runs - 1, peer, rk->rank,
                        tag) != 0) {
    job_fail(job, rk->rank, DLCP_ERR_UNKNOWN_TRANSFER, now);
    return;
  }
  if (flow != DLCP_SIM_NONE) {
    xfer_at(c, xi)->has_flow = false;
    /* Its record is free for other transfers: nothing of the withdrawn
     * receive may reach them. */
    sim->flows[flow].xfer = DLCP_SIM_NONE;
    dlcp_sim_flow_cancel(sim, flow, now);
  }
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
    coll_match_result m =
        coll_match_post(&c->xfers, job->id, rk->runs - 1, rk->rank, a, &xi);
    bool recv = a->type == DLCP_COLL_ACT_RECV;
    if (recv && (m == COLL_MATCH_WAITING || m == COLL_MATCH_READY)) {
      xfer_at(c, xi)->recv_stage = a->stage;
    }
    switch (m) {
    case COLL_MATCH_WAITING:
      if (recv) {
        xfer_expect(job, xi, rk->iter, now);
      }
      return;
    case COLL_MATCH_READY:
      xfer_start(job, xi, rk->iter, now);
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
    xfer_cancel(rk, a->peer, a->tag, now);
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
    if (!dlcp_sim_timer_follow(&rk->timer, dlcp_coll_next_deadline(rk->op),
                               now)) {
      return;
    }
    /* A deadline at or before now: polling again fires it. */
  }
  job_fail(job, rk->rank, DLCP_ERR_LIMIT, now);
}

/* Starts |rk|'s operation of |kind| on |count| elements of |dtype| at
 * |buf| with |algo| and |op| (the job's float32 sum, RA-INA's ring part:
 * an all-reduce, or INA's agreement on the exponents: int32 MAX). */
static void coll_start(coll_rank *rk, dlcp_coll_kind kind, dlcp_algo algo,
                       void *buf, uint64_t count, dlcp_dtype dtype,
                       dlcp_redop op, dlcp_sim_ps now) {
  coll_job *job = rk->job;
  dlcp_coll_params p;
  dlcp_coll_params_default(&p);
  p.kind = kind;
  p.algo = algo;
  p.rank = rk->rank;
  p.world = job->n;
  p.sendbuf = NULL;
  p.recvbuf = buf;
  p.count = count;
  p.dtype = dtype;
  p.op = op;
  p.chunk_bytes = job->chunk;
  p.rat_min_part_bytes = job->rat_min_part;
  p.recv_ahead_bytes = job->recv_ahead;
  p.topo = job->labels;
  p.topo_levels = job->levels;
  p.loss_bound = job->spec.loss_bound;
  p.exact_bytes = job->exact_bytes;
  p.reduce_on_arrival = true; /* as the runtime: the same plan's execution */
  if (job->spec.bypass_alpha > 0.0) {
    p.bypass_alpha = job->spec.bypass_alpha;
  }
  p.bypass_step_hint_ns = rk->step_hint_ns;
  p.bypass_trans_hint_ns = rk->trans_hint_ns;
  rk->op_recvs = 0;
  rk->runs++;
  int rv = dlcp_coll_new(&rk->op, &p, job->sim->mem, ns_of(now));
  if (rv != 0) {
    rk->op = NULL;
    job_fail(job, rk->rank, rv, now);
    return;
  }
  /* Notes that arrived for this operation before it began. */
  uint32_t keep = 0;
  for (uint32_t i = 0; i < rk->nnotes; i++) {
    pending_note n = rk->notes[i];
    if (n.run == rk->runs - 1) {
      (void)dlcp_coll_on_note(rk->op, n.peer, n.value, ns_of(now));
    } else {
      rk->notes[keep++] = n;
    }
  }
  rk->nnotes = keep;
  rank_process(rk, now);
}

/* Starts |rk|'s operation through the aggregation switch; its groups of
 * iteration i are numbered from i * ngroups, consecutive as the switch's
 * verdict window needs. */
static void ina_start(coll_rank *rk, dlcp_sim_ps now) {
  coll_job *job = rk->job;
  dlcp_ina_params p;
  dlcp_ina_params_default(&p);
  dlcp_sim_ina_identity(job->sim, job->id, &p.job, &p.token);
  p.rank = rk->rank;
  p.world = job->n;
  p.mode = job->algo == DLCP_ALGO_RA_INA ? DLCP_INA_RING_FALLBACK
                                         : DLCP_INA_WAIT;
  p.recvbuf = rk->buf;
  p.count = job->count;
  p.block_elems = job->sim->cfg.agg.block_elems;
  p.group_blocks = job->ina_group_blocks;
  p.first_group = rk->iter * job->ina_ngroups;
  if (job->spec.ina_window) {
    /* exactly that window, as the runtime's DLCP_INA_WINDOW */
    p.window = job->spec.ina_window;
    p.window_bytes = 0;
  }
  p.cc = job->spec.ina_cc;
  /* MTINA: PANAMA's window per tree, the trees the switches take group by
   * group. */
  if (job->spec.mtina) {
    p.cc_trees = job->sim->cfg.agg.ntrees;
  }
  p.claim = job->spec.ina_claim;
  if (job->spec.ina_rto_ps) {
    p.rto_ns = ns_of(job->spec.ina_rto_ps);
  }
  /* A group waits for the slowest rank: re-sends are no failure (the
   * runtime's choice too). */
  p.max_retx = UINT16_MAX - 1u;
  p.exps = job->ina_exps;
  if (job->spec.cina) {
    dlcp_sim_coll_cina_params(rk, &p);
  }
  int rv = dlcp_sim_ina_start(job->sim, job->id, rk->rank, &p, now);
  if (rv != 0) {
    job_fail(job, rk->rank, rv, now);
    return;
  }
  if (job->spec.cina) {
    dlcp_sim_coll_cina_schedule(rk, now);
  }
}

static void compute_done(void *obj, void *arg, dlcp_sim_ps now) {
  coll_rank *rk = obj;
  coll_job *job = rk->job;
  (void)arg;
  if (job->status != 0) {
    return;
  }
  rk->coll_start = now;
  if (!dlcp_sim_coll_is_ina(job->algo)) {
    coll_start(rk, job->spec.kind, job->algo, rk->buf, job->count,
               DLCP_FLOAT32, DLCP_SUM, now);
  } else if (job->spec.bytes < job->spec.ina_min_bytes) {
    /* below PANAMA's size for aggregation: the hosts' ring */
    coll_start(rk, DLCP_COLL_ALLREDUCE, DLCP_ALGO_RING, rk->buf, job->count,
               DLCP_FLOAT32, DLCP_SUM, now);
  } else if (job->spec.ina_exps_given) {
    ina_start(rk, now);
  } else {
    /* The exponents first, with the runtime's choice of algorithm. */
    memcpy(rk->agree_buf, rk->exps, job->ina_ngroups * sizeof(int32_t));
    rk->agreeing = true;
    coll_start(rk, DLCP_COLL_ALLREDUCE, DLCP_ALGO_AUTO, rk->agree_buf,
               job->ina_ngroups, DLCP_INT32, DLCP_MAX, now);
  }
}

void dlcp_sim_coll_ina_done(dlcp_sim *sim, uint32_t id, uint32_t rank,
                            dlcp_sim_ps now) {
  coll_job *job = &sim->colls->jobs[id];
  coll_rank *rk = &job->ranks[rank];
  dlcp_ina *op = dlcp_sim_ina_op(sim, id, rank);
  dlcp_ina_result res;
  dlcp_ina_get_result(op, &res);
  job->ina_retransmits += res.retransmits;
  job->ina_results += res.results;
  job->ina_marked += res.ecn_marked;
  job->ina_cuts += res.cwnd_cuts;
  if (rank == 0) {
    job->ina_groups += res.ina_groups;
    job->ring_groups += res.ring_groups;
  }
  if (res.status != 0 || job->status != 0) {
    dlcp_sim_ina_end(sim, id, rank);
    job_fail(job, rank, res.status, now);
    return;
  }
  uint64_t ring = dlcp_ina_ring_elems(op);
  if (ring == 0) {
    dlcp_sim_ina_end(sim, id, rank);
    dlcp_coll_result none;
    memset(&none, 0, sizeof(none));
    verify(job, rk, &none);
    iteration_done(rk, now);
    return;
  }
  /* RA-INA: the groups with a ring verdict (the same on every rank) go
   * through dlcp's ring all-reduce, packed; rank_done unpacks them. */
  rk->ring_buf = sim->mem->malloc(ring * sizeof(float), sim->mem->user);
  if (!rk->ring_buf) {
    dlcp_sim_engine_fail(&sim->engine, DLCP_ERR_NOMEM);
    return;
  }
  dlcp_ina_ring_pack(op, rk->ring_buf);
  coll_start(rk, DLCP_COLL_ALLREDUCE, DLCP_ALGO_RING, rk->ring_buf, ring,
             DLCP_FLOAT32, DLCP_SUM, now);
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

void dlcp_sim_coll_job_start(void *obj, void *arg, dlcp_sim_ps now) {
  coll_job *job = obj;
  (void)arg;
  for (uint32_t r = 0; r < job->n; r++) {
    start_compute(&job->ranks[r], now);
  }
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

static void xfer_maybe_free(dlcp_sim *sim, uint32_t xi) {
  sim_xfer *x = xfer_at(sim->colls, xi);
  if (x->send_done && x->recv_done) {
    xremove(sim->colls, xi);
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

/* Whether transfer |x|'s news concerns the operation |rk| runs now: the
 * job has not failed and |rk| is in the iteration |x| belongs to. */
static bool news_for(const coll_job *job, const coll_rank *rk,
                     const sim_xfer *x) {
  return job->status == 0 && rk->op && rk->runs - 1 == x->m.iter;
}

/* Transfer |xi| is received and its receiver's CPU is through with it:
 * the state machine hears of it. */
static void recv_report(dlcp_sim *sim, uint32_t xi, dlcp_sim_ps now) {
  sim_xfer *x = xfer_at(sim->colls, xi);
  coll_job *job = &sim->colls->jobs[x->m.job];
  coll_rank *rk = &job->ranks[x->m.dst];
  x->recv_done = true;
  x->recv_held = false;
  if (news_for(job, rk, x)) {
    int rv = dlcp_coll_on_received(rk->op, x->m.src, x->m.tag, 0, x->holes,
                                   x->nholes, ns_of(now));
    /* Other errors fail the operation, which reports them at DONE. */
    if (rv == DLCP_ERR_UNKNOWN_TRANSFER) {
      job_fail(job, rk->rank, rv, now);
    }
    queue_poll(rk, now);
  }
  xfer_maybe_free(sim, xi);
}

static void recv_processed(void *obj, void *arg, dlcp_sim_ps now) {
  recv_report(obj, (uint32_t)(uintptr_t)arg, now);
}

/* When |rk|'s CPU is through with a receive of |bytes| (as simulated)
 * completed at |now|: after the receives before it, reduce_time plus the
 * bytes at reduce_rate later, plus its straggler's delay on its first one
 * of the operation (or on every one). */
static dlcp_sim_ps cpu_done_at(coll_rank *rk, uint64_t bytes,
                               dlcp_sim_ps now) {
  const dlcp_sim_coll_spec *s = &rk->job->spec;
  dlcp_sim_ps cost = s->reduce_ps;
  if (s->reduce_bps) {
    /* 128 bits: a transfer may be gigabytes. */
    cost += (dlcp_sim_ps)((__extension__(unsigned __int128)bytes * 8u *
                           DLCP_SIM_PS_PER_S) /
                          s->reduce_bps);
  }
  for (uint32_t i = 0; i < s->nstragglers; i++) {
    const dlcp_sim_straggler *st = &s->stragglers[i];
    if (st->rank == rk->rank && (st->every || rk->op_recvs == 0)) {
      cost += st->delay;
    }
  }
  rk->op_recvs++;
  rk->cpu_free = (rk->cpu_free > now ? rk->cpu_free : now) + cost;
  return rk->cpu_free;
}

void dlcp_sim_coll_flow_delivered(dlcp_sim *sim, const dlcp_sim_flow *flow,
                                  dlcp_sim_ps now) {
  sim_xfer *x = xfer_of(sim, flow);
  if (!x || x->recv_done || x->recv_held) {
    return;
  }
  coll_job *job = &sim->colls->jobs[x->m.job];
  coll_rank *rk = &job->ranks[x->m.dst];
  dlcp_sim_ps at = now;
  if (news_for(job, rk, x)) {
    /* What the network carried, as the runtime's receive buffer would
     * hold it: the sender's bytes, zeros in the holes (or reduced in on
     * arrival, the holes left as they were).  Copied now: the
     * sender may reuse its buffer once its side completes. */
    if (!x->copied) {
      coll_match_deliver(&x->m, x->holes, x->nholes);
    }
    at = cpu_done_at(rk, x->m.bytes * job->scale, now);
  }
  if (at > now) {
    x->recv_held = true;
    dlcp_sim_engine_at_cold(&sim->engine, at, recv_processed, sim,
                            (void *)(uintptr_t)flow->xfer);
    return;
  }
  recv_report(sim, flow->xfer, now);
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
  if (news_for(job, rk, x)) {
    int rv = dlcp_coll_on_sent(rk->op, x->m.dst, x->m.tag, 0, ns_of(now));
    if (rv == DLCP_ERR_UNKNOWN_TRANSFER) {
      job_fail(job, rk->rank, rv, now);
    }
    queue_poll(rk, now);
  }
  xfer_maybe_free(sim, flow->xfer);
}

void dlcp_sim_coll_flow_sent_whole(dlcp_sim *sim, const dlcp_sim_flow *flow,
                                   dlcp_sim_ps now) {
  sim_xfer *x = xfer_of(sim, flow);
  if (!x || x->send_done) {
    return;
  }
  coll_job *job = &sim->colls->jobs[x->m.job];
  coll_rank *rk = &job->ranks[x->m.dst];
  if (news_for(job, rk, x)) {
    coll_match_deliver(&x->m, NULL, 0); /* no holes: nothing is given up */
    x->copied = true;
  }
  dlcp_sim_coll_flow_finished(sim, flow, now);
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
  if (news_for(job, rk, x)) {
    if (is_send) {
      (void)dlcp_coll_on_sent(rk->op, x->m.dst, x->m.tag, status, ns_of(now));
    } else {
      (void)dlcp_coll_on_received(rk->op, x->m.src, x->m.tag, status, NULL, 0,
                                  ns_of(now));
    }
    queue_poll(rk, now);
  }
  xfer_maybe_free(sim, flow->xfer);
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
  uint32_t run = words[1];
  if (rk->op && run == rk->runs - 1) {
    (void)dlcp_coll_on_note(rk->op, words[2], value, ns_of(now));
    queue_poll(rk, now);
    return;
  }
  if (rk->finished || run < rk->runs) {
    return; /* for an operation that is over */
  }
  /* For an operation this rank has not begun: keep it. */
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
  rk->notes[rk->nnotes++] = (pending_note){run, words[2], value};
}

/* ---- reports ------------------------------------------------------------ */

uint32_t dlcp_sim_coll_jobs(const dlcp_sim *sim) {
  return sim->colls ? sim->colls->njobs : 0;
}

uint32_t dlcp_sim_coll_rank_host(const dlcp_sim *sim, uint32_t job,
                                 uint32_t rank) {
  if (job >= dlcp_sim_coll_jobs(sim) || rank >= sim->colls->jobs[job].n) {
    return DLCP_SIM_NONE;
  }
  return sim->colls->jobs[job].ranks[rank].host;
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
  r->algo_name = job->spec.mtina  ? "mtina"
                 : job->spec.hina ? "hina"
                 : job->spec.cina ? "cina"
                                  : dlcp_algo_short_name(job->algo);
  r->kind = job->spec.kind;
  r->ranks = job->n;
  r->scale = job->scale;
  r->bytes = job->count * sizeof(float) * job->scale;
  r->iterations = job->spec.iterations;
  r->iter = job->it;
  r->verify_errors = job->verify_errors;
  r->min_delivered = job->min_delivered;
  r->bypasses = job->bypasses;
  r->ina_groups = job->ina_groups;
  r->ring_groups = job->ring_groups;
  r->ina_retransmits = job->ina_retransmits;
  r->ina_results = job->ina_results;
  r->ina_results_marked = job->ina_marked;
  r->ina_cwnd_cuts = job->ina_cuts;
  r->status = job->status;
  r->failed_rank = job->failed_rank;
  r->done = job->done && job->status == 0;
}
