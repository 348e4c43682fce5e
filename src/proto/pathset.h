/*
 * pathset.h: which of a connection's K paths its packets take, sans-I/O.
 *
 * MLT sprays a connection's packets over K paths (path ids the drivers
 * turn into UDP source ports, which the fabric's ECMP hashes onto
 * links, or into source routes).  A path can lose everything: a link
 * dead until routing moves off it, a switch whose next hop behind one
 * spine is not resolved yet (the IPv6 testbed lost half its packets so
 * for seconds), an ECMP collision that keeps one port overflowing.
 * Round-robin spraying then pays a lost round on every transfer, and a
 * control channel that stays on a dead path never gets through.
 *
 * So the sender charges each loss the receiver reports to the path the
 * lost packet last took, beside the packets each path carried.  A path
 * that loses at least MIN_LOSSES packets, at least a fifth of what it
 * carried and four times the loss rate of the usable path that loses
 * least (counted as (lost + 1) / (sent + 1)), is left out of the
 * rotation for a spell (16 of the caller's drain intervals, doubling
 * each time the same path is left out again, up to 256 times that); then
 * it rejoins with its counts cleared.  A fifth, not less: a path left out
 * takes its share of the fabric with it, and on a 2:1 leaf-spine whose
 * one uplink lost 10 % (simulator, docs/protocol.md "Dead paths") leaving
 * out the paths over it made RAT and halving-doubling 10-13 % slower (a
 * ring 23 % faster); at 30 % it made RAT 10 % and the ring 45 % faster.
 * Uniform random loss seldom singles a path out (pathset_test), and the
 * last usable path is never left out.  Counts are halved every HALVING
 * packets per path, so they follow the present.
 *
 * Routes.  Under ECMP a path is a source port, and the fabric's hash, not
 * the path, picks the links: a peer whose K ports all hash onto a dead
 * link has no path left (with K = 8 over 2 spines, 1 peer in 256 per
 * direction), and leaving paths out cannot help.  So, as PLB (SIGCOMM'22)
 * re-hashes a congested flow onto a fresh IPv6 flow label, each path can
 * take one of |routes| routes (the drivers' distinct source ports, from
 * dlcp_pathset_route): a path that is left out takes its next route for
 * when it rejoins, and a usable path that loses at least half of what it
 * carried (and REROUTE_LOSSES) takes its next route at once, with its
 * counts cleared, whether or not it stands out: every path of the
 * all-dead peer does, and each lands on a live link with the fabric's
 * odds (a peer has no live route only if all K * routes ports hash onto
 * the dead link).  The
 * control channel's path moves to its next route when a control message
 * or its acknowledgement was lost on it (dlcp_pathset_reroute): its few
 * messages would take long to count as half lost, and until one gets
 * through no data flows.  With one route (source routing, where the path
 * is the route) nothing moves.
 */
#ifndef DLCP_PROTO_PATHSET_H
#define DLCP_PROTO_PATHSET_H

#include <stdbool.h>
#include <stdint.h>

#include "dlcp/dlcp_types.h"

/* Losses a path must have before it can be left out. */
#define DLCP_PATHSET_MIN_LOSSES 8u
/* Packets per path between two halvings of the counts. */
#define DLCP_PATHSET_HALVING 256u
/* Losses a usable path must have, half of what it carried, before it
 * takes its next route: twice MIN_LOSSES, as half of a few is no
 * evidence of a bad route (pathset_test). */
#define DLCP_PATHSET_REROUTE_LOSSES 16u
/* Routes a path can take, at most. */
#define DLCP_PATHSET_MAX_ROUTES 16u

typedef struct dlcp_path_health {
  uint32_t sent, lost;   /* data packets, since the counts were halved */
  dlcp_tstamp out_until; /* left out of the rotation until then; 0: in */
  uint32_t strikes;      /* spells in a row: each doubles the next */
  uint32_t route;        /* 0..routes-1 */
} dlcp_path_health;

typedef struct dlcp_pathset {
  dlcp_path_health *path; /* |n| of them */
  uint32_t n;
  uint32_t routes;        /* per path */
  uint32_t since_halving; /* packets sent since the last halving */
  uint64_t spells;        /* paths left out so far */
  uint64_t reroutes;      /* paths moved to their next route so far */
} dlcp_pathset;

/* dlcp_pathset_init sets up |n| (>= 1) paths, all in the rotation, each
 * on the first of its |routes| (1..DLCP_PATHSET_MAX_ROUTES) routes.
 * Returns 0 or DLCP_ERR_NOMEM. */
int dlcp_pathset_init(dlcp_pathset *ps, const dlcp_mem *mem, uint32_t n,
                      uint32_t routes);
void dlcp_pathset_fini(dlcp_pathset *ps, const dlcp_mem *mem);

/* A data packet went out on |path| (< n). */
void dlcp_pathset_sent(dlcp_pathset *ps, uint32_t path);

/* The receiver reported a packet that went out on |path| missing; once a
 * report's losses are all charged, dlcp_pathset_judge decides. */
void dlcp_pathset_lost(dlcp_pathset *ps, uint32_t path);

/* Leaves out of the rotation the paths the counts single out, for
 * 16 |drain| (doubling per strike), moves them and the usable paths that
 * lose half to their next route, and lets back those whose spell has
 * ended at |now|. */
void dlcp_pathset_judge(dlcp_pathset *ps, dlcp_duration drain, dlcp_tstamp now);

/* Whether |path| is in the rotation at |now|. */
bool dlcp_pathset_usable(const dlcp_pathset *ps, uint32_t path,
                         dlcp_tstamp now);

/* |path| if it is in the rotation at |now|, else the first after it (in
 * id order, wrapping) that is. */
uint32_t dlcp_pathset_usable_from(const dlcp_pathset *ps, uint32_t path,
                                  dlcp_tstamp now);

/* Moves |path| to its next route with its counts cleared (nothing with
 * one route): the control channel's evidence that its route lost a
 * message or an acknowledgement, too few to count but all it has. */
void dlcp_pathset_reroute(dlcp_pathset *ps, uint32_t path);

/* The route |path| takes now: path + n * (its route number), below
 * n * routes; distinct paths never share one. */
uint32_t dlcp_pathset_route(const dlcp_pathset *ps, uint32_t path);

#endif /* DLCP_PROTO_PATHSET_H */
