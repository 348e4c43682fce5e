/*
 * ctrl.c: each peer's control stream, the TCP connection (or, for a peer
 * on this host, the control pieces of its shared-memory ring) that carries
 * MLT's START/PROBE/BITMAP/STOP/FINISH/EAGER messages and the
 * collectives' notes.  Outgoing messages are queued whole and written as
 * the socket allows; incoming bytes are framed by the preamble's length
 * and whole messages handed to the MLT connection or the collectives (in
 * a job with a secret each message carries an auth trailer, checked
 * first: a forged or replayed one is counted and dropped).  A
 * stream that stops parsing fails the peer (a byte stream cannot
 * resynchronise).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "rt/clock.h"
#include "rt/comm_internal.h"
#include "rt/errbuf.h"
#include "rt/loop.h"
#include "wire/wire.h"

int dlcp_rt_ctrl_flush(dlcp_comm *c, peer *p, dlcp_tstamp now) {
  /* A peer on this host gets the whole stream through its ring, in
   * slot-sized pieces; a full ring keeps the rest for the next service
   * pass (which comes back soon: see dlcp_rt_service). */
  while (p->shm.hdr && p->woff < p->wlen) {
    size_t piece = p->wlen - p->woff;
    if (piece > DLCP_SHM_SLOT_DATA) {
      piece = DLCP_SHM_SLOT_DATA;
    }
    if (!dlcp_shm_put(&p->shm, DLCP_SHM_CONTROL, p->wbuf + p->woff, piece,
                      NULL, 0)) {
      return 0;
    }
    p->woff += piece;
  }
  while (p->woff < p->wlen) {
    ssize_t n = send(p->tcp_fd, p->wbuf + p->woff, p->wlen - p->woff,
                     MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      if (errno == EAGAIN) {
        if (!p->want_write) {
          p->want_write = true;
          dlcp_loop_mod_fd(c->loop, p->tcp_fd,
                           DLCP_LOOP_READ | DLCP_LOOP_WRITE);
        }
        return 0;
      }
      /* The peer is gone; what it sent before going (a NOTE naming the
       * rank that failed first) still waits in our receive buffer. */
      char why[128];
      snprintf(why, sizeof(why), "control connection failed: %s",
               strerror(errno));
      dlcp_rt_ctrl_read(c, p, true, now);
      dlcp_rt_peer_fail(c, p, DLCP_ERR_PEER_CLOSED, why, now);
      return -1;
    }
    p->woff += (size_t)n;
  }
  p->woff = p->wlen = 0;
  if (p->want_write) {
    p->want_write = false;
    dlcp_loop_mod_fd(c->loop, p->tcp_fd, DLCP_LOOP_READ);
  }
  return 0;
}

void dlcp_rt_queue_control(dlcp_comm *c, peer *p, const uint8_t *msg,
                           size_t len, dlcp_tstamp now) {
  size_t trailer = c->rdzv.authenticated ? DLCP_AUTH_TRAILER_LEN : 0;
  if (p->dead_status != 0) {
    return;
  }
  if (p->wlen + len + trailer > p->wcap) {
    size_t cap = p->wcap ? p->wcap : 65536;
    while (cap < p->wlen + len + trailer) {
      cap *= 2;
    }
    uint8_t *b = realloc(p->wbuf, cap);
    if (!b) {
      dlcp_rt_peer_fail(c, p, DLCP_ERR_NOMEM, "out of memory queueing control", now);
      return;
    }
    p->wbuf = b;
    p->wcap = cap;
  }
  memcpy(p->wbuf + p->wlen, msg, len);
  if (trailer) {
    struct iovec m = {p->wbuf + p->wlen, len};
    dlcp_auth_seal(&c->rdzv.session,
                   dlcp_auth_stream(DLCP_AUTH_CONTROL, c->env.rank, p->rank),
                   ++p->ctl_tx, &m, 1, p->wbuf + p->wlen + len);
  }
  p->wlen += len + trailer;
}

/* In a job with a secret, whether the control message |msg| from |p|,
 * whose trailer follows it, is genuine and next in its stream; a forged
 * or replayed one is counted. */
static bool control_authentic(dlcp_comm *c, peer *p, const uint8_t *msg,
                              size_t len) {
  struct iovec m = {(void *)(uintptr_t)msg, len};
  uint64_t counter =
      dlcp_auth_check(&c->rdzv.session,
                      dlcp_auth_stream(DLCP_AUTH_CONTROL, p->rank, c->env.rank),
                      &m, 1, msg + len);
  if (counter == 0) {
    c->stats.auth_forged++;
    return false;
  }
  if (counter != p->ctl_rx + 1) {
    c->stats.auth_replayed++;
    return false;
  }
  p->ctl_rx = counter;
  return true;
}

/* Makes room for at least |more| bytes after what |p|'s control buffer
 * holds; false (and |p| failed) when memory is short. */
bool dlcp_rt_ctrl_reserve(dlcp_comm *c, peer *p, size_t more,
                            dlcp_tstamp now) {
  if (p->rcap - p->rlen >= more) {
    return true;
  }
  size_t cap = p->rcap ? p->rcap * 2 : 131072;
  while (cap - p->rlen < more) {
    cap *= 2;
  }
  uint8_t *b = realloc(p->rbuf, cap);
  if (!b) {
    dlcp_rt_peer_fail(c, p, DLCP_ERR_NOMEM, "out of memory reading control", now);
    return false;
  }
  p->rbuf = b;
  p->rcap = cap;
  return true;
}

