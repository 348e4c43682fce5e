/*
 * match.c: the collective transfer matcher (match.h): a chained hash table
 * over one array of recycled driver records.
 */
#include "coll/match.h"

#include <string.h>

#define MATCH_MIN_BUCKETS 1024u
#define MATCH_MIN_RECORDS 1024u

static uint32_t match_hash(const coll_match *m, uint32_t job, uint32_t iter,
                           uint32_t src, uint32_t dst, uint32_t tag) {
  uint64_t h = ((uint64_t)job << 48) ^ ((uint64_t)iter << 32) ^
               ((uint64_t)src << 20) ^ ((uint64_t)dst << 8) ^
               ((uint64_t)tag * 0x9E3779B97F4A7C15ull);
  h ^= h >> 29;
  h *= 0xBF58476D1CE4E5B9ull;
  h ^= h >> 32;
  return (uint32_t)h & (m->nbucket - 1);
}

static uint32_t *chain_of(const coll_match *m, const coll_xfer *x) {
  return &m->bucket[match_hash(m, x->job, x->iter, x->src, x->dst, x->tag)];
}

static int grow_buckets(coll_match *m) {
  uint32_t nb = m->nbucket ? m->nbucket * 2 : MATCH_MIN_BUCKETS;
  uint32_t *b = m->mem->malloc(nb * sizeof(*b), m->mem->user);
  if (!b) {
    return DLCP_ERR_NOMEM;
  }
  memset(b, 0xff, nb * sizeof(*b));
  m->mem->free(m->bucket, m->mem->user);
  m->bucket = b;
  m->nbucket = nb;
  for (uint32_t i = 0; i < m->nrec; i++) {
    coll_xfer *x = coll_match_at(m, i);
    if (x->state != COLL_XFER_FREE) {
      uint32_t *head = chain_of(m, x);
      x->next = *head;
      *head = i;
    }
  }
  return 0;
}

int coll_match_init(coll_match *m, const dlcp_mem *mem, size_t rec_size) {
  memset(m, 0, sizeof(*m));
  m->mem = mem ? mem : dlcp_mem_default();
  m->rec_size = rec_size < sizeof(coll_xfer) ? sizeof(coll_xfer) : rec_size;
  m->free_head = COLL_MATCH_NONE;
  return grow_buckets(m);
}

void coll_match_free(coll_match *m) {
  if (!m->mem) {
    return; /* never initialized (zeroed) */
  }
  m->mem->free(m->rec, m->mem->user);
  m->mem->free(m->bucket, m->mem->user);
  m->rec = NULL;
  m->bucket = NULL;
  m->nrec = m->caprec = m->nbucket = m->used = 0;
}

/* The live record with this key; |*spent| tells whether a retired one was
 * passed on the way. */
static uint32_t lookup(const coll_match *m, uint32_t job, uint32_t iter,
                       uint32_t src, uint32_t dst, uint32_t tag, bool *spent) {
  *spent = false;
  for (uint32_t i = m->bucket[match_hash(m, job, iter, src, dst, tag)];
       i != COLL_MATCH_NONE;) {
    const coll_xfer *x = coll_match_at(m, i);
    if (x->tag == tag && x->src == src && x->dst == dst && x->iter == iter &&
        x->job == job) {
      if (x->state != COLL_XFER_DONE) {
        return i;
      }
      *spent = true;
    }
    i = x->next;
  }
  return COLL_MATCH_NONE;
}

uint32_t coll_match_find(const coll_match *m, uint32_t job, uint32_t iter,
                         uint32_t src, uint32_t dst, uint32_t tag) {
  bool spent;
  return lookup(m, job, iter, src, dst, tag, &spent);
}

static uint32_t create(coll_match *m, uint32_t job, uint32_t iter,
                       uint32_t src, uint32_t dst, uint32_t tag) {
  if (m->used + 1 > m->nbucket && grow_buckets(m) != 0) {
    return COLL_MATCH_NONE;
  }
  uint32_t i = m->free_head;
  if (i != COLL_MATCH_NONE) {
    m->free_head = coll_match_at(m, i)->next;
  } else {
    if (m->nrec == m->caprec) {
      uint32_t ncap = m->caprec ? m->caprec * 2 : MATCH_MIN_RECORDS;
      unsigned char *n =
          m->mem->realloc(m->rec, (size_t)ncap * m->rec_size, m->mem->user);
      if (!n) {
        return COLL_MATCH_NONE;
      }
      memset(n + (size_t)m->caprec * m->rec_size, 0,
             (size_t)(ncap - m->caprec) * m->rec_size);
      m->rec = n;
      m->caprec = ncap;
    }
    i = m->nrec++;
  }
  coll_xfer *x = coll_match_at(m, i);
  memset(x, 0, sizeof(*x));
  x->job = job;
  x->iter = iter;
  x->src = src;
  x->dst = dst;
  x->tag = tag;
  x->state = COLL_XFER_POSTED;
  uint32_t *head = chain_of(m, x);
  x->next = *head;
  *head = i;
  m->used++;
  return i;
}

