/*
 * coll_job.h: the collective jobs' state, shared by collective.c (running
 * the ranks), coll_build.c (placing and building jobs) and coll_pause.c
 * (the PAUSE fault).  Not installed; the simulator's other files use the
 * dlcp_sim_coll_* functions of sim.h.
 */
#ifndef DLCP_SIM_COLL_JOB_H
#define DLCP_SIM_COLL_JOB_H

#include "coll/coll.h"
#include "coll/match.h"
#include "proto/rng.h"
#include "sim/sim.h"

/* A transfer: the matcher's record (coll/match.h), then the simulator's
 * part, kept across recycled slots (the hole array) or reset at removal. */
typedef struct sim_xfer {
  coll_xfer m;
  bool recv_done, send_done;
  bool recv_held; /* delivered, waiting for the receiver's CPU */
  bool copied;    /* the bytes went at the send (an eager flow's) */
  /* The flow made when the receiver posted first, on a transport that
   * posts receives ahead (MLT, as the runtime does), or none yet. */
  bool has_flow;
  uint32_t flow;
  uint32_t recv_stage; /* the RECV's stage (dlcp_coll_action.stage) */
  dlcp_coll_range *holes;
  size_t nholes, holes_cap;
} sim_xfer;

typedef struct pending_note {
  uint32_t run, peer; /* run: the operation's key (coll_rank.runs) */
  uint64_t value;
} pending_note;

typedef struct coll_rank {
  struct coll_job *job;
  uint32_t rank, host;
  uint32_t iter; /* the iteration being computed or reduced */
  dlcp_coll *op; /* NULL while computing or when finished */
  /* dlcp_coll operations started so far: every rank starts the same
   * sequence, so the count keys transfers and notes (an iteration may
   * run several: INA's exponent agreement, RA-INA's ring part); |op|'s
   * key is runs - 1. */
  uint32_t runs;
  float *buf;
  bool poll_queued, finished;
  dlcp_sim_ps coll_start;
  dlcp_sim_timer timer; /* bypass deadline */
  dlcp_sim_ps cpu_free; /* when its CPU is through with every receive */
  uint32_t op_recvs;    /* receives completed in the current operation */
  dlcp_duration step_hint_ns, trans_hint_ns;
  pending_note *notes;
  uint32_t nnotes, notes_cap;
  float *ring_buf; /* RA-INA: the ring groups, packed, while |op| runs */
  /* INA: this rank's exponent of every group (its input's, the same in
   * every iteration) and the buffer |op| agrees on them in, while
   * |agreeing|. */
  int32_t *exps, *agree_buf;
  bool agreeing;
} coll_rank;

typedef struct coll_job {
  dlcp_sim *sim;
  uint32_t id;
  dlcp_sim_coll_spec spec;
  dlcp_algo algo;
  uint32_t n;
  coll_rank *ranks;
  uint32_t *rank_of_host; /* DLCP_SIM_NONE if the host is not in the job */
  uint32_t *labels;
  uint32_t levels;
  uint64_t count; /* float32 elements per rank */
  uint32_t scale;
  uint64_t chunk;
  uint64_t rat_min_part; /* RAT's smallest part, scaled as |chunk| */
  uint64_t recv_ahead;   /* dlcp_coll_params.recv_ahead_bytes, scaled */
  uint64_t exact_bytes;  /* dlcp_coll_params.exact_bytes, scaled */
  float *expected;
  dlcp_sim_coll_iter *it;
  uint64_t verify_errors;
  double min_delivered;
  uint32_t bypasses;
  int32_t *ina_exps; /* INA: the agreed exponent of every group */
  uint32_t ina_ngroups, ina_group_blocks;
  uint64_t ina_groups, ring_groups, ina_retransmits;
  uint64_t ina_results, ina_marked, ina_cuts; /* summed over ranks */
  /* CINA: each rank's rank and world at its switch of the chain */
  uint32_t *cina_tor_rank, *cina_tor_world;
  uint32_t ranks_finished;
  int status;
  int32_t failed_rank;
  bool done;
} coll_job;

typedef struct pause_state {
  dlcp_sim *sim;
  uint32_t k;
  dlcp_sim_ps duration, every;
  uint32_t *cand;
  uint32_t ncand;
  dlcp_rng rng;
} pause_state;

typedef struct dlcp_sim_colls {
  dlcp_sim *sim;
  coll_job *jobs;
  uint32_t njobs;
  coll_match xfers; /* of sim_xfer */
  pause_state *pauses;
  uint32_t npauses;
  uint64_t npaused; /* pauses started */
} dlcp_sim_colls;

/* calloc through the simulation's allocator (n 0 allocates one). */
void *dlcp_sim_coll_zalloc(const dlcp_sim *sim, size_t n, size_t size);
/* Rank r's input element j, and a rank's whole input into its buffer. */
float dlcp_sim_coll_input(uint32_t r, uint64_t j);
void dlcp_sim_coll_fill_input(const coll_job *job, coll_rank *rk);
/* A rank's deadline timer callback (obj: the coll_rank). */
void dlcp_sim_coll_rank_timer(void *obj, dlcp_sim_ps now);
/* The job's start event (obj: the coll_job): every rank begins computing. */
void dlcp_sim_coll_job_start(void *obj, void *arg, dlcp_sim_ps now);
/* INA or RA-INA: through the aggregation switch (CINA: its chain). */
bool dlcp_sim_coll_is_ina(dlcp_algo algo);

/*
 * CINA (coll_cina.c).  rank_input is rank r's input element j (CINA: the
 * sum over its host's GPUs).  cina_setup registers the job's masters with
 * the chain or trees (DLCP_ERR_CONFIG with a message naming the field if the
 * scenario does not allow it); cina_params sets a master's part of its
 * src/coll/ina parameters and clears its buffer; cina_schedule releases
 * its host's chunks as the intra-host ring-reduce produces them.
 */
float dlcp_sim_coll_rank_input(const coll_job *job, uint32_t r, uint64_t j);
int dlcp_sim_coll_cina_setup(coll_job *job, char *err, size_t errlen);
void dlcp_sim_coll_cina_params(coll_rank *rk, dlcp_ina_params *p);
void dlcp_sim_coll_cina_schedule(coll_rank *rk, dlcp_sim_ps now);

#endif /* DLCP_SIM_COLL_JOB_H */
