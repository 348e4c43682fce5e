/*
 * rat.c: RAT, the resilient all-reduce tree (topology-aware trees built
 * from rank location labels), all-reduce and broadcast.
 *
 * Model (the RAT seed): the ranks sit in nested oversubscribed regions:
 * racks (level 0), pods (level 1), ..., and the whole job on top (level
 * L = number of label levels).  A tree rooted at rank t has one aggregator
 * per region: the rack aggregator collects every other rank of its rack,
 * the pod aggregator collects the rack aggregators of its pod, and so on
 * up to t.  Where a region contains t, t is its aggregator at every level,
 * so the root's own regions add no hop.  Elsewhere the aggregator is
 * chosen by t (member t mod |rack|, sub-region t mod count), so that over
 * the n trees the aggregation work rotates through the members.  Reduce
 * goes up, the result comes back down the same edges: a dependency chain
 * of 2(L + 1) hops, and every region boundary is crossed once per tree in
 * each direction (the cross-rack traffic of the ring, the short chains of
 * the parameter server).
 *
 * The vector is split into n parts (dlcp_coll_shard) and part t travels
 * tree t, so every rank is the root of one tree and the load spreads
 * evenly (the seed's "n trees").  Each part is further cut into segments
 * for pipelining.  Children's contributions are reduced in ascending rank
 * order (deterministic floats); the root divides for AVG and its result is
 * what everyone receives, so every rank holds the same bits.
 *
 * Tags: tree t, direction d (0 up, 1 down), segment j: sequence
 * (2t + d) * nseg + j.  Broadcast uses the tree of the root, whole vector,
 * down only (d = 1).
 *
 * Cost of building: finding a region's members scans all ranks, and the
 * children of a rank are found by asking every rank for its parent, so one
 * tree costs O(n^2 L^2) and a plan (n trees) O(n^3 L^2): trivial at tens of
 * ranks, worth an index before thousands.
 */
#include <string.h>

#include "coll/plan.h"

typedef struct rat_topo {
  uint32_t n, L;  /* levels 0..L; level L is the whole job */
  uint32_t *rep;  /* rep[l * n + x]: smallest rank in x's level-l region */
} rat_topo;

static int rat_topo_init(rat_topo *t, const coll_geom *g,
                         const dlcp_mem *mem) {
  t->n = g->world;
  t->L = g->topo ? g->levels : 0;
  t->rep = mem->calloc((size_t)(t->L + 1) * t->n, sizeof(uint32_t),
                       mem->user);
  if (!t->rep) {
    return DLCP_ERR_NOMEM;
  }
  for (uint32_t l = 0; l < t->L; l++) {
    for (uint32_t x = 0; x < t->n; x++) {
      /* Same region at level l = same labels at levels l..L-1. */
      const uint32_t *lx = &g->topo[x * g->levels + l];
      uint32_t y = 0;
      while (memcmp(&g->topo[y * g->levels + l], lx,
                    (g->levels - l) * sizeof(uint32_t)) != 0) {
        y++;
      }
      t->rep[l * t->n + x] = y;
    }
  }
  /* Level L: everyone (rep 0), already zero. */
  return 0;
}

static uint32_t rep_of(const rat_topo *t, uint32_t l, uint32_t x) {
  return t->rep[l * t->n + x];
}

/* The k-th (mod count) member of level-0 region |R|, in rank order. */
static uint32_t nth_member(const rat_topo *t, uint32_t R, uint32_t k) {
  uint32_t count = 0;
  for (uint32_t y = 0; y < t->n; y++) {
    count += rep_of(t, 0, y) == R;
  }
  k %= count;
  for (uint32_t y = 0; y < t->n; y++) {
    if (rep_of(t, 0, y) == R && k-- == 0) {
      return y;
    }
  }
  return R;
}

/* The k-th (mod count) level-(l-1) sub-region of level-l region |R|, by
 * representative.  Scanning ranks upwards meets each sub-region first at
 * its representative, so the order is by representative. */
static uint32_t nth_sub(const rat_topo *t, uint32_t l, uint32_t R,
                        uint32_t k) {
  uint32_t count = 0;
  for (uint32_t y = 0; y < t->n; y++) {
    count += rep_of(t, l, y) == R && rep_of(t, l - 1, y) == y;
  }
  k %= count;
  for (uint32_t y = 0; y < t->n; y++) {
    if (rep_of(t, l, y) == R && rep_of(t, l - 1, y) == y && k-- == 0) {
      return y;
    }
  }
  return R;
}

/* The aggregator of level-l region |R| in the tree rooted at |root|. */
static uint32_t aggregator(const rat_topo *t, uint32_t l, uint32_t R,
                           uint32_t root) {
  while (rep_of(t, l, root) != R) {
    if (l == 0) {
      return nth_member(t, R, root);
    }
    R = nth_sub(t, l, R, root);
    l--;
  }
  return root;
}

/* The parent of |x| in tree |root|, or UINT32_MAX for the root. */
static uint32_t parent_of(const rat_topo *t, uint32_t x, uint32_t root) {
  for (uint32_t l = 0; l <= t->L; l++) {
    uint32_t a = aggregator(t, l, rep_of(t, l, x), root);
    if (a != x) {
      return a;
    }
  }
  return UINT32_MAX;
}

