/*
 * agg_peers.c: cookies for the aggregation core's peers (agg_peers.h).
 */
#include "rt/agg_peers.h"

#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#define NONE UINT32_MAX
/* Set in every IPv6 cookie; an IPv4 cookie uses the low 48 bits. */
#define V6 (UINT64_C(1) << 63)
#define GEN_MAX 0x7fffffffu
#define CAP_MAX (1u << 24)

typedef struct peer {
  struct in6_addr addr;
  uint16_t port;     /* network order, as in the socket address */
  uint32_t scope_id; /* the interface of a link-local sender */
  uint32_t gen;      /* 1..GEN_MAX, advanced by every eviction */
  uint32_t next;     /* the next slot in this one's bucket, or NONE */
  bool ref;          /* seen since the clock hand last passed */
  bool pinned;
} peer;

struct dlcp_agg_peers {
  uint32_t mask; /* slots and buckets - 1 */
  uint32_t used; /* slots handed out so far (never shrinks) */
  uint32_t pinned;
  uint32_t hand;    /* the clock's next candidate for eviction */
  uint32_t *bucket; /* first slot of each chain, or NONE */
  peer *slot;
  uint64_t evicted;
  unsigned char key[crypto_shorthash_KEYBYTES];
};

int dlcp_agg_peers_new(dlcp_agg_peers **out, uint32_t cap) {
  *out = NULL;
  if (cap == 0 || cap > CAP_MAX) {
    return DLCP_ERR_INVALID_ARGUMENT;
  }
  if (sodium_init() < 0) {
    return DLCP_ERR_SYSTEM;
  }
  uint32_t n = 2;
  while (n < cap) {
    n *= 2;
  }
  dlcp_agg_peers *p = calloc(1, sizeof(*p));
  if (p == NULL || (p->bucket = malloc(n * sizeof(*p->bucket))) == NULL ||
      (p->slot = calloc(n, sizeof(*p->slot))) == NULL) {
    dlcp_agg_peers_del(p);
    return DLCP_ERR_NOMEM;
  }
  p->mask = n - 1;
  memset(p->bucket, 0xff, n * sizeof(*p->bucket));
  randombytes_buf(p->key, sizeof(p->key));
  *out = p;
  return 0;
}

void dlcp_agg_peers_del(dlcp_agg_peers *p) {
  if (p != NULL) {
    free(p->bucket);
    free(p->slot);
    free(p);
  }
}

static uint32_t bucket_of(const dlcp_agg_peers *p, const struct in6_addr *a,
                          uint16_t port, uint32_t scope_id) {
  unsigned char in[sizeof(*a) + sizeof(port) + sizeof(scope_id)];
  unsigned char h[crypto_shorthash_BYTES];
  uint64_t v;

  memcpy(in, a, sizeof(*a));
  memcpy(in + sizeof(*a), &port, sizeof(port));
  memcpy(in + sizeof(*a) + sizeof(port), &scope_id, sizeof(scope_id));
  crypto_shorthash(h, in, sizeof(in), p->key);
  memcpy(&v, h, sizeof(v));
  return (uint32_t)v & p->mask;
}

static uint64_t cookie_of_slot(const dlcp_agg_peers *p, uint32_t s) {
  return V6 | (uint64_t)p->slot[s].gen << 32 | s;
}

/* Takes slot |s| out of its bucket's chain. */
static void unlink_slot(dlcp_agg_peers *p, uint32_t s) {
  const peer *e = &p->slot[s];
  uint32_t *link = &p->bucket[bucket_of(p, &e->addr, e->port, e->scope_id)];

  while (*link != s) {
    link = &p->slot[*link].next;
  }
  *link = e->next;
}

/* A slot for a new sender: an unused one, else the clock's victim (the
 * first unpinned slot the hand finds unseen since it last passed). */
static uint32_t take_slot(dlcp_agg_peers *p) {
  if (p->used <= p->mask) {
    p->slot[p->used].gen = 1;
    return p->used++;
  }
  for (;;) {
    uint32_t s = p->hand;
    peer *e = &p->slot[s];

    p->hand = (s + 1) & p->mask;
    if (e->pinned) {
      continue;
    }
    if (e->ref) {
      e->ref = false;
      continue;
    }
    unlink_slot(p, s);
    e->gen = e->gen == GEN_MAX ? 1 : e->gen + 1;
    p->evicted++;
    return s;
  }
}

uint64_t dlcp_agg_peers_cookie(dlcp_agg_peers *p, const dlcp_sockaddr *a,
                               bool pin) {
  if (a->sa.sa_family != AF_INET6) {
    return (uint64_t)ntohl(a->in.sin_addr.s_addr) << 16 | ntohs(a->in.sin_port);
  }
  const struct in6_addr *addr = &a->in6.sin6_addr;
  uint16_t port = a->in6.sin6_port;
  uint32_t scope_id = a->in6.sin6_scope_id;
  uint32_t b = bucket_of(p, addr, port, scope_id);
  uint32_t s = p->bucket[b];

  while (s != NONE &&
         !(p->slot[s].port == port && p->slot[s].scope_id == scope_id &&
           memcmp(&p->slot[s].addr, addr, sizeof(*addr)) == 0)) {
    s = p->slot[s].next;
  }
  if (s == NONE) {
    s = take_slot(p);
    peer *e = &p->slot[s];
    e->addr = *addr;
    e->port = port;
    e->scope_id = scope_id;
    e->pinned = false;
    e->next = p->bucket[b];
    p->bucket[b] = s;
  }
  peer *e = &p->slot[s];
  e->ref = true;
  if (pin && !e->pinned && p->pinned < (p->mask + 1) / 2) {
    e->pinned = true;
    p->pinned++;
  }
  return cookie_of_slot(p, s);
}

bool dlcp_agg_peers_addr(const dlcp_agg_peers *p, uint64_t cookie,
                         dlcp_sockaddr *a) {
  memset(a, 0, sizeof(*a));
  if (!(cookie & V6)) {
    if (cookie >> 48 != 0) {
      return false;
    }
    a->in.sin_family = AF_INET;
    a->in.sin_addr.s_addr = htonl((uint32_t)(cookie >> 16));
    a->in.sin_port = htons((uint16_t)cookie);
    return true;
  }
  uint32_t s = (uint32_t)cookie;
  if (s >= p->used || cookie_of_slot(p, s) != cookie) {
    return false;
  }
  const peer *e = &p->slot[s];
  a->in6.sin6_family = AF_INET6;
  a->in6.sin6_addr = e->addr;
  a->in6.sin6_port = e->port;
  a->in6.sin6_scope_id = e->scope_id;
  return true;
}

uint64_t dlcp_agg_peers_evicted(const dlcp_agg_peers *p) {
  return p->evicted;
}
