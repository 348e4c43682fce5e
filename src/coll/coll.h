/*
 * coll.h: one collective operation on one rank, as a sans-I/O state machine.
 *
 * A dlcp_coll runs this rank's part of an all-reduce, reduce-scatter,
 * all-gather, broadcast or barrier among |world| ranks.  It never moves a
 * byte over a network and never reads a clock: the driver (src/rt over
 * MLT, src/sim, tests/support/collsim) executes the actions it returns and
 * feeds back what happened.
 *
 *   actions out  dlcp_coll_poll, called until it returns
 *                DLCP_COLL_ACT_NONE:
 *                SEND        carry |bytes| from |send_buf| to |peer|
 *                RECV        receive |bytes| from |peer| into |recv_buf|
 *                CANCEL_RECV the RECV (peer, tag) will never be matched:
 *                            release it (straggler bypass only)
 *                NOTE        deliver the 64-bit |value| to |peer| reliably
 *                DONE        the operation is over; see dlcp_coll_get_result
 *   events in    dlcp_coll_on_sent      a SEND finished (status)
 *                dlcp_coll_on_received  a RECV finished (status, and the
 *                                       byte ranges that were not delivered)
 *                dlcp_coll_on_note      a NOTE from a peer arrived
 *   time         every call takes |now|; dlcp_coll_next_deadline says when
 *                poll has timed work (only the straggler bypass has any).
 *
 * A transfer is identified by (sender, receiver, tag): the RECV the
 * receiver's operation emits and the SEND the sender's operation emits for
 * the same transfer carry the same tag and the same byte count, and no two
 * transfers of one operation between the same ordered pair share a tag.
 * The driver matches them; either may be emitted first.  Tags are 20 bits
 * (DLCP_COLL_TAG_BITS), packed as documented at DLCP_COLL_TAG_CLASS_SHIFT;
 * a driver that runs several operations at once must keep them apart
 * itself (e.g. an operation id beside the tag in the MLT tensor id).
 *
 * Each SEND/RECV carries |loss_bound|: the fraction of the transfer the
 * transport may fail to deliver (MLT's p).  Gradient data gets its share
 * of the operation's end-to-end bound (see dlcp_coll_params.loss_bound);
 * the operation's own bookkeeping transfers get 0.
 * A RECV that completes with missing ranges must have them zero-filled.
 * The operation then reports, identically on every rank, which element
 * ranges of the output are incomplete (they are zero in the output); every
 * other element is exact (see docs/collectives.md, "Loss").
 */
#ifndef DLCP_COLL_COLL_H
#define DLCP_COLL_COLL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dlcp/dlcp_types.h"

typedef struct dlcp_coll dlcp_coll;

typedef enum dlcp_coll_kind {
  DLCP_COLL_ALLREDUCE,
  DLCP_COLL_REDUCE_SCATTER,
  DLCP_COLL_ALLGATHER,
  DLCP_COLL_BROADCAST,
  DLCP_COLL_BARRIER,
  DLCP_COLL_REDUCE
} dlcp_coll_kind;

/* dlcp_algo (the algorithm names) is public: include/dlcp/dlcp_types.h. */

/* Largest world the tag packing can number (see the tag layout). */
#define DLCP_COLL_MAX_WORLD 4096u
/* Deepest topology label vector RAT accepts. */
#define DLCP_COLL_MAX_LEVELS 8u
/* Default pipelining granularity: bytes per transfer. */
#define DLCP_COLL_DEFAULT_CHUNK_BYTES (256u * 1024u)
#define DLCP_COLL_MAX_AUTO_CHUNK_BYTES (4u * 1024u * 1024u)
/* RAT's smallest part of the vector a tree carries (rat.c: fewer trees
 * than ranks below n times this). */
#define DLCP_COLL_RAT_MIN_PART_BYTES (8u * 1024u)
/* dlcp_coll_params.recv_ahead_bytes's default: scratch a plan may spend
 * so that its receives are posted early (see there). */
