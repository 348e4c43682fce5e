/*
 * sim.h: the simulator as a whole: its configuration, the flows it runs,
 * and the run/results API that tools/dlcp-sim.c and the tests use.
 *
 * A dlcp_sim owns one engine, one packet pool, one network built from a
 * topology, one transport instance per host, and the flow table the
 * workload generators filled.  Running it executes events until every flow
 * has finished, the configured stop time is reached, or an error occurs.
 * Everything random derives from cfg->seed, so a configuration and a seed
 * determine every output byte (wall-clock figures are only printed, never
 * written to the result files).
 */
#ifndef DLCP_SIM_SIM_H
#define DLCP_SIM_SIM_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "coll/coll.h"
#include "coll/ina.h"
#include "dlcp/dlcp_types.h"
#include "proto/agg.h"
#include "proto/mlt.h"
#include "sim/engine.h"
#include "sim/net.h"
#include "sim/packet.h"
#include "sim/simtime.h"

/* Where a configuration item came from, for error messages: "file:line",
 * and its dotted field path. */
#define DLCP_SIM_WHERE_MAX 96u

typedef enum dlcp_sim_topo_kind {
  DLCP_SIM_TOPO_LEAF_SPINE = 0,
  DLCP_SIM_TOPO_FAT_TREE = 1,
  DLCP_SIM_TOPO_EXPLICIT = 2
} dlcp_sim_topo_kind;

typedef struct dlcp_sim_topo_node {
  char name[DLCP_SIM_NAME_MAX];
  bool is_host;
  uint32_t group; /* rack / pod label, used for placement and reports */
  char where[DLCP_SIM_WHERE_MAX];
  char field[DLCP_SIM_WHERE_MAX]; /* dotted path, e.g. workload.flows[2] */
} dlcp_sim_topo_node;

typedef struct dlcp_sim_topo_link {
  char a[DLCP_SIM_NAME_MAX];
  char b[DLCP_SIM_NAME_MAX];
  uint64_t rate_bps;
  dlcp_sim_ps delay_ps;
  char where[DLCP_SIM_WHERE_MAX];
  char field[DLCP_SIM_WHERE_MAX]; /* dotted path, e.g. workload.flows[2] */
} dlcp_sim_topo_link;

typedef struct dlcp_sim_topo_config {
  dlcp_sim_topo_kind kind;
  /* leaf_spine: hosts h0.., ToRs tor0.., spines spine0.. */
  uint32_t hosts_per_tor;
  uint32_t tors;
  uint32_t spines;
  /* fat_tree(k): k pods of k/2 edge + k/2 agg switches, (k/2)^2 cores,
   * k^3/4 hosts; names h0.., edge<pod>_<i>, agg<pod>_<i>, core<i>. */
  uint32_t k;
  uint64_t host_rate_bps;   /* host <-> ToR/edge links */
  uint64_t fabric_rate_bps; /* switch <-> switch links */
  /* One-way propagation delay of every generated link.  If base_rtt_ps is
   * nonzero it wins: the delay is base_rtt / (2 * longest host-to-host
   * path in hops), so the round trip between the farthest hosts, without
   * queueing or serialization, equals base_rtt. */
  dlcp_sim_ps link_delay_ps;
  dlcp_sim_ps base_rtt_ps;
  /* explicit */
  dlcp_sim_topo_node *nodes;
  uint32_t nnodes;
  dlcp_sim_topo_link *links;
  uint32_t nlinks;
} dlcp_sim_topo_config;

typedef struct dlcp_sim_switch_config {
  uint32_t nqueues;             /* 1..8, default 8 */
  uint64_t port_buffer_bytes;   /* default 512 KB */
  uint64_t shared_buffer_bytes; /* 0 (default): per-port buffers */
  double dt_alpha;              /* dynamic-threshold alpha, default 1 */
  /* per queue; UINT64_MAX = no marking; default 65 * 1500 bytes */
  uint64_t ecn_threshold_bytes[DLCP_SIM_MAX_QUEUES];
  /* on the port's bytes in all queues together; 0 (default): none */
  uint64_t ecn_port_threshold_bytes;
  bool trimming;
  uint32_t trim_bytes; /* default 64 */
  bool pfabric; /* scheduling: pfabric (pfabric_queue.c); default strict */
  /* RED with min < max (switch.red); red_max_bytes 0: the thresholds
   * above (see dlcp_sim_port_config). */
  uint64_t red_min_bytes;
  uint64_t red_max_bytes;
  double red_max_p;
  dlcp_sim_pfc_config pfc; /* switch.pfc; prio_mask 0: off */
} dlcp_sim_switch_config;

typedef struct dlcp_sim_host_config {
  uint64_t nic_buffer_bytes;        /* default 8 MB */
  uint64_t nic_ecn_threshold_bytes; /* default UINT64_MAX (off) */
} dlcp_sim_host_config;

typedef struct dlcp_sim_dctcp_config {
  dlcp_sim_ps rto_min_ps;  /* default 1 ms (Linux) */
  dlcp_sim_ps rto_init_ps; /* before the first RTT sample; default 1 ms */
  dlcp_sim_ps rto_max_ps;  /* backoff ceiling; default 200 ms */
  uint32_t init_cwnd_pkts; /* default 20 (MLT seed) */
  uint32_t dupack_threshold; /* default 3 */
  bool delayed_ack;          /* default off (MLT seed) */
  /* Duplicate ACKs may start a fast retransmit while an ECN cut's window
   * is in flight (CWR), as Linux; default on.  Off: as ns-3 3.37, whose
   * TCP starts none in CWR (the ns-3 comparison, docs/performance-sim.md). */
  bool cwr_fast_retransmit;
  dlcp_sim_ps delayed_ack_ps; /* delayed-ACK timeout; default 40 us */
  double g;                   /* alpha gain, default 1/16 */
  double alpha_init;          /* default 1 (Linux dctcp_alpha_on_init) */
  /* A collective's transfers from one host to another ride one
   * connection, in order, as Gloo's and NCCL's pairs do; default on.
   * Off: a connection per transfer, each with its own slow start (dctcp.c,
   * "Persistent connections"). */
  bool persistent;
} dlcp_sim_dctcp_config;

typedef enum dlcp_sim_transport_kind {
  DLCP_SIM_TRANSPORT_DCTCP = 0,
  DLCP_SIM_TRANSPORT_MLT = 1,
  /* Baselines (docs/simulator.md, "Baselines"). */
  DLCP_SIM_TRANSPORT_TCP = 2,     /* NewReno, no ECN (dctcp.c) */
  DLCP_SIM_TRANSPORT_PIAS = 3,    /* DCTCP + MLFQ tagging (dctcp.c) */
  DLCP_SIM_TRANSPORT_PFABRIC = 4, /* pfabric.c + pfabric_queue.c */
  DLCP_SIM_TRANSPORT_NDP = 5      /* ndp.c, with switch trimming */
} dlcp_sim_transport_kind;

/* Whether |k| is one of dctcp.c's TCP family, the transports with
 * connections (dlcp_sim_dctcp_config.persistent). */
static inline bool dlcp_sim_kind_is_tcp(dlcp_sim_transport_kind k) {
  return k == DLCP_SIM_TRANSPORT_DCTCP || k == DLCP_SIM_TRANSPORT_TCP ||
         k == DLCP_SIM_TRANSPORT_PIAS;
}

