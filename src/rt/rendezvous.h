/*
 * rendezvous.h: how the ranks of a job find each other.
 *
 * Rank 0 serves a small key-value store over TCP (as torchrun's c10d
 * TCPStore); every rank, rank 0 included, connects to it as a client,
 * publishes its own data/control addresses under a key and waits for the
 * keys of the others.  The store lives only for the rendezvous: after a
 * final barrier the clients disconnect and rank 0 stops the server.
 *
 * The wire format is in wire/rdzv_wire.h.
 *
 * Every length is checked before anything is allocated; a malformed
 * request is answered with BAD_REQUEST and the connection closed.  The
 * server answers one request at a time per connection and holds each
 * connection to deadlines (see dlcp_rdzv_server_config).  A rank whose
 * connection stalls opens another and says HELLO again with the same
 * incarnation: the server closes the old one (rdzv_wire.h).
 */
#ifndef DLCP_RT_RENDEZVOUS_H
#define DLCP_RT_RENDEZVOUS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dlcp/dlcp_types.h"
#include "rt/auth.h"
#include "rt/env.h"
#include "rt/errbuf.h"
#include "wire/rdzv_wire.h"

typedef struct dlcp_rdzv_server dlcp_rdzv_server;
typedef struct dlcp_rdzv_client dlcp_rdzv_client;

/*
 * dlcp_rdzv_server_config: what the server serves and the limits that keep
 * a misbehaving client (silent, slow, not reading, sending garbage or too
 * many connections) from holding it.  Every connection closed for such a
 * reason gets one log line naming its address and what it did wrong (at
 * most 20 lines a second; the rest are counted in the next line).
 */
typedef struct dlcp_rdzv_server_config {
  uint32_t world_size; /* 1..DLCP_ENV_MAX_WORLD */
  uint32_t job;        /* every HELLO must carry this job token */
  /* The job key of a job with a secret (copied at start), or NULL: every
   * HELLO must then be tagged under it, and the answer carries the salt
   * the server draws at start (rdzv_wire.h). */
  const dlcp_auth *auth;
  /* A new connection has this long to say HELLO, a request once begun
   * this long to arrive whole, an answer this long to be read; then the
   * connection is closed.  A rank idle after its HELLO (or parked in a
   * WAIT) is never timed out. */
  uint32_t io_timeout_ms;
  /* Connections without a valid HELLO held at once; when full, the
   * oldest of them is closed to admit a new one, so a flood of strays
   * cannot lock the ranks out. */
  uint32_t max_strays;
  /* Receives each log line (without newline), from the server's thread;
   * NULL writes "dlcp: <line>" to stderr. */
  void (*log)(void *arg, const char *line);
  void *log_arg;
} dlcp_rdzv_server_config;

/* dlcp_rdzv_server_config_default fills |cfg| for a world of |world_size|
 * and job |job|: io_timeout_ms 10000, max_strays 64 + |world_size|, log
 * to stderr. */
void dlcp_rdzv_server_config_default(dlcp_rdzv_server_config *cfg,
                                     uint32_t world_size, uint32_t job);

/*
 * dlcp_rdzv_server_start binds |host| (NULL: every address, IPv6's and
 * IPv4's) on |port|
 * (0: any free port), and serves the store described by |cfg| from a
 * thread of its own until dlcp_rdzv_server_stop().  Returns 0,
 * DLCP_ERR_INVALID_ARGUMENT, DLCP_ERR_NOMEM or -errno with |eb| naming the
 * address (e.g. "cannot listen on 127.0.0.1:29500: Address already in
 * use").
 */
int dlcp_rdzv_server_start(dlcp_rdzv_server **psrv, const char *host,
                           uint16_t port, const dlcp_rdzv_server_config *cfg,
                           dlcp_errbuf *eb);

/* dlcp_rdzv_server_port returns the TCP port the server listens on. */
uint16_t dlcp_rdzv_server_port(const dlcp_rdzv_server *srv);

/*
 * dlcp_rdzv_server_rejected returns how many connections were refused
 * or closed so far because of malformed or out-of-protocol requests,
 * deadlines missed, or a full connection table.
 */
uint64_t dlcp_rdzv_server_rejected(const dlcp_rdzv_server *srv);

/* dlcp_rdzv_server_requests returns how many whole requests (HELLO
 * included) the server has handled so far. */
uint64_t dlcp_rdzv_server_requests(const dlcp_rdzv_server *srv);

/*
 * dlcp_rdzv_server_stop stops accepting connections, keeps serving the
 * connected ranks until they have all disconnected or |drain_deadline|
 * passes (so a rank still collecting its last answer gets it), then closes
 * everything and frees |srv|.  NULL is a no-op.
 */
void dlcp_rdzv_server_stop(dlcp_rdzv_server *srv, dlcp_tstamp drain_deadline);

/*
 * dlcp_rdzv_client_connect connects to the store at |host|:|port| as rank
 * |rank| of |world_size| in job |job|.  With |auth| (the job key, copied;
 * NULL: none) each HELLO is tagged, the server's answer checked, and the
 * run's salt written to |salt|.  A refused or unreachable server is
 * retried with exponential backoff (10 ms doubling to 1 s) until
 * |deadline|, since rank 0 may start after the others; a connection that
 * does not complete is raced by another from a new port every 250 ms.
 * Later requests reconnect by themselves when their connection stalls or
 * closes (rendezvous.c); a server that refuses the reconnection is gone.
 * Returns 0, DLCP_ERR_TIMEOUT with |eb| naming the address, the number of
 * attempts and the last error, DLCP_ERR_CONFIG (server disagrees on the
 * world size or the job, or the rank is taken by another process),
 * DLCP_ERR_BAD_MAGIC (something else listens there) or -errno.
 */
