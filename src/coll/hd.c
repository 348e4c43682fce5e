/*
 * hd.c: recursive halving-doubling all-reduce (Rabenseifner) and the
 * binomial-tree broadcast.
 *
 * All-reduce model, for n ranks with p2 the largest power of two <= n and
 * rem = n - p2 (MPICH's treatment of other worlds):
 *   fold    the first 2*rem ranks pair up; even rank r sends its whole
 *           vector to r + 1, which reduces it in, and then sits out;
 *           the p2 survivors get virtual ranks v = r/2 (odd r < 2 rem) or
 *           r - rem.
 *   halving log2(p2) steps: with the vector cut into p2 blocks and a
 *           current block range [lo, hi) (initially all), step k pairs v
 *           with v ^ (p2 >> k); each keeps the half of the range holding
 *           its own block, sends the other half and reduces the partner's
 *           copy of the kept half in.  After the last step v holds block v
 *           fully reduced (and divides it for AVG).
 *   doubling the same pairs in reverse order exchange their ranges, which
 *           double each step until everyone holds the whole vector.
 *   unfold  odd r < 2 rem send the result to r - 1.
 * 2 log2(p2) steps (+2 if n is not a power of two), each rank sending
 * about 2(p2 - 1)/p2 of the vector: latency of a tree, bandwidth of a
 * ring.  Each block is finalised by one rank and copied elsewhere, so every
 * rank holds the same bits.
 *
 * Tag steps: 0 fold, 1..L halving, L+1..2L doubling, 2L+1 unfold (L =
 * log2 p2); segments of each exchanged range are numbered within it.
 * Segments depend on the segments of earlier exchanges over the same
 * elements only (hd_marks below), so the exchanges pipeline into each
 * other; edges stay linear in the segments, each overlapping a few.
 *
 * Broadcast: the binomial tree on ranks relative to the root: v receives
 * from v minus its lowest set bit, then sends to v + 2^i for the bits below
 * it, segment by segment.
 */
#include "coll/plan.h"

typedef struct hd_ctx {
  coll_plan *plan;
  const coll_geom *g;
  uint32_t stride; /* tag sequence stride: the largest segment count */
  uint32_t phases; /* tag steps in total */
} hd_ctx;

/* Steps over element ranges of WORK, sorted by range, the ranges of one
 * list disjoint: the steps a later one over an overlapping range follows.
 * The schedule is the data flow itself, segment by segment, with no join
 * between exchanges: a segment reduced in halving step k goes on to step
 * k + 1 while the partner's other segments are still arriving, so a late
 * segment (a retransmission, a descheduled peer) holds only what depends
 * on it instead of the whole next step.  4 hosts, 10 Gbit/s, 1 % loss,
 * 4 MiB in the simulator: docs/collectives.md. */
typedef struct hd_marks {
  uint64_t *lo, *hi;
  uint32_t *step;
  uint32_t n, cap;
} hd_marks;

static void marks_free(coll_plan *plan, hd_marks *m) {
  const dlcp_mem *mem = plan->mem;
  mem->free(m->lo, mem->user);
  mem->free(m->hi, mem->user);
  mem->free(m->step, mem->user);
  *m = (hd_marks){0};
}

/* Appends a range after every range already listed. */
static void marks_push(coll_plan *plan, hd_marks *m, uint64_t lo,
                       uint64_t hi, uint32_t step) {
  if (plan->err || lo == hi) {
    return;
  }
  if (m->n == m->cap) {
    const dlcp_mem *mem = plan->mem;
    uint32_t ncap = m->cap ? 2 * m->cap : 16;
    uint64_t *nlo = mem->realloc(m->lo, ncap * sizeof(*nlo), mem->user);
    if (nlo) {
      m->lo = nlo;
    }
    uint64_t *nhi = mem->realloc(m->hi, ncap * sizeof(*nhi), mem->user);
    if (nhi) {
      m->hi = nhi;
    }
    uint32_t *ns = mem->realloc(m->step, ncap * sizeof(*ns), mem->user);
    if (ns) {
      m->step = ns;
    }
    if (!nlo || !nhi || !ns) {
      plan->err = DLCP_ERR_NOMEM;
      return;
    }
    m->cap = ncap;
  }
  m->lo[m->n] = lo;
  m->hi[m->n] = hi;
  m->step[m->n] = step;
  m->n++;
}