/*
 * PIAS (Bai et al., NSDI 2015): a packet's queue is the number of
 * thresholds at or below the bytes its flow sent before it (MLFQ demotion),
 * capped at the last queue; ACKs ride queue 0.  DCTCP underneath.
 */
typedef struct dlcp_sim_pias_config {
  uint32_t nthresholds; /* 1..7 */
  uint64_t thresholds_bytes[DLCP_SIM_MAX_QUEUES - 1]; /* increasing */
} dlcp_sim_pias_config;

/*
 * pFabric (Alizadeh et al., SIGCOMM 2013): packets carry their flow's
 * remaining size; hosts start at a window of one BDP, spray every packet,
 * keep no RTT estimator and no fast retransmit: a fixed timeout (about
 * three RTTs) halves ssthresh and restarts slow start from one packet, and
 * after |probe_after| consecutive timeouts the flow sends header-only
 * probes until one is answered.
 */
typedef struct dlcp_sim_pfabric_config {
  uint32_t init_cwnd_pkts; /* 0: one BDP of the topology */
  dlcp_sim_ps rto_ps;      /* 0: 3 x base RTT */
  uint32_t probe_after;    /* consecutive timeouts before probe mode; 5 */
} dlcp_sim_pfabric_config;

/*
 * NDP (Handley et al., SIGCOMM 2017): the first window leaves at line rate
 * sprayed over every path; switches trim data to headers (switch.trimming)
 * and serve headers and control first; the receiver ACKs or NACKs every
 * packet and paces PULLs at its link rate, each letting the sender send one
 * packet (a NACKed one first).  A timeout re-sends what is unanswered.
 */
typedef struct dlcp_sim_ndp_config {
  uint32_t init_window_pkts; /* 0: one BDP of the topology */
  dlcp_sim_ps rto_ps;        /* 0: 10 x base RTT */
} dlcp_sim_ndp_config;

/* Which MLT data packets are "important" (sent ECN-capable, so switches
 * mark rather than drop them above the ECN threshold). */
typedef enum dlcp_sim_mlt_importance {
  DLCP_SIM_MLT_IMPORTANT_ALL = 0,  /* every packet (the core's default) */
  DLCP_SIM_MLT_IMPORTANT_NONE = 1, /* no packet: all selectively droppable */
  /* the core's float32 magnitude rule on a synthetic gradient tensor */
  DLCP_SIM_MLT_IMPORTANT_MAGNITUDE = 2
} dlcp_sim_mlt_importance;

/*
 * MLT through the src/proto core (mlt_host.c).  Times are picoseconds here
 * and are handed to the core in nanoseconds.  Switch queue 0 is reserved for
 * the control channel, so the core tags data with K-1 priorities and a
 * datagram of core priority p joins queue 1 + p.
 */
typedef struct dlcp_sim_mlt_config {
  double loss_bound;      /* p in [0, 1) granted by every receiver; 0 */
  uint32_t npaths;        /* path ids 0..npaths-1, round-robin; 4 */
  uint32_t path_burst;    /* packets a path before the next; 1 (the seed's
                             per-packet spraying; the runtime sends 32) */
  /* A flow of at most this many bytes goes as one EAGER control message,
   * as the runtime's DLCP_EAGER_BYTES (65536 there); 0, the default and
   * the seed's MLT: every flow goes START / DATA / STOP. */
  uint32_t eager_bytes;
  uint32_t segment_bytes; /* payload per DATA packet; 0 = the MTU
                             (mss + header) minus IPv4/UDP and MLT headers */
  dlcp_sim_mlt_importance importance; /* default ALL */
  /* 0: a flow's packets all carry the flow's priority.  L > 0: a flow's
   * bytes are the gradients of L equal layers, front layer first, and the
   * packet at offset o is tagged with layer o * L / size (seed 4.2.2). */
  uint32_t layers;
  dlcp_sim_ps t_low_ps;  /* rate control thresholds; 12.5 us, 125 us */
  dlcp_sim_ps t_high_ps;
  uint32_t queue_pkts;   /* own queue behind T_high (proto/rate.h); 16 */
  uint32_t ack_every;    /* 10 */
  uint32_t burst_pkts;   /* 16 */
  dlcp_sim_ps probe_timeout_ps; /* 1 ms */
  dlcp_sim_ps min_drain_ps;     /* 20 us */
  /* Hosts serve the connections waiting for their NIC shortest remaining
   * first (else in turn), and calm senders rise to their receiver's share
   * (dlcp_mlt_config.rise_to_share); off by default (docs/protocol.md). */
  bool srpt;
} dlcp_sim_mlt_config;

typedef struct dlcp_sim_transport_config {
  dlcp_sim_transport_kind kind;
  uint32_t mss_bytes;    /* payload per data packet; default 1460 */
  uint32_t header_bytes; /* added to every data packet; default 40 */
  uint32_t ack_bytes;    /* size of an ACK on the wire; default 64 */
  dlcp_sim_lb lb;        /* default load balancing of flows */
  dlcp_sim_dctcp_config dctcp; /* also TCP's and PIAS's */
  dlcp_sim_mlt_config mlt;
  dlcp_sim_pias_config pias;
  dlcp_sim_pfabric_config pfabric;
  dlcp_sim_ndp_config ndp;
} dlcp_sim_transport_config;

/*
 * Background traffic (workload.c): flows between uniformly drawn distinct
 * host pairs with Poisson arrivals, sizes drawn from a published flow-size
 * CDF (web search, DCTCP; data mining, VL2), at |load| of the hosts'
 * aggregate access capacity, from start_ps for duration_ps.
 */
typedef enum dlcp_sim_flow_dist {
  DLCP_SIM_DIST_WEBSEARCH = 0,
  DLCP_SIM_DIST_DATAMINING = 1
} dlcp_sim_flow_dist;

typedef struct dlcp_sim_background_spec {
  dlcp_sim_flow_dist dist;
  double load;           /* (0, 1] */
  dlcp_sim_ps start_ps;
  dlcp_sim_ps duration_ps;
  uint32_t prio;
  char where[DLCP_SIM_WHERE_MAX];
  char field[DLCP_SIM_WHERE_MAX];
} dlcp_sim_background_spec;

/* A flow whose path the workload leaves to its transport: MLT spreads
 * over its own paths, a single-path transport draws one per flow. */
#define DLCP_SIM_PATH_ANY UINT32_MAX

/* One explicit flow.  Hosts are names ("h3") or host indices ("3"). */
typedef struct dlcp_sim_flow_spec {
  char src[DLCP_SIM_NAME_MAX];
  char dst[DLCP_SIM_NAME_MAX];
  uint64_t size_bytes;
  dlcp_sim_ps start_ps;
  uint32_t prio;
  int lb;        /* dlcp_sim_lb, or -1 for the transport default */
  uint32_t path; /* path id for source routing, or DLCP_SIM_PATH_ANY */
  char where[DLCP_SIM_WHERE_MAX];
  char field[DLCP_SIM_WHERE_MAX]; /* dotted path, e.g. workload.flows[2] */
} dlcp_sim_flow_spec;

