/*
 * fault.c: fault injection's verdicts and its queue of held datagrams.
 *
 * One uniform draw per packet decides its fate, checked in a fixed order
 * (drop, duplicate, reorder, delay), so the probabilities are those
 * configured as long as they sum to at most 1, and a given seed replays
 * the same decisions for the same sequence of packets.
 */
#include "rt/fault.h"

#include <stdlib.h>
#include <string.h>

void dlcp_fault_init(dlcp_fault *f, const dlcp_rt_fault *cfg, uint64_t salt) {
  f->cfg = *cfg;
  dlcp_rng_seed(&f->rng, cfg->seed ^ (salt * 0x9E3779B97F4A7C15ull));
  f->active = cfg->drop > 0 || cfg->dup > 0 || cfg->reorder > 0 ||
              cfg->delay > 0;
}

dlcp_fault_verdict dlcp_fault_decide(dlcp_fault *f, dlcp_duration *hold_ns) {
  if (!f->active) {
    return DLCP_FAULT_PASS;
  }
  double u = dlcp_rng_unit(&f->rng);
  dlcp_duration delay = (dlcp_duration)f->cfg.delay_us * 1000u;
  if (u < f->cfg.drop) {
    return DLCP_FAULT_DROP;
  }
  u -= f->cfg.drop;
  if (u < f->cfg.dup) {
    return DLCP_FAULT_DUP;
  }
  u -= f->cfg.dup;
  if (u < f->cfg.reorder) {
    *hold_ns = delay > 0 ? dlcp_rng_below(&f->rng, delay) + 1 : 1;
    return DLCP_FAULT_HOLD;
  }
  u -= f->cfg.reorder;
  if (u < f->cfg.delay) {
    *hold_ns = delay;
    return DLCP_FAULT_HOLD;
  }
  return DLCP_FAULT_PASS;
}

int dlcp_fault_hold(dlcp_fault_queue *q, dlcp_tstamp release_ns,
                    uint32_t peer_rank, uint32_t path, const dlcp_sockaddr *to,
                    const uint8_t *hdr, size_t hdr_len, const void *payload,
                    size_t payload_len, int tos) {
  dlcp_fault_held *h = malloc(sizeof(*h) + hdr_len + payload_len);
  if (!h) {
    return DLCP_ERR_NOMEM;
  }
  h->release_ns = release_ns;
  h->peer_rank = peer_rank;
  h->path = path;
  h->to = *to;
  h->hdr_len = hdr_len;
  h->payload_len = payload_len;
  h->tos = tos;
  memcpy(h->bytes, hdr, hdr_len);
  if (payload_len) {
    memcpy(h->bytes + hdr_len, payload, payload_len);
  }
  dlcp_fault_held **pp = &q->head;
  while (*pp && (*pp)->release_ns <= release_ns) {
    pp = &(*pp)->next;
  }
  h->next = *pp;
  *pp = h;
  return 0;
}

dlcp_fault_held *dlcp_fault_due(dlcp_fault_queue *q, dlcp_tstamp now) {
  dlcp_fault_held *h = q->head;
  if (!h || h->release_ns > now) {
    return NULL;
  }
  q->head = h->next;
  return h;
}

dlcp_tstamp dlcp_fault_next_release(const dlcp_fault_queue *q) {
  return q->head ? q->head->release_ns : DLCP_TSTAMP_NEVER;
}

void dlcp_fault_queue_clear(dlcp_fault_queue *q) {
  while (q->head) {
    dlcp_fault_held *h = q->head;
    q->head = h->next;
    free(h);
  }
}
