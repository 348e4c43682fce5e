/*
 * fault.h: seeded fault injection for the datagram send path (a test
 * facility, set by DLCP_FAULT_* or the communicator config).  Each packet
 * draws one verdict; a held packet is released later by the caller.
 */
#ifndef DLCP_RT_FAULT_H
#define DLCP_RT_FAULT_H

#include <stdbool.h>

#include "dlcp/dlcp_types.h"
#include "proto/rng.h"
#include "rt/env.h"

typedef enum dlcp_fault_verdict {
  DLCP_FAULT_PASS = 0,
  DLCP_FAULT_DROP,
  DLCP_FAULT_DUP,  /* send now and once more */
  DLCP_FAULT_HOLD, /* send after |*hold_ns| */
} dlcp_fault_verdict;

typedef struct dlcp_fault {
  dlcp_rt_fault cfg;
  dlcp_rng rng;
  bool active;
} dlcp_fault;

/* dlcp_fault_init seeds the generator from the configured seed and |salt|
 * (the rank), so ranks draw different but reproducible streams. */
void dlcp_fault_init(dlcp_fault *f, const dlcp_rt_fault *cfg, uint64_t salt);

/* dlcp_fault_decide draws the verdict for one packet.  Reordering holds a
 * packet for a uniform time below the configured delay, so packets sent
 * after it overtake it; delaying holds it for exactly the delay. */
dlcp_fault_verdict dlcp_fault_decide(dlcp_fault *f, dlcp_duration *hold_ns);

#endif /* DLCP_RT_FAULT_H */
