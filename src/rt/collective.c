/*
 * Collectives in the runtime: the driver of src/coll's sans-I/O state
 * machines over the communicator's MLT connections.
 *
 * Model.  A collective call (collective_api.c) builds a dlcp_coll and a
 * "run" that owns it (dlcp_rt_coll_start).
 * The run turns the state machine's actions into MLT transfers (SEND and
 * RECV), NOTE control messages and cancellations, and feeds completions
 * and notes back; all of it happens under the communicator's |mu|, from
 * whichever thread drives the event loop (see comm_drive.h), so the
 * state machine never sees two threads.
 *
 * Naming transfers.  Every rank calls collectives in the same order, so a
 * per-communicator counter gives each run the same id everywhere.  A
 * transfer's MLT tensor id is
 *
 *   bit  31     1 (application ids are below DLCP_TENSOR_ID_LIMIT)
 *   bits 30..20 the run id, modulo 2^11
 *   bits 19..0  the state machine's tag (DLCP_COLL_TAG_BITS)
 *
 * and MLT matches sends and receives per peer by tensor id in post order,
 * so runs more than 2^11 apart could only collide if 2048 collectives were
 * in flight at once, which dlcp_allreduce refuses (DLCP_ERR_LIMIT).
 *
 * Failure.  A transfer that fails fails the run (the state machine
 * reports DONE with the status and the peer); a peer whose control
 * connection drops fails every run at once, naming it, because every rank
 * takes part in every collective.  A failed run cancels its outstanding
 * transfers before it reports, so the application may free its buffers.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll/coll.h"
#include "coll/reduce.h"
#include "rt/clock.h"
#include "rt/comm_drive.h"
#include "rt/comm_internal.h"
#include "rt/errbuf.h"
#include "rt/flight.h"
#include "rt/ina_run.h"
#include "rt/request.h"
#include "rt/scratch.h"
#include "rt/stall.h"

#define MAX_RUNS 2048u

#define TENSOR_COLL_BIT 0x80000000u

typedef struct coll_run {
  struct coll_run *next;
  uint32_t id;
  const char *kind; /* "allreduce", for messages and the flight record */
  const char *algo;
  /* The peer of a transfer that made no progress, and since when: what
   * this run waits on while the stall inquiry runs (DLCP_STALL_NOBODY
   * if none). */
  uint32_t stalled_peer;
  dlcp_tstamp stalled_since;
  dlcp_coll *op;
  struct dlcp_request *req;
  op *xfers; /* outstanding transfers, linked by coll_next */
  uint32_t layer, nlayers;
  bool f32_importance; /* dlcp_coll_opts', for FLOAT32 vectors only */
  uint64_t bytes; /* the vector's */
  bool dirty; /* has events the state machine has not been polled for */
  /* DLCP_FAULT_STRAGGLE: the receive completion held back, once a run. */
  bool straggled;
  struct held_recv *held;
  int fail_status;
  char fail_reason[224];
} coll_run;

typedef struct held_recv {
  dlcp_tstamp release_ns;
  uint32_t peer, tag;
  int status;
  size_t nranges;
  dlcp_coll_range ranges[]; /* the transfer's missing ranges */
} held_recv;

typedef struct early_note {
  struct early_note *next;
  uint32_t op_id;
  uint32_t peer;
  uint64_t value;
} early_note;

/* Operations kept for reuse (a training step's few shapes: a gradient
 * bucket, a barrier, a loss's all-reduce), each up to KEEP_MAX_BYTES of
 * data: a kept one holds its scratch, and larger ones spend far longer
 * on their data than on their plan. */
#define KEPT_OPS 4
#define KEEP_MAX_BYTES (64u << 10)

/* The communicator's collectives: everything about them that outlives one
 * operation.  All under the communicator's |mu|. */
struct dlcp_rt_colls {
  dlcp_stall stall;     /* the inquiry after a transfer made no progress */
  bool stall_acted;     /* its verdict has been acted on */
  uint32_t stall_op;    /* the run it started in */
  /* A stalled rank being agreed on: every rank that finds it tells the
   * others which operation stalled; for settle_ns() after the first such
   * report a rank collects them and then names the lowest, so that all
   * name the same one (survivors may be an operation apart). */
  dlcp_tstamp settle_until; /* NEVER: not settling */
  uint32_t settle_rank;
  uint32_t settle_op;
  char settle_why[224];
  dlcp_flight *flight;  /* recent operations; NULL until the first */
  coll_run *runs;           /* running, in start order */
  uint32_t next_id;         /* same sequence on every rank */
  early_note *early;        /* notes for collectives not started here */
  pthread_cond_t req_cv;    /* a collective request completed */
  dlcp_scratch scratch;     /* the operations' allocator (reuses big
                               blocks) */
  /* The straggler bypass's step and transfer time estimates at the end
   * of the last RING_BYPASS all-reduce, and its size: they seed the next
   * one of the same size (a training loop's next iteration). */
  uint64_t bypass_hint_bytes;
  dlcp_duration bypass_step_hint_ns, bypass_trans_hint_ns;
  /* INA / RA_INA: the socket to the switch, job id, token, next group
   * (ina_run.c); NULL until the first such all-reduce. */
  dlcp_rt_ina *ina;
  /* Small operations that succeeded, newest first (NULL past the last),
   * for the next ones of their shape: dlcp_coll_reuse spares them the
   * allocations and the plan, 0.5-0.8 us of an 8-byte all-reduce's 2.7
   * on one host (docs/performance-allreduce.md). */
  dlcp_coll *kept[KEPT_OPS];
};

