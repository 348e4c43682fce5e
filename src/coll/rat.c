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
 * evenly (the seed's "n trees"), unless the parts would be smaller than
 * DLCP_COLL_RAT_MIN_PART_BYTES: then into fewer, as many as that size allows,
 * whose roots spread over the ranks (rat_trees).  Each part is further cut into
 * segments for pipelining.  Children's contributions are reduced in ascending
 * rank order (deterministic floats); the root divides for AVG and its result is
 * what everyone receives, so every rank holds the same bits.
 *
 * Tags: tree t (rooted at t with one tree per rank), direction d (0 up,
 * 1 down), segment j: sequence (2t + d) * nseg + j.  Broadcast uses the tree of
 * the root, whole vector, down only (d = 1).
 *
 * Building: the regions are indexed once (each rank's representative per
 * level, each rack's members and each region's sub-regions, in rank
 * order: O(L n) memory, O(L n) time with a hash of (parent region,
 * label)), so a tree's parent and children of this rank cost O(L^2) plus
 * the children themselves, and a plan of n trees O(n L^2) plus its
 * steps.  Scanning every rank per query instead (O(n^3 L^2) a plan, and
 * the simulator builds every rank's) took 456 s to start one all-reduce
 * of 1,024 simulated ranks.
 */
#include <string.h>

#include "coll/plan.h"

/* A region's entries in a grouped list: list[first[R]] onwards, count[R]
 * of them, indexed by the region's representative (a rank). */
typedef struct rat_groups {
  uint32_t *first, *count, *list;
} rat_groups;

typedef struct rat_topo {
  uint32_t n, L;   /* levels 0..L; level L is the whole job */
  uint32_t *rep;   /* rep[l * n + x]: smallest rank in x's level-l region */
  /* groups[0]: a level-0 region's members, in rank order; groups[l],
   * l = 1..L: a level-l region's level-(l-1) regions, by representative
   * in rank order. */
  rat_groups *groups;
  uint32_t *mem_block; /* every array above, one allocation */
} rat_topo;

static uint32_t rep_of(const rat_topo *t, uint32_t l, uint32_t x) {
  return t->rep[l * t->n + x];
}

/* rep at level l from level l + 1: x's level-l region is its level-(l+1)
 * region and its own level-l label, so ranks meet their region's
 * representative in a hash of that pair, scanning upwards.  |slots| has
 * |cap| (a power of two above n) entries. */
static void reps_of_level(rat_topo *t, const coll_geom *g, uint32_t l,
                          uint32_t *slots, uint32_t cap) {
  memset(slots, 0xff, (size_t)cap * sizeof(uint32_t));
  for (uint32_t x = 0; x < t->n; x++) {
    uint32_t up = rep_of(t, l + 1, x), label = g->topo[x * g->levels + l];
    uint32_t h = (up * 0x9e3779b1u ^ label * 0x85ebca6bu) & (cap - 1);
    for (;; h = (h + 1) & (cap - 1)) {
      uint32_t y = slots[h];
      if (y == UINT32_MAX) {
        slots[h] = x;
        t->rep[l * t->n + x] = x;
        break;
      }
      if (rep_of(t, l + 1, y) == up && g->topo[y * g->levels + l] == label) {
        t->rep[l * t->n + x] = y;
        break;
      }
    }
  }
}

/* Groups the ranks x with keep(x) by key(x), each group in rank order
 * (a counting sort). */
static void group_ranks(const rat_topo *t, rat_groups *gr, uint32_t key_level,
                        uint32_t keep_level) {
  memset(gr->count, 0, (size_t)t->n * sizeof(uint32_t));
  for (uint32_t x = 0; x < t->n; x++) {
    if (keep_level == UINT32_MAX || rep_of(t, keep_level, x) == x) {
      gr->count[rep_of(t, key_level, x)]++;
    }
  }
  uint32_t at = 0;
  for (uint32_t R = 0; R < t->n; R++) {
    gr->first[R] = at;
    at += gr->count[R];
    gr->count[R] = 0;
  }
  for (uint32_t x = 0; x < t->n; x++) {
    if (keep_level == UINT32_MAX || rep_of(t, keep_level, x) == x) {
      uint32_t R = rep_of(t, key_level, x);
      gr->list[gr->first[R] + gr->count[R]++] = x;
    }
  }
}

static void rat_topo_free(rat_topo *t, const dlcp_mem *mem) {
  if (t->groups) {
    mem->free(t->groups, mem->user);
  }
  if (t->mem_block) {
    mem->free(t->mem_block, mem->user);
  }
}

static int rat_topo_init(rat_topo *t, const coll_geom *g, const dlcp_mem *mem) {
  uint32_t n = g->world, L = g->topo ? g->levels : 0, cap = 2;
  while (cap < 2 * n) {
    cap *= 2;
  }
  t->n = n;
  t->L = L;
  /* rep, then (first, count, list) for the racks and each of L levels,
   * then the hash's slots. */
  size_t words = (size_t)(L + 1) * n + (size_t)(L + 1) * 3 * n + cap;
  t->mem_block = mem->calloc(words, sizeof(uint32_t), mem->user);
  t->groups = mem->calloc(L + 1, sizeof(rat_groups), mem->user);
  if (!t->mem_block || !t->groups) {
    rat_topo_free(t, mem);
    return DLCP_ERR_NOMEM;
  }
  uint32_t *next = t->mem_block;
  t->rep = next;
  next += (size_t)(L + 1) * n;
  for (uint32_t l = 0; l <= L; l++) {
    rat_groups *gr = &t->groups[l];
    gr->first = next;
    gr->count = next + n;
    gr->list = next + 2 * n;
    next += 3 * (size_t)n;
  }
  /* Level L: everyone (rep 0), already zero. */
  for (uint32_t l = L; l-- > 0;) {
    reps_of_level(t, g, l, next, cap);
  }
  group_ranks(t, &t->groups[0], 0, UINT32_MAX);
  for (uint32_t l = 1; l <= L; l++) {
    group_ranks(t, &t->groups[l], l, l - 1);
  }
  return 0;
}

/* The k-th (mod count) entry of region |R| in |gr|. */
static uint32_t nth_of(const rat_groups *gr, uint32_t R, uint32_t k) {
  return gr->list[gr->first[R] + k % gr->count[R]];
}

/* A tree: its root, and its turn, which picks the aggregators of the
 * regions without the root and numbers its tags (the i-th tree's turn is
 * i, and with one tree per rank, its root; with fewer trees two may share
 * a root on uneven regions). */
typedef struct rat_which {
  uint32_t root, turn;
} rat_which;

/* The aggregator of level-l region |R| in tree |w|: the root where the
 * region holds it, else the region's (turn mod count)-th sub-region's,
 * down to the (turn mod size)-th member of a rack.  It is so the
 * aggregator of every region of its own below l too. */
static uint32_t aggregator(const rat_topo *t, uint32_t l, uint32_t R,
                           rat_which w) {
  while (rep_of(t, l, w.root) != R) {
    R = nth_of(&t->groups[l], R, w.turn);
    if (l == 0) {
      return R;
    }
    l--;
  }
  return w.root;
}

/* The member turn |turn| picks from the whole job down: the (turn mod
 * count)-th region of every level, the (turn mod size)-th member of the
 * rack.  As a tree's root it is where the tree's turn puts every other
 * region's aggregator, so a rank holds one role in no more trees than
 * with one tree per rank. */
static uint32_t turn_member(const rat_topo *t, uint32_t turn) {
  uint32_t R = rep_of(t, t->L, 0);
  for (uint32_t l = t->L + 1; l-- > 0;) {
    R = nth_of(&t->groups[l], R, turn);
  }
  return R;
}

/* The parent of |x| in tree |w|, or UINT32_MAX for the root. */
static uint32_t parent_of(const rat_topo *t, uint32_t x, rat_which w) {
  for (uint32_t l = 0; l <= t->L; l++) {
    uint32_t a = aggregator(t, l, rep_of(t, l, x), w);
    if (a != x) {
      return a;
    }
  }
  return UINT32_MAX;
}

/* Children of |x| in tree |w|, ascending, into |out| (capacity n):
 * while x aggregates its level-l region, the other members of its rack
 * (l = 0) and the aggregators of the region's other sub-regions (l > 0)
 * are the ranks whose parent it is. */
static uint32_t children_of(const rat_topo *t, uint32_t x, rat_which w,
                            uint32_t *out) {
  uint32_t k = 0;
  for (uint32_t l = 0; l <= t->L; l++) {
    uint32_t R = rep_of(t, l, x);
    if (aggregator(t, l, R, w) != x) {
      break;
    }
    const rat_groups *gr = &t->groups[l];
    uint32_t own = l == 0 ? x : rep_of(t, l - 1, x);
    for (uint32_t i = 0; i < gr->count[R]; i++) {
      uint32_t y = gr->list[gr->first[R] + i];
      if (y != own) {
        out[k++] = l == 0 ? y : aggregator(t, l - 1, y, w);
      }
    }
  }
  /* Insertion sort: the racks' members come in order already, and an
   * aggregator's other children are a few sub-regions'. */
  for (uint32_t i = 1; i < k; i++) {
    uint32_t v = out[i], j = i;
    for (; j > 0 && out[j - 1] > v; j--) {
      out[j] = out[j - 1];
    }
    out[j] = v;
  }
  return k;
}

/* Parts of at most this many smallest parts (rat_min_part: 64 KiB by
 * default, scaled with it by a driver that scales its buffers) receive
 * their result ahead, unless the driver sends them eagerly (no START to
 * wait for).  Larger ones gain little and pay: their receives, posted with
 * the tree's reduce, divide the host's receive grants while the parts go
 * up (a simulated 4 MiB RAT of 16 ranks, 256 KB parts, 1,035 -> 1,179 us;
 * on the 4-host testbed, 4 interleaved rounds, 1 MiB parts 18.3-20.1 ->
 * 20.1-21.5 ms).  Eager ones too (64 KiB parts there: 1.29-1.36 ->
 * 1.32-1.70 ms). */
#define RAT_AHEAD_PARTS 8u

typedef struct rat_part {
  uint64_t off, len; /* elements of the vector this tree carries */
} rat_part;

/* One tree's steps for this rank.  |up| false: broadcast (down only).
 * With |down_ahead| the parent's result lands in scratch, posted at once,
 * and is forwarded from there: into its own range a rank may receive only
 * once its send up, which reads that range, has completed, and over MLT
 * the STOP that completes it and the START the receive then sends are two
 * one-way trips on every level's chain, where a receive posted at once
 * has its START waiting at the parent.  The copy into place costs the
 * part's bytes and the scratch a vector, hence the bound
 * (dlcp_coll_params.recv_ahead_bytes); and only for small parts, where
 * those trips are much of a transfer (RAT_AHEAD_PARTS). */
static void rat_tree(coll_plan *plan, const coll_geom *g, const rat_topo *t,
                     rat_which w, rat_part part, uint32_t nseg, bool up,
                     bool down_ahead, uint32_t *kids, uint64_t *scratch,
                     uint64_t seg_max) {
  uint32_t r = g->rank;
  uint32_t parent = parent_of(t, r, w);
  uint32_t nk = children_of(t, r, w, kids);
  uint32_t up_phase = 2 * w.turn, down_phase = 2 * w.turn + 1;
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
    coll_buf down_buf = COLL_BUF_WORK;
    uint64_t down_off = boff;
    if (parent != UINT32_MAX) {
      uint32_t snd = COLL_NO_STEP;
      if (up) {
        snd = coll_plan_send(plan, parent, coll_plan_tag(up_phase, nseg, j),
                             COLL_BUF_WORK, boff, bytes);
        coll_plan_dep(plan, prev, snd);
        prev = snd;
      }
      bool ahead = up && down_ahead;
      if (ahead) {
        down_buf = COLL_BUF_SCRATCH;
        down_off = *scratch + ((uint64_t)nk * nseg + j) * seg_max;
      }
      uint32_t rcv =
          coll_plan_recv(plan, parent, coll_plan_tag(down_phase, nseg, j),
                         down_buf, down_off, bytes, off);
      if (ahead) {
        uint32_t cp = coll_plan_copy(plan, COLL_BUF_WORK, boff,
                                     COLL_BUF_SCRATCH, down_off, bytes);
        coll_plan_dep(plan, snd, cp);
        coll_plan_dep(plan, rcv, cp);
      } else {
        coll_plan_dep(plan, prev, rcv);
      }
      prev = rcv;
    } else if (up && g->op == DLCP_AVG && g->world > 1 && len > 0) {
      uint32_t f = coll_plan_finish(plan, COLL_BUF_WORK, boff, bytes);
      coll_plan_dep(plan, prev, f);
      prev = f;
    }
    for (uint32_t i = 0; i < nk; i++) {
      uint32_t snd =
          coll_plan_send(plan, kids[i], coll_plan_tag(down_phase, nseg, j),
                         down_buf, down_off, bytes);
      coll_plan_dep(plan, prev, snd);
    }
  }
  if (up) {
    uint32_t slots = nk + (down_ahead && parent != UINT32_MAX ? 1u : 0u);
    *scratch += (uint64_t)slots * nseg * seg_max;
  }
}

/* Trees of an all-reduce: one per rank (the seed's), but none whose part
 * is under g->rat_min_part (DLCP_COLL_RAT_MIN_PART_BYTES).  A transfer costs
 * its fixed work (posting, a START or an EAGER, a completion, an aggregator's
 * wake-up) whatever its size, and n trees of a small vector are 2 n (n - 1)
 * transfers of a few bytes: a 256 KB all-reduce of 1,024 simulated ranks was
 * two million transfers of 250 bytes.  With fewer trees, tree i is rooted at
 * the member its turn picks (turn_member); roots spread evenly over the ranks
 * instead (i n / trees) can sit where another tree's turn puts an
 * aggregator, one rank then doing both: a simulated 256 KB all-reduce of 256
 * ranks took 151.8 us against 135.6. */
static uint32_t rat_trees(const coll_geom *g) {
  uint64_t trees = g->count * g->esz / g->rat_min_part;
  if (trees < 1) {
    trees = 1;
  }
  return trees < g->world ? (uint32_t)trees : g->world;
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
    rat_topo_free(&t, mem);
    return DLCP_ERR_NOMEM;
  }
  uint64_t scratch = 0;
  if (g->kind == DLCP_COLL_BROADCAST) {
    uint32_t nseg = coll_plan_nseg(g, g->count, 2 * g->world);
    plan->nseg = nseg;
    rat_part whole = {0, g->count};
    rat_which w = {g->root, g->root};
    rat_tree(plan, g, &t, w, whole, nseg, false, false, kids, &scratch, 0);
  } else {
    uint32_t ntrees = rat_trees(g);
    uint64_t max_part = (g->count + ntrees - 1) / ntrees;
    uint32_t nseg = coll_plan_nseg(g, max_part, 2 * g->world);
    uint64_t seg_max = ((max_part + nseg - 1) / nseg) * g->esz;
    plan->nseg = nseg;
    uint64_t part_bytes = max_part * g->esz;
    bool down_ahead = coll_plan_posts_ahead(g, g->count * g->esz, part_bytes) &&
                      part_bytes <= RAT_AHEAD_PARTS * g->rat_min_part;
    for (uint32_t i = 0; i < ntrees && g->world > 1; i++) {
      rat_part part;
      dlcp_coll_shard(g->count, ntrees, i, &part.off, &part.len);
      rat_which w = {ntrees == g->world ? i : turn_member(&t, i), i};
      rat_tree(plan, g, &t, w, part, nseg, true, down_ahead, kids, &scratch,
               seg_max);
    }
  }
  plan->scratch_bytes = scratch;
  mem->free(kids, mem->user);
  rat_topo_free(&t, mem);
  return plan->err;
}
