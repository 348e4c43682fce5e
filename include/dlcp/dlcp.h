/*
 * dlcp.h: the public API of the dlcp runtime.
 *
 * A communicator joins the ranks of one job (torchrun's conventions:
 * MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE, or mpirun's or srun's
 * numbering, plus DLCP_* options, see docs/runtime.md) and carries MLT
 * transfers between them: a reliable TCP control connection and K UDP paths per
 * pair of ranks, driven by one event-loop thread per communicator.
 *
 * The point-to-point API is the MLT seed's: asynchronous posts with
 * completion queues.  A posted buffer is borrowed by the library until its
 * completion has been returned by dlcp_poll_cq / dlcp_wait_cq; the caller
 * must not touch (send: modify; recv: read or write) it before then.
 *
 * Return values (after ngtcp2's header): every function documents what it
 * returns.  Codes are 0 for success or a negative DLCP_ERR_* (dlcp_strerror
 * explains it); a few return a count (dlcp_poll_cq, dlcp_wait_cq).
 * DLCP_ERR_PENDING is the one negative value that is not a failure: the
 * operation is still running and may be waited for again.  A failure
 * arrives once and is then returned again by every later wait or test.
 * Calls on one communicator may come from any thread.
 */
#ifndef DLCP_H
#define DLCP_H

#include <stddef.h>
#include <stdint.h>

#include "dlcp/dlcp_types.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dlcp_comm dlcp_comm;
typedef struct dlcp_cq dlcp_cq;

/* A byte range of a tensor. */
typedef struct dlcp_range {
  uint64_t offset;
  uint64_t len;
} dlcp_range;

/* The layout of dlcp_comm_config this header describes.  A new field
 * raises it, so a caller compiled against an older header is told to
 * rebuild instead of having its config misread. */
#define DLCP_COMM_CONFIG_VERSION 2u

/*
 * Explicit configuration, for callers that do not use the environment.
 * Fill with dlcp_comm_config_default (which sets |version|), then set at
 * least rank, world_size, master_addr and master_port.  Strings are copied
 * by dlcp_comm_create.
 */
typedef struct dlcp_comm_config {
  uint32_t version;         /* DLCP_COMM_CONFIG_VERSION */
  uint32_t rank;
  uint32_t world_size;
  const char *master_addr;  /* rank 0's rendezvous host */
  uint16_t master_port;     /* rank 0's rendezvous port */
  const char *local_addr;   /* address to bind; NULL = the one that
                               reaches master_addr */
  uint32_t job;             /* job token; datagrams of other jobs are
                               dropped.  Default 1 */
  uint32_t paths;           /* K UDP paths per peer (1..64), each with
                               min(4, 64 / K) routes: a socket per route,
                               so K * routes sockets.  Default 8 */
  uint32_t segment_bytes;   /* most payload per datagram (a path whose MTU
                               holds less gets what it holds); 0 = from the
                               path MTU */
  double line_rate_gbps;    /* MLT's start rate and ceiling.  Default 0:
                               the path's (the speed of the interface
                               towards each peer, at least 25; 100 between
                               ranks on one host) */
  uint64_t window_bytes;    /* unacknowledged data per peer, 0 = no cap.
                               Default 1 MiB (bounds the receiver's queue
                               when hosts, not links, are the bottleneck) */
  uint32_t eager_bytes;     /* a transfer of at most this many bytes goes
                               whole on the control connection, without
                               the MLT handshake (reliable, one one-way
                               trip); 0 = never.  Default 64 KiB; every
                               rank must use the same value */
  uint32_t spin_us;         /* a thread waiting for a completion polls
                               (yielding the core in between) and
                               sleeps once this long passes with no
                               datagram received.  Default 1000 */
  uint32_t shm;             /* 1: peers on this host and in this
                               network namespace (a world of at most 16)
                               exchange datagrams through shared memory
                               instead of UDP sockets; 0: always UDP.
                               Default 1 */
  uint32_t timeout_ms;      /* an operation without progress for this
                               long fails naming the peer.  Default 30000 */
  uint32_t rdzv_timeout_ms; /* joining the job.  Default 60000 */
  const char *topo;         /* this rank's location, as DLCP_TOPO: NULL or
                               "flat", "rack:N", or labels innermost first
                               such as "rack0/pod1" */
  /* Fault injection in this rank's datagram send path (a test facility):
   * probabilities in [0, 1], a seeded generator. */
  double fault_drop, fault_dup, fault_reorder, fault_delay;
  uint32_t fault_delay_us;
  uint64_t fault_seed;
  /* A straggler: in every collective this rank's first completed receive
   * reaches the collective this many ms late (DLCP_FAULT_STRAGGLE). */
  uint32_t fault_straggle_ms;
  uint32_t control_datagrams; /* 1: MLT's control messages (START, PROBE,
                               BITMAP, STOP, EAGER) go as datagrams with
                               their own retransmission, so a lost one
                               costs an RTT-scale timeout, not TCP's
                               200 ms; 0: on the TCP control connection.
                               Every rank must use the same value.
                               Default 1 (docs/protocol.md) */
  const char *job_secret;     /* NULL: a trusted network, nothing
                                 authenticated.  Else the job's secret
                                 (16..1024 bytes, NUL-terminated, the same
                                 on every rank; copied): rendezvous requires
                                 it and every datagram and control message
                                 carries a MAC (docs/runtime.md,
                                 "Authenticated jobs").  Default NULL */
} dlcp_comm_config;