/* N senders to one receiver, all starting together. */
typedef struct dlcp_sim_incast_spec {
  char receiver[DLCP_SIM_NAME_MAX];
  /* Senders: |nsenders| hosts drawn (seeded) from all hosts but the
   * receiver, unless |senders| lists them. */
  uint32_t nsenders;
  char (*senders)[DLCP_SIM_NAME_MAX];
  uint32_t nsenders_listed;
  uint64_t size_bytes;
  dlcp_sim_ps start_ps;
  uint32_t prio;
  char where[DLCP_SIM_WHERE_MAX];
  char field[DLCP_SIM_WHERE_MAX]; /* dotted path, e.g. workload.flows[2] */
} dlcp_sim_incast_spec;

/*
 * Parameter-server training traffic.  Servers and workers are spread
 * evenly over the racks (hosts taken rack by rack in round-robin order:
 * the first |servers| are servers, the next |workers| are workers).  Each
 * iteration every worker pushes shard s (model_bytes / servers, the first
 * model_bytes % servers shards one byte larger) to server s; when a server
 * has all pushes of the iteration it sends shard s to every worker (pull);
 * a worker that has all its pulls computes for compute_ps and starts the
 * next iteration.  Cross-rack payload per iteration is
 *   2 * sum over workers w, servers s in another rack of shard(s),
 * which for counts divisible by the number of racks r is
 *   2 * workers * model_bytes * (1 - 1/r).
 */
typedef struct dlcp_sim_ps_spec {
  uint32_t workers;
  uint32_t servers;
  uint64_t model_bytes;
  uint32_t iterations;
  dlcp_sim_ps compute_ps;
  dlcp_sim_ps start_ps;
  uint32_t prio;
  /*
   * Driven by a training profile (profile.c, workloads/profiles/) when
   * ntensors > 0: the model is the profile's gradient tensors, cut into
   * partitions of at most partition_bytes (BytePS's partitioning),
   * assigned to servers in the order backward propagation produces them
   * (last layer first): round-robin, or with balanced_placement each to
   * the server holding the fewest bytes so far.  An iteration computes
   * forward_ps, then backward layer by layer: the partitions of tensor t
   * are pushed as soon as t's gradient is ready (forward + the backward
   * times of every tensor from the last down to t), overlapping
   * computation and communication.  A server pulls a partition back to every worker when
   * it has it from all of them; a worker starts its next forward pass
   * when it has every partition.  model_bytes is then the profile's sum
   * and compute_ps unused.
   */
  uint32_t ntensors;
  uint64_t *tensor_bytes;     /* forward (registration) order */
  dlcp_sim_ps *tensor_bwd_ps; /* backward time of the tensor's layer */
  dlcp_sim_ps forward_ps;
  uint64_t partition_bytes;   /* default 4 MB (BytePS) */
  char profile[64];           /* the profile's model name */
  /* > 0: a partition of tensor t (forward order) gets priority
   * prio + t * layer_priorities / ntensors, front layers most urgent
   * (the MLT seed's gradient-aware queueing); 0: every flow gets prio. */
  uint32_t layer_priorities;
  /* Servers post their receives ahead (default true): a worker's first
   * push of a partition when the job starts, its next one when the server
   * starts the pull before it; the transport may use it (MLT's START then
   * precedes the data, as a server that knows its model posts).  Workers
   * post a pull's receive when it starts: posted at the push, they took
   * shares of the receiver's grant pool from the pulls in progress
   * (docs/simulator.md).  False: every receive is posted when its flow
   * starts. */
  bool post_ahead;
  /* A worker's next forward pass runs layer by layer as the pulls come
   * back (P3, ByteScheduler, BytePS; the MLT seed's front layers first
   * "to speed up the training pipeline"): the forward of tensor t starts
   * once t's partitions are back and the forward of t - 1 is done.
   * False (default): it starts when every partition is back.  A tensor's
   * forward time is its share of the backward pass's (the profiles'
   * backward is twice the forward, row by row). */
  bool forward_overlap;
  /* workload.ps.placement: balanced.  Round-robin (the default) puts
   * 3.42x the mean bytes on ResNet50's busiest of 36 servers; each
   * partition to the least-loaded server, 1.41x (its largest partition's
   * share), docs/simulator.md. */
  bool balanced_placement;
  /* Every tensor's size (rounded up to whole float32s) and every compute
   * time times |profile_scale|: the profile's pattern, and its ratio of
   * communication to computation, at a size simulated in seconds.
   * Default 1. */
  double profile_scale;
  /* Gradient compression: tensor sizes divided by |compression| (>= 1,
   * after profile_scale), compute times unchanged.  Default 1. */
  double compression;
  char where[DLCP_SIM_WHERE_MAX];
  char field[DLCP_SIM_WHERE_MAX]; /* dotted path, e.g. workload.flows[2] */
} dlcp_sim_ps_spec;

/*
 * A collective training job (collective.c): every participating host runs
 * one src/coll all-reduce per iteration through the scenario's transport,
 * after |compute_ps| of computation.  Ranks are spread evenly over the
 * racks and numbered rack by rack (so a ring crosses each rack boundary
 * once); RAT gets the racks (and fat-tree pods) as topology labels.  The
 * state machines reduce real float32 buffers of |bytes| / |scale| bytes
 * per rank, and every transfer they ask for goes on the wire |scale| times
 * larger (see docs/simulator.md, "Collective workloads").
 */
/* A rank slower than the others (dlcp_sim_coll_spec.stragglers). */
typedef struct dlcp_sim_straggler {
  uint32_t rank;
  dlcp_sim_ps delay; /* added to the CPU cost of its receives */
  bool every;        /* every completed receive, not only an operation's
                        first */
  char where[DLCP_SIM_WHERE_MAX]; /* its "file:line" and field path, */
  char field[DLCP_SIM_WHERE_MAX]; /* for errors */
} dlcp_sim_straggler;

