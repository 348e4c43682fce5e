/*
 * coll.c: the collective executor and the dlcp_coll entry points.
 *
 * Model: dlcp_coll_new checks the parameters, resolves the algorithm,
 * asks the algorithm's builder for this rank's plan (plan.h) and prepares
 * one small state record per step.  From then on the operation is driven
 * only by the driver: poll returns the next action, the on_* events
 * complete transfers, and each completion releases the steps that depend
 * on it (a counter per step, a compressed list of dependents).  Local
 * steps (reduce, copy, AVG's division) run inside poll, so the virtual
 * time a driver sees for them is whatever it charges for a poll.  When
 * every step is done an operation with a loss bound runs the agreement on
 * missing ranges (agree.c); then missing ranges are zeroed in the output
 * and DONE is returned once.  The straggler bypass (bypass.c) hooks into
 * step completions and rewrites a few pending steps at run time.
 *
 * Failure: the first failed transfer fails the operation, names its peer,
 * and sends every other rank an ABORT note naming the same peer, so ranks
 * that never talk to it directly stop too instead of waiting forever.
 */
#include "coll/coll.h"

#include <stdlib.h>
#include <string.h>

#include "coll/exec.h"
#include "coll/plan.h"
#include "coll/reduce.h"

/* ---- small helpers ------------------------------------------------------ */

static void *mem_calloc(const dlcp_mem *mem, size_t n, size_t size) {
  return mem->calloc(n ? n : 1, size ? size : 1, mem->user);
}

/* ---- the lazy copy of an out-of-place all-reduce's input ----------------- */

/* Granules of WORK copied from the input on first use.  Copying 64 MiB up
 * front cost a quarter of a 4-rank 64 MiB ring on loopback: cold memory
 * read and written once more.  Done lazily, most of it is never copied
 * (the ring sends its first chunk from the input, and the other chunks
 * are overwritten by receives), and what is, is copied just before the
 * reduce that reads it again. */
#define LAZY_GRANULE 65536u
#define SPLIT_REDUCE_BLOCK 65536u

static bool lazy_is_done(const dlcp_coll *op, uint64_t gr) {
  return (op->lazy_done[gr / 64] >> (gr % 64)) & 1u;
}

static void lazy_mark(dlcp_coll *op, uint64_t gr) {
  op->lazy_done[gr / 64] |= UINT64_C(1) << (gr % 64);
}

/* Before a step uses |buf|[off, off + bytes): if that is WORK, makes it
 * hold what it should.  Granules nobody has touched get the input's bytes,
 * except those a step about to overwrite them whole (|overwrite|) covers
 * entirely.  A granule is only ever copied while untouched, so no posted
 * receive can be in it. */
void coll_exec_work_ready(dlcp_coll *op, uint8_t buf, uint64_t off,
                          uint64_t bytes, bool overwrite) {
  if (!op->lazy_in || buf != COLL_BUF_WORK || bytes == 0) {
    return;
  }
  uint64_t end = off + bytes;
  for (uint64_t gr = off / LAZY_GRANULE; gr * LAZY_GRANULE < end; gr++) {
    if (lazy_is_done(op, gr)) {
      continue;
    }
    uint64_t a = gr * LAZY_GRANULE, b = a + LAZY_GRANULE;
    if (b > op->lazy_bytes) {
      b = op->lazy_bytes;
    }
    if (!(overwrite && a >= off && b <= end)) {
      memcpy(op->base[COLL_BUF_WORK] + a, op->lazy_in + a, (size_t)(b - a));
    }
    lazy_mark(op, gr);
  }
}

/* A send of WORK[off, off + bytes) reads the input directly while no
 * granule of it has been touched. */
static const unsigned char *send_source(dlcp_coll *op, const coll_step *st) {
  if (op->lazy_in && st->buf == COLL_BUF_WORK) {
    bool untouched = true;
    uint64_t end = st->off + st->bytes;
    for (uint64_t gr = st->off / LAZY_GRANULE;
         untouched && gr * LAZY_GRANULE < end; gr++) {
      untouched = !lazy_is_done(op, gr);
    }
    if (untouched) {
      return op->lazy_in + st->off;
    }
    coll_exec_work_ready(op, st->buf, st->off, st->bytes, false);
  }
  return op->base[st->buf] + st->off;
}

unsigned char *coll_exec_buf_ptr(const dlcp_coll *op, uint8_t buf,
                                 uint64_t off) {
  if (buf == COLL_BUF_EXTRA) {
    return op->extra[off];
  }
  return op->base[buf] + off;
}

int coll_exec_push(dlcp_coll *op, const dlcp_coll_action *act) {
  if (op->ccount == op->ccap) {
    size_t ncap = op->ccap ? op->ccap * 2 : 16;
    dlcp_coll_action *n =
        op->mem->malloc(ncap * sizeof(*n), op->mem->user);
    if (!n) {
      return DLCP_ERR_NOMEM;
    }
    for (size_t i = 0; i < op->ccount; i++) {
      n[i] = op->ctl[(op->chead + i) % op->ccap];
    }
    op->mem->free(op->ctl, op->mem->user);
    op->ctl = n;
    op->chead = 0;
    op->ccap = ncap;
  }
  op->ctl[(op->chead + op->ccount) % op->ccap] = *act;
  op->ccount++;
  return 0;
}

int coll_exec_note(dlcp_coll *op, uint32_t peer, uint64_t value) {
  dlcp_coll_action a = {.type = DLCP_COLL_ACT_NOTE, .peer = peer,
                        .value = value};
  return coll_exec_push(op, &a);
}

static void ready_push(dlcp_coll *op, uint32_t idx) {
  op->state[idx] = COLL_ST_READY;
  op->ready[(op->rhead + op->rcount) % op->plan.cap] = idx;
  op->rcount++;
}

void coll_exec_fail(dlcp_coll *op, int status, int32_t peer) {
  if (op->status != 0 || status == 0) {
    return;
  }
  op->status = status;
  op->failed_peer = peer;
  /* Tell everyone else, naming the same peer, so that ranks waiting on
   * somebody who waits on the failed peer do not hang.  Best effort: a
   * failed push only loses the courtesy. */
  if (op->phase < COLL_PHASE_FINISHED) {
    for (uint32_t r = 0; r < op->g.world; r++) {
      if (r != op->g.rank && (int32_t)r != peer) {
        (void)coll_exec_note(
            op, r,
            DLCP_COLL_NOTE(DLCP_COLL_NOTE_ABORT,
                           peer < 0 ? DLCP_COLL_NOTE_ARG_MASK
                                    : (uint64_t)peer));
      }
    }
    op->phase = COLL_PHASE_FINISHED;
  }
}

