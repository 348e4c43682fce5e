/*
 * env.h: the runtime's configuration from environment variables.
 *
 * Rendezvous follows torchrun: MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE
 * (torchrun's LOCAL_RANK and LOCAL_WORLD_SIZE are not read: ranks on one
 * host find each other by address).  Without RANK and WORLD_SIZE, Open
 * MPI's OMPI_COMM_WORLD_RANK / _SIZE (mpirun) or Slurm's SLURM_PROCID /
 * SLURM_NTASKS (srun) number the ranks; MASTER_ADDR (Slurm: else
 * SLURM_LAUNCH_NODE_IPADDR) is rank 0's host and MASTER_PORT defaults to
 * 29500.  dlcp's own options are DLCP_* variables:
 *
 *   DLCP_TIMEOUT_MS        no-progress timeout of an operation, ms
 *                          (1..86400000, default 30000)
 *   DLCP_RDZV_TIMEOUT_MS   how long rendezvous waits for rank 0 and the
 *                          other ranks, ms (1..86400000, default 60000)
 *   DLCP_PATHS             source ports (paths) per peer, 1..64 (default 8)
 *   DLCP_SEGMENT           data segment size in bytes, or "auto" (from the
 *                          path MTU); 64..65463
 *   DLCP_ADDR              local address for data and control sockets
 *                          (default: chosen from the route to MASTER_ADDR)
 *   DLCP_JOB               job token, 1..4294967295 (default: a hash of
 *                          MASTER_ADDR:MASTER_PORT, equal on every rank)
 *   DLCP_JOB_SECRET        the job's secret, 16..1024 bytes: rendezvous
 *                          requires it and every datagram and control
 *                          message is authenticated (rt/auth.h); unset:
 *                          a trusted network, nothing authenticated
 *   DLCP_TOPO              "flat" or "rack:N" (N consecutive ranks share a
 *                          rack), for topology-aware collectives
 *   DLCP_FAULT_DROP        probability a data packet is dropped on send
 *   DLCP_FAULT_DUP         probability it is sent twice
 *   DLCP_FAULT_REORDER     probability it is held back behind the next one
 *   DLCP_FAULT_DELAY       probability it is delayed by DLCP_FAULT_DELAY_US
 *   DLCP_FAULT_DELAY_US    that delay, 1..10000000 us (default 1000)
 *   DLCP_FAULT_SEED        seed of the fault generator, 0..2^64-1; each
 *                          rank mixes in its rank number
 *   DLCP_FAULT_PAUSE       "RANK:AFTER_MS:FOR_MS[,...]": the rank stops
 *                          processing for FOR_MS after AFTER_MS
 *   DLCP_FAULT_STRAGGLE    "RANK:MS[,...]": in every collective the rank's
 *                          first completed receive is handed to the
 *                          collective MS late (a slow step: a straggler)
 *   DLCP_FAULT_CTL_RESET   "RANK:COUNT[,...]": the rank resets the first
 *                          COUNT control connections higher ranks open to
 *                          it before reading them (they dial again)
 *
 * Probabilities are written as a fraction ("0.01") or a percentage
 * ("1%") and must lie in [0, 1].  Every value is validated; an error names
 * the variable, the value and what was expected.
 */
#ifndef DLCP_RT_ENV_H
#define DLCP_RT_ENV_H

#include <stdbool.h>
#include <stdint.h>

#include "dlcp/dlcp_types.h"
#include "rt/auth.h"
#include "rt/errbuf.h"

#define DLCP_ENV_HOST_MAX 255u
#define DLCP_ENV_MAX_WORLD 65536u
/* MASTER_PORT under a launcher that sets none (mpirun, srun): torch's. */
#define DLCP_ENV_DEFAULT_MASTER_PORT 29500u
#define DLCP_ENV_MAX_PATHS 64u
/* Eager transfers (DLCP_EAGER_BYTES): the default, and the most one
 * control message can carry (DLCP_WIRE_CTRL_MAX less the EAGER header). */
#define DLCP_RT_DEFAULT_EAGER_BYTES 65536u
#define DLCP_RT_MAX_EAGER_BYTES ((1u << 20) - 24u)
/* DLCP_SPIN_US: how long a waiting thread polls without receiving
 * anything before it sleeps. */
