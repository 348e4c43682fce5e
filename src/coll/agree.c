/*
 * agree.c: the end-of-operation agreement on missing output ranges.
 *
 * Model: with a loss bound p > 0 a receive may complete with holes.  A
 * rank knows only the holes of its own receives; a hole upstream silently
 * corrupts what it forwards.  So every rank records the output elements
 * its holes stand for (coll_exec_taint), and when the plan is done the
 * ranks compute the union of all records by recursive doubling: in round
 * k each of the p2 ranks (p2 the largest power of two <= n) sends the
 * union it knows to rank r ^ 2^k and merges the one it receives, so after
 * log2 p2 rounds every one of them holds the union of all.  A rank r >=
 * p2 first sends its list to r - p2, which merges it before the rounds
 * and sends it the union after them.  Every element outside the union was
 * computed only from fully delivered transfers, so it is exact; every
 * element inside it is zeroed on every rank.  Each hop is a NOTE carrying
 * the list's length followed, if the list is not empty, by one reliable
 * transfer (loss bound 0, tag class 3) of 16 bytes per range
 * (wire/ranges.h).
 * Cost: ceil(log2 n) hops of small messages (plus two for ranks beyond a
 * power of two), only when p > 0.  A binomial tree that gathered the
 * lists on rank 0 and sent the union back down took twice as many.
 */
#include <string.h>

#include "coll/exec.h"
#include "wire/ranges.h"

/* Tag sequences of the agreement's transfers: the fold's two directions,
 * then one per round. */
#define AGREE_SEQ_FOLD_IN 0u
#define AGREE_SEQ_FOLD_OUT 1u
#define AGREE_SEQ_ROUND(k) (2u + (k))

static void peer_init(coll_agree_peer *p, uint32_t rank) {
  memset(p, 0, sizeof(*p));
  p->rank = rank;
  p->count = -1;
}

void coll_agree_init(dlcp_coll *op) {
  coll_agree *a = &op->agree;
  memset(a, 0, sizeof(*a));
  peer_init(&a->fold, UINT32_MAX);
  uint32_t r = op->g.rank, n = op->g.world;
  if (n < 2) {
    return;
  }
  uint32_t p2 = 1;
  while (p2 * 2 <= n) {
    p2 *= 2;
  }
  if (r >= p2) {
    a->extra = true;
    peer_init(&a->fold, r - p2);
    return;
  }
  if (r < n - p2) {
    peer_init(&a->fold, r + p2);
  }
  for (uint32_t m = 1; m < p2; m <<= 1) {
    peer_init(&a->round[a->nrounds++], r ^ m);
  }
}

void coll_agree_free(dlcp_coll *op) {
  coll_agree *a = &op->agree;
  const dlcp_mem *mem = op->mem;
  mem->free(a->fold.buf, mem->user);
  mem->free(a->fold.sent, mem->user);
  for (uint32_t i = 0; i < a->nrounds; i++) {
    mem->free(a->round[i].buf, mem->user);
    mem->free(a->round[i].sent, mem->user);
  }
  mem->free(a->u, mem->user);
}

/* The slot of |peer|'s list that travels in a transfer of sequence |seq|,
 * or NULL if no such list is expected from it. */
static coll_agree_peer *slot(dlcp_coll *op, uint32_t peer, uint32_t seq) {
  coll_agree *a = &op->agree;
  if (peer == a->fold.rank &&
      seq == (a->extra ? AGREE_SEQ_FOLD_OUT : AGREE_SEQ_FOLD_IN)) {
    return &a->fold;
  }
  for (uint32_t k = 0; k < a->nrounds; k++) {
    if (a->round[k].rank == peer && seq == AGREE_SEQ_ROUND(k)) {
      return &a->round[k];
    }
  }
  return NULL;
}

/* Sends the union known so far to |p| as a NOTE and, if not empty, a list
 * of sequence |seq|; the encoded list stays in p->sent until freed. */
static int send_union(dlcp_coll *op, coll_agree_peer *p, int kind,
                      uint32_t seq) {
  coll_agree *a = &op->agree;
  int rv = coll_exec_note(op, p->rank, DLCP_COLL_NOTE(kind, a->nu));
  if (rv != 0 || a->nu == 0) {
    return rv;
  }
  p->sent = op->mem->malloc(a->nu * DLCP_WIRE_RANGE_LEN, op->mem->user);
  if (!p->sent) {
    return DLCP_ERR_NOMEM;
  }
  for (size_t i = 0; i < a->nu; i++) {
    dlcp_wire_put_range(p->sent, i, a->u[i].offset, a->u[i].len);
  }
  dlcp_coll_action act = {.type = DLCP_COLL_ACT_SEND,
                          .peer = p->rank,
                          .tag = DLCP_COLL_TAG(DLCP_COLL_TAG_AGREE, seq),
                          .send_buf = p->sent,
                          .bytes = a->nu * DLCP_WIRE_RANGE_LEN,
                          .loss_bound = 0.0};
  rv = coll_exec_push(op, &act);
  if (rv == 0) {
    a->sends_outstanding++;
  }
  return rv;
}