#define DLCP_COLL_DEFAULT_RECV_AHEAD_BYTES (4u * 1024u * 1024u)
/* Default bypass threshold factor alpha (see docs/collectives.md). */
#define DLCP_COLL_DEFAULT_BYPASS_ALPHA 1.5

/*
 * Tag layout, 20 bits (bit 19 = most significant):
 *
 *   19 18 17 | 16 ............................. 0
 *   class    | sequence
 *
 *   class 0  a transfer of the algorithm's static plan; sequence =
 *            phase_step * nseg + segment, where phase_step numbers the
 *            algorithm's steps between this pair (ring: 0..2(n-1)-1;
 *            halving-doubling: fold, halving, doubling, unfold steps;
 *            PS: 0 push, 1 pull; RAT: 2 * tree + (0 up, 1 down)) and nseg
 *            is the number of pipeline segments per chunk (plan_dump shows
 *            it).  Both ends compute the same numbers from the parameters.
 *   class 1  straggler bypass: the bypassing rank's own raw chunk, sent to
 *            its successor; sequence = ring slot (step * nseg + segment).
 *   class 2  straggler bypass: the slow rank's partial sent past its
 *            successor; sequence = ring slot.
 *   class 3  loss agreement: missing-range lists; sequence 0 = folded in
 *            by a rank beyond the largest power of two, 1 = the union
 *            sent back to it, 2 + k = recursive doubling round k.
 *   class 4-7 reserved.
 */
#define DLCP_COLL_TAG_BITS 20u
#define DLCP_COLL_TAG_CLASS_SHIFT 17u
#define DLCP_COLL_TAG_SEQ_MASK ((1u << DLCP_COLL_TAG_CLASS_SHIFT) - 1u)
#define DLCP_COLL_TAG_PLAN 0u
#define DLCP_COLL_TAG_BYPASS_RAW 1u
#define DLCP_COLL_TAG_BYPASS_PARTIAL 2u
#define DLCP_COLL_TAG_AGREE 3u
#define DLCP_COLL_TAG(cls, seq)                                                \
  (((uint32_t)(cls) << DLCP_COLL_TAG_CLASS_SHIFT) |                            \
   ((uint32_t)(seq) & DLCP_COLL_TAG_SEQ_MASK))

/*
 * NOTE values, 64 bits: bits 63..56 a kind, bits 55..0 its argument.
 *   1 BARRIER        dissemination barrier round r
 *   2 BYPASS_REQ     "I waited too long for ring slot s; send it past me"
 *   3 BYPASS_GRANT   "slot s goes to your successor; cancel your RECV"
 *   4 BYPASS_DENY    "slot s was already sent to you"
 *   5 BYPASS_INCOMING "slot s arrives as two parts: raw from your
 *                     predecessor, partial from me"
 *   6 AGREE_UP       count of missing ranges following, folded in by a
 *                    rank beyond the largest power of two
 *   7 AGREE_DOWN     count of the agreed ranges following, back to it
 *   8 ABORT          "the operation failed because of rank a" (a =
 *                    2^56 - 1: the sender itself failed)
 *   9 AGREE_ROUND    count of missing ranges following, a recursive
 *                    doubling round's (the round is the pair's)
 */
#define DLCP_COLL_NOTE_KIND_SHIFT 56u
#define DLCP_COLL_NOTE_ARG_MASK ((UINT64_C(1) << 56) - 1u)
#define DLCP_COLL_NOTE(kind, arg)                                              \
  (((uint64_t)(kind) << DLCP_COLL_NOTE_KIND_SHIFT) |                           \
   ((uint64_t)(arg) & DLCP_COLL_NOTE_ARG_MASK))