/* dlcp_comm_config_default fills |cfg| with the defaults and the version
 * (the defaults are those of docs/runtime.md; job 1). */
void dlcp_comm_config_default(dlcp_comm_config *cfg);

/*
 * dlcp_comm_create joins the job described by |cfg| (rendezvous with every
 * rank, control connections, UDP sockets) and starts the communicator's
 * event-loop thread.  It blocks until every rank has joined or the
 * rendezvous timeout passes.  On success the caller owns |*comm| and frees
 * it with dlcp_comm_destroy.  On failure |err| (if not NULL) receives a
 * message naming what failed (variable, address, rank).
 *
 * Returns 0; DLCP_ERR_INVALID_ARGUMENT (|comm| or |cfg| NULL);
 * DLCP_ERR_CONFIG (a field out of range, or |cfg->version| is not
 * DLCP_COMM_CONFIG_VERSION); DLCP_ERR_TIMEOUT (not every rank joined in
 * time); DLCP_ERR_PEER_CLOSED, DLCP_ERR_BAD_MAGIC (a peer or the
 * rendezvous server misbehaved); DLCP_ERR_SYSTEM or a negated errno (a
 * system call failed); DLCP_ERR_NOMEM.
 */
int dlcp_comm_create(dlcp_comm **comm, const dlcp_comm_config *cfg,
                     char *err, size_t errlen);

/*
 * dlcp_comm_create_from_env is dlcp_comm_create with the configuration
 * read from the environment: MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE
 * (torchrun's); without RANK and WORLD_SIZE, OMPI_COMM_WORLD_RANK and
 * OMPI_COMM_WORLD_SIZE (mpirun), PMI_RANK and PMI_SIZE (MPICH's mpiexec)
 * or SLURM_PROCID and SLURM_NTASKS (srun), in that order, with
 * MASTER_ADDR (Slurm: else SLURM_LAUNCH_NODE_IPADDR) and MASTER_PORT
 * defaulting to 29500; none of these: a world of one), and
 * DLCP_TIMEOUT_MS, DLCP_RDZV_TIMEOUT_MS, DLCP_PATHS,
 * DLCP_SEGMENT, DLCP_ADDR, DLCP_JOB, DLCP_RATE_GBPS, DLCP_WINDOW_BYTES,
 * DLCP_EAGER_BYTES, DLCP_SPIN_US, DLCP_SHM, DLCP_RTT_LOW_US,
 * DLCP_JOB_SECRET, DLCP_CONTROL_DATAGRAMS, DLCP_FLIGHT_DIR,
 * DLCP_RTT_HIGH_US, DLCP_QUEUE_PKTS, DLCP_TOPO and
 * DLCP_FAULT_{DROP,DUP,REORDER,DELAY,DELAY_US,SEED,PAUSE,STRAGGLE,
 *   CTL_RESET}
 * (docs/runtime.md says what each does).
 * Returns what dlcp_comm_create returns; a malformed value fails with
 * DLCP_ERR_CONFIG and a message naming the variable, its value and what
 * was expected.
 */
