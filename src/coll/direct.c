/*
 * direct.c: the one-step all-reduce for small vectors.
 *
 * Model: every rank sends its whole vector to every other rank and
 * reduces all n vectors itself.  One step of latency whatever n is, at
 * the price of (n - 1) whole vectors sent and received per rank instead
 * of the ring's 2(n - 1)/n: the right trade while a vector costs less to
 * move than a message round trip (a few KiB), and only for modest n.
 *
 * Every rank computes each element as x_0 op x_1 op ... op x_{n-1}, left
 * to right in rank order, so the float result has the same bits on every
 * rank whatever order the vectors arrived in.  Rank r keeps its own
 * vector in scratch slot r (WORK is overwritten by the result), the
 * others land in their slots; the result is built in WORK from slot 0.
 *
 * Tags: one phase (step 0), segment j of the vector.  Segments are
 * reduced independently, so a large vector still pipelines, although
 * AUTO never picks this algorithm for one.
 */
#include "coll/plan.h"

int coll_build_direct(coll_plan *plan, const coll_geom *g) {
  uint32_t n = g->world, r = g->rank;
  if (g->kind != DLCP_COLL_ALLREDUCE) {
    return DLCP_ERR_INVALID_ARGUMENT;
  }
  if (n == 1 || g->count == 0) {
    return 0;
  }
  uint64_t bytes = g->count * g->esz;
  uint32_t nseg = coll_plan_nseg(g, g->count, 1);
  plan->nseg = nseg;
  plan->scratch_bytes = (uint64_t)n * bytes;
  for (uint32_t j = 0; j < nseg; j++) {
    uint64_t off, len;
    dlcp_coll_shard(g->count, nseg, j, &off, &len);
    uint64_t boff = off * g->esz, blen = len * g->esz;
    uint32_t tag = coll_plan_tag(0, nseg, j);
    coll_step nop = {.kind = COLL_STEP_NOP, .elem = COLL_NO_ELEM};
    /* Joins every read of WORK's segment: the result may overwrite it
     * only after all of them. */
    uint32_t reads = coll_plan_add(plan, &nop);
    uint32_t own = coll_plan_copy(plan, COLL_BUF_SCRATCH,
                                  (uint64_t)r * bytes + boff, COLL_BUF_WORK,
                                  boff, blen);
    coll_plan_dep(plan, own, reads);
    uint32_t prev = COLL_NO_STEP;
    for (uint32_t k = 0; k < n; k++) {
      uint32_t have = own; /* step after which slot k holds x_k */
      if (k != r) {
        uint32_t snd =
            coll_plan_send(plan, k, tag, COLL_BUF_WORK, boff, blen);
        coll_plan_dep(plan, snd, reads);
        have = coll_plan_recv(plan, k, tag, COLL_BUF_SCRATCH,
                              (uint64_t)k * bytes + boff, blen, off);
      }
      uint32_t step;
      if (k == 0) {
        step = coll_plan_copy(plan, COLL_BUF_WORK, boff, COLL_BUF_SCRATCH,
                              boff, blen);
        coll_plan_dep(plan, reads, step);
      } else {
        step = coll_plan_reduce(plan, COLL_BUF_WORK, boff, COLL_BUF_SCRATCH,
                                (uint64_t)k * bytes + boff, blen);
        coll_plan_dep(plan, prev, step);
      }
      coll_plan_dep(plan, have, step);
      prev = step;
    }
    if (g->op == DLCP_AVG && len > 0) {
      uint32_t f = coll_plan_finish(plan, COLL_BUF_WORK, boff, blen);
      coll_plan_dep(plan, prev, f);
    }
  }
  return plan->err;
}