/* Handles every whole control message of |buf| (|len| bytes of |p|'s
 * stream); returns the bytes they took (a partial message is left), or 0
 * once |p| has failed. */
static size_t parse(dlcp_comm *c, peer *p, const uint8_t *buf, size_t len,
                    dlcp_tstamp now) {
  size_t off = 0;
  while (len - off >= DLCP_WIRE_PREAMBLE_LEN) {
    dlcp_wire_preamble pre;
    int rv = dlcp_wire_peek(&pre, buf + off, len - off);
    if (rv != 0 || pre.type < DLCP_WIRE_START) {
      /* A byte stream that stops parsing cannot be resynchronised. */
      char why[128];
      snprintf(why, sizeof(why), "sent a malformed control message (%s)",
               dlcp_strerror(rv != 0 ? rv : DLCP_ERR_BAD_TYPE));
      dlcp_rt_peer_fail(c, p, DLCP_ERR_PEER_ABORTED, why, now);
      return 0;
    }
    size_t trailer = c->rdzv.authenticated ? DLCP_AUTH_TRAILER_LEN : 0;
    if (len - off < pre.len + trailer) {
      break;
    }
    bool genuine = !trailer || control_authentic(c, p, buf + off, pre.len);
    if (genuine && pre.type == DLCP_WIRE_NOTE) {
      dlcp_rt_coll_note(c, p, buf + off, pre.len, now);
    } else if (genuine) {
      dlcp_mlt_on_control(p->conn, buf + off, pre.len, now);
    }
    off += pre.len + trailer;
    if (p->dead_status != 0) {
      return 0;
    }
  }
  return off;
}

/* Handles every whole control message |p|'s buffer holds, keeping a
 * partial one for later. */
void dlcp_rt_ctrl_parse(dlcp_comm *c, peer *p, dlcp_tstamp now) {
  size_t off = parse(c, p, p->rbuf, p->rlen, now);
  if (p->dead_status != 0) {
    return;
  }
  memmove(p->rbuf, p->rbuf + off, p->rlen - off);
  p->rlen -= off;
}

void dlcp_rt_ctrl_take(dlcp_comm *c, peer *p, const uint8_t *piece,
                       size_t len, dlcp_tstamp now) {
  bool buffered = p->rlen > 0;
  if (!buffered) {
    /* The usual case: the piece begins with a message.  Whole messages
     * are handled where they lie (a 4 KiB eager tensor is then copied
     * once less); what is left is the start of a partial one. */
    size_t off = parse(c, p, piece, len, now);
    if (p->dead_status != 0) {
      return;
    }
    piece += off;
    len -= off;
  }
  if (len == 0 || !dlcp_rt_ctrl_reserve(c, p, len, now)) {
    return;
  }
  memcpy(p->rbuf + p->rlen, piece, len);
  p->rlen += len;
  if (buffered) {
    dlcp_rt_ctrl_parse(c, p, now);
  }
}

/* Reads and handles what the peer's control connection holds: until a
 * read comes back short (the rest, if any, arrived since: epoll reports it
 * again, and a read that would only say EAGAIN is saved), or with
 * |to_the_end| until it would block, ends or fails (then the peer fails). */
void dlcp_rt_ctrl_read(dlcp_comm *c, peer *p, bool to_the_end,
                         dlcp_tstamp now) {
  int fd = p->tcp_fd;
  while (p->dead_status == 0) {
    if (!dlcp_rt_ctrl_reserve(c, p, 65536, now)) {
      break;
    }
    size_t want = p->rcap - p->rlen;
    ssize_t n = recv(fd, p->rbuf + p->rlen, want, 0);
    if (n == 0) {
      /* A peer on this host sent its last words through its ring. */
      dlcp_rt_drain_peer_ring(c, p, DLCP_SHM_SLOTS, now);
      dlcp_rt_peer_fail(c, p, DLCP_ERR_PEER_CLOSED,
                "closed its control connection (exited or crashed)", now);
      break;
    }
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      if (errno != EAGAIN) {
        char why[128];
        snprintf(why, sizeof(why), "control connection failed: %s",
                 strerror(errno));
        dlcp_rt_peer_fail(c, p, DLCP_ERR_PEER_CLOSED, why, now);
      }
      break;
    }
    p->rlen += (size_t)n;
    dlcp_rt_ctrl_parse(c, p, now);
    if (p->dead_status != 0) {
      break;
    }
    if (!to_the_end && (size_t)n < want) {
      break;
    }
  }
}

void dlcp_rt_on_tcp(dlcp_loop *loop, int fd, uint32_t events, void *user) {
  (void)loop;
  (void)fd;
  peer *p = user;
  dlcp_comm *c = p->comm;
  pthread_mutex_lock(&c->mu);
  dlcp_tstamp now = dlcp_rt_now();
  if (events & DLCP_LOOP_WRITE) {
    dlcp_rt_ctrl_flush(c, p, now);
  }
  if (events & (DLCP_LOOP_READ | DLCP_LOOP_HUP | DLCP_LOOP_ERROR)) {
    dlcp_rt_ctrl_read(c, p, false, now);
  }
  dlcp_rt_service(c);
  pthread_mutex_unlock(&c->mu);
}