static uint32_t tensor_id(const coll_run *run, uint32_t tag) {
  return TENSOR_COLL_BIT | (run->id & 0x7FFu) << DLCP_COLL_TAG_BITS | tag;
}

/* --- kept operations ------------------------------------------------ */

/* Keeps |o|, which succeeded, for reuse, dropping the oldest kept one if
 * every slot is taken. */
static void keep_op(dlcp_rt_colls *co, dlcp_coll *o) {
  dlcp_coll_del(co->kept[KEPT_OPS - 1]);
  memmove(&co->kept[1], &co->kept[0], (KEPT_OPS - 1) * sizeof(co->kept[0]));
  co->kept[0] = o;
}

/* A kept operation made into |p| (dlcp_coll_reuse), taken out of the
 * slots; NULL if none fits. */
static dlcp_coll *take_kept(dlcp_rt_colls *co, const dlcp_coll_params *p,
                            dlcp_tstamp now) {
  for (uint32_t i = 0; i < KEPT_OPS && co->kept[i]; i++) {
    int rv = dlcp_coll_reuse(co->kept[i], p, now);
    if (rv == DLCP_ERR_INVALID_ARGUMENT) {
      continue; /* another shape: it stays as it was */
    }
    dlcp_coll *o = co->kept[i];
    memmove(&co->kept[i], &co->kept[i + 1],
            (KEPT_OPS - 1 - i) * sizeof(co->kept[0]));
    co->kept[KEPT_OPS - 1] = NULL;
    if (rv != 0) {
      dlcp_coll_del(o);
      return NULL;
    }
    return o;
  }
  return NULL;
}

/* --- finishing -------------------------------------------------------- */

static void unlink_xfer(coll_run *run, op *o) {
  for (op **pp = &run->xfers; *pp; pp = &(*pp)->coll_next) {
    if (*pp == o) {
      *pp = o->coll_next;
      return;
    }
  }
}

/* Withdraws one transfer.  If MLT still holds it, it is cancelled there
 * and forgotten; if MLT already finished it (a completion not yet polled,
 * or the peer's abort), its completion will still come: the record stays
 * as an orphan that comm.c frees on arrival.  |unsent|: the peer is known
 * never to send a withdrawn receive, so MLT keeps no tomb for it. */
static void withdraw(dlcp_comm *c, op *o, bool unsent, dlcp_tstamp now) {
  dlcp_mlt_conn *conn = c->peers[o->peer].conn;
  uint64_t key = (uint64_t)(uintptr_t)o;
  int rv = o->kind == OP_SEND ? dlcp_mlt_cancel_send(conn, key, now)
           : unsent           ? dlcp_mlt_cancel_unsent_recv(conn, key, now)
                              : dlcp_mlt_cancel_recv(conn, key, now);
  if (rv == 0) {
    free(o);
  } else {
    o->coll = NULL;
    o->cq = NULL;
  }
}

/* Withdraws every transfer still outstanding: buffers are released at
 * once and the peers are told, so nobody waits for them. */
static void cancel_xfers(dlcp_comm *c, coll_run *run, dlcp_tstamp now) {
  while (run->xfers) {
    op *o = run->xfers;
    run->xfers = o->coll_next;
    withdraw(c, o, false, now);
  }
}

static void finish_run(dlcp_comm *c, coll_run *run, dlcp_tstamp now) {
  cancel_xfers(c, run, now);
  free(run->held);
  run->held = NULL;
  dlcp_request *req = run->req;
  dlcp_coll_result res;
  dlcp_coll_get_result(run->op, &res);
  if (res.algo == DLCP_ALGO_RING_BYPASS && res.status == 0 &&
      res.step_ns > 0) {
    c->coll->bypass_hint_bytes = run->bytes;
    c->coll->bypass_step_hint_ns = res.step_ns;
    c->coll->bypass_trans_hint_ns = res.trans_ns;
  }
  dlcp_coll_info *info = &req->info;
  memset(info, 0, sizeof(*info));
  info->status = run->fail_status ? run->fail_status : res.status;
  info->algo = res.algo;
  info->algo_name = run->algo;
  info->delivered_fraction = res.delivered_fraction;
  info->bypasses = res.bypasses;
  /* Read the clock again: a collective whose peers' data had all come
   * finishes in the pass that starts it, whose |now| is its start. */
  info->elapsed_ns = dlcp_rt_now() - req->started_ns;
  if (info->status != 0) {
    /* Run ids are equal on every rank: "allreduce #17" names the same
     * operation everywhere. */
    if (run->fail_reason[0]) {
      dlcp_fmt(info->error, sizeof(info->error), "%s #%u (%s): %s",
               run->kind, run->id, run->algo, run->fail_reason);
    } else if (res.failed_peer >= 0) {
      dlcp_fmt(info->error, sizeof(info->error), "%s #%u (%s): %s: %s",
               run->kind, run->id, run->algo, c->peers[res.failed_peer].name,
               dlcp_strerror(info->status));
    } else {
      dlcp_fmt(info->error, sizeof(info->error), "%s #%u (%s): %s",
               run->kind, run->id, run->algo, dlcp_strerror(info->status));
    }
  }
  if (c->coll->flight) {
    dlcp_flight_end(c->coll->flight, run->id, info->status, info->error, now);
  }
  if (res.nmissing > 0) {
    req->missing = malloc(res.nmissing * sizeof(dlcp_range));
    if (req->missing) {
      for (size_t i = 0; i < res.nmissing; i++) {
        req->missing[i].offset = res.missing[i].offset;
        req->missing[i].len = res.missing[i].len;
      }
      info->missing = req->missing;
      info->nmissing = res.nmissing;
    }
  }
  for (coll_run **pp = &c->coll->runs; *pp; pp = &(*pp)->next) {
    if (*pp == run) {
      *pp = run->next;
      break;
    }
  }
  if (info->status == 0 && run->bytes <= KEEP_MAX_BYTES) {
    keep_op(c->coll, run->op);
  } else {
    dlcp_coll_del(run->op);
  }
  free(run);
  req->run = NULL;
  dlcp_rt_coll_finish_request(c, req);
}

