/*
 * udp.h: the datagram side of a communicator: K UDP sockets (one per path:
 * each sends from its own port, so each path is its own 4-tuple and an
 * ECMP network hashes them apart; every datagram is addressed to the
 * peer's first socket, DLCP_UDP_RX_PATH, the only one read, so a receiver
 * reads its datagrams in the order they arrived),
 * batched sends with a per-packet TOS byte (DSCP from the MLT priority,
 * ECT(0) for important packets), and batched receives.
 */
#ifndef DLCP_RT_UDP_H
#define DLCP_RT_UDP_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "dlcp/dlcp_types.h"
#include "proto/mlt.h"
#include "rt/env.h"
#include "rt/net.h"
#include "rt/errbuf.h"

#define DLCP_UDP_BATCH 32
#define DLCP_UDP_RX_PATH 0u
#define DLCP_UDP_HDR_MAX 64
#define DLCP_UDP_TRAILER_LEN 24 /* an auth trailer (rt/auth.h) */
#define DLCP_UDP_RX_BUF 65536
/* Bytes of whole datagrams (control datagrams, CDATA) a batch copies: two
 * of the largest, or many frame-sized pieces of a long control message. */
#define DLCP_UDP_WHOLE_MAX (2 * 65536)


typedef struct dlcp_udp_out {
  size_t n;
  size_t len[DLCP_UDP_BATCH]; /* each datagram's length */
  int tos[DLCP_UDP_BATCH];
  /* What flush hands the kernel: runs of equal datagrams merged into one
   * message segmented by the kernel (UDP_SEGMENT), the others as they are. */
  struct mmsghdr gmsg[DLCP_UDP_BATCH];
  struct iovec giov[DLCP_UDP_BATCH * 3];
  uint32_t gcount[DLCP_UDP_BATCH]; /* datagrams in each message */
  union {
    struct cmsghdr align;
    char buf[CMSG_SPACE(sizeof(int)) + CMSG_SPACE(sizeof(uint16_t))];
  } gctl[DLCP_UDP_BATCH];
  struct mmsghdr msg[DLCP_UDP_BATCH];
  struct iovec iov[DLCP_UDP_BATCH][3];
  dlcp_sockaddr to[DLCP_UDP_BATCH];
  uint8_t hdr[DLCP_UDP_BATCH][DLCP_UDP_HDR_MAX];
  size_t whole_used;
  uint8_t whole[DLCP_UDP_WHOLE_MAX];
  uint8_t trailer[DLCP_UDP_BATCH][DLCP_UDP_TRAILER_LEN];
  union {
    struct cmsghdr align;
    char buf[CMSG_SPACE(sizeof(int))];
  } ctl[DLCP_UDP_BATCH];
} dlcp_udp_out;

typedef struct dlcp_udp {
  uint32_t k;
  int family; /* AF_INET or AF_INET6, |ip|'s */
  int fd[DLCP_ENV_MAX_PATHS];
  uint16_t port[DLCP_ENV_MAX_PATHS];
  /* The send batch, for one socket at a time: a datagram for another
   * socket sends it first, so datagrams leave in the order queued. */
  dlcp_udp_out *out;
  uint32_t out_path; /* the batch's socket */
  uint8_t *rx;       /* DLCP_UDP_BATCH receive buffers */
  struct mmsghdr rx_msg[DLCP_UDP_BATCH];
  struct iovec rx_iov[DLCP_UDP_BATCH];
  dlcp_sockaddr rx_from[DLCP_UDP_BATCH];
  /* The TOS byte each message arrived with, its kernel time stamp, the
   * socket's drop count once it has dropped any and, with GRO, the size
   * of the datagrams coalesced in it. */
  union {
    struct cmsghdr align;
    char buf[2 * CMSG_SPACE(sizeof(int)) + CMSG_SPACE(sizeof(struct timespec)) +
             DLCP_NET_DROPS_CTL];
  } rx_ctl[DLCP_UDP_BATCH];
  int64_t rx_offset;      /* the batch's dlcp_rt_realtime_offset */
  dlcp_mlt_arrival taken; /* of the last dlcp_udp_take*'s datagram */
  uint64_t sent, send_errors;
  dlcp_net_drops rx_drops; /* the receiving socket's, buffer full */
  bool gso_off; /* the kernel refused a run: one message a datagram */
} dlcp_udp;

/* dlcp_udp_open binds |k| sockets to |ip| (IPv4 or IPv6, any free ports), non
 * blocking, with large buffers, reporting each datagram's TOS byte (for
 * ECN) and the time the kernel received it.  Returns 0 or -errno with |eb|
 * set. */
