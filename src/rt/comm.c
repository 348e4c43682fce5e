/*
 * The communicator: the runtime driver of the MLT core.
 *
 * Model.  One dlcp_mlt_conn per peer, all owned by one event-loop thread.
 * The loop reads the clock once per wake-up, feeds datagrams (K UDP
 * sockets) and framed control messages (one TCP connection per peer) into
 * the connections, and then "services" every connection: it polls until
 * the core has nothing to do now, turning actions into batched datagrams,
 * buffered control writes and completions, and finally sleeps until the
 * earliest deadline (pacing, probe and stall timers, held fault packets).
 *
 * Application threads never touch a connection: dlcp_post_* append to a
 * submission list and wake the loop through an eventfd; completions come
 * back through completion queues.  The loop thread holds |mu| while it
 * works on the shared state so dlcp_comm_get_stats can read a consistent
 * picture.
 *
 * Joining: rank 0's rendezvous store exchanges every rank's addresses
 * ("ip tcp_port k udp_port..." as text); then each rank connects to the
 * ranks below it and accepts the ranks above it, each connection opening
 * with a 16-byte hello (magic, version, job, rank) that is checked.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <sched.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "dlcp/dlcp.h"
#include "proto/mlt.h"
#include "proto/mlt_tune.h"
#include "rt/clock.h"
#include "rt/comm_drive.h"
#include "rt/comm_internal.h"
#include "rt/cq.h"
#include "rt/env.h"
#include "rt/errbuf.h"
#include "rt/fault.h"
#include "rt/loop.h"
#include "rt/net.h"
#include "rt/rendezvous.h"
#include "rt/udp.h"
#include "wire/rdzv_wire.h"
#include "wire/wire.h"



/* --- helpers ------------------------------------------------------------ */


static void errcopy(char *err, size_t errlen, const dlcp_errbuf *eb) {
  if (err && errlen > 0) {
    snprintf(err, errlen, "%s",
             eb->msg[0] ? eb->msg : dlcp_strerror(eb->code));
  }
}

/* The address this host uses to reach |host|: connect a UDP socket (no
 * packet is sent) and read its local name. */
static int local_ip_towards(const char *host, char *out, size_t outlen,
                            dlcp_errbuf *eb) {
  dlcp_net_addr a;
  int rv = dlcp_net_resolve(&a, host, 9, SOCK_DGRAM, eb);
  if (rv != 0) {
    return rv;
  }
  if (a.ss.ss_family != AF_INET) {
    return dlcp_errbuf_set(eb, DLCP_ERR_CONFIG,
                           "MASTER_ADDR '%s': expected an IPv4 host", host);
  }
  int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in sin;
  socklen_t len = sizeof(sin);
  if (fd < 0 || connect(fd, (struct sockaddr *)&a.ss, a.len) != 0 ||
      getsockname(fd, (struct sockaddr *)&sin, &len) != 0) {
    int e = errno;
    if (fd >= 0) {
      close(fd);
    }
    return dlcp_errbuf_set(eb, -e, "no route to %s: %s", host, strerror(e));
  }
  close(fd);
  inet_ntop(AF_INET, &sin.sin_addr, out, (socklen_t)outlen);
  return 0;
}

/* Payload bytes per datagram towards |to|: the path MTU less the IPv4,
 * UDP and MLT headers, clamped to what the wire format allows. */
static uint32_t segment_for(const struct sockaddr_in *to) {
  int mtu = 1500;
  int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd >= 0) {
    socklen_t len = sizeof(mtu);
    if (connect(fd, (const struct sockaddr *)to, sizeof(*to)) != 0 ||
        getsockopt(fd, IPPROTO_IP, IP_MTU, &mtu, &len) != 0) {
      mtu = 1500;
    }
    close(fd);
  }
  long seg = (long)mtu - 20 - 8 - (long)DLCP_WIRE_DATA_HDR_LEN;
  if (seg > (long)DLCP_WIRE_MAX_SEG) {
    seg = DLCP_WIRE_MAX_SEG;
  }
  if (seg < (long)DLCP_WIRE_MIN_SEG) {
    seg = DLCP_WIRE_MIN_SEG;
  }
  return (uint32_t)seg;
}

/* --- completions -------------------------------------------------------- */

static void deliver_completion(dlcp_comm *c, peer *p, op *o,
                               const dlcp_mlt_completion *mc, int status) {
  dlcp_completion out;
  memset(&out, 0, sizeof(out));
  out.user_data = o->user_data;
  out.status = status;
  out.peer = o->peer;
  out.is_send = o->kind == OP_SEND;
  out.tensor = o->t.id;
  out.bytes = o->t.bytes;
  dlcp_range *missing = NULL;
  if (mc) {
    out.delivered_bytes = mc->delivered_bytes;
    out.delivered_fraction = mc->delivered_fraction;
    out.packets = mc->packets;
    out.retransmissions = mc->retransmissions;
    c->stats.retransmissions += mc->retransmissions;
    if (mc->nmissing > 0) {
      missing = malloc(mc->nmissing * sizeof(*missing));
      if (missing) {
        for (size_t i = 0; i < mc->nmissing; i++) {
          missing[i].offset = mc->missing[i].offset;
          missing[i].len = mc->missing[i].len;
        }
        out.nmissing = mc->nmissing;
      }
    }
  }
  out.elapsed_ns = dlcp_rt_now() - o->posted_ns;
  if (status != 0) {
    const char *why = p->dead_status != 0 ? p->dead_reason
                                          : dlcp_strerror(status);
    if (status == DLCP_ERR_TIMEOUT || status == DLCP_ERR_NO_PROGRESS) {
      why = status == DLCP_ERR_TIMEOUT ? "no progress within the timeout"
                                       : "retransmission rounds made no "
                                         "progress";
    }
    dlcp_fmt(out.error, sizeof(out.error),
             "%s: %s; outstanding: %s of tensor %u (%llu bytes)", p->name,
             why, o->kind == OP_SEND ? "send" : "recv", o->t.id,
             (unsigned long long)o->t.bytes);
  }
  dlcp_cq_push(o->cq, &out, missing);
  free(o);
}

/* A transfer is over: the application's go to its queue, a collective's
 * back to the collective. */
static void complete_op(dlcp_comm *c, peer *p, op *o,
                        const dlcp_mlt_completion *mc, int status,
                        dlcp_tstamp now) {
  if (o->coll) {
    dlcp_rt_coll_transfer_done(c, o, mc, status, now);
  } else if (o->cq) {
    deliver_completion(c, p, o, mc, status);
  } else {
    free(o); /* withdrawn by a finished collective */
  }
}

/* --- datagrams ---------------------------------------------------------- */

/* One datagram towards |p|: into its shared-memory ring when it is on
 * this host, else into the UDP batch (|payload| then lives until the
 * flush). */
static void emit(dlcp_comm *c, peer *p, uint32_t path,
                 const struct sockaddr_in *to, const uint8_t *hdr,
                 size_t hdr_len, const void *payload, size_t payload_len,
                 int tos) {
  if (p->shm.hdr) {
    if (dlcp_shm_put(&p->shm, DLCP_SHM_DATAGRAM, hdr, hdr_len, payload,
                     payload_len)) {
      c->stats.shm_sent++;
    } else {
      c->stats.shm_full++; /* a full ring drops like a full socket */
    }
    return;
  }
  dlcp_udp_queue(&c->udp, path, to, hdr, hdr_len, payload, payload_len, tos);
}

/* Sends what is queued, and wakes the peers on this host that went to
 * sleep before seeing what was written into their rings: a zero-length
 * datagram to their first socket. */
static void flush_datagrams(dlcp_comm *c) {
  for (uint32_t r = 0; c->shm_in.hdr && r < c->env.world_size; r++) {
    peer *p = &c->peers[r];
    if (p->shm.hdr && dlcp_shm_needs_doorbell(&p->shm)) {
      c->stats.doorbells++;
      dlcp_udp_queue(&c->udp, 0, &p->udp[0], c->scratch, 0, NULL, 0, 0);
    }
  }
  dlcp_udp_flush(&c->udp);
}

