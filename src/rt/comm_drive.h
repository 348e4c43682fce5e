/*
 * comm_drive.h: who runs a communicator's event loop.  Normally its own
 * loop thread; but an application thread blocked in dlcp_wait_cq takes
 * over, so the datagram that completes its operation wakes it directly
 * instead of waking the loop thread, which would then wake it.
 */
#ifndef DLCP_RT_COMM_DRIVE_H
#define DLCP_RT_COMM_DRIVE_H

#include "dlcp/dlcp.h"

/* dlcp_rt_comm_acquire_driver makes the calling thread the loop's driver,
 * parking the loop thread; returns 0 if another application thread
 * already drives (the caller then waits on its queue instead). */
int dlcp_rt_comm_acquire_driver(dlcp_comm *c);

/* dlcp_rt_comm_progress runs one loop iteration, sleeping at most until
 * |until|; only the driver may call it. */
void dlcp_rt_comm_progress(dlcp_comm *c, dlcp_tstamp until);

void dlcp_rt_comm_release_driver(dlcp_comm *c);

#endif /* DLCP_RT_COMM_DRIVE_H */
