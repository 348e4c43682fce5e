/*
 * ina.h: one rank's side of an all-reduce through an aggregation switch
 * (plain INA, as SwitchML, or RA-INA's switch part), as a sans-I/O state
 * machine.
 *
 * The vector is cut into groups of |group_blocks| blocks of |block_elems|
 * elements (the last group may be short: its tail is sent as zeros).  Each
 * group is one CONTRIB datagram to the switch; at most |window| groups are
 * outstanding, and a group is re-sent when neither its RESULT nor a NACK
 * came within |rto_ns|.  A RESULT is written into the output and
 * acknowledged (ACK), which lets the switch free the aggregators.
 *
 * Scaling.  The switch adds int32.  FLOAT32 data is sent as int32 in block
 * floating point (SwitchML's scheme, with one exponent per group): every
 * rank scales group g by 2^s_g with
 *
 *     s_g = 30 - ceil(log2 n) - E_g
 *
 * where E_g is the largest frexp() exponent of |x| over the group on every
 * rank (so |x| < 2^E_g), agreed before the operation (dlcp_ina_exponents
 * computes a rank's own, the driver takes the MAX over ranks).  Then every
 * scaled value rounds to at most 2^(30 - ceil(log2 n)) in magnitude and n of
 * them sum to at most 2^30: no overflow is possible.  Each rank's rounding
 * error is at most 2^-(s_g+1), so the sum is off by at most
 *
 *     n * 2^-(s_g+1) = n * 2^(E_g + ceil(log2 n) - 31)
 *
 * before the final conversion to float (which adds at most half an ulp of
 * the result): dlcp_ina_error_bound.  Relative to the group's largest
 * magnitude that is below n^2 * 2^-30.  INT32 data is summed exactly
 * (wrapping, as dlcp's integer SUM).  AVG divides the sum by n at the end.
 *
 * RA-INA (mode DLCP_INA_RING_FALLBACK): contributions carry the RING flag;
 * a group for which the switch had no free aggregators when its first
 * contribution arrived gets a ring verdict (the same for every rank) and is
 * left out here: the caller reduces those groups by ring all-reduce
 * (dlcp_ina_ring_pack / dlcp_ina_ring_unpack), so no rank ever waits for
 * aggregators.  Plain INA retries such a group after |rto_ns| instead.
 * With |claim|, an RA-INA group's first packet is a header-only CLAIM
 * (also carrying the RING flag): the verdict comes back as a GRANT (send
 * the contribution) or a ring verdict, so a ring group is never uploaded.
 * DLCP_INA_CLAIM_AUTO claims while an average of the recent verdicts
 * (weight 1/16 each) is mostly RING.  Without claims, an RA-INA rank keeps
 * the groups it has out within the largest cap its results carried (the
 * aggregators the switch may hold for the job), less one group per RING
 * verdict down to half of it, so that few of its groups go to the ring
 * while the pool has room for them.
 *
 * Events in: dlcp_ina_on_packet (a datagram from the switch).  Actions out:
 * dlcp_ina_poll (a datagram for the switch written into the caller's
 * buffer, or DONE).  Time: |now| everywhere, dlcp_ina_next_deadline.
 */
#ifndef DLCP_COLL_INA_H
#define DLCP_COLL_INA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dlcp/dlcp_types.h"
#include "wire/agg_wire.h"

typedef struct dlcp_ina dlcp_ina;

typedef enum dlcp_ina_mode {
  DLCP_INA_WAIT,         /* plain INA: busy groups retry until aggregated */
  DLCP_INA_RING_FALLBACK /* RA-INA: busy groups get a ring verdict */
} dlcp_ina_mode;

/* When RA-INA sends a group's header alone first (CLAIM), and its payload
 * only once the switch grants it aggregators. */
typedef enum dlcp_ina_claim {
  DLCP_INA_CLAIM_NEVER = 0, /* every group's first packet carries it */
  DLCP_INA_CLAIM_ALWAYS,    /* every group is claimed first */
  DLCP_INA_CLAIM_AUTO       /* while most recent verdicts are RING: claims
                               save the uploads a short pool would waste,
                               and cost an extra round trip otherwise */
} dlcp_ina_claim;

/* E_g of a group whose elements are all zero on this rank. */
#define DLCP_INA_EXP_ZERO INT32_MIN

