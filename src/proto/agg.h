/*
 * agg.h: the aggregation switch, as a sans-I/O state machine.  The same
 * object runs inside dlcp-switch (one per worker thread) and inside the
 * simulator's switch role.
 *
 * The switch's memory is a pool of aggregators, each one block of
 * |block_elems| int32 sums (64 by default, the RA-INA seed's block).  A
 * job's operation is cut into groups of one to 255 blocks; a group's first
 * contribution claims as many consecutive free aggregators as it has
 * blocks, in one batch (the seed's "n consecutive aggregators"), first come
 * first served across jobs (or inside the job's own partition with the
 * STATIC policy, the SwitchML-style baseline the seed compares against).
 * An aggregator group keeps the running sum, a bitmap of the workers that
 * contributed (a duplicate is never added twice), the OR of the
 * contributions' ECN codepoints and, once complete, a bitmap of the workers
 * that acknowledged the result.  When all n workers have contributed, the
 * result is sent to each of them; a duplicate contribution to a complete
 * group re-sends it to its sender, one to an incomplete group is answered
 * with NACK WAITING and the bitmap of the workers it holds (so a host that
 * gives up can name the ranks that never contributed); a result not acknowledged within the
 * re-send interval (|resend_ns|, doubled by each acknowledgement that shows
 * a re-send was needless, up to 64 times, and eased back by groups freed
 * without one) is re-sent to the workers that have not acknowledged; the
 * group is freed when all have.  A worker acknowledges a result with an
 * ACK, or with any later packet whose low-water mark lies above the group
 * (every group below the mark has its result there), which spares the ACK
 * while its contributions keep coming.
 *
 * Verdicts.  Every job has a window of |window_groups| groups starting at
 * the lowest low-water mark of its workers.  Each group in it has a
 * verdict: undecided, INA (its aggregators were claimed; freed again once
 * done) or RING (RA-INA: no aggregators were free when its first
 * contribution came, so all its workers run it by ring all-reduce).  The
 * verdict is made once, by the group's first contribution, so every worker
 * of the group gets the same answer however their packets interleave.
 *
 * Chains (CINA, the RA-INA/CINA seed's chapter 4).  A switch configured
 * with a parent forwards the jobs whose contributions name a chain place
 * (the CONTRIB's aux: the rank and world this switch has at its parent):
 * a group complete here is not answered but sent to the parent as one
 * contribution of that rank, its partial sum, re-sent every re-send
 * interval until the parent returns the final sum as a RESULT.  The final
 * then becomes the group's result here (sent to every worker, re-sent,
 * freed by their ACKs, exactly as a root's, with PANAMA's cap lowered to
 * this switch's own if the parent's was higher) and is acknowledged to the
 * parent, again for every copy the parent re-sends.  A NACK from the
 * parent (the group still waits there for others, or the parent is busy)
 * is counted and otherwise ignored: the re-send timer asks again, and a
 * parent that never answers leaves the masters' timeout to name this
 * switch.  A child switch is one more worker of its parent's core, so the
 * parent needs no configuration of its own.  A job that names a chain
 * place at a switch without a parent is refused (NACK CONFIG): its masters
 * would take a rack's sum for the total.  Trees (HINA, and MTINA's several
 * trees with groups dealt round-robin) are the same mechanism with a
 * parent per tree and, for switches without hosts below them, a place
 * given by the configuration instead of by the jobs' contributions; the
 * simulator's chains and trees run exactly this.
 *
 * Events in: dlcp_agg_on_packet (a datagram from a host, with its IP ECN
 * codepoint and an address cookie of the driver's choice), dlcp_agg_on_timer.
 * Actions out: dlcp_agg_poll writes the next datagram to send and names
 * its destination by cookie.  Time: |now| in every call, one deadline out.
 * No allocation after dlcp_agg_new.
 */
#ifndef DLCP_PROTO_AGG_H
#define DLCP_PROTO_AGG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dlcp/dlcp_types.h"
#include "wire/agg_wire.h"

/* Trees a switch can be in (MTINA: one per spine or core switch). */
#define DLCP_AGG_MAX_TREES 8u

typedef struct dlcp_agg dlcp_agg;

typedef enum dlcp_agg_policy {
  DLCP_AGG_SHARED, /* one pool, first come first served (RA-INA's) */
  DLCP_AGG_STATIC  /* the pool split into |static_parts| equal partitions,
                      one per job in registration order (SwitchML-style) */
} dlcp_agg_policy;