typedef struct dlcp_sim_coll_spec {
  dlcp_algo algo;       /* RING, RING_BYPASS, PS, HALVING_DOUBLING, RAT,
                           INA, RA_INA (through the aggregation switch) */
  uint64_t bytes;       /* the all-reduced vector, per rank */
  uint32_t ranks;       /* participating hosts; 0 = every host */
  uint32_t iterations;  /* >= 1 */
  dlcp_sim_ps compute_ps; /* before each iteration's all-reduce */
  dlcp_sim_ps start_ps;
  double loss_bound;    /* the operation's end-to-end p, [0, 1) */
  uint32_t prio;        /* switch queue of the data */
  uint64_t chunk_bytes; /* pipelining segment on the wire; 0 = src/coll's */
  uint32_t scale;       /* wire bytes per buffer byte; 0 = automatic */
  /* Explicit placement: rank i on host hosts[i] (names or indices),
   * |nhosts| of them, or NULL for the automatic placement. */
  char (*hosts)[DLCP_SIM_NAME_MAX];
  uint32_t nhosts;
  /* INA / RA-INA (src/coll/ina): groups outstanding per rank, re-send
   * timeout, and blocks per group (plain INA; RA-INA uses the world). */
  uint32_t ina_window;
  dlcp_sim_ps ina_rto_ps;
  uint32_t ina_group_blocks;
  bool ina_cc; /* cc: panama (coll/ina_cc.h), up to ina_window groups */
#define DLCP_SIM_PANAMA_MIN_BYTES UINT64_C(40000000)
  /* min_bytes: an all-reduce smaller than this runs as ring, without the
   * switch (PANAMA aggregates only reduce flows above 40 MB: the default
   * with cc panama, else 0); algo ina and ra_ina only */
  uint64_t ina_min_bytes;
  dlcp_ina_claim ina_claim; /* claim: RA-INA's header-only claims */
  /* exponents: given (every rank knows the groups' exponents beforehand)
   * instead of agreed (the default: an all-reduce MAX before every
   * operation, as the runtime). */
  bool ina_exps_given;
  /* CINA, HINA, MTINA (algo cina / hina / mtina: an INA job through
   * aggregation.chain / .tree / .trees, coll_cina.c; |cina| is set for
   * all three): each rank is a host's master for |cina_gpus| GPUs whose
   * vectors it ring-reduces inside the host in |cina_chunks| pipelined
   * chunks, one step per chunk of chunk bytes at |cina_intra_bps| plus
   * |cina_intra_ps|. */
  bool cina;
  bool hina; /* algo hina: the same masters through aggregation.tree */
  bool mtina; /* algo mtina: the same masters through aggregation.trees */
  uint32_t cina_gpus;       /* default 1 */
  uint32_t cina_chunks;     /* default 1 */
  uint64_t cina_intra_bps;  /* default 2.4 Tbit/s (NVLink-class) */
  dlcp_sim_ps cina_intra_ps; /* default 0 */
  /* ALLREDUCE (the default) or REDUCE_SCATTER: what each iteration runs
   * (not INA / RA-INA). */
  dlcp_coll_kind kind;
  /* The ranks' CPU (not INA / RA-INA): each completed receive costs its
   * rank |reduce_ps| (receiving, reducing, forwarding: the straggler
   * seed's T) plus its bytes at |reduce_bps| before the state machine
   * hears of it, one receive at a time per rank; a straggler's first
   * completed receive of every operation (or every one) costs its delay
   * more (the seed's delta T).  0 / none = free. */
  dlcp_sim_ps reduce_ps;
  uint64_t reduce_bps;
  dlcp_sim_straggler *stragglers; /* owned; at most one per rank */
  uint32_t nstragglers;
  /* RING_BYPASS: alpha (0 = src/coll's default) and the starting values
   * of its step and transfer estimates for the first iteration (0 =
   * learn them; later iterations take the previous one's). */
  double bypass_alpha;
  dlcp_sim_ps bypass_step_ps, bypass_trans_ps;
  char where[DLCP_SIM_WHERE_MAX];
  char field[DLCP_SIM_WHERE_MAX];
} dlcp_sim_coll_spec;

/*
 * The aggregation switch role (agg_switch.c): the src/proto/agg core runs
 * at switch |node|; INA datagrams from its attached hosts are handed to it
 * after |per_packet_ps| of processing each (one packet at a time, FIFO,
 * at most |queue_pkts| waiting: more are dropped), and its answers leave
 * through the switch's ports like any packet.
 */
#define DLCP_SIM_AGG_MAX_CHAIN 64u
#define DLCP_SIM_AGG_MAX_TREES 8u

typedef struct dlcp_sim_agg_config {
  char node[DLCP_SIM_NAME_MAX]; /* "": no aggregation switch */
  /* Several aggregating switches (agg_switch.c), each running its own
   * core with the parameters below: CINA's chain (chain[0] -> chain[1]
   * -> ..., parent[0][i] = i + 1), HINA's tree (|tree|: parent[0][i] is
   * the index of switch i's parent, DLCP_SIM_NONE at the root) or
   * MTINA's |ntrees| trees (|trees|: parent[t] is tree t, whose groups
   * are those with group % ntrees == t; DLCP_SIM_NONE also for a switch
   * not in tree t, member[t][i] false).  |node| is then chain[0].
   * nchain 0: the single switch |node|. */
  char chain[DLCP_SIM_AGG_MAX_CHAIN][DLCP_SIM_NAME_MAX];
  uint32_t parent[DLCP_SIM_AGG_MAX_TREES][DLCP_SIM_AGG_MAX_CHAIN];
  bool member[DLCP_SIM_AGG_MAX_TREES][DLCP_SIM_AGG_MAX_CHAIN];
  uint32_t nchain, ntrees;
  bool tree, trees;
  uint64_t mem_bytes;           /* aggregator memory; default 1 MiB */
  uint32_t block_elems;         /* int32 per aggregator; default 64 */
  bool static_partition;        /* SwitchML-style partitions; default off */
  uint32_t static_parts;        /* partitions (jobs); default 1 */
  dlcp_sim_ps per_packet_ps;    /* default 0: a line-rate pipeline */
  uint32_t queue_pkts; /* packets that may wait for the processor; 1024 */
  dlcp_sim_ps resend_ps;        /* unacknowledged result re-sent; 1 ms */
  char where[DLCP_SIM_WHERE_MAX];
  char field[DLCP_SIM_WHERE_MAX];
} dlcp_sim_agg_config;

typedef enum dlcp_sim_fault_kind {
  DLCP_SIM_FAULT_LOSS = 0, /* random loss on a link, whole run */
  DLCP_SIM_FAULT_DOWN = 1, /* link down at |at_ps| */
  DLCP_SIM_FAULT_UP = 2,   /* link back up at |at_ps| */
  /* From |at_ps| on, every |every_ps| choose |pause_ranks| hosts at random
   * (the collective's ranks, or all hosts without a collective job) and
   * stop their NICs from sending for |pause_ps| (the RAT seed's failure
   * set-up: "k nodes paused, re-chosen every d"). */
  DLCP_SIM_FAULT_PAUSE = 3
} dlcp_sim_fault_kind;

typedef struct dlcp_sim_fault_spec {
  dlcp_sim_fault_kind kind;
  /* The cable between nodes a and b; a = "*" means every cable (LOSS). */
  char a[DLCP_SIM_NAME_MAX];
  char b[DLCP_SIM_NAME_MAX];
  double loss;
  dlcp_sim_ps at_ps;
  uint32_t pause_ranks;  /* PAUSE: hosts paused at a time */
  dlcp_sim_ps pause_ps;  /* PAUSE: how long each pause lasts */
  dlcp_sim_ps every_ps;  /* PAUSE: period of re-choosing */
  char where[DLCP_SIM_WHERE_MAX];
  char field[DLCP_SIM_WHERE_MAX]; /* dotted path, e.g. workload.flows[2] */
} dlcp_sim_fault_spec;

/* A cable to capture into a pcap file (outputs.pcap). */
typedef struct dlcp_sim_pcap_spec {
  char a[DLCP_SIM_NAME_MAX];
  char b[DLCP_SIM_NAME_MAX];
  char where[DLCP_SIM_WHERE_MAX];
  char field[DLCP_SIM_WHERE_MAX];
} dlcp_sim_pcap_spec;

typedef struct dlcp_sim_config {
  uint64_t seed;
  dlcp_sim_topo_config topo;
  dlcp_sim_switch_config sw;
  dlcp_sim_host_config host;
  dlcp_sim_transport_config transport;
  dlcp_sim_flow_spec *flows;
  uint32_t nflows;
  dlcp_sim_incast_spec *incasts;
  uint32_t nincasts;
  dlcp_sim_ps_spec *ps;
  uint32_t nps;
  dlcp_sim_coll_spec *colls;
  uint32_t ncolls;
  dlcp_sim_background_spec *backgrounds;
  uint32_t nbackgrounds;
  dlcp_sim_fault_spec *faults;
  uint32_t nfaults;
  dlcp_sim_ps stop_ps; /* simulated-time limit; default 10 s */
  char name[64];       /* scenario name for reports */
  char out_dir[512];   /* outputs.dir; empty: none (the CLI's --out wins) */
  dlcp_sim_pcap_spec *pcaps; /* outputs.pcap */
  uint32_t npcaps;
  dlcp_sim_agg_config agg; /* aggregation */
} dlcp_sim_config;