typedef struct dlcp_ina_params {
  uint32_t job;        /* the job's id and secret token (every rank equal) */
  uint64_t token;
  uint32_t rank, world; /* world 1..DLCP_AGG_MAX_WORLD */
  dlcp_ina_mode mode;
  dlcp_dtype dtype;    /* FLOAT32 or INT32 */
  dlcp_redop op;       /* SUM or AVG */
  const void *sendbuf; /* count elements; NULL or == recvbuf: in place */
  void *recvbuf;       /* count elements */
  uint64_t count;
  uint32_t block_elems;  /* the switch's block size */
  uint32_t group_blocks; /* blocks per group (1..255); RA-INA: world */
  /* Group numbering: this operation uses groups [first_group, first_group
   * + ngroups).  The switch keeps a verdict window per job that only moves
   * forward, so consecutive operations of one job must use consecutive
   * ranges (dlcp_ina_ngroups tells the size). */
  uint32_t first_group;
  uint32_t window;       /* outstanding groups, 1..DLCP_INA_MAX_WINDOW */
  /* Non-zero: the window starts at this many bytes of contributions
   * (datagrams; at least one group, at most |window|) and then follows
   * the results' pace: as many groups as the switch answered per half of
   * |rto_ns| since the operation began, never below the start.  0 (or
   * |cc|, whose window follows the ECN marks): |window| throughout.
   * Default 128 KiB, what 1 Gbit/s drains in about half the default RTO:
   * a window of 64 groups of 8.7 KB queued 4.5 ms there, past the RTO,
   * and each operation sent most of its groups twice (docs/ina.md, "The
   * window follows the results' pace"). */
  uint64_t window_bytes;
  /* PANAMA's congestion control (coll/ina_cc.h): the groups outstanding
   * follow the results' ECN marks and the switch's cap, up to |window|,
   * starting at |cc_init| (0: 10) groups.  false: always |window|. */
  bool cc;
  uint32_t cc_init;
  /* cc: the aggregation trees the groups take round-robin (group g, in
   * absolute numbering, through tree g mod cc_trees, as the switches'
   * ntrees: MTINA); each tree has its own window, as PANAMA runs its
   * congestion control per tree.  0 or 1: one window. */
  uint32_t cc_trees;
  /* RA-INA only: which groups first go as a header-only CLAIM, their
   * payload following once the switch GRANTs them aggregators; a group
   * given a ring verdict then costs no upload.  Up to |window| claims run
   * ahead of the |window| contributions in flight. */
  dlcp_ina_claim claim;
  dlcp_duration rto_ns;  /* re-send a group after this long */
  uint32_t max_retx;     /* re-sends of one group before failing */
  /* FLOAT32: the agreed exponents E_g, ngroups entries (the MAX over ranks
   * of dlcp_ina_exponents); borrowed until dlcp_ina_new returns. */
  const int32_t *exps;
  /* How many contributions the final sum adds up, for the scaling (n in
   * s_g above); 0 means |world|.  A chain of switches (CINA) sums more
   * contributions than one switch's world: every contributor must scale
   * for all of them, 1..DLCP_INA_MAX_SCALE_WORLD.  AVG divides by it. */
  uint32_t scale_world;
  /* How many ranks' inputs this rank's vector sums (a host's master in
   * CINA: its host's ranks, reduced before), so its values may be that
   * many times one input's bound under the agreed exponents; 0 or 1: its
   * own input.  At most the contributions summed (scale_world, or
   * world). */
  uint32_t inputs;
  /* CINA: the place of this rank's switch at its parent in the chain
   * (DLCP_AGG_CHAIN_PLACE(rank, world) there), carried in every
   * contribution; 0 when the switch's sums are final. */
  uint16_t chain_place;
  /* Groups [0, ready_groups) hold their final input and may be sent; the
   * rest wait for dlcp_ina_release (CINA's master, whose input is reduced
   * inside the host chunk by chunk).  Default: every group. */
  uint32_t ready_groups;
} dlcp_ina_params;

#define DLCP_INA_MAX_SCALE_WORLD (1u << 20)

#define DLCP_INA_MAX_WINDOW 2048u
#define DLCP_INA_MAX_TREES 8u /* cc_trees, as the switch's trees */

