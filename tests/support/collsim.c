/*
 * collsim.c: the N-rank virtual-time harness for dlcp_coll (collsim.h).
 *
 * Model: a discrete-event loop over a binary heap ordered by (time,
 * insertion sequence), so equal times replay in a fixed order.  Each rank
 * is "processed" at the time of any event addressed to it: the event is
 * delivered (on_sent / on_received / on_note / a timer) and the operation
 * is polled until it has nothing to do, its actions executed at once
 * (posting transfers, scheduling notes).  Transfers live in a hash table
 * keyed by (sender, receiver, tag); an entry is kept after completion so
 * that a reused key is caught.  A rank's bypass deadline is kept as one
 * armed timer event; stale timer events are skipped.
 */
#include "collsim.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll/match.h"
#include "proto/rng.h"

enum ev_type { EV_ARRIVE, EV_SENT, EV_RECEIVED, EV_NOTE, EV_TIMER };

typedef struct event {
  dlcp_tstamp t;
  uint64_t seq;
  int type;
  uint32_t rank; /* who is processed */
  uint32_t peer;
  uint32_t xfer; /* transfer index */
  uint64_t value;
} event;

/* A transfer: the matcher's record (coll/match.h), then what arrived. */
typedef struct xfer {
  coll_xfer m;
  dlcp_coll_range *missing;
  size_t nmissing;
} xfer;

struct collsim {
  collsim_config cfg;
  dlcp_rng rng;
  dlcp_coll *op[COLLSIM_MAX_WORLD];
  dlcp_tstamp done_at[COLLSIM_MAX_WORLD];
  dlcp_tstamp nic_free[COLLSIM_MAX_WORLD];
  dlcp_tstamp cpu_free[COLLSIM_MAX_WORLD];
  dlcp_tstamp timer_at[COLLSIM_MAX_WORLD];
  dlcp_tstamp note_last[COLLSIM_MAX_WORLD][COLLSIM_MAX_WORLD]; /* [from][to] */
  event *heap;
  size_t nheap, capheap;
  uint64_t seq;
  coll_match xfers; /* of xfer; done ones kept, so a reused key fails */
  collsim_stats st;
  char err[256];
  bool failed;
};

static xfer *xfer_at(const collsim *cs, uint32_t i) {
  return (xfer *)(void *)coll_match_at(&cs->xfers, i);
}

void collsim_config_default(collsim_config *cfg) {
  memset(cfg, 0, sizeof(*cfg));
  cfg->world = 1;
  cfg->latency_ns = 5000;
  cfg->bandwidth_bps = 100000000000ull;
  cfg->note_latency_ns = 5000;
  cfg->compute_ns = 1000;
  cfg->loss_segment_bytes = 64;
}

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static void fail(collsim *cs, const char *fmt, ...);

static void fail(collsim *cs, const char *fmt, ...) {
  if (cs->failed) {
    return;
  }
  cs->failed = true;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(cs->err, sizeof(cs->err), fmt, ap);
  va_end(ap);
}

collsim *collsim_new(const collsim_config *cfg) {
  if (cfg->world == 0 || cfg->world > COLLSIM_MAX_WORLD) {
    return NULL;
  }
  collsim *cs = calloc(1, sizeof(*cs));
  if (!cs) {
    return NULL;
  }
  cs->cfg = *cfg;
  if (!cs->cfg.loss_segment_bytes) {
    cs->cfg.loss_segment_bytes = 64;
  }
  if (!cs->cfg.until_ns) {
    cs->cfg.until_ns = 10000000000ull;
  }
  dlcp_rng_seed(&cs->rng, cfg->seed);
  if (coll_match_init(&cs->xfers, NULL, sizeof(xfer)) != 0) {
    free(cs);
    return NULL;
  }
  for (uint32_t r = 0; r < COLLSIM_MAX_WORLD; r++) {
    cs->done_at[r] = DLCP_TSTAMP_NEVER;
    cs->timer_at[r] = DLCP_TSTAMP_NEVER;
  }
  return cs;
}

void collsim_del(collsim *cs) {
  if (!cs) {
    return;
  }
  for (uint32_t i = 0; i < coll_match_slots(&cs->xfers); i++) {
    free(xfer_at(cs, i)->missing);
  }
  coll_match_free(&cs->xfers);
  free(cs->heap);
  free(cs);
}

void collsim_set_op(collsim *cs, uint32_t rank, dlcp_coll *op) {
  if (rank < cs->cfg.world) {
    cs->op[rank] = op;
  }
}

const char *collsim_error(const collsim *cs) { return cs->err; }

