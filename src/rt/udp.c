/*
 * Datagram I/O with sendmmsg/recvmmsg.  The header of each queued datagram
 * is copied into the batch (44 bytes); the payload is sent straight from
 * the application's tensor through the second iovec, so the runtime never
 * copies gradient data on the send side.  The TOS byte travels as IP_TOS
 * (IPv6: IPV6_TCLASS) ancillary data per message, so one socket carries every
 * priority.  Runs of equal datagrams (a transfer's full segments) go as one UDP
 * GSO message: the kernel builds one socket buffer for the run and cuts it into
 * the datagrams at the device, or in software just before the qdisc when the
 * device cannot (the testbed's veths), so every queue and drop downstream still
 * sees the real packets (docs/runtime.md, "Datagrams", for what it saves).
 */
#include "rt/udp.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/ip.h>
#include <netinet/udp.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rt/clock.h"
#include "rt/net.h"

int dlcp_udp_open(dlcp_udp *u, const char *ip, uint32_t k, dlcp_errbuf *eb) {
  memset(u, 0, sizeof(*u));
  for (uint32_t i = 0; i < DLCP_ENV_MAX_PATHS; i++) {
    u->fd[i] = -1;
  }
  u->k = k;
  u->out = calloc(1, sizeof(*u->out));
  u->rx = malloc((size_t)DLCP_UDP_BATCH * DLCP_UDP_RX_BUF);
  if (!u->out || !u->rx) {
    dlcp_udp_close(u);
    return dlcp_errbuf_set(eb, DLCP_ERR_NOMEM, "out of memory");
  }
  dlcp_sockaddr sin;
  if (dlcp_sockaddr_parse(&sin, ip, 0) != 0) {
    dlcp_udp_close(u);
    return dlcp_errbuf_set(eb, DLCP_ERR_CONFIG,
                           "local address '%s': expected an IPv4 or IPv6 "
                           "address",
                           ip);
  }
  u->family = sin.sa.sa_family;
  for (uint32_t i = 0; i < k; i++) {
    int fd = socket(u->family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0 || bind(fd, &sin.sa, dlcp_sockaddr_len(&sin)) != 0) {
      int e = errno;
      if (fd >= 0) {
        close(fd);
      }
      dlcp_udp_close(u);
      return dlcp_errbuf_set(eb, -e, "UDP socket on %s: %s", ip, strerror(e));
    }
    dlcp_net_set_buffers(fd, 16 << 20, 16 << 20);
    /* The TOS byte of every datagram, for the ECN bits a switch set, and
     * the time it reached the host, to tell the network's delay from this
     * host's (protocol.md, "Congestion control"). */
    int on = 1;
    setsockopt(fd, dlcp_net_tclass_level(u->family),
               dlcp_net_recv_tclass_opt(u->family), &on, sizeof(on));
    setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPNS, &on, sizeof(on));
    /* The socket's drop count with each datagram: a datagram its kernel
     * dropped for a full buffer is lost at this host (its process did
     * not run), not in the network, and is reported as such. */
    (void)dlcp_net_count_drops(fd);
    dlcp_sockaddr bound;
    socklen_t len = sizeof(bound);
    getsockname(fd, &bound.sa, &len);
    u->fd[i] = fd;
    u->port[i] = dlcp_net_addr_port(&bound.sa);
  }
  for (int i = 0; i < DLCP_UDP_BATCH; i++) {
    u->rx_iov[i].iov_base = u->rx + (size_t)i * DLCP_UDP_RX_BUF;
    u->rx_iov[i].iov_len = DLCP_UDP_RX_BUF;
  }
  return 0;
}

void dlcp_udp_close(dlcp_udp *u) {
  for (uint32_t i = 0; i < DLCP_ENV_MAX_PATHS; i++) {
    if (u->fd[i] >= 0) {
      close(u->fd[i]);
      u->fd[i] = -1;
    }
  }
  free(u->out);
  free(u->rx);
  u->out = NULL;
  u->rx = NULL;
}

int dlcp_udp_tos(uint8_t priority, bool ect) {
  int dscp = (7 - (priority & 7)) << 3;
  return dscp << 2 | (ect ? 0x2 : 0x0);
}

/* Whether queued datagram |j| may join the GSO run that starts at |i|
 * and holds |count| datagrams of |bytes| so far. */