static void send_datagram(dlcp_comm *c, peer *p, const dlcp_mlt_action *a,
                          dlcp_tstamp now) {
  uint32_t path = a->path % c->udp.k;
  const struct sockaddr_in *to = &p->udp[path % p->udp_k];
  int tos = dlcp_udp_tos(a->priority, a->ect);
  dlcp_duration hold = 0;
  dlcp_fault_verdict v = dlcp_fault_decide(&c->fault, &hold);
  c->stats.datagrams_sent++;
  switch (v) {
  case DLCP_FAULT_DROP:
    c->stats.fault_dropped++;
    return;
  case DLCP_FAULT_DUP:
    c->stats.fault_duplicated++;
    emit(c, p, path, to, c->scratch, a->len, a->payload, a->payload_len, tos);
    break;
  case DLCP_FAULT_HOLD: {
    /* A held packet outlives this call, and maybe the transfer: copy. */
    held *h = malloc(sizeof(*h) + a->len + a->payload_len);
    if (!h) {
      return;
    }
    c->stats.fault_delayed++;
    h->release_ns = now + hold;
    h->peer_rank = p->rank;
    h->path = path;
    h->to = *to;
    h->hdr_len = a->len;
    h->payload_len = a->payload_len;
    h->tos = tos;
    memcpy(h->bytes, c->scratch, a->len);
    if (a->payload_len) {
      memcpy(h->bytes + a->len, a->payload, a->payload_len);
    }
    held **pp = &c->held_head;
    while (*pp && (*pp)->release_ns <= h->release_ns) {
      pp = &(*pp)->next;
    }
    h->next = *pp;
    *pp = h;
    return;
  }
  case DLCP_FAULT_PASS:
  default:
    break;
  }
  emit(c, p, path, to, c->scratch, a->len, a->payload, a->payload_len, tos);
}

static void release_held(dlcp_comm *c, dlcp_tstamp now) {
  while (c->held_head && c->held_head->release_ns <= now) {
    held *h = c->held_head;
    c->held_head = h->next;
    emit(c, &c->peers[h->peer_rank], h->path, &h->to, h->bytes, h->hdr_len,
         h->bytes + h->hdr_len, h->payload_len, h->tos);
    /* The payload pointer must live until the flush: flush now. */
    flush_datagrams(c);
    free(h);
  }
}

static peer *peer_by_addr(dlcp_comm *c, const struct sockaddr_in *from) {
  for (uint32_t r = 0; r < c->env.world_size; r++) {
    peer *p = &c->peers[r];
    if (r == c->env.rank) {
      continue;
    }
    for (uint32_t k = 0; k < p->udp_k; k++) {
      if (p->udp[k].sin_port == from->sin_port &&
          p->udp[k].sin_addr.s_addr == from->sin_addr.s_addr) {
        return p;
      }
    }
  }
  return NULL;
}

static bool drain_rings(dlcp_comm *c);
static bool reserve_control(dlcp_comm *c, peer *p, size_t more,
                            dlcp_tstamp now);
static void parse_control(dlcp_comm *c, peer *p, dlcp_tstamp now);

/* --- control channel ---------------------------------------------------- */

static void peer_fail(dlcp_comm *c, peer *p, int status, const char *reason,
                      dlcp_tstamp now);

static void read_control(dlcp_comm *c, peer *p, bool to_the_end,
                         dlcp_tstamp now);

static int flush_control(dlcp_comm *c, peer *p, dlcp_tstamp now) {
  /* A peer on this host gets the whole stream through its ring, in
   * slot-sized pieces; a full ring keeps the rest for the next service
   * pass (which comes back soon: see dlcp_rt_service). */
  while (p->shm.hdr && p->woff < p->wlen) {
    size_t piece = p->wlen - p->woff;
    if (piece > DLCP_SHM_SLOT_DATA) {
      piece = DLCP_SHM_SLOT_DATA;
    }
    if (!dlcp_shm_put(&p->shm, DLCP_SHM_CONTROL, p->wbuf + p->woff, piece,
                      NULL, 0)) {
      return 0;
    }
    p->woff += piece;
  }
  while (p->woff < p->wlen) {
    ssize_t n = send(p->tcp_fd, p->wbuf + p->woff, p->wlen - p->woff,
                     MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      if (errno == EAGAIN) {
        if (!p->want_write) {
          p->want_write = true;
          dlcp_loop_mod_fd(c->loop, p->tcp_fd,
                           DLCP_LOOP_READ | DLCP_LOOP_WRITE);
        }
        return 0;
      }
      /* The peer is gone; what it sent before going (a NOTE naming the
       * rank that failed first) still waits in our receive buffer. */
      char why[128];
      snprintf(why, sizeof(why), "control connection failed: %s",
               strerror(errno));
      read_control(c, p, true, now);
      peer_fail(c, p, DLCP_ERR_PEER_CLOSED, why, now);
      return -1;
    }
    p->woff += (size_t)n;
  }
  p->woff = p->wlen = 0;
  if (p->want_write) {
    p->want_write = false;
    dlcp_loop_mod_fd(c->loop, p->tcp_fd, DLCP_LOOP_READ);
  }
  return 0;
}

void dlcp_rt_queue_control(dlcp_comm *c, peer *p, const uint8_t *msg,
                           size_t len, dlcp_tstamp now) {
  if (p->dead_status != 0) {
    return;
  }
  if (p->wlen + len > p->wcap) {
    size_t cap = p->wcap ? p->wcap : 65536;
    while (cap < p->wlen + len) {
      cap *= 2;
    }
    uint8_t *b = realloc(p->wbuf, cap);
    if (!b) {
      peer_fail(c, p, DLCP_ERR_NOMEM, "out of memory queueing control", now);
      return;
    }
    p->wbuf = b;
    p->wcap = cap;
  }
  memcpy(p->wbuf + p->wlen, msg, len);
  p->wlen += len;
}

static void peer_fail(dlcp_comm *c, peer *p, int status, const char *reason,
                      dlcp_tstamp now) {
  if (p->dead_status != 0) {
    return;
  }
  p->dead_status = status;
  dlcp_fmt(p->dead_reason, sizeof(p->dead_reason), "%s", reason);
  if (p->tcp_fd >= 0) {
    dlcp_loop_del_fd(c->loop, p->tcp_fd);
    close(p->tcp_fd);
    p->tcp_fd = -1;
  }
  p->wlen = p->woff = 0;
  dlcp_mlt_abort(p->conn, status, now);
  dlcp_rt_coll_peer_lost(c, p, now);
  /* Tell every other rank, so that their collectives, which may not
   * exchange anything with |p|, fail naming |p| and not this rank, whose
   * own connections may close next. */
  uint8_t msg[DLCP_WIRE_NOTE_LEN];
  dlcp_wire_note n = {.job = c->env.job, .op = DLCP_RT_NOTE_PEER_LOST,
                      .value = p->rank};
  if (dlcp_wire_note_encode(msg, sizeof(msg), &n) > 0) {
    for (uint32_t r = 0; r < c->env.world_size; r++) {
      peer *q = &c->peers[r];
      if (r != c->env.rank && q->dead_status == 0) {
        dlcp_rt_queue_control(c, q, msg, sizeof(msg), now);
      }
    }
  }
}

/* --- the service pass --------------------------------------------------- */

static void service_peer(dlcp_comm *c, peer *p, dlcp_tstamp now) {
  for (;;) {
    dlcp_mlt_action a;
    if (dlcp_mlt_poll(p->conn, &a, c->scratch, SCRATCH_LEN, now) != 0) {
      break;
    }
    switch (a.type) {
    case DLCP_MLT_ACT_NONE:
      goto polled;
    case DLCP_MLT_ACT_DATAGRAM:
      if (p->dead_status == 0) {
        send_datagram(c, p, &a, now);
      }
      break;
    case DLCP_MLT_ACT_CONTROL:
      dlcp_rt_queue_control(c, p, c->scratch, a.len, now);
      break;
    case DLCP_MLT_ACT_COMPLETE: {
      op *o = (op *)(uintptr_t)a.completion.user_data;
      int status = a.completion.status;
      if (status != 0 && p->dead_status != 0) {
        status = p->dead_status;
      }
      complete_op(c, p, o, &a.completion, status, now);
      break;
    }
    default:
      break;
    }
  }
polled:
  if (p->wlen > p->woff) {
    flush_control(c, p, now);
  }
}

