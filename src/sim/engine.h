/*
 * engine.h: the discrete-event core of the simulator: the event queue,
 * lazily cancelled timers, and the packet pool.
 *
 * Events are ordered by (time, insertion sequence number), so two events at
 * the same picosecond run in the order they were scheduled and a run is a
 * pure function of its inputs and seed.
 */
#ifndef DLCP_SIM_ENGINE_H
#define DLCP_SIM_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dlcp/dlcp_types.h"
#include "sim/simtime.h"

/* An event handler: |obj| and |arg| are what was passed when scheduling. */
typedef void (*dlcp_sim_event_fn)(void *obj, void *arg, dlcp_sim_ps now);

typedef struct dlcp_sim_event {
  /* Ordering key: time in the high 64 bits, insertion sequence in the low
   * 64 (breaks ties deterministically), so one unsigned comparison orders
   * two events and compiles without branches. */
  __extension__ unsigned __int128 key;
  dlcp_sim_event_fn fn;
  void *obj;
  void *arg;
} dlcp_sim_event;

/* A 4-ary min-heap of events on (time, seq). */
typedef struct dlcp_sim_event_heap {
  dlcp_sim_event *ev;
  size_t len;
  size_t cap;
} dlcp_sim_event_heap;

/*
 * A calendar queue (Brown 1988) for the network's events: a ring of
 * 2^DLCP_SIM_CAL_BITS buckets of 2^DLCP_SIM_CAL_SHIFT ps each, every
 * bucket a list sorted by (time, seq), and a bitmap of the non-empty
 * buckets.  It only takes events less than one ring span (about 33.5 us)
 * past the start of the current bucket, so every bucket holds events of
 * one lap and the first non-empty bucket from now holds the earliest.
 * Buckets are narrow because a bucket's list is walked on every insert
 * out of order: at 1,024 hosts (a k = 16 fat tree, thousands of busy
 * ports) 2.048 ns buckets held dozens of events and the walk, a cache
 * miss per node, was a third of dlcp_sim_engine_at; 0.256 ns buckets
 * took the cost per packet-hop there from ~340 to ~270 ns (CPU, one
 * run each) for ~5 % more at 16 hosts (the 2 MiB of list heads).
 */
#define DLCP_SIM_CAL_BITS 17u
#define DLCP_SIM_CAL_SHIFT 8u /* 0.256 ns per bucket */
#define DLCP_SIM_CAL_BUCKETS (1u << DLCP_SIM_CAL_BITS)

typedef struct dlcp_sim_cal_node {
  dlcp_sim_event ev;
  struct dlcp_sim_cal_node *next;
} dlcp_sim_cal_node;

typedef struct dlcp_sim_calendar {
  dlcp_sim_cal_node **head; /* DLCP_SIM_CAL_BUCKETS lists */
  dlcp_sim_cal_node **tail; /* last node of each list (valid if head) */
  uint64_t *bits;           /* bit b set iff head[b] != NULL */
  dlcp_sim_cal_node *free_nodes;
  void **chunks; /* node chunks, freed at the end */
  size_t nchunks, chunks_cap;
  size_t len;
} dlcp_sim_calendar;

/*
 * Two queues, one order.  |hot| holds the network's events (a transmitter
 * finishing, the head of a pipe arriving): at most two per port, all
 * within a link delay and a packet time of now, in a calendar queue
 * (O(1) push and pop; an event too far ahead goes to |cold|).  |cold| is
 * a 4-ary heap of everything else (timers, flow starts, link faults):
 * possibly one per flow, mostly far in the future.  Every event gets its
 * sequence number from one counter and the engine runs whichever head is
 * earlier by (time, seq), so the order is exactly that of a single queue.
 */
typedef struct dlcp_sim_engine {
  const dlcp_mem *mem;
  dlcp_sim_calendar hot;
  dlcp_sim_event_heap cold;
  size_t len; /* pending events in both heaps */
  uint64_t next_seq;
  dlcp_sim_ps now;
  uint64_t nevents; /* events executed so far */
  /* The first fatal error (out of memory) raised by any handler; the run
   * stops at the next event and dlcp_sim_engine_run returns it. */
  int error;
} dlcp_sim_engine;

/* dlcp_sim_mem returns |mem|, or a libc allocator if |mem| is NULL. */
const dlcp_mem *dlcp_sim_mem(const dlcp_mem *mem);

