/*
 * ina_run.c: the runtime's driver of all-reduces through the aggregation
 * switch (model in ina_run.h, protocol in docs/ina.md).
 *
 * An operation goes through three phases, on every rank in the same
 * order, each moved on by the service pass (dlcp_rt_ina_service, from
 * collective.c's, under |mu|):
 *   AGREE   its collectives run: the communicator's identity broadcast
 *           (rank 0 draws a random job id and token: the switch binds a
 *           job id to its first token) if it is still running, and for
 *           FLOAT32 the per-group exponents (an all-reduce MAX);
 *   SWITCH  dlcp_ina is driven over the socket: the loop calls on_switch
 *           when datagrams arrive, which hands each to the operation that
 *           owns its group (stray results of finished operations, which
 *           the switch re-sends while an ACK is lost, are acknowledged);
 *           the service pass polls dlcp_ina and sends, and its deadline
 *           (retransmission, the switch's timeout) joins the
 *           communicator's;
 *   RING    RA-INA: the ring all-reduce of the groups with a ring verdict,
 *           packed, as a collective whose run id was reserved when the
 *           operation started (so every rank gives it the same id,
 *           whatever it started in between).
 * CINA (DLCP_INA_CHAIN, the switches of a chain in order, each rank's
 * DLCP_SWITCH one of them): every rank learns every rank's place in the
 * chain with the identity (an all-reduce of a world-long vector), and
 * contributes to its own switch as rank m of the ranks there (plus the
 * switch below, if any), scaled for the whole world, naming its switch's
 * place at the next one (src/proto/agg.h, "Chains"); the switches pass
 * partial sums up and the final down.  As the seed's CINA, the ranks on
 * one host (one address, one switch) first reduce to the host's master,
 * the last of them, along a pipelined chain (a REDUCE of the group, src/
 * coll), only masters contribute to the switch, and each master
 * broadcasts the final sum to its host's ranks (DLCP_INA_HOST_REDUCE=0:
 * every rank a master of its own).
 * Trees (DLCP_INA_LEAVES, the leaf switches, each rank's DLCP_SWITCH one of
 * them; DLCP_INA_TREES, how many trees they pass groups up, one per spine
 * as PANAMA's): the same places, hosts and masters, but no switch has
 * another below it; each leaf's place at every root is its index among
 * the leaves that have ranks of the job (a job on one leaf stays there,
 * which answers as a root), and PANAMA's window is kept per
 * tree (group g goes up tree g mod DLCP_INA_TREES, at the leaves as here).
 * Group numbers continue from one operation to the next; operations in
 * flight together announce the low-water mark of the oldest one that
 * still needs the switch (dlcp_ina_cap_low), or the switch would slide
 * its verdict window past that one's groups.
 */
#include "rt/ina_run.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <arpa/inet.h>
#include <netinet/udp.h>
#include <sys/socket.h>
#include <unistd.h>

#include "coll/ina.h"
#include "coll/reduce.h"
#include "rt/clock.h"
#include "rt/comm_internal.h"
#include "rt/errbuf.h"
#include "rt/flight.h"
#include "rt/net.h"
#include "rt/request.h"
#include "wire/agg_wire.h"

#define INA_SEND_BATCH 64 /* datagrams to the switch per sendmmsg */

/* An operation's phases, in order; LOCAL and BCAST only for a chain with
 * several ranks on this host, RING only for RA-INA's ring groups. */
enum { PH_AGREE, PH_LOCAL, PH_SWITCH, PH_RING, PH_BCAST };

struct dlcp_rt_ina_op {
  dlcp_rt_ina_op *next;
  dlcp_request *req;   /* the application's */
  bool ra;
  int phase;
  dlcp_ina_params p;   /* p.exps: NULL until the exponents are agreed */
  uint32_t ngroups;
  int32_t *exps;       /* FLOAT32: the exponents being agreed */
  dlcp_request *exp_req;
  dlcp_ina *h;         /* from SWITCH on */
  dlcp_tstamp last_progress;
  uint64_t answers;    /* results, ring verdicts and BUSY answers so far */
  uint32_t id;         /* its run id, for the flight recorder */
  uint32_t ring_id;    /* RA-INA: the reserved run id of the ring part */
  void *ring;
  dlcp_request *ring_req;
  /* CINA: the reserved run ids of the reduce to the host's master and of
   * the broadcast back, and the one running */
  uint32_t local_id, bcast_id;
  dlcp_request *local_req;
};

struct dlcp_rt_ina {
  int fd;
  uint32_t job;
  uint64_t token;
  uint32_t id[4];         /* the identity broadcast's buffer */
  dlcp_request *id_req;   /* while it runs */
  /* CINA: the chain's length (0: no chain), this rank's switch's position
   * in it, and every rank's position + 1, summed over ranks (while
   * places_req runs).  With |trees| > 0 the same for the leaves of that
   * many trees (DLCP_INA_LEAVES, DLCP_INA_TREES) instead of a chain. */
  uint32_t chain_len, chain_pos;
  uint32_t trees;
  char below[128];        /* the switch before this one, for messages */
  int32_t *places;
  dlcp_request *places_req;
  /* The ranks on this rank's host at its switch (same address, same
   * place), ascending, the last the host's master; just this rank with
   * DLCP_INA_HOST_REDUCE=0.  And per rank whether it is a master (it
   * contributes to its switch).  NULL until the places are known. */
  bool host_reduce;
  uint32_t window; /* DLCP_INA_WINDOW: groups outstanding per rank */
  bool window_set; /* ...given: that many, whatever their bytes */
  uint32_t *host;
  uint32_t nhost, host_index;
  bool *master;
  bool have_id;
  int id_status;          /* its failure, for every operation */
  char id_error[160];
  uint32_t next_group;
  char name[128]; /* the switch, for messages */
  uint8_t *buf;   /* a received datagram, or INA_SEND_BATCH to send */
  uint32_t room;  /* UDP payload of one datagram on the path to the switch */
  bool gso;       /* runs of contributions go as one UDP_SEGMENT message */
  dlcp_net_drops drops; /* the socket's, its buffer full */
  bool cc;        /* DLCP_INA_CC=panama: PANAMA's window (coll/ina_cc.h) */
  dlcp_ina_claim claim; /* DLCP_INA_CLAIM: RA-INA's header-only claims */
  dlcp_rt_ina_op *ops; /* in flight, in start (and group) order */
};

void dlcp_rt_ina_free(dlcp_rt_ina *s) {
  if (s == NULL) {
    return;
  }
  if (s->fd >= 0) {
    close(s->fd); /* which also takes it out of the loop's epoll set */
  }
  free(s->buf);
  free(s->places);
  free(s->host);
  free(s->master);
  free(s);
}

bool dlcp_rt_ina_busy(const dlcp_rt_ina *s) {
  return s != NULL && s->ops != NULL;
}

__attribute__((format(printf, 3, 4))) static int
fail_info(dlcp_coll_info *info, int status, const char *fmt, ...) {
  va_list ap;

  info->status = status;
  va_start(ap, fmt);
  vsnprintf(info->error, sizeof(info->error), fmt, ap);
  va_end(ap);
  return status;
}

/* --- finishing -------------------------------------------------------- */

static void finish(dlcp_comm *c, dlcp_rt_ina *s, dlcp_rt_ina_op *iop,
                   dlcp_tstamp now) {
  dlcp_request *req = iop->req;

  for (dlcp_rt_ina_op **pp = &s->ops; *pp; pp = &(*pp)->next) {
    if (*pp == iop) {
      *pp = iop->next;
      break;
    }
  }
  if (iop->exp_req != NULL) {
    dlcp_rt_coll_drop(c, iop->exp_req);
  }
  if (iop->ring_req != NULL) {
    dlcp_rt_coll_drop(c, iop->ring_req);
  }
  if (iop->local_req != NULL) {
    dlcp_rt_coll_drop(c, iop->local_req);
  }
  dlcp_flight *fr = dlcp_rt_coll_flight(c);
  if (fr) {
    dlcp_flight_end(fr, iop->id, req->info.status,
                    req->info.status != 0 ? req->info.error : NULL, now);
  }
  if (iop->h != NULL) {
    dlcp_ina_result r;
    dlcp_ina_get_result(iop->h, &r);
    c->stats.ina_groups += r.ina_groups;
    c->stats.ina_ring_groups += r.ring_groups;
    c->stats.ina_resent += r.retransmits;
    c->stats.ina_busy += r.busy;
    c->stats.ina_waiting += r.waiting;
    c->stats.ina_dup_results += r.dup_results;
  }
  dlcp_ina_del(iop->h);
  free(iop->exps);
  free(iop->ring);
  free(iop);
  /* Not |now|: a pass's time may be the operation's start. */
  req->info.elapsed_ns = dlcp_rt_now() - req->started_ns;
  req->ina = NULL;
  dlcp_rt_coll_finish_request(c, req);
}

