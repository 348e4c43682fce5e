/*
 * drive.c: who runs a communicator's event loop (comm_drive.h).  The loop
 * thread drives it whenever no application thread wants to, and only
 * while something is outstanding; an application thread blocked in a wait
 * takes it over (kicking the loop thread out of epoll through the
 * eventfd), spins on the rings and sockets while datagrams keep coming,
 * and sleeps in epoll itself once DLCP_SPIN_US pass without one, so the
 * packet that completes its operation wakes it directly.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>

#include "rt/clock.h"
#include "rt/comm_drive.h"
#include "rt/comm_internal.h"
#include "rt/loop.h"
#include "rt/shm.h"

/* The loop thread drives the event loop whenever no application thread
 * wants to: it steps aside (is kicked out of epoll through the eventfd)
 * when one waits for a completion. */
/* A parked loop thread looks again this often: an application thread
 * that stops driving does not wake it (it usually comes back at once, in
 * a request/response pattern), so the loop thread takes over on its own
 * within this interval.  It looks on the multiples of the interval of
 * CLOCK_MONOTONIC, the same instants in every process of the host: each
 * wake-up of a parked thread takes the core from a rank polling on it
 * (the preemption and switch back cost some 40 us on the 2-vCPU VM), and
 * 4 ranks on 2 cores each waking at its own phase slowed one 8 B
 * all-reduce in seven (p90 81-87 us against a median of 22); waking
 * together, they slow one in thirty (p90 35-42 us). */
#define HANDBACK_NS 1000000u

/* How often a spinning waiter whose peers are all on rings looks at its
 * sockets, which then carry only doorbells and failures (its timers are
 * served from the clock): with ranks sharing cores a round is a turn on
 * the core, and a look every 20 us was one system call every other turn
 * (4 ranks on 2 cores, 8 B all-reduce, 3000 iterations alternated 3x:
 * mean 30.0-34.1 us at 20 us, 26.8-29.6 at 200, median 22.7-24.7 and
 * 19.9-21.4).  An aggregation switch's results come on a socket: with
 * one in use, every SPIN_EPOLL_INA_NS as before. */
#define SPIN_EPOLL_NS 200000u
#define SPIN_EPOLL_INA_NS 20000u

/* A waiter alone on its core spins this long before it yields between
 * polls: longer than a short operation between ranks on this host takes
 * (1-2 us), shorter than a round trip to another host. */
#define SPIN_ALONE_NS 5000u

/* When the loop is next needed: 0 at once, for transfers or collectives
 * in progress, held fault packets or control bytes still to write; with
 * none of those, when a control datagram channel next has something to
 * send (a last STOP not yet acknowledged: only the loop retransmits it;
 * an acknowledgement held for a reply to carry it); DLCP_TSTAMP_NEVER if
 * nothing waits.  Until then data from a peer can wait in the kernel
 * until this rank posts something, and the loop thread stays parked
 * rather than take the loop from an application thread that will want
 * it back (which then costs a kick and two context switches: 14% of the
 * iterations of a 4 KiB all-reduce benchmark).  The control channel's
 * deadlines are RTO-scale, and an application thread coming back in the
 * meantime (the next operation) usually settles it first. */
static dlcp_tstamp loop_needed_at(dlcp_comm *c) {
  pthread_mutex_lock(&c->mu);
  bool busy = dlcp_rt_coll_busy(c->coll) || c->held.head != NULL;
  dlcp_tstamp at = DLCP_TSTAMP_NEVER;
  for (uint32_t r = 0; r < c->env.world_size && !busy; r++) {
    peer *p = &c->peers[r];
    if (r == c->env.rank) {
      continue;
    }
    busy = p->wlen > p->woff || dlcp_mlt_outstanding(p->conn) > 0;
    if (!busy && p->dead_status == 0 &&
        !dlcp_mlt_control_settled(p->conn)) {
      dlcp_tstamp t = dlcp_mlt_next_deadline(p->conn);
      at = t < at ? t : at;
    }
  }
  pthread_mutex_unlock(&c->mu);
  return busy ? 0 : at;
}

/* The loop thread waits, with |pmu| held, until |until| but no later
 * than the next multiple of HANDBACK_NS. */
static void park(dlcp_comm *c, dlcp_tstamp until) {
  dlcp_tstamp t = (dlcp_rt_now() / HANDBACK_NS + 1) * HANDBACK_NS;
  t = until < t ? until : t;
  struct timespec ts = {.tv_sec = (time_t)(t / 1000000000u),
                        .tv_nsec = (long)(t % 1000000000u)};
  pthread_cond_timedwait(&c->lcv, &c->pmu, &ts);
}

/* Runs the loop once, sleeping until |deadline| or the communicator's
 * own deadline if nothing happens, and serves the latter if it passed;
 * first tells the peers on this host to ring (and serves what their rings
 * hold if that raced with a write).  |seen| (NULL for the loop thread):
 * the completions counted when the waiting caller last found its
 * condition false.  If another thread produced one since (a post's
 * service pass, the loop thread's first), the caller looks again instead
 * of sleeping until its deadline, as a waiter's condition is no event of
 * the loop; one produced while it sleeps kicks it (dlcp_rt_completed). */