static void maybe_pause(dlcp_comm *c, dlcp_tstamp now) {
  const dlcp_rt_fault *f = &c->env.fault;
  if (c->paused_once || f->pause_for_ms == 0 ||
      now < c->started_ns + (dlcp_tstamp)f->pause_after_ms * 1000000u) {
    return;
  }
  /* A paused rank does nothing at all, like a stopped process. */
  c->paused_once = true;
  struct timespec ts = {.tv_sec = f->pause_for_ms / 1000,
                        .tv_nsec = (long)(f->pause_for_ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

/* The deadline lives in a timerfd, not in the loop's own timers, so any
 * thread holding |mu| may move it (a post from the application) and
 * whoever drives the loop sees it at once, without a wake-up. */
static void arm_deadline(dlcp_comm *c, dlcp_tstamp at) {
  if (at == c->armed_ns) {
    return;
  }
  struct itimerspec its;
  memset(&its, 0, sizeof(its));
  if (at != DLCP_TSTAMP_NEVER) {
    its.it_value.tv_sec = (time_t)(at / 1000000000u);
    its.it_value.tv_nsec = (long)(at % 1000000000u);
  }
  timerfd_settime(c->tfd, TFD_TIMER_ABSTIME, &its, NULL);
  c->armed_ns = at;
}

/* Control bytes that found a peer's ring full try again this soon: the
 * peer is draining it (it only fills while the peer is busy). */
#define SHM_CONTROL_RETRY_NS 20000u

void dlcp_rt_service(dlcp_comm *c) {
  dlcp_tstamp now = dlcp_rt_now();
  maybe_pause(c, now);
  release_held(c, now);
  dlcp_tstamp next = c->held_head ? c->held_head->release_ns
                                  : DLCP_TSTAMP_NEVER;
  if (drain_rings(c)) {
    next = now; /* more in the rings: come back at once */
  }
  /* Collectives turn finished transfers into new ones, which the
   * connections then have to send: repeat until both are quiet. */
  bool again;
  do {
    for (uint32_t r = 0; r < c->env.world_size; r++) {
      if (r != c->env.rank) {
        service_peer(c, &c->peers[r], now);
      }
    }
    again = dlcp_rt_coll_service(c, now, &next);
  } while (again);
  for (uint32_t r = 0; r < c->env.world_size; r++) {
    if (r != c->env.rank) {
      peer *p = &c->peers[r];
      dlcp_tstamp d = dlcp_mlt_next_deadline(p->conn);
      if (p->shm.hdr && p->wlen > p->woff) {
        d = now + SHM_CONTROL_RETRY_NS; /* its ring was full */
      }
      if (d < next) {
        next = d;
      }
    }
  }
  flush_datagrams(c);
  if (next != DLCP_TSTAMP_NEVER && next <= now) {
    next = now + 1000; /* never spin: the core has just been polled dry */
  }
  arm_deadline(c, next);
}

/* --- loop callbacks ----------------------------------------------------- */

void dlcp_rt_submit(dlcp_comm *c, op *o, dlcp_tstamp now) {
  peer *p = &c->peers[o->peer];
  if (p->dead_status != 0) {
    complete_op(c, p, o, NULL, p->dead_status, now);
    return;
  }
  int rv;
  if (o->kind == OP_SEND) {
    dlcp_mlt_send s = {
        .tensor = o->t.id,
        .buf = o->t.data,
        .len = o->t.bytes,
        .layer = o->opts.layer,
        .nlayers = o->opts.nlayers,
        .prio_fn = o->opts.prio_fn,
        .prio_user = o->opts.prio_user,
        .importance = o->opts.f32_importance
                          ? DLCP_MLT_IMPORTANCE_F32_MAGNITUDE
                          : DLCP_MLT_IMPORTANCE_ALL,
        .user_data = (uint64_t)(uintptr_t)o,
    };
    rv = dlcp_mlt_post_send(p->conn, &s, now);
  } else {
    dlcp_mlt_recv r = {.tensor = o->t.id,
                       .buf = o->t.data,
                       .len = o->t.bytes,
                       .loss_bound = o->loss_bound,
                       .user_data = (uint64_t)(uintptr_t)o};
    rv = dlcp_mlt_post_recv(p->conn, &r, now);
  }
  if (rv != 0) {
    complete_op(c, p, o, NULL, rv, now);
  }
}

static void on_wakeup(dlcp_loop *loop, int fd, uint32_t events, void *user) {
  (void)loop;
  (void)events;
  dlcp_comm *c = user;
  uint64_t v;
  while (read(fd, &v, sizeof(v)) < 0 && errno == EINTR) {
  }
  /* Posts happen on the application's threads; the wake-up only brings
   * the deadlines they moved into the loop's timer. */
  pthread_mutex_lock(&c->mu);
  dlcp_rt_service(c);
  pthread_mutex_unlock(&c->mu);
}

/* A datagram read whole goes to the connection of the peer it came from;
 * others' are counted and dropped. */
static void deliver_datagram(dlcp_comm *c, const struct sockaddr_in *from,
                             const uint8_t *d, size_t len, dlcp_tstamp now) {
  if (len == 0) {
    return; /* a doorbell: the service that follows reads the rings */
  }
  c->stats.datagrams_received++;
  peer *p = peer_by_addr(c, from);
  if (!p) {
    c->stats.dropped_foreign++;
    return;
  }
  dlcp_mlt_on_datagram(p->conn, d, len, now);
}

/* A datagram from |p|'s ring, where |p| may still write: the header is
 * copied before it is judged, DATA payloads go straight to the tensor,
 * anything else is decoded from a private copy. */
static void deliver_from_ring(dlcp_comm *c, peer *p, const uint8_t *d,
                              size_t len, dlcp_tstamp now) {
  c->stats.datagrams_received++;
  uint8_t hdr[DLCP_WIRE_DATA_HDR_LEN];
  if (len > sizeof(hdr)) {
    memcpy(hdr, d, sizeof(hdr));
    uint8_t *dest = dlcp_mlt_data_dest(p->conn, hdr, sizeof(hdr), len);
    if (dest) {
      memcpy(dest, d + sizeof(hdr), len - sizeof(hdr));
      dlcp_mlt_on_data_placed(p->conn, hdr, sizeof(hdr), len, now);
      return;
    }
  }
  memcpy(c->udp.rx, d, len);
  dlcp_mlt_on_datagram(p->conn, c->udp.rx, len, now);
}

/* Handles up to |max| slots of |p|'s ring, in order: datagrams, and
 * pieces of its control stream. */
static void drain_peer_ring(dlcp_comm *c, peer *p, uint32_t max,
                            dlcp_tstamp now) {
  for (uint32_t i = 0; c->shm_in.hdr && i < max && p->dead_status == 0;
       i++) {
    size_t len;
    dlcp_shm_kind kind;
    const uint8_t *d = dlcp_shm_peek(&c->shm_in, p->rank, &len, &kind);
    if (!d) {
      break;
    }
    if (kind == DLCP_SHM_DATAGRAM) {
      deliver_from_ring(c, p, d, len, now);
    } else if (reserve_control(c, p, len, now)) {
      memcpy(p->rbuf + p->rlen, d, len);
      p->rlen += len;
      parse_control(c, p, now);
    }
    dlcp_shm_release(&c->shm_in, p->rank);
  }
}

/* Reads every ring of the peers on this host.  Bounded: returns true if
 * slots are left for the next call. */
static bool drain_rings(dlcp_comm *c) {
  if (!c->shm_in.hdr) {
    return false;
  }
  /* The sleeping flag stays as it is: this may be a thread that does not
   * drive the loop (a collective's start, the loop thread's first pass)
   * while the driver sleeps in epoll and needs the doorbell. */
  for (int pass = 0; pass < 4; pass++) {
    dlcp_tstamp now = dlcp_rt_now();
    for (uint32_t r = 0; r < c->env.world_size; r++) {
      if (r != c->env.rank) {
        drain_peer_ring(c, &c->peers[r], DLCP_SHM_SLOTS, now);
      }
    }
    if (!dlcp_shm_pending(&c->shm_in)) {
      return false;
    }
  }
  return true;
}

/* Reads datagrams one by one, each DATA payload straight into the posted
 * tensor (MLT's data_dest), saving the copy out of a receive buffer: two
 * system calls a datagram instead of one per batch, which pays only when
 * datagrams are large (see rx_in_place).  Bounded like the batch path. */
static void receive_in_place(dlcp_comm *c, uint32_t path) {
  for (int i = 0; i < 16 * DLCP_UDP_BATCH; i++) {
    uint8_t hdr[DLCP_WIRE_DATA_HDR_LEN];
    struct sockaddr_in from;
    ssize_t peeked = dlcp_udp_peek(&c->udp, path, hdr, sizeof(hdr), &from);
    if (peeked < 0) {
      break;
    }
    size_t len = (size_t)peeked;
    dlcp_tstamp now = dlcp_rt_now();
    peer *p = peer_by_addr(c, &from);
    uint8_t *dest = p && len > sizeof(hdr)
                        ? dlcp_mlt_data_dest(p->conn, hdr, sizeof(hdr), len)
                        : NULL;
    if (dest) {
      c->stats.datagrams_received++;
      size_t got = dlcp_udp_take_split(&c->udp, path, hdr, sizeof(hdr), dest,
                                       len - sizeof(hdr));
      dlcp_mlt_on_data_placed(p->conn, hdr, sizeof(hdr), got, now);
      continue;
    }
    size_t got;
    const uint8_t *d = dlcp_udp_take(&c->udp, path, &got);
    deliver_datagram(c, &from, d, got, now);
  }
}

static void on_udp(dlcp_loop *loop, int fd, uint32_t events, void *user) {
  (void)loop;
  (void)events;
  dlcp_comm *c = user;
  uint32_t path = 0;
  while (path < c->udp.k && c->udp.fd[path] != fd) {
    path++;
  }
  pthread_mutex_lock(&c->mu);
  if (c->rx_in_place) {
    receive_in_place(c, path);
    dlcp_rt_service(c);
    pthread_mutex_unlock(&c->mu);
    return;
  }
  /* Bounded: a flood on one socket must not starve timers and the other
   * sockets; epoll reports the rest again. */
  for (int batch = 0; batch < 16; batch++) {
    int n = dlcp_udp_recv(&c->udp, path);
    if (n == 0) {
      break;
    }
    dlcp_tstamp now = dlcp_rt_now();
    for (int i = 0; i < n; i++) {
      size_t len;
      const struct sockaddr_in *from;
      const uint8_t *d = dlcp_udp_rx_data(&c->udp, i, &len, &from);
      deliver_datagram(c, from, d, len, now);
    }
    if (n < DLCP_UDP_BATCH) {
      break;
    }
  }
  dlcp_rt_service(c);
  pthread_mutex_unlock(&c->mu);
}

/* Makes room for at least |more| bytes after what |p|'s control buffer
 * holds; false (and |p| failed) when memory is short. */
static bool reserve_control(dlcp_comm *c, peer *p, size_t more,
                            dlcp_tstamp now) {
  if (p->rcap - p->rlen >= more) {
    return true;
  }
  size_t cap = p->rcap ? p->rcap * 2 : 131072;
  while (cap - p->rlen < more) {
    cap *= 2;
  }
  uint8_t *b = realloc(p->rbuf, cap);
  if (!b) {
    peer_fail(c, p, DLCP_ERR_NOMEM, "out of memory reading control", now);
    return false;
  }
  p->rbuf = b;
  p->rcap = cap;
  return true;
}

/* Handles every whole control message |p|'s buffer holds, keeping a
 * partial one for later. */
static void parse_control(dlcp_comm *c, peer *p, dlcp_tstamp now) {
  size_t off = 0;
  while (p->rlen - off >= DLCP_WIRE_PREAMBLE_LEN) {
    dlcp_wire_preamble pre;
    int rv = dlcp_wire_peek(&pre, p->rbuf + off, p->rlen - off);
    if (rv != 0 || pre.type < DLCP_WIRE_START) {
      /* A byte stream that stops parsing cannot be resynchronised. */
      char why[128];
      snprintf(why, sizeof(why), "sent a malformed control message (%s)",
               dlcp_strerror(rv != 0 ? rv : DLCP_ERR_BAD_TYPE));
      peer_fail(c, p, DLCP_ERR_PEER_ABORTED, why, now);
      return;
    }
    if (p->rlen - off < pre.len) {
      break;
    }
    if (pre.type == DLCP_WIRE_NOTE) {
      dlcp_rt_coll_note(c, p, p->rbuf + off, pre.len, now);
    } else {
      dlcp_mlt_on_control(p->conn, p->rbuf + off, pre.len, now);
    }
    off += pre.len;
    if (p->dead_status != 0) {
      return;
    }
  }
  memmove(p->rbuf, p->rbuf + off, p->rlen - off);
  p->rlen -= off;
}

static void drain_peer_ring(dlcp_comm *c, peer *p, uint32_t max,
                            dlcp_tstamp now);

/* Reads and handles what the peer's control connection holds: until a
 * read comes back short (the rest, if any, arrived since: epoll reports it
 * again, and a read that would only say EAGAIN is saved), or with
 * |to_the_end| until it would block, ends or fails (then the peer fails). */
static void read_control(dlcp_comm *c, peer *p, bool to_the_end,
                         dlcp_tstamp now) {
  int fd = p->tcp_fd;
  while (p->dead_status == 0) {
    if (!reserve_control(c, p, 65536, now)) {
      break;
    }
    size_t want = p->rcap - p->rlen;
    ssize_t n = recv(fd, p->rbuf + p->rlen, want, 0);
    if (n == 0) {
      /* A peer on this host sent its last words through its ring. */
      drain_peer_ring(c, p, DLCP_SHM_SLOTS, now);
      peer_fail(c, p, DLCP_ERR_PEER_CLOSED,
                "closed its control connection (exited or crashed)", now);
      break;
    }
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      if (errno != EAGAIN) {
        char why[128];
        snprintf(why, sizeof(why), "control connection failed: %s",
                 strerror(errno));
        peer_fail(c, p, DLCP_ERR_PEER_CLOSED, why, now);
      }
      break;
    }
    p->rlen += (size_t)n;
    parse_control(c, p, now);
    if (p->dead_status != 0) {
      break;
    }
    if (!to_the_end && (size_t)n < want) {
      break;
    }
  }
}

static void on_tcp(dlcp_loop *loop, int fd, uint32_t events, void *user) {
  (void)loop;
  (void)fd;
  peer *p = user;
  dlcp_comm *c = p->comm;
  pthread_mutex_lock(&c->mu);
  dlcp_tstamp now = dlcp_rt_now();
  if (events & DLCP_LOOP_WRITE) {
    flush_control(c, p, now);
  }
  if (events & (DLCP_LOOP_READ | DLCP_LOOP_HUP | DLCP_LOOP_ERROR)) {
    read_control(c, p, false, now);
  }
  dlcp_rt_service(c);
  pthread_mutex_unlock(&c->mu);
}

static void on_timer(dlcp_loop *loop, int fd, uint32_t events, void *user) {
  (void)loop;
  (void)events;
  dlcp_comm *c = user;
  uint64_t expirations;
  while (read(fd, &expirations, sizeof(expirations)) < 0 && errno == EINTR) {
  }
  pthread_mutex_lock(&c->mu);
  c->armed_ns = DLCP_TSTAMP_NEVER; /* it fired: re-arm from scratch */
  dlcp_rt_service(c);
  pthread_mutex_unlock(&c->mu);
}

/* The loop thread drives the event loop whenever no application thread
 * wants to: it steps aside (is kicked out of epoll through the eventfd)
 * when one waits for a completion. */
/* A parked loop thread looks again this often: an application thread
 * that stops driving does not wake it (it usually comes back at once, in
 * a request/response pattern), so the loop thread takes over on its own
 * within this interval. */
#define HANDBACK_NS 1000000u

/* Whether anything needs the loop: transfers or collectives in progress,
 * held fault packets, control bytes still to write.  With none, data from
 * a peer can wait in the kernel until this rank posts something, and the
 * loop thread stays parked rather than take the loop from an application
 * thread that will want it back (which then costs a kick and two context
 * switches: 14% of the iterations of a 4 KiB all-reduce benchmark). */
static bool has_work(dlcp_comm *c) {
  pthread_mutex_lock(&c->mu);
  bool busy = c->colls != NULL || c->held_head != NULL;
  for (uint32_t r = 0; r < c->env.world_size && !busy; r++) {
    peer *p = &c->peers[r];
    busy = r != c->env.rank &&
           (p->wlen > p->woff || dlcp_mlt_outstanding(p->conn) > 0);
  }
  pthread_mutex_unlock(&c->mu);
  return busy;
}

/* The loop thread waits, with |pmu| held, for HANDBACK_NS at most. */
static void park(dlcp_comm *c) {
  dlcp_tstamp t = dlcp_rt_now() + HANDBACK_NS;
  struct timespec ts = {.tv_sec = (time_t)(t / 1000000000u),
                        .tv_nsec = (long)(t % 1000000000u)};
  pthread_cond_timedwait(&c->lcv, &c->pmu, &ts);
}

/* Serves the rings of peers on this host when they hold something: the
 * spinning waiter's look, which saves the producers their doorbells. */
static bool poll_rings(dlcp_comm *c) {
  if (!c->shm_in.hdr || !dlcp_shm_pending(&c->shm_in)) {
    return false;
  }
  pthread_mutex_lock(&c->mu);
  dlcp_rt_service(c);
  pthread_mutex_unlock(&c->mu);
  return true;
}

/* Runs the loop once, sleeping until |deadline| if nothing happens; first
 * tells the peers on this host to ring (and serves what their rings hold
 * if that raced with a write). */
static void block_in_loop(dlcp_comm *c, dlcp_tstamp deadline) {
  bool sleep = true;
  if (c->shm_in.hdr) {
    pthread_mutex_lock(&c->mu);
    if (!dlcp_shm_try_sleep(&c->shm_in)) {
      sleep = false;
      dlcp_rt_service(c);
    }
    pthread_mutex_unlock(&c->mu);
  }
  dlcp_loop_run_once(c->loop, sleep ? deadline : 0);
}

static void *loop_main(void *arg) {
  dlcp_comm *c = arg;
  pthread_mutex_lock(&c->mu);
  dlcp_rt_service(c);
  pthread_mutex_unlock(&c->mu);
  pthread_mutex_lock(&c->pmu);
  for (;;) {
    for (;;) {
      while (!c->stopping &&
             (c->driver != DRIVER_NONE || c->app_wants > 0)) {
        park(c);
      }
      if (c->stopping) {
        break;
      }
      pthread_mutex_unlock(&c->pmu);
      bool busy = has_work(c);
      pthread_mutex_lock(&c->pmu);
      if (c->stopping) {
        break;
      }
      if (c->driver != DRIVER_NONE || c->app_wants > 0) {
        continue; /* an application thread came meanwhile */
      }
      if (busy) {
        break;
      }
      park(c); /* idle: look again later, or when an application comes */
    }
    if (c->stopping) {
      break;
    }
    c->driver = DRIVER_LOOP_THREAD;
    pthread_mutex_unlock(&c->pmu);
    block_in_loop(c, DLCP_TSTAMP_NEVER);
    pthread_mutex_lock(&c->pmu);
    c->driver = DRIVER_NONE;
    if (c->app_wants > 0) {
      pthread_cond_broadcast(&c->pcv);
    }
  }
  pthread_mutex_unlock(&c->pmu);
  return NULL;
}

static void kick(dlcp_comm *c) {
  uint64_t one = 1;
  while (write(c->efd, &one, sizeof(one)) < 0 && errno == EINTR) {
  }
}

/* Makes the calling thread the loop's driver, parking the loop thread;
 * returns 0 if another application thread already drives. */
static int acquire_driver(dlcp_comm *c) {
  pthread_mutex_lock(&c->pmu);
  if (c->driver == DRIVER_APP || c->stopping) {
    pthread_mutex_unlock(&c->pmu);
    return 0;
  }
  c->app_wants++;
  if (c->driver == DRIVER_LOOP_THREAD) {
    kick(c);
  }
  while (c->driver != DRIVER_NONE) {
    pthread_cond_wait(&c->pcv, &c->pmu);
  }
  c->driver = DRIVER_APP;
  pthread_mutex_unlock(&c->pmu);
  return 1;
}

static void release_driver(dlcp_comm *c) {
  pthread_mutex_lock(&c->pmu);
  c->driver = DRIVER_NONE;
  c->app_wants--;
  if (c->app_wants > 0) {
    pthread_cond_broadcast(&c->pcv); /* another application thread */
  }
  pthread_mutex_unlock(&c->pmu);
}

#define SPIN_EPOLL_NS 20000u

int dlcp_rt_comm_drive_until(dlcp_comm *c, bool (*ready)(void *arg),
                             void *arg, dlcp_tstamp deadline) {
  if (!acquire_driver(c)) {
    return 0;
  }
  /* Poll before sleeping: a collective step's answer usually comes within
   * tens of microseconds, and a thread asleep in epoll needs the scheduler
   * to notice the packet and wake it (far longer on a busy core).  Yield
   * between polls, so a peer sharing this core runs and sends it. */
  dlcp_tstamp now = dlcp_rt_now();
  dlcp_tstamp spin_until = now + (dlcp_tstamp)c->env.spin_us * 1000u;
  if (c->shm_in.hdr && c->env.spin_us > 0) {
    /* This thread looks at the rings while it spins (poll_rings), so the
     * peers on this host need not ring; it raises the flag again before
     * it blocks (block_in_loop). */
    dlcp_shm_begin_drain(&c->shm_in);
  }
  dlcp_tstamp next_epoll = now;
  bool all_rings = c->env.world_size > 1 &&
                   c->stats.shm_peers == c->env.world_size - 1;
  while (!ready(arg) && now < deadline) {
    if (now < spin_until) {
      /* The rings first: a poll that served them skips this round's
       * epoll_pwait2 (a system call; what it would report waits one
       * round).  With every peer on a ring, the sockets carry only
       * doorbells, failures and timers, so they are looked at every
       * SPIN_EPOLL_NS rather than on every round: one system call fewer
       * per round of a core shared by several ranks. */
      if (!poll_rings(c) && (!all_rings || now >= next_epoll)) {
        dlcp_loop_run_once(c->loop, 0);
        next_epoll = now + SPIN_EPOLL_NS;
      }
      if (!ready(arg)) {
        sched_yield();
      }
    } else {
      block_in_loop(c, deadline);
    }
    now = dlcp_rt_now();
  }
  release_driver(c);
  return 1;
}

/* --- joining the job ---------------------------------------------------- */

typedef struct addr_record {
  char ip[INET_ADDRSTRLEN];
  uint16_t tcp_port;
  uint32_t k;
  uint16_t udp_port[DLCP_ENV_MAX_PATHS];
  pid_t shm_pid; /* 0: no shared-memory segment */
  int shm_fd;
  uint64_t shm_nonce;
} addr_record;

static int parse_record(addr_record *r, const char *text, uint32_t rank,
                        dlcp_errbuf *eb) {
  memset(r, 0, sizeof(*r));
  int used = 0;
  unsigned tcp, k;
  if (sscanf(text, "%15s %u %u%n", r->ip, &tcp, &k, &used) != 3 ||
      tcp == 0 || tcp > 65535 || k == 0 || k > DLCP_ENV_MAX_PATHS) {
    return dlcp_errbuf_set(eb, DLCP_ERR_CONFIG,
                           "rank %u published a malformed address record "
                           "'%.60s'",
                           rank, text);
  }
  const char *s = text + used;
  for (unsigned i = 0; i < k; i++) {
    unsigned port;
    int n = 0;
    if (sscanf(s, "%u%n", &port, &n) != 1 || port == 0 || port > 65535) {
      return dlcp_errbuf_set(eb, DLCP_ERR_CONFIG,
                             "rank %u published a malformed UDP port list",
                             rank);
    }
    r->udp_port[i] = (uint16_t)port;
    s += n;
  }
  r->tcp_port = (uint16_t)tcp;
  r->k = k;
  /* Optional: the shared-memory segment of a rank on loopback. */
  long pid;
  int fd, n = 0;
  unsigned long long nonce;
  if (sscanf(s, " shm %ld %d %llx%n", &pid, &fd, &nonce, &n) == 3) {
    if (pid <= 0 || pid > INT32_MAX || fd < 0 || s[n] != '\0') {
      return dlcp_errbuf_set(eb, DLCP_ERR_CONFIG,
                             "rank %u published a malformed shared-memory "
                             "segment '%.60s'",
                             rank, s);
    }
    r->shm_pid = (pid_t)pid;
    r->shm_fd = fd;
    r->shm_nonce = (uint64_t)nonce;
  }
  return 0;
}

/* Connects to every lower rank and accepts every higher one. */
static int build_mesh(dlcp_comm *c, const addr_record *recs,
                      dlcp_tstamp deadline, dlcp_errbuf *eb) {
  uint32_t me = c->env.rank, n = c->env.world_size;
  uint8_t hello[DLCP_MESH_HELLO_LEN];
  for (uint32_t r = 0; r < me; r++) {
    peer *p = &c->peers[r];
    dlcp_net_addr a;
    int rv = dlcp_net_resolve(&a, recs[r].ip, recs[r].tcp_port, SOCK_STREAM,
                              eb);
    if (rv != 0) {
      return rv;
    }
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&a.ss, a.len) != 0) {
      int e = errno;
      if (fd >= 0) {
        close(fd);
      }
      return dlcp_errbuf_set(eb, DLCP_ERR_PEER_CLOSED,
                             "%s: cannot connect the control channel: %s",
                             p->name, strerror(e));
    }
    p->tcp_fd = fd;
    dlcp_mesh_put_hello(hello, c->env.job, me);
    if (dlcp_net_write_all(fd, hello, DLCP_MESH_HELLO_LEN, deadline) != 0) {
      return dlcp_errbuf_set(eb, DLCP_ERR_PEER_CLOSED,
                             "%s: hello not sent", p->name);
    }
  }
  for (uint32_t accepted = me + 1; accepted < n; accepted++) {
    struct pollfd pfd = {.fd = c->listen_fd, .events = POLLIN};
    int prv = poll(&pfd, 1, dlcp_rt_poll_timeout(deadline));
    if (prv <= 0) {
      return dlcp_errbuf_set(eb, DLCP_ERR_TIMEOUT,
                             "timed out waiting for the control connections "
                             "of ranks above %u (%u of %u arrived)",
                             me, accepted - me - 1, n - me - 1);
    }
    int fd = accept4(c->listen_fd, NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0) {
      accepted--;
      continue;
    }
    uint32_t r;
    if (dlcp_net_read_all(fd, hello, DLCP_MESH_HELLO_LEN, deadline) != 0 ||
        dlcp_mesh_get_hello(hello, c->env.job, &r) != 0) {
      /* Not one of ours (a stray connection or another job): ignore. */
      close(fd);
      accepted--;
      continue;
    }
    if (r <= me || r >= n || c->peers[r].tcp_fd >= 0) {
      close(fd);
      return dlcp_errbuf_set(eb, DLCP_ERR_CONFIG,
                             "a control connection claims rank %u, which "
                             "cannot connect to rank %u or already did",
                             r, me);
    }
    c->peers[r].tcp_fd = fd;
  }
  for (uint32_t r = 0; r < n; r++) {
    if (r == me) {
      continue;
    }
    int one = 1;
    setsockopt(c->peers[r].tcp_fd, IPPROTO_TCP, TCP_NODELAY, &one,
               sizeof(one));
    dlcp_net_set_nonblock(c->peers[r].tcp_fd);
  }
  return 0;
}