static void complete(dlcp_coll *op, uint32_t idx, dlcp_tstamp now) {
  op->state[idx] = COLL_ST_DONE;
  op->ndone++;
  op->progress_ns = now;
  if (idx < op->nstatic) {
    for (uint32_t e = op->out_begin[idx]; e < op->out_begin[idx + 1]; e++) {
      uint32_t d = op->out_list[e];
      if (op->state[d] == COLL_ST_PENDING && --op->ndeps[d] == 0) {
        ready_push(op, d);
      } else if (op->fuse) {
        coll_fuse_on_release(op, d);
      }
    }
  }
  uint32_t d = op->dyn_dependent[idx];
  if (d != COLL_NO_STEP && op->state[d] == COLL_ST_PENDING &&
      --op->ndeps[d] == 0) {
    ready_push(op, d);
  }
  if (op->bypass) {
    coll_bypass_on_step_done(op, idx, now);
  }
}

void coll_exec_force_ready(dlcp_coll *op, uint32_t idx) {
  if (op->state[idx] == COLL_ST_PENDING) {
    op->ndeps[idx] = 0;
    ready_push(op, idx);
  }
}

int coll_exec_retarget(dlcp_coll *op, uint32_t idx, uint32_t peer,
                       uint32_t tag, dlcp_tstamp now) {
  (void)now;
  coll_step *st = &op->plan.steps[idx];
  if (op->state[idx] == COLL_ST_DONE ||
      (op->state[idx] == COLL_ST_ACTIVE && st->kind != COLL_STEP_RECV)) {
    return DLCP_ERR_INTERNAL;
  }
  bool was_active = op->state[idx] == COLL_ST_ACTIVE;
  uint32_t old_peer = st->peer, old_tag = st->tag;
  coll_table_remove(op, idx);
  st->peer = peer;
  st->tag = tag;
  int rv = coll_table_insert(op, idx);
  if (rv != 0) {
    return rv;
  }
  if (was_active) {
    dlcp_coll_action a = {.type = DLCP_COLL_ACT_CANCEL_RECV,
                          .peer = old_peer, .tag = old_tag};
    rv = coll_exec_push(op, &a);
    if (rv != 0) {
      return rv;
    }
    ready_push(op, idx); /* re-issued under the new key */
  }
  return 0;
}

int coll_exec_cancel_recv(dlcp_coll *op, uint32_t idx, dlcp_tstamp now) {
  coll_step *st = &op->plan.steps[idx];
  if (op->state[idx] == COLL_ST_DONE) {
    return DLCP_ERR_INTERNAL;
  }
  if (op->state[idx] == COLL_ST_ACTIVE) {
    dlcp_coll_action a = {.type = DLCP_COLL_ACT_CANCEL_RECV,
                          .peer = st->peer, .tag = st->tag};
    int rv = coll_exec_push(op, &a);
    if (rv != 0) {
      return rv;
    }
  }
  coll_table_remove(op, idx);
  op->flags[idx] |= COLL_SF_CANCELED;
  /* A READY step still sits in the ready queue: the DONE state makes
   * poll skip it. */
  complete(op, idx, now);
  return 0;
}

uint32_t coll_exec_add_step(dlcp_coll *op, const coll_step *st,
                            uint32_t dependent) {
  if (op->plan.nsteps >= op->plan.cap ||
      (dependent != COLL_NO_STEP &&
       op->state[dependent] != COLL_ST_PENDING)) {
    return COLL_NO_STEP;
  }
  uint32_t idx = op->plan.nsteps++;
  op->plan.steps[idx] = *st;
  op->state[idx] = COLL_ST_PENDING;
  op->flags[idx] = 0;
  op->ndeps[idx] = 0;
  op->dyn_dependent[idx] = dependent;
  if (dependent != COLL_NO_STEP) {
    op->ndeps[dependent]++;
  }
  if (coll_table_insert(op, idx) != 0) {
    op->plan.nsteps--;
    if (dependent != COLL_NO_STEP) {
      op->ndeps[dependent]--;
    }
    return COLL_NO_STEP;
  }
  ready_push(op, idx);
  return idx;
}

int64_t coll_exec_alloc_extra(dlcp_coll *op, uint64_t bytes) {
  if (op->nextra == op->extracap) {
    uint32_t ncap = op->extracap ? op->extracap * 2 : 8;
    unsigned char **n = op->mem->realloc(op->extra, ncap * sizeof(*n),
                                         op->mem->user);
    if (!n) {
      return -1;
    }
    op->extra = n;
    op->extracap = ncap;
  }
  unsigned char *b = op->mem->malloc(bytes ? (size_t)bytes : 1,
                                     op->mem->user);
  if (!b) {
    return -1;
  }
  op->extra[op->nextra] = b;
  return (int64_t)op->nextra++;
}

int coll_exec_taint(dlcp_coll *op, uint64_t elem, uint64_t n) {
  if (n == 0) {
    return 0;
  }
  if (op->ntaint == op->taintcap) {
    size_t ncap = op->taintcap ? op->taintcap * 2 : 16;
    dlcp_coll_range *r = op->mem->realloc(op->taint, ncap * sizeof(*r),
                                          op->mem->user);
    if (!r) {
      return DLCP_ERR_NOMEM;
    }
    op->taint = r;
    op->taintcap = ncap;
  }
  op->taint[op->ntaint].offset = elem;
  op->taint[op->ntaint].len = n;
  op->ntaint++;
  /* Keep the list short when a lossy run reports many small holes. */
  if (op->ntaint >= 64 && (op->ntaint & (op->ntaint - 1)) == 0) {
    op->ntaint = coll_ranges_normalize(op->taint, op->ntaint);
  }
  return 0;
}

/* Orders ranges by offset, then length (qsort is pure libc: allowed in the
 * core). */
static int range_cmp(const void *a, const void *b) {
  const dlcp_coll_range *x = a, *y = b;
  if (x->offset != y->offset) {
    return x->offset < y->offset ? -1 : 1;
  }
  return x->len < y->len ? -1 : (x->len > y->len ? 1 : 0);
}

size_t coll_ranges_normalize(dlcp_coll_range *r, size_t n) {
  if (n < 2) {
    return n;
  }
  qsort(r, n, sizeof(*r), range_cmp);
  size_t w = 0;
  for (size_t i = 1; i < n; i++) {
    uint64_t end = r[w].offset + r[w].len;
    if (r[i].offset <= end) { /* overlapping or touching: merge */
      uint64_t iend = r[i].offset + r[i].len;
      if (iend > end) {
        r[w].len = iend - r[w].offset;
      }
    } else {
      r[++w] = r[i];
    }
  }
  return w + 1;
}