/* Fails |run| from outside the state machine (a lost peer, shutdown). */
static void fail_run(dlcp_comm *c, coll_run *run, int status,
                     const char *reason, dlcp_tstamp now) {
  if (!run->fail_status) {
    run->fail_status = status;
    dlcp_copy_str(run->fail_reason, sizeof(run->fail_reason), reason);
  }
  finish_run(c, run, now);
}

/* --- driving a run ----------------------------------------------------- */

static int post_xfer(dlcp_comm *c, coll_run *run, const dlcp_coll_action *a,
                     dlcp_tstamp now) {
  op *o = dlcp_zalloc(sizeof(*o));
  if (!o) {
    return DLCP_ERR_NOMEM;
  }
  o->kind = a->type == DLCP_COLL_ACT_SEND ? OP_SEND : OP_RECV;
  o->coll = run;
  o->tag = a->tag;
  o->peer = a->peer;
  o->t.id = tensor_id(run, a->tag);
  /* The state machine lends its buffers for the transfer; MLT reads a
   * send buffer and writes a receive buffer, never both. */
  o->t.data = a->type == DLCP_COLL_ACT_SEND
                  ? (void *)(uintptr_t)a->send_buf
                  : a->recv_buf;
  o->t.bytes = a->bytes;
  o->opts.layer = run->layer;
  o->opts.nlayers = run->nlayers;
  o->opts.f32_importance = run->f32_importance;
  o->loss_bound = a->loss_bound;
  o->stage = a->stage;
  o->place = a->recv_place;
  o->place_user = a->recv_place_user;
  o->place_unit = a->recv_place_unit;
  o->posted_ns = now;
  if (c->coll->flight) {
    dlcp_flight_transfer(c->coll->flight, run->id, a->peer,
                         o->kind == OP_SEND, true, 0, a->bytes);
  }
  o->coll_next = run->xfers;
  run->xfers = o;
  dlcp_rt_submit(c, o, now);
  return 0;
}

/* Polls |run| until it has nothing more to do now.  Returns whether it
 * gave the connections anything to send (transfers, notes, a
 * cancellation's STOP), and whether the run finished, through
 * |*finished|. */
static bool pump(dlcp_comm *c, coll_run *run, dlcp_tstamp now,
                 bool *finished) {
  bool posted = false;
  *finished = false;
  run->dirty = false;
  for (;;) {
    dlcp_coll_action a;
    int rv = dlcp_coll_poll(run->op, &a, now);
    if (rv != 0 && a.type != DLCP_COLL_ACT_DONE) {
      break; /* failed: DONE comes on the next poll */
    }
    switch (a.type) {
    case DLCP_COLL_ACT_NONE:
      return posted;
    case DLCP_COLL_ACT_SEND:
    case DLCP_COLL_ACT_RECV:
      if (post_xfer(c, run, &a, now) != 0) {
        fail_run(c, run, DLCP_ERR_NOMEM, "out of memory posting a transfer",
                 now);
        *finished = true;
        return posted;
      }
      posted = true;
      break;
    case DLCP_COLL_ACT_CANCEL_RECV:
      for (op *o = run->xfers; o; o = o->coll_next) {
        if (o->kind == OP_RECV && o->peer == a.peer && o->tag == a.tag) {
          /* The state machine's promise: the peer never sends it. */
          unlink_xfer(run, o);
          withdraw(c, o, true, now);
          break;
        }
      }
      posted = true; /* a STOP may be queued for the peer */
      break;
    case DLCP_COLL_ACT_NOTE: {
      uint8_t msg[DLCP_WIRE_NOTE_LEN];
      dlcp_wire_note n = {.job = c->env.job, .op = run->id, .value = a.value};
      peer *to = &c->peers[a.peer];
      if (dlcp_wire_note_encode(msg, sizeof(msg), &n) > 0 &&
          (!c->env.control_datagrams ||
           dlcp_mlt_send_note(to->conn, msg, sizeof(msg), now) != 0)) {
        /* With control datagrams a lost NOTE costs an RTT-scale resend,
         * not TCP's 200 ms; the stream remains for the rest. */
        dlcp_rt_queue_control(c, to, msg, sizeof(msg), now);
      }
      posted = true; /* queued: the connections must send them */
      break;
    }
    case DLCP_COLL_ACT_DONE:
      finish_run(c, run, now);
      *finished = true;
      return posted;
    default:
      return posted;
    }
  }
  /* A poll failure without DONE: ask again next time. */
  run->dirty = true;
  return posted;
}

/* --- stalls: whom are we waiting on? ------------------------------------ */

static void record_loss(dlcp_comm *c, uint32_t rank, uint32_t op_plus,
                        int status, const char *reason, dlcp_tstamp now);
static void fail_all(dlcp_comm *c, dlcp_tstamp now);

