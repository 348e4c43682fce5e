/*
 * inanet.c: the in-memory INA star network (see inanet.h).  Events sit in
 * a binary heap ordered by (time, sequence), so equal times keep their
 * insertion order and a seed replays exactly.  Every node (host or switch)
 * has one armed timer; a timer event whose time no longer matches the
 * armed one is stale and skipped.  Nodes are numbered as the filter sees
 * them: hosts from 0, switch s as -1 - s.
 */
#include "inanet.h"

#include <stdlib.h>
#include <string.h>

#include "proto/rng.h"

#define SWITCH (-1)
#define IS_SWITCH(node) ((node) < 0)
#define SW_OF(node) (-1 - (node))
#define BUFSZ (DLCP_AGG_HDR_LEN + 4u * DLCP_AGG_MAX_BLOCKS * 256u)

enum { EV_DELIVER, EV_TIMER };

typedef struct ev {
  dlcp_tstamp at;
  uint64_t seq;
  int kind;
  int to; /* host index, or -1 - switch index */
  int from;
  uint8_t ecn;
  uint8_t *data;
  size_t len;
} ev;

typedef struct inahost {
  dlcp_ina *h;
  uint32_t job;
  uint64_t token;
  bool done;
  int status;
  dlcp_tstamp end;
  dlcp_tstamp armed;
  int sw; /* its switch's node */
} inahost;

struct inanet {
  inanet_config cfg;
  dlcp_agg *sw[INANET_MAX_SWITCHES];
  dlcp_tstamp sw_armed[INANET_MAX_SWITCHES];
  int nsw;
  inahost hosts[INANET_MAX_HOSTS];
  int nhosts, ndone;
  ev *heap;
  size_t hn, hcap;
  uint64_t seq;
  dlcp_tstamp now;
  dlcp_rng rng;
  inanet_filter_fn filter;
  void *filter_user;
  uint64_t count[7];
  inanet_stats st;
  uint8_t *buf;
};

static bool ev_less(const ev *a, const ev *b) {
  return a->at < b->at || (a->at == b->at && a->seq < b->seq);
}

static int push(inanet *n, ev e) {
  size_t i;

  if (n->hn == n->hcap) {
    size_t cap = n->hcap ? 2u * n->hcap : 256u;
    ev *h = realloc(n->heap, cap * sizeof(*h));

    if (h == NULL) {
      return -1;
    }
    n->heap = h;
    n->hcap = cap;
  }
  e.seq = n->seq++;
  i = n->hn++;
  while (i > 0 && ev_less(&e, &n->heap[(i - 1) / 2])) {
    n->heap[i] = n->heap[(i - 1) / 2];
    i = (i - 1) / 2;
  }
  n->heap[i] = e;
  return 0;
}

static ev pop(inanet *n) {
  ev top = n->heap[0];
  ev last = n->heap[--n->hn];
  size_t i = 0;

  for (;;) {
    size_t c = 2 * i + 1;

    if (c >= n->hn) {
      break;
    }
    if (c + 1 < n->hn && ev_less(&n->heap[c + 1], &n->heap[c])) {
      c++;
    }
    if (!ev_less(&n->heap[c], &last)) {
      break;
    }
    n->heap[i] = n->heap[c];
    i = c;
  }
  if (n->hn > 0) {
    n->heap[i] = last;
  }
  return top;
}