/* ---- creation ----------------------------------------------------------- */

static int setup_buffers(dlcp_coll *op) {
  const dlcp_coll_params *p = &op->p;
  const coll_geom *g = &op->g;
  uint64_t bytes = g->count * g->esz;
  if (g->count == 0 || g->kind == DLCP_COLL_BARRIER) {
    return 0;
  }
  if (!p->recvbuf) {
    return DLCP_ERR_INVALID_ARGUMENT;
  }
  bool in_place = !p->sendbuf || p->sendbuf == p->recvbuf;
  const unsigned char *in = p->sendbuf, *out = p->recvbuf;
  bool overlap = !in_place && in < out + bytes && out < in + bytes;
  switch (g->kind) {
  case DLCP_COLL_ALLREDUCE:
  case DLCP_COLL_REDUCE:
    op->base[COLL_BUF_WORK] = p->recvbuf;
    if (!in_place && !overlap) {
      uint64_t granules = (bytes + LAZY_GRANULE - 1) / LAZY_GRANULE;
      op->lazy_done = mem_calloc(op->mem, (size_t)((granules + 63) / 64),
                                 sizeof(uint64_t));
      if (!op->lazy_done) {
        return DLCP_ERR_NOMEM;
      }
      op->lazy_in = in;
      op->lazy_bytes = bytes;
    } else if (!in_place) {
      memmove(p->recvbuf, p->sendbuf, (size_t)bytes);
    }
    break;
  case DLCP_COLL_REDUCE_SCATTER:
    if (in_place) {
      op->base[COLL_BUF_WORK] = p->recvbuf;
    } else {
      /* The input must survive, and recvbuf holds only the shard: work in
       * a private copy.  (A scratch-only variant would save this copy.) */
      op->own_work = op->mem->malloc((size_t)bytes, op->mem->user);
      if (!op->own_work) {
        return DLCP_ERR_NOMEM;
      }
      memcpy(op->own_work, p->sendbuf, (size_t)bytes);
      op->base[COLL_BUF_WORK] = op->own_work;
      op->base[COLL_BUF_OUT] = p->recvbuf;
    }
    break;
  case DLCP_COLL_ALLGATHER:
    op->base[COLL_BUF_WORK] = p->recvbuf;
    if (!in_place) {
      uint64_t off, len;
      dlcp_coll_shard(g->count, g->world, g->rank, &off, &len);
      memmove((unsigned char *)p->recvbuf + off * g->esz, p->sendbuf,
              (size_t)(len * g->esz));
    }
    break;
  case DLCP_COLL_BROADCAST:
    op->base[COLL_BUF_WORK] = p->recvbuf;
    if (!in_place && g->rank == g->root) {
      memmove(p->recvbuf, p->sendbuf, (size_t)bytes);
    }
    break;
  case DLCP_COLL_BARRIER:
    break;
  }
  return 0;
}

/* Whether every SEND of the plan is one half of an exchange: a RECV from
 * the same peer with the same tag.  Stages are used only in pairwise
 * exchanges (this, and one peer per stage: halving-doubling, recursive
 * doubling), where a stage is the same on every rank, so that "earlier"
 * means the same to the ranks whose packets meet at a queue.  Elsewhere
 * stages stay 0, as measured:
 *   - a ring sends to its successor only, in order anyway, and mixed
 *     priorities on one connection put its later stages' packets in a
 *     lower switch queue behind its own earlier ones, where the wait reads
 *     as congestion to the connection's RTT-based control (2-4 % slower
 *     at 1 % loss);
 *   - in RAT's trees a rank's stage counts its own receives, not the
 *     tree's (RAT 15-25 % slower over DCTCP at 4:1 to 12:1
 *     oversubscription, docs/results.md);
 *   - the sharded parameter server exchanges with every peer in each
 *     stage, and one shard's pull is as urgent as another's push (PS up
 *     to 17 % slower, same table).
 * Runs after the transfer table is built. */
static bool exchanges_only(const dlcp_coll *op) {
  const coll_plan *pl = &op->plan;
  for (uint32_t i = 0; i < pl->nsteps; i++) {
    const coll_step *st = &pl->steps[i];
    if (st->kind == COLL_STEP_SEND &&
        coll_table_find(op, DIR_RECV, st->peer, st->tag) == COLL_NO_STEP) {
      return false;
    }
  }
  return true;
}

/* More stages than a butterfly has (2 log2 of the largest world, plus a
 * fold's two). */
#define MAX_BUTTERFLY_STAGES 64u

/* Whether all SENDs of each stage go to one peer (see exchanges_only). */
static bool one_peer_per_stage(const dlcp_coll *op) {
  const coll_plan *pl = &op->plan;
  uint32_t stage_peer[MAX_BUTTERFLY_STAGES];
  for (uint32_t k = 0; k < MAX_BUTTERFLY_STAGES; k++) {
    stage_peer[k] = UINT32_MAX;
  }
  for (uint32_t i = 0; i < pl->nsteps; i++) {
    const coll_step *st = &pl->steps[i];
    if (st->kind != COLL_STEP_SEND) {
      continue;
    }
    uint32_t k = op->stage[i];
    if (k >= MAX_BUTTERFLY_STAGES) {
      return false;
    }
    if (stage_peer[k] != UINT32_MAX && stage_peer[k] != st->peer) {
      return false;
    }
    stage_peer[k] = st->peer;
  }
  return true;
}

/* Numbers each static step's stage: the exchanges before it, counted as
 * the receives on its chain of dependencies, where a RECV belongs to the
 * stage of the SEND it is exchanged for (same peer and tag: a receive is
 * posted early and depends on nothing here, but the peer sends it only
 * at that stage).  0 is the first exchange.  A driver gives earlier
 * stages precedence: a peer that runs ahead sends data of a stage this
 * rank cannot use yet, and it must not slow the data this rank waits for
 * (issue 14: halving-doubling ranks out of step shared a downlink
 * between steps).  One pass of Kahn's order over the dependents lists,
 * each SEND also leading to its exchange's RECV (without adding a
 * stage).  Runs after the transfer table is built. */