typedef struct dlcp_agg_config {
  /* Aggregator memory in bytes: the pool holds mem_bytes / (4 *
   * block_elems) aggregators.  Bookkeeping (about 64 bytes per aggregator,
   * the job table, the verdict windows) comes on top, as a switch's
   * metadata registers would. */
  uint64_t mem_bytes;
  uint32_t block_elems;   /* int32 per aggregator, 1..DLCP_AGG_MAX_BLOCK_ELEMS */
  uint32_t max_jobs;      /* job table size, >= 1 */
  uint32_t window_groups; /* verdict window per job, a power of two >= 64 */
  dlcp_agg_policy policy;
  uint32_t static_parts;  /* STATIC: partitions (>= 1, <= max_jobs) */
  dlcp_duration resend_ns; /* a complete group's result is re-sent to the
                              workers that have not acknowledged it; an
                              incomplete group that gained no contribution
                              for this long may be evicted to make room
                              for a job's lowest group (sent again, it
                              claims anew) */
  uint32_t max_resends;    /* then the group is dropped (counted) */
  dlcp_duration lease_ns;  /* an incomplete group idle this long (no
                              contribution, first or re-sent), or a job
                              with no group idle this long, is reclaimed
                              (the group's next contribution claims
                              anew) */
  dlcp_duration idle_ns;   /* a job holding no aggregators that sent
                              nothing for this long no longer counts in
                              the shares of the pool (jobs_sharing) until
                              it sends again; at most lease_ns */
  uint32_t out_queue;      /* datagrams that may wait for dlcp_agg_poll */
  /* Sharding (dlcp-switch's threads, each running an instance): this one
   * holds the groups whose index's low byte modulo |shards| is |shard|
   * (at most 256 shards; 0 or 1: every group).  A job's lowest group here,
   * which may evict idle groups for room, is the first such group at or
   * above its slowest worker's low-water mark. */
  uint32_t shards, shard;
  /* Chains and trees (CINA, HINA, MTINA).  Group g belongs to tree
   * g % ntrees (1..DLCP_AGG_MAX_TREES; MTINA's round-robin over several
   * trees, else 1).  In tree t this switch has a parent if has_parent[t],
   * named by the cookie its datagrams arrive with, parent_addr[t] (only it
   * may send RESULTs for that tree's groups), and its place there is
   * parent_place[t] (DLCP_AGG_CHAIN_PLACE: a static tree's, for switches
   * no host names it to), or 0: each job names it in its contributions'
   * aux, as the runtime's masters do. */
  uint32_t ntrees;
  bool has_parent[DLCP_AGG_MAX_TREES];
  uint64_t parent_addr[DLCP_AGG_MAX_TREES];
  uint16_t parent_place[DLCP_AGG_MAX_TREES];
} dlcp_agg_config;

/* Counters since creation.  Every packet handed to dlcp_agg_on_packet is
 * counted in |packets| and in exactly one of the outcome counters below
 * it (contrib .. parent_nacks). */
typedef struct dlcp_agg_stats {
  uint64_t packets;
  uint64_t contrib;        /* contributions added to a sum */
  uint64_t duplicates;     /* contributions already in their sum (a
                              complete group answers with its result, an
                              incomplete one with NACK WAITING) */
  uint64_t acks;           /* acknowledgements of a complete group */
  uint64_t nacked;         /* contributions answered with a NACK */
  uint64_t malformed;      /* not a valid INA datagram, or a type a host
                              must not send */
  uint64_t foreign;        /* a known job id with the wrong token */
  uint64_t stale_acks;     /* ACKs of unknown or incomplete groups */
  uint64_t claims_granted; /* CLAIMs of a group with aggregators (answered
                              GRANT, or the result again if complete) */
  uint64_t finals;         /* RESULTs from the parent, first or again
                              (acknowledged) */
  uint64_t parent_nacks;   /* NACKs from the parent (its group still
                              waits, it is busy, ...): the re-send timer
                              asks again */
  /* what happened, beside the per-packet outcome */
  uint64_t contrib_bytes;  /* gradient payload bytes added to sums */
  uint64_t claims;         /* groups that got aggregators */
  uint64_t claim_failures; /* groups that found none free */
  uint64_t ring_verdicts;  /* of which were given a ring verdict */
  uint64_t too_big;        /* of which were refused for good (plain INA):
                              more blocks than the pool or partition */
  uint64_t results_sent;   /* RESULT datagrams written by poll */
  uint64_t resent;         /* of which re-sent (duplicate or timeout) */
  uint64_t resend_backoffs; /* re-send interval doublings */
  uint64_t nacks_sent;     /* NACK datagrams written by poll */
  uint64_t grants_sent;    /* GRANT datagrams written by poll */
  uint64_t forwards;       /* partial sums sent to the parent (CONTRIB) */
  uint64_t forward_resends; /* of which re-sent: no final came in time */
  uint64_t acks_up;        /* ACKs of finals sent to the parent */
  uint64_t acks_implied;   /* results acknowledged by a worker's
                              low-water mark, without an ACK */
  uint64_t freed;          /* groups freed after every acknowledgement */
  uint64_t reclaimed;      /* groups reclaimed after the lease */
  uint64_t evicted;        /* incomplete groups evicted to make room for
                              a job's lowest group */
  uint64_t abandoned;      /* groups dropped after max_resends */
  uint64_t queue_drops;    /* datagrams not queued: the queue was full */
  uint64_t jobs_started, jobs_expired, jobs_refused;
  uint32_t aggs_total, aggs_used, jobs_active;
  /* Jobs that hold aggregators or sent within idle_ns: a shared pool's
   * share (BUSY) and cap (RESULT) divide it among these. */
  uint32_t jobs_sharing;
} dlcp_agg_stats;