/* Fills |cfg| with the defaults documented above (a 2-ToR, 2-spine,
 * 4-host leaf-spine at 100 Gbps, DCTCP, no workload). */
void dlcp_sim_config_default(dlcp_sim_config *cfg);
/* Frees the arrays a scenario or the add functions allocated. */
void dlcp_sim_config_free(dlcp_sim_config *cfg);
/* Appends an explicit flow; returns 0 or DLCP_ERR_NOMEM.  The new spec's
 * lb is -1, path 0; callers may change them through cfg->flows. */
int dlcp_sim_config_add_flow(dlcp_sim_config *cfg, const char *src,
                             const char *dst, uint64_t size_bytes,
                             dlcp_sim_ps start_ps, uint32_t prio);
int dlcp_sim_config_add_fault(dlcp_sim_config *cfg, dlcp_sim_fault_kind kind,
                              const char *a, const char *b, double loss,
                              dlcp_sim_ps at_ps);

/* The workload a flow came from, for reports. */
typedef enum dlcp_sim_flow_group {
  DLCP_SIM_GROUP_EXPLICIT = 0,
  DLCP_SIM_GROUP_INCAST = 1,
  DLCP_SIM_GROUP_PS_PUSH = 2,
  DLCP_SIM_GROUP_PS_PULL = 3,
  DLCP_SIM_GROUP_COLL = 4, /* a transfer of a collective job */
  DLCP_SIM_GROUP_BACKGROUND = 5
} dlcp_sim_flow_group;
#define DLCP_SIM_NGROUPS 6u

/*
 * A flow and its record.  FCT = finish_ps - start_ps, where start_ps is
 * when the sender got the flow (its first byte may wait in the NIC queue)
 * and finish_ps when the sender received the ACK covering the last byte.
 * There is no handshake, so an unloaded flow of S bytes over a path whose
 * bottleneck rate is R has FCT = (S plus headers) * 8 / R + one base RTT,
 * plus the store-and-forward delay of one packet per extra hop.
 */
typedef struct dlcp_sim_flow {
  uint32_t id;
  uint32_t src; /* host index */
  uint32_t dst; /* host index */
  uint32_t prio;
  uint64_t size_bytes;
  uint8_t lb; /* dlcp_sim_lb */
  bool path_pinned; /* |path| set by the workload (else a transport's) */
  uint32_t path;
  dlcp_sim_flow_group group;
  uint32_t iteration;    /* PS iteration, 0 otherwise */
  dlcp_sim_ps release_ps; /* planned start; NEVER while waiting on a barrier */
  /* Added to the barrier's delay when a barrier releases the flow (a
   * profile-driven PS push waits for its layer's backward pass). */
  dlcp_sim_ps release_offset_ps;
  /* Added to the finish when the barrier counts it: the compute that
   * must follow this flow before the barrier's work may start (the rest
   * of a forward pass after a pull's layer). */
  dlcp_sim_ps barrier_offset_ps;
  dlcp_sim_ps start_ps;   /* NEVER until started */
  dlcp_sim_ps finish_ps;  /* NEVER until finished */
  dlcp_sim_ps rx_done_ps; /* receiver held every byte; NEVER until then */
  uint32_t barrier;       /* barrier notified on finish, or DLCP_SIM_NONE */
  /* Receives posted ahead (workload.ps.post_ahead): the flow whose
   * receiver learns it will come when this one starts (a PS pull's next
   * push), or DLCP_SIM_NONE; whether the receiver learns of this one when
   * the job starts (a first push); whether it did. */
  uint32_t expect_next;
  bool expect_at_start;
  bool expected;
  uint32_t xfer;          /* collective transfer carried, or DLCP_SIM_NONE */
  uint32_t stage;         /* its stage (dlcp_coll_action.stage), or 0 */
  double loss_bound;      /* MLT receiver's p; < 0: transport.loss_bound */
  /* Transport statistics. */
  uint64_t bytes_acked;
  uint64_t pkts_sent;
  uint64_t retransmits;
  uint64_t timeouts;
  uint64_t ecn_echoes; /* ACKs with ECE */
  /* Bytes the receiver held when it finished (the whole flow for DCTCP;
   * at least (1 - p) of it for MLT), and the transport's final status (0,
   * or a negative DLCP_ERR_* if the transfer failed). */
  uint64_t delivered_bytes;
  int status;
  void *tx;            /* sender-side transport state */
  void *rx;            /* receiver-side transport state */
} dlcp_sim_flow;

/* Waits for |remaining| flows to finish, then starts a set of flows
 * |delay_ps| after the latest finish (plus its barrier_offset_ps): how PS
 * iterations chain pushes, pulls and compute time. */
typedef struct dlcp_sim_barrier {
  uint32_t remaining;
  dlcp_sim_ps delay_ps;
  dlcp_sim_ps due_ps; /* the latest finish + barrier_offset_ps so far */
  uint32_t first; /* into sim->release */
  uint32_t count;
} dlcp_sim_barrier;

typedef struct dlcp_sim dlcp_sim;

/*
 * The per-host transport interface.  The simulator calls flow_start on the
 * sending host when a flow starts, and on_packet on the host a packet is
 * addressed to (the transport then owns the packet); a transport arms
 * timers through dlcp_sim_conn_timer, which calls on_timer with the |conn|
 * it was set up with.  flow_free releases a flow's tx/rx state at the end.
 * An MLT driver implements the same four hooks around src/proto.
 */
typedef struct dlcp_sim_transport_ops {
  const char *name;
  /* Optional: called once after the workload is built (|sim->flows| is
   * final) and before the first event; |fini| undoes it after every host
   * and flow was freed. */
  int (*init)(dlcp_sim *sim);
  void (*fini)(dlcp_sim *sim);
  int (*host_new)(dlcp_sim *sim, uint32_t host, void **pstate);
  void (*host_del)(dlcp_sim *sim, void *state);
  int (*flow_start)(void *state, dlcp_sim_flow *flow, dlcp_sim_ps now);
  /* Optional: the receiving host learns that |flow| will come (its
   * receive may be posted ahead); called before its flow_start. */
  int (*flow_expect)(void *state, dlcp_sim_flow *flow, dlcp_sim_ps now);
  /* Optional, with flow_expect: the receiving host learns that expected
   * |flow| will never come (a collective's receive canceled before its
   * sender posted); called instead of any flow_start. */
  int (*flow_unexpect)(void *state, dlcp_sim_flow *flow, dlcp_sim_ps now);
  void (*on_packet)(void *state, dlcp_sim_packet *pkt, dlcp_sim_ps now);
  void (*on_timer)(void *state, void *conn, dlcp_sim_ps now);
  void (*flow_free)(dlcp_sim *sim, dlcp_sim_flow *flow);
} dlcp_sim_transport_ops;

typedef struct dlcp_sim_conn_timer {
  dlcp_sim_timer timer;
  dlcp_sim *sim;
  uint32_t host;
  void *conn;
} dlcp_sim_conn_timer;

