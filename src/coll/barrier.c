/*
 * barrier.c: the dissemination barrier (Hensgen, Finkel and Manber).
 *
 * Model: in round k = 0..ceil(log2 n) - 1 rank r notifies r + 2^k and
 * waits for the note of r - 2^k (mod n); round k + 1 starts once round k's
 * note has arrived.  After the last round every rank has (transitively)
 * heard from every other one, so none leaves before all have entered.
 * Notes carry no data, so the barrier rides the reliable control channel
 * (NOTE actions, value BARRIER:k) and never touches the loss machinery.
 */
#include "coll/plan.h"

int coll_build_barrier(coll_plan *plan, const coll_geom *g) {
  uint32_t n = g->world, r = g->rank;
  uint32_t prev_wait = COLL_NO_STEP;
  for (uint32_t k = 0, dist = 1; dist < n; k++, dist *= 2) {
    uint64_t value = DLCP_COLL_NOTE(DLCP_COLL_NOTE_BARRIER, k);
    coll_step note = {.kind = COLL_STEP_NOTE,
                      .peer = (uint32_t)(((uint64_t)r + dist) % n),
                      .value = value,
                      .elem = COLL_NO_ELEM};
    coll_step wait = {.kind = COLL_STEP_WAIT_NOTE,
                      .peer = (uint32_t)(((uint64_t)r + n - dist) % n),
                      .value = value,
                      .elem = COLL_NO_ELEM};
    uint32_t ns = coll_plan_add(plan, &note);
    uint32_t ws = coll_plan_add(plan, &wait);
    coll_plan_dep(plan, prev_wait, ns);
    coll_plan_dep(plan, prev_wait, ws);
    prev_wait = ws;
  }
  return plan->err;
}
