/*
 * ring.c: ring plans: all-reduce (reduce-scatter + all-gather),
 * reduce-scatter, all-gather, and a pipelined chain broadcast.
 *
 * Model (Baidu's ring, as in Gloo's AllreduceRing): the vector is cut
 * into n chunks (dlcp_coll_shard), one per rank.  In reduce-scatter step
 * s = 0..n-2 rank r sends chunk (r - s + h) to r + 1 and receives chunk
 * (r - s - 1 + h) from r - 1, reducing it into its own copy; the chunk it
 * receives at step s is the one it forwards at step s + 1, so after n - 1
 * steps chunk (r + 1 + h) holds every rank's contribution at rank r.  The
 * shift h is 0 for all-reduce and -1 for reduce-scatter, where rank r must
 * end up owning chunk r.  All-gather then circulates the owned chunks for
 * n - 1 more steps, each rank copying what it receives and forwarding it
 * next step: 2(n - 1) steps, each rank sending 2(n - 1)/n of the vector.
 *
 * Pipelining: each chunk is cut into nseg segments (plan.h's nseg) and
 * every step runs per segment: segment j of step s + 1 only waits for
 * segment j of step s, so up to nseg transfers per direction are in
 * flight and a rank forwards the first segment of a chunk while later ones
 * are still arriving.  Received data lands in one of |banks| scratch banks
 * per segment (step mod banks), so a receive is posted banks - 1 steps
 * before its data is due; a bank is reused after the reduce that read it.
 * Four banks when a chunk is small (dlcp_coll_params.recv_ahead_bytes):
 * a receive over MLT sends its START when posted, and with two banks a
 * one-segment lane posted only one step ahead, so wherever a step is
 * shorter than the START's one-way trip (small chunks, hops between
 * racks) each step waited for it.
 *
 * Tags: step t (reduce-scatter 0..n-2, all-gather n-1..2n-3) and segment j
 * give sequence t * nseg + j; a pair (r, r + 1) has exactly one transfer
 * per (t, j).
 */
#include <string.h>

#include "coll/plan.h"

/* (a + b) mod n for a rank a in [0, n) and a signed offset b, |b| < 2n. */
static uint32_t ring_add(uint32_t a, int64_t b, uint32_t n) {
  int64_t x = ((int64_t)a + b) % (int64_t)n;
  return (uint32_t)(x < 0 ? x + n : x);
}

typedef struct ring_geom {
  uint32_t n, r, next, prev, nseg;
  uint32_t banks;         /* scratch banks per segment lane */
  uint64_t seg_max_bytes; /* scratch slot size */
} ring_geom;

/* Element offset and length of segment |j| of chunk |c|. */
static void seg_of(const coll_geom *g, const ring_geom *rg, uint32_t c,
                   uint32_t j, uint64_t *off, uint64_t *len) {
  uint64_t coff, clen, soff;
  dlcp_coll_shard(g->count, rg->n, c, &coff, &clen);
  dlcp_coll_shard(clen, rg->nseg, j, &soff, len);
  *off = coff + soff;
}

static void ring_init(const coll_geom *g, ring_geom *rg, uint32_t steps) {
  uint64_t max_chunk = (g->count + g->world - 1) / g->world;
  rg->n = g->world;
  rg->r = g->rank;
  rg->next = ring_add(g->rank, 1, g->world);
  rg->prev = ring_add(g->rank, -1, g->world);
  rg->nseg = coll_plan_nseg(g, max_chunk, steps);
  rg->seg_max_bytes = ((max_chunk + rg->nseg - 1) / rg->nseg) * g->esz;
  /* Segments the driver sends eagerly announce nothing, and wait for no
   * receive: two banks.  Above g->recv_ahead two banks: a lane's segment
   * takes longer to send than a fabric's START trip, and the banks'
   * memory grows with the chunk.  (Simulated, leaf-spine at 100 Gbit/s, 24 us
   * base RTT: a 256 KB ring of 128 ranks over 8 racks 2,417 -> 1,719 us with
   * four, DCTCP's 1,710; six or eight banks changed nothing there; a 64 MiB
   * ring of 4 ranks, 16 MiB chunks, none.) */
  rg->banks =
      coll_plan_posts_ahead(g, max_chunk * g->esz, rg->seg_max_bytes) ? 4u : 2u;
  if (rg->banks > rg->n - 1 && rg->n > 1) {
    rg->banks = rg->n - 1; /* one per reduce-scatter step at most */
  }
}

