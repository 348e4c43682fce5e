/*
 * fuse.c: receives reduced on arrival (dlcp_coll_params.reduce_on_arrival).
 *
 * A plan receives a peer's bytes into scratch (a RECV) and reduces them
 * into their target afterwards (a REDUCE that depends on it).  The copy
 * into scratch and the reduce's second read of it cost two passes over
 * memory the data has long left: on the 10 Gbit/s testbed they were 16 %
 * of a 64 MiB all-reduce's CPU.  Here a RECV whose only dependent is a
 * REDUCE of exactly its bytes hands the driver a place function instead
 * (dlcp_coll_action.recv_place), and each piece is reduced into the
 * target as it arrives, while it is in cache.
 *
 * The target may be written only once the REDUCE's other dependencies are
 * done (a reduce before it into the same range: halving-doubling's
 * previous step, PS's chain of receives; a send of the range), and
 * receives are posted long before that.  So until then a piece goes to
 * the RECV's own buffer, as without fusing, and its range is held; when
 * the last other dependency completes, the held ranges are reduced in and
 * later pieces go straight to the target.  Either way every element gets
 * the same operands in the same order as the unfused plan: results are
 * bit for bit the same.  Missing ranges of a lossy receive are never
 * placed, so they are left as they are (and reported; the output's
 * missing elements are zeroed at the end).
 */
#include <string.h>

#include "coll/exec.h"
#include "coll/reduce.h"

struct coll_fuse {
  dlcp_coll *op;
  uint32_t recv, reduce; /* step indices */
  bool direct;           /* the target is free: pieces go straight to it */
  dlcp_coll_range *held; /* byte ranges of the RECV that are in its buffer
                            and not yet reduced into the target */
  size_t nheld, capheld;
};

/* Whether RECV |v| feeds REDUCE |r| alone and exactly. */
static bool fusable(const dlcp_coll *op, uint32_t v, uint32_t r) {
  const coll_step *rx = &op->plan.steps[v];
  const coll_step *red = &op->plan.steps[r];
  return rx->kind == COLL_STEP_RECV && red->kind == COLL_STEP_REDUCE &&
         red->value == 0 && red->bytes > 0 && rx->buf == red->src_buf &&
         rx->off == red->src_off && rx->bytes == red->bytes &&
         rx->buf != COLL_BUF_EXTRA && red->buf != COLL_BUF_EXTRA &&
         op->out_begin[v + 1] - op->out_begin[v] == 1;
}

int coll_fuse_setup(dlcp_coll *op) {
  const coll_plan *pl = &op->plan;
  const dlcp_mem *mem = op->mem;
  uint32_t n = 0;
  for (uint32_t v = 0; v < pl->nsteps; v++) {
    n += pl->steps[v].kind == COLL_STEP_RECV &&
         op->out_begin[v + 1] - op->out_begin[v] == 1 &&
         fusable(op, v, op->out_list[op->out_begin[v]]);
  }
  if (n == 0) {
    return 0;
  }
  op->fuse = mem->calloc(n, sizeof(coll_fuse), mem->user);
  op->fuse_of = mem->malloc((size_t)pl->nsteps * sizeof(uint32_t), mem->user);
  if (!op->fuse || !op->fuse_of) {
    return DLCP_ERR_NOMEM;
  }
  for (uint32_t i = 0; i < pl->nsteps; i++) {
    op->fuse_of[i] = COLL_NO_STEP;
  }
  for (uint32_t v = 0; v < pl->nsteps; v++) {
    if (pl->steps[v].kind != COLL_STEP_RECV ||
        op->out_begin[v + 1] - op->out_begin[v] != 1) {
      continue;
    }
    uint32_t r = op->out_list[op->out_begin[v]];
    if (fusable(op, v, r)) {
      coll_fuse *f = &op->fuse[op->nfuse];
      f->op = op;
      f->recv = v;
      f->reduce = r;
      op->fuse_of[v] = op->fuse_of[r] = op->nfuse++;
    }
  }
  return 0;
}