int dlcp_comm_create_from_env(dlcp_comm **comm, char *err, size_t errlen);

/*
 * dlcp_comm_destroy stops the loop thread, fails every outstanding
 * operation with DLCP_ERR_CANCELED (their buffers are released), leaves
 * the job (a barrier with the other ranks, bounded by the timeout) and
 * frees |comm|.  NULL is fine.  Completion queues must be destroyed after.
 */
void dlcp_comm_destroy(dlcp_comm *comm);

/* This rank, and the number of ranks of the job (cannot fail). */
uint32_t dlcp_comm_rank(const dlcp_comm *comm);
uint32_t dlcp_comm_size(const dlcp_comm *comm);

/* Counters of the communicator's datagram path, for tests and tools. */
typedef struct dlcp_comm_stats {
  uint64_t datagrams_sent, datagrams_received;
  uint64_t dropped_malformed; /* failed to decode */
  uint64_t dropped_foreign;   /* another job, or an unknown sender */
  uint64_t dropped_stale;     /* finished or unknown transfer */
  uint64_t dropped_invalid;   /* decodes, contradicts its transfer */
  uint64_t fault_dropped, fault_duplicated, fault_delayed;
  uint64_t retransmissions;
  uint64_t shm_peers;      /* peers reached through shared memory */
  uint64_t machine_ranks;  /* this job's ranks on this machine (same
                              kernel boot id; a rank that published none
                              counts as here), this one included: a
                              waiting rank yields its core at once when
                              they outnumber the online CPUs */
  uint64_t shm_sent;       /* datagrams written to their rings */
  uint64_t shm_full;       /* dropped: the peer's ring was full (an ACK or
                              control datagram; data waits for room) */
  uint64_t doorbells;      /* wake-ups sent to sleeping peers */
  double min_rate_gbps;    /* the slowest peer's current MLT send rate */
  uint64_t max_srtt_ns;    /* the largest smoothed RTT over peers */
  uint64_t ce_received;    /* data packets that arrived ECN-CE marked */
  uint64_t cuts_ecn;       /* MLT rate cuts for CE marks the peers echoed */
  uint64_t cuts_delay;     /* MLT rate cuts for a rising or high RTT */
  uint64_t control_retx;   /* control datagrams sent again (no CACK in
                              time; control_datagrams only) */
  uint64_t control_retx_needless; /* of those sent after their timeout,
                                     copies a peer got before it had
                                     acknowledged the first (it waited for
                                     a core, most often): each is a round
                                     trip the control channel's timeout
                                     learns from (docs/protocol.md) */
  uint64_t paths_left_out; /* spells for which a path (UDP source port)
                              that lost far more than the others carried
                              none of a peer's packets */
  uint64_t paths_rerouted; /* paths moved to another of their UDP source
                              ports (left out, or losing half of what
                              they carried: docs/runtime.md, "Paths") */
  uint64_t auth_forged;    /* dropped: a MAC that did not check (jobs
                              with a secret only) */
  uint64_t auth_replayed;  /* dropped: a correctly tagged message seen
                              before, or too old to tell */
  /* Where a transfer's time went, summed over peers: what to read first
   * when an iteration takes longer than its data needs. */
  uint64_t data_reordered;     /* data packets that arrived after one sent
                                  later than them (other paths, queues) */
  uint64_t bitmaps_early;      /* requests for holes of a first round still
                                  being sent */
  uint64_t bitmaps_unprompted; /* requests for holes sent on a round's last
                                  packet, before the sender probed */
  uint64_t window_timeouts;    /* full send windows presumed drained after
                                  no ACK for two drain intervals (each
                                  stalls its peer for that long) */
  uint64_t acks_quiet;         /* ACKs sent for packets whose regular ACK
                                  (the 10th, or one asked for) was lost,
                                  once none came for a reordering window */
  uint64_t acks_received;      /* ACKs of this rank's data from the peers */
  uint64_t ack_hold_ns;        /* summed over those ACKs: how long the
                                  peer held the packet an ACK answers,
                                  from its arrival at the peer's host to
                                  the ACK (the peer's process not running
                                  or busy, or a quiet ACK's wait): time
                                  of a round trip not spent in the
                                  network; divide by acks_received */
  uint64_t max_ack_hold_ns;    /* the longest such hold */
  /* In-network aggregation (DLCP_ALGO_INA, DLCP_ALGO_RA_INA), summed over
   * this rank's operations that have ended: */
  uint64_t ina_groups;      /* groups the switch reduced */
  uint64_t ina_ring_groups; /* RA-INA groups sent through the ring */
  uint64_t ina_resent;      /* contributions sent again after the RTO */
  uint64_t ina_busy;        /* BUSY or AHEAD answers: no aggregators free
                               for the group, or it ran ahead of the job */
  uint64_t ina_waiting;     /* WAITING answers: the switch held the re-sent
                               group, other ranks had not contributed */
  uint64_t ina_dup_results; /* results of groups already done (a result
                               the switch sent again) */
  /* Of datagrams_received, those that came from the socket coalesced with
   * others of their sender in one message (UDP GRO: the host's NIC
   * merged them, or loopback passed a GSO send through whole): 0 where
   * the NIC does not coalesce or the runtime reads datagrams in place. */
  uint64_t datagrams_coalesced;
  /* Datagrams from the aggregation switch (DLCP_SWITCH) to this rank, and
   * of them those that came coalesced, as datagrams_coalesced counts. */
  uint64_t ina_datagrams_received, ina_datagrams_coalesced;
  /* Of datagrams_sent, those the kernel would not take (a full socket
   * buffer, a refused send): lost before the wire, and recovered as any
   * loss is.  Datagrams to the aggregation switch are not counted. */
  uint64_t datagrams_unsent;
  /* Control connections to lower ranks dialed again while the job was
   * joining because the other end closed or reset them before answering
   * (a connection its kernel never completed: the handshake's last
   * packets lost; docs/runtime.md, "Control connections"). */
  uint64_t control_redials;
  /* Datagrams for this rank that its host's kernel dropped because the
   * receiving socket's buffer was full (the socket's drop count): lost at
   * this host, its process not reading for a while, not in the network;
   * recovered as any loss is.  Counted as the kernel counts, a socket
   * buffer at a time: a run of datagrams that came coalesced (GRO) and
   * was dropped whole counts once.  0 where the kernel does not count. */
  uint64_t datagrams_rx_dropped;
  /* The same for the datagrams from the aggregation switch (DLCP_SWITCH):
   * results its socket's kernel dropped, its buffer full. */
  uint64_t ina_datagrams_rx_dropped;
  /* Data packets read after one sent later than them although they
   * reached this host first (by the kernel's arrival time stamp): the
   * host reordered them after their arrival (a busy core's receive
   * backlog), where data_reordered counts those the network reordered.
   * Not learnt by the reordering window (docs/protocol.md, "Packets
   * overtaken inside the host"): a hole such a packet leaves may be asked
   * for, and sent, twice.  0 where arrivals are not time-stamped. */
  uint64_t data_overtaken_in_host;
} dlcp_comm_stats;