/*
 * Reduce-scatter with shift |h|.  Fills |last[j]| with the step after
 * which segment j of the owned chunk is final, and |sends[s * nseg + j]|
 * with the send of step s (the all-gather needs them for buffer reuse).
 */
static int ring_reduce_scatter(coll_plan *plan, const coll_geom *g,
                               const ring_geom *rg, int64_t h,
                               uint32_t *sends, uint32_t *last,
                               coll_ring_index *ix) {
  uint32_t n = rg->n, nseg = rg->nseg;
  uint32_t *red = plan->mem->calloc((size_t)n * nseg, sizeof(uint32_t),
                                    plan->mem->user);
  if (!red) {
    return DLCP_ERR_NOMEM;
  }
  for (uint32_t s = 0; s + 1 < n; s++) {
    uint32_t send_c = ring_add(rg->r, h - (int64_t)s, n);
    uint32_t recv_c = ring_add(rg->r, h - (int64_t)s - 1, n);
    for (uint32_t j = 0; j < nseg; j++) {
      uint64_t soff, slen, roff, rlen;
      seg_of(g, rg, send_c, j, &soff, &slen);
      seg_of(g, rg, recv_c, j, &roff, &rlen);
      uint32_t tag = coll_plan_tag(s, nseg, j);
      uint64_t bank =
          ((uint64_t)(s % rg->banks) * nseg + j) * rg->seg_max_bytes;
      uint32_t snd = coll_plan_send(plan, rg->next, tag, COLL_BUF_WORK,
                                    soff * g->esz, slen * g->esz);
      uint32_t rcv = coll_plan_recv(plan, rg->prev, tag, COLL_BUF_SCRATCH,
                                    bank, rlen * g->esz, roff);
      uint32_t x = coll_plan_reduce(plan, COLL_BUF_WORK, roff * g->esz,
                                    COLL_BUF_SCRATCH, bank, rlen * g->esz);
      /* Forward what the previous step reduced (it is this step's send
       * chunk); receive into a bank only after the reduce |banks| steps
       * back has read it; reduce once the data is in. */
      if (s > 0) {
        coll_plan_dep(plan, red[(s - 1) * nseg + j], snd);
      }
      if (s >= rg->banks) {
        coll_plan_dep(plan, red[(s - rg->banks) * nseg + j], rcv);
      }
      coll_plan_dep(plan, rcv, x);
      red[s * nseg + j] = x;
      if (sends) {
        sends[s * nseg + j] = snd;
      }
      if (ix) {
        ix->recv[s * nseg + j] = rcv;
        ix->reduce[s * nseg + j] = x;
        ix->send[s * nseg + j] = snd;
      }
    }
  }
  for (uint32_t j = 0; j < nseg; j++) {
    last[j] = n > 1 ? red[(n - 2) * nseg + j] : COLL_NO_STEP;
  }
  plan->mem->free(red, plan->mem->user);
  return plan->err;
}

/* AVG's division on each segment of the owned chunk, after its last
 * reduce; updates |last| to the finish steps. */
static void finish_owned(coll_plan *plan, const coll_geom *g,
                         const ring_geom *rg, uint32_t owned,
                         uint32_t *last) {
  if (g->op != DLCP_AVG || rg->n == 1) {
    return;
  }
  for (uint32_t j = 0; j < rg->nseg; j++) {
    uint64_t off, len;
    seg_of(g, rg, owned, j, &off, &len);
    if (len == 0) {
      continue;
    }
    uint32_t f = coll_plan_finish(plan, COLL_BUF_WORK, off * g->esz,
                                  len * g->esz);
    coll_plan_dep(plan, last[j], f);
    last[j] = f;
  }
}

/*
 * All-gather: rank r starts owning chunk (r + 1 + h); at step t it sends
 * chunk (r + 1 + h - t) and receives chunk (r + h - t) into place.  Tags
 * continue after |t0| earlier steps.  |ready[j]| is the step after which
 * segment j of the owned chunk may be sent; |rs_sends| (may be NULL) the
 * reduce-scatter sends whose ranges the receives overwrite.
 */
