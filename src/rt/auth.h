/*
 * auth.h: message authentication for a job that has a secret
 * (DLCP_JOB_SECRET).  Without one nothing here is used and the job trusts
 * its network (docs/runtime.md).
 *
 * Every authenticated message carries a trailer of DLCP_AUTH_TRAILER_LEN
 * bytes: its counter (u64, little-endian) and a 16-byte tag.  The tag is
 * Poly1305 over the message under a one-time key, the first 32 bytes of
 * XChaCha20 keyed by the job key with the nonce (stream, counter): the
 * construction of (X)ChaCha20-Poly1305 (RFC 8439) with the message as
 * associated data and nothing encrypted.  libsodium provides both.
 *
 * A stream is one direction of one channel between two ranks
 * (dlcp_auth_stream), and its counter starts at 1 and only grows, so a
 * (stream, counter) nonce is never reused under one key.  The receiver
 * keeps a dlcp_replay window per stream: a counter seen before, or older
 * than the window, is a replay and dropped (datagrams reorder, so the
 * window accepts the last 1024 counters in any order; a byte stream could
 * use a window of one).
 *
 * The job key is derived from the secret and the job token, so two jobs
 * with the same secret do not accept each other's messages either.  It
 * authenticates only the rendezvous HELLO and its answer, whose counters
 * are random (a HELLO's is the client's fresh nonce); that answer carries
 * a random salt drawn by the rendezvous server when it starts, and every
 * later message is tagged under the session key derived from the job key
 * and that salt (dlcp_auth_session).  A run of the same job again (same
 * secret, same token) therefore has a fresh key: its counters, which
 * start at 1 again, never meet the old ones, and nothing recorded from an
 * earlier run is accepted.
 */
#ifndef DLCP_RT_AUTH_H
#define DLCP_RT_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#define DLCP_AUTH_KEY_LEN 32u
#define DLCP_AUTH_TAG_LEN 16u
#define DLCP_AUTH_TRAILER_LEN 24u /* counter 8, tag 16 */
#define DLCP_AUTH_WINDOW 1024u    /* counters accepted out of order */
#define DLCP_AUTH_SECRET_MIN 16u  /* bytes of secret required */
#define DLCP_AUTH_SECRET_MAX 1024u /* bytes of secret at most */
#define DLCP_AUTH_SALT_LEN 32u
/* The rendezvous server's end of a RENDEZVOUS stream. */
#define DLCP_AUTH_SERVER 0xFFFFFFu

typedef struct dlcp_auth {
  uint8_t key[DLCP_AUTH_KEY_LEN];
} dlcp_auth;

typedef enum dlcp_auth_channel {
  DLCP_AUTH_DATAGRAM = 0,
  DLCP_AUTH_CONTROL = 1,
  DLCP_AUTH_RENDEZVOUS = 2,
} dlcp_auth_channel;

/* dlcp_auth_init derives the job key from |secret| (|len| >=
 * DLCP_AUTH_SECRET_MIN bytes) and |job|.  Returns 0, or -1 if libsodium
 * cannot start or the secret is too short. */
int dlcp_auth_init(dlcp_auth *a, const void *secret, size_t len, uint32_t job);

/* dlcp_auth_session derives the session key |s| of the run whose
 * rendezvous server drew |salt|, from the job key |job|. */
void dlcp_auth_session(dlcp_auth *s, const dlcp_auth *job,
                       const uint8_t salt[DLCP_AUTH_SALT_LEN]);

/* dlcp_auth_nonce returns a fresh random counter (never 0), for the
 * messages a key may tag again in another run (the HELLO exchange). */
uint64_t dlcp_auth_nonce(void);

/* dlcp_auth_salt fills |salt| with random bytes. */
void dlcp_auth_salt(uint8_t salt[DLCP_AUTH_SALT_LEN]);

/* dlcp_auth_forget wipes the key |a| holds. */
void dlcp_auth_forget(dlcp_auth *a);

/* dlcp_auth_stream names the direction |from| -> |to| of |channel|. */
uint64_t dlcp_auth_stream(dlcp_auth_channel channel, uint32_t from,
                          uint32_t to);

/* dlcp_auth_seal writes the trailer of message |iov|[0..n) (gathered in
 * order) with |counter| to |trailer|. */
void dlcp_auth_seal(const dlcp_auth *a, uint64_t stream, uint64_t counter,
                    const struct iovec *iov, int n,
                    uint8_t trailer[DLCP_AUTH_TRAILER_LEN]);

/* dlcp_auth_check verifies |trailer| against the message (in constant
 * time) and returns its counter, or 0 if the tag is wrong (0 is never a
 * valid counter). */
uint64_t dlcp_auth_check(const dlcp_auth *a, uint64_t stream,
                         const struct iovec *iov, int n,
                         const uint8_t trailer[DLCP_AUTH_TRAILER_LEN]);

/* The receiver's replay window of one stream; zero-initialise. */
typedef struct dlcp_replay {
  uint64_t top;                           /* highest counter accepted */
  uint64_t seen[DLCP_AUTH_WINDOW / 64u]; /* bit (c % WINDOW): c accepted */
} dlcp_replay;

/* dlcp_replay_accept returns true and records |counter| if it is new and
 * within the window, false for a replay, a counter too old to tell, or 0.
 * Call it only for messages whose tag checked. */
bool dlcp_replay_accept(dlcp_replay *w, uint64_t counter);

#endif /* DLCP_RT_AUTH_H */
