/*
 * exec.h: the inside of a dlcp_coll, shared by the executor (coll.c), the
 * straggler bypass (bypass.c) and the loss agreement (agree.c).  Not part
 * of any public interface.
 *
 * The executor runs a plan (plan.h): each step waits for its dependencies,
 * becomes ready, and is either executed at once (reduce, copy, finish,
 * nop, note) or handed to the driver as an action and completed by an
 * event (send, receive, awaited note).  Transfers are found again by
 * (direction, peer, tag) through an open-addressing table.  Actions that
 * do not come from a plan step (bypass and agreement notes, cancels,
 * agreement transfers) wait in a small queue that poll drains first.
 */
#ifndef DLCP_COLL_EXEC_H
#define DLCP_COLL_EXEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "coll/coll.h"
#include "coll/plan.h"

enum coll_step_state {
  COLL_ST_PENDING = 0, /* waiting for dependencies */
  COLL_ST_READY,       /* in the ready queue */
  COLL_ST_ACTIVE,      /* handed to the driver (or awaiting a note) */
  COLL_ST_DONE
};

enum coll_step_flag {
  COLL_SF_SKIP = 1,    /* REDUCE: do nothing (its input was bypassed) */
  COLL_SF_ARRIVED = 2, /* WAIT_NOTE: the note is already here */
  COLL_SF_CANCELED = 4 /* RECV: canceled by the bypass; completes empty */
};

enum coll_phase {
  COLL_PHASE_RUN,      /* executing the plan */
  COLL_PHASE_AGREE,    /* plan done; agreeing on missing ranges */
  COLL_PHASE_FINISHED, /* result final; DONE not yet polled */
  COLL_PHASE_REPORTED  /* DONE polled */
};

/* The loss agreement (agree.c): recursive doubling of every rank's missing
 * ranges, each rank merging what its partner of each round knows, so all
 * hold the union after log2 rounds; a rank beyond the largest power of two
 * folds its list into a partner first and gets the union back from it. */
#define COLL_AGREE_MAX_ROUNDS 16
typedef struct coll_agree_peer {
  uint32_t rank;
  int64_t count;        /* ranges announced, -1 = note not yet here */
  bool received;        /* the list arrived (or count == 0) */
  unsigned char *buf;   /* count * 16 bytes, little-endian pairs */
  unsigned char *sent;  /* what we sent it; borrowed by the driver */
} coll_agree_peer;

typedef struct coll_agree {
  /* folded: a rank beyond p2 has sent its list to its fold partner; any
   * other, that it has merged its partner's list (or has none) */
  bool started, folded, final_known, done;
  /* The fold partner: rank r + p2 for r < n - p2 (its list comes in, the
   * union goes out), rank r - p2 for r >= p2 (the reverse); rank
   * UINT32_MAX for none. */
  coll_agree_peer fold;
  bool extra;            /* r >= p2: folds out, runs no rounds */
  coll_agree_peer round[COLL_AGREE_MAX_ROUNDS]; /* partner r ^ 2^k */
  uint32_t nrounds, next_round;
  bool round_sent;       /* next_round's list went out */
  dlcp_coll_range *u;    /* the union so far */
  size_t nu;
  uint32_t sends_outstanding;
} coll_agree;

typedef struct coll_bypass coll_bypass;
typedef struct coll_fuse coll_fuse;

struct dlcp_coll {
  const dlcp_mem *mem;
  dlcp_coll_params p; /* a copy; buffers still the caller's */
  coll_geom g;
  coll_plan plan;
  unsigned char *base[3]; /* WORK, SCRATCH, OUT */
  unsigned char *own_work; /* allocated WORK (out-of-place reduce-scatter) */
  /* Out-of-place all-reduce: WORK starts as a copy of the input, made
   * lazily, granule by granule, when a step first needs it (see
   * work_ready in coll.c); a send of an untouched range reads the input
   * itself, and a receive that overwrites a granule needs no copy. */
  const unsigned char *lazy_in;
  uint64_t *lazy_done; /* bit per granule: WORK holds its own data */
  uint64_t lazy_bytes;
  unsigned char *scratch;