static void ring_all_gather(coll_plan *plan, const coll_geom *g,
                            const ring_geom *rg, int64_t h, uint32_t t0,
                            const uint32_t *ready, const uint32_t *rs_sends) {
  uint32_t n = rg->n, nseg = rg->nseg;
  for (uint32_t j = 0; j < nseg; j++) {
    uint32_t prev_recv = ready ? ready[j] : COLL_NO_STEP;
    for (uint32_t t = 0; t + 1 < n; t++) {
      uint32_t send_c = ring_add(rg->r, 1 + h - (int64_t)t, n);
      uint32_t recv_c = ring_add(rg->r, h - (int64_t)t, n);
      uint64_t soff, slen, roff, rlen;
      seg_of(g, rg, send_c, j, &soff, &slen);
      seg_of(g, rg, recv_c, j, &roff, &rlen);
      uint32_t tag = coll_plan_tag(t0 + t, nseg, j);
      uint32_t snd = coll_plan_send(plan, rg->next, tag, COLL_BUF_WORK,
                                    soff * g->esz, slen * g->esz);
      uint32_t rcv = coll_plan_recv(plan, rg->prev, tag, COLL_BUF_WORK,
                                    roff * g->esz, rlen * g->esz, roff);
      /* Send what arrived last step (or the owned chunk); do not
       * overwrite chunk (r + h - t) before the reduce-scatter send that
       * read it at step t completed (every reduce into it precedes that
       * send). */
      coll_plan_dep(plan, prev_recv, snd);
      if (rs_sends) {
        coll_plan_dep(plan, rs_sends[t * nseg + j], rcv);
      }
      prev_recv = rcv;
    }
  }
}

static int ring_index_alloc(coll_plan *plan, uint32_t steps, uint32_t nseg) {
  size_t n = (size_t)steps * nseg;
  const dlcp_mem *mem = plan->mem;
  plan->ring.steps = steps;
  plan->ring.nseg = nseg;
  plan->ring.recv = mem->calloc(n ? n : 1, sizeof(uint32_t), mem->user);
  plan->ring.reduce = mem->calloc(n ? n : 1, sizeof(uint32_t), mem->user);
  plan->ring.send = mem->calloc(n ? n : 1, sizeof(uint32_t), mem->user);
  if (!plan->ring.recv || !plan->ring.reduce || !plan->ring.send) {
    return DLCP_ERR_NOMEM;
  }
  return 0;
}

static int ring_allreduce_or_rs(coll_plan *plan, const coll_geom *g,
                                bool bypass) {
  bool rs = g->kind == DLCP_COLL_REDUCE_SCATTER;
  int64_t h = rs ? -1 : 0;
  ring_geom rg;
  ring_init(g, &rg, rs ? g->world : 2 * g->world);
  plan->nseg = rg.nseg;
  uint32_t n = rg.n, nseg = rg.nseg;
  uint32_t owned = ring_add(rg.r, 1 + h, n);
  if (n == 1) {
    if (rs && g->rs_copy_out) {
      coll_plan_copy(plan, COLL_BUF_OUT, 0, COLL_BUF_WORK, 0,
                     g->count * g->esz);
    }
    return plan->err;
  }
  plan->scratch_bytes = (uint64_t)rg.banks * nseg * rg.seg_max_bytes;
  const dlcp_mem *mem = plan->mem;
  uint32_t *sends = mem->calloc((size_t)n * nseg, sizeof(uint32_t), mem->user);
  uint32_t *last = mem->calloc(nseg, sizeof(uint32_t), mem->user);
  int rv = DLCP_ERR_NOMEM;
  if (!sends || !last) {
    goto out;
  }
  if (bypass) {
    rv = ring_index_alloc(plan, n - 1, nseg);
    if (rv != 0) {
      goto out;
    }
  }
  rv = ring_reduce_scatter(plan, g, &rg, h, sends, last,
                           bypass ? &plan->ring : NULL);
  if (rv != 0) {
    goto out;
  }
  finish_owned(plan, g, &rg, owned, last);
  if (rs) {
    if (g->rs_copy_out) {
      uint64_t coff, clen;
      dlcp_coll_shard(g->count, n, owned, &coff, &clen);
      for (uint32_t j = 0; j < nseg; j++) {
        uint64_t off, len;
        seg_of(g, &rg, owned, j, &off, &len);
        if (len == 0) {
          continue;
        }
        uint32_t c = coll_plan_copy(plan, COLL_BUF_OUT, (off - coff) * g->esz,
                                    COLL_BUF_WORK, off * g->esz,
                                    len * g->esz);
        coll_plan_dep(plan, last[j], c);
      }
    }
  } else {
    ring_all_gather(plan, g, &rg, h, n - 1, last, sends);
  }
  rv = plan->err;
out:
  mem->free(sends, mem->user);
  mem->free(last, mem->user);
  return rv;
}

/* All-gather alone: rank r owns chunk r (h = -1) from the start. */
static int ring_allgather(coll_plan *plan, const coll_geom *g) {
  ring_geom rg;
  ring_init(g, &rg, g->world);
  plan->nseg = rg.nseg;
  if (rg.n > 1) {
    ring_all_gather(plan, g, &rg, -1, 0, NULL, NULL);
  }
  return plan->err;
}

