/*
 * hd.c: recursive halving-doubling all-reduce (Rabenseifner), the
 * binomial-tree broadcast and its mirror, the binomial-tree reduce.
 *
 * All-reduce model, for n ranks with p2 the largest power of two <= n and
 * rem = n - p2 (MPICH's treatment of other worlds):
 *   fold    the first 2*rem ranks pair up; even rank r sends its whole
 *           vector to r + 1, which reduces it in, and then sits out;
 *           the p2 survivors get virtual ranks v = r/2 (odd r < 2 rem) or
 *           r - rem.
 *   halving log2(p2) steps: with the vector cut into p2 blocks and a
 *           current block range [lo, hi) (initially all), step k pairs v
 *           with v ^ m_k, for the masks m_k (the powers of two below p2)
 *           in hd_masks' order; each keeps the half of the range its bit
 *           of m_k chooses, sends the other half and reduces the
 *           partner's copy of the kept half in.  After the last step v
 *           holds one block fully reduced (and divides it for AVG).
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
 * Steps are separated by join NOPs (all of step k before step k + 1;
 * the doubling receives, posted ahead, excepted), which keeps the edge
 * count linear; pipelining is within a step.
 *
 * Broadcast: the binomial tree on ranks relative to the root: v receives
 * from v minus its lowest set bit, then sends to v + 2^i for the bits below
 * it, segment by segment.
 *
 * Reduce: the same tree the other way: segment by segment, v reduces in
 * what its children v + 2^i send, smallest subtree first and always in
 * that order (so a rank's sum is the same bits run after run), then sends
 * the segment to its parent; log2 n steps where the chain of ring.c takes
 * n - 1, on request (AUTO keeps the chain: docs/collectives.md, "AUTO").
 */
#include "coll/plan.h"

typedef struct hd_ctx {
  coll_plan *plan;
  const coll_geom *g;
  uint32_t stride; /* tag sequence stride: the largest segment count */
  uint32_t phases; /* tag steps in total */
} hd_ctx;

/* hd_masks writes the masks of halving steps 1..L to masks[0..L) (the
 * doubling retraces them).  The first steps move the most data (half the
 * vector, then a quarter, ...), so they pair the ranks that cross the
 * fewest topology boundaries: the masks sorted by the region levels
 * their pairs cross, summed over the virtual ranks (a pair in one rack
 * crosses none, in one pod one, ...).  On a tie the larger mask goes
 * first, as before labels counted: ranks on one host with fewer cores
 * than ranks finish 2-8 MiB 8-13 % sooner that way than nearest first
 * (the partners of the largest exchange are more often on different
 * cores).  On a 2:1 leaf-spine with labels the half vector stays in the
 * rack: 16 ranks in 4 racks of 4 over simulated MLT 1.7-2.3 ms per
 * iteration against 2.7-4.4 with the racks crossed first.  Every rank
 * computes the same order from the same labels. */