static bool joins_run(const dlcp_udp_out *o, size_t i, size_t j,
                      uint32_t count, size_t bytes) {
  return count < DLCP_NET_GSO_MAX && o->len[j] <= o->len[i] &&
         o->len[j - 1] == o->len[i] &&
         bytes + o->len[j] <= DLCP_NET_GSO_BYTES && o->tos[j] == o->tos[i] &&
         dlcp_sockaddr_equal(&o->to[j], &o->to[i]);
}

/* Merges the queued datagrams into gmsg: each run of equal ones into one
 * message with their iovecs in sequence and a UDP_SEGMENT of their length.
 * Returns the number of messages. */
static size_t merge_runs(dlcp_udp_out *o, int family) {
  size_t nmsg = 0, niov = 0;
  for (size_t i = 0; i < o->n;) {
    uint32_t count = 1;
    size_t bytes = o->len[i];
    while (i + count < o->n && joins_run(o, i, i + count, count, bytes)) {
      bytes += o->len[i + count];
      count++;
    }
    struct msghdr *m = &o->gmsg[nmsg].msg_hdr;
    *m = o->msg[i].msg_hdr;
    if (count > 1) {
      m->msg_iov = &o->giov[niov];
      m->msg_iovlen = 0;
      for (uint32_t k = 0; k < count; k++) {
        const struct msghdr *d = &o->msg[i + k].msg_hdr;
        for (size_t v = 0; v < d->msg_iovlen; v++) {
          o->giov[niov++] = d->msg_iov[v];
          m->msg_iovlen++;
        }
      }
      m->msg_control = o->gctl[nmsg].buf;
      m->msg_controllen = sizeof(o->gctl[nmsg].buf);
      uint16_t seg = (uint16_t)o->len[i];
      struct cmsghdr *c = dlcp_net_put_cmsg(
          CMSG_FIRSTHDR(m), dlcp_net_tclass_level(family),
          dlcp_net_tclass_opt(family), &o->tos[i], sizeof(int));
      dlcp_net_put_cmsg(c, SOL_UDP, UDP_SEGMENT, &seg, sizeof(seg));
    }
    o->gcount[nmsg++] = count;
    i += count;
  }
  return nmsg;
}

/* Sends |n| messages of |msgs|, which hold |count[k]| datagrams each
 * (one each without |count|).  Returns the index of a message of several
 * datagrams that the kernel refused as such (dlcp_net_gso_refused),
 * unsent with the ones after it; else |n|. */
static size_t send_msgs(dlcp_udp *u, uint32_t path, struct mmsghdr *msgs,
                        const uint32_t *count, size_t n) {
  size_t done = 0;
  while (done < n) {
    int k = sendmmsg(u->fd[path], msgs + done, (unsigned)(n - done), 0);
    if (k < 0) {
      if (errno == EINTR) {
        continue;
      }
      if (count != NULL && count[done] > 1 && dlcp_net_gso_refused(errno)) {
        return done;
      }
      /* EAGAIN (buffer full) or a transient error: the rest is lost like a
       * tail drop and MLT's rounds recover it. */
      for (size_t r = done; r < n; r++) {
        u->send_errors += count ? count[r] : 1;
      }
      return n;
    }
    for (size_t r = done; r < done + (size_t)k; r++) {
      u->sent += count ? count[r] : 1;
    }
    done += (size_t)k;
  }
  return n;
}

/* The batch went (or was dropped): nothing queued, no copies held. */
static void emptied(dlcp_udp_out *o) {
  o->n = 0;
  o->whole_used = 0;
}

static void flush_batch(dlcp_udp *u) {
  dlcp_udp_out *o = u->out;
  uint32_t path = u->out_path;
  size_t nmsg = u->gso_off ? o->n : merge_runs(o, u->family);
  if (u->gso_off || nmsg == o->n) {
    send_msgs(u, path, o->msg, NULL, o->n);
    emptied(o);
    return;
  }
  size_t refused = send_msgs(u, path, o->gmsg, o->gcount, nmsg);
  if (refused < nmsg) {
    /* Datagram by datagram from the refused message on, and from now on:
     * a kernel without UDP GSO refuses the first run, a DLCP_SEGMENT
     * above a path's MTU the first run of such segments, whenever it
     * comes; sent as runs, every one of them would be lost. */
    u->gso_off = true;
    size_t start = 0;
    for (size_t r = 0; r < refused; r++) {
      start += o->gcount[r];
    }
    send_msgs(u, path, o->msg + start, NULL, o->n - start);
  }
  emptied(o);
}

