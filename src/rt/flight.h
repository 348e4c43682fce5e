/*
 * flight.h: the flight recorder, a rank's memory of its recent collective
 * operations, for the question a hang raises: where, when, and waiting
 * for whom?
 *
 * Each rank keeps a ring of its last DLCP_FLIGHT_OPS collectives: their
 * sequence number, kind, algorithm and size, when they started and ended
 * and how, how many of their transfers completed, the bytes done and
 * total per peer (the first DLCP_FLIGHT_PEERS peers an operation talks
 * to), and which peer the rank is waiting on and since when.  The
 * communicator dumps it (dlcp_flight_dump) on a stall, on a failure and
 * on SIGUSR1, to stderr and to a file; the launcher reads every rank's
 * file back (dlcp_flight_report) and says whom everyone was waiting for,
 * following "A waits on B, B waits on C" to the rank at the end.
 *
 * Not thread-safe: the caller serializes (the communicator calls it under
 * its lock).  No allocation after dlcp_flight_new.
 */
#ifndef DLCP_RT_FLIGHT_H
#define DLCP_RT_FLIGHT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "dlcp/dlcp_types.h"

#define DLCP_FLIGHT_OPS 16u
#define DLCP_FLIGHT_PEERS 8u
#define DLCP_FLIGHT_NONE UINT32_MAX
/* As a peer waited on: the aggregation switch of an INA all-reduce. */
#define DLCP_FLIGHT_SWITCH (UINT32_MAX - 1u)

typedef struct dlcp_flight dlcp_flight;

/* dlcp_flight_new makes the recorder of rank |rank| of |world|, whose
 * address |addr| ("ip:port") the dump names.  Returns NULL when out of
 * memory. */
dlcp_flight *dlcp_flight_new(uint32_t rank, uint32_t world, const char *addr);
void dlcp_flight_free(dlcp_flight *fr);

/* dlcp_flight_begin records the start of collective |seq| (the
 * communicator's per-collective counter, equal on every rank): |kind|
 * ("all-reduce"), |algo| ("ring") and |bytes| are static strings and the
 * vector's size.  The oldest record is overwritten. */
void dlcp_flight_begin(dlcp_flight *fr, uint64_t seq, const char *kind,
                       const char *algo, uint64_t bytes, dlcp_tstamp now);

/* dlcp_flight_transfer records that operation |seq| posted (|posted|) or
 * completed a transfer with |peer| of |total| bytes, |done| of them done.
 * Unknown |seq| (already overwritten) is ignored. */
void dlcp_flight_transfer(dlcp_flight *fr, uint64_t seq, uint32_t peer,
                          bool is_send, bool posted, uint64_t done,
                          uint64_t total);

/* dlcp_flight_waiting records that |seq| waits on |peer| (DLCP_FLIGHT_NONE:
 * on nobody; DLCP_FLIGHT_SWITCH: on the aggregation switch) since
 * |since|. */
void dlcp_flight_waiting(dlcp_flight *fr, uint64_t seq, uint32_t peer,
                         dlcp_tstamp since);

/* dlcp_flight_end records how |seq| ended: |status| 0 or a DLCP_ERR_*,
 * |why| (copied, may be NULL) the failure's explanation. */
void dlcp_flight_end(dlcp_flight *fr, uint64_t seq, int status,
                     const char *why, dlcp_tstamp now);

/* dlcp_flight_lookup finds operation |seq| still in the ring and sets its
 * kind and algorithm; false if it is not (or no longer) there. */
bool dlcp_flight_lookup(const dlcp_flight *fr, uint64_t seq,
                        const char **kind, const char **algo);

/* dlcp_flight_blocked_on returns the peer the latest unfinished operation
 * waits on and when that began, or DLCP_FLIGHT_NONE. */
uint32_t dlcp_flight_blocked_on(const dlcp_flight *fr, dlcp_tstamp *since);

/*
 * dlcp_flight_dump writes the recorder to |f|, newest operation first,
 * headed by |reason|, with times relative to |now|.  The first line is
 *   dlcp flight recorder: rank R of W (ADDR): REASON
 * and, if an operation is unfinished, one machine-readable line
 *   waiting: rank R on P since MS ms, op SEQ
 * (P is "switch" for the aggregation switch) that dlcp_flight_report
 * reads.
 */
void dlcp_flight_dump(const dlcp_flight *fr, FILE *f, const char *reason,
                      dlcp_tstamp now);

/*
 * dlcp_flight_write dumps the recorder to stderr and, if |dir| is not
 * NULL or empty, to dlcp_flight_path(dir, rank) (replaced atomically, so
 * a reader never sees half a record).  Returns 0, or -errno if the file
 * could not be written (stderr has the dump all the same).
 */
int dlcp_flight_write(const dlcp_flight *fr, const char *dir,
                      const char *reason, dlcp_tstamp now);

/*
 * dlcp_flight_follow follows the wait-for edges |waits_on| (one per rank
 * of |world|, DLCP_FLIGHT_NONE for a rank not waiting or not known) from
 * |from|, and returns the rank at the end of the chain: the first rank
 * that waits on nobody, or DLCP_FLIGHT_SWITCH if the chain ends at the
 * aggregation switch.  Returns DLCP_FLIGHT_NONE if the chain closes a
 * cycle (everybody in it waits on somebody: a deadlock, not a stalled
 * rank).
 */
uint32_t dlcp_flight_follow(const uint32_t *waits_on, uint32_t world,
                            uint32_t from);

/*
 * dlcp_flight_report reads the dumps of ranks 0..|world|-1 in |dir|
 * (dlcp_flight_path names them) and writes to |out| one report: for each
 * rank whether it left a record and whom it waited on, then the verdict,
 * e.g.
 *   dlcp-run: flight recorder: every waiting rank (0, 1, 3) waits, directly
 *   or through others, on rank 2, which left no record (stopped, frozen
 *   or killed before it could write)
 * Returns the rank everyone waits on (DLCP_FLIGHT_SWITCH: the
 * aggregation switch), or DLCP_FLIGHT_NONE if there is no single one
 * (nobody waiting, a cycle, or waits leading to different ranks).
 */
uint32_t dlcp_flight_report(const char *dir, uint32_t world, FILE *out);

/* dlcp_flight_path writes "DIR/flight.rank<R>.txt" to |buf|. */
void dlcp_flight_path(char *buf, size_t len, const char *dir, uint32_t rank);

#endif /* DLCP_RT_FLIGHT_H */