/* One datagram produced by dlcp_agg_poll. */
typedef struct dlcp_agg_send {
  uint64_t addr; /* the cookie the destination's last packet came with */
  size_t len;    /* bytes written to the caller's buffer */
  uint8_t ecn;   /* IP ECN codepoint to send it with: ECT(0) for results
                    (the OR of the contributions' is in the datagram, so a
                    CE on the way down is that path's own), 0 for NACKs */
} dlcp_agg_send;

/* Fills |cfg| with the defaults: 1 MiB of aggregators (4096 blocks of 64),
 * 64 jobs, a 4096-group window, SHARED, 5 ms resend, 1000 resends, 10 s
 * lease, a 4096-datagram queue, one tree and no parent. */
void dlcp_agg_config_default(dlcp_agg_config *cfg);

/*
 * dlcp_agg_new creates a switch in |*pa|.  Every allocation happens here.
 * Returns 0, DLCP_ERR_CONFIG (a field out of range; fewer aggregators than
 * one block) or DLCP_ERR_NOMEM.  |mem| (NULL = default) must outlive it.
 */
int dlcp_agg_new(dlcp_agg **pa, const dlcp_agg_config *cfg,
                 const dlcp_mem *mem, dlcp_tstamp now);
void dlcp_agg_del(dlcp_agg *a);

/*
 * dlcp_agg_on_packet processes the datagram |buf| (|len| bytes, borrowed
 * for the call) that arrived with IP ECN codepoint |ecn| (0..3) from the
 * address the driver calls |addr|.  Answers are queued for dlcp_agg_poll.
 * Returns 0 if the packet was used (added, acknowledged, answered), or the
 * reason it was dropped: a decode error, DLCP_ERR_FOREIGN_JOB (wrong
 * token), DLCP_ERR_BAD_TYPE (a NACK or GRANT sent to the switch, or a
 * RESULT from anyone but its parent),
 * DLCP_ERR_DUPLICATE (a contribution to a group whose result its sender
 * has acknowledged), DLCP_ERR_UNKNOWN_TRANSFER (a stale ACK).  None is
 * fatal.
 */
int dlcp_agg_on_packet(dlcp_agg *a, const uint8_t *buf, size_t len,
                       uint8_t ecn, uint64_t addr, dlcp_tstamp now);

/* dlcp_agg_on_timer re-sends unacknowledged results and reclaims idle
 * groups and jobs whose time is at or before |now|. */
void dlcp_agg_on_timer(dlcp_agg *a, dlcp_tstamp now);

/* dlcp_agg_next_deadline returns when dlcp_agg_on_timer next has work, or
 * DLCP_TSTAMP_NEVER. */
dlcp_tstamp dlcp_agg_next_deadline(const dlcp_agg *a);

/*
 * dlcp_agg_poll writes the next queued datagram into |buf| (|buflen|
 * bytes; DLCP_AGG_HDR_LEN + 4 * 255 * block_elems always suffices) and
 * describes it in |out|.  Returns 1 if it wrote one, 0 if none is queued,
 * DLCP_ERR_BUFFER_TOO_SMALL (the datagram stays queued).
 */
int dlcp_agg_poll(dlcp_agg *a, dlcp_agg_send *out, uint8_t *buf,
                  size_t buflen, dlcp_tstamp now);

/* dlcp_agg_cap returns PANAMA's cap for job |job| (as its results carry
 * it: the aggregators it may hold), or UINT16_MAX for a job this switch
 * does not know.  For a driver that relays finals itself (the
 * simulator's trees), to lower the cap on the way down. */
uint16_t dlcp_agg_cap(const dlcp_agg *a, uint32_t job);

/* dlcp_agg_get_stats copies the counters into |st|. */
void dlcp_agg_get_stats(const dlcp_agg *a, dlcp_agg_stats *st);

#endif /* DLCP_PROTO_AGG_H */
