/*
 * auto.c: the AUTO policy, which algorithm an operation runs
 * (dlcp_coll_resolve_algo), and which algorithms each collective can run.
 *
 * The thresholds below come from make bench-auto sweeps over UDP on
 * loopback and over shared memory; the dated tables behind each of them
 * are in docs/collectives.md ("AUTO: the measurements"), so a re-tune
 * updates that table and the constant together.
 */
#include "coll/coll.h"

#include <stdbool.h>
#include <string.h>

#include "coll/reduce.h"

/* Between hosts, on a power-of-two world: recursive doubling (log2 n
 * steps, one whole-vector message each) up to this size, halving-doubling
 * above (the ring's bytes in 2 log2 n steps, without a fold).  RD sends
 * log2 n / (2 (n - 1) / n) times HD's bytes, which a link pays for before
 * the host's per-step cost does: at 32 KiB HD led on the testbed's 10 and
 * 1 Gbit/s links (2026-11-30, docs/collectives.md). */
#define COLL_AUTO_RD_BYTES (16u * 1024u)
/* Other worlds: DIRECT (one step of n - 1 messages, which beats the fold's
 * two extra steps) while what each rank sends stays within this; its
 * n - 1 messages meet in every rank's downlink at once. */
#define COLL_AUTO_DIRECT_BYTES (16u * 1024u)
/* Then, while latency-bound, the parameter server on a few ranks (two
 * steps; the (n - 1)-way incast stays small) and halving-doubling on
 * more (2 log2 n steps beat the ring's 2(n - 1)); the ring above.
 * Between emulated hosts the ring led or tied the parameter server
 * from 96 KiB up on 3 and 5 ranks, by 1.2-1.6x at 1 Gbit/s (2026-12-04,
 * docs/collectives.md); loopback had had PS ahead to 8 MiB.  The same
 * bound picks the binomial tree over the pipelined chain for
 * broadcast. */
#define COLL_AUTO_PS_MAX_WORLD 8u
#define COLL_AUTO_SMALL_BYTES (64u * 1024u)

/* Ranks on one host (same_host): a step is a copy through a shared ring
 * and a poll, not a network round trip, so message counts matter less and
 * bytes more.  DIRECT while a rank sends at most this in all... */
#define COLL_AUTO_HOST_DIRECT_BYTES (24u * 1024u)
/* ...then, on power-of-two worlds, RD up to this and halving-doubling
 * above (within 1.11x of the fastest at every size from 32 KiB to
 * 128 MiB on 4 and 8 ranks, 2026-11-27; RD's whole vectors lost 1.7-2x
 * from 512 KiB up once receives were reduced on arrival)... */
#define COLL_AUTO_HOST_RD_BYTES (4u * 1024u)
/* ...and on other worlds, whose halving-doubling pays a fold in whole
 * vectors, halving-doubling up to this, the ring above. */
#define COLL_AUTO_HOST_HD_BYTES (512u * 1024u)

static bool world_pow2(uint32_t world) {
  return (world & (world - 1)) == 0;
}

static dlcp_algo auto_same_host(const dlcp_coll_params *p, uint64_t bytes) {
  if ((uint64_t)(p->world - 1) * bytes <= COLL_AUTO_HOST_DIRECT_BYTES) {
    return DLCP_ALGO_DIRECT;
  }
  if (world_pow2(p->world)) {
    return bytes <= COLL_AUTO_HOST_RD_BYTES ? DLCP_ALGO_RECURSIVE_DOUBLING
                                            : DLCP_ALGO_HALVING_DOUBLING;
  }
  return bytes <= COLL_AUTO_HOST_HD_BYTES ? DLCP_ALGO_HALVING_DOUBLING
                                          : DLCP_ALGO_RING;
}

/* True if the labels put the ranks in more than one level-0 region. */
static bool topo_has_regions(const dlcp_coll_params *p) {
  if (!p->topo || p->topo_levels == 0 || p->world < 2) {
    return false;
  }
  for (uint32_t r = 1; r < p->world; r++) {
    if (memcmp(&p->topo[r * p->topo_levels], &p->topo[0],
               p->topo_levels * sizeof(uint32_t)) != 0) {
      return true;
    }
  }
  return false;
}