/* dlcp_sim_engine_init prepares |e| at time 0.  Returns 0 or
 * DLCP_ERR_NOMEM. */
int dlcp_sim_engine_init(dlcp_sim_engine *e, const dlcp_mem *mem);

/* dlcp_sim_engine_free releases the queue; pending events are discarded. */
void dlcp_sim_engine_free(dlcp_sim_engine *e);

/*
 * dlcp_sim_engine_at schedules |fn|(|obj|, |arg|) at |time|, which must not
 * be in the past.  On allocation failure it records DLCP_ERR_NOMEM in
 * e->error, which ends the run.
 */
void dlcp_sim_engine_at(dlcp_sim_engine *e, dlcp_sim_ps time,
                        dlcp_sim_event_fn fn, void *obj, void *arg);

/* dlcp_sim_engine_at_cold is dlcp_sim_engine_at for events that are rare
 * or far ahead (timers, flow starts): same ordering, other heap. */
void dlcp_sim_engine_at_cold(dlcp_sim_engine *e, dlcp_sim_ps time,
                             dlcp_sim_event_fn fn, void *obj, void *arg);

/* dlcp_sim_engine_fail records |code| (the first one wins) and so ends the
 * run at the next event. */
void dlcp_sim_engine_fail(dlcp_sim_engine *e, int code);

/*
 * dlcp_sim_engine_step runs the earliest event if its time is <= |until|.
 * It returns 1 if it ran one, 0 if the queue is empty or the next event is
 * later than |until| (then now advances to |until| unless the queue is
 * empty), or e->error.
 */
int dlcp_sim_engine_step(dlcp_sim_engine *e, dlcp_sim_ps until);

/* dlcp_sim_engine_next_time returns the time of the earliest pending event
 * or DLCP_SIM_PS_NEVER. */
dlcp_sim_ps dlcp_sim_engine_next_time(const dlcp_sim_engine *e);

/*
 * dlcp_sim_timer: a restartable one-shot timer (a transport's RTO, a
 * delayed-ACK timer).  Re-arming does not search the heap: if the new
 * deadline is later than the queued event, the queued event re-queues itself
 * at the deadline when it fires; if earlier, a new event is queued and the
 * old one is recognised as stale by its generation number.  A timer thus
 * has at most two events in the queue however often it is re-armed.  The
 * timer's memory must outlive the engine's run (its events point to it).
 */
typedef void (*dlcp_sim_timer_fn)(void *obj, dlcp_sim_ps now);

typedef struct dlcp_sim_timer {
  dlcp_sim_engine *engine;
  dlcp_sim_timer_fn fn;
  void *obj;
  dlcp_sim_ps deadline;  /* DLCP_SIM_PS_NEVER when disarmed */
  dlcp_sim_ps queued_at; /* time of the live queued event, or NEVER */
  uint64_t gen;          /* generation of the live queued event */
} dlcp_sim_timer;

void dlcp_sim_timer_init(dlcp_sim_timer *t, dlcp_sim_engine *e,
                         dlcp_sim_timer_fn fn, void *obj);
/* Arms (or re-arms) |t| to fire at |deadline| (>= now). */
void dlcp_sim_timer_arm(dlcp_sim_timer *t, dlcp_sim_ps deadline);
void dlcp_sim_timer_cancel(dlcp_sim_timer *t);
/* Disarms |t| and detaches it from its queued events, which then fire
 * for nothing: a timer in memory reused by a new owner behaves as a new
 * one (its next arm queues an event of its own at once). */
void dlcp_sim_timer_reset(dlcp_sim_timer *t);
/*
 * dlcp_sim_timer_follow makes |t| follow a protocol core's deadline
 * |deadline_ns| (ns on the simulated clock; DLCP_TSTAMP_NEVER, or a time
 * beyond the simulated range, cancels |t|).  A deadline after |now| arms
 * |t| and returns false; one at or before |now| leaves |t| alone and
 * returns true: the core has work now (poll it again, or arm |t| at now).
 */
bool dlcp_sim_timer_follow(dlcp_sim_timer *t, dlcp_tstamp deadline_ns,
                           dlcp_sim_ps now);
static inline bool dlcp_sim_timer_armed(const dlcp_sim_timer *t) {
  return t->deadline != DLCP_SIM_PS_NEVER;
}

#endif /* DLCP_SIM_ENGINE_H */
