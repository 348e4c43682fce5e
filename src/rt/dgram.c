/*
 * dgram.c: the datagram path.  Sending: each MLT datagram draws a fault
 * verdict (fault.h), then goes into the peer's shared-memory ring when it
 * is on this host, or into the UDP batch (sendmmsg, payload from the
 * tensor, no copy).  Receiving: batches from the UDP sockets, or one by
 * one with DATA payloads read straight into the tensor (rx_in_place), and
 * the rings of the peers on this host, each datagram handed to the MLT
 * connection of the peer it came from (in a job with a secret, once its
 * auth trailer has checked).
 */
#include <stdlib.h>
#include <string.h>

#include "rt/clock.h"
#include "rt/comm_internal.h"
#include "rt/fault.h"
#include "rt/shm.h"
#include "rt/udp.h"
#include "wire/wire.h"

_Static_assert(DLCP_UDP_TRAILER_LEN == DLCP_AUTH_TRAILER_LEN,
               "the UDP batch holds one auth trailer per datagram");

/* One datagram towards |p|: into its shared-memory ring when it is on
 * this host, else into the UDP batch (|payload| then lives until the
 * flush), with an auth trailer in a job with a secret.  The rings carry
 * no trailer: only processes of this host's user can map them. */
static void emit(dlcp_comm *c, peer *p, uint32_t path, const dlcp_sockaddr *to,
                 const uint8_t *hdr, size_t hdr_len, const void *payload,
                 size_t payload_len, int tos) {
  uint8_t trailer[DLCP_AUTH_TRAILER_LEN];
  if (p->shm.hdr) {
    if (dlcp_shm_put(&p->shm, DLCP_SHM_DATAGRAM, hdr, hdr_len, payload,
                     payload_len)) {
      c->stats.shm_sent++;
    } else {
      c->stats.shm_full++; /* a full ring drops like a full socket */
    }
    return;
  }
  if (c->rdzv.authenticated) {
    struct iovec m[2] = {{(void *)(uintptr_t)hdr, hdr_len},
                         {(void *)(uintptr_t)payload, payload_len}};
    dlcp_auth_seal(&c->rdzv.session,
                   dlcp_auth_stream(DLCP_AUTH_DATAGRAM, c->env.rank, p->rank),
                   ++p->dgram_tx, m, 2, trailer);
  }
  dlcp_udp_queue(&c->udp, path, to, hdr, hdr_len, payload, payload_len,
                 c->rdzv.authenticated ? trailer : NULL, tos);
}

/* Sends what is queued, and wakes the peers on this host that went to
 * sleep before seeing what was written into their rings: a zero-length
 * datagram to their first socket. */
void dlcp_rt_flush_datagrams(dlcp_comm *c) {
  for (uint32_t i = 0; i < c->shm_in.admitted; i++) {
    peer *p = &c->peers[c->shm_in.src[i]];
    if (p->shm.hdr && dlcp_shm_needs_doorbell(&p->shm)) {
      c->stats.doorbells++;
      dlcp_udp_queue(&c->udp, 0, &p->udp[DLCP_UDP_RX_PATH], c->scratch, 0,
                     NULL, 0, NULL, 0);
    }
  }
  dlcp_udp_flush(&c->udp);
}

void dlcp_rt_send_datagram(dlcp_comm *c, peer *p, const dlcp_mlt_action *a,
                          dlcp_tstamp now) {
  uint32_t path = a->route % c->udp.k; /* the route's socket */
  const dlcp_sockaddr *to = &p->udp[DLCP_UDP_RX_PATH];
  int tos = dlcp_udp_tos(a->priority, a->ect);
  dlcp_duration hold = 0;
  dlcp_fault_verdict v = dlcp_fault_decide(&c->fault, &hold);
  c->stats.datagrams_sent++;
  switch (v) {
  case DLCP_FAULT_DROP:
    c->stats.fault_dropped++;
    return;
  case DLCP_FAULT_DUP:
    c->stats.fault_duplicated++;
    emit(c, p, path, to, c->scratch, a->len, a->payload, a->payload_len, tos);
    break;
  case DLCP_FAULT_HOLD: {
    if (dlcp_fault_hold(&c->held, now + hold, p->rank, path, to, c->scratch,
                        a->len, a->payload, a->payload_len, tos) == 0) {
      c->stats.fault_delayed++;
    }
    return;
  }
  case DLCP_FAULT_PASS:
  default:
    break;
  }
  emit(c, p, path, to, c->scratch, a->len, a->payload, a->payload_len, tos);
}