enum {
  DLCP_COLL_NOTE_BARRIER = 1,
  DLCP_COLL_NOTE_BYPASS_REQ = 2,
  DLCP_COLL_NOTE_BYPASS_GRANT = 3,
  DLCP_COLL_NOTE_BYPASS_DENY = 4,
  DLCP_COLL_NOTE_BYPASS_INCOMING = 5,
  DLCP_COLL_NOTE_AGREE_UP = 6,
  DLCP_COLL_NOTE_AGREE_DOWN = 7,
  DLCP_COLL_NOTE_ABORT = 8,
  DLCP_COLL_NOTE_AGREE_ROUND = 9
};

/*
 * The parameters of one collective.  Fill with dlcp_coll_params_default,
 * then set what differs.  Every rank must pass the same values except
 * |rank| and the buffers: each rank derives its half of every transfer from
 * them, so a rank with another count, chunk size, algorithm or topology
 * would post transfers nobody matches.  The struct is copied by
 * dlcp_coll_new except the buffers and |topo|, which are borrowed (see
 * below).
 *
 * Buffers and counts, per kind (|count| is always in elements of |dtype|;
 * the "shard" of rank r is elements [off_r, off_r + len_r) of a |count|-
 * element vector split into |world| nearly equal parts, the first
 * count % world parts one element longer: dlcp_coll_shard):
 *   ALLREDUCE       sendbuf: count elements; recvbuf: count elements.
 *                   In place when sendbuf == recvbuf (or sendbuf NULL).
 *   REDUCE_SCATTER  sendbuf: count elements; recvbuf: this rank's shard
 *                   (len_r elements).  In place when sendbuf == recvbuf
 *                   (or sendbuf NULL): recvbuf then holds all count
 *                   input elements, the result is left at the shard's
 *                   position, and the rest is overwritten with partial
 *                   sums.
 *   ALLGATHER       sendbuf: this rank's shard (len_r elements); recvbuf:
 *                   count elements.  In place when sendbuf == recvbuf (or
 *                   sendbuf NULL): the shard is already at off_r in recvbuf.
 *   BROADCAST       recvbuf: count elements on every rank; on |root| the
 *                   data comes from sendbuf (copied into recvbuf unless
 *                   they are equal or sendbuf is NULL).
 *   REDUCE          sendbuf: count elements; recvbuf: count elements, on
 *                   |root| the reduction, elsewhere a partial one (the
 *                   ranks before it on the way to the root).  In place
 *                   as ALLREDUCE.  RING: a chain through the ranks
 *                   after the root in ring order, ending at the root,
 *                   pipelined in segments (the RA-INA/CINA seed's
 *                   reduce inside a host: n + k - 2 steps of k
 *                   segments), AUTO's choice; HALVING_DOUBLING: the
 *                   binomial tree to the root, log2 n steps.
 *   BARRIER         no buffers; count ignored.
 * sendbuf is only read; recvbuf is written.  Both are borrowed: they must
 * stay valid, and sendbuf unchanged, until DONE has been polled or the
 * operation is deleted, and recvbuf holds the result only after DONE.
 */