int dlcp_coll_resolve_algo(const dlcp_coll_params *p) {
  uint64_t bytes = p->count * dlcp_dtype_size(p->dtype);
  dlcp_algo a = p->algo;
  switch (p->kind) {
  case DLCP_COLL_BARRIER:
    /* One barrier: the dissemination barrier, halving-doubling's sibling
     * (ceil(log2 n) rounds of notes). */
    return DLCP_ALGO_HALVING_DOUBLING;
  case DLCP_COLL_ALLREDUCE:
    if (a == DLCP_ALGO_INA || a == DLCP_ALGO_RA_INA) {
      return -1; /* not a plan of peer transfers: the runtime's ina_run */
    }
    if (a != DLCP_ALGO_AUTO) {
      return (int)a;
    }
    if (p->world <= 1) {
      return DLCP_ALGO_RING;
    }
    if (topo_has_regions(p)) {
      return DLCP_ALGO_RAT;
    }
    if (p->same_host) {
      return (int)auto_same_host(p, bytes);
    }
    if (world_pow2(p->world)) {
      return bytes <= COLL_AUTO_RD_BYTES ? DLCP_ALGO_RECURSIVE_DOUBLING
                                         : DLCP_ALGO_HALVING_DOUBLING;
    }
    if (bytes * (p->world - 1) <= COLL_AUTO_DIRECT_BYTES) {
      return DLCP_ALGO_DIRECT;
    }
    if (bytes > COLL_AUTO_SMALL_BYTES) {
      return DLCP_ALGO_RING;
    }
    return p->world <= COLL_AUTO_PS_MAX_WORLD ? DLCP_ALGO_PS
                                              : DLCP_ALGO_HALVING_DOUBLING;
  case DLCP_COLL_REDUCE_SCATTER:
    switch (a) {
    case DLCP_ALGO_AUTO:
      return DLCP_ALGO_RING;
    case DLCP_ALGO_RING:
    case DLCP_ALGO_RING_BYPASS:
    case DLCP_ALGO_PS:
      return (int)a;
    case DLCP_ALGO_HALVING_DOUBLING:
    case DLCP_ALGO_RAT:
    case DLCP_ALGO_DIRECT:
    case DLCP_ALGO_RECURSIVE_DOUBLING:
    case DLCP_ALGO_INA:
    case DLCP_ALGO_RA_INA:
      return -1;
    }
    return -1;
  case DLCP_COLL_ALLGATHER:
    switch (a) {
    case DLCP_ALGO_AUTO:
    case DLCP_ALGO_RING:
    case DLCP_ALGO_RING_BYPASS: /* nothing to bypass: no reduction */
      return DLCP_ALGO_RING;
    case DLCP_ALGO_PS:
      return (int)a;
    case DLCP_ALGO_HALVING_DOUBLING:
    case DLCP_ALGO_RAT:
    case DLCP_ALGO_DIRECT:
    case DLCP_ALGO_RECURSIVE_DOUBLING:
    case DLCP_ALGO_INA:
    case DLCP_ALGO_RA_INA:
      return -1;
    }
    return -1;
  case DLCP_COLL_REDUCE:
    /* The pipelined chain (ring.c); the binomial tree (hd.c) on request:
     * on 4 and 8 ranks of this 2-core VM it was no faster at 4 and 64 KiB
     * (docs/collectives.md, "AUTO"). */
    if (a == DLCP_ALGO_AUTO || a == DLCP_ALGO_RING) {
      return DLCP_ALGO_RING;
    }
    return a == DLCP_ALGO_HALVING_DOUBLING ? (int)a : -1;
  case DLCP_COLL_BROADCAST:
    switch (a) {
    case DLCP_ALGO_AUTO:
      if (topo_has_regions(p)) {
        return DLCP_ALGO_RAT;
      }
      return bytes <= COLL_AUTO_SMALL_BYTES ? DLCP_ALGO_HALVING_DOUBLING
                                            : DLCP_ALGO_RING;
    case DLCP_ALGO_RING_BYPASS:
      return DLCP_ALGO_RING;
    case DLCP_ALGO_RING:
    case DLCP_ALGO_PS:
    case DLCP_ALGO_HALVING_DOUBLING:
    case DLCP_ALGO_RAT:
      return (int)a;
    case DLCP_ALGO_DIRECT:
    case DLCP_ALGO_RECURSIVE_DOUBLING:
    case DLCP_ALGO_INA:
    case DLCP_ALGO_RA_INA:
      return -1;
    }
    return -1;
  }
  return -1;
}