dlcp_tstamp collsim_done_at(const collsim *cs, uint32_t rank) {
  return rank < cs->cfg.world ? cs->done_at[rank] : DLCP_TSTAMP_NEVER;
}

dlcp_tstamp collsim_makespan(const collsim *cs) {
  dlcp_tstamp m = 0;
  for (uint32_t r = 0; r < cs->cfg.world; r++) {
    if (cs->done_at[r] > m) {
      m = cs->done_at[r];
    }
  }
  return m;
}

void collsim_get_stats(const collsim *cs, collsim_stats *st) { *st = cs->st; }

/* ---- event heap --------------------------------------------------------- */

static bool ev_before(const event *a, const event *b) {
  return a->t != b->t ? a->t < b->t : a->seq < b->seq;
}

static void push(collsim *cs, event ev) {
  if (cs->nheap == cs->capheap) {
    size_t ncap = cs->capheap ? cs->capheap * 2 : 1024;
    event *n = realloc(cs->heap, ncap * sizeof(*n));
    if (!n) {
      fail(cs, "out of memory");
      return;
    }
    cs->heap = n;
    cs->capheap = ncap;
  }
  ev.seq = cs->seq++;
  size_t i = cs->nheap++;
  while (i > 0) {
    size_t parent = (i - 1) / 2;
    if (!ev_before(&ev, &cs->heap[parent])) {
      break;
    }
    cs->heap[i] = cs->heap[parent];
    i = parent;
  }
  cs->heap[i] = ev;
}

static event pop(collsim *cs) {
  event top = cs->heap[0];
  event last = cs->heap[--cs->nheap];
  size_t i = 0;
  for (;;) {
    size_t c = 2 * i + 1;
    if (c >= cs->nheap) {
      break;
    }
    if (c + 1 < cs->nheap && ev_before(&cs->heap[c + 1], &cs->heap[c])) {
      c++;
    }
    if (!ev_before(&cs->heap[c], &last)) {
      break;
    }
    cs->heap[i] = cs->heap[c];
    i = c;
  }
  if (cs->nheap > 0) {
    cs->heap[i] = last;
  }
  return top;
}

/* ---- transfers ------------------------------------------------------------ */

/* Both ends posted: serialize on the sender's link, schedule arrival. */
static void start_xfer(collsim *cs, uint32_t xi, dlcp_tstamp now) {
  const coll_xfer *x = coll_match_at(&cs->xfers, xi);
  dlcp_tstamp t = now > cs->nic_free[x->src] ? now : cs->nic_free[x->src];
  if (cs->cfg.bandwidth_bps) {
    t += (dlcp_tstamp)((x->bytes * 8u * 1000000000ull) /
                       cs->cfg.bandwidth_bps);
  }
  cs->nic_free[x->src] = t;
  t += cs->cfg.latency_ns;
  if (cs->cfg.jitter_ns) {
    t += dlcp_rng_below(&cs->rng, cs->cfg.jitter_ns);
  }
  event ev = {.t = t, .type = EV_ARRIVE, .rank = x->dst, .xfer = xi};
  push(cs, ev);
  cs->st.transfers++;
  cs->st.bytes += x->bytes;
}

/* Delivers the payload with the seeded holes a lossy transfer gets. */
static void deliver(collsim *cs, xfer *x) {
  if (!(x->m.loss_bound > 0.0) || !(cs->cfg.segment_loss > 0.0)) {
    coll_match_deliver(&x->m, NULL, 0);
    return;
  }
  uint64_t seg = cs->cfg.loss_segment_bytes;
  uint64_t pieces = (x->m.bytes + seg - 1) / seg;
  uint64_t budget = (uint64_t)(x->m.loss_bound * (double)pieces);
  for (uint64_t i = 0; i < pieces && budget > 0; i++) {
    if (dlcp_rng_unit(&cs->rng) >= cs->cfg.segment_loss) {
      continue;
    }
    budget--;
    uint64_t off = i * seg;
    uint64_t len = x->m.bytes - off < seg ? x->m.bytes - off : seg;
    if (x->nmissing > 0 &&
        x->missing[x->nmissing - 1].offset + x->missing[x->nmissing - 1].len ==
            off) {
      x->missing[x->nmissing - 1].len += len;
    } else {
      dlcp_coll_range *n =
          realloc(x->missing, (x->nmissing + 1) * sizeof(*n));
      if (!n) {
        fail(cs, "out of memory");
        return;
      }
      x->missing = n;
      x->missing[x->nmissing++] = (dlcp_coll_range){off, len};
    }
    cs->st.lost_bytes += len;
  }
  coll_match_deliver(&x->m, x->missing, x->nmissing);
  if (x->nmissing) {
    cs->st.lossy_transfers++;
  }
}