void dlcp_sim_conn_timer_init(dlcp_sim_conn_timer *ct, dlcp_sim *sim,
                              uint32_t host, void *conn);

struct dlcp_sim {
  const dlcp_mem *mem;
  dlcp_sim_config cfg; /* shallow copy; spec arrays are not used after new */
  dlcp_sim_engine engine;
  dlcp_sim_packet_pool pool;
  dlcp_sim_net net;
  const dlcp_sim_transport_ops *ops;
  void **host_state; /* per host */
  void *transport;   /* state shared by all hosts, owned by ops->init */
  dlcp_sim_flow *flows;
  uint32_t nflows, flows_cap;
  dlcp_sim_barrier *barriers;
  uint32_t nbarriers, barriers_cap;
  uint32_t *release; /* flow ids released by barriers */
  uint32_t nrelease, release_cap;
  uint32_t flows_done;
  uint32_t flows_canceled; /* expected, then withdrawn: never started */
  dlcp_sim_ps last_finish_ps;
  uint32_t ps_iterations; /* iterations of the PS workload, 0 if none */
  /* Collective jobs (collective.c), NULL if none; |busy| counts jobs
   * (and other work) not finished yet: the run is not over before it is
   * 0.  |coll_max_flow| is the largest transfer a job can put on the
   * wire (MLT sizes its payload sink by it). */
  struct dlcp_sim_colls *colls;
  uint32_t busy;
  uint64_t coll_max_flow;
  /* Captured cables (pcap.c): one open file each, after
   * dlcp_sim_pcap_open. */
  struct dlcp_sim_pcap *pcaps;
  uint32_t npcaps;
  uint32_t *pcap_ports; /* the a->b port of each configured cable */
  /* The aggregation switch role and the INA packets' bytes
   * (agg_switch.c); NULL without an aggregation section.  |ina| is the
   * hosts' side (ina_host.c), NULL without INA jobs. */
  struct dlcp_sim_agg *agg;
  struct dlcp_sim_ina *ina;
};

/*
 * dlcp_sim_new builds a simulation from |cfg| (copied; the caller may free
 * it afterwards).  On a configuration problem it writes one line to |err|
 * ("file:line: field 'x': expected ..." when the item came from a
 * scenario) and returns DLCP_ERR_CONFIG; DLCP_ERR_NOMEM on allocation
 * failure.
 */
int dlcp_sim_new(dlcp_sim **psim, const dlcp_sim_config *cfg,
                 const dlcp_mem *mem, char *err, size_t errlen);
void dlcp_sim_del(dlcp_sim *sim);

/*
 * dlcp_sim_run executes events up to simulated time |until| (or the
 * configured stop time, whichever is first).  It returns 1 if the run is
 * over (every flow finished, nothing left to do, or the stop time
 * reached), 0 if |until| was reached first, or a negative error.
 */
int dlcp_sim_run(dlcp_sim *sim, dlcp_sim_ps until);
static inline dlcp_sim_ps dlcp_sim_now(const dlcp_sim *sim) {
  return sim->engine.now;
}
/* The run's end for rates and utilisation: the last flow's finish time if
 * all finished, else the current time. */
dlcp_sim_ps dlcp_sim_end_time(const dlcp_sim *sim);

/* Helpers for transports. */
/* Allocates a packet (NULL ends the run with DLCP_ERR_NOMEM). */
dlcp_sim_packet *dlcp_sim_packet_new(dlcp_sim *sim);
void dlcp_sim_packet_drop(dlcp_sim *sim, dlcp_sim_packet *pkt);
void dlcp_sim_send(dlcp_sim *sim, uint32_t host, dlcp_sim_packet *pkt,
                   dlcp_sim_ps now);
/* Records that the receiver of |flow| holds every byte. */
void dlcp_sim_flow_delivered(dlcp_sim *sim, dlcp_sim_flow *flow,
                             dlcp_sim_ps now);
/* Records |flow| as finished (sender saw the last ACK) and releases
 * whatever waited for it. */
void dlcp_sim_flow_finished(dlcp_sim *sim, dlcp_sim_flow *flow,
                            dlcp_sim_ps now);

/* True when the run has nothing left to do: every flow finished (or
 * canceled) and no collective job is still running. */
bool dlcp_sim_finished(const dlcp_sim *sim);
/* Flows neither finished nor canceled. */
uint32_t dlcp_sim_unfinished_flows(const dlcp_sim *sim);

/* Appends a flow to the table (workload.c) and returns its id, or
 * DLCP_SIM_NONE if memory ran out.  The table may move: callers must not
 * hold flow pointers across this call. */
uint32_t dlcp_sim_flow_add(dlcp_sim *sim, uint32_t src, uint32_t dst,
                           uint64_t size, dlcp_sim_ps release, uint32_t prio,
                           dlcp_sim_flow_group group);
/* Starts flow |id| now (its sender's transport gets it). */
void dlcp_sim_flow_start_now(dlcp_sim *sim, uint32_t id, dlcp_sim_ps now);
/* Whether the transport posts receives ahead (has flow_expect). */
bool dlcp_sim_expects(const dlcp_sim *sim);
/* The receiver of flow |id|, not started, learns now that it will come
 * (its receive is posted ahead), once. */
void dlcp_sim_flow_expect_now(dlcp_sim *sim, uint32_t id, dlcp_sim_ps now);
/* Expected flow |id| will never start: its receiver withdraws the
 * receive, and the flow counts as canceled (DLCP_ERR_CANCELED), not as
 * unfinished. */
void dlcp_sim_flow_cancel(dlcp_sim *sim, uint32_t id, dlcp_sim_ps now);

/*
 * Collective jobs and pauses (collective.c).  build expands cfg.colls
 * after the other workloads; pauses schedules cfg's PAUSE faults.  The
 * transports report what happens to a collective's flows (flow->xfer !=
 * DLCP_SIM_NONE) through the flow hooks in sim.c, which call these; none
 * of them adds flows, so a transport's flow pointers stay valid.
 */
int dlcp_sim_coll_build(dlcp_sim *sim, char *err, size_t errlen);
int dlcp_sim_coll_schedule_pauses(dlcp_sim *sim, char *err, size_t errlen);
void dlcp_sim_coll_free(dlcp_sim *sim);
/* The receiver of |flow| lost bytes [off, off + len) (MLT, p > 0). */
void dlcp_sim_coll_flow_hole(dlcp_sim *sim, const dlcp_sim_flow *flow,
                             uint64_t off, uint64_t len);
void dlcp_sim_coll_flow_delivered(dlcp_sim *sim, const dlcp_sim_flow *flow,
                                  dlcp_sim_ps now);
void dlcp_sim_coll_flow_finished(dlcp_sim *sim, const dlcp_sim_flow *flow,
                                 dlcp_sim_ps now);
/* The sender's side of an eager flow is done before the receiver has the
 * bytes: they are taken now, as the runtime's EAGER message copies them,
 * for the sender may reuse its buffer at once; then as
 * dlcp_sim_coll_flow_finished. */
void dlcp_sim_coll_flow_sent_whole(dlcp_sim *sim, const dlcp_sim_flow *flow,
                                   dlcp_sim_ps now);
