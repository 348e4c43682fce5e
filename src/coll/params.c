/*
 * params.c: a collective's parameters: their defaults, their checks, and
 * the geometry the plan builders see (coll_geom, plan.h).
 */
#include <string.h>

#include "coll/coll.h"
#include "coll/plan.h"
#include "coll/reduce.h"

void dlcp_coll_params_default(dlcp_coll_params *p) {
  memset(p, 0, sizeof(*p));
  p->kind = DLCP_COLL_ALLREDUCE;
  p->algo = DLCP_ALGO_AUTO;
  p->world = 1;
  p->dtype = DLCP_FLOAT32;
  p->op = DLCP_SUM;
  p->chunk_bytes = 0; /* by size: coll_plan_nseg */
  p->rat_min_part_bytes = 0;
  p->recv_ahead_bytes = DLCP_COLL_DEFAULT_RECV_AHEAD_BYTES;
  p->bypass_alpha = DLCP_COLL_DEFAULT_BYPASS_ALPHA;
}

void dlcp_coll_shard(uint64_t count, uint32_t parts, uint32_t part,
                     uint64_t *off, uint64_t *len) {
  /* The first count % parts parts get one extra element, so part i starts
   * after i base-sized parts plus min(i, rem) extra elements. */
  uint64_t base = parts ? count / parts : 0;
  uint64_t rem = parts ? count % parts : 0;
  *off = part * base + (part < rem ? part : rem);
  *len = base + (part < rem ? 1u : 0u);
}

const char *dlcp_coll_kind_name(dlcp_coll_kind kind) {
  switch (kind) {
  case DLCP_COLL_ALLREDUCE:
    return "allreduce";
  case DLCP_COLL_REDUCE_SCATTER:
    return "reduce_scatter";
  case DLCP_COLL_ALLGATHER:
    return "allgather";
  case DLCP_COLL_BROADCAST:
    return "broadcast";
  case DLCP_COLL_BARRIER:
    return "barrier";
  case DLCP_COLL_REDUCE:
    return "reduce";
  }
  return "?";
}

static bool kind_valid(dlcp_coll_kind k) {
  return k == DLCP_COLL_ALLREDUCE || k == DLCP_COLL_REDUCE_SCATTER ||
         k == DLCP_COLL_ALLGATHER || k == DLCP_COLL_BROADCAST ||
         k == DLCP_COLL_BARRIER || k == DLCP_COLL_REDUCE;
}

static bool algo_valid(dlcp_algo a) {
  return (unsigned)a < DLCP_COLL_NALGOS;
}

/* Checks |p| (not its buffers) and derives the builders' view of it. */
int coll_params_to_geom(const dlcp_coll_params *p, coll_geom *g) {
  memset(g, 0, sizeof(*g));
  if (!kind_valid(p->kind) || !algo_valid(p->algo) || p->world == 0 ||
      p->rank >= p->world) {
    return DLCP_ERR_INVALID_ARGUMENT;
  }
  if (p->world > DLCP_COLL_MAX_WORLD) {
    return DLCP_ERR_LIMIT;
  }
  size_t esz = dlcp_dtype_size(p->dtype);
  uint64_t count = p->kind == DLCP_COLL_BARRIER ? 0 : p->count;
  if (p->kind != DLCP_COLL_BARRIER && esz == 0) {
    return DLCP_ERR_INVALID_ARGUMENT;
  }
  bool rooted = p->kind == DLCP_COLL_BROADCAST || p->kind == DLCP_COLL_REDUCE;
  if ((p->kind == DLCP_COLL_ALLREDUCE || p->kind == DLCP_COLL_REDUCE ||
       p->kind == DLCP_COLL_REDUCE_SCATTER) &&
      !(p->op == DLCP_SUM || p->op == DLCP_AVG || p->op == DLCP_MIN ||
        p->op == DLCP_MAX)) {
    return DLCP_ERR_INVALID_ARGUMENT;
  }
  if (rooted && p->root >= p->world) {
    return DLCP_ERR_INVALID_ARGUMENT;
  }
  if (p->members && (p->loss_bound != 0.0 ||
                     p->algo == DLCP_ALGO_RING_BYPASS)) {
    return DLCP_ERR_INVALID_ARGUMENT;
  }
  /* Byte offsets must fit both uint64_t arithmetic and size_t. */
  if (esz && count > (uint64_t)(SIZE_MAX / 2) / esz) {
    return DLCP_ERR_INVALID_ARGUMENT;
  }
  if (!(p->loss_bound >= 0.0 && p->loss_bound < 1.0)) {
    return DLCP_ERR_INVALID_ARGUMENT;
  }
  if (p->bypass_alpha != 0.0 && !(p->bypass_alpha > 1.0)) {
    return DLCP_ERR_INVALID_ARGUMENT;
  }
  if (p->topo_levels > DLCP_COLL_MAX_LEVELS ||
      (p->topo_levels > 0 && !p->topo)) {
    return DLCP_ERR_INVALID_ARGUMENT;
  }
  int algo = dlcp_coll_resolve_algo(p);
  if (algo < 0) {
    return DLCP_ERR_INVALID_ARGUMENT;
  }
  g->kind = p->kind;
  g->algo = (dlcp_algo)algo;
  g->rank = p->rank;
  g->world = p->world;
  g->root = rooted ? p->root : 0;
  g->count = count;
  g->esz = esz ? esz : 1;
  g->dtype = p->dtype;
  g->op = p->op;
  g->chunk_bytes = p->chunk_bytes;
  g->rat_min_part = p->rat_min_part_bytes ? p->rat_min_part_bytes
                                          : DLCP_COLL_RAT_MIN_PART_BYTES;
  g->recv_ahead = p->recv_ahead_bytes;
  g->eager = p->exact_bytes;
  g->topo = p->topo_levels ? p->topo : NULL;
  g->levels = p->topo_levels;
  g->rs_copy_out = p->kind == DLCP_COLL_REDUCE_SCATTER && p->sendbuf &&
                   p->sendbuf != p->recvbuf;
  return 0;
}