__attribute__((format(printf, 5, 6))) static void
fail_op(dlcp_comm *c, dlcp_rt_ina *s, dlcp_rt_ina_op *iop, int status,
        const char *fmt, ...) {
  dlcp_coll_info *info = &iop->req->info;
  va_list ap;

  info->status = status;
  va_start(ap, fmt);
  vsnprintf(info->error, sizeof(info->error), fmt, ap);
  va_end(ap);
  finish(c, s, iop, dlcp_rt_now());
}

/* The ranks whose contributions the switch last said a group of |iop|
 * lacks (NACK WAITING), 0 if it has not said so. */
static uint64_t missing_ranks(const dlcp_rt_ina_op *iop) {
  dlcp_ina_result r;
  if (iop->phase != PH_SWITCH || iop->h == NULL) {
    return 0;
  }
  dlcp_ina_get_result(iop->h, &r);
  return r.missing;
}

/* The address rank |r| is reached at (its host). */
static dlcp_sockaddr host_addr(const dlcp_comm *c, uint32_t r) {
  dlcp_sockaddr a;
  if (r != c->env.rank) {
    return c->peers[r].udp[0];
  }
  if (dlcp_sockaddr_parse(&a, c->local_ip, 0) != 0) {
    memset(&a, 0, sizeof(a));
  }
  return a;
}

/* Sorts the ranks into hosts, once the places are known (s->host,
 * s->master): a rank is its host's master if no later rank has its
 * address and place (every rank is, without the host reduce).  Returns 0
 * or DLCP_ERR_NOMEM. */
static int host_groups(dlcp_comm *c, dlcp_rt_ina *s) {
  uint32_t world = c->env.world_size, me = c->env.rank;
  dlcp_sockaddr *addr = calloc(world, sizeof(*addr));
  s->host = calloc(world, sizeof(*s->host));
  s->master = calloc(world, sizeof(*s->master));
  if (addr == NULL || s->host == NULL || s->master == NULL) {
    free(addr);
    free(s->host);
    free(s->master);
    s->host = NULL;
    s->master = NULL;
    return DLCP_ERR_NOMEM;
  }
  for (uint32_t r = 0; r < world; r++) {
    addr[r] = host_addr(c, r);
  }
  for (uint32_t r = 0; r < world; r++) {
    bool same = s->places[r] == s->places[me] &&
                dlcp_sockaddr_same_host(&addr[r], &addr[me]);
    if (s->host_reduce ? same : r == me) {
      s->host_index = r == me ? s->nhost : s->host_index;
      s->host[s->nhost++] = r;
    }
    s->master[r] = true;
    for (uint32_t q = r + 1; s->host_reduce && q < world; q++) {
      if (s->places[q] == s->places[r] &&
          dlcp_sockaddr_same_host(&addr[q], &addr[r])) {
        s->master[r] = false;
        break;
      }
    }
  }
  free(addr);
  return 0;
}

/* The communicator's rank that is worker |w| of this rank's switch (its
 * w-th master), or UINT32_MAX for the switch below it in a chain. */
static uint32_t comm_rank_of(const dlcp_comm *c, const dlcp_rt_ina *s,
                             uint32_t w) {
  if (s->chain_len == 0) {
    return w;
  }
  for (uint32_t r = 0; r < c->env.world_size; r++) {
    if ((uint32_t)s->places[r] == s->chain_pos + 1u && s->master[r] &&
        w-- == 0) {
      return r;
    }
  }
  return UINT32_MAX;
}

/* Writes "rank 2 (addr), rank 3 (addr)" for the workers of |missing| (a
 * bitmap of this rank's switch's workers) into |buf|, the first few of
 * them and how many more. */
static void name_ranks(dlcp_comm *c, const dlcp_rt_ina *s, uint64_t missing,
                       char *buf, size_t len) {
  enum { SHOWN = 3 };
  size_t used = 0;
  uint32_t n = 0;
  buf[0] = '\0';
  for (uint32_t w = 0; w < 64u; w++) {
    if ((missing >> w & 1u) == 0) {
      continue;
    }
    if (n++ < SHOWN && used < len) {
      uint32_t r = comm_rank_of(c, s, w);
      char below[160];
      if (r == UINT32_MAX) {
        dlcp_fmt(below, sizeof(below), "the switch below, %s", s->below);
      }
      int k = snprintf(buf + used, len - used, "%s%s", n > 1 ? ", " : "",
                       r == UINT32_MAX ? below : c->peers[r].name);
      used += k > 0 ? (size_t)k : 0;
    }
  }
  if (n > SHOWN && used < len) {
    snprintf(buf + used, len - used, " and %u more", n - SHOWN);
  }
}

void dlcp_rt_ina_note_waits(dlcp_comm *c, dlcp_flight *fr) {
  dlcp_rt_ina *s = *dlcp_rt_coll_ina(c);
  for (dlcp_rt_ina_op *iop = s ? s->ops : NULL; iop; iop = iop->next) {
    if (iop->phase == PH_SWITCH) {
      /* The switch said whose contribution the group lacks: that rank,
       * not the switch, is what this one waits on. */
      uint64_t missing = missing_ranks(iop);
      uint32_t on = missing != 0
                        ? comm_rank_of(c, s,
                                       (uint32_t)__builtin_ctzll(missing))
                        : DLCP_FLIGHT_SWITCH;
      on = on == UINT32_MAX ? DLCP_FLIGHT_SWITCH : on;
      dlcp_flight_waiting(fr, iop->id, on, iop->last_progress);
    }
  }
}

void dlcp_rt_ina_cancel(dlcp_comm *c, dlcp_rt_ina_op *iop, dlcp_tstamp now) {
  (void)now;
  fail_op(c, *dlcp_rt_coll_ina(c), iop, DLCP_ERR_CANCELED,
          "INA: the request was freed");
}

void dlcp_rt_ina_fail_all(dlcp_comm *c, int status, const char *reason,
                          dlcp_tstamp now) {
  dlcp_rt_ina *s = *dlcp_rt_coll_ina(c);

  (void)now;
  if (s == NULL) {
    return;
  }
  if (s->id_req != NULL) {
    /* Its run fails too: nobody will learn the identity. */
    s->id_status = status;
    dlcp_copy_str(s->id_error, sizeof(s->id_error), reason);
    dlcp_rt_coll_drop(c, s->id_req);
    s->id_req = NULL;
  }
  if (s->places_req != NULL) {
    s->id_status = status;
    dlcp_copy_str(s->id_error, sizeof(s->id_error), reason);
    dlcp_rt_coll_drop(c, s->places_req);
    s->places_req = NULL;
  }
  while (s->ops != NULL) {
    fail_op(c, s, s->ops, status, "INA: %.200s", reason);
  }
}

/* --- the socket ------------------------------------------------------- */

/* The lowest low-water mark of the operations that still need the switch
 * (NULL: none does). */
static const uint32_t *job_low(const dlcp_rt_ina *s, uint32_t *low) {
  for (const dlcp_rt_ina_op *iop = s->ops; iop; iop = iop->next) {
    if (iop->phase == PH_AGREE || iop->phase == PH_LOCAL) {
      *low = iop->p.first_group;
      return low;
    }
    if (iop->phase == PH_SWITCH) {
      *low = dlcp_ina_low(iop->h);
      return low;
    }
  }
  return NULL;
}

