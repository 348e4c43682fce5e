/*
 * comm.c: the communicator, the runtime driver of the MLT core: its
 * lifecycle (create, destroy), posting, and the service pass.
 *
 * Model.  One dlcp_mlt_conn per peer, all driven by whichever thread runs
 * the event loop (drive.c).  Each wake-up (a datagram: dgram.c; a control
 * message: ctrl.c; the deadline; a post's eventfd kick) ends in
 * one service pass: poll every connection until the core has nothing to
 * do now, turning actions into batched datagrams, buffered control writes
 * and completions, let the collectives (collective.c) turn finished
 * transfers into new ones, and note the earliest deadline (pacing, probe
 * and stall timers, held fault packets), until which the next thread to
 * sleep in epoll sleeps (a timerfd wakes one already asleep past it).  Callbacks read
 * the clock themselves; a pass hands one |now| to everything it polls.
 *
 * Application threads never touch a connection outside |mu|: dlcp_post_*
 * hand the operation to the core under it and send what it allows at
 * once; completions come back through completion queues (cq.c).  The
 * thread that works on the shared state holds |mu|, so
 * dlcp_comm_get_stats reads a consistent picture.
 *
 * Joining the job (rendezvous, mesh, shared memory, one MLT connection
 * per peer) is join.c; the configuration's defaults and checks config.c.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "dlcp/dlcp.h"
#include "proto/mlt.h"
#include "rt/clock.h"
#include "rt/sigdump.h"
#include "rt/comm_drive.h"
#include "rt/comm_internal.h"
#include "rt/cq.h"
#include "rt/env.h"
#include "rt/errbuf.h"
#include "rt/fault.h"
#include "rt/ina_run.h"
#include "rt/loop.h"
#include "rt/net.h"
#include "rt/rendezvous.h"
#include "wire/wire.h"

static void errcopy(char *err, size_t errlen, const dlcp_errbuf *eb) {
  if (err && errlen > 0) {
    snprintf(err, errlen, "%s",
             eb->msg[0] ? eb->msg : dlcp_strerror(eb->code));
  }
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
  dlcp_rt_completed(c);
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
    if ((status == DLCP_ERR_TIMEOUT || status == DLCP_ERR_NO_PROGRESS) &&
        p->dead_status == 0) {
      /* No progress for the whole timeout: the peer is lost, and the
       * leaving barrier will not wait for it. */
      dlcp_rt_peer_fail(c, p, status, "no progress within the timeout",
                        now);
    }
  } else {
    free(o); /* withdrawn by a finished collective */
  }
}

void dlcp_rt_peer_fail(dlcp_comm *c, peer *p, int status, const char *reason,
                       dlcp_tstamp now) {
  if (p->dead_status != 0) {
    return;
  }
  p->dead_status = status;
  dlcp_copy_str(p->dead_reason, sizeof(p->dead_reason), reason);
  if (p->tcp_fd >= 0) {
    dlcp_loop_del_fd(c->loop, p->tcp_fd);
    close(p->tcp_fd);
    p->tcp_fd = -1;
  }
  p->wlen = p->woff = 0;
  dlcp_mlt_abort(p->conn, status, now);
  dlcp_rt_coll_peer_lost(c, p, now);
  /* Only the first loss this rank learns of is news: a rank that hangs up
   * afterwards is leaving because of it, and must not be reported as a
   * culprit of its own (the others would name it instead). */
  bool first = c->lost_rank == p->rank;
  /* Tell every other rank, so that their collectives, which may not
   * exchange anything with |p|, fail naming |p| and not this rank, whose
   * own connections may close next. */
  uint8_t msg[DLCP_WIRE_NOTE_LEN];
  dlcp_wire_note n = {.job = c->env.job, .op = DLCP_RT_NOTE_PEER_LOST,
                      .value = p->rank};
  if (first && dlcp_wire_note_encode(msg, sizeof(msg), &n) > 0) {
    for (uint32_t r = 0; r < c->env.world_size; r++) {
      peer *q = &c->peers[r];
      if (r != c->env.rank && q->dead_status == 0) {
        dlcp_rt_queue_control(c, q, msg, sizeof(msg), now);
      }
    }
  }
}

/* --- the service pass --------------------------------------------------- */

/* Slots of a peer's ring kept for what is not data (ACKs, the control
 * channel's datagrams) when data is held back for want of room. */
#define SHM_SPARE_SLOTS 2u