typedef struct dlcp_ina_result {
  int status;            /* 0, or the failure */
  bool done;
  uint32_t ngroups;
  uint32_t ina_groups;   /* reduced by the switch */
  uint32_t ring_groups;  /* given a ring verdict (RA-INA) */
  uint32_t done_below;   /* groups [0, done_below) are all done */
  uint64_t sent;         /* CONTRIB datagrams, retransmissions included */
  uint64_t claims_sent;  /* CLAIM datagrams, retransmissions included */
  uint64_t retransmits;  /* re-sent after rto_ns */
  uint64_t busy;         /* BUSY / AHEAD answers (plain INA waits) */
  uint64_t waiting;      /* WAITING answers: a re-sent group the switch
                            holds is still short of contributions */
  /* The last WAITING answer for a group not done since: that group
   * (absolute number) and the ranks whose contributions it lacked (bit r:
   * rank r); |missing| is 0 when no such answer is outstanding. */
  uint32_t waiting_group;
  uint64_t missing;
  /* That answer named no rank: the switch holds every contribution of
   * |waiting_group| and waits on the switch above it (a chain's next, a
   * tree's root) for the final sum. */
  bool waiting_above;
  uint64_t results;      /* RESULT datagrams taken */
  uint64_t dup_results;  /* RESULTs of groups already done (re-ACKed) */
  uint64_t acks_implied; /* results acknowledged by the low-water mark of
                            a later datagram, with no ACK of their own */
  uint64_t rejected;     /* datagrams dropped: malformed, foreign, unknown */
  uint64_t ecn_marked;   /* RESULTs marked: CE in their ECN bits (on the
                            way up) or in their IP header (down) */
  uint16_t last_cap;     /* the switch's last cap (aggregators the job
                            may hold) */
  uint32_t cwnd;         /* cc: the windows now, in groups, summed over
                            the trees; else window */
  uint64_t cwnd_cuts;    /* cc: windows cut for ECN marks (all trees) */
  /* Failed with DLCP_ERR_CONFIG because the switch refused a group of
   * |group_blocks| blocks for good (NACK TOO_BIG): the most consecutive
   * aggregators it can give this job, its pool or partition; else 0. */
  uint32_t switch_pool;
} dlcp_ina_result;

typedef enum dlcp_ina_act_type {
  DLCP_INA_ACT_NONE = 0,
  DLCP_INA_ACT_SEND, /* send |len| bytes of the caller's buffer to the switch */
  DLCP_INA_ACT_DONE  /* every group has its result or its ring verdict */
} dlcp_ina_act_type;

typedef struct dlcp_ina_action {
  dlcp_ina_act_type type;
  size_t len;
} dlcp_ina_action;

/* dlcp_ina_params_default: world 1, plain INA, FLOAT32 SUM, 64-element
 * blocks, 4 blocks per group, a window of 64 groups paced from 128 KiB,
 * 2 ms RTO, 200 re-sends, every group ready. */
void dlcp_ina_params_default(dlcp_ina_params *p);

/* dlcp_ina_ngroups returns the number of groups a |count|-element vector
 * makes with |block_elems| * |group_blocks| elements per group. */
uint32_t dlcp_ina_ngroups(uint64_t count, uint32_t block_elems,
                          uint32_t group_blocks);

/*
 * dlcp_ina_exponents writes into |exps| (ngroups entries) the frexp()
 * exponent of the largest |x| of each group of the |count| floats at |x|,
 * or DLCP_INA_EXP_ZERO for a group of zeros.  Returns 0, or
 * DLCP_ERR_INVALID_ARGUMENT if an element is not finite (an integer switch
 * cannot carry infinities or NaNs).
 */
int dlcp_ina_exponents(const float *x, uint64_t count, uint32_t group_elems,
                       int32_t *exps);

/* dlcp_ina_error_bound returns the largest |result - exact sum| of an
 * element of a group with agreed exponent |exp| among |world| ranks, before
 * the result is rounded to float (see above; 0 for a zero group). */
double dlcp_ina_error_bound(int32_t exp, uint32_t world);

/*
 * dlcp_ina_new creates the operation.  Returns 0, DLCP_ERR_INVALID_ARGUMENT
 * (a field out of range, a dtype or op the switch cannot reduce, exps
 * missing for FLOAT32, a group larger than a datagram, claim without
 * RA-INA), or DLCP_ERR_NOMEM.
 * Buffers are borrowed until DONE or dlcp_ina_del.
 */