/* Hands one datagram from the switch to the operation whose group it is;
 * a result of no operation in flight is acknowledged. */
static void on_datagram(dlcp_rt_ina *s, const uint8_t *d, size_t len,
                        uint8_t ecn, dlcp_tstamp now) {
  dlcp_agg_hdr h;
  const uint8_t *payload;
  uint8_t ack[DLCP_AGG_HDR_LEN];
  uint32_t low;
  dlcp_ssize n;

  if (dlcp_agg_decode(&h, &payload, d, len) != 0) {
    return;
  }
  for (dlcp_rt_ina_op *iop = s->ops; iop; iop = iop->next) {
    if (iop->h != NULL && h.group - iop->p.first_group < iop->ngroups) {
      (void)dlcp_ina_on_packet(iop->h, d, len, ecn, now);
      return;
    }
  }
  n = dlcp_ina_ack_for(ack, sizeof(ack), d, len, s->job, s->token,
                       job_low(s, &low));
  if (n > 0) {
    (void)send(s->fd, ack, (size_t)n, MSG_DONTWAIT);
  }
}

/* Datagrams read per system call, and batches per wake-up (the loop
 * reports the rest). */
#define INA_RECV_BATCH 32
#define INA_RECV_ROUNDS 8

/* Sends iov[0..n) to the switch, one system call for the lot: runs of
 * equal datagrams (a group fills one) as one UDP GSO message each, which
 * the kernel cuts into the datagrams at the device, or in software before
 * the qdisc where the device cannot, so one socket buffer goes down the
 * stack per run.  A kernel or device that refuses UDP_SEGMENT (or a path
 * whose MTU shrank below the datagrams: the kernel fragments datagrams,
 * not GSO segments) is told by the first refused message; the batch goes
 * datagram by datagram then and from then on.  Never blocks under |mu|;
 * a datagram not sent is re-sent by the protocol. */
static void send_batch(dlcp_rt_ina *s, struct iovec *iov, uint32_t n) {
  struct mmsghdr msg[INA_SEND_BATCH];
  union {
    struct cmsghdr align;
    char buf[DLCP_NET_GSO_CTL];
  } ctl[INA_SEND_BATCH];
  uint32_t m = 0;

  for (uint32_t k = 0; k < n; m++) {
    uint32_t count = s->gso ? (uint32_t)dlcp_net_gso_run(&iov[k], n - k) : 1;
    dlcp_net_gso_message(&msg[m].msg_hdr, NULL, &iov[k], count, 0, ctl[m].buf);
    k += count;
  }
  if (m == 0) {
    return;
  }
  if (sendmmsg(s->fd, msg, m, MSG_DONTWAIT) < 0 && s->gso &&
      dlcp_net_gso_refused(errno)) {
    s->gso = false;
    send_batch(s, iov, n);
  }
}

static void on_switch(dlcp_loop *loop, int fd, uint32_t events, void *user) {
  dlcp_comm *c = user;
  dlcp_rt_ina *s;
  ssize_t k;

  (void)loop;
  (void)events;
  pthread_mutex_lock(&c->mu);
  s = *dlcp_rt_coll_ina(c);
  /* Read until dry, or a bounded number of batches (the loop reports the
   * rest); an error an ICMP message queued (the switch's port
   * unreachable) ends the batch and is dropped: a lost datagram is re-sent
   * by either end, and a switch that never answers is the timeout's to
   * report.  The IP header's ECN bits come along (IP_RECVTOS or
   * IPV6_RECVTCLASS, set with cc). */
  for (int round = 0; round < INA_RECV_ROUNDS; round++) {
    union {
      struct cmsghdr align;
      /* IP_TOS, UDP_GRO, the socket's drop count */
      char buf[2 * CMSG_SPACE(sizeof(int)) + DLCP_NET_DROPS_CTL];
    } ctl[INA_RECV_BATCH];
    struct iovec iov[INA_RECV_BATCH];
    struct mmsghdr msg[INA_RECV_BATCH];
    for (int i = 0; i < INA_RECV_BATCH; i++) {
      iov[i].iov_base = s->buf + (size_t)i * DLCP_AGG_DGRAM_MAX;
      iov[i].iov_len = DLCP_AGG_DGRAM_MAX;
      memset(&msg[i], 0, sizeof(msg[i]));
      msg[i].msg_hdr.msg_iov = &iov[i];
      msg[i].msg_hdr.msg_iovlen = 1;
      msg[i].msg_hdr.msg_control = ctl[i].buf;
      msg[i].msg_hdr.msg_controllen = sizeof(ctl[i].buf);
    }
    k = recvmmsg(fd, msg, INA_RECV_BATCH, MSG_DONTWAIT, NULL);
    if (k <= 0) {
      break;
    }
    dlcp_tstamp now = dlcp_rt_now();
    c->stats.ina_datagrams_rx_dropped +=
        dlcp_net_note_drops(&s->drops, &msg[k - 1].msg_hdr); /* the latest */
    for (int i = 0; i < k; i++) {
      /* With UDP_GRO a message may hold a run of the switch's datagrams
       * to this rank, of one size (the last may be shorter) and one ECN
       * codepoint: each is handled as if it had come alone. */
      const uint8_t *d = iov[i].iov_base;
      size_t len = msg[i].msg_len;
      size_t seg = dlcp_net_gro_segment(&msg[i].msg_hdr, len);
      uint8_t ecn = dlcp_net_ecn_of(&msg[i].msg_hdr);
      uint64_t count = seg > 0 ? (len + seg - 1) / seg : 1;
      c->stats.ina_datagrams_received += count;
      if (count > 1) {
        c->stats.ina_datagrams_coalesced += count;
      }
      for (size_t off = 0; off < len; off += seg) {
        on_datagram(s, d + off, len - off < seg ? len - off : seg, ecn, now);
      }
    }
    if (k < INA_RECV_BATCH) {
      break;
    }
  }
  dlcp_rt_service(c);
  pthread_mutex_unlock(&c->mu);
}

/* --- starting --------------------------------------------------------- */

/* The seed's PANAMA aggregates only reduce flows above 40 MB. */
#define PANAMA_MIN_BYTES UINT64_C(40000000)
/* Groups outstanding per rank (within dlcp_ina_params.window_bytes)
 * unless DLCP_INA_WINDOW says otherwise. */
#define DLCP_RT_INA_WINDOW 64u

/* DLCP_INA_MIN_BYTES as a number into |*v|: 0, or -1 if malformed. */
static int min_bytes(uint64_t *v) {
  const char *s = getenv("DLCP_INA_MIN_BYTES");
  const char *cc = getenv("DLCP_INA_CC");
  char *end;
  if (s == NULL) {
    *v = cc != NULL && strcmp(cc, "panama") == 0 ? PANAMA_MIN_BYTES : 0;
    return 0;
  }
  errno = 0;
  *v = strtoull(s, &end, 10);
  return s[0] >= '0' && s[0] <= '9' && *end == '\0' && errno == 0 ? 0 : -1;
}

bool dlcp_rt_ina_skips(uint64_t bytes) {
  uint64_t v;
  return min_bytes(&v) == 0 && bytes < v;
}

/* options reads DLCP_INA_CC (none | panama; default none), DLCP_INA_CLAIM
 * (never | always | auto; default auto), DLCP_INA_HOST_REDUCE (0 | 1;
 * default 1) and DLCP_INA_WINDOW (1..DLCP_INA_MAX_WINDOW; default
 * DLCP_RT_INA_WINDOW) into |s|, and checks DLCP_INA_MIN_BYTES; 0, or
 * DLCP_ERR_CONFIG with |info| naming the variable. */
