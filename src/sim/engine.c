/*
 * engine.c: the event queue and timers.
 *
 * The queue is a calendar queue for the network's frequent near-term
 * events and a 4-ary min-heap for timers and other rare events, both
 * ordered by (time, insertion sequence) (see engine.h), read as one queue.
 * The sequence number makes ties deterministic: of two events at the same
 * picosecond, the one scheduled first runs first, so a run depends only on
 * its configuration and seed, never on heap layout.  The heap's push and
 * pop are O(log n); the calendar's are O(1) plus a short sorted insert
 * (a bucket holds 0.256 ns of events) and a bitmap scan to the next
 * bucket.  Handlers that hit an allocation failure record it in the
 * engine rather than returning it through every layer; the run loop stops
 * at the next step and reports it.
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

static int heap_init(const dlcp_mem *mem, dlcp_sim_event_heap *h) {
  h->len = 0;
  h->cap = 1024;
  h->ev = mem->malloc(h->cap * sizeof(*h->ev), mem->user);
  return h->ev ? 0 : DLCP_ERR_NOMEM;
}

int dlcp_sim_engine_init(dlcp_sim_engine *e, const dlcp_mem *mem) {
  memset(e, 0, sizeof(*e));
  e->mem = dlcp_sim_mem(mem);
  e->hot.head = e->mem->calloc(DLCP_SIM_CAL_BUCKETS, sizeof(*e->hot.head),
                               e->mem->user);
  e->hot.tail = e->mem->calloc(DLCP_SIM_CAL_BUCKETS, sizeof(*e->hot.tail),
                               e->mem->user);
  e->hot.bits = e->mem->calloc(DLCP_SIM_CAL_BUCKETS / 64,
                               sizeof(*e->hot.bits), e->mem->user);
  if (!e->hot.head || !e->hot.tail || !e->hot.bits ||
      heap_init(e->mem, &e->cold) != 0) {
    dlcp_sim_engine_free(e);
    return DLCP_ERR_NOMEM;
  }
  return 0;
}

void dlcp_sim_engine_free(dlcp_sim_engine *e) {
  dlcp_sim_calendar *c = &e->hot;
  for (size_t i = 0; i < c->nchunks; i++) {
    e->mem->free(c->chunks[i], e->mem->user);
  }
  e->mem->free(c->chunks, e->mem->user);
  e->mem->free(c->head, e->mem->user);
  e->mem->free(c->tail, e->mem->user);
  e->mem->free(c->bits, e->mem->user);
  if (e->cold.ev) {
    e->mem->free(e->cold.ev, e->mem->user);
  }
  memset(&e->hot, 0, sizeof(e->hot));
  memset(&e->cold, 0, sizeof(e->cold));
  e->len = 0;
}

static bool event_before(const dlcp_sim_event *a, const dlcp_sim_event *b) {
  return a->key < b->key;
}

static dlcp_sim_ps event_time(const dlcp_sim_event *ev) {
  return (dlcp_sim_ps)(ev->key >> 64);
}

void dlcp_sim_engine_fail(dlcp_sim_engine *e, int code) {
  if (e->error == 0) {
    e->error = code;
  }
}

/* The heap is 4-ary: half the levels of a binary heap, and a node's four
 * children are adjacent in memory.  Parent of i is (i - 1) / 4 (a shift),
 * children are 4i + 1 .. 4i + 4. */
static void heap_push(dlcp_sim_engine *e, dlcp_sim_event_heap *h,
                      dlcp_sim_ps time, dlcp_sim_event_fn fn, void *obj,
                      void *arg) {
  assert(time >= e->now);
  if (h->len == h->cap) {
    size_t ncap = h->cap * 2;
    dlcp_sim_event *nev =
        e->mem->realloc(h->ev, ncap * sizeof(*nev), e->mem->user);
    if (!nev) {
      dlcp_sim_engine_fail(e, DLCP_ERR_NOMEM);
      return;
    }
    h->ev = nev;
    h->cap = ncap;
  }
  dlcp_sim_event ev;
  ev.key = (__extension__(unsigned __int128)time << 64) | e->next_seq++;
  ev.fn = fn;
  ev.obj = obj;
  ev.arg = arg;
  /* Sift up: move parents down until ev's slot is found. */
  size_t i = h->len++;
  while (i > 0) {
    size_t parent = (i - 1) >> 2;
    if (!event_before(&ev, &h->ev[parent])) {
      break;
    }
    h->ev[i] = h->ev[parent];
    i = parent;
  }
  h->ev[i] = ev;
  e->len++;
}