int dlcp_udp_open(dlcp_udp *u, const char *ip, uint32_t k, dlcp_errbuf *eb);
void dlcp_udp_close(dlcp_udp *u);

/* dlcp_udp_tos is the TOS byte for an MLT priority (0 most urgent) and
 * importance: DSCP class selector CS(7 - priority), ECN ECT(0) if
 * important. */
int dlcp_udp_tos(uint8_t priority, bool ect);

/*
 * dlcp_udp_queue adds one datagram (|hdr| copied, |payload| referenced
 * until the next flush, then |trailer|'s DLCP_UDP_TRAILER_LEN bytes,
 * copied, unless it is NULL) for |to| on path |path|; a full batch is
 * flushed first.  A |hdr| longer than DLCP_UDP_HDR_MAX (a whole control
 * datagram, |payload_len| 0, at most DLCP_UDP_WHOLE_MAX) is copied into
 * the batch's room for whole datagrams, which a flush first makes when
 * it is full.
 */
void dlcp_udp_queue(dlcp_udp *u, uint32_t path, const dlcp_sockaddr *to,
                    const uint8_t *hdr, size_t hdr_len, const void *payload,
                    size_t payload_len, const uint8_t *trailer, int tos);

/* dlcp_udp_flush sends every queued datagram; consecutive ones to the same
 * address with the same TOS byte and length (the last of a run may be
 * shorter) go as one UDP GSO message, which the kernel cuts into those
 * datagrams (in software, before any qdisc, when the device cannot).  A
 * full socket buffer drops the rest of a batch, as a full switch queue
 * would: MLT recovers it. */
void dlcp_udp_flush(dlcp_udp *u);

/* dlcp_udp_enable_gro asks the kernel to hand the receiving socket
 * (DLCP_UDP_RX_PATH) runs of equal datagrams of one sender coalesced into
 * one message, as a NIC's GRO merged them (and as loopback passes a UDP
 * GSO message through whole): one receive, and one trip up the stack, for
 * up to 64 KiB.  Only for a socket read in batches: the in-place reads
 * (dlcp_udp_peek) take one datagram a message.  Returns 0, or -errno if
 * the kernel has no UDP_GRO (then every message is one datagram, as
 * before). */
int dlcp_udp_enable_gro(dlcp_udp *u);

/* dlcp_udp_recv reads a batch from path |path|'s socket; returns how many
 * messages (0 when none) with their data at dlcp_udp_rx_data(): each one
 * datagram, or with GRO a run of datagrams of dlcp_udp_rx_segment() bytes
 * each (the last may be shorter). */
int dlcp_udp_recv(dlcp_udp *u, uint32_t path);

/*
 * One datagram at a time, for receiving payloads in place: dlcp_udp_peek
 * copies the first |hdr_len| bytes of the next datagram into |hdr| without
 * consuming it and returns its full length (-1 when there is none; 0 is an empty datagram);
 * dlcp_udp_take_split then consumes it into |hdr| and |dest|, returning the
 * bytes read; dlcp_udp_take consumes it whole into a receive buffer of |u|
 * (valid until the next receive) and returns it, its length in |*len|.
 */
ssize_t dlcp_udp_peek(dlcp_udp *u, uint32_t path, uint8_t *hdr, size_t hdr_len,
                      dlcp_sockaddr *from);
size_t dlcp_udp_take_split(dlcp_udp *u, uint32_t path, uint8_t *hdr,
                           size_t hdr_len, uint8_t *dest, size_t dest_len);
const uint8_t *dlcp_udp_take(dlcp_udp *u, uint32_t path, size_t *len);
const uint8_t *dlcp_udp_rx_data(const dlcp_udp *u, int i, size_t *len,
                                const dlcp_sockaddr **from);
/* dlcp_udp_rx_segment: the length of each datagram in message |i| of the
 * last dlcp_udp_recv batch (its whole length unless GRO coalesced it). */
size_t dlcp_udp_rx_segment(const dlcp_udp *u, int i);

/* dlcp_udp_rx_arrival: how datagram |i| of the last dlcp_udp_recv batch
 * arrived: with ECN Congestion Experienced (a switch marked it) or not,
 * and when the kernel received it (on the runtime's clock; 0 if the
 * kernel gave no time stamp).  dlcp_udp_taken_arrival: the same for the
 * last dlcp_udp_take*. */
dlcp_mlt_arrival dlcp_udp_rx_arrival(dlcp_udp *u, int i);
dlcp_mlt_arrival dlcp_udp_taken_arrival(const dlcp_udp *u);

#endif /* DLCP_RT_UDP_H */