/* Whether |p|'s connection may emit DATA now.  A peer on this host whose
 * ring is nearly full has stopped reading for a while (descheduled):
 * the data waits in the connection, unsent, instead of being dropped
 * into a full ring.  Dropped, it counted as lost against its transfer's
 * loss bound (p = 0.1 at 5 % loss on loopback went over the bound and
 * paid a repair round in 4 runs of 8, rt_comm_test), and the sender had
 * to wait for the receiver's request to learn of it. */
static bool may_send_data(peer *p) {
  p->shm_held = p->shm.hdr && dlcp_shm_free_slots(&p->shm) <= SHM_SPARE_SLOTS;
  return !p->shm_held;
}

static void service_peer(dlcp_comm *c, peer *p, dlcp_tstamp now) {
  for (;;) {
    dlcp_mlt_action a;
    int rv = may_send_data(p)
                 ? dlcp_mlt_poll(p->conn, &a, c->scratch, SCRATCH_LEN, now)
                 : dlcp_mlt_poll_control(p->conn, &a, c->scratch, SCRATCH_LEN,
                                         now);
    if (rv != 0) {
      break;
    }
    switch (a.type) {
    case DLCP_MLT_ACT_NONE:
      goto polled;
    case DLCP_MLT_ACT_DATAGRAM:
      if (p->dead_status == 0) {
        dlcp_rt_send_datagram(c, p, &a, now);
      }
      break;
    case DLCP_MLT_ACT_CONTROL:
      dlcp_rt_queue_control(c, p, c->scratch, a.len, now);
      break;
    case DLCP_MLT_ACT_NOTE: {
      /* A collective's NOTE through the datagram control channel; a copy,
       * as handling it may poll connections into the scratch buffer. */
      uint8_t note[DLCP_WIRE_NOTE_LEN];
      if (a.len == sizeof(note)) {
        memcpy(note, c->scratch, sizeof(note));
        dlcp_rt_coll_note(c, p, note, sizeof(note), now);
      }
      break;
    }
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
  p->polled_inputs = dlcp_mlt_inputs(p->conn);
  p->conn_due_ns = dlcp_mlt_next_deadline(p->conn);
  p->due_ns = p->conn_due_ns; /* the pass adds the ring's (service_at) */
  if (p->wlen > p->woff) {
    dlcp_rt_ctrl_flush(c, p, now);
  }
}

/* Whether a service pass at |now| must poll |p|: its connection had an
 * input since it was last polled dry, or a deadline of the peer's came. */
static bool peer_due(const peer *p, dlcp_tstamp now) {
  return p->polled_inputs != dlcp_mlt_inputs(p->conn) || p->due_ns <= now;
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

/* Wakes a thread asleep in epoll past |at| through the timerfd.  A
 * deadline that moves later leaves the timer as it is: it fires early, and
 * the service it runs arms the right one.  Control datagrams move it on
 * every message (a retransmission timer set, then cancelled by the
 * acknowledgement), and re-arming each time cost 3.7 system calls per
 * iteration of a 4 KiB all-reduce. */
static void wake_sleeper_at(dlcp_comm *c, dlcp_tstamp at, dlcp_tstamp now) {
  if (!c->sleeping || at >= c->sleep_until_ns) {
    return;
  }
  if (at == c->armed_ns || (c->armed_ns > now && c->armed_ns <= at)) {
    return;
  }
  struct itimerspec its;
  memset(&its, 0, sizeof(its));
  its.it_value.tv_sec = (time_t)(at / 1000000000u);
  its.it_value.tv_nsec = (long)(at % 1000000000u);
  timerfd_settime(c->tfd, TFD_TIMER_ABSTIME, &its, NULL);
  c->armed_ns = at;
}

/* The service pass's deadline, every deadline of the communicator
 * considered: the thread that next sleeps in epoll sleeps until it
 * (drive.c); one already asleep past it is woken. */
static void set_deadline(dlcp_comm *c, dlcp_tstamp at, dlcp_tstamp now) {
  c->next_ns = at;
  wake_sleeper_at(c, at, now);
}

/* A deadline of one part of the communicator (a post's connection): it can
 * only bring the earliest one closer. */
static void add_deadline(dlcp_comm *c, dlcp_tstamp at, dlcp_tstamp now) {
  if (at < c->next_ns) {
    set_deadline(c, at, now);
  }
}

void dlcp_rt_service_if_due(dlcp_comm *c, dlcp_tstamp now) {
  if (c->next_ns <= now) {
    dlcp_rt_service_at(c, now);
  }
}

/* Control bytes or data that found a peer's ring full try again this
 * soon: the peer is draining it (it only fills while the peer is busy). */
#define SHM_RING_RETRY_NS 20000u

void dlcp_rt_service(dlcp_comm *c) {
  dlcp_rt_service_at(c, dlcp_rt_now());
}

void dlcp_rt_service_at(dlcp_comm *c, dlcp_tstamp now) {
  maybe_pause(c, now);
  dlcp_rt_release_held(c, now);
  dlcp_tstamp next = dlcp_fault_next_release(&c->held);
  if (dlcp_rt_drain_rings(c, now)) {
    next = now; /* more in the rings: come back at once */
  }
  /* Collectives turn finished transfers into new ones, which the
   * connections then have to send: repeat until both are quiet. */
  bool again;
  do {
    for (uint32_t r = 0; r < c->env.world_size; r++) {
      if (r != c->env.rank && peer_due(&c->peers[r], now)) {
        service_peer(c, &c->peers[r], now);
      }
    }
    again = dlcp_rt_coll_service(c, now, &next);
  } while (again);
  for (uint32_t r = 0; r < c->env.world_size; r++) {
    if (r != c->env.rank) {
      peer *p = &c->peers[r];
      if (p->wlen > p->woff && p->dead_status == 0) {
        /* Control the collectives queued after this peer's service (a
         * stall inquiry's PROBE, a PEER_LOST): nothing else may come to
         * send it. */
        (void)dlcp_rt_ctrl_flush(c, p, now);
      }
      /* A connection given work after its turn in the pass (by another
       * peer's completion) is due at once. */
      dlcp_tstamp d =
          p->polled_inputs == dlcp_mlt_inputs(p->conn) ? p->conn_due_ns : now;
      if (p->shm.hdr && p->wlen > p->woff) {
        d = now + SHM_RING_RETRY_NS; /* its ring was full */
      } else if (p->shm_held && d < now + SHM_RING_RETRY_NS) {
        d = now + SHM_RING_RETRY_NS; /* data, when the ring has room */
      }
      p->due_ns = d;
      if (d < next) {
        next = d;
      }
    }
  }
  dlcp_rt_flush_datagrams(c);
  if (next != DLCP_TSTAMP_NEVER && next <= now) {
    next = now + 1000; /* never spin: the core has just been polled dry */
  }
  set_deadline(c, next, now);
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
        .stage = o->stage,
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
                       .place = o->place,
                       .place_user = o->place_user,
                       .place_unit = o->place_unit,
                       .stage = o->stage,
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

/* The thread that slept in epoll runs this iteration's callbacks itself:
 * the deadlines they set need no timerfd to wake it (re-arming it from
 * inside the callbacks cost 4 % of the CPU of a 64 MiB all-reduce on the
 * 10 Gbit/s testbed, a hypervisor exit per call). */
static void on_woken(dlcp_loop *loop, void *user) {
  (void)loop;
  dlcp_comm *c = user;
  pthread_mutex_lock(&c->mu);
  c->sleeping = false;
  c->sleeper_waits = false;
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

/* SIGUSR1 (rt/sigdump.h): write the flight recorder. */
static void on_dump(dlcp_loop *loop, int fd, uint32_t events, void *user) {
  (void)loop;
  (void)events;
  dlcp_comm *c = user;
  uint64_t v;
  while (read(fd, &v, sizeof(v)) < 0 && errno == EINTR) {
  }
  pthread_mutex_lock(&c->mu);
  dlcp_rt_coll_dump(c, "SIGUSR1", dlcp_rt_now());
  pthread_mutex_unlock(&c->mu);
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
  dlcp_fault_queue_clear(&c->held);
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
  if (c->dump_fd >= 0) {
    dlcp_sigdump_unregister(c->dump_fd);
    close(c->dump_fd);
  }
  dlcp_rt_coll_free(c->coll);
  free(c->topo);
  dlcp_loop_del(c->loop);
  free(c->peers);
  free(c->scratch);
  pthread_mutex_destroy(&c->mu);
  pthread_mutex_destroy(&c->pmu);
  pthread_cond_destroy(&c->pcv);
  pthread_cond_destroy(&c->lcv);
  free(c);
}

static int comm_create(dlcp_comm **pc, const dlcp_rt_env *env, char *err,
                       size_t errlen) {
  dlcp_errbuf eb;
  dlcp_errbuf_clear(&eb);
  int bad = dlcp_rt_ina_check_env(&eb);
  if (bad != 0) {
    errcopy(err, errlen, &eb);
    return bad;
  }
  dlcp_comm *c = calloc(1, sizeof(*c));
  if (!c) {
    return DLCP_ERR_NOMEM;
  }
  c->env = *env;
  c->listen_fd = -1;
  c->shm_in.fd = -1;
  c->efd = -1;
  c->tfd = -1;
  c->dump_fd = -1;
  c->spin_scale = 1; /* until join counts the ranks on this machine */
  for (uint32_t i = 0; i < DLCP_ENV_MAX_PATHS; i++) {
    c->udp.fd[i] = -1;
  }
  pthread_mutex_init(&c->mu, NULL);
  pthread_mutex_init(&c->pmu, NULL);
  pthread_cond_init(&c->pcv, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&c->lcv, &ca);
  pthread_condattr_destroy(&ca);
  c->started_ns = dlcp_rt_now();
  dlcp_fault_init(&c->fault, &env->fault, env->rank);
  c->peers = calloc(env->world_size, sizeof(peer));
  c->scratch = malloc(SCRATCH_LEN);
  int rv = 0;
  if (!c->peers || !c->scratch || dlcp_rt_coll_new(&c->coll) != 0) {
    rv = dlcp_errbuf_set(&eb, DLCP_ERR_NOMEM, "out of memory");
  }
  for (uint32_t r = 0; rv == 0 && r < env->world_size; r++) {
    c->peers[r].comm = c;
    c->peers[r].rank = r;
    c->peers[r].tcp_fd = -1;
  }
  if (rv == 0) {
    rv = dlcp_rt_join(c, &eb);
  }
  if (rv == 0) {
    rv = dlcp_rt_make_conns(c, &eb);
  }
  if (rv == 0 && (rv = dlcp_loop_new(&c->loop)) != 0) {
    dlcp_errbuf_set(&eb, rv, "event loop: %s", dlcp_strerror(rv));
  }
  if (rv == 0) {
    c->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    c->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    c->armed_ns = DLCP_TSTAMP_NEVER;
    c->next_ns = DLCP_TSTAMP_NEVER;
    c->sleep_until_ns = DLCP_TSTAMP_NEVER;
    dlcp_loop_set_wake_cb(c->loop, on_woken, c);
    if (c->efd < 0 || c->tfd < 0 ||
        dlcp_loop_add_fd(c->loop, c->efd, DLCP_LOOP_READ, on_wakeup, c) != 0 ||
        dlcp_loop_add_fd(c->loop, c->tfd, DLCP_LOOP_READ, on_timer, c) != 0) {
      rv = dlcp_errbuf_set(&eb, DLCP_ERR_SYSTEM, "eventfd: %s",
                           strerror(errno));
    }
  }
  if (rv == 0) {
    c->dump_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (c->dump_fd < 0 ||
        dlcp_loop_add_fd(c->loop, c->dump_fd, DLCP_LOOP_READ, on_dump, c) !=
            0) {
      rv = dlcp_errbuf_set(&eb, DLCP_ERR_SYSTEM, "eventfd: %s",
                           strerror(errno));
    } else {
      (void)dlcp_sigdump_register(c->dump_fd);
    }
  }
  if (rv == 0) {
    rv = dlcp_loop_add_fd(c->loop, c->udp.fd[DLCP_UDP_RX_PATH],
                          DLCP_LOOP_READ, dlcp_rt_on_udp, c);
  }
  for (uint32_t r = 0; rv == 0 && r < env->world_size; r++) {
    if (r != env->rank) {
      rv = dlcp_loop_add_fd(c->loop, c->peers[r].tcp_fd, DLCP_LOOP_READ,
                            dlcp_rt_on_tcp, &c->peers[r]);
    }
  }
  if (rv == 0 && pthread_create(&c->thread, NULL, dlcp_rt_loop_main, c) != 0) {
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
  /* A misspelt option is an error, not a default silently kept. */
  int rv = dlcp_rt_env_check_unknown(environ, &eb);
  if (rv == 0) {
    rv = dlcp_rt_env_load(&env, NULL, NULL, &eb);
  }
  if (rv != 0) {
    errcopy(err, errlen, &eb);
    return rv;
  }
  return comm_create(comm, &env, err, errlen);
}

/* How long dlcp_comm_destroy lets the peers acknowledge its last control
 * datagrams: several retransmissions even at the RTO's 200 ms cap. */
#define DRAIN_CONTROL_MS 1000u

void dlcp_comm_destroy(dlcp_comm *c) {
  if (!c) {
    return;
  }
  pthread_mutex_lock(&c->mu);
  c->closing = true;
  pthread_mutex_unlock(&c->mu);
  if (c->env.control_datagrams) {
    /* The loop is the only one to resend a control datagram: let the
     * peers acknowledge the last ones (a receiver's final STOP) first.
     * A peer that left already never will: bounded. */
    dlcp_rt_comm_drain_control(c, dlcp_rt_deadline_after(DRAIN_CONTROL_MS));
  }
  pthread_mutex_lock(&c->pmu);
  c->stopping = true;
  pthread_cond_broadcast(&c->pcv);
  pthread_cond_broadcast(&c->lcv);
  pthread_mutex_unlock(&c->pmu);
  dlcp_rt_kick(c);
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
      dlcp_rt_ctrl_read(c, p, true, now);
    }
  }
  dlcp_rt_coll_shutdown(c, now);
  for (uint32_t r = 0; r < c->env.world_size; r++) {
    peer *p = &c->peers[r];
    if (r == c->env.rank) {
      continue;
    }
    if (c->lost_status != 0 && p->dead_status == 0 && r != c->lost_rank) {
      /* Leaving because of the lost rank: say so ahead of the hang-up on
       * the same stream, so the peer names that rank, not this one. */
      uint8_t msg[DLCP_WIRE_NOTE_LEN];
      dlcp_wire_note n = {.job = c->env.job, .op = DLCP_RT_NOTE_PEER_LOST,
                          .value = (uint64_t)c->lost_op_plus << 32 |
                                   c->lost_rank};
      if (dlcp_wire_note_encode(msg, sizeof(msg), &n) > 0) {
        dlcp_rt_queue_control(c, p, msg, sizeof(msg), now);
        (void)dlcp_rt_ctrl_flush(c, p, now); /* its ring, or its socket */
      }
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
  dlcp_mlt_stats sum;
  memset(&sum, 0, sizeof(sum));
  for (uint32_t r = 0; r < c->env.world_size; r++) {
    if (r == c->env.rank) {
      continue;
    }
    dlcp_mlt_stats ms;
    dlcp_mlt_get_stats(c->peers[r].conn, &ms);
    dlcp_mlt_stats_add(&sum, &ms);
    double gbps = ms.rate_bps / 1e9;
    if (st->min_rate_gbps == 0 || gbps < st->min_rate_gbps) {
      st->min_rate_gbps = gbps;
    }
    if (ms.srtt_ns > st->max_srtt_ns) {
      st->max_srtt_ns = ms.srtt_ns;
    }
  }
  st->datagrams_unsent = c->udp.send_errors;
  st->datagrams_rx_dropped = c->udp.rx_drops.total;
  pthread_mutex_unlock(&c->mu);
  st->dropped_malformed += sum.dropped_malformed;
  st->dropped_foreign += sum.dropped_foreign;
  st->dropped_stale += sum.dropped_stale;
  st->dropped_invalid += sum.dropped_invalid;
  st->ce_received += sum.ce_received;
  st->cuts_ecn += sum.cuts_ecn;
  st->cuts_delay += sum.cuts_delay;
  st->control_retx += sum.control_retx;
  st->control_retx_needless += sum.control_needless;
  st->paths_left_out += sum.paths_left_out;
  st->paths_rerouted += sum.paths_rerouted;
  st->data_reordered += sum.data_reordered;
  st->data_overtaken_in_host += sum.data_overtaken_in_host;
  st->bitmaps_early += sum.bitmaps_early;
  st->bitmaps_unprompted += sum.bitmaps_unprompted;
  st->window_timeouts += sum.window_timeouts;
  st->acks_quiet += sum.acks_quiet;
  st->acks_received += sum.acks_received;
  st->ack_hold_ns += sum.ack_hold_ns;
  st->max_ack_hold_ns = sum.ack_hold_max_ns;
}

uint16_t dlcp_comm_udp_port(const dlcp_comm *c, uint32_t socket) {
  return socket < c->udp.k ? c->udp.port[socket] : 0;
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
  op *o = dlcp_zalloc(sizeof(*o));
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
   * drives the loop (add_deadline). */
  dlcp_tstamp now = dlcp_rt_now();
  peer *p = &c->peers[peer_rank];
  dlcp_rt_submit(c, o, now);
  service_peer(c, p, now);
  dlcp_rt_flush_datagrams(c);
  dlcp_tstamp next = p->conn_due_ns;
  if (next <= now) {
    next = now + 1000;
  }
  add_deadline(c, next, now);
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
