/*
 * ina_run.h: all-reduce through the aggregation switch (algorithms INA and
 * RA_INA) in the runtime: the driver of src/coll/ina over a UDP socket to
 * dlcp-switch (DLCP_SWITCH=host:port).
 *
 * An INA all-reduce is a request like any collective's: dlcp_rt_ina_start
 * returns at once, and whichever thread drives the communicator's event
 * loop (comm_drive.h) progresses it, under the communicator's |mu|.  The
 * switch's socket is watched by the loop, the host core's retransmission
 * deadlines join the communicator's own (the service pass), and the
 * operation's agreements are collectives of the communicator started on
 * its behalf: the job id and token (a broadcast from rank 0, once per
 * communicator), the per-group exponents of the float scaling (an
 * all-reduce MAX) and, for RA-INA, the ring all-reduce of the groups the
 * switch had no aggregators for.  Several INA all-reduces, and other
 * collectives, may be in flight at once.  See docs/ina.md.
 */
#ifndef DLCP_RT_INA_RUN_H
#define DLCP_RT_INA_RUN_H

#include <stdbool.h>
#include <stdint.h>

#include "dlcp/dlcp.h"
#include "rt/errbuf.h"
#include "rt/flight.h"

/* A communicator's INA state: its socket to the switch, job id, token,
 * next group number and the operations in flight.  Created by the first
 * INA operation. */
typedef struct dlcp_rt_ina dlcp_rt_ina;

/* One INA all-reduce in flight (a request's |ina|). */
typedef struct dlcp_rt_ina_op dlcp_rt_ina_op;

/* Frees |s| (NULL is fine) and closes its socket; no operation may be in
 * flight (dlcp_rt_ina_fail_all first). */
void dlcp_rt_ina_free(dlcp_rt_ina *s);

/*
 * dlcp_rt_ina_start starts an all-reduce of |count| elements (FLOAT32 or
 * INT32, SUM or AVG) through the switch named by DLCP_SWITCH; |ra| selects
 * RA-INA (ring fallback) over plain INA.  Every rank must call it in the
 * same order as its other collectives.  Takes |mu|.  Returns 0 and the
 * request in |*preq| (already finished, with the error in its info, if
 * the operation could not start: INVALID_ARGUMENT for a dtype, op or
 * world INA cannot do; CONFIG for DLCP_SWITCH missing or malformed), or
 * DLCP_ERR_NOMEM.  The request then finishes with 0, or TIMEOUT (the
 * switch did not answer for the communicator's timeout), CONFIG (the
 * switch runs another block size, or its pool is smaller than a group),
 * INVALID_ARGUMENT (a rank's input is not finite), CANCELED, or the
 * failure of one of its agreements, with a message naming the switch or
 * the rank.
 */
int dlcp_rt_ina_start(dlcp_comm *c, const void *sendbuf, void *recvbuf,
                      uint64_t count, dlcp_dtype dtype, dlcp_redop op,
                      bool ra, dlcp_request **preq);

/*
 * dlcp_rt_ina_skips tells whether an INA all-reduce of |bytes| goes
 * without the switch, as a ring all-reduce: PANAMA aggregates only reduce
 * flows above a size, DLCP_INA_MIN_BYTES (default 40,000,000, the seed's
 * 40 MB, with DLCP_INA_CC=panama; 0 otherwise).  A malformed value skips
 * nothing: dlcp_rt_ina_start then fails naming it.
 */
bool dlcp_rt_ina_skips(uint64_t bytes);

/*
 * dlcp_rt_ina_check_env checks the INA variables a communicator will read
 * when an INA all-reduce runs (DLCP_SWITCH's form, DLCP_INA_CC, _CLAIM,
 * _HOST_REDUCE, _WINDOW, _MIN_BYTES, _CHAIN, _LEAVES, _TREES), so that a
 * malformed one fails the communicator's creation rather than its first
 * INA all-reduce, or never if AUTO does not pick INA.  Nothing is
 * resolved.  Returns 0, DLCP_ERR_CONFIG with |eb| naming the variable and
 * what was expected, or DLCP_ERR_NOMEM.
 */
int dlcp_rt_ina_check_env(dlcp_errbuf *eb);

/* The rest is for collective.c, with |mu| held. */

/* Whether an INA operation is in flight (the loop must run). */
bool dlcp_rt_ina_busy(const dlcp_rt_ina *s);

/* Progresses the INA operations: returns whether it started collectives
 * (the service pass must run them), and lowers |*next| to the
 * operations' earliest deadline. */
bool dlcp_rt_ina_service(dlcp_comm *c, dlcp_tstamp now, dlcp_tstamp *next);

/* Records in |fr| that every operation exchanging with the switch waits
 * on it, since its last answer (for a flight dump). */
void dlcp_rt_ina_note_waits(dlcp_comm *c, dlcp_flight *fr);

/* Fails |op| with DLCP_ERR_CANCELED (its request was freed). */
void dlcp_rt_ina_cancel(dlcp_comm *c, dlcp_rt_ina_op *op, dlcp_tstamp now);

/* Fails every INA operation with |status| and |reason| (a lost rank, the
 * communicator going away). */
void dlcp_rt_ina_fail_all(dlcp_comm *c, int status, const char *reason,
                          dlcp_tstamp now);

#endif /* DLCP_RT_INA_RUN_H */
