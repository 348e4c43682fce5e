/*
 * mesh.h: the job's mesh of control connections.  Each rank connects to
 * every lower rank and accepts every higher one; a connection opens with
 * the dialing rank's mesh hello (wire/rdzv_wire.h) and is answered with
 * the accepting rank's.
 *
 * The answer is what makes a connection known good.  A connection can be
 * open at the side that dialed and unknown at the other: the handshake's
 * last ACK and every copy of the first data lost (on the testbed's spine
 * losing 70 %, about once in 50 jobs), the other kernel gives up its
 * half-made connection after its SYN-ACK retries (5 s with the control
 * plane's 1 s RTO ceiling) and answers the next segment with a reset.
 * Before the answer existed, the job started on such a connection and
 * failed at its first barrier ("control connection failed: Connection
 * reset by peer").  Now a connection closed or reset before its answer is
 * dialed again.
 */
#ifndef DLCP_RT_MESH_H
#define DLCP_RT_MESH_H

#include "dlcp/dlcp_types.h"
#include "rt/comm_internal.h"
#include "rt/errbuf.h"
#include "rt/net.h"

/*
 * dlcp_rt_build_mesh connects |c| to every lower rank r at |lower[r]| and
 * accepts every higher rank on |c->listen_fd|, all by |deadline|.  Every
 * peer's tcp_fd is then a non-blocking connection whose hellos both ways
 * have been checked (in a job with a secret: authenticated, counter 1 of
 * each direction's control stream).  Returns 0, or an error (in |eb|)
 * naming the rank that could not be connected or did not answer.
 */
int dlcp_rt_build_mesh(dlcp_comm *c, const dlcp_sockaddr *lower,
                       dlcp_tstamp deadline, dlcp_errbuf *eb);

#endif /* DLCP_RT_MESH_H */
