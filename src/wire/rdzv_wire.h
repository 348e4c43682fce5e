/*
 * rdzv_wire.h: the wire formats of joining a job: the rendezvous store's
 * requests and responses, and the hello that opens each control
 * connection of the mesh.  The runtime (src/rt/rendezvous*.c, join.c)
 * does the I/O; the bytes are defined here, next to the other formats.
 *
 * Rendezvous (little-endian), one request then one response at a time
 * on each connection:
 *
 *   request  0 2 magic 0xD15A   2 1 version 4   3 1 op
 *            4 2 key_len (<= DLCP_RDZV_MAX_KEY)  6 2 reserved (zero)
 *            8 4 value_len (<= DLCP_RDZV_MAX_VALUE)
 *            12 key bytes, then value bytes
 *   response 0 2 magic  2 1 version  3 1 status  4 4 reserved (zero)
 *            8 4 value_len (<= DLCP_RDZV_MAX_ANSWER), then the value (or,
 *            for an error status, a message saying what was wrong)
 *
 *   op HELLO (1): value = rank u32, world u32, job u32, incarnation u64;
 *                 must come first on a connection; the server checks the
 *                 rank and that the world sizes and the job tokens agree
 *                 (version 1 had no job token).  The incarnation is drawn
 *                 at random once per client: a HELLO for a rank that is
 *                 connected already replaces that connection if it
 *                 carries the same incarnation (the rank reconnected: its
 *                 old connection stalled on a lossy link, which it may
 *                 not hear close) and is refused otherwise (two processes
 *                 with one rank).  Version 2 had no incarnation.
 *                 In a job with a secret (rt/auth.h) the value goes on
 *                 with an auth trailer (DLCP_RDZV_TRAILER_LEN: counter
 *                 u64 = the client's fresh random nonce, tag over the
 *                 first 20 bytes under the job key, stream RENDEZVOUS
 *                 rank -> server), and the OK answer's value is the
 *                 welcome: the run's salt (DLCP_RDZV_SALT_LEN) and a
 *                 trailer (the server's random counter, tag over salt and
 *                 the client's nonce u64 under the job key, stream
 *                 RENDEZVOUS server -> rank).
 *   op SET (2):   store value under key (replacing), answer OK.
 *   op GET (3):   answer OK with the value, or NOT_FOUND.
 *   op WAIT (4):  value = timeout_ms u32: answer OK with the value as soon
 *                 as the key exists, or NOT_FOUND when the timeout passes.
 *   op GATHER (5): key = a name; value = timeout_ms u32, first u32,
 *                 count u32 (count >= 1, first + count <= the world size):
 *                 as soon as all of the keys "<name>/<first>" ..
 *                 "<name>/<first + count - 1>" exist (decimal, as SET
 *                 stored them), answer OK with the values of the first n
 *                 of them that fit in DLCP_RDZV_MAX_ANSWER bytes (n >= 1):
 *                 n u32, then n times (len u32, len bytes); NOT_FOUND when
 *                 the timeout passes first.  An all-gather through the
 *                 store then costs each rank a SET and one GATHER per
 *                 answer's worth of values, where WAITs cost it one
 *                 request per rank (n^2 on the server).  Version 3 had no
 *                 GATHER.
 *
 * Mesh hello: the first 16 bytes on every control connection, sent by the
 * connecting (higher) rank: magic "DLCP" u32, DLCP_WIRE_VERSION u32, job
 * u32, rank u32.  In a job with a secret an auth trailer follows (counter
 * 1 of the connecting rank's CONTROL stream to the other, under the
 * session key), and so does one every control message after it (the
 * stream's next counter).
 */
#ifndef DLCP_WIRE_RDZV_WIRE_H
#define DLCP_WIRE_RDZV_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "dlcp/dlcp_types.h"

#define DLCP_RDZV_MAGIC 0xD15Au
#define DLCP_RDZV_VERSION 4u
#define DLCP_RDZV_HDR_LEN 12u
#define DLCP_RDZV_MAX_KEY 256u
#define DLCP_RDZV_MAX_VALUE 65536u
#define DLCP_RDZV_HELLO_LEN 20u /* HELLO's value */
/* The longest answer: a value, or a GATHER of one value of the longest
 * (its count and its length). */
#define DLCP_RDZV_MAX_ANSWER (DLCP_RDZV_MAX_VALUE + 8u)
#define DLCP_RDZV_WAIT_LEN 4u  /* WAIT's value */
#define DLCP_RDZV_GATHER_LEN 12u /* GATHER's value */
/* The longest name a GATHER (or an exchange) can use: its keys add "/"
 * and up to 10 digits. */
#define DLCP_RDZV_GATHER_MAX_NAME (DLCP_RDZV_MAX_KEY - 11u)
#define DLCP_RDZV_TRAILER_LEN 24u /* an auth trailer: counter 8, tag 16 */
#define DLCP_RDZV_SALT_LEN 32u
#define DLCP_RDZV_HELLO_AUTH_LEN (DLCP_RDZV_HELLO_LEN + DLCP_RDZV_TRAILER_LEN)
#define DLCP_RDZV_WELCOME_LEN (DLCP_RDZV_SALT_LEN + DLCP_RDZV_TRAILER_LEN)

