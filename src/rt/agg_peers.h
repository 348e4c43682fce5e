/*
 * agg_peers.h: the 64-bit cookies by which the aggregation core
 * (src/proto/agg.h) names the hosts and switches a dlcp-switch talks to.
 *
 * The core stores a cookie per job rank and per queued answer and hands it
 * back with every datagram to send; the driver turns it into an address.
 * An IPv4 address and port fit in the cookie itself (address << 16 |
 * port), so an IPv4 switch keeps no state per sender.  An IPv6 address
 * does not: it is interned in a table of bounded size, and its cookie is
 * the slot with the slot's generation (bit 63 set, so the two kinds never
 * meet).  When the table is full, the least recently seen sender that is
 * not pinned (a parent switch) gives up its slot (the clock algorithm);
 * a cookie of the evicted sender then names nothing, and its datagram is
 * dropped and counted: the host re-sends, and its next datagram interns
 * it again.  So a flood of forged IPv6 sources costs the switch no memory
 * and can only delay real senders, not misdirect their results.  The hash
 * is keyed with a random key (libsodium's SipHash), so that chosen
 * addresses cannot pile into one chain.
 *
 * A table serves one thread: no locking.
 */
#ifndef DLCP_RT_AGG_PEERS_H
#define DLCP_RT_AGG_PEERS_H

#include <stdbool.h>
#include <stdint.h>

#include "rt/net.h"

/* IPv6 senders a table holds before it evicts (per dlcp-switch thread). */
#define DLCP_AGG_PEERS_DEFAULT_CAP 16384u

typedef struct dlcp_agg_peers dlcp_agg_peers;

/* dlcp_agg_peers_new makes a table for up to |cap| IPv6 senders (rounded
 * up to a power of two, at least 2) into |*out|, which the caller frees
 * with dlcp_agg_peers_del.  Returns 0, DLCP_ERR_INVALID_ARGUMENT for |cap| 0
 * or above 2^24, DLCP_ERR_NOMEM, or DLCP_ERR_SYSTEM if libsodium cannot
 * start. */
int dlcp_agg_peers_new(dlcp_agg_peers **out, uint32_t cap);
void dlcp_agg_peers_del(dlcp_agg_peers *p);

/* dlcp_agg_peers_cookie returns the cookie of |a| (IPv4 or IPv6), the
 * same for the same address and port as long as it stays in the table;
 * |pin| keeps it there for good (at most half the table may be pinned;
 * beyond that the address is interned unpinned).  Never fails: a full
 * table evicts. */
uint64_t dlcp_agg_peers_cookie(dlcp_agg_peers *p, const dlcp_sockaddr *a,
                               bool pin);

/* dlcp_agg_peers_addr sets |a| to the address |cookie| names and returns
 * true, or returns false if the cookie's IPv6 sender was evicted since (or
 * the cookie is not one this table gave). */
bool dlcp_agg_peers_addr(const dlcp_agg_peers *p, uint64_t cookie,
                         dlcp_sockaddr *a);

/* IPv6 senders evicted so far. */
uint64_t dlcp_agg_peers_evicted(const dlcp_agg_peers *p);

#endif /* DLCP_RT_AGG_PEERS_H */