/* dlcp_comm_get_stats fills |st| with a consistent snapshot (cannot
 * fail). */
void dlcp_comm_get_stats(dlcp_comm *comm, dlcp_comm_stats *st);

/* dlcp_comm_udp_port returns the local UDP port of socket |socket| (for
 * capture filters and tests), or 0 if there is no such socket: path k's
 * routes are sockets k, k + paths, k + 2 paths ...; socket 0 is the one
 * peers send to. */
uint16_t dlcp_comm_udp_port(const dlcp_comm *comm, uint32_t socket);

/* dlcp_cq_create makes a completion queue owned by the caller; destroy it
 * with dlcp_cq_destroy (NULL is fine) after every operation posted to it
 * completed (or after the communicator is destroyed).  Returns 0,
 * DLCP_ERR_INVALID_ARGUMENT (|cq| NULL) or DLCP_ERR_NOMEM. */
int dlcp_cq_create(dlcp_comm *comm, dlcp_cq **cq);
void dlcp_cq_destroy(dlcp_cq *cq);

/* A priority function: the switch priority (0 = most urgent, < 8) of the
 * packet carrying bytes [offset, offset + len) of a tensor.  Called on the
 * communicator's thread; must not call back into dlcp. */
typedef uint8_t (*dlcp_prio_fn)(void *user, uint32_t tensor, uint32_t layer,
                                uint64_t offset, uint32_t len);