void dlcp_udp_flush(dlcp_udp *u) {
  if (u->out->n > 0) {
    flush_batch(u);
  }
}

void dlcp_udp_queue(dlcp_udp *u, uint32_t path, const dlcp_sockaddr *to,
                    const uint8_t *hdr, size_t hdr_len, const void *payload,
                    size_t payload_len, const uint8_t *trailer, int tos) {
  path %= u->k;
  dlcp_udp_out *o = u->out;
  /* A datagram with no separate payload and more than a header (a control
   * datagram, CDATA, up to 64 KB) is copied whole: the pieces of a long
   * control message then leave in one batch (as one GSO message) instead
   * of a system call each. */
  bool whole = hdr_len > DLCP_UDP_HDR_MAX;
  /* Datagrams leave in the order they were queued: what waits for another
   * socket goes first, so one path's batch never overtakes another's
   * (which a receiver would measure as reordering, and wait out). */
  if (o->n == DLCP_UDP_BATCH || (o->n > 0 && path != u->out_path) ||
      (whole && o->whole_used + hdr_len > DLCP_UDP_WHOLE_MAX)) {
    flush_batch(u);
  }
  u->out_path = path;
  size_t i = o->n++;
  uint8_t *copy = whole ? o->whole + o->whole_used : o->hdr[i];
  memcpy(copy, hdr, hdr_len);
  o->whole_used += whole ? hdr_len : 0;
  o->to[i] = *to;
  o->len[i] = hdr_len + payload_len + (trailer ? DLCP_UDP_TRAILER_LEN : 0);
  o->tos[i] = tos;
  /* The bytes are only read by the kernel; the cast drops const for the
   * iovec's sake. */
  size_t niov = 0;
  o->iov[i][niov].iov_base = copy;
  o->iov[i][niov++].iov_len = hdr_len;
  if (payload_len > 0) {
    o->iov[i][niov].iov_base = (void *)(uintptr_t)payload;
    o->iov[i][niov++].iov_len = payload_len;
  }
  if (trailer) {
    memcpy(o->trailer[i], trailer, DLCP_UDP_TRAILER_LEN);
    o->iov[i][niov].iov_base = o->trailer[i];
    o->iov[i][niov++].iov_len = DLCP_UDP_TRAILER_LEN;
  }
  struct msghdr *m = &o->msg[i].msg_hdr;
  memset(m, 0, sizeof(*m));
  m->msg_name = &o->to[i];
  m->msg_namelen = dlcp_sockaddr_len(&o->to[i]);
  m->msg_iov = o->iov[i];
  m->msg_iovlen = niov;
  m->msg_control = o->ctl[i].buf;
  m->msg_controllen = sizeof(o->ctl[i].buf);
  dlcp_net_put_cmsg(CMSG_FIRSTHDR(m), dlcp_net_tclass_level(u->family),
                    dlcp_net_tclass_opt(u->family), &tos, sizeof(tos));
}

int dlcp_udp_enable_gro(dlcp_udp *u) {
  int on = 1;
  if (setsockopt(u->fd[DLCP_UDP_RX_PATH], SOL_UDP, UDP_GRO, &on,
                 sizeof(on)) != 0) {
    return -errno;
  }
  return 0;
}

int dlcp_udp_recv(dlcp_udp *u, uint32_t path) {
  for (int i = 0; i < DLCP_UDP_BATCH; i++) {
    struct msghdr *m = &u->rx_msg[i].msg_hdr;
    memset(m, 0, sizeof(*m));
    m->msg_name = &u->rx_from[i];
    m->msg_namelen = sizeof(u->rx_from[i]);
    m->msg_iov = &u->rx_iov[i];
    m->msg_iovlen = 1;
    m->msg_control = u->rx_ctl[i].buf;
    m->msg_controllen = sizeof(u->rx_ctl[i].buf);
  }
  int n;
  do {
    n = recvmmsg(u->fd[path], u->rx_msg, DLCP_UDP_BATCH, MSG_DONTWAIT, NULL);
  } while (n < 0 && errno == EINTR);
  if (n > 0) {
    u->rx_offset = dlcp_rt_realtime_offset();
    /* the latest count */
    (void)dlcp_net_note_drops(&u->rx_drops, &u->rx_msg[n - 1].msg_hdr);
  }
  return n < 0 ? 0 : n;
}

