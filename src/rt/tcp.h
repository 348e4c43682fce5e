/*
 * tcp.h: the TCP connections of the job's control plane (the rendezvous
 * store, the mesh of control connections) made to get through a lossy
 * fabric.  An ECMP fabric hashes a connection onto one link for its whole
 * life by its ports, so a connection that met a lossy link stays on it:
 * connecting races attempts from different source ports, and every
 * connection bounds its retransmission timeout so that TCP's backoff
 * (200 ms doubling to 120 s) cannot turn a few losses in a row into a
 * minute of silence.
 */
#ifndef DLCP_RT_TCP_H
#define DLCP_RT_TCP_H

#include <stdbool.h>

#include "dlcp/dlcp_types.h"
#include "rt/net.h"

/* The retransmission timeout of a control connection stays within these
 * (TCP_RTO_MIN_US, TCP_RTO_MAX_MS: Linux 6.11 and later; older kernels
 * keep their 200 ms and 120 s).  10 ms is far above a fabric's RTT and a
 * host's scheduling delays, 1 s the least the kernel takes as a ceiling. */
#define DLCP_TCP_RTO_MIN_US 10000
#define DLCP_TCP_RTO_MAX_MS 1000
/* Unacknowledged data is given up on (the connection fails) after this
 * (TCP_USER_TIMEOUT): about what the kernel's 15 retransmissions take at
 * its default timeouts, which the ceiling above would cut to seconds --
 * a fabric outage that short must not end a job's control connections. */
#define DLCP_TCP_USER_TIMEOUT_MS 900000

/* Connecting: while no attempt has connected, another starts this often,
 * from a fresh source port and so on another ECMP hash (an attempt whose
 * SYN crosses a lossy link waits for the kernel's retry, 1 s later), and
 * each is given up after DLCP_TCP_ATTEMPT_MS (time for its SYN to be sent
 * twice). */
#define DLCP_TCP_STAGGER_MS 250u
#define DLCP_TCP_ATTEMPT_MS 2000u

/*
 * dlcp_tcp_tune sets what every control connection gets: TCP_NODELAY
 * (messages are small, each awaited), the timeout bounds above where the
 * kernel has them, and the user timeout.  Applies to a socket before connect()
 * or to an accepted one; a listening socket passes them on to those it accepts.
 */
void dlcp_tcp_tune(int fd);

/* dlcp_tcp_retryable: whether a connection attempt that failed with
 * |err| (an errno) may succeed later: refused (not listening yet), reset,
 * unreachable, timed out. */
bool dlcp_tcp_retryable(int err);

/*
 * dlcp_tcp_connect connects to |addr| by |deadline|, racing attempts from
 * different source ports (DLCP_TCP_STAGGER_MS) and keeping the first that
 * connects; the others are closed.  A refused attempt is retried with
 * exponential backoff (10 ms doubling to 1 s: the listener may start
 * later) unless |refusal_final|.  Returns a non-blocking, tuned
 * descriptor the caller owns (dlcp_net_read_all and dlcp_net_write_all
 * wait on it), or -errno: the last error (-ETIMEDOUT when attempts
 * only timed out), with |*attempts| the attempts made.
 */
int dlcp_tcp_connect(const dlcp_sockaddr *addr, bool refusal_final,
                     dlcp_tstamp deadline, unsigned *attempts);

/* A destination of dlcp_tcp_connect_all. */
typedef struct dlcp_tcp_dial {
  dlcp_sockaddr addr; /* in */
  int fd;             /* out: the connection, as dlcp_tcp_connect's */
  unsigned attempts;  /* out */
} dlcp_tcp_dial;

/*
 * dlcp_tcp_connect_all connects to the |n| destinations of |d| at once,
 * each as dlcp_tcp_connect would, so that the time it takes is the
 * slowest destination's, not their sum.  Returns 0 with every d[i].fd set
 * (a descriptor the caller owns, or -errno), or DLCP_ERR_NOMEM before
 * trying any.
 */
int dlcp_tcp_connect_all(dlcp_tcp_dial *d, size_t n, bool refusal_final,
                         dlcp_tstamp deadline);

#endif /* DLCP_RT_TCP_H */