/* Merges |p|'s received list into the union, checking its ranges against
 * the vector: a peer's list is input, not trusted.  With |replace| the
 * list is the final union and replaces ours (which it contains). */
static int absorb(dlcp_coll *op, const coll_agree_peer *p, bool replace) {
  coll_agree *a = &op->agree;
  const dlcp_mem *mem = op->mem;
  size_t keep = replace ? 0 : a->nu;
  size_t total = keep + (size_t)p->count;
  dlcp_coll_range *u = mem->malloc((total ? total : 1) * sizeof(*u),
                                   mem->user);
  if (!u) {
    return DLCP_ERR_NOMEM;
  }
  if (keep) {
    memcpy(u, a->u, keep * sizeof(*u));
  }
  size_t n = keep;
  for (int64_t i = 0; i < p->count; i++) {
    uint64_t off, len;
    dlcp_wire_get_range(p->buf, (size_t)i, &off, &len);
    if (off > op->g.count || len > op->g.count - off) {
      mem->free(u, mem->user);
      return DLCP_ERR_BAD_OFFSET;
    }
    u[n++] = (dlcp_coll_range){off, len};
  }
  mem->free(a->u, mem->user);
  a->u = u;
  a->nu = coll_ranges_normalize(u, n);
  return 0;
}

/* A copy of |n| ranges (never NULL for n = 0), or NULL without memory. */
static dlcp_coll_range *copy_ranges(const dlcp_coll *op,
                                    const dlcp_coll_range *r, size_t n) {
  dlcp_coll_range *c = op->mem->malloc((n ? n : 1) * sizeof(*c),
                                       op->mem->user);
  if (c && n) {
    memcpy(c, r, n * sizeof(*c));
  }
  return c;
}

/* The union is final: it becomes the operation's missing ranges. */
static int conclude(dlcp_coll *op) {
  coll_agree *a = &op->agree;
  op->missing = copy_ranges(op, a->u, a->nu);
  if (!op->missing) {
    return DLCP_ERR_NOMEM;
  }
  op->nmissing = a->nu;
  a->final_known = true;
  return 0;
}

static int progress(dlcp_coll *op, dlcp_tstamp now) {
  coll_agree *a = &op->agree;
  int rv;
  if (!a->started || a->done) {
    return 0;
  }
  if (a->extra) {
    if (!a->folded) {
      a->folded = true;
      rv = send_union(op, &a->fold, DLCP_COLL_NOTE_AGREE_UP,
                      AGREE_SEQ_FOLD_IN);
      if (rv != 0) {
        return rv;
      }
    }
    if (!a->final_known) {
      if (!a->fold.received) {
        return 0;
      }
      if ((rv = absorb(op, &a->fold, true)) != 0 ||
          (rv = conclude(op)) != 0) {
        return rv;
      }
    }
  } else {
    if (!a->folded && a->fold.rank != UINT32_MAX) {
      if (!a->fold.received) {
        return 0;
      }
      if ((rv = absorb(op, &a->fold, false)) != 0) {
        return rv;
      }
    }
    a->folded = true;
    while (a->next_round < a->nrounds) {
      coll_agree_peer *p = &a->round[a->next_round];
      if (!a->round_sent) {
        a->round_sent = true;
        rv = send_union(op, p, DLCP_COLL_NOTE_AGREE_ROUND,
                        AGREE_SEQ_ROUND(a->next_round));
        if (rv != 0) {
          return rv;
        }
      }
      if (!p->received) {
        return 0;
      }
      if ((rv = absorb(op, p, false)) != 0) {
        return rv;
      }
      a->next_round++;
      a->round_sent = false;
    }
    if (!a->final_known) {
      if ((rv = conclude(op)) != 0) {
        return rv;
      }
      if (a->fold.rank != UINT32_MAX) {
        rv = send_union(op, &a->fold, DLCP_COLL_NOTE_AGREE_DOWN,
                        AGREE_SEQ_FOLD_OUT);
        if (rv != 0) {
          return rv;
        }
      }
    }
  }
  if (a->sends_outstanding == 0) {
    a->done = true;
    coll_exec_finalize(op, now);
  }
  return 0;
}

