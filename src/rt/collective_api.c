/*
 * collective_api.c: the public collective calls (dlcp.h): their options
 * and arguments turned into the parameters of a src/coll operation, which
 * the collectives' driver (collective.c) runs; INA all-reduces through
 * the switch (ina_run.c); waiting for and freeing the requests.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "coll/coll.h"
#include "coll/reduce.h"
#include "rt/clock.h"
#include "rt/comm_drive.h"
#include "rt/comm_internal.h"
#include "rt/ina_run.h"
#include "rt/request.h"

void dlcp_coll_opts_default(dlcp_coll_opts *opts) {
  memset(opts, 0, sizeof(*opts));
  opts->algo = DLCP_ALGO_AUTO;
}

const char *dlcp_algo_str(dlcp_algo algo) {
  return dlcp_algo_name(algo);
}

/* --- starting a collective --------------------------------------------- */

void dlcp_rt_coll_params_for(dlcp_comm *c, dlcp_coll_params *p,
                             dlcp_coll_kind kind, const void *sendbuf,
                             void *recvbuf, uint64_t count, dlcp_dtype dtype,
                             dlcp_redop redop, uint32_t root,
                             const dlcp_coll_opts *opts) {
  dlcp_coll_params_default(p);
  p->kind = kind;
  p->algo = opts->algo;
  p->rank = c->env.rank;
  p->world = c->env.world_size;
  p->sendbuf = sendbuf;
  p->recvbuf = recvbuf;
  p->count = count;
  p->dtype = dtype;
  p->op = redop;
  p->root = root;
  p->chunk_bytes = opts->chunk_bytes;
  p->topo = c->topo;
  p->topo_levels = c->topo_levels;
  p->same_host = c->env.world_size > 1 &&
                 c->stats.shm_peers == c->env.world_size - 1;
  p->bypass_alpha = opts->bypass_alpha;
  p->loss_bound = opts->loss_bound;
  p->exact_bytes = c->eager_bytes;
  p->reduce_on_arrival = c->reduce_on_arrival;
}

static int start(dlcp_comm *c, dlcp_coll_kind kind, const void *sendbuf,
                 void *recvbuf, uint64_t count, dlcp_dtype dtype,
                 dlcp_redop redop, uint32_t root, const dlcp_coll_opts *opts,
                 dlcp_request **preq) {
  if (!c || !preq) {
    return DLCP_ERR_INVALID_ARGUMENT;
  }
  dlcp_coll_opts def;
  if (!opts) {
    dlcp_coll_opts_default(&def);
    opts = &def;
  }
  dlcp_coll_params p;
  dlcp_rt_coll_params_for(c, &p, kind, sendbuf, recvbuf, count, dtype, redop,
                          root, opts);
  return dlcp_rt_coll_start(c, &p, opts, preq);
}

/* INA and RA_INA: an all-reduce through the aggregation switch,
 * progressed by the communicator's loop like every collective
 * (ina_run.h); or, below PANAMA's size for aggregation, a ring
 * all-reduce (every rank decides alike: same size, same setting). */
static int start_ina(dlcp_comm *c, const void *sendbuf, void *recvbuf,
                     uint64_t count, dlcp_dtype dtype, dlcp_redop redop,
                     const dlcp_coll_opts *opts, dlcp_request **preq) {
  if (!c || !preq) {
    return DLCP_ERR_INVALID_ARGUMENT;
  }
  if (dlcp_rt_ina_skips(count * dlcp_dtype_size(dtype))) {
    dlcp_coll_opts ring = *opts;
    ring.algo = DLCP_ALGO_RING;
    return start(c, DLCP_COLL_ALLREDUCE, sendbuf, recvbuf, count, dtype,
                 redop, 0, &ring, preq);
  }
  return dlcp_rt_ina_start(c, sendbuf, recvbuf, count, dtype, redop,
                           opts->algo == DLCP_ALGO_RA_INA, preq);
}

