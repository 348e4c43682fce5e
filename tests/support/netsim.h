/*
 * netsim.h: a deterministic in-memory network between two MLT connections,
 * for tests and benchmarks.
 *
 * Two dlcp_mlt_conn ("sides" 0 and 1) are joined by a datagram link in
 * each direction (serialization at a rate, propagation delay, seeded
 * random loss, duplication and reordering) and a reliable, in-order
 * control channel with its own delay.  Time is virtual: the harness jumps
 * from event to event, so a test of a 1 s transfer takes milliseconds, and
 * the same seed always replays the same run.
 */
#ifndef DLCP_TEST_NETSIM_H
#define DLCP_TEST_NETSIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/mlt.h"

typedef struct netsim_link {
  double loss;      /* probability a datagram is lost, [0, 1] */
  double dup;       /* probability a datagram is delivered twice */
  double reorder;   /* probability a datagram is held back */
  dlcp_duration reorder_ns; /* held back by a uniform delay up to this */
  dlcp_duration delay_ns;   /* one-way propagation delay */
  uint64_t rate_bps;        /* serialization rate; 0 = infinitely fast */
  dlcp_duration ctrl_delay_ns; /* control channel one-way delay */
  /* The receiving host reads each datagram up to this long after it
   * arrives (uniform; in arrival order): scheduling delay, as a loaded
   * machine adds.  0 = at once. */
  dlcp_duration host_jitter_ns;
  /* The receiving host tells the core when each datagram arrived (as a
   * kernel time stamp does) rather than leaving it to the read time. */
  bool stamp_arrival;
  /* Probability that the receiving host reads a datagram up to
   * host_reorder_ns late while those after it are read on time (a packet
   * left in a busy core's backlog): the host reorders it after its
   * arrival, which its time stamp keeps. */
  double host_reorder;
  dlcp_duration host_reorder_ns;
  /* Bit r set: every datagram sent on route r (< 32; the path id while
   * a path has one route) is lost, whatever its type, as over a dead
   * link that only some source ports hash onto. */
  uint32_t dead_paths;
} netsim_link;

typedef struct netsim_completion {
  int side;
  dlcp_mlt_completion c; /* c.missing points at |missing| below */
  dlcp_mlt_range *missing;
} netsim_completion;

typedef struct netsim_counters {
  uint64_t datagrams_sent;   /* handed to the link */
  uint64_t datagrams_lost;
  uint64_t datagrams_duplicated;
  uint64_t data_sent;        /* DATA datagrams among them */
  uint64_t control_sent;
  uint64_t bytes_sent;
  dlcp_duration max_queue_ns; /* longest wait for the link to free up */
} netsim_counters;

typedef struct netsim netsim;

/* A hook that sees each datagram before the link does; returning false
 * drops it.  Lets a test lose chosen packets deterministically. */
typedef bool (*netsim_filter_fn)(void *user, int from_side,
                                 const uint8_t *hdr, size_t hdr_len,
                                 uint64_t index);

/*
 * netsim_new joins two new connections made from |cfg0| and |cfg1|;
 * |link01| carries side 0's datagrams to side 1, |link10| the reverse.
 * Returns NULL on a bad configuration.  Free with netsim_del.
 */
netsim *netsim_new(const dlcp_mlt_config *cfg0, const dlcp_mlt_config *cfg1,
                   const netsim_link *link01, const netsim_link *link10,
                   uint64_t seed);
/* netsim_new_mem is netsim_new with |mem| as both connections'
 * allocator (NULL: the default). */
netsim *netsim_new_mem(const dlcp_mlt_config *cfg0, const dlcp_mlt_config *cfg1,
                       const netsim_link *link01, const netsim_link *link10,
                       uint64_t seed, const dlcp_mem *mem);
void netsim_del(netsim *ns);

dlcp_mlt_conn *netsim_conn(netsim *ns, int side);
dlcp_tstamp netsim_now(const netsim *ns);
void netsim_set_filter(netsim *ns, netsim_filter_fn fn, void *user);
/* Datagrams side |side| sends from now on travel over |link| (copied);
 * those already on their way keep their delivery times. */
void netsim_set_link(netsim *ns, int side, const netsim_link *link);

/*
 * netsim_run moves virtual time forward, delivering messages and firing
 * timers, until |want| completions have been collected in total, the
 * network is idle, or virtual time passes |until|.  Returns the number of
 * completions collected so far, or -1 if a connection returned an error
 * or claimed work it then did not do (a livelock in the core).
 */
int netsim_run(netsim *ns, size_t want, dlcp_tstamp until);

size_t netsim_ncompletions(const netsim *ns);
const netsim_completion *netsim_completion_at(const netsim *ns, size_t i);
/* The completion of |side| with user_data |user_data|, or NULL. */
const netsim_completion *netsim_find(const netsim *ns, int side,
                                     uint64_t user_data);
const netsim_counters *netsim_counters_of(const netsim *ns, int side);
/* The values of the NOTEs side |side|'s core handed up (dlcp_mlt_send_note
 * from the other side), in arrival order; |*n| of them. */
const uint64_t *netsim_notes(const netsim *ns, int side, size_t *n);

#endif /* DLCP_TEST_NETSIM_H */
