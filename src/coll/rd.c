/*
 * rd.c: recursive-doubling all-reduce, for small vectors.
 *
 * Model: with p2 the largest power of two <= n and rem = n - p2, the first
 * 2 rem ranks fold as in hd.c (even r hands its vector to r + 1 and gets
 * the result back at the end); the p2 survivors, with virtual ranks v,
 * exchange their whole current vector with v ^ 2^k for k = 0 .. log2 p2 - 1
 * and reduce the partner's copy in.  log2 p2 steps (+2 with the fold),
 * each moving the whole vector: the latency of halving-doubling's halving
 * alone, at log2 p2 times the bytes, so for small vectors only.
 *
 * Both partners of a step must compute the same bits.  IEEE addition is
 * commutative, but MIN/MAX of +0 and -0, or of two NaNs, depend on the
 * operand order, so every step combines "lower rank's vector op higher
 * rank's" on both sides: the lower reduces the received vector into its
 * own; the higher reduces its own into the received copy and copies that
 * back (after its send of the old value has left).  AVG divides once, on
 * every survivor, after the last step.
 *
 * Tags: step 0 fold, 1..L the exchanges, L + 1 unfold (L = log2 p2);
 * scratch: one vector for a fold taken in and one per exchange.  Separate
 * slots let every receive be posted at once, so a partner that runs ahead
 * never waits for a slot to be freed; at most (log2 p2 + 1) S, which is
 * small for the vectors this algorithm is for.
 */
#include "coll/plan.h"

typedef struct rd_ctx {
  coll_plan *plan;
  const coll_geom *g;
  uint32_t nseg;
} rd_ctx;

/* One whole-vector exchange with |peer| at tag step |phase|; the received
 * copy lands in scratch at |slot| (a byte offset).  |after[j]| is the step
 * after which segment j of WORK is current; on return it is the step
 * after which it holds the combination.  |lower|: this rank's vector is
 * the left operand. */
static void rd_exchange(rd_ctx *c, uint32_t peer, uint32_t phase,
                        uint64_t slot, bool lower, uint32_t *after) {
  const coll_geom *g = c->g;
  for (uint32_t j = 0; j < c->nseg; j++) {
    uint64_t off, len;
    dlcp_coll_shard(g->count, c->nseg, j, &off, &len);
    uint64_t boff = off * g->esz, blen = len * g->esz;
    uint32_t tag = coll_plan_tag(phase, c->nseg, j);
    uint32_t snd =
        coll_plan_send(c->plan, peer, tag, COLL_BUF_WORK, boff, blen);
    coll_plan_dep(c->plan, after[j], snd);
    uint32_t rcv = coll_plan_recv(c->plan, peer, tag, COLL_BUF_SCRATCH,
                                  slot + boff, blen, off);
    uint32_t done;
    if (lower) {
      done = coll_plan_reduce(c->plan, COLL_BUF_WORK, boff, COLL_BUF_SCRATCH,
                              slot + boff, blen);
      coll_plan_dep(c->plan, snd, done); /* the send reads the old value */
    } else {
      uint32_t x = coll_plan_reduce(c->plan, COLL_BUF_SCRATCH, slot + boff,
                                    COLL_BUF_WORK, boff, blen);
      coll_plan_dep(c->plan, rcv, x);
      coll_plan_dep(c->plan, after[j], x);
      done = coll_plan_copy(c->plan, COLL_BUF_WORK, boff, COLL_BUF_SCRATCH,
                            slot + boff, blen);
      coll_plan_dep(c->plan, x, done);
      coll_plan_dep(c->plan, snd, done);
    }
    coll_plan_dep(c->plan, rcv, done);
    coll_plan_dep(c->plan, after[j], done);
    after[j] = done;
  }
}