int coll_agree_start(dlcp_coll *op, dlcp_tstamp now) {
  coll_agree *a = &op->agree;
  op->ntaint = coll_ranges_normalize(op->taint, op->ntaint);
  a->u = copy_ranges(op, op->taint, op->ntaint);
  if (!a->u) {
    return DLCP_ERR_NOMEM;
  }
  a->nu = op->ntaint;
  a->started = true;
  return progress(op, now);
}

uint32_t coll_agree_awaited(const dlcp_coll *op) {
  const coll_agree *a = &op->agree;
  if (!a->started || a->done || a->final_known) {
    return UINT32_MAX;
  }
  if (a->extra || (!a->folded && a->fold.rank != UINT32_MAX)) {
    return a->fold.count < 0 ? a->fold.rank : UINT32_MAX;
  }
  const coll_agree_peer *p = &a->round[a->next_round];
  return p->count < 0 ? p->rank : UINT32_MAX;
}

static int fail(dlcp_coll *op, int rv, int32_t peer) {
  if (rv != 0) {
    coll_exec_fail(op, rv, peer);
  }
  return rv;
}

/* The sequence of the list a NOTE of |kind| announces. */
static uint32_t seq_of_note(const coll_agree *a, uint64_t kind,
                            uint32_t peer) {
  switch (kind) {
  case DLCP_COLL_NOTE_AGREE_UP:
    return AGREE_SEQ_FOLD_IN;
  case DLCP_COLL_NOTE_AGREE_DOWN:
    return AGREE_SEQ_FOLD_OUT;
  case DLCP_COLL_NOTE_AGREE_ROUND:
    for (uint32_t k = 0; k < a->nrounds; k++) {
      if (a->round[k].rank == peer) {
        return AGREE_SEQ_ROUND(k);
      }
    }
    return UINT32_MAX;
  default:
    return UINT32_MAX;
  }
}

int coll_agree_on_note(dlcp_coll *op, uint32_t peer, uint64_t value,
                       dlcp_tstamp now) {
  uint64_t kind = value >> DLCP_COLL_NOTE_KIND_SHIFT;
  uint64_t count = value & DLCP_COLL_NOTE_ARG_MASK;
  uint32_t seq = seq_of_note(&op->agree, kind, peer);
  coll_agree_peer *p = slot(op, peer, seq);
  if (!p || p->count >= 0) {
    return DLCP_ERR_BAD_TYPE;
  }
  /* A list can hold at most one range per element of the vector. */
  if (count > op->g.count + 1) {
    return fail(op, DLCP_ERR_BAD_LENGTH, (int32_t)peer);
  }
  p->count = (int64_t)count;
  if (count == 0) {
    p->received = true;
    return fail(op, progress(op, now), -1);
  }
  p->buf = op->mem->malloc((size_t)count * DLCP_WIRE_RANGE_LEN, op->mem->user);
  if (!p->buf) {
    return fail(op, DLCP_ERR_NOMEM, -1);
  }
  dlcp_coll_action a = {.type = DLCP_COLL_ACT_RECV,
                        .peer = peer,
                        .tag = DLCP_COLL_TAG(DLCP_COLL_TAG_AGREE, seq),
                        .recv_buf = p->buf,
                        .bytes = count * DLCP_WIRE_RANGE_LEN,
                        .loss_bound = 0.0};
  return fail(op, coll_exec_push(op, &a), -1);
}

int coll_agree_on_sent(dlcp_coll *op, uint32_t peer, uint32_t tag,
                       int status, dlcp_tstamp now) {
  (void)tag;
  if (op->agree.sends_outstanding == 0) {
    return DLCP_ERR_UNKNOWN_TRANSFER;
  }
  if (status < 0) {
    coll_exec_fail(op, status, (int32_t)peer);
    return 0;
  }
  op->agree.sends_outstanding--;
  return fail(op, progress(op, now), -1);
}

int coll_agree_on_received(dlcp_coll *op, uint32_t peer, uint32_t tag,
                           int status, size_t nmissing, dlcp_tstamp now) {
  coll_agree_peer *p = slot(op, peer, tag & DLCP_COLL_TAG_SEQ_MASK);
  if (!p || p->count <= 0 || p->received) {
    return DLCP_ERR_UNKNOWN_TRANSFER;
  }
  if (status < 0) {
    coll_exec_fail(op, status, (int32_t)peer);
    return 0;
  }
  if (nmissing > 0) { /* posted with loss bound 0 */
    return fail(op, DLCP_ERR_SIZE_MISMATCH, (int32_t)peer);
  }
  p->received = true;
  return fail(op, progress(op, now), -1);
}