static void send_note(dlcp_comm *c, uint32_t to, uint32_t note_op,
                      uint64_t value, dlcp_tstamp now) {
  uint8_t msg[DLCP_WIRE_NOTE_LEN];
  dlcp_wire_note n = {.job = c->env.job, .op = note_op, .value = value};
  if (to != c->env.rank && c->peers[to].dead_status == 0 &&
      dlcp_wire_note_encode(msg, sizeof(msg), &n) > 0) {
    dlcp_rt_queue_control(c, &c->peers[to], msg, sizeof(msg), now);
  }
}

/* run_blocked_on: the peer |run| waits on: the oldest outstanding
 * receive's sender, else the oldest outstanding send's receiver, else the
 * rank whose control note it awaits.  Of transfers posted together (an
 * algorithm that posts every receive at once), the first posted: its
 * earliest step, which the later ones wait for.  A later step's partner
 * may itself wait on this rank, and following it made two survivors name
 * each other (a cycle) instead of a cut rank. */
static uint32_t run_blocked_on(const coll_run *run, dlcp_tstamp *since) {
  const op *best = NULL;
  uint32_t noter;
  if (run->stalled_peer != DLCP_STALL_NOBODY) {
    *since = run->stalled_since;
    return run->stalled_peer;
  }
  if (run->xfers == NULL && dlcp_coll_awaited_note(run->op, &noter, since)) {
    return noter;
  }
  for (const op *o = run->xfers; o; o = o->coll_next) {
    if (best == NULL ||
        (o->kind == OP_RECV && best->kind == OP_SEND) ||
        /* |xfers| is newest first: "<=" keeps the first posted. */
        (o->kind == best->kind && o->posted_ns <= best->posted_ns)) {
      best = o;
    }
  }
  if (best == NULL) {
    return DLCP_STALL_NOBODY;
  }
  *since = best->posted_ns;
  return best->peer;
}

/* blocked_on: the peer this rank waits on, in its oldest running
 * collective that waits on anybody. */
static uint32_t blocked_on(const dlcp_comm *c) {
  for (const coll_run *run = c->coll->runs; run; run = run->next) {
    dlcp_tstamp since;
    uint32_t who = run_blocked_on(run, &since);
    if (who != DLCP_STALL_NOBODY) {
      return who;
    }
  }
  return DLCP_STALL_NOBODY;
}

/* settle_ns: how long the ranks collect reports of a stalled rank before
 * they fail, so that all name the same operation: what the inquiry leaves
 * of its budget (rt/stall.h). */
static dlcp_duration settle_ns(const dlcp_comm *c) {
  return dlcp_stall_budget_ns(c->env.timeout_ms) -
         dlcp_stall_probe_ns(c->env.timeout_ms);
}

static void stall_begin(dlcp_comm *c, const coll_run *run, uint32_t waited_on,
                        dlcp_tstamp now) {
  dlcp_stall *st = &c->coll->stall;
  uint32_t nonce = 0;
  if (st->world == 0) {
    /* The transfers gave up dlcp_stall_budget_ns before the timeout:
     * the inquiry and the agreement spend it. */
    dlcp_stall_init(st, c->env.rank, c->env.world_size,
                    dlcp_stall_probe_ns(c->env.timeout_ms));
  }
  uint32_t to = dlcp_stall_begin(st, waited_on, now, &nonce);
  if (to != DLCP_STALL_NOBODY) {
    c->coll->stall_op = run->id;
    send_note(c, to, DLCP_RT_NOTE_PROBE, nonce, now);
  }
}

/* settle_start notes a report that |rank| stalled in operation |op_id|
 * (|why|: what the report says). */
static void settle_start(dlcp_comm *c, uint32_t rank, uint32_t op_id,
                         const char *why, dlcp_tstamp now) {
  dlcp_rt_colls *co = c->coll;
  if (co->settle_until != DLCP_TSTAMP_NEVER) {
    if (rank == co->settle_rank && op_id < co->settle_op) {
      co->settle_op = op_id;
    }
    return;
  }
  co->settle_until = now + settle_ns(c);
  co->settle_rank = rank;
  co->settle_op = op_id;
  dlcp_copy_str(co->settle_why, sizeof(co->settle_why), why);
  /* This rank may still be in an earlier operation than the report's
   * (survivors can be a collective apart): then it tells the others, so
   * that all settle on the lowest one. */
  if (co->runs != NULL && co->runs->id < op_id) {
    co->settle_op = co->runs->id;
    for (uint32_t k = 0; k < c->env.world_size; k++) {
      if (k != c->env.rank && k != rank) {
        send_note(c, k, DLCP_RT_NOTE_PEER_LOST,
                  (uint64_t)(co->settle_op + 1u) << 32 | rank, now);
      }
    }
  }
}

/* settle_finish ends the agreement (when due, or at once if |force|):
 * the stalled rank is lost, every collective fails naming it and the
 * operation, and the others are told once more (a rank that heard
 * nothing yet learns the operation too). */