/*
 * Every rank's location labels, as small integers per level: labels are
 * numbered in order of first appearance over ranks 0..n-1, which every
 * rank computes identically from the same exchanged strings.
 */
static int exchange_topology(dlcp_comm *c, dlcp_tstamp deadline,
                             dlcp_errbuf *eb) {
  const dlcp_rt_env *env = &c->env;
  uint32_t n = env->world_size;
  if (env->topo == DLCP_TOPO_FLAT) {
    return 0;
  }
  if (env->topo == DLCP_TOPO_RACK) {
    c->topo_levels = 1;
    c->topo = calloc(n, sizeof(uint32_t));
    if (!c->topo) {
      return dlcp_errbuf_set(eb, DLCP_ERR_NOMEM, "out of memory");
    }
    for (uint32_t r = 0; r < n; r++) {
      c->topo[r] = r / env->ranks_per_rack;
    }
    return 0;
  }
  char mine[DLCP_TOPO_MAX_LEVELS * (DLCP_TOPO_LABEL_MAX + 1) + 1];
  size_t len = 0;
  for (uint32_t l = 0; l < env->topo_levels; l++) {
    len += (size_t)snprintf(mine + len, sizeof(mine) - len, "%s%s",
                            l ? "/" : "", env->topo_labels[l]);
  }
  void **values = calloc(n, sizeof(void *));
  size_t *lens = calloc(n, sizeof(size_t));
  char (*labels)[DLCP_TOPO_LABEL_MAX + 1] =
      calloc((size_t)n * env->topo_levels, DLCP_TOPO_LABEL_MAX + 1);
  c->topo = calloc((size_t)n * env->topo_levels, sizeof(uint32_t));
  int rv = 0;
  if (!values || !lens || !labels || !c->topo) {
    rv = dlcp_errbuf_set(eb, DLCP_ERR_NOMEM, "out of memory");
  }
  if (rv == 0) {
    rv = dlcp_rdzv_exchange(c->rdzv.client, "topo", mine, len + 1, values,
                            lens, deadline, eb);
  }
  for (uint32_t r = 0; rv == 0 && r < n; r++) {
    /* The text was validated by its rank's environment loader; here only
     * the shape matters: the same number of levels everywhere. */
    const char *t = values[r];
    uint32_t levels = 0;
    while (rv == 0 && *t) {
      size_t k = strcspn(t, "/");
      if (levels == env->topo_levels || k == 0 || k > DLCP_TOPO_LABEL_MAX) {
        rv = dlcp_errbuf_set(eb, DLCP_ERR_CONFIG,
                             "DLCP_TOPO: rank %u has '%.80s', expected %u "
                             "levels like this rank's '%s'",
                             r, (const char *)values[r], env->topo_levels,
                             mine);
        break;
      }
      memcpy(labels[r * env->topo_levels + levels], t, k);
      levels++;
      t += k + (t[k] == '/');
    }
    if (rv == 0 && levels != env->topo_levels) {
      rv = dlcp_errbuf_set(eb, DLCP_ERR_CONFIG,
                           "DLCP_TOPO: rank %u has '%.80s', expected %u "
                           "levels like this rank's '%s'",
                           r, (const char *)values[r], env->topo_levels, mine);
    }
  }
  for (uint32_t l = 0; rv == 0 && l < env->topo_levels; l++) {
    for (uint32_t r = 0; r < n; r++) {
      uint32_t id = r;
      for (uint32_t q = 0; q < r; q++) {
        if (strcmp(labels[q * env->topo_levels + l],
                   labels[r * env->topo_levels + l]) == 0) {
          id = c->topo[q * env->topo_levels + l];
          break;
        }
      }
      c->topo[r * env->topo_levels + l] = id;
    }
  }
  if (rv == 0) {
    c->topo_levels = env->topo_levels;
    dlcp_rdzv_free_values(values, n);
  }
  free(values);
  free(lens);
  free(labels);
  return rv;
}

