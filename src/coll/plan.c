/*
 * plan.c: building, dispatching and printing collective plans.
 *
 * Model: a plan is an append-only array of steps plus an edge list of
 * "before -> after" dependencies (see plan.h).  Builders append steps in
 * the order the algorithm naturally takes them, which is also the order
 * the executor prefers among ready steps and the order of the text dump.
 * Allocation failures are sticky (plan->err) so builders can append
 * without checking every call and test once at the end.  Empty transfers
 * are turned into NOPs here, in one place, which is what guarantees that
 * both ends of a transfer agree on dropping it: both compute the same
 * byte count from the same parameters.
 */
#include "coll/plan.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "coll/reduce.h"

void coll_plan_init(coll_plan *plan, const dlcp_mem *mem) {
  memset(plan, 0, sizeof(*plan));
  plan->mem = mem ? mem : dlcp_mem_default();
  plan->nseg = 1;
}

void coll_plan_free(coll_plan *plan) {
  const dlcp_mem *mem = plan->mem;
  mem->free(plan->steps, mem->user);
  mem->free(plan->efrom, mem->user);
  mem->free(plan->eto, mem->user);
  mem->free(plan->ring.recv, mem->user);
  mem->free(plan->ring.reduce, mem->user);
  mem->free(plan->ring.send, mem->user);
  memset(plan, 0, sizeof(*plan));
  plan->mem = mem;
}

uint32_t coll_plan_add(coll_plan *plan, const coll_step *st) {
  if (plan->err) {
    return COLL_NO_STEP;
  }
  if (plan->nsteps == plan->cap) {
    uint32_t ncap = plan->cap ? plan->cap * 2 : 64;
    if (ncap >= COLL_NO_STEP / 2) {
      plan->err = DLCP_ERR_LIMIT;
      return COLL_NO_STEP;
    }
    coll_step *n = plan->mem->realloc(plan->steps, ncap * sizeof(*n),
                                      plan->mem->user);
    if (!n) {
      plan->err = DLCP_ERR_NOMEM;
      return COLL_NO_STEP;
    }
    plan->steps = n;
    plan->cap = ncap;
  }
  coll_step *d = &plan->steps[plan->nsteps];
  *d = *st;
  if ((d->kind == COLL_STEP_SEND || d->kind == COLL_STEP_RECV) &&
      d->bytes == 0) {
    d->kind = COLL_STEP_NOP;
  }
  return plan->nsteps++;
}

void coll_plan_dep(coll_plan *plan, uint32_t before, uint32_t after) {
  if (plan->err || before == COLL_NO_STEP || after == COLL_NO_STEP) {
    return;
  }
  if (plan->nedges == plan->ecap) {
    uint32_t ncap = plan->ecap ? plan->ecap * 2 : 128;
    uint32_t *f = plan->mem->realloc(plan->efrom, ncap * sizeof(*f),
                                     plan->mem->user);
    if (!f) {
      plan->err = DLCP_ERR_NOMEM;
      return;
    }
    plan->efrom = f;
    uint32_t *t = plan->mem->realloc(plan->eto, ncap * sizeof(*t),
                                     plan->mem->user);
    if (!t) {
      plan->err = DLCP_ERR_NOMEM;
      return;
    }
    plan->eto = t;
    plan->ecap = ncap;
  }
  plan->efrom[plan->nedges] = before;
  plan->eto[plan->nedges] = after;
  plan->nedges++;
}

uint32_t coll_plan_send(coll_plan *plan, uint32_t peer, uint32_t tag,
                        coll_buf buf, uint64_t off, uint64_t bytes) {
  coll_step st = {.kind = COLL_STEP_SEND,
                  .buf = (uint8_t)buf,
                  .peer = peer,
                  .tag = tag,
                  .off = off,
                  .bytes = bytes,
                  .elem = COLL_NO_ELEM};
  return coll_plan_add(plan, &st);
}

uint32_t coll_plan_recv(coll_plan *plan, uint32_t peer, uint32_t tag,
                        coll_buf buf, uint64_t off, uint64_t bytes,
                        uint64_t elem) {
  coll_step st = {.kind = COLL_STEP_RECV,
                  .buf = (uint8_t)buf,
                  .peer = peer,
                  .tag = tag,
                  .off = off,
                  .bytes = bytes,
                  .elem = elem};
  return coll_plan_add(plan, &st);
}

uint32_t coll_plan_reduce(coll_plan *plan, coll_buf dst, uint64_t dst_off,
                          coll_buf src, uint64_t src_off, uint64_t bytes) {
  coll_step st = {.kind = COLL_STEP_REDUCE,
                  .buf = (uint8_t)dst,
                  .src_buf = (uint8_t)src,
                  .off = dst_off,
                  .src_off = src_off,
                  .bytes = bytes,
                  .elem = COLL_NO_ELEM};
  return coll_plan_add(plan, &st);
}