/* Puts one datagram on the link from |from| to |to|. */
static void transmit(inanet *n, int from, int to, const uint8_t *buf,
                     size_t len) {
  uint8_t type = len > 3 ? buf[3] : 0;
  uint32_t group = len >= 20 ? (uint32_t)buf[16] | (uint32_t)buf[17] << 8 |
                                   (uint32_t)buf[18] << 16 |
                                   (uint32_t)buf[19] << 24
                             : 0;
  int copies = 1;

  if (type < DLCP_AGG_CONTRIB || type > DLCP_AGG_GRANT) {
    type = 0;
  }
  n->st.sent[type]++;
  if (n->filter != NULL &&
      !n->filter(n->filter_user, from, to, type, group, n->count[type]++)) {
    n->st.filtered++;
    return;
  }
  if (dlcp_rng_unit(&n->rng) < n->cfg.loss[type]) {
    n->st.lost[type]++;
    return;
  }
  if (dlcp_rng_unit(&n->rng) < n->cfg.dup) {
    n->st.dup[type]++;
    copies = 2;
  }
  for (int c = 0; c < copies; c++) {
    ev e = {0};

    e.kind = EV_DELIVER;
    e.to = to;
    e.from = from;
    e.at = n->now + n->cfg.delay_ns +
           (n->cfg.jitter_ns ? dlcp_rng_below(&n->rng, n->cfg.jitter_ns) : 0);
    e.ecn = (IS_SWITCH(to) && !IS_SWITCH(from) &&
             dlcp_rng_unit(&n->rng) < n->cfg.ce)
                ? DLCP_AGG_ECN_CE
                : 0;
    e.data = malloc(len);
    if (e.data == NULL) {
      return;
    }
    memcpy(e.data, buf, len);
    e.len = len;
    if (push(n, e) != 0) {
      free(e.data);
    }
  }
}

static void arm(inanet *n, int node, dlcp_tstamp t) {
  dlcp_tstamp *armed = IS_SWITCH(node) ? &n->sw_armed[SW_OF(node)]
                                       : &n->hosts[node].armed;
  ev e = {0};

  if (t == DLCP_TSTAMP_NEVER) {
    return;
  }
  t = t < n->now ? n->now : t;
  if (t == *armed) {
    return;
  }
  *armed = t;
  e.kind = EV_TIMER;
  e.to = node;
  e.at = t;
  (void)push(n, e);
}

static void run_switch(inanet *n, int node) {
  dlcp_agg *sw = n->sw[SW_OF(node)];
  dlcp_agg_send s;

  dlcp_agg_on_timer(sw, n->now);
  while (dlcp_agg_poll(sw, &s, n->buf, BUFSZ, n->now) == 1) {
    int to = s.addr >= INANET_SWITCH_COOKIE
                 ? -1 - (int)(s.addr - INANET_SWITCH_COOKIE)
                 : (int)s.addr;
    transmit(n, node, to, n->buf, s.len);
  }
  arm(n, node, dlcp_agg_next_deadline(sw));
}

static void run_host(inanet *n, int i) {
  inahost *ho = &n->hosts[i];
  dlcp_ina_action act;

  if (ho->done) {
    return;
  }
  for (;;) {
    int rv = dlcp_ina_poll(ho->h, &act, n->buf, BUFSZ, n->now);

    if (rv != 0 && ho->status == 0) {
      ho->status = rv;
    }
    if (act.type == DLCP_INA_ACT_SEND) {
      transmit(n, i, ho->sw, n->buf, act.len);
    } else if (act.type == DLCP_INA_ACT_DONE) {
      ho->done = true;
      ho->end = n->now;
      n->ndone++;
      return;
    } else {
      break;
    }
  }
  arm(n, i, dlcp_ina_next_deadline(ho->h));
}

static void deliver(inanet *n, const ev *e) {
  if (IS_SWITCH(e->to)) {
    uint64_t from = IS_SWITCH(e->from)
                        ? INANET_SWITCH_COOKIE + (uint64_t)SW_OF(e->from)
                        : (uint64_t)e->from;
    (void)dlcp_agg_on_packet(n->sw[SW_OF(e->to)], e->data, e->len, e->ecn,
                             from, n->now);
    run_switch(n, e->to);
    return;
  }
  if (n->hosts[e->to].done) {
    inahost *ho = &n->hosts[e->to];
    dlcp_ssize len = dlcp_ina_ack_for(n->buf, BUFSZ, e->data, e->len, ho->job,
                                      ho->token, NULL);

    if (len > 0) {
      n->st.strays_acked++;
      transmit(n, e->to, ho->sw, n->buf, (size_t)len);
    }
    return;
  }
  {
    int rv = dlcp_ina_on_packet(n->hosts[e->to].h, e->data, e->len, 0, n->now);

    if (dlcp_err_is_fatal(rv) && n->hosts[e->to].status == 0) {
      n->hosts[e->to].status = rv;
    }
  }
  run_host(n, e->to);
}

void inanet_config_default(inanet_config *cfg) {
  memset(cfg, 0, sizeof(*cfg));
  cfg->seed = 1;
  cfg->delay_ns = 2000;
}