/* Application tensor ids are below this; the ids above carry the
 * communicator's collectives. */
#define DLCP_TENSOR_ID_LIMIT 0x80000000u

typedef struct dlcp_tensor {
  uint32_t id;    /* matched with the peer's post of the same id, in order;
                     < DLCP_TENSOR_ID_LIMIT */
  void *data;     /* borrowed until the completion is returned */
  uint64_t bytes;
} dlcp_tensor;

typedef struct dlcp_send_opts {
  uint32_t layer;   /* the tensor's layer: priority layer * 8 / nlayers */
  uint32_t nlayers; /* 0: priority 0 */
  dlcp_prio_fn prio_fn; /* overrides the layer rule when not NULL */
  void *prio_user;
  int f32_importance; /* nonzero: float32 gradients, mark packets whose
                         mean |g| exceeds the sampled median important */
} dlcp_send_opts;

typedef struct dlcp_completion {
  uint64_t user_data;
  int status;              /* 0 or a negative DLCP_ERR_* */
  uint32_t peer;
  int is_send;
  uint32_t tensor;
  uint64_t bytes;
  uint64_t delivered_bytes;
  double delivered_fraction;
  uint64_t packets;
  uint64_t retransmissions;
  uint64_t elapsed_ns;
  /* recv: the zero-filled ranges that were not delivered.  Owned by the
   * queue; valid until the next dlcp_poll_cq/dlcp_wait_cq on it. */
  const dlcp_range *missing;
  size_t nmissing;
  /* status != 0: what failed, naming the peer's rank and address. */
  char error[224];
} dlcp_completion;

/*
 * dlcp_post_send sends |t| to rank |peer|; |opts| may be NULL.  The
 * completion goes to |cq| with |user_data|.  Returns 0,
 * DLCP_ERR_INVALID_ARGUMENT (bad peer, self, NULL data), DLCP_ERR_CANCELED
 * (communicator shutting down) or DLCP_ERR_NOMEM.  Errors of the transfer
 * itself (peer gone, timeout) arrive as a completion.
 */
int dlcp_post_send(dlcp_comm *comm, uint32_t peer, const dlcp_tensor *t,
                   const dlcp_send_opts *opts, dlcp_cq *cq,
                   uint64_t user_data);

/*
 * dlcp_post_recv receives tensor |t->id| from |peer| into |t->data|,
 * tolerating a fraction |loss_bound| in [0, 1) of missing bytes (0 = fully
 * reliable); missing ranges are zero-filled and reported.  Returns what
 * dlcp_post_send returns (DLCP_ERR_INVALID_ARGUMENT also for a loss bound
 * outside [0, 1)).
 */
int dlcp_post_recv(dlcp_comm *comm, uint32_t peer, const dlcp_tensor *t,
                   double loss_bound, dlcp_cq *cq, uint64_t user_data);