static int plan_stages(dlcp_coll *op) {
  const coll_plan *pl = &op->plan;
  const dlcp_mem *mem = op->mem;
  uint32_t n = pl->nsteps;
  if (!exchanges_only(op)) {
    return 0;
  }
  /* left: dependencies not yet ordered; order: the queue; partner: a
   * SEND's RECV. */
  uint32_t *left = mem_calloc(mem, 3 * ((size_t)n + 1), sizeof(uint32_t));
  if (!left) {
    return DLCP_ERR_NOMEM;
  }
  uint32_t *order = left + n + 1, *partner = order + n + 1;
  memcpy(left, op->ndeps, (size_t)n * sizeof(uint32_t));
  for (uint32_t i = 0; i < n; i++) {
    const coll_step *st = &pl->steps[i];
    partner[i] = st->kind == COLL_STEP_SEND
                     ? coll_table_find(op, DIR_RECV, st->peer, st->tag)
                     : COLL_NO_STEP;
    if (partner[i] != COLL_NO_STEP) {
      left[partner[i]]++;
    }
  }
  uint32_t head = 0, tail = 0;
  for (uint32_t i = 0; i < n; i++) {
    if (left[i] == 0) {
      order[tail++] = i;
    }
  }
  while (head < tail) {
    uint32_t i = order[head++];
    uint32_t s = op->stage[i] + (pl->steps[i].kind == COLL_STEP_RECV);
    for (uint32_t k = op->out_begin[i]; k < op->out_begin[i + 1]; k++) {
      uint32_t d = op->out_list[k];
      op->stage[d] = op->stage[d] > s ? op->stage[d] : s;
      if (--left[d] == 0) {
        order[tail++] = d;
      }
    }
    uint32_t r = partner[i];
    if (r != COLL_NO_STEP) {
      op->stage[r] = op->stage[r] > op->stage[i] ? op->stage[r] : op->stage[i];
      if (--left[r] == 0) {
        order[tail++] = r;
      }
    }
  }
  mem->free(left, mem->user);
  if (!one_peer_per_stage(op)) {
    memset(op->stage, 0, (size_t)n * sizeof(uint32_t));
  }
  return 0;
}

/* Builds the dependents lists, the counters and the transfer table, and
 * queues the steps that depend on nothing. */
static int setup_exec(dlcp_coll *op) {
  coll_plan *pl = &op->plan;
  const dlcp_mem *mem = op->mem;
  uint32_t cap = pl->cap ? pl->cap : 1;
  op->nstatic = pl->nsteps;
  op->state = mem_calloc(mem, cap, 1);
  op->flags = mem_calloc(mem, cap, 1);
  op->ndeps = mem_calloc(mem, cap, sizeof(uint32_t));
  op->stage = mem_calloc(mem, cap, sizeof(uint32_t));
  op->dyn_dependent = mem_calloc(mem, cap, sizeof(uint32_t));
  op->ready = mem_calloc(mem, cap, sizeof(uint32_t));
  op->out_begin = mem_calloc(mem, (size_t)pl->nsteps + 1, sizeof(uint32_t));
  op->out_list = mem_calloc(mem, pl->nedges, sizeof(uint32_t));
  uint32_t hcap = 16;
  while (hcap < 2u * cap) {
    hcap *= 2;
  }
  op->hslots = mem->malloc(hcap * sizeof(uint32_t), mem->user);
  if (!op->state || !op->flags || !op->ndeps || !op->stage ||
      !op->dyn_dependent || !op->ready || !op->out_begin || !op->out_list ||
      !op->hslots) {
    return DLCP_ERR_NOMEM;
  }
  op->hmask = hcap - 1;
  memset(op->hslots, 0xff, hcap * sizeof(uint32_t));
  for (uint32_t i = 0; i < cap; i++) {
    op->dyn_dependent[i] = COLL_NO_STEP;
  }
  /* Dependents as a compressed row list: count, prefix-sum, fill. */
  for (uint32_t e = 0; e < pl->nedges; e++) {
    op->out_begin[pl->efrom[e] + 1]++;
    op->ndeps[pl->eto[e]]++;
  }
  for (uint32_t i = 0; i < pl->nsteps; i++) {
    op->out_begin[i + 1] += op->out_begin[i];
  }
  uint32_t *fill = mem_calloc(mem, (size_t)pl->nsteps + 1, sizeof(uint32_t));
  if (!fill) {
    return DLCP_ERR_NOMEM;
  }
  memcpy(fill, op->out_begin, ((size_t)pl->nsteps + 1) * sizeof(uint32_t));
  for (uint32_t e = 0; e < pl->nedges; e++) {
    op->out_list[fill[pl->efrom[e]]++] = pl->eto[e];
  }
  mem->free(fill, mem->user);
  for (uint32_t i = 0; i < pl->nsteps; i++) {
    int rv = coll_table_insert(op, i);
    if (rv != 0) {
      return rv;
    }
  }
  int rv = plan_stages(op);
  if (rv != 0) {
    return rv;
  }
  if (op->p.reduce_on_arrival && op->g.algo != DLCP_ALGO_RING_BYPASS &&
      (rv = coll_fuse_setup(op)) != 0) {
    return rv;
  }
  for (uint32_t i = 0; i < pl->nsteps; i++) {
    if (op->ndeps[i] == 0) {
      ready_push(op, i);
    }
  }
  return 0;
}

/* Puts the executor back at the plan's start: no step begun, every
 * dependency still to come, the steps that depend on nothing ready.  The
 * dependents lists, the stages, the fused receives and the transfer table
 * are the plan's and stay (only the straggler bypass retargets or cancels
 * a step, and its operations are never reused). */
static void reset_exec(dlcp_coll *op) {
  const coll_plan *pl = &op->plan;
  uint32_t cap = pl->cap ? pl->cap : 1;
  memset(op->state, 0, cap);
  memset(op->flags, 0, cap);
  memset(op->ndeps, 0, (size_t)cap * sizeof(uint32_t));
  for (uint32_t i = 0; i < cap; i++) {
    op->dyn_dependent[i] = COLL_NO_STEP;
  }
  for (uint32_t e = 0; e < pl->nedges; e++) {
    op->ndeps[pl->eto[e]]++;
  }
  coll_fuse_reset(op);
  op->ndone = 0;
  op->rhead = 0;
  op->rcount = 0;
  for (uint32_t i = 0; i < pl->nsteps; i++) {
    if (op->ndeps[i] == 0) {
      ready_push(op, i);
    }
  }
}

/* The loss bound |p| runs with: none for an all-reduce that the driver
 * delivers whole (dlcp_coll_params.exact_bytes). */
static double loss_bound_of(const dlcp_coll_params *p) {
  size_t esz = dlcp_dtype_size(p->dtype);
  if (p->kind == DLCP_COLL_ALLREDUCE && esz > 0 &&
      p->count <= p->exact_bytes / esz) {
    return 0.0;
  }
  return p->loss_bound;
}