static void settle_finish(dlcp_comm *c, dlcp_tstamp now, bool force) {
  dlcp_rt_colls *co = c->coll;
  if (co->settle_until == DLCP_TSTAMP_NEVER ||
      (!force && now < co->settle_until)) {
    return;
  }
  co->settle_until = DLCP_TSTAMP_NEVER;
  uint32_t r = co->settle_rank;
  const char *kind = "collective";
  const char *algo = "?";
  if (co->flight != NULL) {
    (void)dlcp_flight_lookup(co->flight, co->settle_op, &kind, &algo);
  }
  char why[224];
  char reason[224];
  dlcp_fmt(why, sizeof(why), "stalled in %s #%u (%s): %s", kind,
           co->settle_op, algo, co->settle_why);
  dlcp_fmt(reason, sizeof(reason), "%s: %s", c->peers[r].name, why);
  for (uint32_t k = 0; k < c->env.world_size; k++) {
    if (k != c->env.rank && k != r) {
      send_note(c, k, DLCP_RT_NOTE_PEER_LOST,
                (uint64_t)(co->settle_op + 1u) << 32 | r, now);
    }
  }
  record_loss(c, r, co->settle_op + 1u, DLCP_ERR_TIMEOUT, reason, now);
  fail_all(c, now);
  dlcp_rt_peer_fail(c, &c->peers[r], DLCP_ERR_TIMEOUT, why, now);
}

/* stall_conclude acts on the inquiry's verdict, once: the others hear of
 * it at once, and after the agreement the culprit is failed for good. */
static void stall_conclude(dlcp_comm *c, dlcp_tstamp now) {
  dlcp_stall *st = &c->coll->stall;
  char what[224]; /* a peer's dead_reason holds as much */
  if (st->verdict == DLCP_STALL_PENDING || c->coll->stall_acted) {
    return;
  }
  c->coll->stall_acted = true;
  if (c->lost_status != 0) {
    return; /* the job already lost a rank: that one is named */
  }
  dlcp_stall_describe(st, what, sizeof(what));
  for (uint32_t r = 0; r < c->env.world_size; r++) {
    if (r != c->env.rank && r != st->culprit) {
      send_note(c, r, DLCP_RT_NOTE_PEER_LOST,
                (uint64_t)(c->coll->stall_op + 1u) << 32 | st->culprit, now);
    }
  }
  settle_start(c, st->culprit, c->coll->stall_op, what, now);
}

/* watch_notes: a run held up by a control note (a barrier round, the
 * loss agreement) has no transfer whose timer would notice that the
 * rank it waits on froze between transfers; it starts the inquiry
 * itself after the same wait without progress. */
static void watch_notes(dlcp_comm *c, coll_run *run, dlcp_tstamp now,
                        dlcp_tstamp *next) {
  uint32_t awaited;
  dlcp_tstamp since;
  if (run->xfers != NULL || run->stalled_peer != DLCP_STALL_NOBODY ||
      c->lost_status != 0 ||
      !dlcp_coll_awaited_note(run->op, &awaited, &since)) {
    return;
  }
  dlcp_tstamp due = since + dlcp_stall_wait_ns(c->env.timeout_ms);
  if (now < due) {
    if (due < *next) {
      *next = due;
    }
    return;
  }
  run->stalled_peer = awaited;
  run->stalled_since = since;
  stall_begin(c, run, awaited, now);
}

dlcp_flight *dlcp_rt_coll_flight(dlcp_comm *c) {
  if (c->coll->flight == NULL) {
    c->coll->flight = dlcp_flight_new(c->env.rank, c->env.world_size,
                                      c->local_ip);
  }
  return c->coll->flight;
}

void dlcp_rt_coll_dump(dlcp_comm *c, const char *reason, dlcp_tstamp now) {
  dlcp_flight *fr = dlcp_rt_coll_flight(c);
  if (fr == NULL) {
    return;
  }
  for (coll_run *run = c->coll->runs; run; run = run->next) {
    dlcp_tstamp since = 0;
    uint32_t who = run_blocked_on(run, &since);
    dlcp_flight_waiting(fr, run->id, who == DLCP_STALL_NOBODY
                                         ? DLCP_FLIGHT_NONE : who, since);
  }
  dlcp_rt_ina_note_waits(c, fr);
  (void)dlcp_flight_write(fr, c->env.flight_dir, reason, now);
}

bool dlcp_rt_coll_service(dlcp_comm *c, dlcp_tstamp now, dlcp_tstamp *next) {
  bool posted = false;
  uint32_t nonce = 0;
  uint32_t again = dlcp_stall_on_time(&c->coll->stall, now, &nonce);
  if (again != DLCP_STALL_NOBODY) {
    send_note(c, again, DLCP_RT_NOTE_PROBE, nonce, now);
  }
  stall_conclude(c, now);
  settle_finish(c, now, false);
  coll_run *run = c->coll->runs;
  while (run) {
    coll_run *following = run->next;
    bool finished = false;
    if (run->held && run->held->release_ns <= now) {
      held_recv *h = run->held;
      run->held = NULL;
      dlcp_coll_on_received(run->op, h->peer, h->tag, h->status, h->ranges,
                            h->nranges, now);
      run->dirty = true;
      free(h);
    }
    if (run->held && run->held->release_ns < *next) {
      *next = run->held->release_ns;
    }
    if (run->dirty || dlcp_coll_next_deadline(run->op) <= now) {
      posted |= pump(c, run, now, &finished);
    }
    if (!finished) {
      dlcp_tstamp d = dlcp_coll_next_deadline(run->op);
      if (d < *next) {
        *next = d;
      }
      watch_notes(c, run, now, next);
    }
    run = following;
  }
  /* After the runs: an INA all-reduce moves on when the collectives it
   * started (its agreements, its ring part) have just finished, and the
   * ring part it may start is run on the next round (|posted|). */
  posted |= dlcp_rt_ina_service(c, now, next);
  /* Last, as the runs may have just started an inquiry (watch_notes): a
   * rank cut off from everybody has nothing else to wake it (issue 19,
   * testbed_cut). */
  if (dlcp_stall_deadline(&c->coll->stall) < *next) {
    *next = dlcp_stall_deadline(&c->coll->stall);
  }
  if (c->coll->settle_until < *next) {
    *next = c->coll->settle_until;
  }
  return posted;
}

