#include "proto/pathset.h"

#include <string.h>

/* A spell is this many drain intervals, doubled per strike up to
 * 2^MAX_STRIKE times. */
#define SPELL_DRAINS 16u
#define MAX_STRIKE 8u

int dlcp_pathset_init(dlcp_pathset *ps, const dlcp_mem *mem, uint32_t n,
                      uint32_t routes) {
  memset(ps, 0, sizeof(*ps));
  ps->path = mem->calloc(n, sizeof(*ps->path), mem->user);
  if (!ps->path) {
    return DLCP_ERR_NOMEM;
  }
  ps->n = n;
  ps->routes = routes;
  return 0;
}

void dlcp_pathset_fini(dlcp_pathset *ps, const dlcp_mem *mem) {
  mem->free(ps->path, mem->user);
  ps->path = NULL;
}

/* Whether |h| lost at least a fifth of what it carried: the least that
 * leaves a path out (pathset.h says why), and what a path must stay
 * under to be forgiven its spells. */
static bool loses_a_fifth(const dlcp_path_health *h) {
  return (uint64_t)h->lost * 5 >= h->sent;
}

void dlcp_pathset_sent(dlcp_pathset *ps, uint32_t path) {
  ps->path[path].sent++;
  if (++ps->since_halving < DLCP_PATHSET_HALVING * ps->n) {
    return;
  }
  ps->since_halving = 0;
  for (uint32_t p = 0; p < ps->n; p++) {
    dlcp_path_health *h = &ps->path[p];
    h->sent /= 2;
    h->lost /= 2;
    /* A path that carried its share without standing out is forgiven
     * its earlier spells. */
    if (h->out_until == 0 && !loses_a_fifth(h)) {
      h->strikes = 0;
    }
  }
}

void dlcp_pathset_lost(dlcp_pathset *ps, uint32_t path) {
  ps->path[path].lost++;
}

bool dlcp_pathset_usable(const dlcp_pathset *ps, uint32_t path,
                         dlcp_tstamp now) {
  return ps->path[path].out_until <= now;
}

uint32_t dlcp_pathset_usable_from(const dlcp_pathset *ps, uint32_t path,
                                  dlcp_tstamp now) {
  for (uint32_t i = 0; i < ps->n; i++) {
    uint32_t p = (path + i) % ps->n;
    if (dlcp_pathset_usable(ps, p, now)) {
      return p;
    }
  }
  return path; /* cannot happen: one path always stays in */
}

uint32_t dlcp_pathset_route(const dlcp_pathset *ps, uint32_t path) {
  return path + ps->n * ps->path[path].route;
}

/* Moves |h| to its next route. */
static void reroute(dlcp_pathset *ps, dlcp_path_health *h) {
  h->route = (h->route + 1) % ps->routes;
  ps->reroutes++;
}

void dlcp_pathset_reroute(dlcp_pathset *ps, uint32_t path) {
  dlcp_path_health *h = &ps->path[path];
  if (ps->routes > 1) {
    reroute(ps, h);
    h->sent = h->lost = 0;
  }
}

/* Whether |h| lost at least REROUTE_LOSSES packets and half of what it
 * carried: on a route that bad, any other is likely better. */
static bool loses_half(const dlcp_path_health *h) {
  return h->lost >= DLCP_PATHSET_REROUTE_LOSSES &&
         (uint64_t)h->lost * 2 >= h->sent;
}

/* A path's loss rate as (lost + 1) / (sent + 1): a path that carried a
 * handful of packets and lost none is not taken for a perfect one (with
 * 5 % loss on every path, paths were left out against a reference of 16
 * packets and no loss, pathset_test). */
static bool loses_more(const dlcp_path_health *a, const dlcp_path_health *b) {
  return ((uint64_t)a->lost + 1) * ((uint64_t)b->sent + 1) >
         ((uint64_t)b->lost + 1) * ((uint64_t)a->sent + 1);
}

/* Whether |h| has lost at least MIN_LOSSES packets, a fifth of what it
 * carried and four times the loss rate of |ref|, the usable path that
 * loses least.  Against the least, not the average: with two paths of
 * four dead, the dead ones lose only three times the average. */
static bool stands_out(const dlcp_path_health *h, const dlcp_path_health *ref) {
  if (h->lost < DLCP_PATHSET_MIN_LOSSES || !loses_a_fifth(h)) {
    return false;
  }
  return (uint64_t)h->lost * ((uint64_t)ref->sent + 1) >=
         4 * ((uint64_t)ref->lost + 1) * h->sent;
}

void dlcp_pathset_judge(dlcp_pathset *ps, dlcp_duration drain,
                        dlcp_tstamp now) {
  const dlcp_path_health *ref = NULL;
  uint32_t usable = 0;
  for (uint32_t p = 0; p < ps->n; p++) {
    dlcp_path_health *h = &ps->path[p];
    if (h->out_until != 0 && h->out_until <= now) {
      /* Its spell is over: it rejoins afresh. */
      h->out_until = 0;
      h->sent = h->lost = 0;
    }
    if (h->out_until == 0) {
      usable++;
      if (!ref || loses_more(ref, h)) {
        ref = h;
      }
    }
  }
  for (uint32_t p = 0; ref && p < ps->n && usable > 1; p++) {
    dlcp_path_health *h = &ps->path[p];
    if (h == ref || h->out_until != 0 || !stands_out(h, ref)) {
      continue;
    }
    uint32_t strike = h->strikes < MAX_STRIKE ? h->strikes : MAX_STRIKE;
    dlcp_duration spell = (dlcp_duration)SPELL_DRAINS * drain << strike;
    h->out_until = now + (spell > 0 ? spell : 1);
    h->strikes++;
    ps->spells++;
    usable--;
    if (ps->routes > 1) {
      reroute(ps, h);
    }
  }
  for (uint32_t p = 0; ps->routes > 1 && p < ps->n; p++) {
    dlcp_path_health *h = &ps->path[p];
    if (h->out_until == 0 && loses_half(h)) {
      dlcp_pathset_reroute(ps, p);
    }
  }
}