typedef struct dlcp_coll_params {
  dlcp_coll_kind kind;
  dlcp_algo algo;      /* AUTO picks by kind, size, world and topology */
  uint32_t rank;       /* this rank, 0..world-1 */
  uint32_t world;      /* 1..DLCP_COLL_MAX_WORLD */
  const void *sendbuf;
  void *recvbuf;
  uint64_t count;      /* elements; see above */
  dlcp_dtype dtype;
  dlcp_redop op;       /* ALLREDUCE and REDUCE_SCATTER only */
  uint32_t root;       /* BROADCAST and REDUCE only */
  uint64_t chunk_bytes; /* pipelining: the largest transfer of the plan is
                           about this many bytes; 0 = by size (a quarter
                           of the algorithm's chunk, within
                           DLCP_COLL_DEFAULT_CHUNK_BYTES and
                           DLCP_COLL_MAX_AUTO_CHUNK_BYTES) */
  uint64_t rat_min_part_bytes; /* RAT: a tree's smallest part; 0 =
                                  DLCP_COLL_RAT_MIN_PART_BYTES (a driver
                                  that scales its buffers down, as the
                                  simulator, scales this and chunk_bytes
                                  alike, so its plans have the same
                                  transfers) */
  /* Receives that announce themselves when posted (MLT's START, which
   * releases the sender's data) are posted further ahead where that costs
   * little memory: a ring's three steps ahead (four scratch banks instead
   * of two) when its chunk is at most this many bytes, and RAT's result
   * into scratch, posted at once and copied into place, when the vector
   * is (and its trees' parts small: rat.c).  Neither for transfers the
   * driver sends eagerly (exact_bytes), which wait for no receive.  0 =
   * never (a transport whose sender does not wait for the
   * receive gains nothing by it: the simulator's TCP baselines); default
   * DLCP_COLL_DEFAULT_RECV_AHEAD_BYTES.  A driver that scales its buffers
   * down scales this alike. */
  uint64_t recv_ahead_bytes;
  /* Topology for RAT (and for AUTO's choice): topo[r * topo_levels + l] is
   * rank r's label at level l: level 0 the rack (the innermost
   * oversubscribed region), 1 the pod, ...  Ranks with equal labels at
   * levels l..topo_levels-1 share a level-l region.  NULL / 0 levels = one
   * flat region.  Borrowed until dlcp_coll_new returns (it is copied). */
  const uint32_t *topo;
  uint32_t topo_levels; /* 0..DLCP_COLL_MAX_LEVELS */
  /* Every peer is on this host and reached through shared memory: steps
   * cost copies, not network round trips, which moves AUTO's thresholds
   * (see dlcp_coll_resolve_algo). */
  bool same_host;
  /* Straggler bypass (RING_BYPASS): a rank waiting for its predecessor's
   * ring slot longer than alpha * T + T_trans asks it to send past it.
   * alpha > 1 (0 = DLCP_COLL_DEFAULT_BYPASS_ALPHA).  The step time T and
   * transfer time T_trans are estimated online; the hints seed the
   * estimates (pass the previous operation's dlcp_coll_result values), 0 =
   * learn from this operation's first steps. */
  double bypass_alpha;
  dlcp_duration bypass_step_hint_ns;
  dlcp_duration bypass_trans_hint_ns;
  /* Loss bound p in [0, 1): at most this fraction of the output elements
   * may end up missing (zero, and reported); 0 = exact.  It is end to end:
   * each data transfer is posted with p / 2(n-1) (all-reduce) or p / (n-1)
   * (other kinds), the share that keeps the union of all transfers' holes
   * within p (up to rounding holes outward to whole elements).  With p > 0
   * the operation ends with an agreement on missing ranges. */
  double loss_bound;
  /* The driver delivers every transfer of at most this many bytes whole
   * (an eager path that the loss bound does not apply to); 0 = none.  No
   * transfer of an all-reduce carries more than its vector, so one of at
   * most exact_bytes runs exact whatever loss_bound says: no agreement at
   * its end, which would only add log2(n) hops of latency. */
  uint64_t exact_bytes;
  /* A group of a larger communicator: NULL, or the operation runs among
   * the |world| ranks members[0..world-1] of it (distinct), |rank| and
   * |root| index this list, and every action's and event's |peer| is the
   * communicator's rank members[i].  Needs loss_bound 0 and no
   * RING_BYPASS (their agreements and requests are among ranks 0..world-1).
   * Borrowed until dlcp_coll_new returns (it is applied to the plan). */
  const uint32_t *members;
  /* The driver applies RECV actions' |recv_place| (see dlcp_coll_action):
   * a receive whose bytes are only reduced into another range may then
   * reduce them on arrival, piece by piece while they are in cache,
   * instead of being written to scratch and read again by a later pass.
   * Not with RING_BYPASS. */
  bool reduce_on_arrival;
} dlcp_coll_params;

/* A range of bytes (transfer level) or elements (result level). */
typedef struct dlcp_coll_range {
  uint64_t offset;
  uint64_t len;
} dlcp_coll_range;

