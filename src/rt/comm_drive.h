/*
 * comm_drive.h: who runs a communicator's event loop.  Normally its own
 * loop thread; but an application thread blocked in dlcp_wait_cq takes
 * over, so the datagram that completes its operation wakes it directly
 * instead of waking the loop thread, which would then wake it.
 */
#ifndef DLCP_RT_COMM_DRIVE_H
#define DLCP_RT_COMM_DRIVE_H

#include <stdbool.h>

#include "dlcp/dlcp.h"

/*
 * dlcp_rt_comm_drive_until makes the calling thread the driver and runs
 * the loop until |ready(arg)| holds or |deadline| passes; |ready| is
 * called with the communicator's mu held (it may take locks that come
 * after mu, as a completion queue's).  Returns 1 when it drove, 0 if
 * another application thread drives (the caller then waits on its own
 * condition variable).
 */
int dlcp_rt_comm_drive_until(dlcp_comm *c, bool (*ready)(void *arg),
                             void *arg, dlcp_tstamp deadline);

/*
 * dlcp_rt_comm_drain_control runs the loop until every live peer has
 * acknowledged the control messages sent to it as datagrams, or
 * |deadline| passes.  Called before the loop stops for good: a last STOP
 * lost then would never be sent again, and its peer would wait for it
 * until its stall timeout.
 */
void dlcp_rt_comm_drain_control(dlcp_comm *c, dlcp_tstamp deadline);

#endif /* DLCP_RT_COMM_DRIVE_H */
