/*
 * The harness is a tiny discrete-event loop: a binary heap of message
 * deliveries ordered by (time, sequence), and two connections polled until
 * they have nothing to say.  Each step jumps to the earliest of the next
 * delivery and the connections' deadlines.  Randomness comes from one
 * seeded generator, consumed in a fixed order, so runs replay exactly.
 */
#include "netsim.h"

#include <stdlib.h>
#include <string.h>

#include "proto/rng.h"
#include "wire/wire.h"

typedef struct event {
  dlcp_tstamp at;
  dlcp_tstamp arrived; /* at the receiving host; |at| is when it reads it */
  uint64_t seq;
  int to_side;
  bool control;
  size_t len;
  uint8_t *bytes;
} event;

struct netsim {
  dlcp_mlt_conn *conn[2];
  netsim_link link[2]; /* link[s]: datagrams sent by side s */
  dlcp_tstamp link_free[2];
  dlcp_tstamp ctrl_last[2];
  dlcp_tstamp read_last[2]; /* link[s]'s receiver read its last datagram */
  dlcp_tstamp now;
  dlcp_rng rng;
  event *heap;
  size_t nheap, capheap;
  uint64_t seq;
  netsim_completion *done;
  size_t ndone, capdone;
  netsim_counters counters[2];
  uint64_t *notes[2]; /* values of the NOTEs each side's core handed up */
  size_t nnotes[2], capnotes[2];
  netsim_filter_fn filter;
  void *filter_user;
  uint64_t filter_index[2];
  uint8_t *buf;
  size_t buflen;
  bool failed;
  /* Each side when last polled dry: its input count and next deadline.
   * A side is polled again only after an input or at that deadline, as
   * the runtime does (dlcp_mlt_inputs), so every test holds the core to
   * that contract: work it would skip never gets done. */
  uint64_t polled_inputs[2];
  dlcp_tstamp due[2];
};

static bool earlier(const event *a, const event *b) {
  return a->at < b->at || (a->at == b->at && a->seq < b->seq);
}

static void heap_push(netsim *ns, event ev) {
  if (ns->nheap == ns->capheap) {
    ns->capheap = ns->capheap ? ns->capheap * 2 : 256;
    ns->heap = realloc(ns->heap, ns->capheap * sizeof(event));
    if (!ns->heap) {
      abort();
    }
  }
  ev.seq = ns->seq++;
  size_t i = ns->nheap++;
  while (i > 0) {
    size_t parent = (i - 1) / 2;
    if (!earlier(&ev, &ns->heap[parent])) {
      break;
    }
    ns->heap[i] = ns->heap[parent];
    i = parent;
  }
  ns->heap[i] = ev;
}

static event heap_pop(netsim *ns) {
  event top = ns->heap[0];
  event last = ns->heap[--ns->nheap];
  size_t i = 0;
  for (;;) {
    size_t l = 2 * i + 1, r = l + 1, m = i;
    const event *best = &last;
    if (l < ns->nheap && earlier(&ns->heap[l], best)) {
      m = l;
      best = &ns->heap[l];
    }
    if (r < ns->nheap && earlier(&ns->heap[r], best)) {
      m = r;
    }
    if (m == i) {
      break;
    }
    ns->heap[i] = ns->heap[m];
    i = m;
  }
  if (ns->nheap > 0) {
    ns->heap[i] = last;
  }
  return top;
}

netsim *netsim_new(const dlcp_mlt_config *cfg0, const dlcp_mlt_config *cfg1,
                   const netsim_link *link01, const netsim_link *link10,
                   uint64_t seed) {
  return netsim_new_mem(cfg0, cfg1, link01, link10, seed, NULL);
}

netsim *netsim_new_mem(const dlcp_mlt_config *cfg0, const dlcp_mlt_config *cfg1,
                       const netsim_link *link01, const netsim_link *link10,
                       uint64_t seed, const dlcp_mem *mem) {
  netsim *ns = calloc(1, sizeof(*ns));
  if (!ns) {
    return NULL;
  }
  ns->link[0] = *link01;
  ns->link[1] = *link10;
  dlcp_rng_seed(&ns->rng, seed);
  ns->buflen = DLCP_WIRE_CTRL_MAX;
  ns->buf = malloc(ns->buflen);
  if (!ns->buf || dlcp_mlt_conn_new(&ns->conn[0], cfg0, mem, 0) != 0 ||
      dlcp_mlt_conn_new(&ns->conn[1], cfg1, mem, 0) != 0) {
    netsim_del(ns);
    return NULL;
  }
  return ns;
}

void netsim_del(netsim *ns) {
  if (!ns) {
    return;
  }
  dlcp_mlt_conn_del(ns->conn[0]);
  dlcp_mlt_conn_del(ns->conn[1]);
  for (size_t i = 0; i < ns->nheap; i++) {
    free(ns->heap[i].bytes);
  }
  free(ns->heap);
  for (size_t i = 0; i < ns->ndone; i++) {
    free(ns->done[i].missing);
  }
  free(ns->done);
  free(ns->notes[0]);
  free(ns->notes[1]);
  free(ns->buf);
  free(ns);
}