ssize_t dlcp_udp_peek(dlcp_udp *u, uint32_t path, uint8_t *hdr, size_t hdr_len,
                      dlcp_sockaddr *from) {
  socklen_t fromlen = sizeof(*from);
  ssize_t n;
  do {
    /* MSG_TRUNC: the datagram's real length, not what fit. */
    n = recvfrom(u->fd[path], hdr, hdr_len, MSG_PEEK | MSG_TRUNC | MSG_DONTWAIT,
                 &from->sa, &fromlen);
  } while (n < 0 && errno == EINTR);
  return n < 0 ? -1 : n;
}

/* arrival_of: what a received message's ancillary data says: CE when its
 * IP_TOS (IPV6_TCLASS) ECN bits are 11, and the kernel's receive time stamp,
 * converted with |offset| (dlcp_rt_realtime_offset). */
static dlcp_mlt_arrival arrival_of(struct msghdr *m, int64_t offset) {
  dlcp_mlt_arrival a = {.ce = false, .at = 0};
  if (m->msg_flags & MSG_CTRUNC) {
    return a;
  }
  for (struct cmsghdr *c = CMSG_FIRSTHDR(m); c; c = CMSG_NXTHDR(m, c)) {
    int tclass = dlcp_net_tclass_of(c);
    if (tclass >= 0) {
      a.ce = (tclass & 3) == 3;
    } else if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPNS &&
               c->cmsg_len >= CMSG_LEN(sizeof(struct timespec))) {
      struct timespec ts;
      memcpy(&ts, CMSG_DATA(c), sizeof(ts));
      a.at = dlcp_rt_from_realtime(&ts, offset);
    }
  }
  return a;
}

static size_t take(dlcp_udp *u, uint32_t path, struct iovec *iov,
                   size_t niov) {
  struct msghdr m;
  memset(&m, 0, sizeof(m));
  m.msg_iov = iov;
  m.msg_iovlen = niov;
  m.msg_control = u->rx_ctl[0].buf;
  m.msg_controllen = sizeof(u->rx_ctl[0].buf);
  ssize_t n;
  do {
    n = recvmsg(u->fd[path], &m, MSG_DONTWAIT);
  } while (n < 0 && errno == EINTR);
  u->taken = n >= 0 ? arrival_of(&m, dlcp_rt_realtime_offset())
                     : (dlcp_mlt_arrival){.ce = false};
  if (n >= 0) {
    (void)dlcp_net_note_drops(&u->rx_drops, &m);
  }
  return n < 0 ? 0 : (size_t)n;
}

size_t dlcp_udp_take_split(dlcp_udp *u, uint32_t path, uint8_t *hdr,
                           size_t hdr_len, uint8_t *dest, size_t dest_len) {
  struct iovec iov[2] = {{.iov_base = hdr, .iov_len = hdr_len},
                         {.iov_base = dest, .iov_len = dest_len}};
  return take(u, path, iov, 2);
}

const uint8_t *dlcp_udp_take(dlcp_udp *u, uint32_t path, size_t *len) {
  *len = take(u, path, &u->rx_iov[0], 1);
  return u->rx;
}

const uint8_t *dlcp_udp_rx_data(const dlcp_udp *u, int i, size_t *len,
                                const dlcp_sockaddr **from) {
  *len = u->rx_msg[i].msg_len;
  *from = &u->rx_from[i];
  /* A datagram larger than the buffer arrives truncated: report its
   * truncated length, which the decoder then rejects. */
  return u->rx + (size_t)i * DLCP_UDP_RX_BUF;
}

size_t dlcp_udp_rx_segment(const dlcp_udp *u, int i) {
  return dlcp_net_gro_segment(&u->rx_msg[i].msg_hdr, u->rx_msg[i].msg_len);
}

dlcp_mlt_arrival dlcp_udp_rx_arrival(dlcp_udp *u, int i) {
  return arrival_of(&u->rx_msg[i].msg_hdr, u->rx_offset);
}

dlcp_mlt_arrival dlcp_udp_taken_arrival(const dlcp_udp *u) {
  return u->taken;
}