typedef enum dlcp_rdzv_op {
  DLCP_RDZV_HELLO = 1,
  DLCP_RDZV_SET = 2,
  DLCP_RDZV_GET = 3,
  DLCP_RDZV_WAIT = 4,
  DLCP_RDZV_GATHER = 5,
} dlcp_rdzv_op;

typedef enum dlcp_rdzv_status {
  DLCP_RDZV_OK = 0,
  DLCP_RDZV_NOT_FOUND = 1,
  DLCP_RDZV_BAD_REQUEST = 2,
  DLCP_RDZV_REJECTED = 3,
} dlcp_rdzv_status;

/* A request header's fields as they arrived (not yet checked: the server
 * answers each kind of malformation with its own message). */
typedef struct dlcp_rdzv_request_hdr {
  uint16_t magic;
  uint8_t version;
  uint8_t op;
  uint16_t key_len;
  uint16_t reserved;
  uint32_t value_len;
} dlcp_rdzv_request_hdr;

/* dlcp_rdzv_put_request writes a request header (DLCP_RDZV_HDR_LEN bytes)
 * to |b|.  The caller has checked the lengths against the limits. */
void dlcp_rdzv_put_request(uint8_t *b, dlcp_rdzv_op op, uint16_t key_len,
                           uint32_t value_len);

/* dlcp_rdzv_get_request reads the header at |b| (DLCP_RDZV_HDR_LEN
 * bytes). */
void dlcp_rdzv_get_request(const uint8_t *b, dlcp_rdzv_request_hdr *h);

/* dlcp_rdzv_put_response writes a response header to |b|. */
void dlcp_rdzv_put_response(uint8_t *b, dlcp_rdzv_status status,
                            uint32_t value_len);

/* dlcp_rdzv_get_response checks and reads the response header at |b|.
 * Returns 0, or DLCP_ERR_BAD_MAGIC if it is not a rendezvous response of
 * this version (bad magic, version, status or a length over the limit). */
int dlcp_rdzv_get_response(const uint8_t *b, dlcp_rdzv_status *status,
                           uint32_t *value_len);

/* HELLO's value: who the client is. */
typedef struct dlcp_rdzv_hello {
  uint32_t rank;
  uint32_t world;
  uint32_t job;
  uint64_t incarnation; /* random, the same for every connection a client
                         * opens */
} dlcp_rdzv_hello;

/* dlcp_rdzv_put_hello writes |h| (DLCP_RDZV_HELLO_LEN bytes) to |b|. */
void dlcp_rdzv_put_hello(uint8_t *b, const dlcp_rdzv_hello *h);
/* dlcp_rdzv_get_hello reads the DLCP_RDZV_HELLO_LEN bytes at |b|. */
void dlcp_rdzv_get_hello(const uint8_t *b, dlcp_rdzv_hello *h);

/* WAIT's value: how long the server may hold the request, in ms. */
void dlcp_rdzv_put_wait(uint8_t *b, uint32_t timeout_ms);
uint32_t dlcp_rdzv_get_wait(const uint8_t *b);

/* GATHER's value: how long the server may hold it, and which keys. */
typedef struct dlcp_rdzv_gather {
  uint32_t timeout_ms;
  uint32_t first;
  uint32_t count;
} dlcp_rdzv_gather;

void dlcp_rdzv_put_gather(uint8_t *b, const dlcp_rdzv_gather *g);
void dlcp_rdzv_get_gather(const uint8_t *b, dlcp_rdzv_gather *g);

/* A GATHER's answer, read value by value. */
typedef struct dlcp_rdzv_gathered {
  const uint8_t *p; /* the next entry */
  size_t left;      /* bytes from p to the answer's end */
  uint32_t count;   /* values the answer announced */
  uint32_t read;    /* values returned so far */
} dlcp_rdzv_gathered;

/* dlcp_rdzv_gathered_open starts reading the |len| bytes of a GATHER's
 * answer at |b|.  Returns 0, or DLCP_ERR_BAD_LENGTH if they cannot be one
 * (shorter than its count, or a count of zero). */
int dlcp_rdzv_gathered_open(dlcp_rdzv_gathered *g, const uint8_t *b,
                            size_t len);

/* dlcp_rdzv_gathered_next points |*value| at the next value (inside the
 * answer) and sets |*len|.  Returns 1 for a value, 0 after the last one
 * when the answer ends exactly there, or DLCP_ERR_BAD_LENGTH for an entry
 * that runs past the answer's end or bytes left over after the last. */
int dlcp_rdzv_gathered_next(dlcp_rdzv_gathered *g, const uint8_t **value,
                            uint32_t *len);

#define DLCP_MESH_HELLO_MAGIC 0x50434C44u /* "DLCP" */
#define DLCP_MESH_HELLO_LEN 16u

/* dlcp_mesh_put_hello writes the mesh hello of rank |rank| of |job|. */
void dlcp_mesh_put_hello(uint8_t *b, uint32_t job, uint32_t rank);

/* dlcp_mesh_get_hello checks a received hello against |job| and sets
 * |*rank|.  Returns 0, DLCP_ERR_BAD_MAGIC, DLCP_ERR_BAD_VERSION or
 * DLCP_ERR_FOREIGN_JOB. */
int dlcp_mesh_get_hello(const uint8_t *b, uint32_t job, uint32_t *rank);

#endif /* DLCP_WIRE_RDZV_WIRE_H */