  /* per step, sized plan.cap (static steps plus room for dynamic ones) */
  uint8_t *state;
  uint8_t *flags;
  uint32_t *ndeps;
  uint32_t *stage; /* receives on the longest chain of dependencies */
  uint32_t *dyn_dependent; /* one extra dependent (dynamic steps) */
  /* Receives reduced on arrival (fuse.c); fuse_of maps a static step (the
   * RECV and its REDUCE) to its entry, or COLL_NO_STEP.  NULL without. */
  coll_fuse *fuse;
  uint32_t nfuse;
  uint32_t *fuse_of;
  uint32_t *out_begin, *out_list; /* static dependents, CSR */
  uint32_t nstatic;
  uint32_t ndone;

  uint32_t *ready;   /* FIFO of ready steps, capacity plan.cap */
  uint32_t rhead, rcount;

  uint32_t *hslots;  /* transfer table, power-of-two capacity */
  uint32_t hmask;

  dlcp_coll_action *ctl; /* queued non-step actions */
  size_t chead, ccount, ccap;

  unsigned char **extra; /* EXTRA buffers (bypass), by index */
  uint32_t nextra, extracap;

  dlcp_coll_range *taint; /* missing output element ranges seen locally */
  size_t ntaint, taintcap;

  double xfer_loss; /* loss bound handed to each data transfer */
  int phase;
  int status;
  int32_t failed_peer;
  coll_agree agree;
  coll_bypass *bypass;

  dlcp_coll_range *missing; /* agreed result */
  size_t nmissing;
  uint64_t missing_elems;
  dlcp_tstamp start_ns, end_ns;
  dlcp_tstamp progress_ns;  /* last step done or event taken */
  uint32_t awaited_note;    /* the WAIT_NOTE made ACTIVE last, or NO_STEP */
  /* A group (dlcp_coll_params.members): peers are the communicator's
   * ranks, not 0..world-1; no bypass or agreement runs. */
  bool grouped;
  /* dlcp_coll_final_prefix's progress: the step its scan resumes at, and
   * the end of the last write found done before it */
  uint32_t prefix_step;
  uint64_t prefix_bytes;
};

/* Queues |act| (copied) to be returned by poll before any plan step. */
int coll_exec_push(dlcp_coll *op, const dlcp_coll_action *act);
/* Convenience: queue a NOTE. */
int coll_exec_note(dlcp_coll *op, uint32_t peer, uint64_t value);
/* Makes a PENDING step READY now, whatever its dependencies say; later
 * releases of those dependencies are ignored. */
void coll_exec_force_ready(dlcp_coll *op, uint32_t idx);
/* Changes the peer and tag of a SEND or RECV that is not ACTIVE, or of an
 * ACTIVE RECV (which is then canceled towards the driver and re-issued).
 * Returns 0, DLCP_ERR_INTERNAL (an ACTIVE SEND or a duplicate key) or
 * DLCP_ERR_NOMEM. */
int coll_exec_retarget(dlcp_coll *op, uint32_t idx, uint32_t peer,
                       uint32_t tag, dlcp_tstamp now);
/* Cancels a RECV that is not DONE: tells the driver if it was ACTIVE and
 * completes the step without data. */
int coll_exec_cancel_recv(dlcp_coll *op, uint32_t idx, dlcp_tstamp now);
/* Appends a step at run time whose completion releases |dependent| (which
 * gains one dependency; it must still be PENDING).  Returns the index or
 * COLL_NO_STEP if out of room. */
uint32_t coll_exec_add_step(dlcp_coll *op, const coll_step *st,
                            uint32_t dependent);
/* Allocates an EXTRA buffer of |bytes|; returns its index or -1. */
int64_t coll_exec_alloc_extra(dlcp_coll *op, uint64_t bytes);
/* Records output elements [elem, elem + n) as not delivered here. */
int coll_exec_taint(dlcp_coll *op, uint64_t elem, uint64_t n);
/* Fails the operation (first failure wins) naming |peer| (or -1). */
void coll_exec_fail(dlcp_coll *op, int status, int32_t peer);
/* Zeroes the agreed missing ranges (op->missing) in the output and makes
 * the result final; DONE follows at the next poll. */
