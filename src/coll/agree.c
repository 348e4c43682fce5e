/*
 * agree.c: the end-of-operation agreement on missing output ranges.
 *
 * Model: with a loss bound p > 0 a receive may complete with holes.  A
 * rank knows only the holes of its own receives; a hole upstream silently
 * corrupts what it forwards.  So every rank records the output elements
 * its holes stand for (coll_exec_taint), and when the plan is done the
 * ranks compute the union of all records: a binomial tree on rank 0
 * gathers the lists (each rank merges its children's lists with its own
 * and passes the result up), and the root's union travels back down the
 * same tree.  Every element outside the union was computed only from
 * fully delivered transfers, so it is exact; every element inside it is
 * zeroed on every rank.  Each hop is a NOTE carrying the list's length
 * followed, if the list is not empty, by one reliable transfer (loss bound
 * 0, tag class 3) of 16 bytes per range (wire/ranges.h).
 * Cost: 2 ceil(log2 n) hops of small messages, only when p > 0.
 */
#include <string.h>

#include "coll/exec.h"
#include "wire/ranges.h"

/* The binomial tree on rank 0: the parent clears the lowest set bit; the
 * children add each smaller power of two (at most log2 of the largest
 * world, 12, fits COLL_AGREE_MAX_CHILDREN). */
void coll_agree_init(dlcp_coll *op) {
  coll_agree *a = &op->agree;
  memset(a, 0, sizeof(*a));
  a->parent.rank = UINT32_MAX;
  a->parent.count = -1;
  uint32_t r = op->g.rank, n = op->g.world;
  if (n < 2) {
    return;
  }
  uint32_t low = 1;
  while (low < n && !(r & low)) {
    low <<= 1;
  }
  a->parent.rank = r == 0 ? UINT32_MAX : r - low;
  a->nchildren = 0;
  for (uint32_t m = 1; m < low && r + m < n; m <<= 1) {
      coll_agree_peer *c = &a->child[a->nchildren++];
    c->rank = r + m;
    c->count = -1;
  }
  a->tree_built = true;
}

void coll_agree_free(dlcp_coll *op) {
  coll_agree *a = &op->agree;
  const dlcp_mem *mem = op->mem;
  for (uint32_t i = 0; i < a->nchildren; i++) {
    mem->free(a->child[i].buf, mem->user);
  }
  mem->free(a->parent.buf, mem->user);
  mem->free(a->upbuf, mem->user);
  mem->free(a->downbuf, mem->user);
}

static coll_agree_peer *agree_peer(dlcp_coll *op, uint32_t rank) {
  coll_agree *a = &op->agree;
  if (rank == a->parent.rank) {
    return &a->parent;
  }
  for (uint32_t i = 0; i < a->nchildren; i++) {
    if (a->child[i].rank == rank) {
      return &a->child[i];
    }
  }
  return NULL;
}

static unsigned char *encode(dlcp_coll *op, const dlcp_coll_range *r,
                             size_t n) {
  unsigned char *b = op->mem->malloc(n ? n * DLCP_WIRE_RANGE_LEN : 1,
                                     op->mem->user);
  if (!b) {
    return NULL;
  }
  for (size_t i = 0; i < n; i++) {
    dlcp_wire_put_range(b, i, r[i].offset, r[i].len);
  }
  return b;
}

/* Appends the ranges of a received list to |out| (room reserved), checking
 * them against the vector: a peer's list is input, not trusted. */
static int decode(const dlcp_coll *op, const coll_agree_peer *p,
                  dlcp_coll_range *out, size_t *n) {
  for (int64_t i = 0; i < p->count; i++) {
    uint64_t off, len;
    dlcp_wire_get_range(p->buf, (size_t)i, &off, &len);
    if (off > op->g.count || len > op->g.count - off) {
      return DLCP_ERR_BAD_OFFSET;
    }
    out[(*n)++] = (dlcp_coll_range){off, len};
  }
  return 0;
}

static int send_list(dlcp_coll *op, uint32_t peer, int kind, uint32_t seq,
                     const unsigned char *buf, size_t n) {
  int rv = coll_exec_note(op, peer, DLCP_COLL_NOTE(kind, n));
  if (rv != 0 || n == 0) {
    return rv;
  }
  dlcp_coll_action a = {.type = DLCP_COLL_ACT_SEND,
                        .peer = peer,
                        .tag = DLCP_COLL_TAG(DLCP_COLL_TAG_AGREE, seq),
                        .send_buf = buf,
                        .bytes = n * DLCP_WIRE_RANGE_LEN,
                        .loss_bound = 0.0};
  rv = coll_exec_push(op, &a);
  if (rv == 0) {
    op->agree.sends_outstanding++;
  }
  return rv;
}