int dlcp_allreduce(dlcp_comm *comm, const void *sendbuf, void *recvbuf,
                   uint64_t count, dlcp_dtype dtype, dlcp_redop redop,
                   const dlcp_coll_opts *opts, dlcp_request **req) {
  if (opts && (opts->algo == DLCP_ALGO_INA || opts->algo == DLCP_ALGO_RA_INA)) {
    return start_ina(comm, sendbuf, recvbuf, count, dtype, redop, opts, req);
  }
  return start(comm, DLCP_COLL_ALLREDUCE, sendbuf, recvbuf, count, dtype, redop,
               0, opts, req);
}

int dlcp_reduce_scatter(dlcp_comm *comm, const void *sendbuf, void *recvbuf,
                        uint64_t count, dlcp_dtype dtype, dlcp_redop redop,
                        const dlcp_coll_opts *opts, dlcp_request **req) {
  return start(comm, DLCP_COLL_REDUCE_SCATTER, sendbuf, recvbuf, count, dtype,
               redop, 0, opts, req);
}

int dlcp_allgather(dlcp_comm *comm, const void *sendbuf, void *recvbuf,
                   uint64_t count, dlcp_dtype dtype,
                   const dlcp_coll_opts *opts, dlcp_request **req) {
  return start(comm, DLCP_COLL_ALLGATHER, sendbuf, recvbuf, count, dtype,
               DLCP_SUM, 0, opts, req);
}

int dlcp_reduce(dlcp_comm *comm, const void *sendbuf, void *recvbuf,
                uint64_t count, dlcp_dtype dtype, dlcp_redop redop,
                uint32_t root, const dlcp_coll_opts *opts, dlcp_request **req) {
  return start(comm, DLCP_COLL_REDUCE, sendbuf, recvbuf, count, dtype, redop,
               root, opts, req);
}

int dlcp_broadcast(dlcp_comm *comm, void *buf, uint64_t count,
                   dlcp_dtype dtype, uint32_t root,
                   const dlcp_coll_opts *opts, dlcp_request **req) {
  return start(comm, DLCP_COLL_BROADCAST, buf, buf, count, dtype, DLCP_SUM,
               root, opts, req);
}

int dlcp_barrier(dlcp_comm *comm, dlcp_request **req) {
  return start(comm, DLCP_COLL_BARRIER, NULL, NULL, 0, DLCP_INT32, DLCP_SUM,
               0, NULL, req);
}

/* --- waiting ------------------------------------------------------------ */

static int report(dlcp_request *req, dlcp_coll_info *info) {
  if (info) {
    *info = req->info;
  }
  return req->info.status;
}

/* With the communicator's mu held (the loop's drive condition). */
static bool request_done_locked(void *arg) {
  const dlcp_request *req = arg;
  return req->done;
}

static bool request_done(dlcp_request *req) {
  pthread_mutex_lock(&req->comm->mu);
  bool done = req->done;
  pthread_mutex_unlock(&req->comm->mu);
  return done;
}

int dlcp_test(dlcp_request *req, int *done, dlcp_coll_info *info) {
  if (!req || !done) {
    return DLCP_ERR_INVALID_ARGUMENT;
  }
  *done = request_done(req);
  return *done ? report(req, info) : 0;
}

int dlcp_wait(dlcp_request *req, int timeout_ms, dlcp_coll_info *info) {
  if (!req) {
    return DLCP_ERR_INVALID_ARGUMENT;
  }
  dlcp_comm *c = req->comm;
  dlcp_tstamp deadline = timeout_ms < 0
                             ? DLCP_TSTAMP_NEVER
                             : dlcp_rt_deadline_after((uint64_t)timeout_ms);
  /* As in dlcp_wait_cq: drive the loop from this thread if nobody else
   * does, so the last packet of the collective wakes this thread. */
  if (!dlcp_rt_comm_drive_until(c, request_done_locked, req, deadline)) {
    dlcp_rt_coll_await(c, req, deadline); /* another thread drives */
  }
  return request_done(req) ? report(req, info) : DLCP_ERR_PENDING;
}

void dlcp_request_free(dlcp_request *req) {
  if (!req) {
    return;
  }
  dlcp_rt_coll_cancel(req->comm, req);
  free(req->missing);
  free(req);
}