/* Ranks beyond this many share no memory: a segment holds a ring per
 * rank (2 MiB each once used), and large local worlds would pin too much
 * of it. */
#define SHM_MAX_WORLD 16u

static bool is_loopback(const char *ip) { return strncmp(ip, "127.", 4) == 0; }

/* This rank's rings, when peers on this host may use them: both ends on
 * loopback (ranks in network namespaces keep their emulated links).
 * Without one (no memfd, say) everything goes through UDP. */
static void open_shm_segment(dlcp_comm *c) {
  const dlcp_rt_env *env = &c->env;
  uint64_t nonce;
  if (!env->shm || env->world_size > SHM_MAX_WORLD ||
      !is_loopback(c->local_ip) ||
      getrandom(&nonce, sizeof(nonce), 0) != (ssize_t)sizeof(nonce)) {
    return;
  }
  dlcp_errbuf eb = {0};
  dlcp_shm_in_create(&c->shm_in, env->job, env->rank, env->world_size,
                     nonce, &eb);
}

/* Writes to |p| through its rings when it published some and this rank
 * takes part; a segment that cannot be mapped leaves |p| on UDP (its
 * ring for us stays empty, which costs it nothing). */
static void map_peer_segment(dlcp_comm *c, peer *p, const addr_record *rec) {
  if (!c->shm_in.hdr || rec->shm_pid == 0 || !is_loopback(rec->ip)) {
    return;
  }
  dlcp_errbuf eb = {0};
  if (dlcp_shm_out_open(&p->shm, rec->shm_pid, rec->shm_fd, rec->shm_nonce,
                        c->env.job, p->rank, c->env.rank, c->env.world_size,
                        &eb) == 0) {
    c->stats.shm_peers++;
  }
}