void dlcp_rt_release_held(dlcp_comm *c, dlcp_tstamp now) {
  dlcp_fault_held *h;
  while ((h = dlcp_fault_due(&c->held, now)) != NULL) {
    emit(c, &c->peers[h->peer_rank], h->path, &h->to, h->bytes, h->hdr_len,
         h->bytes + h->hdr_len, h->payload_len, h->tos);
    /* The payload pointer must live until the flush: flush now. */
    dlcp_rt_flush_datagrams(c);
    free(h);
  }
}

static peer *peer_by_addr(dlcp_comm *c, const dlcp_sockaddr *from) {
  for (uint32_t r = 0; r < c->env.world_size; r++) {
    peer *p = &c->peers[r];
    if (r == c->env.rank) {
      continue;
    }
    for (uint32_t k = 0; k < p->udp_k; k++) {
      if (dlcp_sockaddr_equal(&p->udp[k], from)) {
        return p;
      }
    }
  }
  return NULL;
}

/* In a job with a secret, whether datagram |d| from |p| (its trailer
 * last) is genuine and new; a forged or replayed one is counted.  Sets
 * |*len| to the length without the trailer. */
static bool datagram_authentic(dlcp_comm *c, peer *p, const uint8_t *d,
                               size_t *len) {
  if (*len < DLCP_AUTH_TRAILER_LEN) {
    c->stats.auth_forged++;
    return false;
  }
  *len -= DLCP_AUTH_TRAILER_LEN;
  struct iovec m = {(void *)(uintptr_t)d, *len};
  uint64_t counter = dlcp_auth_check(
      &c->rdzv.session,
      dlcp_auth_stream(DLCP_AUTH_DATAGRAM, p->rank, c->env.rank), &m, 1,
      d + *len);
  if (counter == 0) {
    c->stats.auth_forged++;
    return false;
  }
  if (!dlcp_replay_accept(&p->dgram_rx, counter)) {
    c->stats.auth_replayed++;
    return false;
  }
  return true;
}

/* A datagram read whole goes to the connection of the peer it came from;
 * others' are counted and dropped. */
static void deliver_datagram(dlcp_comm *c, const dlcp_sockaddr *from,
                             const uint8_t *d, size_t len,
                             const dlcp_mlt_arrival *arr, dlcp_tstamp now) {
  if (len == 0) {
    return; /* a doorbell: the service that follows reads the rings */
  }
  c->stats.datagrams_received++;
  peer *p = peer_by_addr(c, from);
  if (!p) {
    c->stats.dropped_foreign++;
    return;
  }
  if (c->rdzv.authenticated && !datagram_authentic(c, p, d, &len)) {
    return;
  }
  dlcp_mlt_on_datagram_arrived(p->conn, d, len, arr, now);
}

/* A datagram from |p|'s ring, where |p| may still write: the header is
 * copied before it is judged, DATA payloads go straight from the ring to
 * the tensor (or its reduction), anything else is decoded from a private
 * copy. */
static void deliver_from_ring(dlcp_comm *c, peer *p, const uint8_t *d,
                              size_t len, dlcp_tstamp now) {
  c->stats.datagrams_received++;
  uint8_t hdr[DLCP_WIRE_DATA_HDR_LEN];
  dlcp_wire_preamble pre;
  if (len > sizeof(hdr)) {
    memcpy(hdr, d, sizeof(hdr));
    if (dlcp_wire_peek(&pre, hdr, sizeof(hdr)) == 0 &&
        pre.type == DLCP_WIRE_DATA) {
      dlcp_mlt_on_data_apart(p->conn, hdr, sizeof(hdr), d + sizeof(hdr), len,
                             now);
      return;
    }
  }
  memcpy(c->udp.rx, d, len);
  dlcp_mlt_on_datagram(p->conn, c->udp.rx, len, now);
}

/* Handles up to |max| slots of |p|'s ring, in order: datagrams, and
 * pieces of its control stream. */
void dlcp_rt_drain_peer_ring(dlcp_comm *c, peer *p, uint32_t max,
                            dlcp_tstamp now) {
  for (uint32_t i = 0; c->shm_in.hdr && i < max && p->dead_status == 0;
       i++) {
    size_t len;
    dlcp_shm_kind kind;
    const uint8_t *d = dlcp_shm_peek(&c->shm_in, p->rank, &len, &kind);
    if (!d) {
      break;
    }
    if (kind == DLCP_SHM_DATAGRAM) {
      deliver_from_ring(c, p, d, len, now);
    } else {
      dlcp_rt_ctrl_take(c, p, d, len, now);
    }
    dlcp_shm_release(&c->shm_in, p->rank);
  }
}