void dlcp_rt_coll_transfer_done(dlcp_comm *c, op *o,
                                const dlcp_mlt_completion *mc, int status,
                                dlcp_tstamp now) {
  coll_run *run = o->coll;
  peer *p = &c->peers[o->peer];
  bool no_progress = (status == DLCP_ERR_TIMEOUT ||
                      status == DLCP_ERR_NO_PROGRESS) &&
                     c->lost_status == 0 && p->dead_status == 0;
  if (no_progress && run->stalled_peer == DLCP_STALL_NOBODY) {
    /* The rank the run waits on, among every transfer it still has (this
     * one included): the first of a batch timed out together need not
     * be the one the others wait for. */
    run->stalled_peer = run_blocked_on(run, &run->stalled_since);
    if (run->stalled_peer == DLCP_STALL_NOBODY) {
      run->stalled_peer = o->peer; /* (|o| is on the list: not reached) */
      run->stalled_since = o->posted_ns;
    }
  }
  unlink_xfer(run, o);
  if (mc) {
    c->stats.retransmissions += mc->retransmissions;
  }
  if (c->coll->flight) {
    dlcp_flight_transfer(c->coll->flight, run->id, o->peer,
                         o->kind == OP_SEND, false,
                         status == 0 ? (mc ? mc->delivered_bytes : o->t.bytes)
                                     : 0,
                         0);
  }
  if (no_progress) {
    /* No progress with |p|: not necessarily |p|'s fault.  Find the rank
     * everybody waits on first; the verdict fails this run with the rest
     * (stall_conclude). */
    stall_begin(c, run, run->stalled_peer, now);
    free(o);
    return;
  }
  if (status != 0 && !run->fail_reason[0]) {
    dlcp_fmt(run->fail_reason, sizeof(run->fail_reason),
             "%s: %s (collective %u, %s of %llu bytes)", p->name,
             p->dead_status ? p->dead_reason : dlcp_strerror(status), run->id,
             o->kind == OP_SEND ? "send" : "receive",
             (unsigned long long)o->t.bytes);
  }
  if (o->kind == OP_SEND) {
    dlcp_coll_on_sent(run->op, o->peer, o->tag, status, now);
  } else {
    /* MLT reports byte ranges of the transfer; so does the state
     * machine expect them. */
    dlcp_coll_range stack[16];
    dlcp_coll_range *ranges = stack;
    size_t n = mc ? mc->nmissing : 0;
    if (n > 16) {
      ranges = malloc(n * sizeof(*ranges));
    }
    if (!ranges) {
      n = 0;
      ranges = stack;
      status = status ? status : DLCP_ERR_NOMEM;
    }
    for (size_t i = 0; i < n; i++) {
      ranges[i].offset = mc->missing[i].offset;
      ranges[i].len = mc->missing[i].len;
    }
    held_recv *h = NULL;
    if (c->env.fault.straggle_ms > 0 && !run->straggled && status == 0) {
      h = malloc(sizeof(*h) + n * sizeof(dlcp_coll_range));
    }
    if (h) {
      /* The straggler's slow step: the collective sees this receive late,
       * while the connections (and the bypass's notes) keep running. */
      run->straggled = true;
      h->release_ns = now + (dlcp_tstamp)c->env.fault.straggle_ms * 1000000u;
      h->peer = o->peer;
      h->tag = o->tag;
      h->status = status;
      h->nranges = n;
      memcpy(h->ranges, ranges, n * sizeof(dlcp_coll_range));
      run->held = h;
    } else {
      dlcp_coll_on_received(run->op, o->peer, o->tag, status, ranges, n, now);
    }
    if (ranges != stack) {
      free(ranges);
    }
  }
  run->dirty = true;
  free(o);
}

static coll_run *find_run(dlcp_comm *c, uint32_t id) {
  for (coll_run *run = c->coll->runs; run; run = run->next) {
    if (run->id == id) {
      return run;
    }
  }
  return NULL;
}

/* The job's first lost rank, however it was learnt, is the one every
 * collective names from then on: ranks that exit because of it must not be
 * blamed when their own connections close next. */
static void record_loss(dlcp_comm *c, uint32_t rank, uint32_t op_plus,
                        int status, const char *reason, dlcp_tstamp now) {
  if (c->lost_status == 0) {
    c->lost_status = status;
    c->lost_rank = rank;
    c->lost_op_plus = op_plus;
    dlcp_copy_str(c->lost_reason, sizeof(c->lost_reason), reason);
    /* The flight record, while the runs still say whom they wait on. */
    if (c->coll->runs) {
      dlcp_rt_coll_dump(c, reason, now);
    }
  }
}

static void fail_all(dlcp_comm *c, dlcp_tstamp now) {
  dlcp_rt_ina_fail_all(c, c->lost_status, c->lost_reason, now);
  while (c->coll->runs) {
    fail_run(c, c->coll->runs, c->lost_status, c->lost_reason, now);
  }
}