coll_match_result coll_match_post(coll_match *m, uint32_t job, uint32_t iter,
                                  uint32_t self, const dlcp_coll_action *a,
                                  uint32_t *index) {
  bool is_send = a->type == DLCP_COLL_ACT_SEND;
  uint32_t src = is_send ? self : a->peer;
  uint32_t dst = is_send ? a->peer : self;
  bool spent;
  uint32_t i = lookup(m, job, iter, src, dst, a->tag, &spent);
  if (i == COLL_MATCH_NONE) {
    i = create(m, job, iter, src, dst, a->tag);
    if (i == COLL_MATCH_NONE) {
      return COLL_MATCH_NOMEM;
    }
  }
  *index = i;
  coll_xfer *x = coll_match_at(m, i);
  if (spent) {
    return COLL_MATCH_REUSED;
  }
  if ((is_send && x->has_send) || (!is_send && x->has_recv)) {
    return COLL_MATCH_DUPLICATE;
  }
  if ((x->has_send || x->has_recv) && x->bytes != a->bytes) {
    return COLL_MATCH_SIZE_MISMATCH;
  }
  x->bytes = a->bytes;
  if (is_send) {
    x->has_send = true;
    x->send_buf = a->send_buf;
    x->stage = a->stage;
  } else {
    x->has_recv = true;
    x->recv_buf = a->recv_buf;
    x->recv_place = a->recv_place;
    x->recv_place_user = a->recv_place_user;
    x->recv_place_unit = a->recv_place_unit;
    x->loss_bound = a->loss_bound;
  }
  if (!(x->has_send && x->has_recv)) {
    return COLL_MATCH_WAITING;
  }
  x->state = COLL_XFER_RUNNING;
  return COLL_MATCH_READY;
}

void coll_match_deliver(const coll_xfer *x, const dlcp_coll_range *holes,
                        size_t nholes) {
  uint8_t *dst = x->recv_buf;
  const uint8_t *src = x->send_buf;
  if (!x->recv_place) {
    memcpy(dst, src, (size_t)x->bytes);
    for (size_t i = 0; i < nholes; i++) {
      memset(dst + holes[i].offset, 0, (size_t)holes[i].len);
    }
    return;
  }
  uint64_t unit = x->recv_place_unit, at = 0;
  for (size_t i = 0; i <= nholes; i++) {
    uint64_t end = i < nholes ? holes[i].offset / unit * unit : x->bytes;
    if (end > at) {
      x->recv_place(x->recv_place_user, dst + at, src + at,
                    (size_t)(end - at));
    }
    if (i < nholes) {
      uint64_t past = holes[i].offset + holes[i].len;
      past = (past + unit - 1) / unit * unit;
      at = past > at ? past : at;
    }
  }
}

void coll_match_remove(coll_match *m, uint32_t i) {
  coll_xfer *x = coll_match_at(m, i);
  uint32_t *pp = chain_of(m, x);
  while (*pp != i) {
    pp = &coll_match_at(m, *pp)->next;
  }
  *pp = x->next;
  x->state = COLL_XFER_FREE;
  x->next = m->free_head;
  m->free_head = i;
  m->used--;
}

void coll_match_retire(coll_match *m, uint32_t i) {
  coll_match_at(m, i)->state = COLL_XFER_DONE;
}

int coll_match_cancel(coll_match *m, uint32_t job, uint32_t iter,
                      uint32_t src, uint32_t self, uint32_t tag) {
  uint32_t i = coll_match_find(m, job, iter, src, self, tag);
  if (i == COLL_MATCH_NONE || coll_match_at(m, i)->state != COLL_XFER_POSTED ||
      coll_match_at(m, i)->has_send) {
    return DLCP_ERR_UNKNOWN_TRANSFER;
  }
  coll_match_remove(m, i);
  return 0;
}