void coll_exec_finalize(dlcp_coll *op, dlcp_tstamp now);
/* Before a step uses |buf|[off, off + bytes): makes WORK hold what it
 * should there (the lazy copy of the input); |overwrite|: the step
 * overwrites the range whole. */
void coll_exec_work_ready(dlcp_coll *op, uint8_t buf, uint64_t off,
                          uint64_t bytes, bool overwrite);
/* Where |off| of buffer |buf| is. */
unsigned char *coll_exec_buf_ptr(const dlcp_coll *op, uint8_t buf,
                                 uint64_t off);
/* Sorts and merges |r| in place; returns the new count. */
size_t coll_ranges_normalize(dlcp_coll_range *r, size_t n);

/* fuse.c: receives reduced on arrival (dlcp_coll_params.reduce_on_arrival).
 * Setup after the dependents lists are built: finds the RECV/REDUCE
 * pairs; 0 or DLCP_ERR_NOMEM. */
int coll_fuse_setup(dlcp_coll *op);
/* Forgets the receives' held ranges (dlcp_coll_reuse). */
void coll_fuse_reset(dlcp_coll *op);
void coll_fuse_free(dlcp_coll *op);
/* A RECV about to be handed to the driver: sets its place function if it
 * is fused. */
void coll_fuse_recv(dlcp_coll *op, uint32_t idx, dlcp_coll_action *act);
/* A dependency of PENDING step |idx| completed (its count is lowered). */
void coll_fuse_on_release(dlcp_coll *op, uint32_t idx);
/* A REDUCE about to run: if fused, reduces in what its RECV left in its
 * buffer and returns true (nothing else to do); false otherwise. */
bool coll_fuse_reduce(dlcp_coll *op, uint32_t idx);

/* step_table.c: the waiting steps by (direction, peer, tag or note
 * value).  A SEND and a RECV with the same peer and tag are different
 * transfers (one each way). */
enum { DIR_SEND = 0, DIR_RECV = 1, DIR_NOTE = 2 };
/* The step waiting for this key, or COLL_NO_STEP. */
uint32_t coll_table_find(const dlcp_coll *op, int dir, uint32_t peer,
                         uint64_t id);
/* Indexes step |idx|; 0 or DLCP_ERR_DUPLICATE (its key is taken). */
int coll_table_insert(dlcp_coll *op, uint32_t idx);
void coll_table_remove(dlcp_coll *op, uint32_t idx);

/* agree.c */
void coll_agree_init(dlcp_coll *op);
void coll_agree_free(dlcp_coll *op);
/* Starts the agreement (plan done); may finish it at once. */
int coll_agree_start(dlcp_coll *op, dlcp_tstamp now);
int coll_agree_on_note(dlcp_coll *op, uint32_t peer, uint64_t value,
                       dlcp_tstamp now);
int coll_agree_on_sent(dlcp_coll *op, uint32_t peer, uint32_t tag,
                       int status, dlcp_tstamp now);
int coll_agree_on_received(dlcp_coll *op, uint32_t peer, uint32_t tag,
                           int status, size_t nmissing, dlcp_tstamp now);
/* The rank whose agreement note the agreement waits for, or UINT32_MAX
 * (not started, done, or waiting on a transfer). */
uint32_t coll_agree_awaited(const dlcp_coll *op);

/* bypass.c */
int coll_bypass_new(dlcp_coll *op);
void coll_bypass_del(dlcp_coll *op);
/* Step |idx| completed at |now| (estimates, lane bookkeeping). */
void coll_bypass_on_step_done(dlcp_coll *op, uint32_t idx, dlcp_tstamp now);
int coll_bypass_on_timer(dlcp_coll *op, dlcp_tstamp now);
int coll_bypass_on_note(dlcp_coll *op, uint32_t peer, uint64_t value,
                        dlcp_tstamp now);
dlcp_tstamp coll_bypass_next_deadline(const dlcp_coll *op);
void coll_bypass_result(const dlcp_coll *op, dlcp_coll_result *res);

#endif /* DLCP_COLL_EXEC_H */