/* The transport gave up on |flow| (|is_send|: the sender's side). */
void dlcp_sim_coll_flow_failed(dlcp_sim *sim, const dlcp_sim_flow *flow,
                               bool is_send, int status, dlcp_sim_ps now);
/* A NOTE packet reached |host|; takes ownership of |pkt|. */
void dlcp_sim_coll_on_note(dlcp_sim *sim, uint32_t host,
                           dlcp_sim_packet *pkt, dlcp_sim_ps now);

/* A rank's INA operation (ina_host.c) reported DONE; collective.c takes
 * its result (dlcp_sim_ina_op) and ends it (dlcp_sim_ina_end). */
void dlcp_sim_coll_ina_done(dlcp_sim *sim, uint32_t job, uint32_t rank,
                            dlcp_sim_ps now);

/*
 * INA ranks (ina_host.c).  job_add registers collective job |job| (of
 * |njobs|) as an INA job of |n| ranks, rank r on host hosts[r], its
 * datagrams on switch queue |prio|; identity gives the job id and token
 * it uses on the wire; start runs one operation of |rank| (params
 * borrowed for the call; its buffers until dlcp_sim_ina_end); op is the
 * operation (NULL if none), kept after DONE until end.  on_packet takes an
 * INA packet that reached |host|.
 */
int dlcp_sim_ina_job_add(dlcp_sim *sim, uint32_t job, uint32_t njobs,
                         const uint32_t *hosts, uint32_t n, uint32_t prio);
void dlcp_sim_ina_identity(const dlcp_sim *sim, uint32_t job,
                           uint32_t *wire_job, uint64_t *token);
int dlcp_sim_ina_start(dlcp_sim *sim, uint32_t job, uint32_t rank,
                       const dlcp_ina_params *p, dlcp_sim_ps now);
dlcp_ina *dlcp_sim_ina_op(const dlcp_sim *sim, uint32_t job, uint32_t rank);
/* Polls a rank's operation again (its input changed: dlcp_ina_release). */
void dlcp_sim_ina_kick(dlcp_sim *sim, uint32_t job, uint32_t rank,
                       dlcp_sim_ps now);
void dlcp_sim_ina_end(dlcp_sim *sim, uint32_t job, uint32_t rank);
void dlcp_sim_ina_on_packet(dlcp_sim *sim, uint32_t host,
                            dlcp_sim_packet *pkt, dlcp_sim_ps now);
void dlcp_sim_ina_free(dlcp_sim *sim);

/* Per-job, per-iteration results of collective jobs, for reports. */
typedef struct dlcp_sim_coll_iter {
  dlcp_sim_ps start_ps; /* earliest rank starts computing */
  dlcp_sim_ps end_ps;   /* last rank's all-reduce is DONE; NEVER if not */
  dlcp_sim_ps duration_ps; /* end - previous iteration's end (or start) */
  dlcp_sim_ps coll_ps;  /* slowest rank's all-reduce (DONE - its post) */
  dlcp_sim_ps agree_ps; /* INA: the slowest rank's agreement on the
                           exponents, the first part of coll_ps */
  uint32_t ranks_done;
} dlcp_sim_coll_iter;

typedef struct dlcp_sim_coll_report {
  dlcp_algo algo;       /* what ran */
  const char *algo_name; /* its name in outputs ("cina" for CINA's INA) */
  dlcp_coll_kind kind;  /* all-reduce or reduce-scatter */
  uint32_t ranks;
  uint64_t bytes;       /* wire bytes of the vector (count * 4 * scale) */
  uint32_t scale;
  uint32_t iterations;
  const dlcp_sim_coll_iter *iter; /* |iterations| entries */
  uint64_t verify_errors; /* output elements differing from the exact sum */
  double min_delivered;   /* lowest delivered_fraction of any rank */
  uint32_t bypasses;      /* straggler bypasses, summed over ranks */
  /* INA / RA-INA: groups the switch reduced and groups given a ring
   * verdict (rank 0's count, the same on every rank), and contributions
   * re-sent after a timeout (summed over ranks), over all iterations. */
  uint64_t ina_groups, ring_groups, ina_retransmits;
  /* RESULTs the ranks took, those congestion-marked, and the windows cut
   * for marks (cc), each summed over ranks. */
  uint64_t ina_results, ina_results_marked, ina_cwnd_cuts;
  int status;             /* 0, or the first failure */
  int32_t failed_rank;    /* rank that reported it, or -1 */
  bool done;
} dlcp_sim_coll_report;

uint32_t dlcp_sim_coll_jobs(const dlcp_sim *sim);
void dlcp_sim_coll_get_report(const dlcp_sim *sim, uint32_t job,
                              dlcp_sim_coll_report *r);
/* The host index job |job|'s rank |rank| runs on (placement: see
 * coll_build.c); DLCP_SIM_NONE if there is no such job or rank. */
uint32_t dlcp_sim_coll_rank_host(const dlcp_sim *sim, uint32_t job,
                                 uint32_t rank);
/* Number of NIC pauses started (PAUSE faults). */
uint64_t dlcp_sim_coll_pauses(const dlcp_sim *sim);

/*
 * The aggregation switches (agg_switch.c).  build sets up the role of
 * cfg.agg at its switch or at every switch of its chain (nothing if
 * cfg.agg.node is empty; DLCP_ERR_CONFIG naming the field if a name is no
 * switch or the core refuses the configuration).  agg_position is node
 * |node|'s place among them (0 for the single switch; its index on the
 * chain), DLCP_SIM_NONE if it has no role; agg_chain_len the chain's
 * length (0 without a chain).
 */
int dlcp_sim_agg_build(dlcp_sim *sim, char *err, size_t errlen);
void dlcp_sim_agg_free(dlcp_sim *sim);
uint32_t dlcp_sim_agg_position(const dlcp_sim *sim, uint32_t node);
uint32_t dlcp_sim_agg_chain_len(const dlcp_sim *sim);
/*
 * Whether host |host| can contribute: attached to a switch of the chain
 * or trees, or, with the single switch, attached to it or anywhere else
 * if some host is attached to it (its datagrams are routed there through
 * the fabric, as the runtime's ranks reach a dlcp-switch in another
 * rack).  agg_address addresses |pkt|, an INA datagram of |host|, to the
 * switch: dst DLCP_SIM_NONE one hop away, else routed towards a host
 * attached to it and taken by the switch (F_TO_AGG | F_FROM_HOST).
 */
bool dlcp_sim_agg_reachable(dlcp_sim *sim, uint32_t host);
void dlcp_sim_agg_address(dlcp_sim *sim, uint32_t host,
                          dlcp_sim_packet *pkt);
/*
 * dlcp_sim_agg_chain_job registers a CINA / HINA / MTINA job whose
 * masters are |hosts| (|n|, each attached to a switch of the chain or
 * trees), whose RESULT payload is |group_bytes| and whose window may hold
 * |blocks| aggregators at a switch at once, and writes each master's rank
 * and world at its switch into |tor_rank| and |tor_world|.  The first
 * job's masters set the switches' places in the trees, and each switch's
 * core is made again then, with its parent and place in every tree; a
 * later job (several jobs share the chain or trees, and every switch's
 * pool) must have as many masters below each switch.
 * DLCP_ERR_LIMIT if the jobs' blocks together exceed a switch's pool;
 * DLCP_ERR_INVALID_ARGUMENT if there is no chain or tree, a host is not
 * below one of its switches, a later job's masters per switch differ from
 * the first's, a switch of a chain or a leaf of a tree has no master, a
 * switch with masters is not in every tree, a switch's world differs
 * between trees or exceeds DLCP_AGG_MAX_WORLD, or a group does not fit a
 * datagram; DLCP_ERR_NOMEM.
 */