/* ---- driving one rank ----------------------------------------------------- */

static void do_action(collsim *cs, uint32_t r, const dlcp_coll_action *a,
                      dlcp_tstamp now) {
  switch (a->type) {
  case DLCP_COLL_ACT_SEND:
  case DLCP_COLL_ACT_RECV: {
    bool is_send = a->type == DLCP_COLL_ACT_SEND;
    uint32_t src = is_send ? r : a->peer, dst = is_send ? a->peer : r;
    if (a->peer >= cs->cfg.world || a->peer == r || a->bytes == 0) {
      fail(cs, "rank %u: bad %s peer %u bytes %llu", r,
           is_send ? "send" : "recv", a->peer, (unsigned long long)a->bytes);
      return;
    }
    uint32_t xi;
    switch (coll_match_post(&cs->xfers, 0, 0, r, a, &xi)) {
    case COLL_MATCH_WAITING:
      return;
    case COLL_MATCH_READY:
      start_xfer(cs, xi, now);
      return;
    case COLL_MATCH_REUSED:
      fail(cs, "rank %u: key %u->%u tag %u reused after completion", r, src,
           dst, a->tag);
      return;
    case COLL_MATCH_DUPLICATE:
      fail(cs, "rank %u: duplicate %s %u->%u tag %u", r,
           is_send ? "send" : "recv", src, dst, a->tag);
      return;
    case COLL_MATCH_SIZE_MISMATCH: {
      uint64_t first = coll_match_at(&cs->xfers, xi)->bytes;
      fail(cs, "size mismatch %u->%u tag %u: send %llu recv %llu", src, dst,
           a->tag, (unsigned long long)(is_send ? a->bytes : first),
           (unsigned long long)(is_send ? first : a->bytes));
      return;
    }
    case COLL_MATCH_NOMEM:
      fail(cs, "out of memory");
      return;
    }
    return;
  }
  case DLCP_COLL_ACT_CANCEL_RECV: {
    uint32_t xi = coll_match_find(&cs->xfers, 0, 0, a->peer, r, a->tag);
    if (coll_match_cancel(&cs->xfers, 0, 0, a->peer, r, a->tag) != 0) {
      fail(cs, "rank %u: cancel of %u->%u tag %u that is %s", r, a->peer, r,
           a->tag, xi == COLL_MATCH_NONE ? "unknown" : "matched");
      return;
    }
    cs->st.cancels++;
    return;
  }
  case DLCP_COLL_ACT_NOTE: {
    if (a->peer >= cs->cfg.world || a->peer == r) {
      fail(cs, "rank %u: note to bad peer %u", r, a->peer);
      return;
    }
    /* Jittered, but in order per pair (equal times keep posting order). */
    dlcp_tstamp t = now + cs->cfg.note_latency_ns;
    if (cs->cfg.note_jitter_ns) {
      t += dlcp_rng_below(&cs->rng, cs->cfg.note_jitter_ns);
    }
    dlcp_tstamp *last = &cs->note_last[r][a->peer];
    t = t > *last ? t : *last;
    *last = t;
    event ev = {.t = t, .type = EV_NOTE,
                .rank = a->peer, .peer = r, .value = a->value};
    push(cs, ev);
    cs->st.notes++;
    return;
  }
  case DLCP_COLL_ACT_DONE:
    cs->done_at[r] = now;
    return;
  case DLCP_COLL_ACT_NONE:
    return;
  }
}

static void process(collsim *cs, uint32_t r, dlcp_tstamp now) {
  dlcp_coll *op = cs->op[r];
  for (int round = 0; round < 1000 && !cs->failed; round++) {
    dlcp_coll_action a;
    for (;;) {
      int rv = dlcp_coll_poll(op, &a, now);
      if (a.type == DLCP_COLL_ACT_NONE) {
        break;
      }
      if (rv != 0 && a.type != DLCP_COLL_ACT_DONE) {
        fail(cs, "rank %u: poll returned %d", r, rv);
        return;
      }
      do_action(cs, r, &a, now);
      if (a.type == DLCP_COLL_ACT_DONE) {
        dlcp_coll_result res;
        dlcp_coll_get_result(op, &res);
        if (res.status != 0) {
          fail(cs, "rank %u: operation failed: %s (peer %d)", r,
               dlcp_strerror(res.status), res.failed_peer);
          return;
        }
      }
    }
    dlcp_tstamp dl = dlcp_coll_next_deadline(op);
    if (dl == DLCP_TSTAMP_NEVER) {
      return;
    }
    if (dl > now) {
      if (dl != cs->timer_at[r]) {
        cs->timer_at[r] = dl;
        event ev = {.t = dl, .type = EV_TIMER, .rank = r};
        push(cs, ev);
      }
      return;
    }
    /* A deadline at or before now: poll again, which fires it. */
  }
  fail(cs, "rank %u: deadline never moves past %llu", r,
       (unsigned long long)now);
}