dlcp_mlt_conn *netsim_conn(netsim *ns, int side) {
  return ns->conn[side];
}

dlcp_tstamp netsim_now(const netsim *ns) {
  return ns->now;
}

void netsim_set_filter(netsim *ns, netsim_filter_fn fn, void *user) {
  ns->filter = fn;
  ns->filter_user = user;
}

void netsim_set_link(netsim *ns, int side, const netsim_link *link) {
  ns->link[side] = *link;
}

static uint8_t *copy_message(const dlcp_mlt_action *act, const uint8_t *buf) {
  uint8_t *p = malloc(act->len + act->payload_len + 1);
  if (!p) {
    abort();
  }
  memcpy(p, buf, act->len);
  if (act->payload_len > 0) {
    memcpy(p + act->len, act->payload, act->payload_len);
  }
  return p;
}

static void send_datagram(netsim *ns, int side, const dlcp_mlt_action *act) {
  const netsim_link *l = &ns->link[side];
  netsim_counters *c = &ns->counters[side];
  size_t len = act->len + act->payload_len;
  c->datagrams_sent++;
  c->bytes_sent += len;
  dlcp_wire_preamble pre;
  if (dlcp_wire_peek(&pre, ns->buf, act->len) == 0 &&
      pre.type == DLCP_WIRE_DATA) {
    c->data_sent++;
  }
  if (ns->filter && !ns->filter(ns->filter_user, side, ns->buf, act->len,
                                ns->filter_index[side]++)) {
    c->datagrams_lost++;
    return;
  }
  /* The link serializes every datagram, lost or not: loss happens on the
   * wire, after the sender paid for it. */
  dlcp_tstamp start = ns->link_free[side] > ns->now ? ns->link_free[side]
                                                    : ns->now;
  if (start - ns->now > c->max_queue_ns) {
    c->max_queue_ns = start - ns->now;
  }
  dlcp_duration ser = l->rate_bps
                          ? (dlcp_duration)((double)len * 8e9 /
                                            (double)l->rate_bps)
                          : 0;
  ns->link_free[side] = start + ser;
  double draw_loss = dlcp_rng_unit(&ns->rng);
  double draw_dup = dlcp_rng_unit(&ns->rng);
  double draw_reorder = dlcp_rng_unit(&ns->rng);
  uint64_t draw_extra = dlcp_rng_next(&ns->rng);
  bool dead = act->route < 32 && (l->dead_paths >> act->route & 1u);
  if (dead || draw_loss < l->loss) {
    c->datagrams_lost++;
    return;
  }
  dlcp_tstamp at = start + ser + l->delay_ns;
  if (draw_reorder < l->reorder && l->reorder_ns > 0) {
    at += draw_extra % l->reorder_ns;
  }
  dlcp_tstamp arrived = at;
  if (l->host_jitter_ns > 0) {
    at += (draw_extra >> 32) % l->host_jitter_ns;
    at = at > ns->read_last[side] ? at : ns->read_last[side];
    ns->read_last[side] = at;
  }
  /* Drawn only when asked for, so every other run replays as before. */
  if (l->host_reorder > 0 && l->host_reorder_ns > 0 &&
      dlcp_rng_unit(&ns->rng) < l->host_reorder) {
    at += 1 + dlcp_rng_next(&ns->rng) % l->host_reorder_ns;
  }
  event ev = {.at = at, .arrived = arrived, .to_side = 1 - side,
              .control = false, .len = len};
  ev.bytes = copy_message(act, ns->buf);
  heap_push(ns, ev);
  if (draw_dup < l->dup) {
    c->datagrams_duplicated++;
    event copy = ev;
    copy.bytes = copy_message(act, ns->buf);
    copy.at = at + ser + 1;
    heap_push(ns, copy);
  }
}

static void send_control(netsim *ns, int side, const dlcp_mlt_action *act) {
  ns->counters[side].control_sent++;
  /* In order: never earlier than the previous control message. */
  dlcp_tstamp at = ns->now + ns->link[side].ctrl_delay_ns;
  if (at < ns->ctrl_last[side]) {
    at = ns->ctrl_last[side];
  }
  ns->ctrl_last[side] = at;
  event ev = {.at = at, .to_side = 1 - side, .control = true, .len = act->len};
  ev.bytes = copy_message(act, ns->buf);
  heap_push(ns, ev);
}

static void record_note(netsim *ns, int side, const uint8_t *msg,
                        size_t len) {
  dlcp_wire_note n;
  if (dlcp_wire_note_decode(&n, msg, len) != 0) {
    abort(); /* the core hands over whole, valid NOTEs only */
  }
  if (ns->nnotes[side] == ns->capnotes[side]) {
    ns->capnotes[side] = ns->capnotes[side] ? ns->capnotes[side] * 2 : 16;
    ns->notes[side] = realloc(ns->notes[side],
                              ns->capnotes[side] * sizeof(uint64_t));
    if (!ns->notes[side]) {
      abort();
    }
  }
  ns->notes[side][ns->nnotes[side]++] = n.value;
}

