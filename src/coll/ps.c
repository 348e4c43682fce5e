/*
 * ps.c: the sharded parameter server, co-located on the ranks.
 *
 * Model: rank o is the server of shard o (dlcp_coll_shard of the vector
 * into n parts).  All-reduce: every rank pushes shard o of its vector to
 * rank o (push, tag step 0), the owner reduces the n - 1 contributions
 * into its own shard in a fixed order (o+1, o+2, ... mod n, so the float
 * result does not depend on arrival order), divides for AVG, and sends
 * the result back to everyone (pull, tag step 1).  Two steps in the
 * dependency chain whatever n is, at the price of n - 1 concurrent flows
 * into and out of every rank (incast) and cross-rack traffic that ignores
 * the topology.  Each rank sends and receives 2(n - 1)/n of the vector,
 * like the ring.  Reduce-scatter is push + aggregate; all-gather is the
 * pull alone; broadcast is the root sending to everyone.
 *
 * Pipelining: shards are cut into nseg segments; segment j of every
 * contribution is reduced as soon as it and the previous contribution's
 * segment j are in.  Scratch holds n - 1 contributions of one shard.
 */
#include "coll/plan.h"

static uint32_t mod_add(uint32_t a, uint32_t b, uint32_t n) {
  return (uint32_t)(((uint64_t)a + b) % n);
}

static void seg_of(const coll_geom *g, uint32_t nseg, uint32_t shard,
                   uint32_t j, uint64_t *off, uint64_t *len) {
  uint64_t coff, clen, soff;
  dlcp_coll_shard(g->count, g->world, shard, &coff, &clen);
  dlcp_coll_shard(clen, nseg, j, &soff, len);
  *off = coff + soff;
}

/* Push + aggregate (+ AVG's finish).  |push[o * nseg + j]| receives the
 * push step of shard o, |last[j]| the step after which segment j of the
 * owned shard is final. */
static void ps_reduce(coll_plan *plan, const coll_geom *g, uint32_t nseg,
                      uint64_t seg_max, uint32_t *push, uint32_t *last) {
  uint32_t n = g->world, r = g->rank;
  for (uint32_t i = 1; i < n; i++) {
    uint32_t o = mod_add(r, i, n);
    for (uint32_t j = 0; j < nseg; j++) {
      uint64_t off, len;
      seg_of(g, nseg, o, j, &off, &len);
      push[o * nseg + j] =
          coll_plan_send(plan, o, coll_plan_tag(0, nseg, j), COLL_BUF_WORK,
                         off * g->esz, len * g->esz);
    }
  }
  for (uint32_t j = 0; j < nseg; j++) {
    uint64_t off, len;
    seg_of(g, nseg, r, j, &off, &len);
    uint32_t prev = COLL_NO_STEP;
    for (uint32_t i = 1; i < n; i++) {
      uint32_t q = mod_add(r, i, n);
      uint64_t slot = ((uint64_t)(i - 1) * nseg + j) * seg_max;
      uint32_t rcv = coll_plan_recv(plan, q, coll_plan_tag(0, nseg, j),
                                    COLL_BUF_SCRATCH, slot, len * g->esz,
                                    off);
      uint32_t x = coll_plan_reduce(plan, COLL_BUF_WORK, off * g->esz,
                                    COLL_BUF_SCRATCH, slot, len * g->esz);
      coll_plan_dep(plan, rcv, x);
      coll_plan_dep(plan, prev, x); /* fixed order: deterministic floats */
      prev = x;
    }
    if (g->op == DLCP_AVG && n > 1 && len > 0) {
      uint32_t f = coll_plan_finish(plan, COLL_BUF_WORK, off * g->esz,
                                    len * g->esz);
      coll_plan_dep(plan, prev, f);
      prev = f;
    }
    last[j] = prev;
  }
}

/* Pull: the owner sends its final shard to everyone; everyone receives
 * every other shard into place, after its own push of that range left. */