typedef enum dlcp_coll_act_type {
  DLCP_COLL_ACT_NONE = 0,
  DLCP_COLL_ACT_SEND,
  DLCP_COLL_ACT_RECV,
  DLCP_COLL_ACT_CANCEL_RECV,
  DLCP_COLL_ACT_NOTE,
  DLCP_COLL_ACT_DONE
} dlcp_coll_act_type;

/*
 * An action.  SEND: |send_buf| is borrowed from the operation (it points
 * into the caller's buffers or the operation's scratch) and must not be
 * written; it stays valid until dlcp_coll_on_sent for (peer, tag).  RECV:
 * the driver may write |recv_buf| until it calls dlcp_coll_on_received for
 * (peer, tag), never after; with |recv_place| set, every piece of payload
 * that arrives (once each, whole elements) goes through
 * recv_place(recv_place_user, dst, payload, len), dst being where it
 * belongs in |recv_buf|, and missing ranges are left as they are (not
 * zero-filled).  CANCEL_RECV: stop writing the RECV (peer,
 * tag) at once and never report it.  NOTE: |value| to |peer|, reliably and
 * in order per peer.  |bytes| may be 0 only for none of them: the plan
 * drops empty transfers on both sides.
 */
typedef struct dlcp_coll_action {
  dlcp_coll_act_type type;
  uint32_t peer;
  uint32_t tag;
  const void *send_buf; /* SEND */
  void *recv_buf;       /* RECV */
  /* RECV, only with dlcp_coll_params.reduce_on_arrival: NULL (copy the
   * payload into recv_buf), or the operation's reduction, which the driver
   * hands each arriving piece to.  |recv_place_unit| (the element size)
   * divides every piece's offset and length. */
  void (*recv_place)(void *user, uint8_t *dst, const uint8_t *payload,
                     size_t len);
  void *recv_place_user;
  uint32_t recv_place_unit;
  uint64_t bytes;       /* SEND, RECV */
  double loss_bound;    /* SEND, RECV: p for this transfer */
  uint32_t stage;       /* SEND, RECV: receives this rank completes before
                           (0: the first exchange); drivers send earlier
                           stages first and at higher priority */
  uint64_t value;       /* NOTE */
} dlcp_coll_action;

typedef struct dlcp_coll_result {
  int status;             /* 0, or the first failure (negative DLCP_ERR_*) */
  int32_t failed_peer;    /* the peer whose transfer failed, or -1 */
  dlcp_algo algo;         /* the algorithm that ran (AUTO resolved) */
  bool done;
  uint32_t bypasses;      /* ring slots this rank sent past its slow
                             predecessor */
  uint32_t bypass_denied; /* requests the predecessor refused (already sent) */
  dlcp_duration step_ns;  /* bypass estimates at the end, to seed the next */
  dlcp_duration trans_ns; /* operation's hints (0 = no estimate) */
  /* Output element ranges that were not delivered and are zero in the
   * output, sorted and merged; identical on every rank.  Indices are into
   * the |count|-element vector (REDUCE_SCATTER: the full input vector, so
   * a rank's own part is the intersection with its shard).  Owned by the
   * operation; valid until dlcp_coll_del. */
  const dlcp_coll_range *missing;
  size_t nmissing;
  uint64_t missing_elems;
  double delivered_fraction; /* 1 - missing_elems / count (1 if count 0) */
  dlcp_tstamp start_ns, end_ns;
} dlcp_coll_result;

/* dlcp_coll_params_default zeroes |p| and sets AUTO, world 1, FLOAT32, SUM,
 * the default chunk and alpha. */
void dlcp_coll_params_default(dlcp_coll_params *p);

/* dlcp_coll_shard gives the element offset and length of part |part| of a
 * |count|-element vector split into |parts| nearly equal parts. */
void dlcp_coll_shard(uint64_t count, uint32_t parts, uint32_t part,
                     uint64_t *off, uint64_t *len);