/* The start of an operation's run for |p| at |now|, for a new operation
 * and a reused one alike: its parameters (the bypass's alpha defaulted,
 * the loss bound as it applies), no status or failed peer yet, no note
 * awaited. */
static void begin(dlcp_coll *op, const dlcp_coll_params *p, dlcp_tstamp now) {
  op->p = *p;
  op->p.loss_bound = loss_bound_of(p);
  if (op->p.bypass_alpha == 0.0) {
    op->p.bypass_alpha = DLCP_COLL_DEFAULT_BYPASS_ALPHA;
  }
  op->status = 0;
  op->failed_peer = -1;
  op->start_ns = now;
  op->progress_ns = now;
  op->end_ns = 0;
  op->awaited_note = COLL_NO_STEP;
  op->phase = COLL_PHASE_RUN;
}

/* Whether |op|'s plan is the one |p| (whose geometry is |g|) needs, and
 * nothing in it changes as it runs or depends on what |p| borrows. */
static bool plan_fits(const dlcp_coll *op, const dlcp_coll_params *p,
                      const coll_geom *g) {
  const coll_geom *o = &op->g;
  return g->kind == o->kind && g->algo == o->algo && g->rank == o->rank &&
         g->world == o->world && g->root == o->root && g->count == o->count &&
         g->esz == o->esz && g->dtype == o->dtype && g->op == o->op &&
         g->chunk_bytes == o->chunk_bytes && g->levels == o->levels &&
         g->recv_ahead == o->recv_ahead && g->eager == o->eager &&
         g->rs_copy_out == o->rs_copy_out &&
         p->reduce_on_arrival == op->p.reduce_on_arrival &&
         g->algo != DLCP_ALGO_RING_BYPASS && g->algo != DLCP_ALGO_RAT &&
         loss_bound_of(p) == 0.0 && op->p.loss_bound == 0.0 && !p->members &&
         !op->grouped;
}

int dlcp_coll_reuse(dlcp_coll *op, const dlcp_coll_params *p,
                    dlcp_tstamp now) {
  coll_geom g;
  /* Another kind or size cannot fit: said before the geometry is derived,
   * as a runtime that keeps a barrier and an all-reduce tries both. */
  if (op->phase != COLL_PHASE_REPORTED || op->status != 0 ||
      p->kind != op->g.kind ||
      (p->kind != DLCP_COLL_BARRIER && p->count != op->g.count) ||
      coll_params_to_geom(p, &g) != 0 || !plan_fits(op, p, &g) ||
      (g.count > 0 && g.kind != DLCP_COLL_BARRIER && !p->recvbuf)) {
    return DLCP_ERR_INVALID_ARGUMENT;
  }
  const dlcp_mem *mem = op->mem;
  /* The last operation's buffers and results. */
  mem->free(op->own_work, mem->user);
  op->own_work = NULL;
  mem->free(op->lazy_done, mem->user);
  op->lazy_done = NULL;
  op->lazy_in = NULL;
  op->lazy_bytes = 0;
  op->base[COLL_BUF_WORK] = NULL;
  op->base[COLL_BUF_OUT] = NULL;
  mem->free(op->missing, mem->user);
  op->missing = NULL;
  op->nmissing = 0;
  op->missing_elems = 0;
  op->ntaint = 0;
  op->chead = 0;
  op->ccount = 0;
  op->prefix_step = 0;
  op->prefix_bytes = 0;
  coll_agree_free(op);
  begin(op, p, now);
  op->p.topo = NULL;
  op->p.members = NULL;
  op->xfer_loss = 0.0;
  coll_agree_init(op);
  int rv = setup_buffers(op);
  if (rv == 0) {
    reset_exec(op);
  }
  return rv;
}

int dlcp_coll_new(dlcp_coll **pop, const dlcp_coll_params *p,
                  const dlcp_mem *mem, dlcp_tstamp now) {
  *pop = NULL;
  if (!mem) {
    mem = dlcp_mem_default();
  }
  dlcp_coll *op = mem->calloc(1, sizeof(*op), mem->user);
  if (!op) {
    return DLCP_ERR_NOMEM;
  }
  op->mem = mem;
  begin(op, p, now);
  coll_plan_init(&op->plan, mem);
  int rv = coll_params_to_geom(p, &op->g);
  coll_agree_init(op);
  if (rv != 0) {
    goto fail;
  }
  /* The caller's loss bound is end to end: at most p of the output may be
   * missing.  An element's holes anywhere make it missing everywhere, so
   * the missing set is the union of every transfer's holes, and its size
   * is at most the sum of them.  Every all-reduce here moves 2(n - 1)
   * vectors' worth of elements in total over all ranks (ring, PS, RAT and
   * halving-doubling with its fold alike; reduce-scatter, all-gather and
   * broadcast n - 1), so giving each transfer p / that factor keeps the
   * union within p. */
  if (op->p.loss_bound > 0.0 && op->g.world > 1) {
    double vectors = op->g.kind == DLCP_COLL_ALLREDUCE
                         ? 2.0 * (op->g.world - 1)
                         : (double)(op->g.world - 1);
    if (op->g.algo == DLCP_ALGO_DIRECT) {
      /* Every rank receives every other's whole vector. */
      vectors = (double)op->g.world * (op->g.world - 1);
    } else if (op->g.algo == DLCP_ALGO_RECURSIVE_DOUBLING) {
      /* p2 whole vectors per exchange step, and the fold and unfold. */
      uint32_t steps;
      uint32_t p2 = coll_fold_p2(op->g.world, &steps);
      vectors = (double)steps * p2 + 2.0 * (op->g.world - p2);
    }
    op->xfer_loss = op->p.loss_bound / vectors;
  }
  rv = coll_plan_build(&op->plan, &op->g);
  /* The labels are borrowed only for this call: RAT has built its trees
   * from them and AUTO has made its choice. */
  op->p.topo = NULL;
  op->g.topo = NULL;
  if (rv != 0) {
    goto fail;
  }
  if (op->p.members) {
    rv = coll_plan_map_peers(&op->plan, op->p.members, op->g.world);
    op->p.members = NULL;
    op->grouped = true;
    if (rv != 0) {
      goto fail;
    }
  }
  if (op->g.algo == DLCP_ALGO_RING_BYPASS && op->plan.ring.recv) {
    /* Room for the one extra receive a bypassed slot may add. */
    uint32_t extra = op->plan.ring.steps * op->plan.ring.nseg;
    uint32_t ncap = op->plan.nsteps + extra;
    if (ncap > op->plan.cap) {
      coll_step *n = mem->realloc(op->plan.steps, ncap * sizeof(*n),
                                  mem->user);
      if (!n) {
        rv = DLCP_ERR_NOMEM;
        goto fail;
      }
      op->plan.steps = n;
      op->plan.cap = ncap;
    }
    rv = coll_bypass_new(op);
    if (rv != 0) {
      goto fail;
    }
  }
  if (op->plan.scratch_bytes) {
    op->scratch = mem->malloc((size_t)op->plan.scratch_bytes, mem->user);
    if (!op->scratch) {
      rv = DLCP_ERR_NOMEM;
      goto fail;
    }
    op->base[COLL_BUF_SCRATCH] = op->scratch;
  }
  rv = setup_buffers(op);
  if (rv != 0) {
    goto fail;
  }
  rv = setup_exec(op);
  if (rv != 0) {
    goto fail;
  }
  *pop = op;
  return 0;
fail:
  dlcp_coll_del(op);
  return rv;
}

