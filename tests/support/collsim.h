/*
 * collsim.h: a deterministic in-memory N-rank harness for dlcp_coll, in
 * virtual time.
 *
 * N dlcp_coll operations (one per rank, created by the caller) run against
 * each other: a SEND and a RECV with the same (sender, receiver, tag) are
 * matched whichever comes first, and the bytes are copied when the
 * transfer "arrives".  The model, per transfer: it starts when both ends
 * have posted it; it queues behind the sender's earlier transfers on the
 * sender's link (|bandwidth_bps|, 0 = infinite); it arrives after
 * |latency_ns| plus a seeded jitter; the sender's on_sent follows
 * |latency_ns| later (the acknowledgement).  The receiver's step then
 * costs compute time: on_received is delivered after the rank's CPU has
 * spent |compute_ns| (+ the rank's |slow_ns|, the straggler, for a step
 * its CPU starts before |slow_until_ns|) on it, one receive at a time per rank
 * (or all in parallel with |compute_parallel|).  NOTEs arrive after
 * |note_latency_ns| (+ |note_jitter_ns|, in order per pair) and cost no
 * compute (the control path of a straggler is not slow).
 *
 * Partial loss (to exercise loss bounds): a transfer posted with loss
 * bound p > 0 is cut into |loss_segment_bytes| pieces, each lost with
 * probability |segment_loss|, but never more than floor(p * pieces) of
 * them (MLT retransmits until it holds 1 - p): lost pieces are zero-filled
 * and reported as missing ranges.  Transfers with p = 0 never lose.
 *
 * The harness checks the contract as it goes: duplicate or reused keys,
 * size mismatches between the two ends, a cancel of a matched receive,
 * and operations that stop making progress, all fail the run with a
 * message.  The same seed replays the same run bit for bit.
 */
#ifndef DLCP_TEST_COLLSIM_H
#define DLCP_TEST_COLLSIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "coll/coll.h"

#define COLLSIM_MAX_WORLD 64

typedef struct collsim_config {
  uint32_t world;
  uint64_t seed;
  dlcp_duration latency_ns;      /* one-way data latency */
  dlcp_duration jitter_ns;       /* + uniform [0, jitter) per transfer */
  uint64_t bandwidth_bps;        /* per sender; 0 = infinitely fast */
  dlcp_duration note_latency_ns; /* NOTE one-way latency */
  dlcp_duration note_jitter_ns;  /* + uniform [0, jitter) per note, in order
                                    per pair (data and notes race) */
  dlcp_duration compute_ns;      /* CPU time per completed receive */
  dlcp_duration slow_ns[COLLSIM_MAX_WORLD]; /* extra per receive (straggler) */
  dlcp_tstamp slow_until_ns;     /* the straggler is slow for receives its
                                    CPU starts on before this (a receive
                                    posted early is not charged for
                                    arriving early); 0 = always */
  bool compute_parallel;         /* receives do not queue for the CPU: each
                                    costs its time in parallel (a latency) */
  double segment_loss;           /* probability a piece is lost (p > 0) */
  uint32_t loss_segment_bytes;   /* piece size for loss; 0 = 64 */
  dlcp_tstamp until_ns;          /* give up after this virtual time; 0 = 10 s */
} collsim_config;

typedef struct collsim_stats {
  uint64_t transfers, bytes, notes, cancels;
  uint64_t lossy_transfers, lost_bytes;
  uint64_t events;
} collsim_stats;

typedef struct collsim collsim;

/* collsim_config_default: world 1, 5 us latency, 100 Gbps, 5 us notes,
 * 1 us compute, no loss, no straggler. */
void collsim_config_default(collsim_config *cfg);

/* collsim_new returns a harness or NULL (bad config, no memory). */
collsim *collsim_new(const collsim_config *cfg);
void collsim_del(collsim *cs);

/* collsim_set_op hands rank |rank|'s operation to the harness (borrowed:
 * the caller deletes it after the run).  Every rank needs one. */
void collsim_set_op(collsim *cs, uint32_t rank, dlcp_coll *op);

/* collsim_run runs until every operation has polled DONE.  Returns 0, or
 * -1 with collsim_error() saying why (stall, contract violation, an error
 * from an operation, time limit). */
int collsim_run(collsim *cs);

const char *collsim_error(const collsim *cs);
/* When |rank|'s operation returned DONE (DLCP_TSTAMP_NEVER if never). */
dlcp_tstamp collsim_done_at(const collsim *cs, uint32_t rank);
/* The latest DONE: the operation's makespan from time 0. */
dlcp_tstamp collsim_makespan(const collsim *cs);
void collsim_get_stats(const collsim *cs, collsim_stats *st);

#endif /* DLCP_TEST_COLLSIM_H */