/* Sends (fold, unfold) or receives into place the whole vector. */
static void rd_move(rd_ctx *c, uint32_t peer, uint32_t phase, bool send,
                    uint32_t *after) {
  const coll_geom *g = c->g;
  for (uint32_t j = 0; j < c->nseg; j++) {
    uint64_t off, len;
    dlcp_coll_shard(g->count, c->nseg, j, &off, &len);
    uint32_t tag = coll_plan_tag(phase, c->nseg, j);
    uint32_t st = send ? coll_plan_send(c->plan, peer, tag, COLL_BUF_WORK,
                                        off * g->esz, len * g->esz)
                       : coll_plan_recv(c->plan, peer, tag, COLL_BUF_WORK,
                                        off * g->esz, len * g->esz, off);
    coll_plan_dep(c->plan, after[j], st);
    after[j] = st;
  }
}

int coll_build_rd(coll_plan *plan, const coll_geom *g) {
  uint32_t n = g->world, r = g->rank;
  if (g->kind != DLCP_COLL_ALLREDUCE) {
    return DLCP_ERR_INVALID_ARGUMENT;
  }
  uint32_t L;
  uint32_t p2 = coll_fold_p2(n, &L);
  uint32_t rem = n - p2;
  rd_ctx c = {.plan = plan, .g = g,
              .nseg = coll_plan_nseg(g, g->count, L + 2)};
  plan->nseg = c.nseg;
  if (n == 1 || g->count == 0) {
    return 0;
  }
  uint64_t bytes = g->count * g->esz;
  uint32_t *after = plan->mem->malloc(c.nseg * sizeof(uint32_t),
                                      plan->mem->user);
  if (!after) {
    return DLCP_ERR_NOMEM;
  }
  for (uint32_t j = 0; j < c.nseg; j++) {
    after[j] = COLL_NO_STEP;
  }
  if (r < 2 * rem && (r & 1u) == 0) {
    /* Fold out: hand the vector to r + 1, then wait for the result. */
    rd_move(&c, r + 1, 0, true, after);
    rd_move(&c, r + 1, L + 1, false, after);
    plan->mem->free(after, plan->mem->user);
    return plan->err;
  }
  if (r < 2 * rem) {
    /* Take r - 1's vector in: it is the lower rank, the left operand. */
    for (uint32_t j = 0; j < c.nseg; j++) {
      uint64_t off, len;
      dlcp_coll_shard(g->count, c.nseg, j, &off, &len);
      uint64_t boff = off * g->esz, blen = len * g->esz;
      uint32_t rcv =
          coll_plan_recv(plan, r - 1, coll_plan_tag(0, c.nseg, j),
                         COLL_BUF_SCRATCH, boff, blen, off);
      uint32_t x = coll_plan_reduce(plan, COLL_BUF_SCRATCH, boff,
                                    COLL_BUF_WORK, boff, blen);
      uint32_t cp = coll_plan_copy(plan, COLL_BUF_WORK, boff,
                                   COLL_BUF_SCRATCH, boff, blen);
      coll_plan_dep(plan, rcv, x);
      coll_plan_dep(plan, x, cp);
      after[j] = cp;
    }
  }
  uint32_t v = r < 2 * rem ? r / 2 : r - rem;
  uint32_t fold_slots = r < 2 * rem ? 1 : 0; /* the fold's copy sits at 0 */
  for (uint32_t k = 0; k < L; k++) {
    uint32_t pv = v ^ (1u << k);
    rd_exchange(&c, coll_fold_rank(pv, rem), k + 1,
                (uint64_t)(fold_slots + k) * bytes, v < pv, after);
  }
  plan->scratch_bytes = (uint64_t)(fold_slots + L) * bytes;
  for (uint32_t j = 0; j < c.nseg; j++) {
    uint64_t off, len;
    dlcp_coll_shard(g->count, c.nseg, j, &off, &len);
    if (g->op == DLCP_AVG && len > 0) {
      uint32_t f = coll_plan_finish(plan, COLL_BUF_WORK, off * g->esz,
                                    len * g->esz);
      coll_plan_dep(plan, after[j], f);
      after[j] = f;
    }
  }
  if (r < 2 * rem) {
    rd_move(&c, r - 1, L + 1, true, after);
  }
  plan->mem->free(after, plan->mem->user);
  return plan->err;
}