/* |step| follows every listed step whose range overlaps [lo, hi). */
static void marks_deps(coll_plan *plan, const hd_marks *m, uint64_t lo,
                       uint64_t hi, uint32_t step) {
  uint32_t a = 0, b = m->n;
  while (a < b) { /* the first range ending after lo */
    uint32_t mid = a + (b - a) / 2;
    if (m->hi[mid] <= lo) {
      a = mid + 1;
    } else {
      b = mid;
    }
  }
  for (; a < m->n && m->lo[a] < hi; a++) {
    coll_plan_dep(plan, m->step[a], step);
  }
}

/* |into| (empty) gets the ranges of |a| and |b| (disjoint) in order. */
static void marks_merge(coll_plan *plan, hd_marks *into, const hd_marks *a,
                        const hd_marks *b) {
  uint32_t i = 0, j = 0;
  while (i < a->n || j < b->n) {
    if (j == b->n || (i < a->n && a->lo[i] < b->lo[j])) {
      marks_push(plan, into, a->lo[i], a->hi[i], a->step[i]);
      i++;
    } else {
      marks_push(plan, into, b->lo[j], b->hi[j], b->step[j]);
      j++;
    }
  }
}

/* Element range of blocks [lo, hi) of the p2-way split. */
static void blocks(const coll_geom *g, uint32_t p2, uint32_t lo, uint32_t hi,
                   uint64_t *off, uint64_t *len) {
  uint64_t a, alen, b, blen;
  dlcp_coll_shard(g->count, p2, lo, &a, &alen);
  dlcp_coll_shard(g->count, p2, hi - 1, &b, &blen);
  *off = a;
  *len = b + blen - a;
}

/* One exchange with a peer: what to send and where the received range
 * goes. */
typedef struct hd_xchg {
  uint32_t peer, phase;
  uint64_t soff, slen; /* elements of WORK sent */
  uint64_t roff, rlen; /* elements of WORK received (or reduced) into */
  bool reduce;         /* received into scratch at |scratch_off|, reduced */
  uint64_t scratch_off;
} hd_xchg;

/*
 * Adds the segments of exchange |x| (cut alike on both sides: the
 * partner's send range is our receive range).  A send follows the steps
 * of |written| over its range (its data); a receive into WORK follows
 * |target| (what must finish with that range first: its last readers);
 * a reduce follows its receive and |target| (the range's last writers).
 * The sends are listed in |sends| and the steps writing WORK in |writes|.
 */
static void hd_exchange(hd_ctx *c, const hd_xchg *x, const hd_marks *written,
                        const hd_marks *target, hd_marks *sends,
                        hd_marks *writes) {
  coll_plan *plan = c->plan;
  const coll_geom *g = c->g;
  uint32_t ns = coll_plan_nseg(g, x->slen, c->phases);
  uint32_t nr = coll_plan_nseg(g, x->rlen, c->phases);
  for (uint32_t j = 0; j < ns; j++) {
    uint64_t o, l;
    dlcp_coll_shard(x->slen, ns, j, &o, &l);
    uint32_t snd = coll_plan_send(plan, x->peer,
                                  coll_plan_tag(x->phase, c->stride, j),
                                  COLL_BUF_WORK, (x->soff + o) * g->esz,
                                  l * g->esz);
    marks_deps(plan, written, x->soff + o, x->soff + o + l, snd);
    marks_push(plan, sends, x->soff + o, x->soff + o + l, snd);
  }
  for (uint32_t j = 0; j < nr; j++) {
    uint64_t o, l;
    dlcp_coll_shard(x->rlen, nr, j, &o, &l);
    uint64_t lo = x->roff + o, hi = lo + l;
    uint32_t tag = coll_plan_tag(x->phase, c->stride, j);
    uint32_t w;
    if (x->reduce) {
      uint32_t rcv = coll_plan_recv(plan, x->peer, tag, COLL_BUF_SCRATCH,
                                    x->scratch_off + o * g->esz, l * g->esz,
                                    lo);
      w = coll_plan_reduce(plan, COLL_BUF_WORK, lo * g->esz, COLL_BUF_SCRATCH,
                           x->scratch_off + o * g->esz, l * g->esz);
      coll_plan_dep(plan, rcv, w);
    } else {
      w = coll_plan_recv(plan, x->peer, tag, COLL_BUF_WORK, lo * g->esz,
                         l * g->esz, lo);
    }
    marks_deps(plan, target, lo, hi, w);
    marks_push(plan, writes, lo, hi, w);
  }
}