uint32_t coll_plan_copy(coll_plan *plan, coll_buf dst, uint64_t dst_off,
                        coll_buf src, uint64_t src_off, uint64_t bytes) {
  coll_step st = {.kind = COLL_STEP_COPY,
                  .buf = (uint8_t)dst,
                  .src_buf = (uint8_t)src,
                  .off = dst_off,
                  .src_off = src_off,
                  .bytes = bytes,
                  .elem = COLL_NO_ELEM};
  return coll_plan_add(plan, &st);
}

uint32_t coll_plan_finish(coll_plan *plan, coll_buf buf, uint64_t off,
                          uint64_t bytes) {
  coll_step st = {.kind = COLL_STEP_FINISH,
                  .buf = (uint8_t)buf,
                  .off = off,
                  .bytes = bytes,
                  .elem = COLL_NO_ELEM};
  return coll_plan_add(plan, &st);
}

bool coll_plan_posts_ahead(const coll_geom *g, uint64_t scratch_bytes,
                           uint64_t transfer_bytes) {
  return scratch_bytes <= g->recv_ahead && transfer_bytes > g->eager;
}

uint32_t coll_plan_nseg(const coll_geom *g, uint64_t max_chunk_elems,
                        uint32_t phase_steps) {
  uint64_t bytes = max_chunk_elems * g->esz;
  /* By size: four segments a chunk keep the pipeline full; every segment
   * is a transfer with its own handshake and completion, so large chunks
   * get large segments (4-rank 64 MiB ring on loopback: median 129 ms with
   * 256 KiB segments, 103 ms with 4 MiB). */
  uint64_t chunk = g->chunk_bytes;
  if (chunk == 0) {
    chunk = bytes / 4;
    chunk = chunk < DLCP_COLL_DEFAULT_CHUNK_BYTES ? DLCP_COLL_DEFAULT_CHUNK_BYTES
            : chunk > DLCP_COLL_MAX_AUTO_CHUNK_BYTES
                ? DLCP_COLL_MAX_AUTO_CHUNK_BYTES
                : chunk;
  }
  uint64_t nseg = (bytes + chunk - 1) / chunk;
  uint64_t tag_cap = (uint64_t)(DLCP_COLL_TAG_SEQ_MASK + 1u) /
                     (phase_steps ? phase_steps : 1u);
  if (nseg > tag_cap) {
    nseg = tag_cap; /* larger segments rather than tag collisions */
  }
  if (nseg > max_chunk_elems) {
    nseg = max_chunk_elems;
  }
  return nseg ? (uint32_t)nseg : 1u;
}

uint32_t coll_fold_p2(uint32_t n, uint32_t *log2_p2) {
  uint32_t p2 = 1, l = 0;
  while (p2 * 2 <= n) {
    p2 *= 2;
    l++;
  }
  *log2_p2 = l;
  return p2;
}

uint32_t coll_fold_rank(uint32_t v, uint32_t rem) {
  return v < rem ? 2 * v + 1 : v + rem;
}

uint32_t coll_plan_tag(uint32_t phase_step, uint32_t nseg, uint32_t seg) {
  return DLCP_COLL_TAG(DLCP_COLL_TAG_PLAN, phase_step * nseg + seg);
}

int coll_plan_map_peers(coll_plan *plan, const uint32_t *members,
                        uint32_t world) {
  for (uint32_t i = 0; i < plan->nsteps; i++) {
    coll_step *st = &plan->steps[i];
    switch ((coll_step_kind)st->kind) {
    case COLL_STEP_SEND:
    case COLL_STEP_RECV:
    case COLL_STEP_NOTE:
    case COLL_STEP_WAIT_NOTE:
      if (st->peer >= world) {
        return DLCP_ERR_INVALID_ARGUMENT;
      }
      st->peer = members[st->peer];
      break;
    case COLL_STEP_NOP:
    case COLL_STEP_REDUCE:
    case COLL_STEP_COPY:
    case COLL_STEP_FINISH:
      break;
    }
  }
  return 0;
}

int coll_plan_build(coll_plan *plan, const coll_geom *g) {
  int rv = DLCP_ERR_INVALID_ARGUMENT;
  if (g->kind == DLCP_COLL_BARRIER) {
    rv = coll_build_barrier(plan, g);
  } else {
    switch (g->algo) {
    case DLCP_ALGO_RING:
      rv = coll_build_ring(plan, g, false);
      break;
    case DLCP_ALGO_RING_BYPASS:
      rv = coll_build_ring(plan, g, true);
      break;
    case DLCP_ALGO_PS:
      rv = coll_build_ps(plan, g);
      break;
    case DLCP_ALGO_DIRECT:
      rv = coll_build_direct(plan, g);
      break;
    case DLCP_ALGO_RECURSIVE_DOUBLING:
      rv = coll_build_rd(plan, g);
      break;
    case DLCP_ALGO_HALVING_DOUBLING:
      rv = coll_build_hd(plan, g);
      break;
    case DLCP_ALGO_RAT:
      rv = coll_build_rat(plan, g);
      break;
    case DLCP_ALGO_AUTO:
    case DLCP_ALGO_INA: /* no plan: the switch (src/rt/ina_run.c) */
    case DLCP_ALGO_RA_INA:
      break;
    }
  }
  if (rv == 0 && plan->err) {
    rv = plan->err;
  }
  return rv;
}