/* Reads every ring of the peers on this host.  Bounded: returns true if
 * slots are left for the next call. */
bool dlcp_rt_drain_rings(dlcp_comm *c, dlcp_tstamp now) {
  if (!c->shm_in.hdr) {
    return false;
  }
  /* The sleeping flag stays as it is: this may be a thread that does not
   * drive the loop (a collective's start, the loop thread's first pass)
   * while the driver sleeps in epoll and needs the doorbell. */
  for (int pass = 0; pass < 4; pass++) {
    if (pass > 0) {
      now = dlcp_rt_now();
    }
    for (uint32_t i = 0; i < c->shm_in.admitted; i++) {
      dlcp_rt_drain_peer_ring(c, &c->peers[c->shm_in.src[i]], DLCP_SHM_SLOTS,
                              now);
    }
    if (!dlcp_shm_pending(&c->shm_in)) {
      return false;
    }
  }
  return true;
}

/* Reads datagrams one by one, each DATA payload straight into the posted
 * tensor (MLT's data_dest), saving the copy out of a receive buffer: two
 * system calls a datagram instead of one per batch, which pays only when
 * datagrams are large (see rx_in_place).  Bounded like the batch path. */
static void receive_in_place(dlcp_comm *c) {
  const uint32_t path = DLCP_UDP_RX_PATH;
  for (int i = 0; i < 16 * DLCP_UDP_BATCH; i++) {
    uint8_t hdr[DLCP_WIRE_DATA_HDR_LEN];
    dlcp_sockaddr from;
    ssize_t peeked = dlcp_udp_peek(&c->udp, path, hdr, sizeof(hdr), &from);
    if (peeked < 0) {
      break;
    }
    size_t len = (size_t)peeked;
    dlcp_tstamp now = dlcp_rt_now();
    peer *p = peer_by_addr(c, &from);
    uint8_t *dest = p && len > sizeof(hdr)
                        ? dlcp_mlt_data_dest(p->conn, hdr, sizeof(hdr), len)
                        : NULL;
    if (dest) {
      c->stats.datagrams_received++;
      size_t got = dlcp_udp_take_split(&c->udp, path, hdr, sizeof(hdr), dest,
                                       len - sizeof(hdr));
      dlcp_mlt_arrival arr = dlcp_udp_taken_arrival(&c->udp);
      dlcp_mlt_on_data_placed_arrived(p->conn, hdr, sizeof(hdr), got, &arr,
                                      now);
      continue;
    }
    size_t got;
    const uint8_t *d = dlcp_udp_take(&c->udp, path, &got);
    dlcp_mlt_arrival arr = dlcp_udp_taken_arrival(&c->udp);
    deliver_datagram(c, &from, d, got, &arr, now);
  }
}

/* Reads what the receiving socket holds, in batches.  Bounded: a flood
 * must not starve timers and the rings; epoll reports the rest again. */
static void receive_batches(dlcp_comm *c) {
  const uint32_t path = DLCP_UDP_RX_PATH;
  for (int batch = 0; batch < 16; batch++) {
    int n = dlcp_udp_recv(&c->udp, path);
    if (n == 0) {
      break;
    }
    dlcp_tstamp now = dlcp_rt_now();
    for (int i = 0; i < n; i++) {
      size_t len;
      const dlcp_sockaddr *from;
      const uint8_t *d = dlcp_udp_rx_data(&c->udp, i, &len, &from);
      size_t seg = dlcp_udp_rx_segment(&c->udp, i);
      dlcp_mlt_arrival arr = dlcp_udp_rx_arrival(&c->udp, i);
      /* A GRO message: its datagrams, in the order they arrived. */
      if (seg < len) {
        c->stats.datagrams_coalesced += (len + seg - 1) / seg;
      }
      size_t off = 0;
      do {
        size_t dlen = len - off < seg ? len - off : seg;
        deliver_datagram(c, from, d + off, dlen, &arr, now);
        off += dlen;
      } while (off < len);
    }
    if (n < DLCP_UDP_BATCH) {
      break;
    }
  }
}

void dlcp_rt_on_udp(dlcp_loop *loop, int fd, uint32_t events, void *user) {
  (void)loop;
  (void)fd;
  (void)events;
  dlcp_comm *c = user;
  pthread_mutex_lock(&c->mu);
  if (c->rx_in_place) {
    receive_in_place(c);
  } else {
    receive_batches(c);
  }
  dlcp_rt_service(c);
  pthread_mutex_unlock(&c->mu);
}
