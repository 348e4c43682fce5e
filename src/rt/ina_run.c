/*
 * ina_run.c: the runtime's driver of an all-reduce through the aggregation
 * switch (model in ina_run.h, protocol in docs/ina.md).
 *
 * Steps of one operation, on every rank in the same order:
 *   1. first time on this communicator: open a UDP socket connected to
 *      DLCP_SWITCH; rank 0 draws a random job id and token and broadcasts
 *      them (the switch binds a job id to its first token);
 *   2. FLOAT32: agree on the per-group exponents (all-reduce MAX);
 *   3. drive dlcp_ina over the socket until every group has its result or
 *      its ring verdict (poll until the next datagram or the core's
 *      deadline); stray results of earlier operations, which the switch
 *      re-sends while an ACK is lost, are acknowledged on the way;
 *   4. RA-INA: ring all-reduce of the groups with a ring verdict, packed.
 * Group numbers continue from one operation to the next (the switch's
 * verdict window only moves forward).
 */
#include "rt/ina_run.h"

#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "coll/ina.h"
#include "wire/agg_wire.h"

struct dlcp_rt_ina {
  int fd;
  uint32_t job;
  uint64_t token;
  uint32_t next_group;
  char name[128]; /* the switch, for messages */
  uint8_t *buf;   /* one datagram */
  uint32_t mtu;   /* of the path to the switch */
};

static dlcp_tstamp mono_ns(void) {
  struct timespec ts;

  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (dlcp_tstamp)ts.tv_sec * 1000000000u + (dlcp_tstamp)ts.tv_nsec;
}

void dlcp_rt_ina_free(dlcp_rt_ina *s) {
  if (s == NULL) {
    return;
  }
  if (s->fd >= 0) {
    close(s->fd);
  }
  free(s->buf);
  free(s);
}

__attribute__((format(printf, 3, 4))) static int
fail(dlcp_coll_info *info, int status, const char *fmt, ...) {
  va_list ap;

  info->status = status;
  va_start(ap, fmt);
  vsnprintf(info->error, sizeof(info->error), fmt, ap);
  va_end(ap);
  return status;
}

/* Runs a collective of the communicator to completion. */
static int run_wait(int rv, dlcp_request *req, dlcp_coll_info *info,
                    const char *what) {
  dlcp_coll_info sub;

  if (rv != 0) {
    return fail(info, rv, "INA: %s: %s", what, dlcp_strerror(rv));
  }
  rv = dlcp_wait(req, -1, &sub);
  dlcp_request_free(req);
  if (rv != 0) {
    return fail(info, rv, "INA: %s: %.180s", what, sub.error);
  }
  return 0;
}

/* Step 1: the socket and the job's identity. */
static int setup(dlcp_comm *comm, dlcp_rt_ina **state, dlcp_coll_info *info) {
  const char *env = getenv("DLCP_SWITCH");
  char host[128];
  const char *colon;
  struct addrinfo hints, *ai = NULL;
  dlcp_rt_ina *s;
  uint32_t id[4] = {0, 0, 0, 0};
  dlcp_request *req;
  int rv;

  if (env == NULL || (colon = strrchr(env, ':')) == NULL || colon == env ||
      (size_t)(colon - env) >= sizeof(host) || colon[1] == '\0') {
    return fail(info, DLCP_ERR_CONFIG,
                "INA: DLCP_SWITCH=%s: expected host:port of a dlcp-switch",
                env != NULL ? env : "(unset)");
  }
  memcpy(host, env, (size_t)(colon - env));
  host[colon - env] = '\0';
  memset(&hints, 0, sizeof(hints));
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  if (getaddrinfo(host, colon + 1, &hints, &ai) != 0 || ai == NULL) {
    return fail(info, DLCP_ERR_CONFIG,
                "INA: DLCP_SWITCH=%s: cannot resolve %s", env, host);
  }
  s = calloc(1, sizeof(*s));
  if (s == NULL || (s->buf = malloc(DLCP_AGG_DGRAM_MAX)) == NULL) {
    freeaddrinfo(ai);
    free(s);
    return fail(info, DLCP_ERR_NOMEM, "INA: out of memory");
  }
  snprintf(s->name, sizeof(s->name), "%s", env);
  s->fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (s->fd < 0 || connect(s->fd, ai->ai_addr, ai->ai_addrlen) != 0) {
    rv = -errno;
    freeaddrinfo(ai);
    dlcp_rt_ina_free(s);
    return fail(info, rv, "INA: socket to the switch %s: %s", env,
                strerror(-rv));
  }
  freeaddrinfo(ai);
  {
    int big = 4 << 20, mtu = 1500;
    socklen_t len = sizeof(mtu);

    (void)setsockopt(s->fd, SOL_SOCKET, SO_RCVBUF, &big, sizeof(big));
    if (getsockopt(s->fd, IPPROTO_IP, IP_MTU, &mtu, &len) != 0 || mtu < 576) {
      mtu = 1500;
    }
    s->mtu = (uint32_t)mtu;
  }
  if (dlcp_comm_rank(comm) == 0 &&
      getrandom(id, 3 * sizeof(uint32_t), 0) != 3 * (ssize_t)sizeof(uint32_t)) {
    dlcp_rt_ina_free(s);
    return fail(info, DLCP_ERR_SYSTEM, "INA: getrandom: %s", strerror(errno));
  }
  rv = dlcp_broadcast(comm, id, 4, DLCP_INT32, 0, NULL, &req);
  rv = run_wait(rv, req, info, "agreeing on the job id");
  if (rv != 0) {
    dlcp_rt_ina_free(s);
    return rv;
  }
  s->job = id[0];
  s->token = (uint64_t)id[1] | (uint64_t)id[2] << 32;
  *state = s;
  return 0;
}

