/*
 * stall.h: finding the rank a stalled operation is really waiting for.
 *
 * When a transfer makes no progress for the operation timeout, the peer it
 * was with is not necessarily the culprit: in a ring, rank 0 waits on
 * rank 3, which waits on rank 2, which is frozen.  Blaming the direct
 * peer made survivors name different ranks.  Instead the rank that timed
 * out asks (a PROBE note on the control connection, which stays open to
 * a frozen process) the peer it waited on whom that peer waits on, and
 * follows the answers:
 *
 *   - no answer within probe_ms: that rank stopped responding (frozen,
 *     stopped, or its host or network cut): the culprit;
 *   - "I wait on nobody": asked again every probe_ns / 8 (it may be
 *     between two operations); still nobody after probe_ns: that rank
 *     is alive but not taking part (busy elsewhere, or gone from the
 *     collectives): the culprit;
 *   - "I wait on R" with R not yet asked: ask R;
 *   - an answer that closes a cycle (everyone asked waits on someone
 *     asked): a deadlock among living ranks; the direct peer is named.
 *
 * The culprit is then declared lost by the caller (and every other rank
 * told), so every survivor fails naming the same rank within the timeout
 * plus one probe interval per hop.  This file is the inquiry's logic
 * alone, without I/O: the caller sends the probes it asks for, feeds the
 * answers and the clock, and acts on the verdict.
 */
#ifndef DLCP_RT_STALL_H
#define DLCP_RT_STALL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dlcp/dlcp_types.h"

#define DLCP_STALL_NOBODY UINT32_MAX
#define DLCP_STALL_MAX_CHAIN 64u

typedef enum dlcp_stall_verdict {
  DLCP_STALL_PENDING = 0, /* still asking */
  DLCP_STALL_SILENT,      /* the culprit did not answer */
  DLCP_STALL_IDLE,        /* the culprit answered, waiting on nobody */
  DLCP_STALL_CYCLE,       /* the waits form a cycle among living ranks */
} dlcp_stall_verdict;

typedef struct dlcp_stall {
  uint32_t me, world;
  dlcp_duration probe_ns;
  bool active;
  uint32_t chain[DLCP_STALL_MAX_CHAIN]; /* me, then each rank asked */
  uint32_t n;
  uint32_t nonce;           /* of the probe in flight */
  dlcp_tstamp deadline;     /* its answer is due; NEVER: none in flight */
  dlcp_tstamp asked_at;     /* the current rank was first asked */
  dlcp_tstamp reprobe_at;   /* ask an idle rank again; NEVER: no */
  dlcp_stall_verdict verdict;
  uint32_t culprit;
} dlcp_stall;

/*
 * dlcp_stall_budget_ns: the share of an operation timeout of |timeout_ms|
 * that the inquiry and the agreement after it may take: min(500 ms,
 * timeout / 4).  Transfers give up that much before the timeout, so that
 * a stalled operation fails naming the culprit by the timeout itself,
 * not a probe interval after it.  Four fifths of it is the patience with
 * each rank asked (dlcp_stall_probe_ns), the rest the agreement.
 */
dlcp_duration dlcp_stall_budget_ns(uint32_t timeout_ms);
dlcp_duration dlcp_stall_probe_ns(uint32_t timeout_ms);
/* dlcp_stall_wait_ns: how long a transfer or an awaited note may go
 * without progress before the inquiry starts: the timeout less the
 * budget. */
dlcp_duration dlcp_stall_wait_ns(uint32_t timeout_ms);

void dlcp_stall_init(dlcp_stall *st, uint32_t me, uint32_t world,
                     dlcp_duration probe_ns);

/*
 * dlcp_stall_begin starts an inquiry because a transfer with |peer| made
 * no progress.  Returns the rank to probe now (|peer|) and sets |*nonce|
 * to the probe's value, or DLCP_STALL_NOBODY if an inquiry is already
 * under way (its verdict will do for this transfer too).
 */
uint32_t dlcp_stall_begin(dlcp_stall *st, uint32_t peer, dlcp_tstamp now,
                          uint32_t *nonce);

/*
 * dlcp_stall_on_answer feeds the answer of rank |from| to probe |nonce|:
 * it waits on |waits_on| (DLCP_STALL_NOBODY: on nobody).  Returns the next
 * rank to probe (with |*next_nonce|), or DLCP_STALL_NOBODY when a verdict
 * is reached or the answer is stale (another probe's, or not the rank
 * asked).
 */
uint32_t dlcp_stall_on_answer(dlcp_stall *st, uint32_t from, uint32_t nonce,
                              uint32_t waits_on, dlcp_tstamp now,
                              uint32_t *next_nonce);

/* dlcp_stall_on_time reaches the SILENT verdict if the probe in flight is
 * overdue at |now|, and returns the rank to ask again (with |*nonce|) if
 * an idle rank is due for it, else DLCP_STALL_NOBODY. */
uint32_t dlcp_stall_on_time(dlcp_stall *st, dlcp_tstamp now, uint32_t *nonce);

/* dlcp_stall_deadline: when dlcp_stall_on_time must next be called
 * (DLCP_TSTAMP_NEVER when no probe is in flight). */
dlcp_tstamp dlcp_stall_deadline(const dlcp_stall *st);

/*
 * dlcp_stall_describe writes the verdict's explanation, e.g.
 *   "stopped responding (no answer to a probe within 600 ms); waits:
 *    rank 0 -> rank 3 -> rank 2"
 * The caller puts the culprit's name and address and the operation in
 * front.
 */
void dlcp_stall_describe(const dlcp_stall *st, char *buf, size_t len);

/* dlcp_stall_pack / unpack: a PROBE answer in one note value (the nonce
 * in the high half, the rank waited on in the low half). */
uint64_t dlcp_stall_pack(uint32_t nonce, uint32_t waits_on);
void dlcp_stall_unpack(uint64_t value, uint32_t *nonce, uint32_t *waits_on);

#endif /* DLCP_RT_STALL_H */