/* The halving and doubling of the p2 survivors, virtual rank |v|, after
 * |w| (the fold's reduces, or nothing) wrote WORK; on return |w| lists
 * the last writer of every element. */
static void hd_survivor(hd_ctx *c, uint32_t v, uint32_t p2, uint32_t L,
                        uint32_t rem, uint64_t scratch, hd_marks *w) {
  coll_plan *plan = c->plan;
  const coll_geom *g = c->g;
  hd_marks sent[32] = {{0}}; /* halving step k's sends, for doubling */
  uint32_t lo = 0, hi = p2;
  uint64_t scratch_off = 0;
  for (uint32_t k = 1; k <= L; k++) {
    uint32_t mask = p2 >> k;
    uint32_t mid = lo + (hi - lo) / 2;
    uint32_t klo = (v & mask) ? mid : lo, khi = (v & mask) ? hi : mid;
    uint32_t slo = (v & mask) ? lo : mid, shi = (v & mask) ? mid : hi;
    hd_xchg x = {.peer = coll_fold_rank(v ^ mask, rem), .phase = k,
                 .reduce = true, .scratch_off = scratch + scratch_off};
    blocks(g, p2, slo, shi, &x.soff, &x.slen);
    blocks(g, p2, klo, khi, &x.roff, &x.rlen);
    /* Every step has its own scratch: the total is at most twice the
     * vector, and a receive never waits for an earlier reduce. */
    hd_marks reduced = {0};
    hd_exchange(c, &x, w, w, &sent[k - 1], &reduced);
    marks_free(plan, w);
    *w = reduced;
    scratch_off += x.rlen * g->esz;
    lo = klo;
    hi = khi;
  }
  plan->scratch_bytes = scratch + scratch_off;
  if (g->op == DLCP_AVG) {
    uint64_t off, len;
    blocks(g, p2, v, v + 1, &off, &len);
    if (len > 0) {
      uint32_t f = coll_plan_finish(plan, COLL_BUF_WORK, off * g->esz,
                                    len * g->esz);
      marks_deps(plan, w, off, off + len, f);
      marks_free(plan, w);
      marks_push(plan, w, off, off + len, f);
    }
  }
  /* Doubling: the partner sends back, into place, the range we sent it in
   * halving step k, so each receive waits for that send of ours over its
   * range; our sends wait for the writers of theirs. */
  for (uint32_t k = L; k >= 1; k--) {
    uint32_t mask = p2 >> k;
    uint32_t span = hi - lo;
    uint32_t plo = (v & mask) ? lo - span : hi;
    hd_xchg x = {.peer = coll_fold_rank(v ^ mask, rem),
                 .phase = L + (L - k + 1)};
    blocks(g, p2, lo, hi, &x.soff, &x.slen);
    blocks(g, p2, plo, plo + span, &x.roff, &x.rlen);
    hd_marks ignored = {0}, received = {0}, merged = {0};
    hd_exchange(c, &x, w, &sent[k - 1], &ignored, &received);
    marks_merge(plan, &merged, w, &received);
    marks_free(plan, &ignored);
    marks_free(plan, &received);
    marks_free(plan, w);
    *w = merged;
    lo = lo < plo ? lo : plo;
    hi = lo + 2 * span;
  }
  for (uint32_t k = 0; k < L; k++) {
    marks_free(plan, &sent[k]);
  }
}