/* Refills the calendar's node free list with a chunk of 1024 nodes. */
static int cal_grow(dlcp_sim_engine *e) {
  dlcp_sim_calendar *c = &e->hot;
  if (c->nchunks == c->chunks_cap) {
    size_t ncap = c->chunks_cap ? c->chunks_cap * 2 : 16;
    void **n = e->mem->realloc(c->chunks, ncap * sizeof(*n), e->mem->user);
    if (!n) {
      return DLCP_ERR_NOMEM;
    }
    c->chunks = n;
    c->chunks_cap = ncap;
  }
  const size_t per = 1024;
  dlcp_sim_cal_node *nodes =
      e->mem->malloc(per * sizeof(*nodes), e->mem->user);
  if (!nodes) {
    return DLCP_ERR_NOMEM;
  }
  c->chunks[c->nchunks++] = nodes;
  for (size_t i = 0; i < per; i++) {
    nodes[i].next = c->free_nodes;
    c->free_nodes = &nodes[i];
  }
  return 0;
}

void dlcp_sim_engine_at(dlcp_sim_engine *e, dlcp_sim_ps time,
                        dlcp_sim_event_fn fn, void *obj, void *arg) {
  assert(time >= e->now);
  /* Within one ring span of the current bucket's start, or the heap. */
  dlcp_sim_ps base = e->now & ~(((dlcp_sim_ps)1 << DLCP_SIM_CAL_SHIFT) - 1);
  if (time - base >= ((dlcp_sim_ps)DLCP_SIM_CAL_BUCKETS
                      << DLCP_SIM_CAL_SHIFT)) {
    heap_push(e, &e->cold, time, fn, obj, arg);
    return;
  }
  dlcp_sim_calendar *c = &e->hot;
  if (!c->free_nodes && cal_grow(e) != 0) {
    dlcp_sim_engine_fail(e, DLCP_ERR_NOMEM);
    return;
  }
  dlcp_sim_cal_node *n = c->free_nodes;
  c->free_nodes = n->next;
  n->ev.key = (__extension__(unsigned __int128)time << 64) | e->next_seq++;
  n->ev.fn = fn;
  n->ev.obj = obj;
  n->ev.arg = arg;
  uint32_t b = (uint32_t)(time >> DLCP_SIM_CAL_SHIFT) &
               (DLCP_SIM_CAL_BUCKETS - 1);
  /* Sorted insert.  The new event has the largest seq, so it goes after
   * every event of the same time: usually at the tail. */
  n->next = NULL;
  if (!c->head[b]) {
    c->head[b] = c->tail[b] = n;
    c->bits[b >> 6] |= UINT64_C(1) << (b & 63);
  } else if (c->tail[b]->ev.key < n->ev.key) {
    c->tail[b]->next = n;
    c->tail[b] = n;
  } else {
    dlcp_sim_cal_node **pp = &c->head[b];
    while ((*pp)->ev.key < n->ev.key) {
      pp = &(*pp)->next;
    }
    n->next = *pp;
    *pp = n;
  }
  c->len++;
  e->len++;
}

/* The calendar's earliest event (NULL if empty): the head of the first
 * non-empty bucket at or after now's, cyclically. */
static dlcp_sim_cal_node *cal_first(const dlcp_sim_engine *e, uint32_t *pb) {
  const dlcp_sim_calendar *c = &e->hot;
  if (c->len == 0) {
    return NULL;
  }
  const uint32_t nwords = DLCP_SIM_CAL_BUCKETS / 64;
  uint32_t b0 = (uint32_t)(e->now >> DLCP_SIM_CAL_SHIFT) &
                (DLCP_SIM_CAL_BUCKETS - 1);
  uint32_t w = b0 >> 6;
  uint64_t word = c->bits[w] & (~UINT64_C(0) << (b0 & 63));
  for (uint32_t i = 0; i <= nwords; i++) {
    if (word) {
      uint32_t b = (w << 6) | (uint32_t)__builtin_ctzll(word);
      *pb = b;
      return c->head[b];
    }
    w = (w + 1) & (nwords - 1);
    word = c->bits[w];
  }
  return NULL;
}

void dlcp_sim_engine_at_cold(dlcp_sim_engine *e, dlcp_sim_ps time,
                             dlcp_sim_event_fn fn, void *obj, void *arg) {
  heap_push(e, &e->cold, time, fn, obj, arg);
}