static void ps_pull(coll_plan *plan, const coll_geom *g, uint32_t nseg,
                    uint32_t phase, const uint32_t *push,
                    const uint32_t *last) {
  uint32_t n = g->world, r = g->rank;
  for (uint32_t i = 1; i < n; i++) {
    uint32_t q = mod_add(r, i, n);
    for (uint32_t j = 0; j < nseg; j++) {
      uint64_t off, len;
      seg_of(g, nseg, r, j, &off, &len);
      uint32_t snd = coll_plan_send(plan, q, coll_plan_tag(phase, nseg, j),
                                    COLL_BUF_WORK, off * g->esz,
                                    len * g->esz);
      coll_plan_dep(plan, last ? last[j] : COLL_NO_STEP, snd);
    }
  }
  for (uint32_t i = 1; i < n; i++) {
    uint32_t o = mod_add(r, i, n);
    for (uint32_t j = 0; j < nseg; j++) {
      uint64_t off, len;
      seg_of(g, nseg, o, j, &off, &len);
      uint32_t rcv = coll_plan_recv(plan, o, coll_plan_tag(phase, nseg, j),
                                    COLL_BUF_WORK, off * g->esz,
                                    len * g->esz, off);
      coll_plan_dep(plan, push ? push[o * nseg + j] : COLL_NO_STEP, rcv);
    }
  }
}

static int ps_broadcast(coll_plan *plan, const coll_geom *g) {
  uint32_t nseg = coll_plan_nseg(g, g->count, 1);
  plan->nseg = nseg;
  for (uint32_t j = 0; j < nseg; j++) {
    uint64_t off, len;
    dlcp_coll_shard(g->count, nseg, j, &off, &len);
    uint32_t tag = coll_plan_tag(0, nseg, j);
    if (g->rank == g->root) {
      for (uint32_t i = 1; i < g->world; i++) {
        coll_plan_send(plan, mod_add(g->root, i, g->world), tag,
                       COLL_BUF_WORK, off * g->esz, len * g->esz);
      }
    } else {
      coll_plan_recv(plan, g->root, tag, COLL_BUF_WORK, off * g->esz,
                     len * g->esz, off);
    }
  }
  return plan->err;
}

int coll_build_ps(coll_plan *plan, const coll_geom *g) {
  if (g->kind == DLCP_COLL_BROADCAST) {
    return ps_broadcast(plan, g);
  }
  uint32_t n = g->world;
  uint64_t max_shard = (g->count + n - 1) / n;
  uint32_t nseg = coll_plan_nseg(g, max_shard, 2);
  uint64_t seg_max = ((max_shard + nseg - 1) / nseg) * g->esz;
  plan->nseg = nseg;
  const dlcp_mem *mem = plan->mem;
  uint32_t *push = mem->calloc((size_t)n * nseg, sizeof(uint32_t), mem->user);
  uint32_t *last = mem->calloc(nseg, sizeof(uint32_t), mem->user);
  if (!push || !last) {
    mem->free(push, mem->user);
    mem->free(last, mem->user);
    return DLCP_ERR_NOMEM;
  }
  for (size_t i = 0; i < (size_t)n * nseg; i++) {
    push[i] = COLL_NO_STEP;
  }
  switch (g->kind) {
  case DLCP_COLL_ALLREDUCE:
    plan->scratch_bytes = (uint64_t)(n - 1) * nseg * seg_max;
    ps_reduce(plan, g, nseg, seg_max, push, last);
    ps_pull(plan, g, nseg, 1, push, last);
    break;
  case DLCP_COLL_REDUCE_SCATTER:
    plan->scratch_bytes = (uint64_t)(n - 1) * nseg * seg_max;
    ps_reduce(plan, g, nseg, seg_max, push, last);
    if (g->rs_copy_out) {
      uint64_t coff, clen;
      dlcp_coll_shard(g->count, n, g->rank, &coff, &clen);
      for (uint32_t j = 0; j < nseg; j++) {
        uint64_t off, len;
        seg_of(g, nseg, g->rank, j, &off, &len);
        if (len > 0) {
          uint32_t c = coll_plan_copy(plan, COLL_BUF_OUT,
                                      (off - coff) * g->esz, COLL_BUF_WORK,
                                      off * g->esz, len * g->esz);
          coll_plan_dep(plan, last[j], c);
        }
      }
    }
    break;
  case DLCP_COLL_ALLGATHER:
    ps_pull(plan, g, nseg, 0, NULL, NULL);
    break;
  case DLCP_COLL_BROADCAST:
  case DLCP_COLL_BARRIER:
  case DLCP_COLL_REDUCE:
    break;
  }
  mem->free(push, mem->user);
  mem->free(last, mem->user);
  return plan->err;
}