void dlcp_coll_del(dlcp_coll *op) {
  if (!op) {
    return;
  }
  const dlcp_mem *mem = op->mem;
  coll_bypass_del(op);
  coll_agree_free(op);
  for (uint32_t i = 0; i < op->nextra; i++) {
    mem->free(op->extra[i], mem->user);
  }
  mem->free(op->extra, mem->user);
  mem->free(op->own_work, mem->user);
  mem->free(op->lazy_done, mem->user);
  mem->free(op->scratch, mem->user);
  mem->free(op->state, mem->user);
  mem->free(op->flags, mem->user);
  mem->free(op->ndeps, mem->user);
  mem->free(op->stage, mem->user);
  mem->free(op->dyn_dependent, mem->user);
  coll_fuse_free(op);
  mem->free(op->ready, mem->user);
  mem->free(op->out_begin, mem->user);
  mem->free(op->out_list, mem->user);
  mem->free(op->hslots, mem->user);
  mem->free(op->ctl, mem->user);
  mem->free(op->taint, mem->user);
  mem->free(op->missing, mem->user);
  coll_plan_free(&op->plan);
  mem->free(op, mem->user);
}

/* ---- running ------------------------------------------------------------ */

/* Zeroes the agreed missing ranges in the output and freezes the result. */
void coll_exec_finalize(dlcp_coll *op, dlcp_tstamp now) {
  const coll_geom *g = &op->g;
  uint64_t lo = 0, hi = g->count;
  unsigned char *out = op->base[COLL_BUF_WORK];
  uint64_t out_first = 0; /* the element at out[0] */
  if (g->kind == DLCP_COLL_REDUCE_SCATTER) {
    /* Only this rank's shard is output here. */
    uint64_t len;
    dlcp_coll_shard(g->count, g->world, g->rank, &lo, &len);
    hi = lo + len;
    if (g->rs_copy_out) {
      out = op->base[COLL_BUF_OUT];
      out_first = lo;
    }
  }
  op->missing_elems = 0;
  for (size_t i = 0; i < op->nmissing; i++) {
    uint64_t a = op->missing[i].offset;
    uint64_t b = a + op->missing[i].len;
    op->missing_elems += op->missing[i].len;
    if (a < lo) {
      a = lo;
    }
    if (b > hi) {
      b = hi;
    }
    if (a < b && out) {
      memset(out + (a - out_first) * g->esz, 0, (size_t)((b - a) * g->esz));
    }
  }
  op->end_ns = now;
  op->phase = COLL_PHASE_FINISHED;
}

/* The plan is done: agree on missing ranges if losses were allowed. */
static int plan_done(dlcp_coll *op, dlcp_tstamp now) {
  /* What no step touched is still the input's. */
  coll_exec_work_ready(op, COLL_BUF_WORK, 0, op->lazy_bytes, false);
  if (op->p.loss_bound > 0.0 && op->g.world > 1 && op->g.count > 0) {
    op->phase = COLL_PHASE_AGREE;
    return coll_agree_start(op, now);
  }
  op->ntaint = coll_ranges_normalize(op->taint, op->ntaint);
  if (op->ntaint) {
    op->missing = op->mem->malloc(op->ntaint * sizeof(dlcp_coll_range),
                                  op->mem->user);
    if (!op->missing) {
      return DLCP_ERR_NOMEM;
    }
    memcpy(op->missing, op->taint, op->ntaint * sizeof(dlcp_coll_range));
    op->nmissing = op->ntaint;
  }
  coll_exec_finalize(op, now);
  return 0;
}