static dlcp_sim_event heap_pop(dlcp_sim_event_heap *h) {
  dlcp_sim_event top = h->ev[0];
  dlcp_sim_event last = h->ev[--h->len];
  size_t n = h->len;
  size_t i = 0;
  /* Sift the former last element down from the root. */
  for (;;) {
    size_t first = 4 * i + 1;
    if (first >= n) {
      break;
    }
    size_t best = first;
    if (first + 4 <= n) {
      /* A full family: a branch-free tournament of the four keys. */
      size_t a = event_before(&h->ev[first + 1], &h->ev[first]) ? first + 1
                                                                : first;
      size_t b = event_before(&h->ev[first + 3], &h->ev[first + 2])
                     ? first + 3
                     : first + 2;
      best = event_before(&h->ev[b], &h->ev[a]) ? b : a;
    } else {
      for (size_t c = first + 1; c < n; c++) {
        if (event_before(&h->ev[c], &h->ev[best])) {
          best = c;
        }
      }
    }
    if (!event_before(&h->ev[best], &last)) {
      break;
    }
    h->ev[i] = h->ev[best];
    i = best;
  }
  if (n > 0) {
    h->ev[i] = last;
  }
  return top;
}

dlcp_sim_ps dlcp_sim_engine_next_time(const dlcp_sim_engine *e) {
  dlcp_sim_ps t = DLCP_SIM_PS_NEVER;
  uint32_t b;
  const dlcp_sim_cal_node *n = cal_first(e, &b);
  if (n) {
    t = event_time(&n->ev);
  }
  if (e->cold.len && event_time(&e->cold.ev[0]) < t) {
    t = event_time(&e->cold.ev[0]);
  }
  return t;
}

int dlcp_sim_engine_step(dlcp_sim_engine *e, dlcp_sim_ps until) {
  if (e->error) {
    return e->error;
  }
  uint32_t b = 0;
  dlcp_sim_cal_node *n = cal_first(e, &b);
  bool from_cal = n && (e->cold.len == 0 ||
                        event_before(&n->ev, &e->cold.ev[0]));
  if (!from_cal && e->cold.len == 0) {
    return 0;
  }
  dlcp_sim_ps time = event_time(from_cal ? &n->ev : &e->cold.ev[0]);
  if (time > until) {
    if (until > e->now) {
      e->now = until;
    }
    return 0;
  }
  dlcp_sim_event ev;
  if (from_cal) {
    dlcp_sim_calendar *c = &e->hot;
    ev = n->ev;
    c->head[b] = n->next;
    if (!n->next) {
      c->bits[b >> 6] &= ~(UINT64_C(1) << (b & 63));
    }
    n->next = c->free_nodes;
    c->free_nodes = n;
    c->len--;
  } else {
    ev = heap_pop(&e->cold);
  }
  e->len--;
  e->now = time;
  e->nevents++;
  /* The next event's object (a port, mostly) is a cache miss at scale:
   * fetch it while this one runs. */
  uint32_t nb;
  const dlcp_sim_cal_node *nx = cal_first(e, &nb);
  if (nx) {
    __builtin_prefetch(nx->ev.obj);
  }
  ev.fn(ev.obj, ev.arg, time);
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
    dlcp_sim_engine_at_cold(t->engine, t->deadline, timer_event, t,
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
  dlcp_sim_engine_at_cold(t->engine, deadline, timer_event, t,
                     (void *)(uintptr_t)t->gen);
}

void dlcp_sim_timer_cancel(dlcp_sim_timer *t) {
  t->deadline = DLCP_SIM_PS_NEVER;
}

void dlcp_sim_timer_reset(dlcp_sim_timer *t) {
  t->deadline = DLCP_SIM_PS_NEVER;
  t->queued_at = DLCP_SIM_PS_NEVER;
  t->gen++; /* the queued events' generation is stale now */
}

bool dlcp_sim_timer_follow(dlcp_sim_timer *t, dlcp_tstamp deadline_ns,
                           dlcp_sim_ps now) {
  if (deadline_ns == DLCP_TSTAMP_NEVER ||
      deadline_ns > DLCP_SIM_PS_NEVER / DLCP_SIM_PS_PER_NS) {
    dlcp_sim_timer_cancel(t);
    return false;
  }
  dlcp_sim_ps at = dlcp_sim_time_from_ns(deadline_ns);
  if (at <= now) {
    return true;
  }
  dlcp_sim_timer_arm(t, at);
  return false;
}