/* Plain INA's group: as many blocks as one datagram to the switch holds,
 * up to INA_MAX_GROUP_BLOCKS.  A software switch's cost is per datagram
 * (~5 us of CPU on this machine's kernel UDP, docs/ina.md): 4 blocks
 * (1 KiB) a datagram held a 4-rank all-reduce at 10 Gbit/s MTU 9000 to
 * 0.15 Gbit/s of bus bandwidth.  The cap keeps a group within a small
 * pool (a 16 KiB switch has 64 aggregators; a group needs its blocks
 * side by side, or plain INA waits for ever); the exponent is agreed per
 * group either way. */
#define INA_MAX_GROUP_BLOCKS 32u

static uint32_t mtu_blocks(const dlcp_rt_ina *s, uint32_t block_elems) {
  uint32_t room = s->mtu - 20 - 8 - DLCP_AGG_HDR_LEN;
  uint32_t n = room / (block_elems * (uint32_t)sizeof(int32_t));
  return n < 1 ? 1 : n > INA_MAX_GROUP_BLOCKS ? INA_MAX_GROUP_BLOCKS : n;
}

/* Step 3: drives |h| over the socket. */
static int drive(dlcp_rt_ina *s, dlcp_ina *h, uint32_t group_blocks,
                 uint32_t block_elems, int timeout_ms, dlcp_coll_info *info) {
  dlcp_tstamp last_progress = mono_ns();
  uint64_t seen = 0;

  for (;;) {
    dlcp_ina_action act;
    dlcp_ina_result r;
    struct pollfd pfd = {s->fd, POLLIN, 0};
    dlcp_tstamp now = mono_ns(), dl;
    ssize_t k;
    int wait_ms;

    for (;;) {
      (void)dlcp_ina_poll(h, &act, s->buf, DLCP_AGG_DGRAM_MAX, now);
      if (act.type != DLCP_INA_ACT_SEND) {
        break;
      }
      (void)send(s->fd, s->buf, act.len, 0); /* a loss is retransmitted */
    }
    dlcp_ina_get_result(h, &r);
    if (act.type == DLCP_INA_ACT_DONE || r.status != 0) {
      if (r.status == DLCP_ERR_TIMEOUT) {
        return fail(info, r.status,
                    "INA: the aggregation switch %s stopped answering",
                    s->name);
      }
      if (r.status == DLCP_ERR_CONFIG && r.switch_pool > 0) {
        return fail(info, r.status,
                    "INA: the aggregation switch %s has %u aggregators for "
                    "this job, but a group of plain INA needs %u side by "
                    "side (%u B of gradient a datagram): give it more "
                    "memory (dlcp-switch --mem is split among its threads) "
                    "or use ra_ina",
                    s->name, r.switch_pool, group_blocks,
                    group_blocks * block_elems * 4u);
      }
      if (r.status != 0) {
        return fail(info, r.status, "INA: the switch %s: %s", s->name,
                    dlcp_strerror(r.status));
      }
      return 0;
    }
    if (r.results + r.ring_groups + r.busy != seen) {
      seen = r.results + r.ring_groups + r.busy;
      last_progress = now;
    } else if (timeout_ms > 0 &&
               now - last_progress > (dlcp_tstamp)timeout_ms * 1000000u) {
      return fail(info, DLCP_ERR_TIMEOUT,
                  "INA: no answer from the aggregation switch %s", s->name);
    }
    dl = dlcp_ina_next_deadline(h);
    wait_ms = dl == DLCP_TSTAMP_NEVER ? 100
              : dl <= now             ? 0
                                      : (int)((dl - now + 999999u) / 1000000u);
    wait_ms = wait_ms > 100 ? 100 : wait_ms;
    (void)poll(&pfd, 1, wait_ms);
    while ((k = recv(s->fd, s->buf, DLCP_AGG_DGRAM_MAX, MSG_DONTWAIT)) > 0) {
      int rv = dlcp_ina_on_packet(h, s->buf, (size_t)k, mono_ns());

      if (rv == DLCP_ERR_UNKNOWN_TRANSFER) {
        /* a result of an earlier operation, re-sent: acknowledge it */
        uint8_t ack[DLCP_AGG_HDR_LEN];
        dlcp_ssize n = dlcp_ina_ack_for(ack, sizeof(ack), s->buf, (size_t)k,
                                        s->job, s->token);

        if (n > 0) {
          (void)send(s->fd, ack, (size_t)n, 0);
        }
      }
    }
  }
}