static void block_in_loop(dlcp_comm *c, dlcp_tstamp deadline,
                          const uint64_t *seen) {
  pthread_mutex_lock(&c->mu);
  bool sleep = seen == NULL || c->completions == *seen;
  if (sleep && c->shm_in.hdr && !dlcp_shm_try_sleep(&c->shm_in)) {
    sleep = false;
    dlcp_rt_service(c);
  }
  dlcp_tstamp until = c->next_ns < deadline ? c->next_ns : deadline;
  c->sleeping = sleep;
  c->sleeper_waits = sleep && seen != NULL;
  c->sleep_until_ns = until;
  pthread_mutex_unlock(&c->mu);
  dlcp_loop_run_once(c->loop, sleep ? until : 0); /* on_woken: !sleeping */
  pthread_mutex_lock(&c->mu);
  dlcp_rt_service_if_due(c, dlcp_rt_now());
  pthread_mutex_unlock(&c->mu);
}

/* The loop thread waits, with |pmu| held, while an application thread
 * drives or wants to.  Looking every HANDBACK_NS is what a short wait
 * needs (the application thread lets go and comes back before the loop
 * thread would notice); a wait still in its turn at two of those looks is
 * long, and then the loop thread sleeps until that thread lets go
 * (release_driver wakes it).  With ranks crowding the cores each look is
 * a context switch on a core other ranks need: 64 ranks on 2 cores, 8 B
 * all-reduce, looking every 1 ms all along took 11.1-12.6 ms an
 * iteration, once in 100 ms 5.9-6.1 ms (2026-12-03). */
static void park_while_app_drives(dlcp_comm *c) {
  uint64_t seen = UINT64_MAX;
  while (!c->stopping && (c->driver != DRIVER_NONE || c->app_wants > 0)) {
    if (c->driver == DRIVER_APP && c->app_drives == seen) {
      c->loop_awaits_release = true;
      pthread_cond_wait(&c->lcv, &c->pmu);
      c->loop_awaits_release = false;
      continue;
    }
    seen = c->driver == DRIVER_APP ? c->app_drives : UINT64_MAX;
    park(c, DLCP_TSTAMP_NEVER);
  }
}

void *dlcp_rt_loop_main(void *arg) {
  dlcp_comm *c = arg;
  pthread_mutex_lock(&c->mu);
  dlcp_rt_service(c);
  pthread_mutex_unlock(&c->mu);
  pthread_mutex_lock(&c->pmu);
  for (;;) {
    for (;;) {
      park_while_app_drives(c);
      if (c->stopping) {
        break;
      }
      pthread_mutex_unlock(&c->pmu);
      dlcp_tstamp needed = loop_needed_at(c);
      pthread_mutex_lock(&c->pmu);
      if (c->stopping) {
        break;
      }
      if (c->driver != DRIVER_NONE || c->app_wants > 0) {
        continue; /* an application thread came meanwhile */
      }
      if (needed <= dlcp_rt_now()) {
        break;
      }
      /* Idle, or only a control channel's timer: look again then, or
       * when an application comes. */
      park(c, needed);
    }
    if (c->stopping) {
      break;
    }
    c->driver = DRIVER_LOOP_THREAD;
    pthread_mutex_unlock(&c->pmu);
    block_in_loop(c, DLCP_TSTAMP_NEVER, NULL);
    pthread_mutex_lock(&c->pmu);
    c->driver = DRIVER_NONE;
    if (c->app_wants > 0) {
      pthread_cond_broadcast(&c->pcv);
    }
  }
  pthread_mutex_unlock(&c->pmu);
  return NULL;
}

void dlcp_rt_kick(dlcp_comm *c) {
  uint64_t one = 1;
  while (write(c->efd, &one, sizeof(one)) < 0 && errno == EINTR) {
  }
}

void dlcp_rt_completed(dlcp_comm *c) {
  c->completions++;
  /* The driver's own callbacks run after on_woken: |sleeping| is then
   * false, and only another thread kicks.  The loop thread waits for no
   * completion: an eager send completing in its poster's call does not
   * wake it. */
  if (c->sleeping && c->sleeper_waits) {
    dlcp_rt_kick(c);
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
    dlcp_rt_kick(c);
  }
  while (c->driver != DRIVER_NONE) {
    pthread_cond_wait(&c->pcv, &c->pmu);
  }
  c->driver = DRIVER_APP;
  c->app_drives++;
  pthread_mutex_unlock(&c->pmu);
  return 1;
}

static void release_driver(dlcp_comm *c) {
  pthread_mutex_lock(&c->pmu);
  c->driver = DRIVER_NONE;
  c->app_wants--;
  if (c->app_wants > 0) {
    pthread_cond_broadcast(&c->pcv); /* another application thread */
  } else if (c->loop_awaits_release) {
    pthread_cond_signal(&c->lcv);
  }
  pthread_mutex_unlock(&c->pmu);
}