/*
 * Chain broadcast: root -> root+1 -> ... -> root+n-1, the vector cut into
 * segments so that every link is busy at once once the pipe is full: n - 1
 * + nseg - 1 segment times instead of (n - 1) * nseg.
 */
static int ring_broadcast(coll_plan *plan, const coll_geom *g) {
  uint32_t n = g->world;
  uint32_t pos = ring_add(g->rank, -(int64_t)g->root, n);
  uint32_t nseg = coll_plan_nseg(g, g->count, 1);
  plan->nseg = nseg;
  if (n == 1) {
    return 0;
  }
  uint32_t next = ring_add(g->rank, 1, n), prev = ring_add(g->rank, -1, n);
  for (uint32_t j = 0; j < nseg; j++) {
    uint64_t off, len;
    dlcp_coll_shard(g->count, nseg, j, &off, &len);
    uint32_t tag = coll_plan_tag(0, nseg, j);
    uint32_t rcv = COLL_NO_STEP;
    if (pos > 0) {
      rcv = coll_plan_recv(plan, prev, tag, COLL_BUF_WORK, off * g->esz,
                           len * g->esz, off);
    }
    if (pos + 1 < n) {
      uint32_t snd = coll_plan_send(plan, next, tag, COLL_BUF_WORK,
                                    off * g->esz, len * g->esz);
      coll_plan_dep(plan, rcv, snd);
    }
  }
  return plan->err;
}

/* REDUCE: a chain through the ranks after the root, in ring order, ending
 * at the root, pipelined in segments: a rank receives segment j of the
 * partial sum from its predecessor into a scratch slot, adds it into its
 * own, and passes the sum on (the root keeps it).  Two slots alternate,
 * so segment j + 2 is received only once segment j is added. */
static int ring_reduce(coll_plan *plan, const coll_geom *g) {
  uint32_t n = g->world;
  uint32_t pos = ring_add(g->rank, -(int64_t)g->root - 1, n);
  uint32_t nseg = coll_plan_nseg(g, g->count, 1);
  plan->nseg = nseg;
  if (n == 1) {
    return 0; /* AVG over one rank divides by 1 */
  }
  uint64_t seg_max = (g->count + nseg - 1) / nseg * g->esz;
  uint32_t next = ring_add(g->rank, 1, n), prev = ring_add(g->rank, -1, n);
  uint32_t added[2] = {COLL_NO_STEP, COLL_NO_STEP};
  plan->scratch_bytes = pos > 0 ? 2 * seg_max : 0;
  for (uint32_t j = 0; j < nseg; j++) {
    uint64_t off, len;
    dlcp_coll_shard(g->count, nseg, j, &off, &len);
    uint32_t tag = coll_plan_tag(0, nseg, j);
    uint32_t add = COLL_NO_STEP;
    if (pos > 0) {
      uint64_t slot = (j % 2) * seg_max;
      uint32_t rcv = coll_plan_recv(plan, prev, tag, COLL_BUF_SCRATCH, slot,
                                    len * g->esz, off);
      coll_plan_dep(plan, added[j % 2], rcv);
      add = coll_plan_reduce(plan, COLL_BUF_WORK, off * g->esz,
                             COLL_BUF_SCRATCH, slot, len * g->esz);
      coll_plan_dep(plan, rcv, add);
      added[j % 2] = add;
    }
    if (pos + 1 < n) {
      uint32_t snd = coll_plan_send(plan, next, tag, COLL_BUF_WORK,
                                    off * g->esz, len * g->esz);
      coll_plan_dep(plan, add, snd);
    } else if (g->op == DLCP_AVG) {
      uint32_t fin = coll_plan_finish(plan, COLL_BUF_WORK, off * g->esz,
                                      len * g->esz);
      coll_plan_dep(plan, add, fin);
    }
  }
  return plan->err;
}

int coll_build_ring(coll_plan *plan, const coll_geom *g, bool bypass) {
  switch (g->kind) {
  case DLCP_COLL_ALLREDUCE:
  case DLCP_COLL_REDUCE_SCATTER:
    return ring_allreduce_or_rs(plan, g, bypass);
  case DLCP_COLL_ALLGATHER:
    return ring_allgather(plan, g);
  case DLCP_COLL_BROADCAST:
    return ring_broadcast(plan, g);
  case DLCP_COLL_REDUCE:
    return ring_reduce(plan, g);
  case DLCP_COLL_BARRIER:
    break;
  }
  return DLCP_ERR_INVALID_ARGUMENT;
}