/* dlcp_poll_cq copies up to |max| completions to |out| without blocking
 * and returns how many (0 when there is none). */
int dlcp_poll_cq(dlcp_cq *cq, dlcp_completion *out, int max);

/* dlcp_wait_cq waits up to |timeout_ms| (< 0: forever) for one completion:
 * returns 1 with |*out| filled (the operation's own failure is in
 * |out->status|), or DLCP_ERR_TIMEOUT if none arrived in time (nothing is
 * lost: wait again). */
int dlcp_wait_cq(dlcp_cq *cq, dlcp_completion *out, int timeout_ms);

/* --- collectives -------------------------------------------------------
 *
 * Every rank of the communicator calls the same collectives in the same
 * order (as with MPI); each call returns a request at once and runs in
 * the background.  The buffers are borrowed until dlcp_wait (or a
 * dlcp_test that reports completion) returns: recvbuf holds the result
 * only then, and sendbuf must not change before.
 */
typedef struct dlcp_request dlcp_request;

typedef struct dlcp_coll_opts {
  dlcp_algo algo;       /* DLCP_ALGO_AUTO picks by size, world, topology */
  double loss_bound;    /* p in [0, 1) for the data: missing ranges are
                           zero in the result and reported, identically
                           on every rank; 0 = exact.  An all-reduce of at
                           most the eager size (DLCP_EAGER_BYTES) goes
                           whole and runs exact whatever p is */
  uint32_t layer;       /* priority of the data: layer * 8 / nlayers */
  uint32_t nlayers;
  uint64_t chunk_bytes; /* pipelining granularity; 0 = by size (a quarter
                           of a chunk, 256 KiB .. 4 MiB) */
  double bypass_alpha;  /* RING_BYPASS threshold factor; 0 = default */
  int f32_importance;   /* nonzero, FLOAT32 data (gradients): each
                           packet whose mean |x| exceeds the median |x| of
                           a 5 % sample of its transfer is marked
                           important, the others may be dropped first (the
                           MLT seed's magnitude rule); 0 = all important */
} dlcp_coll_opts;

/* dlcp_coll_opts_default: AUTO, exact (loss bound 0), priority 0. */
void dlcp_coll_opts_default(dlcp_coll_opts *opts);

/* What a finished collective reports. */
typedef struct dlcp_coll_info {
  int status;              /* 0 or a negative DLCP_ERR_* */
  char error[224];         /* status != 0: what failed, naming the rank */
  dlcp_algo algo;          /* the algorithm that ran (auto resolved) */
  const char *algo_name;   /* static string; "dissemination" for a barrier */
  double delivered_fraction;
  /* Element ranges of the result that are missing (zero), identical on
   * every rank.  Owned by the request: valid until dlcp_request_free. */
  const dlcp_range *missing;
  size_t nmissing;
  uint32_t bypasses;       /* RING_BYPASS: slots sent past a straggler */
  uint64_t elapsed_ns;     /* from the start call to completion */
} dlcp_coll_info;

/*
 * dlcp_allreduce reduces |count| elements of |sendbuf| over all ranks into
 * |recvbuf| on every rank (in place when sendbuf == recvbuf).  |opts| may
 * be NULL.  On success |*req| is the caller's, to wait for and free.
 * Returns 0, DLCP_ERR_INVALID_ARGUMENT (a bad argument or an algorithm
 * that does not run this collective), DLCP_ERR_CANCELED or DLCP_ERR_NOMEM;
 * failures of the operation itself arrive through dlcp_wait.
 */
int dlcp_allreduce(dlcp_comm *comm, const void *sendbuf, void *recvbuf,
                   uint64_t count, dlcp_dtype dtype, dlcp_redop op,
                   const dlcp_coll_opts *opts, dlcp_request **req);