int dlcp_rt_ina_allreduce(dlcp_comm *comm, dlcp_rt_ina **state,
                          const void *sendbuf, void *recvbuf, uint64_t count,
                          dlcp_dtype dtype, dlcp_redop op, bool ra,
                          int timeout_ms, dlcp_coll_info *info) {
  uint32_t world = dlcp_comm_size(comm);
  dlcp_tstamp t0 = mono_ns();
  dlcp_ina_params p;
  dlcp_ina *h = NULL;
  int32_t *exps = NULL;
  void *ring = NULL;
  uint32_t ng;
  int rv;

  memset(info, 0, sizeof(*info));
  info->algo_name = ra ? "ra_ina" : "ina";
  info->delivered_fraction = 1.0;
  if ((dtype != DLCP_FLOAT32 && dtype != DLCP_INT32) ||
      (op != DLCP_SUM && op != DLCP_AVG) || world > DLCP_AGG_MAX_WORLD ||
      (count > 0 && recvbuf == NULL)) {
    return fail(info, DLCP_ERR_INVALID_ARGUMENT,
                "INA: the switch sums FLOAT32 or INT32 (SUM, AVG) for at "
                "most 64 ranks");
  }
  if (*state == NULL && (rv = setup(comm, state, info)) != 0) {
    return rv;
  }
  dlcp_ina_params_default(&p);
  p.job = (*state)->job;
  p.token = (*state)->token;
  p.rank = dlcp_comm_rank(comm);
  p.world = world;
  p.mode = ra ? DLCP_INA_RING_FALLBACK : DLCP_INA_WAIT;
  p.dtype = dtype;
  p.op = op;
  p.sendbuf = sendbuf != NULL ? sendbuf : recvbuf;
  p.recvbuf = recvbuf;
  p.count = count;
  p.group_blocks = ra ? world : mtu_blocks(*state, p.block_elems);
  p.first_group = (*state)->next_group;
  /* A group waits for the slowest rank's contribution: re-sends are not a
   * failure; only |timeout_ms| without any answer is (checked in drive). */
  p.max_retx = UINT16_MAX - 1u;
  ng = dlcp_ina_ngroups(count, p.block_elems, p.group_blocks);
  if (dtype == DLCP_FLOAT32 && ng > 0) {
    dlcp_request *req;

    exps = malloc(ng * sizeof(*exps));
    if (exps == NULL) {
      return fail(info, DLCP_ERR_NOMEM, "INA: out of memory");
    }
    rv = dlcp_ina_exponents(p.sendbuf, count, p.block_elems * p.group_blocks,
                            exps);
    if (rv != 0) {
      /* every rank must still take part in the agreement; a rank with a
       * non-finite value claims the largest exponent and fails after */
      for (uint32_t g = 0; g < ng; g++) {
        exps[g] = INT32_MAX;
      }
    }
    {
      int arv = dlcp_allreduce(comm, exps, exps, ng, DLCP_INT32, DLCP_MAX,
                               NULL, &req);

      arv = run_wait(arv, req, info, "agreeing on the scale");
      if (arv != 0) {
        free(exps);
        return arv;
      }
    }
    for (uint32_t g = 0; g < ng && rv == 0; g++) {
      if (exps[g] == INT32_MAX) {
        rv = DLCP_ERR_INVALID_ARGUMENT; /* some rank has a non-finite value */
      }
    }
    if (rv != 0) {
      free(exps);
      return fail(info, rv,
                  "INA: a rank's input has a non-finite value (INF or NaN)");
    }
    p.exps = exps;
  }
  (*state)->next_group += ng;
  rv = dlcp_ina_new(&h, &p, NULL, mono_ns());
  free(exps);
  if (rv != 0) {
    return fail(info, rv, "INA: %s", dlcp_strerror(rv));
  }
  rv = drive(*state, h, p.group_blocks, p.block_elems, timeout_ms, info);
  if (rv == 0 && ra) {
    uint64_t n = dlcp_ina_ring_elems(h);

    if (n > 0) {
      dlcp_coll_opts o;
      dlcp_request *req;

      ring = malloc(4 * n);
      if (ring == NULL) {
        rv = fail(info, DLCP_ERR_NOMEM, "INA: out of memory");
      } else {
        dlcp_ina_ring_pack(h, ring);
        dlcp_coll_opts_default(&o);
        o.algo = DLCP_ALGO_RING;
        rv = dlcp_allreduce(comm, ring, ring, n, dtype, DLCP_SUM, &o, &req);
        rv = run_wait(rv, req, info, "the ring part of RA-INA");
        if (rv == 0) {
          dlcp_ina_ring_unpack(h, ring);
        }
        free(ring);
      }
    }
  }
  dlcp_ina_del(h);
  info->elapsed_ns = mono_ns() - t0;
  return rv;
}