/* Runs one ready step.  Returns 1 if it produced an action in |act|. */
static int run_step(dlcp_coll *op, uint32_t idx, dlcp_coll_action *act,
                    dlcp_tstamp now) {
  coll_step *st = &op->plan.steps[idx];
  const coll_geom *g = &op->g;
  if (st->bytes == 0 && (st->kind == COLL_STEP_REDUCE ||
                         st->kind == COLL_STEP_COPY ||
                         st->kind == COLL_STEP_FINISH)) {
    complete(op, idx, now); /* empty: the buffers may not even exist */
    return 0;
  }
  switch ((coll_step_kind)st->kind) {
  case COLL_STEP_NOP:
    complete(op, idx, now);
    return 0;
  case COLL_STEP_SEND:
  case COLL_STEP_RECV:
    op->state[idx] = COLL_ST_ACTIVE;
    memset(act, 0, sizeof(*act));
    act->peer = st->peer;
    act->tag = st->tag;
    act->bytes = st->bytes;
    act->loss_bound = op->xfer_loss;
    act->stage = op->stage[idx];
    if (st->kind == COLL_STEP_SEND) {
      act->type = DLCP_COLL_ACT_SEND;
      act->send_buf = st->buf == COLL_BUF_EXTRA
                          ? coll_exec_buf_ptr(op, st->buf, st->off)
                          : send_source(op, st);
    } else {
      act->type = DLCP_COLL_ACT_RECV;
      coll_exec_work_ready(op, st->buf, st->off, st->bytes, true);
      act->recv_buf = coll_exec_buf_ptr(op, st->buf, st->off);
      coll_fuse_recv(op, idx, act);
    }
    return 1;
  case COLL_STEP_REDUCE:
    if (!(op->flags[idx] & COLL_SF_SKIP) && !coll_fuse_reduce(op, idx)) {
      coll_exec_work_ready(op, st->src_buf, st->src_off, st->bytes, false);
      /* Piece by piece along the lazy copy's granules, so a granule the
       * copy brings in is reduced while it is still in cache. */
      uint64_t piece = op->lazy_in && st->buf == COLL_BUF_WORK
                           ? LAZY_GRANULE - st->off % LAZY_GRANULE
                           : st->bytes;
      /* A bypassed slot reduces two inputs: a block of the destination
       * takes both while it is in cache, one pass over memory instead of
       * two (the seed counts D's double reduce as one step). */
      uint64_t block = st->value ? SPLIT_REDUCE_BLOCK : UINT64_MAX;
      for (uint64_t done = 0; done < st->bytes;) {
        /* Offsets and granules are whole elements: so are the pieces. */
        uint64_t len = st->bytes - done < piece ? st->bytes - done : piece;
        len = len > block ? block - block % g->esz : len;
        size_t n = (size_t)(len / g->esz);
        unsigned char *dst = coll_exec_buf_ptr(op, st->buf, st->off) + done;
        coll_exec_work_ready(op, st->buf, st->off + done, len, false);
        (void)dlcp_reduce_into(
            dst, coll_exec_buf_ptr(op, st->src_buf, st->src_off) + done, n,
            g->dtype, g->op);
        if (st->value) {
          const coll_step *x = &op->plan.steps[st->value - 1];
          (void)dlcp_reduce_into(dst,
                                 coll_exec_buf_ptr(op, x->buf, x->off) + done,
                                 n, g->dtype, g->op);
        }
        done += len;
        piece = piece > len ? piece - len : LAZY_GRANULE;
      }
    }
    complete(op, idx, now);
    return 0;
  case COLL_STEP_COPY:
    coll_exec_work_ready(op, st->src_buf, st->src_off, st->bytes, false);
    coll_exec_work_ready(op, st->buf, st->off, st->bytes, true);
    memmove(coll_exec_buf_ptr(op, st->buf, st->off),
            coll_exec_buf_ptr(op, st->src_buf, st->src_off), (size_t)st->bytes);
    complete(op, idx, now);
    return 0;
  case COLL_STEP_FINISH:
    coll_exec_work_ready(op, st->buf, st->off, st->bytes, false);
    (void)dlcp_reduce_finish(coll_exec_buf_ptr(op, st->buf, st->off),
                             (size_t)(st->bytes / g->esz), g->dtype, g->op,
                             g->world);
    complete(op, idx, now);
    return 0;
  case COLL_STEP_NOTE:
    memset(act, 0, sizeof(*act));
    act->type = DLCP_COLL_ACT_NOTE;
    act->peer = st->peer;
    act->value = st->value;
    complete(op, idx, now);
    return 1;
  case COLL_STEP_WAIT_NOTE:
    if (op->flags[idx] & COLL_SF_ARRIVED) {
      complete(op, idx, now);
    } else {
      op->state[idx] = COLL_ST_ACTIVE;
      op->awaited_note = idx;
    }
    return 0;
  }
  return 0;
}

int dlcp_coll_poll(dlcp_coll *op, dlcp_coll_action *act, dlcp_tstamp now) {
  memset(act, 0, sizeof(*act));
  act->type = DLCP_COLL_ACT_NONE;
  if (op->phase == COLL_PHASE_REPORTED) {
    return op->status;
  }
  if (op->phase == COLL_PHASE_RUN && op->bypass) {
    int rv = coll_bypass_on_timer(op, now);
    if (rv != 0) {
      coll_exec_fail(op, rv, -1);
    }
  }
  for (;;) {
    if (op->ccount > 0) {
      *act = op->ctl[op->chead];
      op->chead = (op->chead + 1) % op->ccap;
      op->ccount--;
      return 0;
    }
    if (op->phase == COLL_PHASE_FINISHED) {
      act->type = DLCP_COLL_ACT_DONE;
      op->phase = COLL_PHASE_REPORTED;
      if (op->end_ns == 0) {
        op->end_ns = now;
      }
      return op->status;
    }
    if (op->phase != COLL_PHASE_RUN) {
      return 0; /* agreement: waiting for events */
    }
    if (op->rcount > 0) {
      uint32_t idx = op->ready[op->rhead];
      op->rhead = (op->rhead + 1) % op->plan.cap;
      op->rcount--;
      if (op->state[idx] != COLL_ST_READY) {
        continue; /* canceled while queued */
      }
      if (run_step(op, idx, act, now)) {
        return 0;
      }
      continue;
    }
    if (op->ndone == op->plan.nsteps) {
      int rv = plan_done(op, now);
      if (rv != 0) {
        coll_exec_fail(op, rv, -1);
      }
      continue;
    }
    return 0;
  }
}

int dlcp_coll_on_sent(dlcp_coll *op, uint32_t peer, uint32_t tag, int status,
                      dlcp_tstamp now) {
  op->progress_ns = now;
  if ((tag >> DLCP_COLL_TAG_CLASS_SHIFT) == DLCP_COLL_TAG_AGREE) {
    return coll_agree_on_sent(op, peer, tag, status, now);
  }
  uint32_t idx = coll_table_find(op, DIR_SEND, peer, tag);
  if (idx == COLL_NO_STEP || op->state[idx] != COLL_ST_ACTIVE) {
    return DLCP_ERR_UNKNOWN_TRANSFER;
  }
  if (status < 0) {
    coll_exec_fail(op, status, (int32_t)peer);
    return 0;
  }
  complete(op, idx, now);
  return 0;
}

int dlcp_coll_on_received(dlcp_coll *op, uint32_t peer, uint32_t tag,
                          int status, const dlcp_coll_range *missing,
                          size_t nmissing, dlcp_tstamp now) {
  op->progress_ns = now;
  if ((tag >> DLCP_COLL_TAG_CLASS_SHIFT) == DLCP_COLL_TAG_AGREE) {
    return coll_agree_on_received(op, peer, tag, status, nmissing, now);
  }
  uint32_t idx = coll_table_find(op, DIR_RECV, peer, tag);
  if (idx == COLL_NO_STEP || op->state[idx] != COLL_ST_ACTIVE) {
    return DLCP_ERR_UNKNOWN_TRANSFER;
  }
  if (status < 0) {
    coll_exec_fail(op, status, (int32_t)peer);
    return 0;
  }
  const coll_step *st = &op->plan.steps[idx];
  if (nmissing > 0 && op->p.loss_bound <= 0.0) {
    coll_exec_fail(op, DLCP_ERR_SIZE_MISMATCH, (int32_t)peer);
    return 0;
  }
  for (size_t i = 0; i < nmissing; i++) {
    const dlcp_coll_range *m = &missing[i];
    if (m->offset > st->bytes || m->len > st->bytes - m->offset) {
      coll_exec_fail(op, DLCP_ERR_BAD_OFFSET, (int32_t)peer);
      return DLCP_ERR_BAD_OFFSET;
    }
    if (m->len == 0 || st->elem == COLL_NO_ELEM) {
      continue;
    }
    /* A partly missing element is a missing element: round the byte range
     * outwards to whole elements. */
    uint64_t e0 = m->offset / op->g.esz;
    uint64_t e1 = (m->offset + m->len + op->g.esz - 1) / op->g.esz;
    int rv = coll_exec_taint(op, st->elem + e0, e1 - e0);
    if (rv != 0) {
      coll_exec_fail(op, rv, -1);
      return rv;
    }
  }
  complete(op, idx, now);
  return 0;
}