#define DLCP_RT_DEFAULT_SPIN_US 1000u
#define DLCP_RT_MAX_SPIN_US 1000000u
/* The other defaults (docs/runtime.md lists them with their variables). */
#define DLCP_RT_DEFAULT_TIMEOUT_MS 30000u
#define DLCP_RT_DEFAULT_RDZV_TIMEOUT_MS 60000u
#define DLCP_RT_DEFAULT_PATHS 8u
/* MLT's line rate when DLCP_RATE_GBPS is unset: the path's
 * (dlcp_net_path_rate_gbps), LOCAL between ranks on one host, where the
 * path is memory (2 processes on loopback: 50 Gb/s at 100, 24.6 at 25),
 * and never below MIN: a user-space pacer held to a 10 Gbit/s link's own
 * rate lost to one allowed 25 (testbed, 64 MiB all-reduce: 272-367 ms
 * against 232-269), the NIC serialises what leaves faster and the rate
 * control answers the network. */
#define DLCP_RT_LOCAL_RATE_GBPS 100.0
#define DLCP_RT_MIN_RATE_GBPS 25.0
#define DLCP_RT_DEFAULT_WINDOW_BYTES (UINT64_C(1) << 20)
#define DLCP_RT_DEFAULT_FAULT_DELAY_US 1000u
#define DLCP_RT_DEFAULT_FAULT_SEED UINT64_C(0x646c6370)

typedef enum dlcp_topo_kind {
  DLCP_TOPO_FLAT = 0,   /* every rank equally far from every other */
  DLCP_TOPO_RACK = 1,   /* ranks grouped into racks of ranks_per_rack */
  DLCP_TOPO_LABELS = 2, /* this rank's own labels, innermost first */
} dlcp_topo_kind;

#define DLCP_TOPO_MAX_LEVELS 8u
#define DLCP_TOPO_LABEL_MAX 63u

typedef struct dlcp_rt_fault {
  double drop;       /* [0, 1] */
  double dup;        /* [0, 1] */
  double reorder;    /* [0, 1] */
  double delay;      /* [0, 1] */
  uint32_t delay_us; /* how long a delayed packet is held */
  uint64_t seed;
  /* This rank's pause, from DLCP_FAULT_PAUSE; pause_for_ms == 0: none. */
  uint32_t pause_after_ms;
  uint32_t pause_for_ms;
  /* DLCP_FAULT_STRAGGLE: in every collective, the first receive this rank
   * completes reaches the collective this many ms late, as if the rank
   * stalled (a slow GPU step) before reducing it; its connections and
   * notes keep working.  0 = none. */
  uint32_t straggle_ms;
  /* DLCP_FAULT_CTL_RESET: this many of the first control connections
   * this rank accepts are reset before their hello is read, as a kernel
   * resets a connection whose handshake it never completed (mesh.h). */
  uint32_t ctl_resets;
} dlcp_rt_fault;

