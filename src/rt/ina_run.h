/*
 * ina_run.h: all-reduce through the aggregation switch (algorithms INA and
 * RA_INA) in the runtime: the driver of src/coll/ina over a UDP socket to
 * dlcp-switch (DLCP_SWITCH=host:port).
 *
 * The operation runs to completion inside the call, on the caller's
 * thread, with the communicator's own collectives for its agreements:
 * the job id and token (broadcast from rank 0 once per communicator), the
 * per-group exponents of the float scaling (an all-reduce MAX), and, for
 * RA-INA, the ring all-reduce of the groups the switch had no aggregators
 * for.  See docs/ina.md.
 */
#ifndef DLCP_RT_INA_RUN_H
#define DLCP_RT_INA_RUN_H

#include <stdbool.h>
#include <stdint.h>

#include "dlcp/dlcp.h"

/* A communicator's INA state: its socket to the switch, job id, token and
 * next group number.  Created by the first INA operation. */
typedef struct dlcp_rt_ina dlcp_rt_ina;

/* Frees |s| (NULL is fine) and closes its socket. */
void dlcp_rt_ina_free(dlcp_rt_ina *s);

/*
 * dlcp_rt_ina_allreduce all-reduces |count| elements (FLOAT32 or INT32,
 * SUM or AVG) through the switch named by DLCP_SWITCH; |ra| selects RA-INA
 * (ring fallback) over plain INA.  |*state| is the communicator's INA
 * state (created on first use).  Every rank must call it in the same
 * order as its other collectives.  |timeout_ms| bounds the wait for the
 * switch (no answer to a group for this long fails the operation).  Fills
 * |info| (status, error naming the switch or the rank, algorithm,
 * elapsed time).  Returns 0 or a negative DLCP_ERR_*: INVALID_ARGUMENT (a
 * dtype, op or world INA cannot do, non-finite input), CONFIG (DLCP_SWITCH
 * missing or malformed; the switch runs another block size), TIMEOUT (the
 * switch did not answer), or a failure of the agreements.
 */
int dlcp_rt_ina_allreduce(dlcp_comm *comm, dlcp_rt_ina **state,
                          const void *sendbuf, void *recvbuf, uint64_t count,
                          dlcp_dtype dtype, dlcp_redop op, bool ra,
                          int timeout_ms, dlcp_coll_info *info);

#endif /* DLCP_RT_INA_RUN_H */