int dlcp_sim_agg_chain_job(dlcp_sim *sim, const uint32_t *hosts, uint32_t n,
                           size_t group_bytes, uint64_t blocks,
                           uint32_t *tor_rank, uint32_t *tor_world);
/* Copies the core's counters and the packets dropped because the
 * processor's queue was full; false if there is no aggregation switch. */
bool dlcp_sim_agg_get_stats(const dlcp_sim *sim, dlcp_agg_stats *st,
                            uint64_t *queue_drops);
/* A new INA packet carrying a copy of the datagram |dgram| (|len| bytes),
 * on switch queue |prio| with ECN codepoint |ecn|; the caller sets src and
 * dst.  NULL (and the run ends with DLCP_ERR_NOMEM) if memory ran out, or
 * if there is no aggregation switch or the length is impossible. */
dlcp_sim_packet *dlcp_sim_ina_packet_new(dlcp_sim *sim, const uint8_t *dgram,
                                         size_t len, uint32_t prio,
                                         uint8_t ecn);
/* The datagram an INA packet carries (valid until the packet is freed). */
const uint8_t *dlcp_sim_ina_packet_bytes(const dlcp_sim *sim,
                                         const dlcp_sim_packet *pkt,
                                         size_t *len);

/* dlcp_sim_mlt_sum fills |c| with the counters of every MLT connection
 * of the run, summed (the summary's "mlt" line and object; gauges zero);
 * false (|c| zeroed) if |sim| does not run MLT. */
bool dlcp_sim_mlt_sum(const dlcp_sim *sim, dlcp_mlt_stats *c);

/* Transports (dctcp.c, mlt_host.c, pfabric.c, ndp.c). */
extern const dlcp_sim_transport_ops dlcp_sim_dctcp_ops;
extern const dlcp_sim_transport_ops dlcp_sim_mlt_ops;
extern const dlcp_sim_transport_ops dlcp_sim_tcp_ops;
extern const dlcp_sim_transport_ops dlcp_sim_pias_ops;
extern const dlcp_sim_transport_ops dlcp_sim_pfabric_ops;
extern const dlcp_sim_transport_ops dlcp_sim_ndp_ops;

/* The topology's base RTT: twice its longest host-to-host path in links
 * times the link delay (explicit topologies: 8 x their largest link delay,
 * as if the path had 4 links); and one BDP at the host rate in MTU-sized
 * (mss + header) packets, at least 1.  pFabric and NDP size their first
 * window and timeout from these. */
dlcp_sim_ps dlcp_sim_base_rtt(const dlcp_sim_config *cfg);
uint32_t dlcp_sim_bdp_pkts(const dlcp_sim_config *cfg);

/* Topologies (topo.c): builds |net| from |cfg|; DLCP_ERR_CONFIG with a
 * message in |err| if the description is inconsistent. */
int dlcp_sim_topo_build(dlcp_sim_net *net, const dlcp_sim_topo_config *cfg,
                        char *err, size_t errlen);
/* Longest host-to-host path in links for a generated topology. */
uint32_t dlcp_sim_topo_diameter(const dlcp_sim_topo_config *cfg);
/* The link delay a generated topology uses (see base_rtt_ps). */
dlcp_sim_ps dlcp_sim_topo_link_delay(const dlcp_sim_topo_config *cfg);

/* Workloads (workload.c): expands cfg's flows, incasts and PS jobs into
 * sim's flow table. */
int dlcp_sim_workload_build(dlcp_sim *sim, char *err, size_t errlen);
/* Training profiles (profile.c): reads a profile CSV written by
 * scripts/extract-profiles.py into |ps| (tensor arrays malloc'd, freed by
 * dlcp_sim_config_free).  Returns 0, DLCP_ERR_SYSTEM if the file cannot be
 * read, DLCP_ERR_CONFIG with "path:line: ..." in |err| if it is malformed,
 * or DLCP_ERR_NOMEM. */
int dlcp_sim_profile_load(dlcp_sim_ps_spec *ps, const char *path, char *err,
                          size_t errlen);
/* Where bare profile names are looked up: the source tree's
 * workloads/profiles. */
extern const char dlcp_sim_profile_dir[];

/* Resolves a host given as a name or an index; DLCP_SIM_NONE if unknown. */
uint32_t dlcp_sim_host_lookup(const dlcp_sim_net *net, const char *name);

/* Packet capture (pcap.c). */
/* Appends a cable to capture; "file:line"-style |where| and |field| name
 * it in errors.  Returns 0 or DLCP_ERR_NOMEM. */
int dlcp_sim_config_add_pcap(dlcp_sim_config *cfg, const char *a,
                             const char *b);
/*
 * dlcp_sim_pcap_open creates DIR/<a>-<b>.pcap for every cable in
 * cfg.pcaps (DIR is created if missing) and starts capturing both
 * directions.  Call it after dlcp_sim_new and before running.  Returns 0,
 * or DLCP_ERR_SYSTEM with "path: reason" in |err|.  The files are closed
 * by dlcp_sim_pcap_close or dlcp_sim_del.
 */
int dlcp_sim_pcap_open(dlcp_sim *sim, const char *dir, char *err,
                       size_t errlen);
/* Flushes and closes the capture files; returns DLCP_ERR_SYSTEM if a write
 * failed. */
int dlcp_sim_pcap_close(dlcp_sim *sim);

/* Outputs (output.c). */
typedef struct dlcp_sim_fct_stats {
  uint32_t count; /* finished flows */
  double mean_us, p50_us, p99_us, max_us;
} dlcp_sim_fct_stats;
int dlcp_sim_fct_stats_get(const dlcp_sim *sim, int group,
                           dlcp_sim_fct_stats *st);
/* dlcp_sim_prepare_outdir makes sure the results can be written to |dir|
 * before a run spends its time: creates it if missing (not its parents),
 * and checks that it is a directory this process can create files in.
 * Returns 0 or DLCP_ERR_SYSTEM with "DIR: reason" in |err|. */
int dlcp_sim_prepare_outdir(const char *dir, char *err, size_t errlen);
/* Writes flows.csv, links.csv, queues.csv, iterations.csv (PS only) and
 * summary.json into |dir| (created if missing).  Returns 0 or
 * DLCP_ERR_SYSTEM with a message in |err|. */
int dlcp_sim_write_outputs(const dlcp_sim *sim, const char *dir, char *err,
                           size_t errlen);
int dlcp_sim_write_flows_csv(const dlcp_sim *sim, FILE *f);
void dlcp_sim_print_summary(const dlcp_sim *sim, FILE *f, double wall_s);

/*
 * dlcp_sim_use_huge_pages is for a simulator executable's main(): unless
 * GLIBC_TUNABLES names glibc.malloc.hugetlb already, it sets it to 1 and
 * starts the program again with |argv| (which it does not return from
 * when that works), so that glibc backs the heap with transparent huge
 * pages (hugepages.c).  Where it cannot, it returns and the program runs
 * as it is.
 */
void dlcp_sim_use_huge_pages(char **argv);

#endif /* DLCP_SIM_SIM_H */