/* Children of |x| in tree |root|, ascending, into |out| (capacity n). */
static uint32_t children_of(const rat_topo *t, uint32_t x, uint32_t root,
                            uint32_t *out) {
  uint32_t k = 0;
  for (uint32_t y = 0; y < t->n; y++) {
    if (y != x && parent_of(t, y, root) == x) {
      out[k++] = y;
    }
  }
  return k;
}

typedef struct rat_part {
  uint64_t off, len; /* elements of the vector this tree carries */
} rat_part;

/* One tree's steps for this rank.  |up| false: broadcast (down only). */
static void rat_tree(coll_plan *plan, const coll_geom *g, const rat_topo *t,
                     uint32_t root, rat_part part, uint32_t nseg, bool up,
                     uint32_t *kids, uint64_t *scratch, uint64_t seg_max) {
  uint32_t r = g->rank;
  uint32_t parent = parent_of(t, r, root);
  uint32_t nk = children_of(t, r, root, kids);
  uint32_t up_phase = 2 * root, down_phase = 2 * root + 1;
  for (uint32_t j = 0; j < nseg; j++) {
    uint64_t so, len;
    dlcp_coll_shard(part.len, nseg, j, &so, &len);
    uint64_t off = part.off + so;
    uint64_t boff = off * g->esz, bytes = len * g->esz;
    uint32_t prev = COLL_NO_STEP;
    if (up) {
      for (uint32_t i = 0; i < nk; i++) {
        uint64_t slot = *scratch + ((uint64_t)i * nseg + j) * seg_max;
        uint32_t rcv = coll_plan_recv(plan, kids[i],
                                      coll_plan_tag(up_phase, nseg, j),
                                      COLL_BUF_SCRATCH, slot, bytes, off);
        uint32_t x = coll_plan_reduce(plan, COLL_BUF_WORK, boff,
                                      COLL_BUF_SCRATCH, slot, bytes);
        coll_plan_dep(plan, rcv, x);
        coll_plan_dep(plan, prev, x);
        prev = x;
      }
    }
    if (parent != UINT32_MAX) {
      if (up) {
        uint32_t snd = coll_plan_send(plan, parent,
                                      coll_plan_tag(up_phase, nseg, j),
                                      COLL_BUF_WORK, boff, bytes);
        coll_plan_dep(plan, prev, snd);
        prev = snd;
      }
      uint32_t rcv = coll_plan_recv(plan, parent,
                                    coll_plan_tag(down_phase, nseg, j),
                                    COLL_BUF_WORK, boff, bytes, off);
      coll_plan_dep(plan, prev, rcv);
      prev = rcv;
    } else if (up && g->op == DLCP_AVG && g->world > 1 && len > 0) {
      uint32_t f = coll_plan_finish(plan, COLL_BUF_WORK, boff, bytes);
      coll_plan_dep(plan, prev, f);
      prev = f;
    }
    for (uint32_t i = 0; i < nk; i++) {
      uint32_t snd = coll_plan_send(plan, kids[i],
                                    coll_plan_tag(down_phase, nseg, j),
                                    COLL_BUF_WORK, boff, bytes);
      coll_plan_dep(plan, prev, snd);
    }
  }
  if (up) {
    *scratch += (uint64_t)nk * nseg * seg_max;
  }
}

int coll_build_rat(coll_plan *plan, const coll_geom *g) {
  if (g->kind != DLCP_COLL_ALLREDUCE && g->kind != DLCP_COLL_BROADCAST) {
    return DLCP_ERR_INVALID_ARGUMENT;
  }
  const dlcp_mem *mem = plan->mem;
  rat_topo t;
  int rv = rat_topo_init(&t, g, mem);
  if (rv != 0) {
    return rv;
  }
  uint32_t *kids = mem->calloc(g->world, sizeof(uint32_t), mem->user);
  if (!kids) {
    mem->free(t.rep, mem->user);
    return DLCP_ERR_NOMEM;
  }
  uint64_t scratch = 0;
  if (g->kind == DLCP_COLL_BROADCAST) {
    uint32_t nseg = coll_plan_nseg(g, g->count, 2 * g->world);
    plan->nseg = nseg;
    rat_part whole = {0, g->count};
    rat_tree(plan, g, &t, g->root, whole, nseg, false, kids, &scratch, 0);
  } else {
    uint64_t max_part = (g->count + g->world - 1) / g->world;
    uint32_t nseg = coll_plan_nseg(g, max_part, 2 * g->world);
    uint64_t seg_max = ((max_part + nseg - 1) / nseg) * g->esz;
    plan->nseg = nseg;
    for (uint32_t root = 0; root < g->world && g->world > 1; root++) {
      rat_part part;
      dlcp_coll_shard(g->count, g->world, root, &part.off, &part.len);
      rat_tree(plan, g, &t, root, part, nseg, true, kids, &scratch, seg_max);
    }
  }
  plan->scratch_bytes = scratch;
  mem->free(kids, mem->user);
  mem->free(t.rep, mem->user);
  return plan->err;
}
