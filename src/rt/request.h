/*
 * request.h: a collective's request (dlcp_request), shared by the
 * collectives' driver (collective.c), which finishes it, and the public
 * calls that start it and wait for it (collective_api.c).
 */
#ifndef DLCP_RT_REQUEST_H
#define DLCP_RT_REQUEST_H

#include <stdbool.h>

#include "dlcp/dlcp.h"

struct coll_run;
struct dlcp_rt_ina_op;

struct dlcp_request {
  dlcp_comm *comm;
  struct coll_run *run; /* NULL once finished */
  /* An INA all-reduce (ina_run.c) instead of a run; NULL once finished. */
  struct dlcp_rt_ina_op *ina;
  bool done;            /* under the communicator's mu */
  dlcp_tstamp started_ns;
  dlcp_coll_info info;
  dlcp_range *missing;
};

#endif /* DLCP_RT_REQUEST_H */