/* dlcp_coll_resolve_algo returns the algorithm |p| runs (AUTO resolved;
 * the rule is in docs/collectives.md), or -1 if |p->algo| cannot run
 * |p->kind|. */
int dlcp_coll_resolve_algo(const dlcp_coll_params *p);

/*
 * dlcp_coll_new creates this rank's state for the collective |p| in |*op|,
 * building its plan.  For an out-of-place operation the input is copied
 * into the output buffer here (so sendbuf is only read during this call,
 * except for ALLREDUCE/REDUCE_SCATTER nothing reads it later either).
 * |mem| (NULL = default) must outlive the operation.
 *
 * Returns 0, or DLCP_ERR_INVALID_ARGUMENT (a bad field: rank >= world, an
 * unknown dtype/op, an algorithm that does not run this kind, a NULL
 * buffer with count > 0, a loss bound outside [0, 1), alpha <= 1),
 * DLCP_ERR_LIMIT (world or plan too large for the tag space), or
 * DLCP_ERR_NOMEM.
 */
int dlcp_coll_new(dlcp_coll **op, const dlcp_coll_params *p,
                  const dlcp_mem *mem, dlcp_tstamp now);

/* dlcp_coll_del frees |op| (NULL is fine).  Buffers are no longer
 * referenced; transfers still in flight must be abandoned by the driver. */
void dlcp_coll_del(dlcp_coll *op);

/*
 * dlcp_coll_reuse makes |op|, an operation that succeeded and whose DONE
 * has been polled, this rank's state for the collective |p| from |now|,
 * keeping its plan and the executor's arrays instead of building them
 * again (what dlcp_coll_new costs a small operation: allocations and the
 * plan, some 0.5-0.8 us).  |p| may change the buffers (the out-of-place
 * input is copied as by dlcp_coll_new) and nothing that shapes the plan:
 * its geometry (kind, algorithm as resolved, rank, world, root, count,
 * dtype, reduction, chunk, topology levels, in or out of place for a
 * reduce-scatter) and reduce_on_arrival must be |op|'s.  Operations with
 * a plan that changes as it runs or that read what |p| borrows are never
 * reused: RING_BYPASS, RAT, a loss bound, a group (members).  Afterwards
 * |op| behaves exactly as a new operation would.
 *
 * Returns 0, or DLCP_ERR_INVALID_ARGUMENT when |op| cannot take |p| (as
 * above, or |p| itself is invalid): |op| is then unchanged and the
 * caller creates a new operation; DLCP_ERR_NOMEM (|op| must then be
 * deleted).
 */
int dlcp_coll_reuse(dlcp_coll *op, const dlcp_coll_params *p,
                    dlcp_tstamp now);

/*
 * dlcp_coll_poll returns the next action in |act|.  Call it until it
 * returns DLCP_COLL_ACT_NONE, after creation and after every event.
 * DONE is returned once; NONE afterwards.  Fires expired bypass timers.
 * Returns 0, or a negative code if the operation failed (DONE with the
 * failure is still returned once).
 */
int dlcp_coll_poll(dlcp_coll *op, dlcp_coll_action *act, dlcp_tstamp now);

/*
 * dlcp_coll_on_sent reports that the SEND (|peer|, |tag|) finished with
 * |status| (0 or a negative DLCP_ERR_*; a failure fails the operation and
 * names |peer|).  Returns 0, or DLCP_ERR_UNKNOWN_TRANSFER if no such SEND
 * is outstanding (the event is ignored).
 */
int dlcp_coll_on_sent(dlcp_coll *op, uint32_t peer, uint32_t tag, int status,
                      dlcp_tstamp now);

/*
 * dlcp_coll_on_received reports that the RECV (|peer|, |tag|) finished.
 * |missing| lists |nmissing| byte ranges of that RECV's buffer that were
 * not delivered and were zero-filled by the driver (borrowed for the call;
 * any order, may overlap).  Missing ranges on an operation with loss bound
 * 0 fail it with DLCP_ERR_SIZE_MISMATCH.  Returns 0,
 * DLCP_ERR_UNKNOWN_TRANSFER, or DLCP_ERR_BAD_OFFSET (a range outside the
 * buffer: the operation fails).
 */
