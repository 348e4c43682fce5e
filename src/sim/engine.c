/*
 * engine.c: the event queue and timers.
 *
 * The queue is a binary min-heap of 40-byte events ordered by (time,
 * insertion sequence).  The sequence number makes ties deterministic: of
 * two events at the same picosecond, the one scheduled first runs first,
 * so a run depends only on its configuration and seed, never on heap
 * layout.  Both push and pop are O(log n).  Handlers that hit an
 * allocation failure record it in the engine rather than returning it
 * through every layer; the run loop stops at the next step and reports it.
 *
 * Timers are cancelled lazily (see engine.h): a transport re-arms its RTO
 * on every ACK, and searching the heap each time would cost more than
 * letting the one queued event notice it is early and re-queue itself.
 */
#include "sim/engine.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

static void *libc_malloc(size_t size, void *user) {
  (void)user;
  return malloc(size);
}
static void libc_free(void *ptr, void *user) {
  (void)user;
  free(ptr);
}
static void *libc_calloc(size_t n, size_t size, void *user) {
  (void)user;
  return calloc(n, size);
}
static void *libc_realloc(void *ptr, size_t size, void *user) {
  (void)user;
  return realloc(ptr, size);
}

/* Constant, so not mutable global state; used when the caller passes no
 * allocator. */
static const dlcp_mem sim_libc_mem = {NULL, libc_malloc, libc_free,
                                      libc_calloc, libc_realloc};

const dlcp_mem *dlcp_sim_mem(const dlcp_mem *mem) {
  return mem ? mem : &sim_libc_mem;
}

int dlcp_sim_engine_init(dlcp_sim_engine *e, const dlcp_mem *mem) {
  memset(e, 0, sizeof(*e));
  e->mem = dlcp_sim_mem(mem);
  e->cap = 1024;
  e->heap = e->mem->malloc(e->cap * sizeof(*e->heap), e->mem->user);
  return e->heap ? 0 : DLCP_ERR_NOMEM;
}

void dlcp_sim_engine_free(dlcp_sim_engine *e) {
  if (e->heap) {
    e->mem->free(e->heap, e->mem->user);
  }
  e->heap = NULL;
  e->len = e->cap = 0;
}

static bool event_before(const dlcp_sim_event *a, const dlcp_sim_event *b) {
  return a->time < b->time || (a->time == b->time && a->seq < b->seq);
}

void dlcp_sim_engine_fail(dlcp_sim_engine *e, int code) {
  if (e->error == 0) {
    e->error = code;
  }
}

void dlcp_sim_engine_at(dlcp_sim_engine *e, dlcp_sim_ps time,
                        dlcp_sim_event_fn fn, void *obj, void *arg) {
  assert(time >= e->now);
  if (e->len == e->cap) {
    size_t ncap = e->cap * 2;
    dlcp_sim_event *nheap =
        e->mem->realloc(e->heap, ncap * sizeof(*nheap), e->mem->user);
    if (!nheap) {
      dlcp_sim_engine_fail(e, DLCP_ERR_NOMEM);
      return;
    }
    e->heap = nheap;
    e->cap = ncap;
  }
  dlcp_sim_event ev = {time, e->next_seq++, fn, obj, arg};
  /* Sift up: move parents down until ev's slot is found. */
  size_t i = e->len++;
  while (i > 0) {
    size_t parent = (i - 1) / 2;
    if (!event_before(&ev, &e->heap[parent])) {
      break;
    }
    e->heap[i] = e->heap[parent];
    i = parent;
  }
  e->heap[i] = ev;
}

static dlcp_sim_event heap_pop(dlcp_sim_engine *e) {
  dlcp_sim_event top = e->heap[0];
  dlcp_sim_event last = e->heap[--e->len];
  size_t n = e->len;
  size_t i = 0;
  /* Sift the former last element down from the root. */
  for (;;) {
    size_t child = 2 * i + 1;
    if (child >= n) {
      break;
    }
    if (child + 1 < n && event_before(&e->heap[child + 1], &e->heap[child])) {
      child++;
    }
    if (!event_before(&e->heap[child], &last)) {
      break;
    }
    e->heap[i] = e->heap[child];
    i = child;
  }
  if (n > 0) {
    e->heap[i] = last;
  }
  return top;
}

dlcp_sim_ps dlcp_sim_engine_next_time(const dlcp_sim_engine *e) {
  return e->len ? e->heap[0].time : DLCP_SIM_PS_NEVER;
}

int dlcp_sim_engine_step(dlcp_sim_engine *e, dlcp_sim_ps until) {
  if (e->error) {
    return e->error;
  }
  if (e->len == 0) {
    return 0;
  }
  if (e->heap[0].time > until) {
    if (until > e->now) {
      e->now = until;
    }
    return 0;
  }
  dlcp_sim_event ev = heap_pop(e);
  e->now = ev.time;
  e->nevents++;
  ev.fn(ev.obj, ev.arg, ev.time);
  return e->error ? e->error : 1;
}

static void timer_event(void *obj, void *arg, dlcp_sim_ps now) {
  dlcp_sim_timer *t = obj;
  uint64_t gen = (uint64_t)(uintptr_t)arg;
  if (gen != t->gen) {
    return; /* superseded by an earlier re-arm */
  }
  t->queued_at = DLCP_SIM_PS_NEVER;
  if (t->deadline == DLCP_SIM_PS_NEVER) {
    return; /* cancelled */
  }
  if (t->deadline > now) {
    /* Re-armed to a later time after this event was queued. */
    t->queued_at = t->deadline;
    dlcp_sim_engine_at(t->engine, t->deadline, timer_event, t,
                       (void *)(uintptr_t)t->gen);
    return;
  }
  t->deadline = DLCP_SIM_PS_NEVER;
  t->fn(t->obj, now);
}

void dlcp_sim_timer_init(dlcp_sim_timer *t, dlcp_sim_engine *e,
                         dlcp_sim_timer_fn fn, void *obj) {
  t->engine = e;
  t->fn = fn;
  t->obj = obj;
  t->deadline = DLCP_SIM_PS_NEVER;
  t->queued_at = DLCP_SIM_PS_NEVER;
  t->gen = 0;
}

void dlcp_sim_timer_arm(dlcp_sim_timer *t, dlcp_sim_ps deadline) {
  t->deadline = deadline;
  if (t->queued_at <= deadline) {
    return; /* the queued event will fire first and re-queue itself */
  }
  t->gen++;
  t->queued_at = deadline;
  dlcp_sim_engine_at(t->engine, deadline, timer_event, t,
                     (void *)(uintptr_t)t->gen);
}

void dlcp_sim_timer_cancel(dlcp_sim_timer *t) {
  t->deadline = DLCP_SIM_PS_NEVER;
}