const uint64_t *netsim_notes(const netsim *ns, int side, size_t *n) {
  *n = ns->nnotes[side];
  return ns->notes[side];
}

static void record(netsim *ns, int side, const dlcp_mlt_completion *c) {
  if (ns->ndone == ns->capdone) {
    ns->capdone = ns->capdone ? ns->capdone * 2 : 16;
    ns->done = realloc(ns->done, ns->capdone * sizeof(*ns->done));
    if (!ns->done) {
      abort();
    }
  }
  netsim_completion *d = &ns->done[ns->ndone++];
  d->side = side;
  d->c = *c;
  d->missing = NULL;
  if (c->nmissing > 0) {
    d->missing = malloc(c->nmissing * sizeof(*d->missing));
    if (!d->missing) {
      abort();
    }
    memcpy(d->missing, c->missing, c->nmissing * sizeof(*d->missing));
  }
  d->c.missing = d->missing;
}

/* Polls |side| until it has nothing more to do now. */
static int drain(netsim *ns, int side) {
  for (;;) {
    dlcp_mlt_action act;
    int rv = dlcp_mlt_poll(ns->conn[side], &act, ns->buf, ns->buflen, ns->now);
    if (rv != 0) {
      return rv;
    }
    switch (act.type) {
    case DLCP_MLT_ACT_NONE:
      ns->polled_inputs[side] = dlcp_mlt_inputs(ns->conn[side]);
      ns->due[side] = dlcp_mlt_next_deadline(ns->conn[side]);
      return 0;
    case DLCP_MLT_ACT_DATAGRAM:
      send_datagram(ns, side, &act);
      break;
    case DLCP_MLT_ACT_CONTROL:
      send_control(ns, side, &act);
      break;
    case DLCP_MLT_ACT_COMPLETE:
      record(ns, side, &act.completion);
      break;
    case DLCP_MLT_ACT_NOTE:
      record_note(ns, side, ns->buf, act.len);
      break;
    default:
      return DLCP_ERR_INTERNAL;
    }
  }
}

int netsim_run(netsim *ns, size_t want, dlcp_tstamp until) {
  unsigned idle_spins = 0;
  while (ns->ndone < want) {
    for (int side = 0; side < 2; side++) {
      bool due = ns->polled_inputs[side] != dlcp_mlt_inputs(ns->conn[side]) ||
                 ns->due[side] <= ns->now;
      if (due && drain(ns, side) != 0) {
        return -1;
      }
    }
    if (ns->ndone >= want) {
      break;
    }
    dlcp_tstamp next = DLCP_TSTAMP_NEVER;
    if (ns->nheap > 0) {
      next = ns->heap[0].at;
    }
    for (int side = 0; side < 2; side++) {
      dlcp_tstamp d = dlcp_mlt_next_deadline(ns->conn[side]);
      if (d < next) {
        next = d;
      }
    }
    if (next == DLCP_TSTAMP_NEVER || next > until) {
      break;
    }
    if (next <= ns->now) {
      /* A deadline that has passed must be served by the polls above;
       * seeing it twice in a row without a delivery means the core says it
       * has work and then does none. */
      if (ns->nheap == 0 || ns->heap[0].at > ns->now) {
        if (++idle_spins > 2) {
          return -1;
        }
        continue;
      }
    } else {
      ns->now = next;
    }
    idle_spins = 0;
    while (ns->nheap > 0 && ns->heap[0].at <= ns->now) {
      event ev = heap_pop(ns);
      if (ev.control) {
        dlcp_mlt_on_control(ns->conn[ev.to_side], ev.bytes, ev.len, ns->now);
      } else {
        dlcp_mlt_arrival arr = {
            .ce = false,
            .at = ns->link[1 - ev.to_side].stamp_arrival ? ev.arrived : 0};
        dlcp_mlt_on_datagram_arrived(ns->conn[ev.to_side], ev.bytes, ev.len,
                                     &arr, ns->now);
      }
      free(ev.bytes);
    }
  }
  return (int)ns->ndone;
}

size_t netsim_ncompletions(const netsim *ns) {
  return ns->ndone;
}

const netsim_completion *netsim_completion_at(const netsim *ns, size_t i) {
  return i < ns->ndone ? &ns->done[i] : NULL;
}

const netsim_completion *netsim_find(const netsim *ns, int side,
                                     uint64_t user_data) {
  for (size_t i = 0; i < ns->ndone; i++) {
    if (ns->done[i].side == side && ns->done[i].c.user_data == user_data) {
      return &ns->done[i];
    }
  }
  return NULL;
}

const netsim_counters *netsim_counters_of(const netsim *ns, int side) {
  return &ns->counters[side];
}