/* ---- text dump --------------------------------------------------------- */

typedef struct textbuf {
  char *p;
  size_t len, cap;
  bool overflow;
} textbuf;

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static void tb_printf(textbuf *tb, const char *fmt, ...);

/* snprintf into the caller's buffer, counting what would not fit. */
static void tb_printf(textbuf *tb, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  size_t room = tb->len < tb->cap ? tb->cap - tb->len : 0;
  int n = vsnprintf(tb->p ? tb->p + tb->len : NULL, room, fmt, ap);
  va_end(ap);
  if (n < 0) {
    tb->overflow = true;
    return;
  }
  if ((size_t)n >= room) {
    tb->overflow = true;
  }
  tb->len += (size_t)n;
}

static const char *buf_name(uint8_t b) {
  switch ((coll_buf)b) {
  case COLL_BUF_WORK:
    return "work";
  case COLL_BUF_SCRATCH:
    return "scratch";
  case COLL_BUF_OUT:
    return "out";
  case COLL_BUF_EXTRA:
    return "extra";
  }
  return "?";
}

static void tb_tag(textbuf *tb, uint32_t tag) {
  tb_printf(tb, " tag=%u:%u", tag >> DLCP_COLL_TAG_CLASS_SHIFT,
            tag & DLCP_COLL_TAG_SEQ_MASK);
}

dlcp_ssize coll_plan_format(const coll_plan *plan, const coll_geom *g,
                            char *buf, size_t buflen) {
  textbuf tb = {.p = buf, .cap = buflen};
  tb_printf(&tb,
            "# %s algo=%s rank=%u world=%u count=%llu dtype=%s op=%s "
            "root=%u nseg=%u scratch=%llu steps=%u\n",
            dlcp_coll_kind_name(g->kind), dlcp_algo_name(g->algo), g->rank,
            g->world, (unsigned long long)g->count, dlcp_dtype_name(g->dtype),
            dlcp_redop_name(g->op), g->root, plan->nseg,
            (unsigned long long)plan->scratch_bytes, plan->nsteps);
  for (uint32_t i = 0; i < plan->nsteps; i++) {
    const coll_step *st = &plan->steps[i];
    tb_printf(&tb, "%4u ", i);
    switch ((coll_step_kind)st->kind) {
    case COLL_STEP_NOP:
      tb_printf(&tb, "nop   ");
      break;
    case COLL_STEP_SEND:
      tb_printf(&tb, "send   peer=%u", st->peer);
      tb_tag(&tb, st->tag);
      tb_printf(&tb, " %s[%llu+%llu]", buf_name(st->buf),
                (unsigned long long)st->off, (unsigned long long)st->bytes);
      break;
    case COLL_STEP_RECV:
      tb_printf(&tb, "recv   peer=%u", st->peer);
      tb_tag(&tb, st->tag);
      tb_printf(&tb, " %s[%llu+%llu] elem=%llu", buf_name(st->buf),
                (unsigned long long)st->off, (unsigned long long)st->bytes,
                (unsigned long long)st->elem);
      break;
    case COLL_STEP_REDUCE:
    case COLL_STEP_COPY:
      tb_printf(&tb, "%s %s[%llu+%llu] %s %s[%llu]",
                st->kind == COLL_STEP_REDUCE ? "reduce" : "copy  ",
                buf_name(st->buf), (unsigned long long)st->off,
                (unsigned long long)st->bytes,
                st->kind == COLL_STEP_REDUCE ? "op=" : "=",
                buf_name(st->src_buf), (unsigned long long)st->src_off);
      break;
    case COLL_STEP_FINISH:
      tb_printf(&tb, "finish %s[%llu+%llu]", buf_name(st->buf),
                (unsigned long long)st->off, (unsigned long long)st->bytes);
      break;
    case COLL_STEP_NOTE:
    case COLL_STEP_WAIT_NOTE:
      tb_printf(&tb, "%s peer=%u value=%u:%llu",
                st->kind == COLL_STEP_NOTE ? "note  " : "wait  ", st->peer,
                (unsigned)(st->value >> DLCP_COLL_NOTE_KIND_SHIFT),
                (unsigned long long)(st->value & DLCP_COLL_NOTE_ARG_MASK));
      break;
    }
    /* Dependencies, in the order they were declared. */
    bool any = false;
    for (uint32_t e = 0; e < plan->nedges; e++) {
      if (plan->eto[e] == i) {
        tb_printf(&tb, "%s%u", any ? "," : " after=", plan->efrom[e]);
        any = true;
      }
    }
    tb_printf(&tb, "\n");
  }
  if (tb.overflow) {
    return DLCP_ERR_BUFFER_TOO_SMALL;
  }
  return (dlcp_ssize)tb.len;
}