static void handle(collsim *cs, const event *ev) {
  dlcp_coll *op = cs->op[ev->rank];
  int rv = 0;
  dlcp_tstamp t = ev->t;
  switch ((enum ev_type)ev->type) {
  case EV_ARRIVE: {
    xfer *x = xfer_at(cs, ev->xfer);
    deliver(cs, x);
    /* The acknowledgement travels back; the receiver's CPU processes the
     * step when it is free (one step at a time). */
    event sent = {.t = t + cs->cfg.latency_ns, .type = EV_SENT,
                  .rank = x->m.src, .xfer = ev->xfer};
    push(cs, sent);
    dlcp_tstamp start = t;
    if (!cs->cfg.compute_parallel && cs->cpu_free[x->m.dst] > t) {
      start = cs->cpu_free[x->m.dst];
    }
    dlcp_tstamp fin = start + cs->cfg.compute_ns;
    if (!cs->cfg.slow_until_ns || start < cs->cfg.slow_until_ns) {
      fin += cs->cfg.slow_ns[x->m.dst];
    }
    if (fin > cs->cpu_free[x->m.dst]) {
      cs->cpu_free[x->m.dst] = fin;
    }
    event recv = {.t = fin, .type = EV_RECEIVED, .rank = x->m.dst,
                  .xfer = ev->xfer};
    push(cs, recv);
    return;
  }
  case EV_SENT: {
    const coll_xfer *x = coll_match_at(&cs->xfers, ev->xfer);
    rv = dlcp_coll_on_sent(op, x->dst, x->tag, 0, t);
    if (rv != 0) {
      fail(cs, "rank %u: on_sent %u tag %u: %d", ev->rank, x->dst, x->tag,
           rv);
    }
    break;
  }
  case EV_RECEIVED: {
    xfer *x = xfer_at(cs, ev->xfer);
    coll_match_retire(&cs->xfers, ev->xfer);
    rv = dlcp_coll_on_received(op, x->m.src, x->m.tag, 0, x->missing,
                               x->nmissing, t);
    if (rv != 0) {
      fail(cs, "rank %u: on_received %u tag %u: %d", ev->rank, x->m.src,
           x->m.tag, rv);
    }
    break;
  }
  case EV_NOTE:
    rv = dlcp_coll_on_note(op, ev->peer, ev->value, t);
    if (rv != 0) {
      fail(cs, "rank %u: on_note from %u value %llx: %d", ev->rank, ev->peer,
           (unsigned long long)ev->value, rv);
    }
    break;
  case EV_TIMER:
    if (cs->timer_at[ev->rank] != t) {
      return; /* superseded */
    }
    cs->timer_at[ev->rank] = DLCP_TSTAMP_NEVER;
    break;
  }
  process(cs, ev->rank, t);
}

int collsim_run(collsim *cs) {
  uint32_t n = cs->cfg.world;
  for (uint32_t r = 0; r < n; r++) {
    if (!cs->op[r]) {
      fail(cs, "rank %u has no operation", r);
      return -1;
    }
  }
  for (uint32_t r = 0; r < n && !cs->failed; r++) {
    process(cs, r, 0);
  }
  while (!cs->failed && cs->nheap > 0) {
    event ev = pop(cs);
    if (ev.t > cs->cfg.until_ns) {
      fail(cs, "virtual time limit %llu ns reached",
           (unsigned long long)cs->cfg.until_ns);
      break;
    }
    cs->st.events++;
    handle(cs, &ev);
  }
  if (cs->failed) {
    return -1;
  }
  for (uint32_t r = 0; r < n; r++) {
    if (cs->done_at[r] == DLCP_TSTAMP_NEVER) {
      uint32_t open = 0;
      for (uint32_t i = 0; i < coll_match_slots(&cs->xfers); i++) {
        const coll_xfer *x = coll_match_at(&cs->xfers, i);
        if ((x->src == r || x->dst == r) &&
            (x->state == COLL_XFER_POSTED || x->state == COLL_XFER_RUNNING)) {
          open++;
        }
      }
      fail(cs, "stalled: rank %u never finished (%u transfers open)", r,
           open);
      return -1;
    }
  }
  return 0;
}