static int progress(dlcp_coll *op, dlcp_tstamp now) {
  coll_agree *a = &op->agree;
  const dlcp_mem *mem = op->mem;
  int rv;
  if (!a->started || a->done) {
    return 0;
  }
  if (!a->sent_up) {
    size_t total = op->ntaint;
    for (uint32_t i = 0; i < a->nchildren; i++) {
      if (!a->child[i].received) {
        return 0;
      }
      total += (size_t)a->child[i].count;
    }
    /* Merge own and children's lists. */
    dlcp_coll_range *u = mem->malloc((total ? total : 1) * sizeof(*u),
                                     mem->user);
    if (!u) {
      return DLCP_ERR_NOMEM;
    }
    if (op->ntaint) {
      memcpy(u, op->taint, op->ntaint * sizeof(*u));
    }
    size_t n = op->ntaint;
    for (uint32_t i = 0; i < a->nchildren; i++) {
      rv = decode(op, &a->child[i], u, &n);
      if (rv != 0) {
        mem->free(u, mem->user);
        return rv;
      }
    }
    n = coll_ranges_normalize(u, n);
    a->sent_up = true;
    if (a->parent.rank == UINT32_MAX) {
      op->missing = u;
      op->nmissing = n;
      a->final_known = true;
    } else {
      a->upbuf = encode(op, u, n);
      mem->free(u, mem->user);
      if (!a->upbuf) {
        return DLCP_ERR_NOMEM;
      }
      rv = send_list(op, a->parent.rank, DLCP_COLL_NOTE_AGREE_UP, 0,
                     a->upbuf, n);
      if (rv != 0) {
        return rv;
      }
    }
  }
  if (!a->final_known) {
    if (!a->parent.received) {
      return 0;
    }
    size_t n = 0;
    dlcp_coll_range *u = mem->malloc(
        (a->parent.count > 0 ? (size_t)a->parent.count : 1) * sizeof(*u),
        mem->user);
    if (!u) {
      return DLCP_ERR_NOMEM;
    }
    rv = decode(op, &a->parent, u, &n);
    if (rv != 0) {
      mem->free(u, mem->user);
      return rv;
    }
    op->missing = u;
    op->nmissing = n;
    a->final_known = true;
    if (a->nchildren > 0) {
      a->downbuf = encode(op, u, n);
      if (!a->downbuf) {
        return DLCP_ERR_NOMEM;
      }
    }
    for (uint32_t i = 0; i < a->nchildren; i++) {
      rv = send_list(op, a->child[i].rank, DLCP_COLL_NOTE_AGREE_DOWN, 1,
                     a->downbuf, n);
      if (rv != 0) {
        return rv;
      }
    }
  } else if (a->parent.rank == UINT32_MAX && !a->downbuf &&
             a->nchildren > 0) {
    /* The root: send the union down. */
    a->downbuf = encode(op, op->missing, op->nmissing);
    if (!a->downbuf) {
      return DLCP_ERR_NOMEM;
    }
    for (uint32_t i = 0; i < a->nchildren; i++) {
      rv = send_list(op, a->child[i].rank, DLCP_COLL_NOTE_AGREE_DOWN, 1,
                     a->downbuf, op->nmissing);
      if (rv != 0) {
        return rv;
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
  a->started = true;
  return progress(op, now);
}

uint32_t coll_agree_awaited(const dlcp_coll *op) {
  const coll_agree *a = &op->agree;
  if (!a->started || a->done) {
    return UINT32_MAX;
  }
  if (!a->sent_up) {
    for (uint32_t i = 0; i < a->nchildren; i++) {
      if (a->child[i].count < 0) {
        return a->child[i].rank;
      }
    }
    return UINT32_MAX;
  }
  if (!a->final_known && a->parent.count < 0) {
    return a->parent.rank;
  }
  return UINT32_MAX;
}

static int fail(dlcp_coll *op, int rv, int32_t peer) {
  if (rv != 0) {
    coll_exec_fail(op, rv, peer);
  }
  return rv;
}

int coll_agree_on_note(dlcp_coll *op, uint32_t peer, uint64_t value,
                       dlcp_tstamp now) {
  uint64_t kind = value >> DLCP_COLL_NOTE_KIND_SHIFT;
  uint64_t count = value & DLCP_COLL_NOTE_ARG_MASK;
  coll_agree_peer *p = agree_peer(op, peer);
  bool from_parent = p && p == &op->agree.parent;
  if (!p || p->count >= 0 ||
      (kind == DLCP_COLL_NOTE_AGREE_UP) == from_parent) {
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
                        .tag = DLCP_COLL_TAG(DLCP_COLL_TAG_AGREE,
                                             from_parent ? 1u : 0u),
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
  coll_agree_peer *p = agree_peer(op, peer);
  uint32_t seq = tag & DLCP_COLL_TAG_SEQ_MASK;
  if (!p || p->count <= 0 || p->received ||
      seq != (p == &op->agree.parent ? 1u : 0u)) {
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