void coll_fuse_reset(dlcp_coll *op) {
  for (uint32_t i = 0; i < op->nfuse; i++) {
    op->fuse[i].direct = false;
    op->fuse[i].nheld = 0;
  }
}

void coll_fuse_free(dlcp_coll *op) {
  const dlcp_mem *mem = op->mem;
  for (uint32_t i = 0; i < op->nfuse; i++) {
    mem->free(op->fuse[i].held, mem->user);
  }
  mem->free(op->fuse, mem->user);
  mem->free(op->fuse_of, mem->user);
}

static coll_fuse *fuse_at(const dlcp_coll *op, uint32_t idx) {
  if (!op->fuse_of || idx >= op->plan.nsteps ||
      op->fuse_of[idx] == COLL_NO_STEP) {
    return NULL;
  }
  return &op->fuse[op->fuse_of[idx]];
}

/* Reduces RECV bytes [off, off + len) into the REDUCE's target from
 * |src|. */
static void reduce_into_target(coll_fuse *f, uint64_t off, const void *src,
                               size_t len) {
  dlcp_coll *op = f->op;
  const coll_step *red = &op->plan.steps[f->reduce];
  coll_exec_work_ready(op, red->buf, red->off + off, len, false);
  (void)dlcp_reduce_into(coll_exec_buf_ptr(op, red->buf, red->off) + off, src,
                         len / op->g.esz, op->g.dtype, op->g.op);
}

/* Reduces the held ranges in, from the RECV's buffer. */
static void catch_up(coll_fuse *f) {
  const coll_step *rx = &f->op->plan.steps[f->recv];
  const unsigned char *buf = coll_exec_buf_ptr(f->op, rx->buf, rx->off);
  for (size_t i = 0; i < f->nheld; i++) {
    reduce_into_target(f, f->held[i].offset, buf + f->held[i].offset,
                       (size_t)f->held[i].len);
  }
  f->nheld = 0;
}

static void place(void *user, uint8_t *dst, const uint8_t *payload,
                  size_t len) {
  coll_fuse *f = user;
  dlcp_coll *op = f->op;
  const coll_step *rx = &op->plan.steps[f->recv];
  uint64_t off = (uint64_t)(dst - coll_exec_buf_ptr(op, rx->buf, rx->off));
  if (f->direct) {
    reduce_into_target(f, off, payload, len);
    return;
  }
  memcpy(dst, payload, len);
  dlcp_coll_range *last = f->nheld ? &f->held[f->nheld - 1] : NULL;
  if (last && last->offset + last->len == off) {
    last->len += len;
    return;
  }
  if (f->nheld == f->capheld) {
    size_t ncap = f->capheld ? f->capheld * 2 : 8;
    dlcp_coll_range *n =
        op->mem->realloc(f->held, ncap * sizeof(*n), op->mem->user);
    if (!n) {
      /* No room to remember it: reduce the held ranges and this piece
       * now would break the order, so fail the operation instead. */
      coll_exec_fail(op, DLCP_ERR_NOMEM, -1);
      return;
    }
    f->held = n;
    f->capheld = ncap;
  }
  f->held[f->nheld++] = (dlcp_coll_range){off, len};
}

void coll_fuse_recv(dlcp_coll *op, uint32_t idx, dlcp_coll_action *act) {
  coll_fuse *f = fuse_at(op, idx);
  if (!f || f->recv != idx) {
    return;
  }
  f->direct = op->ndeps[f->reduce] == 1; /* this RECV is all it waits for */
  act->recv_place = place;
  act->recv_place_user = f;
  act->recv_place_unit = (uint32_t)op->g.esz;
}

void coll_fuse_on_release(dlcp_coll *op, uint32_t idx) {
  coll_fuse *f = fuse_at(op, idx);
  if (f && f->reduce == idx && op->ndeps[idx] == 1 &&
      op->state[f->recv] == COLL_ST_ACTIVE) {
    catch_up(f);
    f->direct = true;
  }
}

bool coll_fuse_reduce(dlcp_coll *op, uint32_t idx) {
  coll_fuse *f = fuse_at(op, idx);
  if (!f || f->reduce != idx) {
    return false;
  }
  catch_up(f);
  return true;
}