/* One round of a spinning waiter at |now|: serves the rings of the peers
 * on this host if they hold something (the spinning waiter's look, which
 * saves the producers their doorbells) or the core's deadline if it
 * passed, then tells whether |ready| and sets |*received| to the count
 * of datagrams received so far.  A round that found the rings
 * empty also runs the loop once, without sleeping: every round if some
 * peer is on a socket, else every SPIN_EPOLL_NS (SPIN_EPOLL_INA_NS with
 * an aggregation switch). */
static bool spin_round(dlcp_comm *c, bool (*ready)(void *arg), void *arg,
                       bool all_rings, dlcp_tstamp now, uint64_t *received) {
  pthread_mutex_lock(&c->mu);
  bool rings = c->shm_in.hdr && dlcp_shm_pending(&c->shm_in);
  if (rings) {
    dlcp_rt_service_at(c, now);
  } else {
    dlcp_rt_service_if_due(c, now);
  }
  bool done = ready(arg);
  *received = c->stats.datagrams_received;
  dlcp_tstamp cadence =
      *dlcp_rt_coll_ina(c) != NULL ? SPIN_EPOLL_INA_NS : SPIN_EPOLL_NS;
  pthread_mutex_unlock(&c->mu);
  if (done || rings || (all_rings && now < c->next_epoll_ns)) {
    return done;
  }
  dlcp_loop_run_once(c->loop, 0);
  c->next_epoll_ns = now + cadence;
  pthread_mutex_lock(&c->mu);
  dlcp_rt_service_if_due(c, dlcp_rt_now());
  done = ready(arg);
  *received = c->stats.datagrams_received;
  pthread_mutex_unlock(&c->mu);
  return done;
}

int dlcp_rt_comm_drive_until(dlcp_comm *c, bool (*ready)(void *arg),
                             void *arg, dlcp_tstamp deadline) {
  if (!acquire_driver(c)) {
    return 0;
  }
  /* Poll before sleeping, and go on polling while datagrams keep coming:
   * a collective step's answer usually comes within tens of microseconds,
   * and a thread asleep in epoll needs the scheduler to notice each packet
   * and wake it (far longer on a busy core; a 512 KiB all-reduce on the
   * 10 Gbit/s testbed slept some 7 times a rank).  It sleeps once
   * DLCP_SPIN_US pass with nothing received, as when a peer is late.  Yield
   * between polls when a peer may be waiting for this core to run and
   * send: at once if this machine's ranks outnumber its CPUs, else once
   * the wait is longer than a round trip on this host takes, since a
   * system call per round doubles the time of a short operation. */
  dlcp_tstamp start = dlcp_rt_now();
  dlcp_tstamp spin_ns = (dlcp_tstamp)c->env.spin_us * 1000u * c->spin_scale;
  dlcp_tstamp spin_until = start + spin_ns;
  dlcp_tstamp yield_from = c->cores_shared ? start : start + SPIN_ALONE_NS;
  if (c->shm_in.hdr && c->env.spin_us > 0) {
    /* This thread looks at the rings while it spins, so the peers on this
     * host need not ring; it raises the flag again before it blocks
     * (block_in_loop). */
    dlcp_shm_begin_drain(&c->shm_in);
  }
  bool all_rings = c->env.world_size > 1 &&
                   c->stats.shm_peers == c->env.world_size - 1;
  uint64_t heard = 0;
  for (dlcp_tstamp now = start; now < deadline; now = dlcp_rt_now()) {
    if (now < spin_until) {
      uint64_t received;
      if (spin_round(c, ready, arg, all_rings, now, &received)) {
        break;
      }
      if (received != heard) {
        heard = received;
        spin_until = now + spin_ns;
      }
      if (now >= yield_from) {
        sched_yield();
      }
      continue;
    }
    pthread_mutex_lock(&c->mu);
    uint64_t seen = c->completions;
    bool done = ready(arg);
    pthread_mutex_unlock(&c->mu);
    if (done) {
      break;
    }
    block_in_loop(c, deadline, &seen);
  }
  release_driver(c);
  return 1;
}

/* control_settled: no live peer holds a control datagram of ours
 * unacknowledged, nor waits for our acknowledgement (with mu held). */
static bool control_settled(void *arg) {
  dlcp_comm *c = arg;
  bool settled = true;
  for (uint32_t r = 0; r < c->env.world_size && settled; r++) {
    const peer *p = &c->peers[r];
    settled = r == c->env.rank || p->dead_status != 0 ||
              dlcp_mlt_control_settled(p->conn);
  }
  return settled;
}

static bool control_settled_now(dlcp_comm *c) {
  pthread_mutex_lock(&c->mu);
  bool settled = control_settled(c);
  pthread_mutex_unlock(&c->mu);
  return settled;
}

void dlcp_rt_comm_drain_control(dlcp_comm *c, dlcp_tstamp deadline) {
  if (dlcp_rt_comm_drive_until(c, control_settled, c, deadline)) {
    return;
  }
  /* Another thread drives (the loop thread comes back for the control
   * channels' deadlines, see loop_needed_at): look now and then. */
  while (!control_settled_now(c) && dlcp_rt_now() < deadline) {
    struct timespec ms = {.tv_sec = 0, .tv_nsec = 1000000};
    nanosleep(&ms, NULL);
  }
}