int dlcp_rdzv_client_connect(dlcp_rdzv_client **pcli, const char *host,
                             uint16_t port, uint32_t rank, uint32_t world_size,
                             uint32_t job, const dlcp_auth *auth,
                             uint8_t salt[DLCP_AUTH_SALT_LEN],
                             dlcp_tstamp deadline, dlcp_errbuf *eb);

/* dlcp_rdzv_client_reconnects returns how many times the client opened a
 * new connection after its first (a stalled or closed one). */
uint32_t dlcp_rdzv_client_reconnects(const dlcp_rdzv_client *cli);

/* dlcp_rdzv_client_close closes the connection and frees |cli| (NULL ok). */
void dlcp_rdzv_client_close(dlcp_rdzv_client *cli);

/* dlcp_rdzv_set stores |len| bytes of |value| under the NUL-terminated
 * |key|.  Returns 0 or a negative code with |eb| naming the server:
 * DLCP_ERR_PEER_CLOSED once the server is gone, DLCP_ERR_TIMEOUT if no
 * connection answered by |deadline|. */
int dlcp_rdzv_set(dlcp_rdzv_client *cli, const char *key, const void *value,
                  size_t len, dlcp_tstamp deadline, dlcp_errbuf *eb);

/*
 * dlcp_rdzv_get fetches |key| without waiting.  On success |*found| tells
 * whether the key exists; if it does, |*value| is a malloc'ed copy of
 * |*len| bytes (plus a NUL terminator not counted in |*len|) the caller
 * frees.
 */
int dlcp_rdzv_get(dlcp_rdzv_client *cli, const char *key, int *found,
                  void **value, size_t *len, dlcp_tstamp deadline,
                  dlcp_errbuf *eb);

/*
 * dlcp_rdzv_wait waits until |key| exists and returns its value as
 * dlcp_rdzv_get does.  Returns DLCP_ERR_TIMEOUT, naming the key and the
 * server, if it does not appear by |deadline|.
 */
int dlcp_rdzv_wait(dlcp_rdzv_client *cli, const char *key, void **value,
                   size_t *len, dlcp_tstamp deadline, dlcp_errbuf *eb);

/*
 * dlcp_rdzv_exchange is an all-gather through the store: this rank
 * publishes |len| bytes of |mine| as "<name>/<rank>" and collects every
 * rank's value: values[r] (malloc'ed, NUL-terminated, free with
 * dlcp_rdzv_free_values) of lens[r] bytes, for r in 0..world_size-1.  On
 * timeout the error lists the ranks that never published, e.g. "timed out
 * after 2000 ms waiting for ranks 2, 3 of 4 to publish 'addr'"; |values|
 * then holds nothing.
 */
int dlcp_rdzv_exchange(dlcp_rdzv_client *cli, const char *name,
                       const void *mine, size_t len, void **values,
                       size_t *lens, dlcp_tstamp deadline, dlcp_errbuf *eb);

/* dlcp_rdzv_free_values frees the |n| values of an exchange. */
void dlcp_rdzv_free_values(void **values, size_t n);

/*
 * dlcp_rdzv_barrier returns once every rank has entered the barrier
 * |name|, or DLCP_ERR_TIMEOUT listing the ranks that did not.
 */
int dlcp_rdzv_barrier(dlcp_rdzv_client *cli, const char *name,
                      dlcp_tstamp deadline, dlcp_errbuf *eb);

/*
 * dlcp_rdzv is a whole rendezvous as the communicator uses it: the server
 * (rank 0 only) and this rank's client.
 */
typedef struct dlcp_rdzv {
  dlcp_rdzv_server *server; /* NULL except on rank 0 */
  dlcp_rdzv_client *client;
  uint32_t timeout_ms;
  bool authenticated; /* the job has a secret: |session| is its key */
  dlcp_auth session;
} dlcp_rdzv;

/*
 * dlcp_rdzv_join starts the server on rank 0 (on MASTER_ADDR:MASTER_PORT,
 * or all interfaces if MASTER_ADDR is not a local address) and connects
 * this rank, within env->rdzv_timeout_ms.  With a job secret in |env| it
 * also derives the run's session key (rt/auth.h).  A world of one needs no
 * server and gets a NULL client.  Returns 0 or a negative code with |eb| set.
 */
int dlcp_rdzv_join(dlcp_rdzv *rdzv, const dlcp_rt_env *env, dlcp_errbuf *eb);

/*
 * dlcp_rdzv_leave passes a final barrier (so no rank is still reading
 * from the store), disconnects, and on rank 0 stops the server after the
 * others have disconnected.  Everything is released even when the barrier
 * fails; the error then names the ranks missing.
 */
int dlcp_rdzv_leave(dlcp_rdzv *rdzv, dlcp_errbuf *eb);

#endif /* DLCP_RT_RENDEZVOUS_H */