static int join(dlcp_comm *c, dlcp_errbuf *eb) {
  dlcp_rt_env *env = &c->env;
  int rv;
  if (env->local_addr[0]) {
    dlcp_fmt(c->local_ip, sizeof(c->local_ip), "%s", env->local_addr);
  } else if (env->world_size == 1) {
    snprintf(c->local_ip, sizeof(c->local_ip), "127.0.0.1");
  } else if ((rv = local_ip_towards(env->master_addr, c->local_ip,
                                    sizeof(c->local_ip), eb)) != 0) {
    return rv;
  }
  if ((rv = dlcp_udp_open(&c->udp, c->local_ip, env->paths, eb)) != 0) {
    return rv;
  }
  if (env->world_size == 1) {
    return 0;
  }
  /* The control listener exists before anyone can learn its port. */
  struct sockaddr_in sin;
  memset(&sin, 0, sizeof(sin));
  sin.sin_family = AF_INET;
  inet_pton(AF_INET, c->local_ip, &sin.sin_addr);
  socklen_t slen = sizeof(sin);
  c->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (c->listen_fd < 0 ||
      bind(c->listen_fd, (struct sockaddr *)&sin, sizeof(sin)) != 0 ||
      listen(c->listen_fd, 128) != 0 ||
      getsockname(c->listen_fd, (struct sockaddr *)&sin, &slen) != 0) {
    return dlcp_errbuf_set(eb, -errno, "control listener on %s: %s",
                           c->local_ip, strerror(errno));
  }
  if ((rv = dlcp_rdzv_join(&c->rdzv, env, eb)) != 0) {
    return rv;
  }
  open_shm_segment(c);
  char mine[128 + 8 * DLCP_ENV_MAX_PATHS];
  int len = snprintf(mine, sizeof(mine), "%s %u %u", c->local_ip,
                     (unsigned)ntohs(sin.sin_port), env->paths);
  for (uint32_t i = 0; i < env->paths; i++) {
    len += snprintf(mine + len, sizeof(mine) - (size_t)len, " %u",
                    (unsigned)c->udp.port[i]);
  }
  if (c->shm_in.hdr) {
    len += snprintf(mine + len, sizeof(mine) - (size_t)len, " shm %ld %d %llx",
                    (long)getpid(), c->shm_in.fd,
                    (unsigned long long)c->shm_in.nonce);
  }
  void **values = calloc(env->world_size, sizeof(void *));
  size_t *lens = calloc(env->world_size, sizeof(size_t));
  addr_record *recs = calloc(env->world_size, sizeof(addr_record));
  dlcp_tstamp deadline = dlcp_rt_deadline_after(env->rdzv_timeout_ms);
  if (!values || !lens || !recs) {
    free(values);
    free(lens);
    free(recs);
    return dlcp_errbuf_set(eb, DLCP_ERR_NOMEM, "out of memory");
  }
  rv = dlcp_rdzv_exchange(c->rdzv.client, "addr", mine, (size_t)len + 1,
                          values, lens, deadline, eb);
  for (uint32_t r = 0; rv == 0 && r < env->world_size; r++) {
    rv = parse_record(&recs[r], values[r], r, eb);
    peer *p = &c->peers[r];
    p->udp_k = recs[r].k;
    for (uint32_t k = 0; rv == 0 && k < recs[r].k; k++) {
      p->udp[k].sin_family = AF_INET;
      p->udp[k].sin_port = htons(recs[r].udp_port[k]);
      inet_pton(AF_INET, recs[r].ip, &p->udp[k].sin_addr);
    }
    dlcp_fmt(p->name, sizeof(p->name), "rank %u (%s:%u)", r, recs[r].ip,
             (unsigned)recs[r].tcp_port);
    if (rv == 0 && r != env->rank) {
      map_peer_segment(c, p, &recs[r]);
    }
  }
  if (rv == 0) {
    dlcp_rdzv_free_values(values, env->world_size);
    rv = exchange_topology(c, deadline, eb);
  }
  if (rv == 0) {
    rv = build_mesh(c, recs, deadline, eb);
  }
  free(values);
  free(lens);
  free(recs);
  return rv;
}