/* dlcp_reduce_scatter: |count| elements of |sendbuf| in; each rank keeps
 * its shard of the reduction, elements [off, off + len) where the first
 * count % world ranks' shards are one element longer (rank r's off is
 * r * (count / world) + min(r, count % world)).  Out of place, |recvbuf|
 * holds the shard's len elements; in place (sendbuf == recvbuf), the
 * shard is left at off of the count elements and the rest of them is
 * overwritten with partial sums.  Returns what dlcp_allreduce returns; so
 * do dlcp_allgather, dlcp_reduce and dlcp_broadcast (also
 * DLCP_ERR_INVALID_ARGUMENT for a root outside the world) and
 * dlcp_barrier. */
int dlcp_reduce_scatter(dlcp_comm *comm, const void *sendbuf, void *recvbuf,
                        uint64_t count, dlcp_dtype dtype, dlcp_redop op,
                        const dlcp_coll_opts *opts, dlcp_request **req);

/* dlcp_allgather: |recvbuf| (count elements) ends with every rank's
 * shard (dlcp_reduce_scatter's split) at its offset, taken from that
 * rank's |sendbuf|, which holds its shard's len elements; in place when
 * sendbuf is the rank's own shard of recvbuf (or NULL). */
int dlcp_allgather(dlcp_comm *comm, const void *sendbuf, void *recvbuf,
                   uint64_t count, dlcp_dtype dtype,
                   const dlcp_coll_opts *opts, dlcp_request **req);

/* dlcp_reduce reduces |count| elements of every rank's |sendbuf| into
 * |root|'s |recvbuf|: RING (AUTO's choice), a pipelined chain of the
 * ranks ending at the root, each sending the vector once (an all-reduce
 * moves about twice that), or HALVING_DOUBLING, a binomial tree in log2 n
 * steps.  The other ranks' |recvbuf| (count elements) ends with a partial
 * reduction.  In place when sendbuf == recvbuf. */
int dlcp_reduce(dlcp_comm *comm, const void *sendbuf, void *recvbuf,
                uint64_t count, dlcp_dtype dtype, dlcp_redop op, uint32_t root,
                const dlcp_coll_opts *opts, dlcp_request **req);

/* dlcp_broadcast copies |count| elements from |root|'s buffer to every
 * rank's |buf|. */
int dlcp_broadcast(dlcp_comm *comm, void *buf, uint64_t count,
                   dlcp_dtype dtype, uint32_t root,
                   const dlcp_coll_opts *opts, dlcp_request **req);

int dlcp_barrier(dlcp_comm *comm, dlcp_request **req);

/*
 * dlcp_wait waits up to |timeout_ms| (< 0: forever; 0: just look) for
 * |req|.  Returns:
 *   0                  finished; the result is in recvbuf
 *   DLCP_ERR_PENDING   still running after |timeout_ms|: wait again
 *                      (|info| untouched)
 *   another negative   finished and failed; |info->error| names the rank.
 *                      DLCP_ERR_TIMEOUT here means a peer made no
 *                      progress for the communicator's timeout_ms: the
 *                      operation is over, waiting again returns the same
 *   DLCP_ERR_INVALID_ARGUMENT  |req| is NULL
 * When finished, |info| (may be NULL) is filled.  The request stays the
 * caller's until dlcp_request_free.
 */
int dlcp_wait(dlcp_request *req, int timeout_ms, dlcp_coll_info *info);

/* dlcp_test: |*done| is set to whether |req| finished; when it did,
 * |info| is filled and the operation's status returned (0 or a failure);
 * when it did not, 0 is returned.  DLCP_ERR_INVALID_ARGUMENT if |req| or
 * |done| is NULL. */
int dlcp_test(dlcp_request *req, int *done, dlcp_coll_info *info);

/* dlcp_request_free releases a finished request (a running one is
 * cancelled first, failing the collective on this rank).  NULL is fine. */
void dlcp_request_free(dlcp_request *req);

/* dlcp_algo_str names an algorithm ("ring", "halving_doubling", ...;
 * static, "?" for an unknown value). */
const char *dlcp_algo_str(dlcp_algo algo);

#ifdef __cplusplus
}
#endif

#endif /* DLCP_H */
