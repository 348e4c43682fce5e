/*
 * inanet.h: a deterministic in-memory star network between INA hosts
 * (dlcp_ina) and one aggregation switch (dlcp_agg), in virtual time; or
 * several switches, each with its own hosts, linked as a chain (CINA).
 *
 * Every datagram crosses one link of |delay_ns| (+ a seeded uniform
 * |jitter_ns|, which reorders), may be lost with the probability of its
 * type (contribution, result, ACK, NACK), duplicated with |dup|, and a
 * host-to-switch datagram is CE-marked with |ce|.  A filter hook can drop
 * chosen datagrams deterministically.  Hosts may join late (|start_ns|),
 * which is how several jobs contend for one pool.  A host whose operation
 * has ended answers stray results with ACKs, as the runtime driver does.
 * The same seed replays the same run.
 */
#ifndef DLCP_TEST_INANET_H
#define DLCP_TEST_INANET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "coll/ina.h"
#include "proto/agg.h"

#define INANET_MAX_HOSTS 64
#define INANET_MAX_SWITCHES 8
/* A switch's datagrams reach another switch as from this cookie + its
 * index (a host's cookie is its index). */
#define INANET_SWITCH_COOKIE (UINT64_C(1) << 32)

typedef struct inanet_config {
  uint64_t seed;
  dlcp_duration delay_ns;  /* one way, host <-> switch */
  dlcp_duration jitter_ns; /* + uniform [0, jitter) per datagram */
  double loss[7];          /* by dlcp_agg_type (index 1..6) */
  double dup;
  double ce;               /* host -> switch datagrams marked CE */
  dlcp_tstamp until_ns;    /* give up after this; 0 = 60 s */
} inanet_config;

typedef struct inanet_stats {
  uint64_t sent[7], lost[7], dup[7]; /* by dlcp_agg_type */
  uint64_t filtered;
  uint64_t strays_acked; /* results answered after their host was done */
} inanet_stats;

typedef struct inanet inanet;

/* A hook that sees every datagram before the link; false drops it.
 * |from| and |to| are host indices, -1 - s switch s; |index| counts the
 * datagrams of that type so far (from 0). */
typedef bool (*inanet_filter_fn)(void *user, int from, int to, uint8_t type,
                                 uint32_t group, uint64_t index);

void inanet_config_default(inanet_config *cfg);
/* The switch |sw| (switch 0) and the hosts are borrowed: the caller
 * deletes them. */
inanet *inanet_new(const inanet_config *cfg, dlcp_agg *sw);
void inanet_del(inanet *n);
/* Adds another switch (borrowed); returns its index or -1.  A switch whose
 * config names INANET_SWITCH_COOKIE + p as its parent sends there. */
int inanet_add_switch(inanet *n, dlcp_agg *sw);
/* As inanet_add_host, the host attached to switch |sw|. */
int inanet_add_host_at(inanet *n, dlcp_ina *h, uint32_t job, uint64_t token,
                       dlcp_tstamp start_ns, int sw);
/* Adds host |h| (job |job|, token |token| for stray ACKs) starting at
 * |start_ns|; returns its index or -1. */
int inanet_add_host(inanet *n, dlcp_ina *h, uint32_t job, uint64_t token,
                    dlcp_tstamp start_ns);
void inanet_set_filter(inanet *n, inanet_filter_fn fn, void *user);
/* Injects a raw datagram to the switch at |at| as if from host |from|. */
int inanet_inject(inanet *n, int from, const uint8_t *buf, size_t len,
                  dlcp_tstamp at);
/* Runs until every host is done, nothing is left to happen, or until_ns.
 * Returns the number of hosts done. */
int inanet_run(inanet *n);
/* Runs on after the hosts are done until nothing is left to happen (the
 * switch's re-sends, the stray ACKs, its leases) or until_ns. */
int inanet_drain(inanet *n);
bool inanet_host_done(const inanet *n, int host);
dlcp_tstamp inanet_host_end(const inanet *n, int host);
int inanet_host_status(const inanet *n, int host); /* its first error */
dlcp_tstamp inanet_now(const inanet *n);
const inanet_stats *inanet_stats_of(const inanet *n);

#endif /* DLCP_TEST_INANET_H */
