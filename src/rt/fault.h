/*
 * fault.h: seeded fault injection for the datagram send path (a test
 * facility, set by DLCP_FAULT_* or the communicator config).  Each packet
 * draws one verdict; a held packet waits in a queue, as a copy, until the
 * caller sends it when it is due.
 */
#ifndef DLCP_RT_FAULT_H
#define DLCP_RT_FAULT_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dlcp/dlcp_types.h"
#include "proto/rng.h"
#include "rt/env.h"
#include "rt/net.h"

typedef enum dlcp_fault_verdict {
  DLCP_FAULT_PASS = 0,
  DLCP_FAULT_DROP,
  DLCP_FAULT_DUP,  /* send now and once more */
  DLCP_FAULT_HOLD, /* send after |*hold_ns| */
} dlcp_fault_verdict;

typedef struct dlcp_fault {
  dlcp_rt_fault cfg;
  dlcp_rng rng;
  bool active;
} dlcp_fault;

/* dlcp_fault_init seeds the generator from the configured seed and |salt|
 * (the rank), so ranks draw different but reproducible streams. */
void dlcp_fault_init(dlcp_fault *f, const dlcp_rt_fault *cfg, uint64_t salt);

/* dlcp_fault_decide draws the verdict for one packet.  Reordering holds a
 * packet for a uniform time below the configured delay, so packets sent
 * after it overtake it; delaying holds it for exactly the delay. */
dlcp_fault_verdict dlcp_fault_decide(dlcp_fault *f, dlcp_duration *hold_ns);

/* A held datagram: where it goes and a copy of it (it may outlive its
 * transfer). */
typedef struct dlcp_fault_held {
  struct dlcp_fault_held *next;
  dlcp_tstamp release_ns;
  uint32_t peer_rank;
  uint32_t path;
  dlcp_sockaddr to;
  size_t hdr_len, payload_len;
  int tos;
  uint8_t bytes[]; /* header then payload */
} dlcp_fault_held;

/* The held datagrams in release order (equal times: in holding order). */
typedef struct dlcp_fault_queue {
  dlcp_fault_held *head;
} dlcp_fault_queue;

/* dlcp_fault_hold queues a copy of the datagram |hdr| + |payload| until
 * |release_ns|.  Returns 0 or DLCP_ERR_NOMEM (nothing queued). */
int dlcp_fault_hold(dlcp_fault_queue *q, dlcp_tstamp release_ns,
                    uint32_t peer_rank, uint32_t path, const dlcp_sockaddr *to,
                    const uint8_t *hdr, size_t hdr_len, const void *payload,
                    size_t payload_len, int tos);

/* dlcp_fault_due unlinks and returns the first datagram due at |now|, or
 * NULL; the caller sends it and free()s it. */
dlcp_fault_held *dlcp_fault_due(dlcp_fault_queue *q, dlcp_tstamp now);

/* When the next held datagram is due, or DLCP_TSTAMP_NEVER. */
dlcp_tstamp dlcp_fault_next_release(const dlcp_fault_queue *q);

/* dlcp_fault_queue_clear drops every held datagram. */
void dlcp_fault_queue_clear(dlcp_fault_queue *q);

#endif /* DLCP_RT_FAULT_H */