int dlcp_coll_on_note(dlcp_coll *op, uint32_t peer, uint64_t value,
                      dlcp_tstamp now) {
  op->progress_ns = now;
  uint64_t kind = value >> DLCP_COLL_NOTE_KIND_SHIFT;
  uint64_t arg = value & DLCP_COLL_NOTE_ARG_MASK;
  if (op->grouped ? kind != DLCP_COLL_NOTE_BARRIER &&
                        kind != DLCP_COLL_NOTE_ABORT
                  : peer >= op->g.world) {
    return DLCP_ERR_BAD_TYPE;
  }
  switch (kind) {
  case DLCP_COLL_NOTE_BARRIER: {
    uint32_t idx = coll_table_find(op, DIR_NOTE, peer, value);
    if (idx == COLL_NO_STEP || (op->flags[idx] & COLL_SF_ARRIVED)) {
      return DLCP_ERR_BAD_TYPE;
    }
    op->flags[idx] |= COLL_SF_ARRIVED;
    if (op->state[idx] == COLL_ST_ACTIVE) {
      complete(op, idx, now);
    }
    return 0;
  }
  case DLCP_COLL_NOTE_BYPASS_REQ:
  case DLCP_COLL_NOTE_BYPASS_GRANT:
  case DLCP_COLL_NOTE_BYPASS_DENY:
  case DLCP_COLL_NOTE_BYPASS_INCOMING:
    if (!op->bypass) {
      return DLCP_ERR_BAD_TYPE;
    }
    {
      int rv = coll_bypass_on_note(op, peer, value, now);
      if (rv != 0 && rv != DLCP_ERR_BAD_TYPE) {
        coll_exec_fail(op, rv, (int32_t)peer);
      }
      return rv;
    }
  case DLCP_COLL_NOTE_AGREE_UP:
  case DLCP_COLL_NOTE_AGREE_DOWN:
  case DLCP_COLL_NOTE_AGREE_ROUND:
    return coll_agree_on_note(op, peer, value, now);
  case DLCP_COLL_NOTE_ABORT:
    if (op->phase < COLL_PHASE_FINISHED) {
      op->status = DLCP_ERR_PEER_ABORTED;
      op->failed_peer = arg == DLCP_COLL_NOTE_ARG_MASK ? (int32_t)peer
                                                       : (int32_t)arg;
      op->phase = COLL_PHASE_FINISHED;
    }
    return 0;
  default:
    return DLCP_ERR_BAD_TYPE;
  }
}

uint64_t dlcp_coll_final_prefix(dlcp_coll *op) {
  if (op->phase >= COLL_PHASE_FINISHED) {
    return op->status == 0 ? op->g.count : 0;
  }
  if (op->g.kind != DLCP_COLL_REDUCE || op->g.rank != op->g.root) {
    return 0;
  }
  /* The root's steps write its segments in order, each summed (and, for
   * AVG, divided) in place: the prefix ends where the first write that
   * is not done begins.  It only grows, so the scan resumes where the
   * last call stopped. */
  uint32_t i = op->prefix_step;
  for (; i < op->plan.nsteps; i++) {
    const coll_step *st = &op->plan.steps[i];
    if ((st->kind != COLL_STEP_REDUCE && st->kind != COLL_STEP_FINISH) ||
        st->buf != COLL_BUF_WORK) {
      continue;
    }
    if (op->state[i] != COLL_ST_DONE) {
      op->prefix_step = i;
      uint64_t end = st->off < op->prefix_bytes ? st->off : op->prefix_bytes;
      return end / op->g.esz;
    }
    op->prefix_bytes = st->off + st->bytes;
  }
  op->prefix_step = i;
  return op->prefix_bytes / op->g.esz;
}

bool dlcp_coll_awaited_note(const dlcp_coll *op, uint32_t *peer,
                            dlcp_tstamp *since) {
  uint32_t who = UINT32_MAX;
  if (op->phase == COLL_PHASE_RUN && op->awaited_note != COLL_NO_STEP &&
      op->state[op->awaited_note] == COLL_ST_ACTIVE) {
    who = op->plan.steps[op->awaited_note].peer;
  } else if (op->phase == COLL_PHASE_AGREE) {
    who = coll_agree_awaited(op);
  }
  if (who == UINT32_MAX) {
    return false;
  }
  *peer = who;
  *since = op->progress_ns;
  return true;
}

dlcp_tstamp dlcp_coll_next_deadline(const dlcp_coll *op) {
  if (op->phase != COLL_PHASE_RUN || !op->bypass) {
    return DLCP_TSTAMP_NEVER;
  }
  return coll_bypass_next_deadline(op);
}

void dlcp_coll_get_result(const dlcp_coll *op, dlcp_coll_result *res) {
  memset(res, 0, sizeof(*res));
  res->status = op->status;
  res->failed_peer = op->failed_peer;
  res->algo = op->g.algo;
  res->done = op->phase >= COLL_PHASE_FINISHED;
  res->missing = op->missing;
  res->nmissing = op->nmissing;
  res->missing_elems = op->missing_elems;
  res->delivered_fraction =
      op->g.count ? 1.0 - (double)op->missing_elems / (double)op->g.count
                  : 1.0;
  res->start_ns = op->start_ns;
  res->end_ns = op->end_ns;
  if (op->bypass) {
    coll_bypass_result(op, res);
  }
}

dlcp_ssize dlcp_coll_plan_dump(const dlcp_coll_params *p, char *buf,
                               size_t buflen) {
  coll_geom g;
  int rv = coll_params_to_geom(p, &g);
  if (rv != 0) {
    return rv;
  }
  coll_plan plan;
  coll_plan_init(&plan, NULL);
  rv = coll_plan_build(&plan, &g);
  if (rv == 0 && p->members) {
    rv = coll_plan_map_peers(&plan, p->members, g.world);
  }
  dlcp_ssize n = rv != 0 ? rv : coll_plan_format(&plan, &g, buf, buflen);
  coll_plan_free(&plan);
  return n;
}