static int hd_allreduce(coll_plan *plan, const coll_geom *g) {
  uint32_t n = g->world, r = g->rank;
  uint32_t L;
  uint32_t p2 = coll_fold_p2(n, &L);
  uint32_t rem = n - p2;
  hd_ctx c = {.plan = plan, .g = g, .phases = 2 * L + 2};
  c.stride = coll_plan_nseg(g, g->count, c.phases);
  plan->nseg = c.stride;
  if (n == 1) {
    return 0;
  }
  uint32_t unfold_phase = 2 * L + 1;
  hd_marks none = {0}, sent = {0}, w = {0};
  if (r < 2 * rem && (r & 1u) == 0) {
    /* Fold out: hand everything to r + 1; its result comes back into
     * each range once that range's send completed. */
    hd_xchg out = {.peer = r + 1, .phase = 0, .slen = g->count};
    hd_xchg back = {.peer = r + 1, .phase = unfold_phase, .rlen = g->count};
    hd_exchange(&c, &out, &none, &none, &sent, &w);
    hd_exchange(&c, &back, &none, &sent, &none, &w);
    marks_free(plan, &sent);
    marks_free(plan, &w);
    return plan->err;
  }
  uint64_t scratch = 0;
  if (r < 2 * rem) {
    hd_xchg in = {.peer = r - 1, .phase = 0, .rlen = g->count,
                  .reduce = true};
    hd_exchange(&c, &in, &none, &none, &sent, &w);
    scratch = g->count * g->esz;
  }
  uint32_t v = r < 2 * rem ? r / 2 : r - rem;
  hd_survivor(&c, v, p2, L, rem, scratch, &w);
  if (r < 2 * rem) {
    hd_xchg back = {.peer = r - 1, .phase = unfold_phase, .slen = g->count};
    hd_exchange(&c, &back, &w, &none, &sent, &none);
  }
  marks_free(plan, &sent);
  marks_free(plan, &w);
  return plan->err;
}

static int hd_broadcast(coll_plan *plan, const coll_geom *g) {
  uint32_t n = g->world;
  uint32_t v = (uint32_t)(((uint64_t)g->rank + n - g->root) % n);
  uint32_t nseg = coll_plan_nseg(g, g->count, 1);
  plan->nseg = nseg;
  /* The parent is v without its lowest set bit; the children are
   * v + 2^i for every i below that bit (all i for the root). */
  uint32_t low = 1;
  while (low < n && !(v & low)) {
    low <<= 1;
  }
  for (uint32_t j = 0; j < nseg; j++) {
    uint64_t off, len;
    dlcp_coll_shard(g->count, nseg, j, &off, &len);
    uint32_t tag = coll_plan_tag(0, nseg, j);
    uint32_t rcv = COLL_NO_STEP;
    if (v != 0) {
      uint32_t parent = (uint32_t)(((uint64_t)(v - low) + g->root) % n);
      rcv = coll_plan_recv(plan, parent, tag, COLL_BUF_WORK, off * g->esz,
                           len * g->esz, off);
    }
    for (uint32_t m = low >> 1; m >= 1; m >>= 1) {
      if (v + m < n) {
        uint32_t child = (uint32_t)(((uint64_t)(v + m) + g->root) % n);
        uint32_t snd = coll_plan_send(plan, child, tag, COLL_BUF_WORK,
                                      off * g->esz, len * g->esz);
        coll_plan_dep(plan, rcv, snd);
      }
    }
  }
  return plan->err;
}

int coll_build_hd(coll_plan *plan, const coll_geom *g) {
  switch (g->kind) {
  case DLCP_COLL_ALLREDUCE:
    return hd_allreduce(plan, g);
  case DLCP_COLL_BROADCAST:
    return hd_broadcast(plan, g);
  case DLCP_COLL_REDUCE_SCATTER:
  case DLCP_COLL_ALLGATHER:
  case DLCP_COLL_BARRIER:
    break;
  }
  return DLCP_ERR_INVALID_ARGUMENT;
}