static void hd_masks(const coll_geom *g, uint32_t p2, uint32_t L, uint32_t rem,
                     uint32_t *masks) {
  uint64_t cost[32];
  for (uint32_t k = 0; k < L; k++) {
    uint32_t m = p2 >> (k + 1);
    masks[k] = m;
    cost[k] = 0;
    for (uint32_t v = 0; g->topo != NULL && v < p2; v++) {
      const uint32_t *a =
          g->topo + (uint64_t)coll_fold_rank(v, rem) * g->levels;
      const uint32_t *b =
          g->topo + (uint64_t)coll_fold_rank(v ^ m, rem) * g->levels;
      uint32_t shared = g->levels;
      while (shared > 0 && a[shared - 1] == b[shared - 1]) {
        shared--;
      }
      cost[k] += shared; /* the levels below the lowest region they share */
    }
  }
  for (uint32_t i = 1; i < L; i++) { /* insertion sort: stable, L <= 31 */
    for (uint32_t j = i; j > 0 && cost[j] < cost[j - 1]; j--) {
      uint64_t tc = cost[j];
      uint32_t tm = masks[j];
      cost[j] = cost[j - 1];
      masks[j] = masks[j - 1];
      cost[j - 1] = tc;
      masks[j - 1] = tm;
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

/*
 * One exchange of element ranges with |peer|: send [soff, soff+slen) from
 * WORK, receive [roff, roff+rlen) into WORK (|reduce| false) or into
 * scratch at |scratch_off| and reduce it in.  Segments of each range are
 * cut alike on both sides (the partner's send range is our receive range).
 * Sends and reduces wait for |after|; a receive into scratch (|reduce|)
 * for |recv_after| only, one into WORK for |recv_after| when there is one
 * (the doubling's, posted ahead), else for |after|.  Adds the sends to
 * |send_join| and the receives, the reduces and |after| to the returned
 * join.
 */
static uint32_t hd_exchange(hd_ctx *c, uint32_t peer, uint32_t phase,
                            uint64_t soff, uint64_t slen, uint64_t roff,
                            uint64_t rlen, bool reduce, uint64_t scratch_off,
                            uint32_t after, uint32_t recv_after,
                            uint32_t send_join) {
  coll_plan *plan = c->plan;
  const coll_geom *g = c->g;
  coll_step nop = {.kind = COLL_STEP_NOP, .elem = COLL_NO_ELEM};
  uint32_t join = coll_plan_add(plan, &nop);
  /* The join is the next step's |after|: it follows this one's as well,
   * since receives that wait only for |recv_after| no longer carry it. */
  coll_plan_dep(plan, after, join);
  uint32_t ns = coll_plan_nseg(g, slen, c->phases);
  uint32_t nr = coll_plan_nseg(g, rlen, c->phases);
  for (uint32_t j = 0; j < ns; j++) {
    uint64_t o, l;
    dlcp_coll_shard(slen, ns, j, &o, &l);
    uint32_t snd = coll_plan_send(plan, peer,
                                  coll_plan_tag(phase, c->stride, j),
                                  COLL_BUF_WORK, (soff + o) * g->esz,
                                  l * g->esz);
    coll_plan_dep(plan, after, snd);
    coll_plan_dep(plan, snd, send_join);
  }
  for (uint32_t j = 0; j < nr; j++) {
    uint64_t o, l;
    dlcp_coll_shard(rlen, nr, j, &o, &l);
    uint32_t tag = coll_plan_tag(phase, c->stride, j);
    if (reduce) {
      uint32_t rcv = coll_plan_recv(plan, peer, tag, COLL_BUF_SCRATCH,
                                    scratch_off + o * g->esz, l * g->esz,
                                    roff + o);
      uint32_t x = coll_plan_reduce(plan, COLL_BUF_WORK, (roff + o) * g->esz,
                                    COLL_BUF_SCRATCH,
                                    scratch_off + o * g->esz, l * g->esz);
      coll_plan_dep(plan, recv_after, rcv);
      coll_plan_dep(plan, rcv, x);
      coll_plan_dep(plan, after, x);
      coll_plan_dep(plan, x, join);
    } else {
      uint32_t rcv = coll_plan_recv(plan, peer, tag, COLL_BUF_WORK,
                                    (roff + o) * g->esz, l * g->esz,
                                    roff + o);
      coll_plan_dep(plan, recv_after != COLL_NO_STEP ? recv_after : after, rcv);
      coll_plan_dep(plan, rcv, join);
    }
  }
  return join;
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
  coll_step nop = {.kind = COLL_STEP_NOP, .elem = COLL_NO_ELEM};
  uint32_t unfold_phase = 2 * L + 1;
  if (r < 2 * rem && (r & 1u) == 0) {
    /* Fold out: hand everything to r + 1, wait for the result. */
    uint32_t sj = coll_plan_add(plan, &nop);
    uint32_t fold = hd_exchange(&c, r + 1, 0, 0, g->count, 0, 0, false, 0,
                                COLL_NO_STEP, COLL_NO_STEP, sj);
    hd_exchange(&c, r + 1, unfold_phase, 0, 0, 0, g->count, false, 0, fold,
                sj, coll_plan_add(plan, &nop));
    return plan->err;
  }
  uint64_t scratch = 0;
  uint32_t after = COLL_NO_STEP;
  uint32_t send_join = coll_plan_add(plan, &nop); /* all halving sends */
  if (r < 2 * rem) {
    after = hd_exchange(&c, r - 1, 0, 0, 0, 0, g->count, true, 0,
                        COLL_NO_STEP, COLL_NO_STEP, send_join);
    scratch = g->count * g->esz;
  }
  uint32_t v = r < 2 * rem ? r / 2 : r - rem;
  uint32_t lo = 0, hi = p2;
  uint64_t scratch_off = 0;
  uint32_t masks[32];
  hd_masks(g, p2, L, rem, masks);
  for (uint32_t k = 1; k <= L; k++) {
    uint32_t mask = masks[k - 1];
    uint32_t peer = coll_fold_rank(v ^ mask, rem);
    uint32_t mid = lo + (hi - lo) / 2;
    uint32_t klo = (v & mask) ? mid : lo, khi = (v & mask) ? hi : mid;
    uint32_t slo = (v & mask) ? lo : mid, shi = (v & mask) ? mid : hi;
    uint64_t soff, slen, koff, klen;
    blocks(g, p2, slo, shi, &soff, &slen);
    blocks(g, p2, klo, khi, &koff, &klen);
    /* The fold's scratch is free again once the fold reduce ran (after),
     * but separate offsets keep the dependencies trivial: the total is at
     * most twice the vector. */
    after = hd_exchange(&c, peer, k, soff, slen, koff, klen, true,
                        scratch + scratch_off, after, COLL_NO_STEP,
                        send_join);
    scratch_off += klen * g->esz;
    lo = klo;
    hi = khi;
  }
  plan->scratch_bytes = scratch + scratch_off;
  if (g->op == DLCP_AVG) {
    uint64_t off, len;
    blocks(g, p2, lo, hi, &off, &len);
    if (len > 0) {
      uint32_t f = coll_plan_finish(plan, COLL_BUF_WORK, off * g->esz,
                                    len * g->esz);
      coll_plan_dep(plan, after, f);
      after = f;
    }
  }
  /* Doubling: receive the partner's range into place.  Those ranges were
   * all sent away during halving and no later step reads or writes them
   * before their receive, so every doubling receive is posted once the
   * halving sends are done (send_join), not step by step: its START is at
   * the partner before the partner's send, as the halving receives' are
   * (a 16-rank 64 KB all-reduce over simulated MLT: 101.3 -> 83.2 us;
   * docs/collectives.md).  The sends still go step by step (the joins
   * chain through |after|). */
  uint32_t dj = coll_plan_add(plan, &nop);
  for (uint32_t k = L; k >= 1; k--) {
    uint32_t mask = masks[k - 1];
    uint32_t peer = coll_fold_rank(v ^ mask, rem);
    uint32_t span = hi - lo;
    uint32_t plo = (v & mask) ? lo - span : hi;
    uint64_t soff, slen, roff, rlen;
    blocks(g, p2, lo, hi, &soff, &slen);
    blocks(g, p2, plo, plo + span, &roff, &rlen);
    after = hd_exchange(&c, peer, L + (L - k + 1), soff, slen, roff, rlen,
                        false, 0, after, send_join, dj);
    lo = lo < plo ? lo : plo;
    hi = lo + 2 * span;
  }
  if (r < 2 * rem) {
    hd_exchange(&c, r - 1, unfold_phase, 0, g->count, 0, 0, false, 0, after,
                COLL_NO_STEP, coll_plan_add(plan, &nop));
  }
  return plan->err;
}

/* This rank's place in the binomial tree rooted at g->root: its rank |v|
 * relative to the root and |v|'s lowest set bit (for the root, the least
 * power of two >= n).  The parent is v - low; the children are v + 2^i
 * below n for every 2^i < low. */
static uint32_t tree_place(const coll_geom *g, uint32_t *low) {
  uint32_t n = g->world;
  uint32_t v = (uint32_t)(((uint64_t)g->rank + n - g->root) % n);
  *low = 1;
  while (*low < n && !(v & *low)) {
    *low <<= 1;
  }
  return v;
}

static int hd_broadcast(coll_plan *plan, const coll_geom *g) {
  uint32_t n = g->world, low;
  uint32_t v = tree_place(g, &low);
  uint32_t nseg = coll_plan_nseg(g, g->count, 1);
  plan->nseg = nseg;
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

static int hd_reduce(coll_plan *plan, const coll_geom *g) {
  uint32_t n = g->world, low;
  uint32_t v = tree_place(g, &low);
  uint32_t nseg = coll_plan_nseg(g, g->count, 1);
  plan->nseg = nseg;
  uint32_t nchild = 0;
  for (uint32_t m = 1; m < low && v + m < n; m <<= 1) {
    nchild++;
  }
  /* Each child's segments arrive in two scratch slots taken in turn; a
   * slot is received into again once its last segment was reduced in. */
  uint64_t seg_max = (g->count + nseg - 1) / nseg * g->esz;
  plan->scratch_bytes = 2 * nchild * seg_max;
  uint32_t reduced[2 * 32];
  for (uint32_t i = 0; i < 2 * nchild; i++) {
    reduced[i] = COLL_NO_STEP;
  }
  for (uint32_t j = 0; j < nseg; j++) {
    uint64_t off, len;
    dlcp_coll_shard(g->count, nseg, j, &off, &len);
    uint32_t tag = coll_plan_tag(0, nseg, j);
    uint32_t last = COLL_NO_STEP;
    for (uint32_t c = 0; c < nchild; c++) {
      uint32_t child =
          (uint32_t)(((uint64_t)v + (1u << c) + g->root) % n);
      uint32_t slot = 2 * c + j % 2;
      uint32_t rcv = coll_plan_recv(plan, child, tag, COLL_BUF_SCRATCH,
                                    slot * seg_max, len * g->esz, off);
      coll_plan_dep(plan, reduced[slot], rcv);
      uint32_t add = coll_plan_reduce(plan, COLL_BUF_WORK, off * g->esz,
                                      COLL_BUF_SCRATCH, slot * seg_max,
                                      len * g->esz);
      coll_plan_dep(plan, rcv, add);
      coll_plan_dep(plan, last, add);
      reduced[slot] = add;
      last = add;
    }
    if (v != 0) {
      uint32_t parent = (uint32_t)(((uint64_t)(v - low) + g->root) % n);
      uint32_t snd = coll_plan_send(plan, parent, tag, COLL_BUF_WORK,
                                    off * g->esz, len * g->esz);
      coll_plan_dep(plan, last, snd);
    } else if (g->op == DLCP_AVG && n > 1) {
      uint32_t fin = coll_plan_finish(plan, COLL_BUF_WORK, off * g->esz,
                                      len * g->esz);
      coll_plan_dep(plan, last, fin);
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
  case DLCP_COLL_REDUCE:
    return hd_reduce(plan, g);
  case DLCP_COLL_REDUCE_SCATTER:
  case DLCP_COLL_ALLGATHER:
  case DLCP_COLL_BARRIER:
    break;
  }
  return DLCP_ERR_INVALID_ARGUMENT;
}
