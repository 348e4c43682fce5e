/*
 * plan.h: a collective as a static schedule of steps with dependencies.
 *
 * Every algorithm (ring.c, ps.c, hd.c, rat.c, barrier.c) is a builder that
 * turns the parameters into this rank's steps: send a byte range to a
 * peer, receive one, reduce one range into another, copy, divide (AVG's
 * finish), send or await a NOTE.  A step may run once every step it
 * depends on has completed; the executor in coll.c runs them in that
 * order, so the same plan drives the runtime, the simulator and the tests,
 * and plan_dump prints it for golden tests.  Dependencies carry the
 * algorithm's data flow (reduce after receive, forward after reduce) and
 * its buffer reuse (do not receive into a scratch slot before the previous
 * reduce read it; do not overwrite a range before its send completed).
 *
 * Buffers are named, not pointed to, so a plan can be built and dumped
 * without any memory: WORK is the full |count|-element vector the
 * algorithm works in (the caller's recvbuf, or sendbuf for an in-place
 * reduce-scatter, or an internal copy), SCRATCH is plan-sized temporary
 * space, OUT is the caller's recvbuf when it differs from WORK, EXTRA is a
 * buffer allocated at run time (straggler bypass), |off| then indexing the
 * operation's table of them.
 */
#ifndef DLCP_COLL_PLAN_H
#define DLCP_COLL_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "coll/coll.h"
#include "dlcp/dlcp_types.h"

typedef enum coll_step_kind {
  COLL_STEP_NOP,      /* an empty transfer: completes at once on both ends */
  COLL_STEP_SEND,
  COLL_STEP_RECV,
  COLL_STEP_REDUCE,   /* buf[off..] op= src_buf[src_off..], bytes */
  COLL_STEP_COPY,     /* buf[off..] = src_buf[src_off..], bytes */
  COLL_STEP_FINISH,   /* dlcp_reduce_finish on buf[off..], bytes */
  COLL_STEP_NOTE,     /* send NOTE |value| to peer */
  COLL_STEP_WAIT_NOTE /* completes when NOTE |value| from peer arrived */
} coll_step_kind;

typedef enum coll_buf {
  COLL_BUF_WORK,
  COLL_BUF_SCRATCH,
  COLL_BUF_OUT,
  COLL_BUF_EXTRA
} coll_buf;

#define COLL_NO_STEP UINT32_MAX
#define COLL_NO_ELEM UINT64_MAX

typedef struct coll_step {
  uint8_t kind;    /* coll_step_kind */
  uint8_t buf;     /* SEND: source; RECV, REDUCE, COPY, FINISH: target */
  uint8_t src_buf; /* REDUCE, COPY: source */
  uint32_t peer;
  uint32_t tag;
  uint64_t off;     /* bytes into |buf| */
  uint64_t src_off; /* bytes into |src_buf| */
  uint64_t bytes;
  uint64_t elem;    /* RECV: index of the first output element the received
                       bytes stand for (loss bookkeeping), or COLL_NO_ELEM */
  uint64_t value;   /* NOTE, WAIT_NOTE: the note; REDUCE: 1 + index of an
                       EXTRA step whose buffer is reduced in too, or 0 */
} coll_step;

/* The parameters, checked and with derived sizes, as the builders see
 * them. */
typedef struct coll_geom {
  dlcp_coll_kind kind;
  dlcp_algo algo; /* resolved */
  uint32_t rank, world, root;
  uint64_t count;
  size_t esz; /* bytes per element */
  dlcp_dtype dtype;
  dlcp_redop op;
  uint64_t chunk_bytes;
  uint64_t rat_min_part; /* bytes (dlcp_coll_params.rat_min_part_bytes) */
  uint64_t recv_ahead;   /* bytes (dlcp_coll_params.recv_ahead_bytes) */
  uint64_t eager;        /* bytes (dlcp_coll_params.exact_bytes): transfers
                            the driver sends without a START */
  const uint32_t *topo;
  uint32_t levels;
  bool rs_copy_out; /* REDUCE_SCATTER out of place: copy the shard to OUT */
} coll_geom;

/* Ring tables the straggler bypass needs: for reduce-scatter step s
 * (0..n-2) and segment j, the indices of this rank's receive, reduce and
 * send steps (send at step s = the forward of reduce s - 1). */
typedef struct coll_ring_index {
  uint32_t steps; /* n - 1 */
  uint32_t nseg;
  uint32_t *recv, *reduce, *send; /* [s * nseg + j] */
} coll_ring_index;

typedef struct coll_plan {
  const dlcp_mem *mem;
  coll_step *steps;
  uint32_t nsteps, cap;
  uint32_t *efrom, *eto; /* dependency edges: efrom[i] before eto[i] */
  uint32_t nedges, ecap;
  uint64_t scratch_bytes;
  uint32_t nseg;     /* segments per chunk (shown in the dump) */
  int err;           /* sticky: the first allocation failure */
  coll_ring_index ring; /* filled by the ring builder (bypass) */
} coll_plan;