void dlcp_rt_coll_note(dlcp_comm *c, peer *p, const uint8_t *msg,
                       size_t len, dlcp_tstamp now) {
  dlcp_wire_note n;
  if (dlcp_wire_note_decode(&n, msg, len) != 0 || n.job != c->env.job) {
    c->stats.dropped_malformed++;
    return;
  }
  if (n.op == DLCP_RT_NOTE_PEER_LOST) {
    /* Another rank lost a rank: every collective needs it, so they all
     * fail, naming it (the reporter may go away next).  The value is the
     * rank, and from a stall inquiry also the operation that stalled (its
     * id + 1, in the high half): then the ranks settle which operation to
     * name first (settle_start). */
    uint32_t lost = (uint32_t)n.value;
    uint32_t op_plus = (uint32_t)(n.value >> 32);
    if (lost < c->env.world_size && lost != c->env.rank &&
        c->lost_status == 0) {
      char why[160];
      dlcp_fmt(why, sizeof(why), "lost (reported by %s)", p->name);
      if (op_plus != 0) {
        settle_start(c, lost, op_plus - 1u, why, now);
        settle_finish(c, now, false);
      } else if (c->coll->settle_until == DLCP_TSTAMP_NEVER ||
                 lost != c->coll->settle_rank) {
        char reason[224];
        dlcp_fmt(reason, sizeof(reason), "%s: %s", c->peers[lost].name,
                 why);
        settle_finish(c, now, true);
        record_loss(c, lost, 0, DLCP_ERR_PEER_CLOSED, reason, now);
        fail_all(c, now);
      }
    }
    return;
  }
  if (n.op == DLCP_RT_NOTE_PROBE) {
    send_note(c, p->rank, DLCP_RT_NOTE_PROBE_ANSWER,
              dlcp_stall_pack((uint32_t)n.value, blocked_on(c)), now);
    return;
  }
  if (n.op == DLCP_RT_NOTE_PROBE_ANSWER) {
    uint32_t nonce, waits_on, next_nonce = 0;
    dlcp_stall_unpack(n.value, &nonce, &waits_on);
    uint32_t next = dlcp_stall_on_answer(&c->coll->stall, p->rank, nonce,
                                         waits_on, now, &next_nonce);
    if (next != DLCP_STALL_NOBODY) {
      send_note(c, next, DLCP_RT_NOTE_PROBE, next_nonce, now);
    }
    stall_conclude(c, now);
    return;
  }
  coll_run *run = find_run(c, n.op);
  if (run) {
    dlcp_coll_on_note(run->op, p->rank, n.value, now);
    run->dirty = true;
    return;
  }
  /* The peer is ahead of us: keep the note for when this rank starts
   * that collective.  A note for one already finished here is dropped
   * (ids only grow). */
  if ((int32_t)(n.op - c->coll->next_id) < 0) {
    return;
  }
  early_note *e = malloc(sizeof(*e));
  if (!e) {
    return;
  }
  e->op_id = n.op;
  e->peer = p->rank;
  e->value = n.value;
  e->next = NULL;
  early_note **pp = &c->coll->early;
  while (*pp) {
    pp = &(*pp)->next;
  }
  *pp = e;
}

void dlcp_rt_coll_peer_lost(dlcp_comm *c, peer *p, dlcp_tstamp now) {
  char reason[224];
  dlcp_fmt(reason, sizeof(reason), "%s: %s", p->name, p->dead_reason);
  /* A connection failing while a stalled rank is being agreed on is a
   * survivor leaving because of it: settle now, naming the stalled one. */
  settle_finish(c, now, true);
  record_loss(c, p->rank, 0, p->dead_status, reason, now);
  fail_all(c, now);
}

void dlcp_rt_coll_shutdown(dlcp_comm *c, dlcp_tstamp now) {
  dlcp_rt_ina_fail_all(c, DLCP_ERR_CANCELED, "the communicator was destroyed",
                       now);
  while (c->coll->runs) {
    fail_run(c, c->coll->runs, DLCP_ERR_CANCELED,
             "the communicator was destroyed", now);
  }
}

int dlcp_rt_coll_new(dlcp_rt_colls **pcoll) {
  dlcp_rt_colls *co = calloc(1, sizeof(*co));
  if (!co) {
    return DLCP_ERR_NOMEM;
  }
  dlcp_scratch_init(&co->scratch);
  co->settle_until = DLCP_TSTAMP_NEVER;
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&co->req_cv, &ca);
  pthread_condattr_destroy(&ca);
  *pcoll = co;
  return 0;
}

bool dlcp_rt_coll_busy(const dlcp_rt_colls *co) {
  return co && (co->runs != NULL || dlcp_rt_ina_busy(co->ina));
}

void dlcp_rt_coll_free(dlcp_rt_colls *co) {
  if (!co) {
    return;
  }
  dlcp_flight_free(co->flight);
  for (uint32_t i = 0; i < KEPT_OPS; i++) {
    dlcp_coll_del(co->kept[i]);
  }
  dlcp_scratch_release(&co->scratch);
  while (co->early) {
    early_note *e = co->early;
    co->early = e->next;
    free(e);
  }
  pthread_cond_destroy(&co->req_cv);
  dlcp_rt_ina_free(co->ina);
  free(co);
}

/* --- starting, cancelling, waiting (for collective_api.c) ------------- */

uint32_t dlcp_rt_coll_reserve_id(dlcp_comm *c) {
  return c->coll->next_id++;
}

int dlcp_rt_coll_start(dlcp_comm *c, dlcp_coll_params *p,
                       const dlcp_coll_opts *opts, dlcp_request **preq) {
  pthread_mutex_lock(&c->mu);
  int rv = dlcp_rt_coll_start_locked(c, p, opts, c->coll->next_id, preq);
  if (rv == 0) {
    c->coll->next_id++;
    /* Start it right away from this thread, like a point-to-point post,
     * at the time it was stamped with. */
    dlcp_rt_service_at(c, (*preq)->started_ns);
  }
  pthread_mutex_unlock(&c->mu);
  return rv;
}