inanet *inanet_new(const inanet_config *cfg, dlcp_agg *sw) {
  inanet *n = calloc(1, sizeof(*n));

  if (n == NULL) {
    return NULL;
  }
  n->buf = malloc(BUFSZ);
  if (n->buf == NULL) {
    free(n);
    return NULL;
  }
  n->cfg = *cfg;
  if (n->cfg.until_ns == 0) {
    n->cfg.until_ns = UINT64_C(60000000000);
  }
  n->sw[0] = sw;
  n->sw_armed[0] = DLCP_TSTAMP_NEVER;
  n->nsw = 1;
  dlcp_rng_seed(&n->rng, cfg->seed);
  return n;
}

void inanet_del(inanet *n) {
  if (n == NULL) {
    return;
  }
  for (size_t i = 0; i < n->hn; i++) {
    free(n->heap[i].data);
  }
  free(n->heap);
  free(n->buf);
  free(n);
}

int inanet_add_switch(inanet *n, dlcp_agg *sw) {
  if (n->nsw == INANET_MAX_SWITCHES) {
    return -1;
  }
  n->sw[n->nsw] = sw;
  n->sw_armed[n->nsw] = DLCP_TSTAMP_NEVER;
  return n->nsw++;
}

int inanet_add_host(inanet *n, dlcp_ina *h, uint32_t job, uint64_t token,
                    dlcp_tstamp start_ns) {
  return inanet_add_host_at(n, h, job, token, start_ns, 0);
}

int inanet_add_host_at(inanet *n, dlcp_ina *h, uint32_t job, uint64_t token,
                       dlcp_tstamp start_ns, int sw) {
  inahost *ho;

  if (n->nhosts == INANET_MAX_HOSTS || sw < 0 || sw >= n->nsw) {
    return -1;
  }
  ho = &n->hosts[n->nhosts];
  memset(ho, 0, sizeof(*ho));
  ho->h = h;
  ho->job = job;
  ho->token = token;
  ho->armed = DLCP_TSTAMP_NEVER;
  ho->sw = -1 - sw;
  arm(n, n->nhosts, start_ns);
  return n->nhosts++;
}

void inanet_set_filter(inanet *n, inanet_filter_fn fn, void *user) {
  n->filter = fn;
  n->filter_user = user;
}

int inanet_inject(inanet *n, int from, const uint8_t *buf, size_t len,
                  dlcp_tstamp at) {
  ev e = {0};

  e.kind = EV_DELIVER;
  e.to = SWITCH;
  e.from = from;
  e.at = at;
  e.data = malloc(len);
  if (e.data == NULL) {
    return -1;
  }
  memcpy(e.data, buf, len);
  e.len = len;
  return push(n, e);
}

static int run(inanet *n, bool drain) {
  while ((drain || n->ndone < n->nhosts) && n->hn > 0) {
    ev e = pop(n);

    if (e.at > n->cfg.until_ns) {
      free(e.data);
      break;
    }
    n->now = e.at;
    if (e.kind == EV_DELIVER) {
      deliver(n, &e);
      free(e.data);
    } else if (IS_SWITCH(e.to)) {
      if (e.at == n->sw_armed[SW_OF(e.to)]) {
        n->sw_armed[SW_OF(e.to)] = DLCP_TSTAMP_NEVER;
        run_switch(n, e.to);
      }
    } else if (e.at == n->hosts[e.to].armed) {
      n->hosts[e.to].armed = DLCP_TSTAMP_NEVER;
      run_host(n, e.to);
    }
  }
  return n->ndone;
}

int inanet_run(inanet *n) {
  return run(n, false);
}

int inanet_drain(inanet *n) {
  return run(n, true);
}

bool inanet_host_done(const inanet *n, int host) {
  return n->hosts[host].done;
}

dlcp_tstamp inanet_host_end(const inanet *n, int host) {
  return n->hosts[host].end;
}

int inanet_host_status(const inanet *n, int host) {
  return n->hosts[host].status;
}

dlcp_tstamp inanet_now(const inanet *n) {
  return n->now;
}

const inanet_stats *inanet_stats_of(const inanet *n) {
  return &n->st;
}
