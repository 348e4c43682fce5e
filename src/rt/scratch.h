/*
 * scratch.h: the allocator the runtime hands to collectives.  A large
 * block a finished collective frees is kept for the next one of the same
 * size, so back-to-back all-reduces reuse warm memory instead of paying
 * page faults on a fresh mapping every time (the scratch of a 64 MiB ring
 * is 64 MiB: 16384 faults).
 */
#ifndef DLCP_RT_SCRATCH_H
#define DLCP_RT_SCRATCH_H

#include <stddef.h>

#include "dlcp/dlcp_types.h"

#define DLCP_SCRATCH_SLOTS 4

typedef struct dlcp_scratch {
  dlcp_mem mem; /* points back at this cache */
  void *block[DLCP_SCRATCH_SLOTS];
  size_t size[DLCP_SCRATCH_SLOTS];
  unsigned long hits, misses;
} dlcp_scratch;

/* dlcp_scratch_init makes |s| ready; s->mem is the allocator to pass.
 * Not thread-safe: the caller serialises (the communicator's lock). */
void dlcp_scratch_init(dlcp_scratch *s);

/* dlcp_scratch_release frees every cached block. */
void dlcp_scratch_release(dlcp_scratch *s);

#endif /* DLCP_RT_SCRATCH_H */