static int options(dlcp_rt_ina *s, dlcp_coll_info *info) {
  const char *cc = getenv("DLCP_INA_CC");
  const char *claim = getenv("DLCP_INA_CLAIM");
  uint64_t v;
  if (min_bytes(&v) != 0) {
    return fail_info(info, DLCP_ERR_CONFIG,
                     "INA: DLCP_INA_MIN_BYTES=%.40s: expected a number of "
                     "bytes", getenv("DLCP_INA_MIN_BYTES"));
  }
  if (cc != NULL && strcmp(cc, "none") != 0 && strcmp(cc, "panama") != 0) {
    return fail_info(info, DLCP_ERR_CONFIG,
                     "INA: DLCP_INA_CC=%.40s: expected none or panama", cc);
  }
  static const char *const claims[] = {"never", "always", "auto"};
  s->claim = DLCP_INA_CLAIM_NEVER;
  if (claim != NULL) {
    size_t i = 0;
    while (i < 3 && strcmp(claim, claims[i]) != 0) {
      i++;
    }
    if (i == 3) {
      return fail_info(info, DLCP_ERR_CONFIG,
                       "INA: DLCP_INA_CLAIM=%.40s: expected never, always "
                       "or auto", claim);
    }
    s->claim = (dlcp_ina_claim)i;
  }
  s->cc = cc != NULL && strcmp(cc, "panama") == 0;
  const char *hr = getenv("DLCP_INA_HOST_REDUCE");
  if (hr != NULL && strcmp(hr, "0") != 0 && strcmp(hr, "1") != 0) {
    return fail_info(info, DLCP_ERR_CONFIG,
                     "INA: DLCP_INA_HOST_REDUCE=%.40s: expected 0 or 1", hr);
  }
  s->host_reduce = hr == NULL || strcmp(hr, "1") == 0;
  const char *w = getenv("DLCP_INA_WINDOW");
  s->window = DLCP_RT_INA_WINDOW;
  s->window_set = w != NULL;
  if (w != NULL) {
    char *end;
    errno = 0;
    unsigned long long x = strtoull(w, &end, 10);
    if (w[0] < '0' || w[0] > '9' || *end != '\0' || errno != 0 || x == 0 ||
        x > DLCP_INA_MAX_WINDOW) {
      return fail_info(info, DLCP_ERR_CONFIG,
                       "INA: DLCP_INA_WINDOW=%.40s: expected groups "
                       "outstanding per rank, 1 to %u", w,
                       DLCP_INA_MAX_WINDOW);
    }
    s->window = (uint32_t)x;
  }
  return 0;
}

/* DLCP_INA_TREES: 1..DLCP_INA_MAX_TREES trees (the leaves' --parent
 * count); only beside DLCP_INA_LEAVES. */
static int trees_option(dlcp_rt_ina *s, bool leaves, dlcp_coll_info *info) {
  const char *t = getenv("DLCP_INA_TREES");
  if (t == NULL || t[0] == '\0') {
    s->trees = leaves ? 1u : 0u;
    return 0;
  }
  char *end;
  errno = 0;
  unsigned long long x = strtoull(t, &end, 10);
  if (!leaves || t[0] < '0' || t[0] > '9' || *end != '\0' || errno != 0 ||
      x == 0 || x > DLCP_INA_MAX_TREES) {
    return fail_info(info, DLCP_ERR_CONFIG,
                     "INA: DLCP_INA_TREES=%.40s: expected the trees of the "
                     "leaf switches in DLCP_INA_LEAVES, 1 to %u%s", t,
                     DLCP_INA_MAX_TREES,
                     leaves ? "" : " (DLCP_INA_LEAVES is unset)");
  }
  s->trees = (uint32_t)x;
  return 0;
}

/* DLCP_INA_CHAIN: the switches of a CINA chain, leaf first, root last, or
 * DLCP_INA_LEAVES: the leaf switches of DLCP_INA_TREES trees, in an order
 * every rank gives alike; comma-separated; this rank's DLCP_SWITCH |sw|
 * must be one of them.  Sets the list's length and this rank's position
 * (length 0 without either variable). */
static int chain_options(dlcp_rt_ina *s, const char *sw,
                         dlcp_coll_info *info) {
  const char *chain = getenv("DLCP_INA_CHAIN");
  const char *leaves = getenv("DLCP_INA_LEAVES");
  const char *var = "DLCP_INA_CHAIN";
  size_t swlen = strlen(sw);
  bool tree = leaves != NULL && leaves[0] != '\0';
  if (tree && chain != NULL && chain[0] != '\0') {
    return fail_info(info, DLCP_ERR_CONFIG,
                     "INA: DLCP_INA_CHAIN and DLCP_INA_LEAVES are both set: "
                     "a job's switches are a chain or the leaves of trees");
  }
  int rv = trees_option(s, tree, info);
  if (rv != 0) {
    return rv;
  }
  if (tree) {
    chain = leaves;
    var = "DLCP_INA_LEAVES";
  }
  if (chain == NULL || chain[0] == '\0') {
    return 0;
  }
  s->chain_pos = UINT32_MAX;
  const char *prev = NULL, *p = chain;
  size_t prevlen = 0;
  for (;;) {
    const char *comma = strchr(p, ',');
    size_t len = comma != NULL ? (size_t)(comma - p) : strlen(p);
    if (len == 0 || s->chain_len == DLCP_AGG_MAX_WORLD) {
      return fail_info(info, DLCP_ERR_CONFIG,
                       "INA: %s=%.200s: expected up to %u host:port of "
                       "dlcp-switch, comma-separated%s", var, chain,
                       DLCP_AGG_MAX_WORLD, tree ? "" : ", leaf first");
    }
    if (len == swlen && memcmp(p, sw, len) == 0) {
      s->chain_pos = s->chain_len;
      if (prev != NULL && !tree) {
        dlcp_fmt(s->below, sizeof(s->below), "%.*s", (int)prevlen, prev);
      }
    }
    s->chain_len++;
    prev = p;
    prevlen = len;
    if (comma == NULL) {
      break;
    }
    p = comma + 1;
  }
  if (s->chain_pos == UINT32_MAX) {
    return fail_info(info, DLCP_ERR_CONFIG,
                     "INA: DLCP_SWITCH=%.100s is not in %s=%.200s", sw, var,
                     chain);
  }
  return 0;
}

/* DLCP_SWITCH's value |env| split into |host| (|len| bytes) and |port|;
 * 0, or DLCP_ERR_CONFIG with |info| naming the variable (also when unset:
 * |env| NULL). */
static int switch_host_port(const char *env, char *host, size_t len,
                            uint16_t *port, dlcp_coll_info *info) {
  if (env == NULL || dlcp_net_split_host_port(env, host, len, port) != 0) {
    return fail_info(info, DLCP_ERR_CONFIG,
                     "INA: DLCP_SWITCH=%.100s: expected host:port or "
                     "[IPv6]:port of a dlcp-switch",
                     env != NULL ? env : "(unset)");
  }
  return 0;
}

int dlcp_rt_ina_check_env(dlcp_errbuf *eb) {
  const char *env = getenv("DLCP_SWITCH");
  char host[128];
  uint16_t port;
  dlcp_coll_info info = {0};
  dlcp_rt_ina *s = calloc(1, sizeof(*s));
  int rv = 0;

  if (s == NULL) {
    return DLCP_ERR_NOMEM;
  }
  if (env != NULL) {
    rv = switch_host_port(env, host, sizeof(host), &port, &info);
  }
  if (rv == 0) {
    rv = options(s, &info);
  }
  if (rv == 0 && env != NULL) {
    rv = chain_options(s, env, &info);
  }
  free(s);
  return rv == 0 ? 0 : dlcp_errbuf_set(eb, rv, "%s", info.error);
}

/* The all-reduce that tells every rank every rank's place in the chain.
 * With |mu| held. */
static int start_places(dlcp_comm *c, dlcp_rt_ina *s) {
  uint32_t world = dlcp_comm_size(c);
  dlcp_coll_params p;
  dlcp_coll_opts o;
  s->places = calloc(world, sizeof(*s->places));
  if (s->places == NULL) {
    return DLCP_ERR_NOMEM;
  }
  s->places[dlcp_comm_rank(c)] = (int32_t)s->chain_pos + 1;
  dlcp_coll_opts_default(&o);
  dlcp_rt_coll_params_for(c, &p, DLCP_COLL_ALLREDUCE, s->places, s->places,
                          world, DLCP_INT32, DLCP_SUM, 0, &o);
  return dlcp_rt_coll_start_locked(c, &p, &o, dlcp_rt_coll_reserve_id(c),
                                   &s->places_req);
}