/* Reading payloads in place costs a second system call per datagram and
 * saves copying it: worth it from about this segment size (loopback's
 * 64 KiB datagrams), not for MTU-sized ones. */
#define RX_IN_PLACE_MIN_SEGMENT 16384u

static int make_conns(dlcp_comm *c, dlcp_errbuf *eb) {
  c->rx_in_place = c->env.world_size > 1;
  for (uint32_t r = 0; r < c->env.world_size; r++) {
    if (r == c->env.rank) {
      continue;
    }
    peer *p = &c->peers[r];
    dlcp_mlt_config cfg;
    dlcp_mlt_config_default(&cfg);
    cfg.job = c->env.job;
    dlcp_mlt_config_tune_segment(&cfg, c->env.segment_bytes
                                           ? c->env.segment_bytes
                                           : segment_for(&p->udp[0]));
    if (cfg.segment_size < RX_IN_PLACE_MIN_SEGMENT) {
      c->rx_in_place = false;
    }
    cfg.npaths = c->env.paths;
    cfg.line_rate_bps = (uint64_t)(c->env.rate_gbps * 1e9);
    cfg.min_rate_bps = cfg.line_rate_bps / 1000 ? cfg.line_rate_bps / 1000 : 1;
    cfg.stall_timeout_ns = (dlcp_duration)c->env.timeout_ms * 1000000u;
    cfg.max_inflight_bytes = c->env.window_bytes;
    cfg.eager_max_bytes = c->env.eager_bytes;
    /* DLCP_RTT_LOW_US / DLCP_RTT_HIGH_US override the tuned thresholds. */
    if (c->env.rtt_low_us) {
      cfg.t_low_ns = (dlcp_duration)c->env.rtt_low_us * 1000u;
    }
    if (c->env.rtt_high_us) {
      cfg.t_high_ns = (dlcp_duration)c->env.rtt_high_us * 1000u;
    }
    if (cfg.t_high_ns <= cfg.t_low_ns) {
      return dlcp_errbuf_set(eb, DLCP_ERR_CONFIG,
                             "DLCP_RTT_HIGH_US (%llu us) must exceed "
                             "DLCP_RTT_LOW_US (%llu us)",
                             (unsigned long long)cfg.t_high_ns / 1000,
                             (unsigned long long)cfg.t_low_ns / 1000);
    }
    cfg.seed = c->env.fault.seed ^ ((uint64_t)c->env.rank << 32 | r);
    int rv = dlcp_mlt_conn_new(&p->conn, &cfg, NULL, dlcp_rt_now());
    if (rv != 0) {
      return dlcp_errbuf_set(eb, rv, "MLT connection to %s: %s", p->name,
                             dlcp_strerror(rv));
    }
  }
  return 0;
}

static void comm_free(dlcp_comm *c) {
  for (uint32_t r = 0; c->peers && r < c->env.world_size; r++) {
    peer *p = &c->peers[r];
    if (p->tcp_fd >= 0) {
      /* Half-close and drain first: closing with unread bytes would send
       * a reset, and the peer could lose what was sent just before. */
      shutdown(p->tcp_fd, SHUT_WR);
      uint8_t sink[4096];
      while (recv(p->tcp_fd, sink, sizeof(sink), MSG_DONTWAIT) > 0) {
      }
      close(p->tcp_fd);
    }
    dlcp_mlt_conn_del(p->conn);
    dlcp_shm_out_close(&p->shm);
    free(p->rbuf);
    free(p->wbuf);
  }
  dlcp_shm_in_close(&c->shm_in);
  while (c->held_head) {
    held *h = c->held_head;
    c->held_head = h->next;
    free(h);
  }
  dlcp_udp_close(&c->udp);
  if (c->listen_fd >= 0) {
    close(c->listen_fd);
  }
  if (c->efd >= 0) {
    close(c->efd);
  }
  if (c->tfd >= 0) {
    close(c->tfd);
  }
  dlcp_rt_coll_free(c);
  free(c->topo);
  dlcp_loop_del(c->loop);
  free(c->peers);
  free(c->scratch);
  pthread_mutex_destroy(&c->mu);
  pthread_mutex_destroy(&c->pmu);
  pthread_cond_destroy(&c->pcv);
  pthread_cond_destroy(&c->lcv);
  pthread_cond_destroy(&c->req_cv);
  free(c);
}

static int comm_create(dlcp_comm **pc, const dlcp_rt_env *env, char *err,
                       size_t errlen) {
  dlcp_errbuf eb;
  dlcp_errbuf_clear(&eb);
  dlcp_comm *c = calloc(1, sizeof(*c));
  if (!c) {
    return DLCP_ERR_NOMEM;
  }
  c->env = *env;
  c->listen_fd = -1;
  c->shm_in.fd = -1;
  c->efd = -1;
  c->tfd = -1;
  for (uint32_t i = 0; i < DLCP_ENV_MAX_PATHS; i++) {
    c->udp.fd[i] = -1;
  }
  pthread_mutex_init(&c->mu, NULL);
  pthread_mutex_init(&c->pmu, NULL);
  dlcp_scratch_init(&c->scratch_mem);
  pthread_cond_init(&c->pcv, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&c->lcv, &ca);
  pthread_cond_init(&c->req_cv, &ca);
  pthread_condattr_destroy(&ca);
  c->started_ns = dlcp_rt_now();
  dlcp_fault_init(&c->fault, &env->fault, env->rank);
  c->peers = calloc(env->world_size, sizeof(peer));
  c->scratch = malloc(SCRATCH_LEN);
  int rv = 0;
  if (!c->peers || !c->scratch) {
    rv = dlcp_errbuf_set(&eb, DLCP_ERR_NOMEM, "out of memory");
  }
  for (uint32_t r = 0; rv == 0 && r < env->world_size; r++) {
    c->peers[r].comm = c;
    c->peers[r].rank = r;
    c->peers[r].tcp_fd = -1;
  }
  if (rv == 0) {
    rv = join(c, &eb);
  }
  if (rv == 0) {
    rv = make_conns(c, &eb);
  }
  if (rv == 0 && (rv = dlcp_loop_new(&c->loop)) != 0) {
    dlcp_errbuf_set(&eb, rv, "event loop: %s", dlcp_strerror(rv));
  }
  if (rv == 0) {
    c->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    c->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    c->armed_ns = DLCP_TSTAMP_NEVER;
    if (c->efd < 0 || c->tfd < 0 ||
        dlcp_loop_add_fd(c->loop, c->efd, DLCP_LOOP_READ, on_wakeup, c) != 0 ||
        dlcp_loop_add_fd(c->loop, c->tfd, DLCP_LOOP_READ, on_timer, c) != 0) {
      rv = dlcp_errbuf_set(&eb, DLCP_ERR_SYSTEM, "eventfd: %s",
                           strerror(errno));
    }
  }
  for (uint32_t k = 0; rv == 0 && k < c->udp.k; k++) {
    rv = dlcp_loop_add_fd(c->loop, c->udp.fd[k], DLCP_LOOP_READ, on_udp, c);
  }
  for (uint32_t r = 0; rv == 0 && r < env->world_size; r++) {
    if (r != env->rank) {
      rv = dlcp_loop_add_fd(c->loop, c->peers[r].tcp_fd, DLCP_LOOP_READ,
                            on_tcp, &c->peers[r]);
    }
  }
  if (rv == 0 && pthread_create(&c->thread, NULL, loop_main, c) != 0) {
    rv = dlcp_errbuf_set(&eb, DLCP_ERR_SYSTEM, "cannot start the loop thread");
  }
  if (rv != 0) {
    if (eb.code == 0) {
      dlcp_errbuf_set(&eb, rv, "%s", dlcp_strerror(rv));
    }
    errcopy(err, errlen, &eb);
    if (c->rdzv.client || c->rdzv.server) {
      dlcp_rdzv_server_stop(c->rdzv.server, dlcp_rt_now());
      dlcp_rdzv_client_close(c->rdzv.client);
    }
    comm_free(c);
    return eb.code;
  }
  c->thread_started = true;
  *pc = c;
  return 0;
}