int dlcp_rt_coll_start_locked(dlcp_comm *c, dlcp_coll_params *p,
                              const dlcp_coll_opts *opts, uint32_t id,
                              dlcp_request **preq) {
  uint64_t bytes = p->count * dlcp_dtype_size(p->dtype);
  dlcp_request *req = dlcp_zalloc(sizeof(*req));
  coll_run *run = dlcp_zalloc(sizeof(*run));
  if (!req || !run) {
    free(req);
    free(run);
    return DLCP_ERR_NOMEM;
  }
  req->comm = c;
  dlcp_tstamp now = dlcp_rt_now();
  size_t nruns = 0;
  for (coll_run *r = c->coll->runs; r; r = r->next) {
    nruns++;
  }
  if (bytes == c->coll->bypass_hint_bytes) {
    p->bypass_step_hint_ns = c->coll->bypass_step_hint_ns;
    p->bypass_trans_hint_ns = c->coll->bypass_trans_hint_ns;
  }
  int rv = c->closing ? DLCP_ERR_CANCELED
                      : nruns >= MAX_RUNS ? DLCP_ERR_LIMIT : 0;
  if (rv == 0 && bytes <= KEEP_MAX_BYTES) {
    run->op = take_kept(c->coll, p, now);
  }
  if (rv == 0 && !run->op) {
    rv = dlcp_coll_new(&run->op, p, &c->coll->scratch.mem, now);
  }
  if (rv != 0) {
    free(req);
    free(run);
    return rv;
  }
  run->id = id;
  run->kind = dlcp_coll_kind_name(p->kind);
  run->stalled_peer = DLCP_STALL_NOBODY;
  /* A barrier is the dissemination barrier whatever the options say:
   * errors and flight records name what ran. */
  run->algo = p->kind == DLCP_COLL_BARRIER
                  ? "dissemination"
                  : dlcp_algo_name((dlcp_algo)dlcp_coll_resolve_algo(p));
  run->bytes = bytes;
  dlcp_flight *fr = dlcp_rt_coll_flight(c);
  if (fr) {
    dlcp_flight_begin(fr, run->id, run->kind, run->algo, bytes, now);
  }
  run->req = req;
  run->layer = opts->layer;
  run->nlayers = opts->nlayers;
  run->f32_importance = opts->f32_importance && p->dtype == DLCP_FLOAT32;
  run->dirty = true;
  req->run = run;
  req->started_ns = now;
  coll_run **pp = &c->coll->runs;
  while (*pp) {
    pp = &(*pp)->next;
  }
  *pp = run;
  /* Notes that arrived before this rank got here. */
  for (early_note **ep = &c->coll->early; *ep;) {
    early_note *e = *ep;
    if (e->op_id == run->id) {
      dlcp_coll_on_note(run->op, e->peer, e->value, now);
      *ep = e->next;
      free(e);
    } else {
      ep = &e->next;
    }
  }
  *preq = req;
  /* A job that lost a rank can never complete a collective.  (The runs
   * only: an INA all-reduce may be what starts this one.) */
  while (c->lost_status != 0 && c->coll->runs) {
    fail_run(c, c->coll->runs, c->lost_status, c->lost_reason, now);
  }
  return 0;
}

void dlcp_rt_coll_finish_request(dlcp_comm *c, dlcp_request *req) {
  req->done = true;
  pthread_cond_broadcast(&c->coll->req_cv);
  dlcp_rt_completed(c);
}

void dlcp_rt_coll_drop(dlcp_comm *c, dlcp_request *req) {
  if (req->run) {
    fail_run(c, req->run, DLCP_ERR_CANCELED, "the request was freed",
             dlcp_rt_now());
  }
  free(req->missing);
  free(req);
}

uint64_t dlcp_rt_coll_final_prefix(const dlcp_request *req) {
  if (req->run) {
    return dlcp_coll_final_prefix(req->run->op);
  }
  return req->done && req->info.status == 0 ? UINT64_MAX : 0;
}

void dlcp_rt_coll_cancel(dlcp_comm *c, dlcp_request *req) {
  pthread_mutex_lock(&c->mu);
  if (req->run) {
    fail_run(c, req->run, DLCP_ERR_CANCELED, "the request was freed",
             dlcp_rt_now());
  }
  if (req->ina) {
    dlcp_rt_ina_cancel(c, req->ina, dlcp_rt_now());
  }
  pthread_mutex_unlock(&c->mu);
}

void dlcp_rt_coll_await(dlcp_comm *c, dlcp_request *req,
                        dlcp_tstamp deadline) {
  pthread_mutex_lock(&c->mu);
  while (!req->done && dlcp_rt_now() < deadline) {
    dlcp_tstamp t = deadline == DLCP_TSTAMP_NEVER
                        ? dlcp_rt_now() + 1000000000u
                        : deadline;
    struct timespec ts = {.tv_sec = (time_t)(t / 1000000000u),
                          .tv_nsec = (long)(t % 1000000000u)};
    pthread_cond_timedwait(&c->coll->req_cv, &c->mu, &ts);
  }
  pthread_mutex_unlock(&c->mu);
}

dlcp_rt_ina **dlcp_rt_coll_ina(dlcp_comm *c) {
  return &c->coll->ina;
}