void coll_plan_init(coll_plan *plan, const dlcp_mem *mem);
void coll_plan_free(coll_plan *plan);

/* coll_plan_add appends a copy of |st| and returns its index, or
 * COLL_NO_STEP after an allocation failure (recorded in plan->err).  A SEND
 * or RECV of 0 bytes becomes a NOP: both ends drop it alike. */
uint32_t coll_plan_add(coll_plan *plan, const coll_step *st);

/* coll_plan_dep records that |after| may not start before |before| has
 * completed.  Either may be COLL_NO_STEP (then nothing is recorded). */
void coll_plan_dep(coll_plan *plan, uint32_t before, uint32_t after);

/* Short constructors for the builders. */
uint32_t coll_plan_send(coll_plan *plan, uint32_t peer, uint32_t tag,
                        coll_buf buf, uint64_t off, uint64_t bytes);
uint32_t coll_plan_recv(coll_plan *plan, uint32_t peer, uint32_t tag,
                        coll_buf buf, uint64_t off, uint64_t bytes,
                        uint64_t elem);
uint32_t coll_plan_reduce(coll_plan *plan, coll_buf dst, uint64_t dst_off,
                          coll_buf src, uint64_t src_off, uint64_t bytes);
uint32_t coll_plan_copy(coll_plan *plan, coll_buf dst, uint64_t dst_off,
                        coll_buf src, uint64_t src_off, uint64_t bytes);
uint32_t coll_plan_finish(coll_plan *plan, coll_buf buf, uint64_t off,
                          uint64_t bytes);

/*
 * coll_plan_nseg returns how many pipeline segments to cut a chunk of up
 * to |max_chunk_elems| elements into: enough that a segment is about
 * |g->chunk_bytes|, at least 1, at most |max_chunk_elems| (no empty
 * segments when there is data), and small enough that
 * |phase_steps| * nseg sequence numbers fit the tag.
 */
uint32_t coll_plan_nseg(const coll_geom *g, uint64_t max_chunk_elems,
                        uint32_t phase_steps);

/*
 * coll_plan_posts_ahead returns whether a plan may post receives of
 * |transfer_bytes| each early, spending |scratch_bytes| of scratch on it:
 * within g->recv_ahead (dlcp_coll_params.recv_ahead_bytes), and only for
 * transfers the driver does not send eagerly (above g->eager), since an
 * eager transfer waits for no receive.
 */
bool coll_plan_posts_ahead(const coll_geom *g, uint64_t scratch_bytes,
                           uint64_t transfer_bytes);

/* MPICH's fold for worlds that are not a power of two (hd.c, rd.c): the
 * largest power of two p2 <= n (its log2 in |*log2_p2|); the first
 * 2 (n - p2) ranks pair up and the odd ones stay, so survivor v is rank
 * coll_fold_rank(v, n - p2). */
uint32_t coll_fold_p2(uint32_t n, uint32_t *log2_p2);
uint32_t coll_fold_rank(uint32_t v, uint32_t rem);

/* The tag of static transfer |seg| of algorithm step |phase_step|. */
uint32_t coll_plan_tag(uint32_t phase_step, uint32_t nseg, uint32_t seg);

/* The builders: each appends this rank's steps for |g| to |plan|.  They
 * return 0 or a negative DLCP_ERR_*. */
int coll_build_ring(coll_plan *plan, const coll_geom *g, bool bypass);
int coll_build_ps(coll_plan *plan, const coll_geom *g);
int coll_build_hd(coll_plan *plan, const coll_geom *g);
int coll_build_rat(coll_plan *plan, const coll_geom *g);
int coll_build_barrier(coll_plan *plan, const coll_geom *g);
int coll_build_direct(coll_plan *plan, const coll_geom *g);
int coll_build_rd(coll_plan *plan, const coll_geom *g);

/* coll_plan_build dispatches to the builder of g->kind and g->algo. */
int coll_plan_build(coll_plan *plan, const coll_geom *g);

/* coll_plan_map_peers renames every peer of |plan| p to members[p]
 * (dlcp_coll_params.members).  Returns 0, or DLCP_ERR_INVALID_ARGUMENT if
 * a peer is not below |world|. */
int coll_plan_map_peers(coll_plan *plan, const uint32_t *members,
                        uint32_t world);

/* coll_plan_format writes |plan| as text (see dlcp_coll_plan_dump). */
dlcp_ssize coll_plan_format(const coll_plan *plan, const coll_geom *g,
                            char *buf, size_t buflen);

/* params.c: checks |p| (not its buffers) and derives the builders' view
 * of it.  Returns 0, DLCP_ERR_INVALID_ARGUMENT or DLCP_ERR_LIMIT. */
int coll_params_to_geom(const dlcp_coll_params *p, coll_geom *g);

#endif /* DLCP_COLL_PLAN_H */