int dlcp_comm_create(dlcp_comm **comm, const dlcp_comm_config *cfg,
                     char *err, size_t errlen) {
  if (!comm || !cfg) {
    return DLCP_ERR_INVALID_ARGUMENT;
  }
  dlcp_rt_env env;
  dlcp_errbuf eb;
  dlcp_errbuf_clear(&eb);
  int rv = dlcp_rt_env_from_config(&env, cfg, &eb);
  if (rv != 0) {
    errcopy(err, errlen, &eb);
    return rv;
  }
  return comm_create(comm, &env, err, errlen);
}

int dlcp_comm_create_from_env(dlcp_comm **comm, char *err, size_t errlen) {
  if (!comm) {
    return DLCP_ERR_INVALID_ARGUMENT;
  }
  dlcp_rt_env env;
  dlcp_errbuf eb;
  dlcp_errbuf_clear(&eb);
  int rv = dlcp_rt_env_load(&env, NULL, NULL, &eb);
  if (rv != 0) {
    errcopy(err, errlen, &eb);
    return rv;
  }
  return comm_create(comm, &env, err, errlen);
}

void dlcp_comm_destroy(dlcp_comm *c) {
  if (!c) {
    return;
  }
  pthread_mutex_lock(&c->mu);
  c->closing = true;
  pthread_mutex_unlock(&c->mu);
  pthread_mutex_lock(&c->pmu);
  c->stopping = true;
  pthread_cond_broadcast(&c->pcv);
  pthread_cond_broadcast(&c->lcv);
  pthread_mutex_unlock(&c->pmu);
  kick(c);
  pthread_join(c->thread, NULL);
  /* The loop is gone: this thread owns everything now.  Whatever is still
   * outstanding is cancelled and handed back. */
  dlcp_tstamp now = dlcp_rt_now();
  /* Read what the control connections hold before deciding whether the
   * job can still leave together: a parked loop thread (nothing in
   * flight) reads none of them, and a rank that learnt of a loss from
   * another rank's note has not read the dead rank's own hang-up.  A
   * rank that exited is found here (and the others are told); one still
   * alive costs a recv that says EAGAIN. */
  for (uint32_t r = 0; r < c->env.world_size; r++) {
    peer *p = &c->peers[r];
    if (r != c->env.rank && p->dead_status == 0 && p->tcp_fd >= 0) {
      read_control(c, p, true, now);
    }
  }
  dlcp_rt_coll_shutdown(c, now);
  for (uint32_t r = 0; r < c->env.world_size; r++) {
    peer *p = &c->peers[r];
    if (r == c->env.rank) {
      continue;
    }
    if (p->wlen > p->woff && p->dead_status == 0) {
      /* Let queued control messages (a last STOP) reach the peer. */
      dlcp_net_set_nonblock(p->tcp_fd);
      send(p->tcp_fd, p->wbuf + p->woff, p->wlen - p->woff,
           MSG_NOSIGNAL | MSG_DONTWAIT);
    }
    dlcp_mlt_abort(p->conn, DLCP_ERR_CANCELED, now);
    for (;;) {
      dlcp_mlt_action a;
      if (dlcp_mlt_poll(p->conn, &a, c->scratch, SCRATCH_LEN, now) != 0 ||
          a.type == DLCP_MLT_ACT_NONE) {
        break;
      }
      if (a.type == DLCP_MLT_ACT_COMPLETE) {
        complete_op(c, p, (op *)(uintptr_t)a.completion.user_data,
                    &a.completion, DLCP_ERR_CANCELED, now);
      }
    }
  }
  /* A rank is lost when one of our connections to it failed, or when
   * another rank reported it (c->lost_status): either way it will never
   * reach the leaving barrier. */
  bool peer_lost = c->lost_status != 0;
  for (uint32_t r = 0; r < c->env.world_size; r++) {
    peer_lost |= r != c->env.rank && c->peers[r].dead_status != 0;
  }
  if (c->env.world_size > 1 && !peer_lost) {
    dlcp_errbuf eb;
    dlcp_errbuf_clear(&eb);
    dlcp_rdzv_leave(&c->rdzv, &eb);
  } else if (c->env.world_size > 1) {
    /* A rank is gone: the leaving barrier could only time out. */
    dlcp_rdzv_client_close(c->rdzv.client);
    dlcp_rdzv_server_stop(c->rdzv.server, dlcp_rt_now());
  }
  comm_free(c);
}

uint32_t dlcp_comm_rank(const dlcp_comm *c) {
  return c->env.rank;
}

uint32_t dlcp_comm_size(const dlcp_comm *c) {
  return c->env.world_size;
}

void dlcp_comm_get_stats(dlcp_comm *c, dlcp_comm_stats *st) {
  pthread_mutex_lock(&c->mu);
  *st = c->stats;
  for (uint32_t r = 0; r < c->env.world_size; r++) {
    if (r == c->env.rank) {
      continue;
    }
    dlcp_mlt_stats ms;
    dlcp_mlt_get_stats(c->peers[r].conn, &ms);
    st->dropped_malformed += ms.dropped_malformed;
    st->dropped_foreign += ms.dropped_foreign;
    st->dropped_stale += ms.dropped_stale;
    st->dropped_invalid += ms.dropped_invalid;
    double gbps = ms.rate_bps / 1e9;
    if (st->min_rate_gbps == 0 || gbps < st->min_rate_gbps) {
      st->min_rate_gbps = gbps;
    }
    if (ms.srtt_ns > st->max_srtt_ns) {
      st->max_srtt_ns = ms.srtt_ns;
    }
  }
  pthread_mutex_unlock(&c->mu);
}

uint16_t dlcp_comm_udp_port(const dlcp_comm *c, uint32_t path) {
  return path < c->udp.k ? c->udp.port[path] : 0;
}

/* --- posting ------------------------------------------------------------ */

static int post(dlcp_comm *c, enum op_kind kind, uint32_t peer_rank,
                const dlcp_tensor *t, const dlcp_send_opts *opts,
                double loss_bound, dlcp_cq *cq, uint64_t user_data) {
  if (!c || !t || !cq || peer_rank >= c->env.world_size ||
      peer_rank == c->env.rank || (!t->data && t->bytes > 0) ||
      t->id >= DLCP_TENSOR_ID_LIMIT ||
      !(loss_bound >= 0.0 && loss_bound < 1.0)) {
    return DLCP_ERR_INVALID_ARGUMENT;
  }
  op *o = calloc(1, sizeof(*o));
  if (!o) {
    return DLCP_ERR_NOMEM;
  }
  o->kind = kind;
  o->peer = peer_rank;
  o->t = *t;
  if (opts) {
    o->opts = *opts;
  }
  o->loss_bound = loss_bound;
  o->cq = cq;
  o->user_data = user_data;
  o->posted_ns = dlcp_rt_now();
  pthread_mutex_lock(&c->mu);
  if (c->closing) {
    pthread_mutex_unlock(&c->mu);
    free(o);
    return DLCP_ERR_CANCELED;
  }
  /* Hand the operation to the core right here and send what it allows
   * now, instead of waking the loop thread first: the first packet leaves
   * without a thread hand-off, and the new deadline reaches whoever
   * drives the loop through the timerfd. */
  dlcp_tstamp now = dlcp_rt_now();
  peer *p = &c->peers[peer_rank];
  dlcp_rt_submit(c, o, now);
  service_peer(c, p, now);
  flush_datagrams(c);
  dlcp_tstamp next = dlcp_mlt_next_deadline(p->conn);
  if (next <= now) {
    next = now + 1000;
  }
  if (next < c->armed_ns) {
    arm_deadline(c, next);
  }
  pthread_mutex_unlock(&c->mu);
  return 0;
}

int dlcp_post_send(dlcp_comm *comm, uint32_t peer_rank, const dlcp_tensor *t,
                   const dlcp_send_opts *opts, dlcp_cq *cq,
                   uint64_t user_data) {
  return post(comm, OP_SEND, peer_rank, t, opts, 0.0, cq, user_data);
}

int dlcp_post_recv(dlcp_comm *comm, uint32_t peer_rank, const dlcp_tensor *t,
                   double loss_bound, dlcp_cq *cq, uint64_t user_data) {
  return post(comm, OP_RECV, peer_rank, t, NULL, loss_bound, cq, user_data);
}