int dlcp_coll_on_received(dlcp_coll *op, uint32_t peer, uint32_t tag,
                          int status, const dlcp_coll_range *missing,
                          size_t nmissing, dlcp_tstamp now);

/*
 * dlcp_coll_on_note delivers a NOTE |value| from |peer|.  Notes may arrive
 * before the operation needs them; they are kept.  Returns 0 or
 * DLCP_ERR_BAD_TYPE (not a note of this operation; ignored) or
 * DLCP_ERR_NOMEM.
 */
int dlcp_coll_on_note(dlcp_coll *op, uint32_t peer, uint64_t value,
                      dlcp_tstamp now);

/* dlcp_coll_next_deadline returns when dlcp_coll_poll next has timed work,
 * or DLCP_TSTAMP_NEVER. */
dlcp_tstamp dlcp_coll_next_deadline(const dlcp_coll *op);

/*
 * dlcp_coll_final_prefix returns how many leading elements of the result
 * are final: for a REDUCE at its root, the segments of the chain summed
 * so far, in order (the RA-INA/CINA seed's overlap: a host's master sends
 * the first reduced chunk on while the rest is reduced); for any other
 * operation, |count| once DONE can be polled, else 0.
 */
uint64_t dlcp_coll_final_prefix(dlcp_coll *op);

/*
 * dlcp_coll_awaited_note tells whether |op| is held up by a control note
 * that has not come (a barrier round's, or the loss agreement's list
 * from a child or the parent) rather than by a transfer, which has its
 * own no-progress timer.  Returns true and sets |*peer| to the rank it
 * waits on and |*since| to the operation's last progress (a step done or
 * an event taken), or false.  The driver uses it to find a rank that
 * froze between transfers: notes have no timer of their own.
 */
bool dlcp_coll_awaited_note(const dlcp_coll *op, uint32_t *peer,
                            dlcp_tstamp *since);

/* dlcp_coll_get_result fills |res|; meaningful fields are final once DONE has
 * been polled (before that |res->done| is false). */
void dlcp_coll_get_result(const dlcp_coll *op, dlcp_coll_result *res);

/*
 * dlcp_coll_plan_dump writes the static plan of rank |p->rank| for |p| as
 * text into |buf| (NUL-terminated; buffers are not touched and may be
 * NULL): a header line, then one line per step with its dependencies.
 * Returns the length written (excluding the NUL), DLCP_ERR_BUFFER_TOO_SMALL
 * if it does not fit, or an error of dlcp_coll_new.
 */
dlcp_ssize dlcp_coll_plan_dump(const dlcp_coll_params *p, char *buf,
                               size_t buflen);

/* The number of dlcp_algo values (they run 0..DLCP_COLL_NALGOS-1). */
#define DLCP_COLL_NALGOS ((unsigned)DLCP_ALGO_RA_INA + 1u)

/*
 * Algorithm names, from one table (algo.c).  Every algorithm has a name
 * ("halving_doubling"), printed by the runtime and in plan dumps, and a
 * short name ("hd"), used by scenario files, simulator CSVs and command
 * lines; the two are equal where the name is already short ("ring").
 * Both return "?" for a value outside the enum.
 */
const char *dlcp_algo_name(dlcp_algo algo);
const char *dlcp_algo_short_name(dlcp_algo algo);

/* dlcp_algo_parse sets |*algo| from either spelling of its name.  Returns 0
 * or DLCP_ERR_INVALID_ARGUMENT (|*algo| untouched). */
int dlcp_algo_parse(const char *name, dlcp_algo *algo);

/* The collective's name for logs and dumps ("allreduce"); "?" if unknown. */
const char *dlcp_coll_kind_name(dlcp_coll_kind kind);

#endif /* DLCP_COLL_COLL_H */