/* The socket to DLCP_SWITCH, watched by the communicator's loop, and the
 * identity broadcast started.  With |mu| held. */
static int setup(dlcp_comm *c, dlcp_coll_info *info) {
  const char *env = getenv("DLCP_SWITCH");
  char host[128];
  uint16_t port;
  dlcp_sockaddr sw;
  dlcp_errbuf eb;
  dlcp_rt_ina *s;
  dlcp_coll_params p;
  dlcp_coll_opts o;
  int rv;

  rv = switch_host_port(env, host, sizeof(host), &port, info);
  if (rv != 0) {
    return rv;
  }
  if (dlcp_net_resolve(&sw, host, port, SOCK_DGRAM, &eb) != 0) {
    return fail_info(info, DLCP_ERR_CONFIG, "INA: DLCP_SWITCH=%s: %s", env,
                     eb.msg);
  }
  s = calloc(1, sizeof(*s));
  if (s == NULL ||
      (s->buf = malloc((size_t)INA_SEND_BATCH * DLCP_AGG_DGRAM_MAX)) == NULL) {
    free(s);
    return fail_info(info, DLCP_ERR_NOMEM, "INA: out of memory");
  }
  snprintf(s->name, sizeof(s->name), "%s", env);
  s->fd = -1;
  rv = options(s, info);
  if (rv == 0) {
    rv = chain_options(s, env, info);
  }
  if (rv != 0) {
    dlcp_rt_ina_free(s);
    return rv;
  }
  int family = sw.sa.sa_family;
  s->fd = socket(family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (s->fd < 0 || connect(s->fd, &sw.sa, dlcp_sockaddr_len(&sw)) != 0) {
    rv = -errno;
    dlcp_rt_ina_free(s);
    return fail_info(info, rv, "INA: socket to the switch %s: %s", env,
                     strerror(-rv));
  }
  {
    int on_gro = 1, mtu = dlcp_net_path_mtu(&sw, 1500);
    int level = dlcp_net_tclass_level(family);

    /* The switch answers a window of groups in one burst. */
    dlcp_net_set_buffers(s->fd, 4 << 20, 0);
    /* Runs of results the host's NIC merged (GRO), or that loopback
     * passed whole from the switch's UDP GSO sends, come up as one
     * message each, cut back here, instead of being segmented again in
     * the kernel; a kernel without UDP_GRO refuses and delivers them one
     * by one. */
    (void)setsockopt(s->fd, SOL_UDP, UDP_GRO, &on_gro, sizeof(on_gro));
    (void)dlcp_net_count_drops(s->fd);
    s->gso = true;
    if (s->cc) {
      /* Contributions ECN-capable, so queues mark rather than drop them,
       * and the results' codepoints read back. */
      int ect = DLCP_AGG_ECN_ECT0, on = 1;
      (void)setsockopt(s->fd, level, dlcp_net_tclass_opt(family), &ect,
                       sizeof(ect));
      (void)setsockopt(s->fd, level, dlcp_net_recv_tclass_opt(family), &on,
                       sizeof(on));
    }
    if (mtu < 576) {
      mtu = 1500;
    }
    s->room = (uint32_t)(mtu - dlcp_net_ip_header_len(family) - 8);
  }
  if (dlcp_comm_rank(c) == 0 &&
      getrandom(s->id, 3 * sizeof(uint32_t), 0) !=
          3 * (ssize_t)sizeof(uint32_t)) {
    rv = errno;
    dlcp_rt_ina_free(s);
    return fail_info(info, DLCP_ERR_SYSTEM, "INA: getrandom: %s",
                     strerror(rv));
  }
  /* The loop is driven by one thread at a time, under |mu| for anything
   * but the wait itself, which an added descriptor simply joins. */
  rv = dlcp_loop_add_fd(c->loop, s->fd, DLCP_LOOP_READ, on_switch, c);
  if (rv != 0) {
    dlcp_rt_ina_free(s);
    return fail_info(info, rv, "INA: watching the socket to %s: %s", env,
                     dlcp_strerror(rv));
  }
  dlcp_coll_opts_default(&o);
  dlcp_rt_coll_params_for(c, &p, DLCP_COLL_BROADCAST, s->id, s->id, 4,
                          DLCP_INT32, DLCP_SUM, 0, &o);
  rv = dlcp_rt_coll_start_locked(c, &p, &o, dlcp_rt_coll_reserve_id(c),
                                 &s->id_req);
  if (rv == 0 && s->chain_len > 0) {
    rv = start_places(c, s);
  }
  if (rv != 0) {
    /* The id is spent on this rank: the communicator cannot do INA. */
    s->id_status = rv;
    dlcp_copy_str(s->id_error, sizeof(s->id_error), dlcp_strerror(rv));
  }
  *dlcp_rt_coll_ina(c) = s;
  return 0;
}

/* Plain INA's group: as many blocks as one datagram to the switch holds,
 * up to INA_MAX_GROUP_BLOCKS.  A software switch's cost is per datagram
 * (~5 us of CPU on this machine's kernel UDP, docs/ina.md): 4 blocks
 * (1 KiB) a datagram held a 4-rank all-reduce at 10 Gbit/s MTU 9000 to
 * 0.15 Gbit/s of bus bandwidth.  The cap keeps a group within a small
 * pool (a 16 KiB switch has 64 aggregators; a group needs its blocks
 * side by side, and a pool smaller than a group refuses it); the
 * exponent is agreed per group either way. */
#define INA_MAX_GROUP_BLOCKS 32u

static uint32_t mtu_blocks(const dlcp_rt_ina *s, uint32_t block_elems) {
  uint32_t room = s->room - DLCP_AGG_HDR_LEN;
  uint32_t n = room / (block_elems * (uint32_t)sizeof(int32_t));
  return n < 1 ? 1 : n > INA_MAX_GROUP_BLOCKS ? INA_MAX_GROUP_BLOCKS : n;
}

/* RA-INA's groups: n blocks for n ranks (the seed's rule: a group is one
 * block per ring chunk), each of the n made of as many 64-element blocks
 * as let the group fill a datagram, since the software switch pays per
 * datagram and not per block (plain INA's groups went from 331 to 76 ms
 * for 4 MiB when they grew to a datagram).  A group of k * n blocks claims
 * k * n consecutive aggregators or gets one verdict, as n would. */
static uint32_t ra_group_blocks(const dlcp_rt_ina *s, uint32_t block_elems,
                                uint32_t world) {
  uint32_t k = mtu_blocks(s, block_elems) / world;
  return (k > 1 ? k : 1u) * world;
}

/* The operation's collectives (reserving their ids) and its place in the
 * group sequence, at the call, so every rank numbers them alike.  With
 * |mu| held.  Returns 0 or fails |req|'s info. */
static int op_begin(dlcp_comm *c, dlcp_rt_ina *s, dlcp_rt_ina_op *iop,
                    dlcp_coll_info *info) {
  dlcp_ina_params *p = &iop->p;
  dlcp_ina_params what = *p; /* the call's buffers, count, dtype and op */

  dlcp_ina_params_default(p);
  p->dtype = what.dtype;
  p->op = what.op;
  p->sendbuf = what.sendbuf;
  p->recvbuf = what.recvbuf;
  p->count = what.count;
  p->rank = dlcp_comm_rank(c);
  p->world = dlcp_comm_size(c);
  p->mode = iop->ra ? DLCP_INA_RING_FALLBACK : DLCP_INA_WAIT;
  p->cc = s->cc;
  p->window = s->window;
  if (s->window_set) {
    p->window_bytes = 0; /* else the core's cap in bytes */
  }
  p->claim = iop->ra ? s->claim : DLCP_INA_CLAIM_NEVER;
  p->group_blocks = iop->ra ? ra_group_blocks(s, p->block_elems, p->world)
                            : mtu_blocks(s, p->block_elems);
  p->first_group = s->next_group;
  /* A group waits for the slowest rank's contribution: re-sends are not a
   * failure; only the communicator's timeout without any answer is. */
  p->max_retx = UINT16_MAX - 1u;
  iop->ngroups = dlcp_ina_ngroups(p->count, p->block_elems, p->group_blocks);
  s->next_group += iop->ngroups;
  /* A run id of its own, reserved where every rank reserves it, so the
   * ranks' flight records name the operation alike. */
  iop->id = dlcp_rt_coll_reserve_id(c);
  dlcp_flight *fr = dlcp_rt_coll_flight(c);
  if (fr) {
    dlcp_algo algo = iop->ra ? DLCP_ALGO_RA_INA : DLCP_ALGO_INA;
    dlcp_flight_begin(fr, iop->id,
                      dlcp_coll_kind_name(DLCP_COLL_ALLREDUCE),
                      dlcp_algo_name(algo),
                      p->count * dlcp_dtype_size(p->dtype), dlcp_rt_now());
  }
  if (p->dtype == DLCP_FLOAT32 && iop->ngroups > 0) {
    dlcp_coll_params cp;
    dlcp_coll_opts o;
    int rv;

    iop->exps = malloc(iop->ngroups * sizeof(*iop->exps));
    if (iop->exps == NULL) {
      return fail_info(info, DLCP_ERR_NOMEM, "INA: out of memory");
    }
    if (dlcp_ina_exponents(p->sendbuf, p->count,
                           p->block_elems * p->group_blocks, iop->exps) != 0) {
      /* every rank must still take part in the agreement; a rank with a
       * non-finite value claims the largest exponent, and all fail */
      for (uint32_t g = 0; g < iop->ngroups; g++) {
        iop->exps[g] = INT32_MAX;
      }
    }
    dlcp_coll_opts_default(&o);
    dlcp_rt_coll_params_for(c, &cp, DLCP_COLL_ALLREDUCE, iop->exps, iop->exps,
                            iop->ngroups, DLCP_INT32, DLCP_MAX, 0, &o);
    rv = dlcp_rt_coll_start_locked(c, &cp, &o, dlcp_rt_coll_reserve_id(c),
                                   &iop->exp_req);
    if (rv != 0) {
      return fail_info(info, rv, "INA: agreeing on the scale: %s",
                       dlcp_strerror(rv));
    }
  }
  if (iop->ra) {
    iop->ring_id = dlcp_rt_coll_reserve_id(c);
  }
  if (s->chain_len > 0) {
    iop->local_id = dlcp_rt_coll_reserve_id(c);
    iop->bcast_id = dlcp_rt_coll_reserve_id(c);
  }
  return 0;
}

int dlcp_rt_ina_start(dlcp_comm *c, const void *sendbuf, void *recvbuf,
                      uint64_t count, dlcp_dtype dtype, dlcp_redop redop,
                      bool ra, dlcp_request **preq) {
  dlcp_request *req = dlcp_zalloc(sizeof(*req));
  dlcp_rt_ina_op *iop = dlcp_zalloc(sizeof(*iop));
  dlcp_coll_info *info;
  dlcp_rt_ina *s;
  dlcp_algo algo = ra ? DLCP_ALGO_RA_INA : DLCP_ALGO_INA;

  if (req == NULL || iop == NULL) {
    free(req);
    free(iop);
    return DLCP_ERR_NOMEM;
  }
  req->comm = c;
  req->started_ns = dlcp_rt_now();
  info = &req->info;
  info->algo = algo;
  info->algo_name = dlcp_algo_name(algo);
  info->delivered_fraction = 1.0;
  *preq = req;
  iop->req = req;
  iop->ra = ra;
  iop->p.dtype = dtype;
  iop->p.op = redop;
  iop->p.sendbuf = sendbuf != NULL ? sendbuf : recvbuf;
  iop->p.recvbuf = recvbuf;
  iop->p.count = count;
  if ((dtype != DLCP_FLOAT32 && dtype != DLCP_INT32) ||
      (redop != DLCP_SUM && redop != DLCP_AVG) ||
      dlcp_comm_size(c) > DLCP_AGG_MAX_WORLD ||
      (count > 0 && recvbuf == NULL)) {
    free(iop);
    (void)fail_info(info, DLCP_ERR_INVALID_ARGUMENT,
                    "INA: the switch sums FLOAT32 or INT32 (SUM, AVG) for "
                    "at most 64 ranks");
    req->done = true;
    return 0;
  }
  pthread_mutex_lock(&c->mu);
  s = *dlcp_rt_coll_ina(c);
  if (c->closing || c->lost_status != 0) {
    (void)fail_info(info, c->closing ? DLCP_ERR_CANCELED : c->lost_status,
                    "INA: %.200s",
                    c->closing ? "the communicator is closing"
                               : c->lost_reason);
  } else if (s == NULL && setup(c, info) == 0) {
    s = *dlcp_rt_coll_ina(c);
  }
  if (s != NULL && info->status == 0 && ra && s->chain_len > 0) {
    /* A ring verdict means nothing to the switches up the chain. */
    (void)fail_info(info, DLCP_ERR_CONFIG,
                    "INA: RA-INA does not run over a chain or trees of "
                    "switches (%s); use the ina algorithm",
                    s->trees ? "DLCP_INA_LEAVES" : "DLCP_INA_CHAIN");
  }
  if (s == NULL || info->status != 0) {
    free(iop);
    req->done = true;
    pthread_mutex_unlock(&c->mu);
    return 0;
  }
  /* In the list before its collectives start, so that whatever fails
   * them finds it. */
  {
    dlcp_rt_ina_op **pp = &s->ops;

    while (*pp) {
      pp = &(*pp)->next;
    }
    *pp = iop;
  }
  req->ina = iop;
  if (op_begin(c, s, iop, info) != 0) {
    finish(c, s, iop, dlcp_rt_now());
  } else {
    dlcp_rt_service(c);
  }
  pthread_mutex_unlock(&c->mu);
  return 0;
}

/* --- progress --------------------------------------------------------- */

/* CINA: |p|'s rank and world at this rank's switch, the scaling for the
 * whole world and the switch's place at the next one, from every rank's
 * place; for trees, the switch's place at their roots (its index among
 * the leaves with masters) and a window per tree.  Returns 0 or fails
 * with a message in |err|. */
static int chain_params(dlcp_comm *c, dlcp_rt_ina *s,
                        dlcp_ina_params *p, char *err, size_t errlen) {
  uint32_t n[DLCP_AGG_MAX_WORLD] = {0};
  uint32_t me = dlcp_comm_rank(c), local = 0;
  if (s->master == NULL && host_groups(c, s) != 0) {
    dlcp_fmt(err, errlen, "out of memory");
    return DLCP_ERR_NOMEM;
  }
  for (uint32_t r = 0; r < c->env.world_size; r++) {
    uint32_t pos = (uint32_t)s->places[r] - 1u;
    if (pos >= s->chain_len) {
      dlcp_fmt(err, errlen, "rank %u names no switch of the chain (its "
               "DLCP_INA_CHAIN differs)", r);
      return DLCP_ERR_CONFIG;
    }
    if (s->master[r]) {
      local += r < me && pos == s->chain_pos;
      n[pos]++;
    }
  }
  uint32_t leaves = 0, leaf = 0; /* trees: leaves with masters, this one */
  for (uint32_t q = 0; q < s->chain_len; q++) {
    leaf += q < s->chain_pos && n[q] > 0;
    leaves += n[q] > 0;
    if (s->trees > 0 && n[q] <= DLCP_AGG_MAX_WORLD) {
      continue; /* a leaf may have none of the job's ranks */
    }
    if (n[q] == 0 || n[q] + (q > 0) > DLCP_AGG_MAX_WORLD) {
      dlcp_fmt(err, errlen, "switch %u of the %s has %u %s of this "
               "job: expected %u to %u", q, s->trees ? "leaves" : "chain",
               n[q], s->host_reduce ? "hosts" : "ranks", s->trees ? 0u : 1u,
               DLCP_AGG_MAX_WORLD - (s->trees ? 0u : 1u));
      return DLCP_ERR_CONFIG;
    }
  }
  p->rank = local;
  p->scale_world = c->env.world_size;
  if (s->trees > 0) {
    p->world = n[s->chain_pos];
    /* A job within one rack has its sum at its leaf: no trees. */
    p->chain_place = leaves > 1 ? DLCP_AGG_CHAIN_PLACE(leaf, leaves) : 0;
    p->cc_trees = s->trees;
    return 0;
  }
  p->world = n[s->chain_pos] + (s->chain_pos > 0);
  p->chain_place = s->chain_pos + 1u < s->chain_len
                       ? DLCP_AGG_CHAIN_PLACE(n[s->chain_pos + 1u],
                                              n[s->chain_pos + 1u] + 1u)
                       : 0;
  return 0;
}

/* Starts the collective of |iop| among the ranks of this host at its
 * switch: the REDUCE of the inputs to the master (the last of them, the
 * seed's pipelined chain) or the BROADCAST of the final sum from it. */
static int start_in_host(dlcp_comm *c, dlcp_rt_ina *s, dlcp_rt_ina_op *iop,
                         dlcp_coll_kind kind) {
  bool reduce = kind == DLCP_COLL_REDUCE;
  dlcp_coll_params cp;
  dlcp_coll_opts o;
  dlcp_coll_opts_default(&o);
  o.algo = DLCP_ALGO_RING;
  dlcp_rt_coll_params_for(c, &cp, kind,
                          reduce ? iop->p.sendbuf : iop->p.recvbuf,
                          iop->p.recvbuf, iop->p.count, iop->p.dtype,
                          DLCP_SUM, s->nhost - 1u, &o);
  cp.rank = s->host_index;
  cp.world = s->nhost;
  cp.members = s->host;
  cp.topo = NULL;
  cp.topo_levels = 0;
  cp.same_host = true;
  return dlcp_rt_coll_start_locked(c, &cp, &o,
                                   reduce ? iop->local_id : iop->bcast_id,
                                   &iop->local_req);
}

/* The switch's part: the host core with the agreed scale.  Returns true
 * (the operation is in SWITCH), or false if it failed and is gone. */
static bool switch_begin(dlcp_comm *c, dlcp_rt_ina *s, dlcp_rt_ina_op *iop,
                         dlcp_tstamp now) {
  iop->p.exps = iop->exps;
  int rv = dlcp_ina_new(&iop->h, &iop->p, NULL, now);
  iop->p.exps = NULL;
  if (rv != 0) {
    iop->h = NULL;
    fail_op(c, s, iop, rv, "INA: %s", dlcp_strerror(rv));
    return false;
  }
  iop->phase = PH_SWITCH;
  iop->last_progress = now;
  return true;
}

/* AGREE: the identity and the exponents.  Returns whether the operation
 * moved on to SWITCH (false: it waits, it moved on to LOCAL, setting
 * |*started|, or it failed and is gone). */
static bool agree(dlcp_comm *c, dlcp_rt_ina *s, dlcp_rt_ina_op *iop,
                  dlcp_tstamp now, bool *started) {
  int rv;

  if (s->id_status != 0) {
    fail_op(c, s, iop, s->id_status, "INA: agreeing on the job id: %.180s",
            s->id_error);
    return false;
  }
  if (!s->have_id || (iop->exp_req != NULL && !iop->exp_req->done)) {
    return false;
  }
  if (iop->exp_req != NULL) {
    rv = iop->exp_req->info.status;
    if (rv != 0) {
      fail_op(c, s, iop, rv, "INA: agreeing on the scale: %.180s",
              iop->exp_req->info.error);
      return false;
    }
    dlcp_rt_coll_drop(c, iop->exp_req);
    iop->exp_req = NULL;
    for (uint32_t g = 0; g < iop->ngroups; g++) {
      if (iop->exps[g] == INT32_MAX) {
        fail_op(c, s, iop, DLCP_ERR_INVALID_ARGUMENT,
                "INA: a rank's input has a non-finite value (INF or NaN)");
        return false;
      }
    }
  }
  iop->p.job = s->job;
  iop->p.token = s->token;
  if (s->chain_len > 0) {
    char err[160];
    rv = chain_params(c, s, &iop->p, err, sizeof(err));
    if (rv != 0) {
      fail_op(c, s, iop, rv, "INA: %s: %s",
              s->trees ? "DLCP_INA_LEAVES" : "DLCP_INA_CHAIN", err);
      return false;
    }
  }
  if (s->nhost > 1) {
    rv = start_in_host(c, s, iop, DLCP_COLL_REDUCE);
    if (rv != 0) {
      fail_op(c, s, iop, rv, "INA: the reduce to the host's master: %s",
              dlcp_strerror(rv));
      return false;
    }
    *started = true;
    if (s->host_index + 1 < s->nhost) {
      iop->phase = PH_LOCAL; /* then the broadcast from the master */
      return false;
    }
    /* The master: its host's sum goes to the switch group by group as
     * the chain delivers it (drive releases them), the seed's overlap. */
    iop->p.sendbuf = iop->p.recvbuf;
    iop->p.inputs = s->nhost;
    iop->p.ready_groups = 0;
  }
  return switch_begin(c, s, iop, now);
}

/* The reduce to the host's master: whether it ended, failing |iop| if it
 * failed (false then, and |iop| is gone). */
static bool reduced(dlcp_comm *c, dlcp_rt_ina *s, dlcp_rt_ina_op *iop,
                    bool *failed) {
  int rv = iop->local_req->info.status;
  *failed = false;
  if (!iop->local_req->done) {
    return false;
  }
  if (rv != 0) {
    fail_op(c, s, iop, rv, "INA: the reduce to the host's master: %.180s",
            iop->local_req->info.error);
    *failed = true;
    return false;
  }
  dlcp_rt_coll_drop(c, iop->local_req);
  iop->local_req = NULL;
  return true;
}

/* LOCAL (a rank of a host but its master): its part of the host's sum is
 * on its way; then it waits for the broadcast of the final sum. */
static void local_done(dlcp_comm *c, dlcp_rt_ina *s, dlcp_rt_ina_op *iop,
                       bool *started) {
  bool failed;
  if (!reduced(c, s, iop, &failed)) {
    return;
  }
  int rv = start_in_host(c, s, iop, DLCP_COLL_BROADCAST);
  if (rv != 0) {
    fail_op(c, s, iop, rv, "INA: the broadcast from the host's master: %s",
            dlcp_strerror(rv));
    return;
  }
  iop->phase = PH_BCAST;
  *started = true;
}

/* BCAST: the final sum from the host's master. */
static void bcast_done(dlcp_comm *c, dlcp_rt_ina *s, dlcp_rt_ina_op *iop,
                       dlcp_tstamp now) {
  int rv = iop->local_req->info.status;
  if (!iop->local_req->done) {
    return;
  }
  if (rv != 0) {
    fail_op(c, s, iop, rv, "INA: the broadcast from the host's master: "
            "%.180s", iop->local_req->info.error);
    return;
  }
  finish(c, s, iop, now);
}

/* SWITCH: sends what the core has to send and looks at how it stands.
 * Returns whether it started the ring part. */
static bool drive(dlcp_comm *c, dlcp_rt_ina *s, dlcp_rt_ina_op *iop,
                  const uint32_t *low, dlcp_tstamp now, dlcp_tstamp *next) {
  dlcp_ina_action act;
  dlcp_ina_result r;
  dlcp_tstamp d;
  uint32_t timeout_ms = c->env.timeout_ms;

  if (low != NULL) {
    dlcp_ina_cap_low(iop->h, *low);
  }
  if (iop->local_req != NULL) {
    /* A master: release the groups the host's chain has summed.  The
     * chain has its own stall detection; the switch is not late for
     * groups not yet sent. */
    uint64_t elems = dlcp_rt_coll_final_prefix(iop->local_req);
    bool failed;
    if (reduced(c, s, iop, &failed)) {
      elems = UINT64_MAX;
    } else if (failed) {
      return false;
    }
    uint64_t ge = (uint64_t)iop->p.block_elems * iop->p.group_blocks;
    uint64_t g = elems >= iop->p.count ? iop->ngroups : elems / ge;
    dlcp_ina_release(iop->h, (uint32_t)g);
    iop->last_progress = now;
  }
  struct iovec out[INA_SEND_BATCH];
  uint32_t nout = 0;
  for (;;) {
    uint8_t *slot = s->buf + (size_t)nout * DLCP_AGG_DGRAM_MAX;
    (void)dlcp_ina_poll(iop->h, &act, slot, DLCP_AGG_DGRAM_MAX, now);
    if (act.type != DLCP_INA_ACT_SEND) {
      break;
    }
    out[nout].iov_base = slot;
    out[nout].iov_len = act.len;
    if (++nout == INA_SEND_BATCH) {
      send_batch(s, out, nout);
      nout = 0;
    }
  }
  send_batch(s, out, nout);
  dlcp_ina_get_result(iop->h, &r);
  if (r.status == DLCP_ERR_TIMEOUT) {
    fail_op(c, s, iop, r.status,
            "INA: the aggregation switch %s stopped answering", s->name);
    return false;
  }
  if (r.status == DLCP_ERR_CONFIG && r.switch_pool > 0) {
    fail_op(c, s, iop, r.status,
            "INA: the aggregation switch %s has %u aggregators for this "
            "job, but a group of plain INA needs %u side by side (%u B of "
            "gradient a datagram): give it more memory (dlcp-switch --mem "
            "is split among its threads) or use ra_ina",
            s->name, r.switch_pool, iop->p.group_blocks,
            iop->p.group_blocks * iop->p.block_elems * 4u);
    return false;
  }
  if (r.status == DLCP_ERR_PEER_ABORTED && r.missing != 0) {
    char who[200];
    name_ranks(c, s, r.missing, who, sizeof(who));
    fail_op(c, s, iop, r.status,
            "INA: the aggregation switch %s dropped group %u while it "
            "waited for the contribution of %s", s->name, r.waiting_group,
            who);
    return false;
  }
  if (r.status != 0) {
    fail_op(c, s, iop, r.status, "INA: the switch %s: %s", s->name,
            dlcp_strerror(r.status));
    return false;
  }
  if (act.type == DLCP_INA_ACT_DONE) {
    uint64_t n = iop->ra ? dlcp_ina_ring_elems(iop->h) : 0;
    dlcp_coll_params cp;
    dlcp_coll_opts o;
    int rv;

    if (n == 0 && s->nhost > 1) {
      int rv2 = start_in_host(c, s, iop, DLCP_COLL_BROADCAST);
      if (rv2 != 0) {
        fail_op(c, s, iop, rv2, "INA: the broadcast from the host's "
                "master: %s", dlcp_strerror(rv2));
        return false;
      }
      iop->phase = PH_BCAST;
      return true;
    }
    if (n == 0) {
      finish(c, s, iop, now);
      return false;
    }
    iop->ring = malloc(4 * n);
    if (iop->ring == NULL) {
      fail_op(c, s, iop, DLCP_ERR_NOMEM, "INA: out of memory");
      return false;
    }
    dlcp_ina_ring_pack(iop->h, iop->ring);
    dlcp_coll_opts_default(&o);
    o.algo = DLCP_ALGO_RING;
    dlcp_rt_coll_params_for(c, &cp, DLCP_COLL_ALLREDUCE, iop->ring, iop->ring,
                            n, iop->p.dtype, DLCP_SUM, 0, &o);
    rv = dlcp_rt_coll_start_locked(c, &cp, &o, iop->ring_id, &iop->ring_req);
    if (rv != 0) {
      fail_op(c, s, iop, rv, "INA: the ring part of RA-INA: %s",
              dlcp_strerror(rv));
      return false;
    }
    iop->phase = PH_RING;
    return true;
  }
  if (r.results + r.ring_groups + r.busy != iop->answers) {
    iop->answers = r.results + r.ring_groups + r.busy;
    iop->last_progress = now;
  } else if (timeout_ms > 0 &&
             now - iop->last_progress > (dlcp_tstamp)timeout_ms * 1000000u) {
    char why[400];
    if (r.missing != 0) {
      char who[200];
      name_ranks(c, s, r.missing, who, sizeof(who));
      dlcp_fmt(why, sizeof(why),
               "INA: no result from the aggregation switch %s within %u ms: "
               "its group %u still lacks the contribution of %s",
               s->name, timeout_ms, r.waiting_group, who);
    } else if (r.waiting_above) {
      char above[80];
      if (s->trees > 0) {
        dlcp_fmt(above, sizeof(above), "the root of tree %u (its --parent "
                 "number %u)", r.waiting_group % s->trees,
                 r.waiting_group % s->trees + 1u);
      } else {
        dlcp_fmt(above, sizeof(above), "its --parent");
      }
      dlcp_fmt(why, sizeof(why),
               "INA: no result from the aggregation switch %s within %u ms: "
               "its group %u has every contribution and waits on the switch "
               "above it, %s", s->name, timeout_ms, r.waiting_group, above);
    } else {
      dlcp_fmt(why, sizeof(why),
               "INA: no answer from the aggregation switch %s", s->name);
    }
    dlcp_rt_coll_dump(c, why, now); /* while the operation still waits */
    fail_op(c, s, iop, DLCP_ERR_TIMEOUT, "%s", why);
    return false;
  }
  d = dlcp_ina_next_deadline(iop->h);
  if (timeout_ms > 0 &&
      iop->last_progress + (dlcp_tstamp)timeout_ms * 1000000u + 1u < d) {
    d = iop->last_progress + (dlcp_tstamp)timeout_ms * 1000000u + 1u;
  }
  if (d < *next) {
    *next = d;
  }
  return false;
}

/* RING: the ring part's outcome. */
static void ring_done(dlcp_comm *c, dlcp_rt_ina *s, dlcp_rt_ina_op *iop,
                      dlcp_tstamp now) {
  int rv;

  if (!iop->ring_req->done) {
    return;
  }
  rv = iop->ring_req->info.status;
  if (rv != 0) {
    fail_op(c, s, iop, rv, "INA: the ring part of RA-INA: %.180s",
            iop->ring_req->info.error);
    return;
  }
  dlcp_ina_ring_unpack(iop->h, iop->ring);
  finish(c, s, iop, now);
}

bool dlcp_rt_ina_service(dlcp_comm *c, dlcp_tstamp now, dlcp_tstamp *next) {
  dlcp_rt_ina *s = *dlcp_rt_coll_ina(c);
  bool started = false;
  uint32_t low_buf;
  const uint32_t *low;

  if (s == NULL) {
    return false;
  }
  if (s->places_req != NULL && s->places_req->done) {
    if (s->places_req->info.status != 0) {
      s->id_status = s->places_req->info.status;
      dlcp_copy_str(s->id_error, sizeof(s->id_error),
                    s->places_req->info.error);
    }
    dlcp_rt_coll_drop(c, s->places_req);
    s->places_req = NULL;
  }
  if (s->id_req != NULL && s->id_req->done && s->places_req == NULL) {
    if (s->id_req->info.status == 0) {
      s->job = s->id[0];
      s->token = (uint64_t)s->id[1] | (uint64_t)s->id[2] << 32;
      s->have_id = true;
    } else {
      s->id_status = s->id_req->info.status;
      dlcp_copy_str(s->id_error, sizeof(s->id_error), s->id_req->info.error);
    }
    dlcp_rt_coll_drop(c, s->id_req);
    s->id_req = NULL;
  }
  /* Taken before any operation moves on: a mark no higher than the true
   * one is always safe to announce. */
  low = job_low(s, &low_buf);
  for (dlcp_rt_ina_op *iop = s->ops, *following; iop; iop = following) {
    following = iop->next;
    if (iop->phase == PH_AGREE && !agree(c, s, iop, now, &started)) {
      continue;
    }
    if (iop->phase == PH_LOCAL) {
      local_done(c, s, iop, &started);
    } else if (iop->phase == PH_SWITCH) {
      started |= drive(c, s, iop, low, now, next);
    } else if (iop->phase == PH_RING) {
      ring_done(c, s, iop, now);
    } else if (iop->phase == PH_BCAST) {
      bcast_done(c, s, iop, now);
    }
  }
  return started;
}