typedef struct dlcp_rt_env {
  char master_addr[DLCP_ENV_HOST_MAX + 1];
  uint16_t master_port; /* 0 only for a world of one */
  uint32_t rank;        /* < world_size */
  uint32_t world_size;  /* 1..DLCP_ENV_MAX_WORLD */
  uint32_t timeout_ms;
  uint32_t rdzv_timeout_ms;
  uint32_t paths;                         /* 1..DLCP_ENV_MAX_PATHS */
  uint32_t segment_bytes;                 /* 0 = auto */
  char local_addr[DLCP_ENV_HOST_MAX + 1]; /* "" = auto */
  uint32_t job;                           /* != 0 */
  /* DLCP_JOB_SECRET (job_secret_len 0: none); not NUL-terminated. */
  char job_secret[DLCP_AUTH_SECRET_MAX];
  uint32_t job_secret_len;
  double rate_gbps; /* MLT line rate, DLCP_RATE_GBPS; 0 = the path's */
  uint64_t window_bytes; /* DLCP_WINDOW_BYTES: in-flight cap per peer,
                            0 = none; default 1 MiB */
  uint32_t eager_bytes; /* DLCP_EAGER_BYTES: transfers up to this size go
                           whole on the control connection; 0 = never */
  uint32_t spin_us;     /* DLCP_SPIN_US: a waiting thread polls (yielding
                           the core between polls) and sleeps in epoll
                           once this long (times the ranks per CPU where
                           they outnumber the CPUs) passes with no
                           datagram received; 0 = sleep at once */
  bool shm;             /* DLCP_SHM: peers on this host and in this network
                           namespace exchange datagrams through shared memory;
                           default on */
  bool control_datagrams; /* DLCP_CONTROL_DATAGRAMS: MLT control messages
                             as datagrams with their own retransmission
                             (no TCP timeout); default on
                             (docs/protocol.md) */
  uint32_t rtt_low_us;  /* DLCP_RTT_LOW_US; 0 = by segment size */
  uint32_t rtt_high_us; /* DLCP_RTT_HIGH_US; 0 = by segment size */
  uint32_t queue_pkts;  /* DLCP_QUEUE_PKTS: T_high stands for at least
                           this many of a connection's own packets queued
                           (proto/rate.h); 0 = off; default
                           DLCP_RATE_DEFAULT_QUEUE_PKTS */
  dlcp_topo_kind topo;
  /* DLCP_TOPO_LABELS: "rack0/pod0" gives topo_labels[0] = "rack0" (level
   * 0, the rack) and [1] = "pod0"; every rank must give the same number
   * of levels.  The communicator exchanges them at rendezvous. */
  uint32_t topo_levels;
  char topo_labels[DLCP_TOPO_MAX_LEVELS][DLCP_TOPO_LABEL_MAX + 1];
  uint32_t ranks_per_rack; /* DLCP_TOPO_RACK only, 1..world_size */
  dlcp_rt_fault fault;
  /* DLCP_FLIGHT_DIR: where the flight recorder is written ("": stderr
   * only). */
  char flight_dir[256];
} dlcp_rt_env;

/* dlcp_rt_env_defaults sets |env| to the defaults (config.c): no
 * topology, no faults, the world and addresses zero for the caller. */
void dlcp_rt_env_defaults(dlcp_rt_env *env);

/*
 * dlcp_rt_env_from_config validates an explicit configuration and turns it
 * into |env| (config.c).  Returns 0 or DLCP_ERR_CONFIG with |eb| naming
 * the field and what was expected.
 */
struct dlcp_comm_config;
int dlcp_rt_env_from_config(dlcp_rt_env *env,
                            const struct dlcp_comm_config *cfg,
                            dlcp_errbuf *eb);

/*
 * dlcp_rt_env_lookup returns the value of variable |name| or NULL if it
 * is unset.  getenv() is the usual one; tests pass a table.
 */
typedef const char *(*dlcp_rt_env_lookup)(const char *name, void *user);

/*
 * dlcp_rt_env_load fills |env| from the variables |lookup| returns (NULL
 * means getenv).  With no launcher's variables set (above) the process is
 * a world of one (rank 0, no rendezvous).  WORLD_SIZE > 1 requires RANK,
 * MASTER_ADDR and MASTER_PORT; a world of mpirun or srun needs
 * MASTER_ADDR (Slurm: or SLURM_LAUNCH_NODE_IPADDR).
 *
 * Returns 0, or DLCP_ERR_CONFIG with |eb| naming the variable, its value
 * and what was expected, e.g.
 *   "DLCP_PATHS='0': expected an integer in 1..64"
 */
int dlcp_rt_env_load(dlcp_rt_env *env, dlcp_rt_env_lookup lookup, void *user,
                     dlcp_errbuf *eb);

/* dlcp_rt_env_parse_topo sets |env|'s topology from a DLCP_TOPO value
 * (NULL: flat), with the same validation and messages; env->world_size
 * must be set. */
int dlcp_rt_env_parse_topo(dlcp_rt_env *env, const char *value,
                           dlcp_errbuf *eb);

/*
 * dlcp_rt_env_check_unknown scans |envp| ("NAME=VALUE" strings, NULL
 * terminated, e.g. environ) for a DLCP_* variable dlcp does not know, so a
 * misspelt option is an error rather than silently ignored.  Returns 0 or
 * DLCP_ERR_CONFIG naming the variable.
 */
int dlcp_rt_env_check_unknown(char *const *envp, dlcp_errbuf *eb);

#endif /* DLCP_RT_ENV_H */