int dlcp_ina_new(dlcp_ina **ph, const dlcp_ina_params *p, const dlcp_mem *mem,
                 dlcp_tstamp now);
void dlcp_ina_del(dlcp_ina *h);

/*
 * dlcp_ina_on_packet takes a datagram from the switch (borrowed for the
 * call) with the ECN codepoint of its IP header (0..3; 0 from a driver
 * that cannot read it): a RESULT is congestion-marked for the window
 * (cc) if its ECN bits say a contribution saw CE or it arrived CE itself,
 * on the way down from the switch.  Returns 0 if it was used, a decode
 * error or DLCP_ERR_FOREIGN_JOB / DLCP_ERR_UNKNOWN_TRANSFER if it was
 * dropped (counted in |rejected|), or
 * the operation's failure: DLCP_ERR_CONFIG (the switch runs another block
 * size or the job another world, or its pool or the job's partition is
 * smaller than one group: |switch_pool| in the result then says how many
 * aggregators it has), DLCP_ERR_LIMIT (its job table is full),
 * DLCP_ERR_PEER_ABORTED (it lost a group: restarted, or gave up
 * re-sending its result).
 */
int dlcp_ina_on_packet(dlcp_ina *h, const uint8_t *buf, size_t len,
                       uint8_t ecn, dlcp_tstamp now);

/*
 * dlcp_ina_poll returns the next action; call until NONE.  SEND writes the
 * datagram into |buf| (|buflen| >= DLCP_AGG_HDR_LEN + 4 * block_elems *
 * group_blocks).  Fails the operation with DLCP_ERR_TIMEOUT when a group
 * was sent max_retx + 1 times without an answer.  Returns 0 or the
 * failure (DONE is still returned once after a failure).
 */
int dlcp_ina_poll(dlcp_ina *h, dlcp_ina_action *act, uint8_t *buf,
                  size_t buflen, dlcp_tstamp now);

/* dlcp_ina_release lets groups [0, |groups|) be sent: their input is now
 * in the send buffer.  Release only grows; poll afterwards. */
void dlcp_ina_release(dlcp_ina *h, uint32_t groups);

dlcp_tstamp dlcp_ina_next_deadline(const dlcp_ina *h);

/*
 * Several operations of one job in flight at once.  The switch slides the
 * job's verdict window to the lowest low-water mark its workers announce,
 * and a worker's mark only rises, so a rank must never announce more than
 * the low-water mark of its oldest operation still in flight, or the
 * switch would forget that operation's groups (NACK GONE).
 * dlcp_ina_low returns the operation's own mark (absolute group number:
 * first_group + the first group not done); dlcp_ina_cap_low makes its
 * datagrams announce at most |low| from now on (the driver passes the
 * lowest mark of the job's operations in flight).
 */
uint32_t dlcp_ina_low(const dlcp_ina *h);
void dlcp_ina_cap_low(dlcp_ina *h, uint32_t low);
void dlcp_ina_get_result(const dlcp_ina *h, dlcp_ina_result *r);

/* The ring part of RA-INA.  dlcp_ina_ring_elems is the element count of
 * the ring groups together; dlcp_ina_ring_pack copies their input elements
 * (in group order) to |dst|; after the caller has all-reduced that vector
 * (SUM, same dtype) among the ranks, dlcp_ina_ring_unpack writes it back
 * into the output (dividing for AVG).  Valid once DONE. */
uint64_t dlcp_ina_ring_elems(const dlcp_ina *h);
void dlcp_ina_ring_pack(const dlcp_ina *h, void *dst);
void dlcp_ina_ring_unpack(dlcp_ina *h, const void *src);

/*
 * dlcp_ina_ack_for answers a stray RESULT (one that came after its
 * operation ended: the switch re-sent it because an ACK was lost) with an
 * ACK, statelessly: it checks that |res| is a RESULT of job |job| with
 * token |token| and writes the ACK into |buf|, announcing the low-water
 * mark |*low|, or the group after the result's if |low| is NULL (no
 * operation of the job is in flight).  Returns the ACK's length, or a
 * negative code if |res| is not such a RESULT.
 */
dlcp_ssize dlcp_ina_ack_for(uint8_t *buf, size_t buflen, const uint8_t *res,
                            size_t res_len, uint32_t job, uint64_t token,
                            const uint32_t *low);

#endif /* DLCP_COLL_INA_H */
