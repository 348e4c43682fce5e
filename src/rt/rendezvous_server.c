/*
 * rendezvous_server.c: rank 0's key-value store (protocol in
 * rendezvous.h).
 *
 * Model: one thread, one poll() loop over an eventfd (to be woken for
 * shutdown), the listening socket and every client connection, all
 * non-blocking.  Each connection has an input buffer that grows only to
 * the size its validated header announces and an output queue.  Requests
 * on a connection are handled strictly one after another; a WAIT on a
 * missing key parks the connection (its later requests stay buffered)
 * until a SET of that key or the WAIT's own timeout, which is why poll's
 * timeout is the earliest parked deadline.  A GATHER parks the same way
 * on the first of its keys still missing, moving on as they arrive, and
 * is answered when none is.  Keys are found through a hash index, since
 * a GATHER of a large world looks up every rank's key.  A client that sends
 * garbage gets BAD_REQUEST and is disconnected; nothing a client sends can make
 * the server allocate more than one maximum-size message per connection
 * or stop serving the others.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "rt/clock.h"
#include "rt/net.h"
#include "rt/rendezvous.h"
#include "rt/tcp.h"
#include "wire/bytes.h"

/* The store holds addresses and barrier marks: a few keys per rank. */
#define MAX_STORE_BYTES (64u << 20)
#define MAX_KEYS_PER_RANK 16u
#define MAX_KEYS_EXTRA 64u
#define DEFAULT_IO_TIMEOUT_MS 10000u
#define DEFAULT_MAX_STRAYS 64u
/* Out of descriptors (EMFILE): stop accepting for this long, rather than
 * spin on a listening socket that stays readable. */
#define ACCEPT_PAUSE_MS 100u
#define LOG_BURST 20u
#define MAX_REQUEST                                                            \
  (DLCP_RDZV_HDR_LEN + DLCP_RDZV_MAX_KEY + DLCP_RDZV_MAX_VALUE)
#define INITIAL_IN_CAP 512u

typedef struct kv_entry {
  uint8_t *key;
  uint32_t key_len;
  uint8_t *value;
  uint32_t value_len;
} kv_entry;

typedef struct conn {
  int fd;
  int64_t rank; /* -1 until HELLO */
  uint64_t incarnation; /* its HELLO's */
  dlcp_tstamp accepted;
  uint64_t serial;            /* accept order: the oldest stray goes first */
  dlcp_tstamp request_since; /* first byte of the buffered request */
  dlcp_tstamp answer_since;  /* answer queued, not yet all sent */
  char peer[DLCP_NET_ADDRSTR_LEN];
  uint8_t *in;
  size_t in_len;
  size_t in_cap;
  uint8_t *out;
  size_t out_off; /* bytes of out already sent */
  size_t out_len;
  size_t out_cap;
  uint8_t *wait_key; /* the key a parked WAIT or GATHER waits for, or NULL */
  uint32_t wait_key_len;
  dlcp_tstamp wait_deadline;
  uint8_t *gather_name; /* a GATHER under way (parked or not), or NULL */
  uint32_t gather_name_len;
  uint32_t gather_first; /* its keys: first .. end - 1 */
  uint32_t gather_next;  /* the first not known to exist */
  uint32_t gather_end;
  int closing; /* close once out is flushed */
  int dead;    /* remove at the end of this round */
} conn;

struct dlcp_rdzv_server {
  int listen_fd;
  int wake_fd;
  uint16_t port;
  uint32_t world;
  dlcp_rdzv_server_config cfg;
  dlcp_auth auth; /* cfg.auth points here when the job has a secret */
  uint8_t salt[DLCP_AUTH_SALT_LEN];
  size_t max_conns;
  size_t max_keys;
  uint64_t accepted; /* connections accepted so far */
  dlcp_tstamp accept_resume; /* listening paused until then (EMFILE) */
  dlcp_tstamp now; /* the loop's clock, read once a round: every time the
                    * server records is this, so a round replays exactly */
  dlcp_tstamp log_window;    /* start of the current second of logging */
  uint32_t log_lines;        /* lines written in it */
  uint64_t log_suppressed;   /* lines not written since the last one */
  pthread_t thread;
  atomic_int stopping;
  _Atomic dlcp_tstamp drain_deadline;
  atomic_uint_fast64_t rejected;
  atomic_uint_fast64_t requests; /* whole requests handled */
  conn *conns;
  size_t nconns;
  kv_entry *kvs;
  size_t nkvs;
  size_t kv_cap;
  size_t kv_bytes;
  uint32_t *kv_index;   /* open addressing: 1 + an index into kvs, 0 free */
  size_t kv_index_mask; /* slots - 1, slots >= 2 max_keys */
  struct pollfd *pfds; /* 2 + max_conns */
};

/* ---- log ------------------------------------------------------------- */

static void srv_log(dlcp_rdzv_server *srv, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void srv_log(dlcp_rdzv_server *srv, const char *fmt, ...) {
  char line[640];
  char msg[512];
  va_list ap;
  if (srv->now - srv->log_window >= UINT64_C(1000000000)) {
    srv->log_window = srv->now;
    srv->log_lines = 0;
  }
  if (srv->log_lines >= LOG_BURST) {
    srv->log_suppressed++; /* a flood must not flood the log too */
    return;
  }
  srv->log_lines++;
  va_start(ap, fmt);
  if (vsnprintf(msg, sizeof(msg), fmt, ap) < 0) {
    msg[0] = '\0';
  }
  va_end(ap);
  if (srv->log_suppressed > 0) {
    dlcp_fmt(line, sizeof(line),
             "rendezvous server on port %u: %s (and %" PRIu64
             " similar lines suppressed)",
             (unsigned)srv->port, msg, srv->log_suppressed);
    srv->log_suppressed = 0;
  } else {
    dlcp_fmt(line, sizeof(line), "rendezvous server on port %u: %s",
             (unsigned)srv->port, msg);
  }
  if (srv->cfg.log != NULL) {
    srv->cfg.log(srv->cfg.log_arg, line);
  } else {
    fprintf(stderr, "dlcp: %s\n", line);
  }
}

/* who names a connection's client for a log line. */
static const char *who(const conn *c, char *buf, size_t len) {
  if (c->rank >= 0) {
    dlcp_fmt(buf, len, "rank %" PRId64 " (%s)", c->rank, c->peer);
  } else {
    dlcp_copy_str(buf, len, c->peer);
  }
  return buf;
}

/* drop closes |c| without an answer (the client is not listening or not
 * talking), counting and logging |why|. */
static void drop(dlcp_rdzv_server *srv, conn *c, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void drop(dlcp_rdzv_server *srv, conn *c, const char *fmt, ...) {
  char why[384];
  char name[DLCP_NET_ADDRSTR_LEN + 24];
  va_list ap;
  va_start(ap, fmt);
  if (vsnprintf(why, sizeof(why), fmt, ap) < 0) {
    why[0] = '\0';
  }
  va_end(ap);
  atomic_fetch_add(&srv->rejected, 1);
  srv_log(srv, "closed the connection of %s: %s", who(c, name, sizeof(name)),
          why);
  c->dead = 1;
}

/* ---- output ---------------------------------------------------------- */

static void conn_flush(conn *c) {
  while (c->out_off < c->out_len) {
    ssize_t n = send(c->fd, c->out + c->out_off, c->out_len - c->out_off,
                     MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      c->out_off += (size_t)n;
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      return;
    } else {
      c->dead = 1; /* peer gone: nothing more to say to it */
      return;
    }
  }
  c->out_off = c->out_len = 0;
  if (c->closing) {
    c->dead = 1;
  }
}

/* respond queues a response and tries to send it right away. */
static void respond(const dlcp_rdzv_server *srv, conn *c,
                    dlcp_rdzv_status status, const void *value,
                    size_t len) {
  size_t need = c->out_len + DLCP_RDZV_HDR_LEN + len;
  uint8_t *p;
  if (need > c->out_cap) {
    size_t cap = c->out_cap != 0 ? c->out_cap : 256;
    uint8_t *nout;
    while (cap < need) {
      cap *= 2;
    }
    nout = realloc(c->out, cap);
    if (nout == NULL) {
      c->dead = 1;
      return;
    }
    c->out = nout;
    c->out_cap = cap;
  }
  if (c->out_len == 0) {
    c->answer_since = srv->now;
  }
  p = c->out + c->out_len;
  dlcp_rdzv_put_response(p, status, (uint32_t)len);
  p += DLCP_RDZV_HDR_LEN;
  if (len > 0) {
    memcpy(p, value, len);
  }
  c->out_len = need;
  conn_flush(c);
}

/* reject answers with an explanation and closes the connection; counted
 * so tests and logs can see that garbage arrived. */
static void reject(dlcp_rdzv_server *srv, conn *c, dlcp_rdzv_status status,
                   const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void reject(dlcp_rdzv_server *srv, conn *c, dlcp_rdzv_status status,
                   const char *fmt, ...) {
  char msg[256];
  char name[DLCP_NET_ADDRSTR_LEN + 24];
  va_list ap;
  va_start(ap, fmt);
  if (vsnprintf(msg, sizeof(msg), fmt, ap) < 0) {
    msg[0] = '\0';
  }
  va_end(ap);
  atomic_fetch_add(&srv->rejected, 1);
  srv_log(srv, "refused %s and closed its connection: %s",
          who(c, name, sizeof(name)), msg);
  respond(srv, c, status, msg, strlen(msg));
  c->closing = 1;
  if (c->out_off >= c->out_len) {
    c->dead = 1;
  }
}

/* ---- store ----------------------------------------------------------- */

/* kv_slot returns the index slot of |key|: the one holding it, or the
 * free one where it would go (the table is never more than half full:
 * keys are never removed and max_keys bounds them). */
static uint32_t *kv_slot(dlcp_rdzv_server *srv, const uint8_t *key,
                         uint32_t key_len) {
  uint64_t h = UINT64_C(0xcbf29ce484222325); /* FNV-1a */
  for (uint32_t i = 0; i < key_len; i++) {
    h = (h ^ key[i]) * UINT64_C(0x100000001b3);
  }
  for (size_t i = (size_t)h & srv->kv_index_mask;;
       i = (i + 1) & srv->kv_index_mask) {
    uint32_t *slot = &srv->kv_index[i];
    const kv_entry *e;
    if (*slot == 0) {
      return slot;
    }
    e = &srv->kvs[*slot - 1];
    if (e->key_len == key_len && memcmp(e->key, key, key_len) == 0) {
      return slot;
    }
  }
}

static kv_entry *kv_find(dlcp_rdzv_server *srv, const uint8_t *key,
                         uint32_t key_len) {
  uint32_t *slot = kv_slot(srv, key, key_len);
  return *slot != 0 ? &srv->kvs[*slot - 1] : NULL;
}

/* kv_set stores a copy; returns 0 or -1 when out of memory / over the
 * store's limits on bytes or keys (the old value, if any, is kept). */
static int kv_set(dlcp_rdzv_server *srv, const uint8_t *key, uint32_t key_len,
                  const uint8_t *value, uint32_t value_len) {
  uint32_t *slot = kv_slot(srv, key, key_len);
  kv_entry *e = *slot != 0 ? &srv->kvs[*slot - 1] : NULL;
  uint8_t *nval;
  size_t old = e != NULL ? e->value_len : 0;
  if (srv->kv_bytes - old + value_len + key_len > MAX_STORE_BYTES ||
      (e == NULL && srv->nkvs >= srv->max_keys)) {
    return -1;
  }
  /* +1: never malloc(0), so an empty value still has a pointer. */
  nval = malloc((size_t)value_len + 1);
  if (nval == NULL) {
    return -1;
  }
  memcpy(nval, value, value_len);
  if (e == NULL) {
    uint8_t *nkey;
    if (srv->nkvs == srv->kv_cap) {
      size_t cap = srv->kv_cap != 0 ? srv->kv_cap * 2 : 64;
      kv_entry *nkvs = realloc(srv->kvs, cap * sizeof(*nkvs));
      if (nkvs == NULL) {
        free(nval);
        return -1;
      }
      srv->kvs = nkvs;
      srv->kv_cap = cap;
    }
    nkey = malloc(key_len);
    if (nkey == NULL) {
      free(nval);
      return -1;
    }
    memcpy(nkey, key, key_len);
    e = &srv->kvs[srv->nkvs++];
    *slot = (uint32_t)srv->nkvs;
    e->key = nkey;
    e->key_len = key_len;
    e->value = NULL;
    e->value_len = 0;
    srv->kv_bytes += key_len;
  }
  free(e->value);
  srv->kv_bytes = srv->kv_bytes - e->value_len + value_len;
  e->value = nval;
  e->value_len = value_len;
  return 0;
}

/* ---- waiting and gathering ------------------------------------------ */

/* park holds |c|'s request until |key| is stored (a copy is kept);
 * returns false, the connection dropped, when out of memory. */
static bool park(conn *c, const uint8_t *key, uint32_t key_len) {
  c->wait_key = malloc(key_len);
  if (c->wait_key == NULL) {
    c->dead = 1;
    return false;
  }
  memcpy(c->wait_key, key, key_len);
  c->wait_key_len = key_len;
  return true;
}

/* gather_key writes the key "<name>/<i>" of |c|'s GATHER to |key| (room
 * for DLCP_RDZV_MAX_KEY bytes, which the name was checked to leave) and
 * returns its length. */
static uint32_t gather_key(const conn *c, uint32_t i, uint8_t *key) {
  char digits[12];
  int n = snprintf(digits, sizeof(digits), "/%" PRIu32, i);
  memcpy(key, c->gather_name, c->gather_name_len);
  memcpy(key + c->gather_name_len, digits, (size_t)n);
  return c->gather_name_len + (uint32_t)n;
}

static void gather_done(conn *c) {
  free(c->gather_name);
  c->gather_name = NULL;
}

/* gather_answer answers |c|'s GATHER, every key of which exists: the
 * values from its first on, as many as fit in an answer. */
static void gather_answer(dlcp_rdzv_server *srv, conn *c) {
  uint8_t key[DLCP_RDZV_MAX_KEY];
  uint8_t *answer = malloc(DLCP_RDZV_MAX_ANSWER);
  size_t len = 4;
  uint32_t n = 0;
  if (answer == NULL) {
    c->dead = 1;
    gather_done(c);
    return;
  }
  for (uint32_t i = c->gather_first; i < c->gather_end; i++, n++) {
    const kv_entry *e = kv_find(srv, key, gather_key(c, i, key));
    if (len + 4 + e->value_len > DLCP_RDZV_MAX_ANSWER) {
      break;
    }
    dlcp_put_u32(answer + len, e->value_len);
    memcpy(answer + len + 4, e->value, e->value_len);
    len += 4 + (size_t)e->value_len;
  }
  dlcp_put_u32(answer, n);
  gather_done(c);
  respond(srv, c, DLCP_RDZV_OK, answer, len);
  free(answer);
}

/* gather_continue moves |c|'s GATHER past the keys that exist: answers it
 * when none is missing, or parks it on the first that is. */
static void gather_continue(dlcp_rdzv_server *srv, conn *c) {
  uint8_t key[DLCP_RDZV_MAX_KEY];
  for (; c->gather_next < c->gather_end; c->gather_next++) {
    uint32_t len = gather_key(c, c->gather_next, key);
    if (kv_find(srv, key, len) == NULL) {
      if (!park(c, key, len)) {
        gather_done(c);
      }
      return;
    }
  }
  gather_answer(srv, c);
}

/* on_gather starts the GATHER of |c| (request checked but for its
 * value). */
static void on_gather(dlcp_rdzv_server *srv, conn *c, const uint8_t *name,
                      uint32_t name_len, const uint8_t *val, uint32_t val_len) {
  dlcp_rdzv_gather g;
  if (val_len != DLCP_RDZV_GATHER_LEN) {
    reject(srv, c, DLCP_RDZV_BAD_REQUEST, "GATHER must carry %u bytes",
           DLCP_RDZV_GATHER_LEN);
    return;
  }
  dlcp_rdzv_get_gather(val, &g);
  if (g.count == 0 || g.first >= srv->world || g.count > srv->world - g.first) {
    reject(srv, c, DLCP_RDZV_BAD_REQUEST,
           "GATHER of %" PRIu32 " keys from %" PRIu32
           " is not within the world of %" PRIu32,
           g.count, g.first, srv->world);
    return;
  }
  if (name_len > DLCP_RDZV_GATHER_MAX_NAME) {
    reject(srv, c, DLCP_RDZV_BAD_REQUEST,
           "GATHER name of %" PRIu32 " bytes over the limit (%u)", name_len,
           DLCP_RDZV_GATHER_MAX_NAME);
    return;
  }
  c->gather_name = malloc(name_len);
  if (c->gather_name == NULL) {
    c->dead = 1;
    return;
  }
  memcpy(c->gather_name, name, name_len);
  c->gather_name_len = name_len;
  c->gather_first = c->gather_next = g.first;
  c->gather_end = g.first + g.count;
  c->wait_deadline = srv->now + (dlcp_tstamp)g.timeout_ms * DLCP_NS_PER_MS;
  gather_continue(srv, c);
}

/* ---- requests -------------------------------------------------------- */

/* wake_waiters answers every WAIT parked on the key of |e| and moves on
 * every GATHER parked on it. */
static void wake_waiters(dlcp_rdzv_server *srv, const kv_entry *e) {
  size_t i;
  for (i = 0; i < srv->nconns; i++) {
    conn *c = &srv->conns[i];
    if (c->wait_key != NULL && c->wait_key_len == e->key_len &&
        memcmp(c->wait_key, e->key, e->key_len) == 0) {
      free(c->wait_key);
      c->wait_key = NULL;
      if (c->gather_name != NULL) {
        c->gather_next++;
        gather_continue(srv, c);
      } else {
        respond(srv, c, DLCP_RDZV_OK, e->value, e->value_len);
      }
    }
  }
}

static void on_hello(dlcp_rdzv_server *srv, conn *c, const uint8_t *val,
                     uint32_t val_len) {
  dlcp_rdzv_hello h;
  size_t i;
  uint32_t want =
      srv->cfg.auth ? DLCP_RDZV_HELLO_AUTH_LEN : DLCP_RDZV_HELLO_LEN;
  uint64_t nonce = 0;
  if (c->rank >= 0) {
    reject(srv, c, DLCP_RDZV_BAD_REQUEST, "HELLO sent twice");
    return;
  }
  if (val_len != want) {
    if (val_len == DLCP_RDZV_HELLO_LEN || val_len == DLCP_RDZV_HELLO_AUTH_LEN) {
      reject(srv, c, DLCP_RDZV_REJECTED,
             val_len == DLCP_RDZV_HELLO_LEN
                 ? "this job requires its secret (DLCP_JOB_SECRET), and the "
                   "rank has none"
                 : "the rank has a job secret (DLCP_JOB_SECRET), and this "
                   "job has none");
    } else {
      reject(srv, c, DLCP_RDZV_BAD_REQUEST,
             "HELLO must carry %" PRIu32 " bytes", want);
    }
    return;
  }
  dlcp_rdzv_get_hello(val, &h);
  if (srv->cfg.auth) {
    struct iovec msg = {(void *)(uintptr_t)val, DLCP_RDZV_HELLO_LEN};
    nonce = dlcp_auth_check(
        srv->cfg.auth,
        dlcp_auth_stream(DLCP_AUTH_RENDEZVOUS, h.rank, DLCP_AUTH_SERVER), &msg,
        1, val + DLCP_RDZV_HELLO_LEN);
    if (nonce == 0) {
      reject(srv, c, DLCP_RDZV_REJECTED,
             "wrong job secret (DLCP_JOB_SECRET differs from rank 0's) or "
             "a forged HELLO claiming rank %" PRIu32,
             h.rank);
      return;
    }
  }
  if (h.job != srv->cfg.job) {
    reject(srv, c, DLCP_RDZV_REJECTED,
           "job mismatch: this is job %" PRIu32 ", rank %" PRIu32
           " belongs to job %" PRIu32 " (DLCP_JOB differs, or another job "
           "uses this MASTER_PORT)",
           srv->cfg.job, h.rank, h.job);
    return;
  }
  if (h.world != srv->world) {
    reject(srv, c, DLCP_RDZV_REJECTED,
           "WORLD_SIZE mismatch: rank 0 has WORLD_SIZE=%" PRIu32
           ", rank %" PRIu32 " has WORLD_SIZE=%" PRIu32,
           srv->world, h.rank, h.world);
    return;
  }
  if (h.rank >= h.world) {
    reject(srv, c, DLCP_RDZV_REJECTED,
           "RANK=%" PRIu32 " is not below WORLD_SIZE=%" PRIu32, h.rank,
           h.world);
    return;
  }
  for (i = 0; i < srv->nconns; i++) {
    conn *o = &srv->conns[i];
    if (o == c || o->dead || o->rank != (int64_t)h.rank) {
      continue;
    }
    if (o->incarnation != h.incarnation) {
      reject(srv, c, DLCP_RDZV_REJECTED,
             "rank %" PRIu32 " is already connected from %s (two processes "
             "with the same RANK?)",
             h.rank, o->peer);
      return;
    }
    /* The same client again: its old connection stalled (it may never
     * hear this close, which is why it did not wait for one). */
    srv_log(srv,
            "rank %" PRIu32 " reconnected from %s: closed its connection "
            "from %s",
            h.rank, c->peer, o->peer);
    o->dead = 1;
  }
  c->rank = (int64_t)h.rank;
  c->incarnation = h.incarnation;
  if (!srv->cfg.auth) {
    respond(srv, c, DLCP_RDZV_OK, NULL, 0);
    return;
  }
  /* The welcome: the salt, tagged together with the client's nonce so
   * that an answer recorded from another run does not pass. */
  uint8_t welcome[DLCP_RDZV_WELCOME_LEN];
  uint8_t echo[8];
  memcpy(welcome, srv->salt, DLCP_RDZV_SALT_LEN);
  dlcp_put_u64(echo, nonce);
  struct iovec msg[2] = {{welcome, DLCP_RDZV_SALT_LEN}, {echo, sizeof(echo)}};
  dlcp_auth_seal(
      srv->cfg.auth,
      dlcp_auth_stream(DLCP_AUTH_RENDEZVOUS, DLCP_AUTH_SERVER, h.rank),
      dlcp_auth_nonce(), msg, 2, welcome + DLCP_RDZV_SALT_LEN);
  respond(srv, c, DLCP_RDZV_OK, welcome, sizeof(welcome));
}

/* handle dispatches one complete, header-validated request. */
static void handle(dlcp_rdzv_server *srv, conn *c, uint8_t op,
                   const uint8_t *key, uint32_t key_len, const uint8_t *val,
                   uint32_t val_len) {
  kv_entry *e;
  atomic_fetch_add(&srv->requests, 1);
  if (op == DLCP_RDZV_HELLO) {
    on_hello(srv, c, val, val_len);
    return;
  }
  if (c->rank < 0) {
    reject(srv, c, DLCP_RDZV_BAD_REQUEST, "HELLO expected first");
    return;
  }
  if (key_len == 0) {
    reject(srv, c, DLCP_RDZV_BAD_REQUEST, "empty key");
    return;
  }
  switch ((dlcp_rdzv_op)op) {
  case DLCP_RDZV_SET:
    if (kv_set(srv, key, key_len, val, val_len) != 0) {
      reject(srv, c, DLCP_RDZV_REJECTED,
             "store full (limits: %u bytes, %zu keys)", MAX_STORE_BYTES,
             srv->max_keys);
      return;
    }
    respond(srv, c, DLCP_RDZV_OK, NULL, 0);
    wake_waiters(srv, kv_find(srv, key, key_len));
    return;
  case DLCP_RDZV_GET:
    if (val_len != 0) {
      reject(srv, c, DLCP_RDZV_BAD_REQUEST, "GET carries no value");
      return;
    }
    e = kv_find(srv, key, key_len);
    if (e != NULL) {
      respond(srv, c, DLCP_RDZV_OK, e->value, e->value_len);
    } else {
      respond(srv, c, DLCP_RDZV_NOT_FOUND, NULL, 0);
    }
    return;
  case DLCP_RDZV_WAIT:
    if (val_len != DLCP_RDZV_WAIT_LEN) {
      reject(srv, c, DLCP_RDZV_BAD_REQUEST, "WAIT must carry 4 bytes");
      return;
    }
    e = kv_find(srv, key, key_len);
    if (e != NULL) {
      respond(srv, c, DLCP_RDZV_OK, e->value, e->value_len);
      return;
    }
    if (!park(c, key, key_len)) {
      return;
    }
    c->wait_deadline =
        srv->now + (dlcp_tstamp)dlcp_rdzv_get_wait(val) * DLCP_NS_PER_MS;
    return;
  case DLCP_RDZV_GATHER:
    on_gather(srv, c, key, key_len, val, val_len);
    return;
  case DLCP_RDZV_HELLO:
    break;
  }
  reject(srv, c, DLCP_RDZV_BAD_REQUEST, "unknown op %u", (unsigned)op);
}

/* conn_process handles the buffered requests of |c| until one is
 * incomplete, parks the connection or has its answer still unsent. */
static void conn_process(dlcp_rdzv_server *srv, conn *c) {
  while (!c->dead && !c->closing && c->wait_key == NULL && c->out_len == 0 &&
         c->in_len >= DLCP_RDZV_HDR_LEN) {
    const uint8_t *h = c->in;
    dlcp_rdzv_request_hdr rh;
    dlcp_rdzv_get_request(h, &rh);
    uint16_t magic = rh.magic;
    uint8_t version = rh.version;
    uint8_t op = rh.op;
    uint16_t key_len = rh.key_len;
    uint16_t reserved = rh.reserved;
    uint32_t val_len = rh.value_len;
    size_t total;

    if (magic != DLCP_RDZV_MAGIC) {
      reject(srv, c, DLCP_RDZV_BAD_REQUEST,
             "not a dlcp rendezvous request (magic 0x%04x)", magic);
      return;
    }
    if (version != DLCP_RDZV_VERSION) {
      reject(srv, c, DLCP_RDZV_BAD_REQUEST,
             "unsupported rendezvous version %u (expected %u)",
             (unsigned)version, DLCP_RDZV_VERSION);
      return;
    }
    if (op < DLCP_RDZV_HELLO || op > DLCP_RDZV_GATHER || reserved != 0) {
      reject(srv, c, DLCP_RDZV_BAD_REQUEST, "unknown op %u or reserved bits",
             (unsigned)op);
      return;
    }
    if (key_len > DLCP_RDZV_MAX_KEY || val_len > DLCP_RDZV_MAX_VALUE) {
      reject(srv, c, DLCP_RDZV_BAD_REQUEST,
             "key of %u bytes or value of %" PRIu32 " bytes over the limit "
             "(%u, %u)",
             (unsigned)key_len, val_len, DLCP_RDZV_MAX_KEY,
             DLCP_RDZV_MAX_VALUE);
      return;
    }
    total = DLCP_RDZV_HDR_LEN + (size_t)key_len + val_len;
    if (c->in_len < total) {
      if (c->in_cap < total) {
        /* Grow only now that the header is known to be sane. */
        uint8_t *nin = realloc(c->in, total);
        if (nin == NULL) {
          c->dead = 1;
          return;
        }
        c->in = nin;
        c->in_cap = total;
      }
      return;
    }
    handle(srv, c, op, h + DLCP_RDZV_HDR_LEN, key_len,
           h + DLCP_RDZV_HDR_LEN + key_len, val_len);
    memmove(c->in, c->in + total, c->in_len - total);
    c->in_len -= total;
    c->request_since = srv->now; /* the next one has begun, if any */
  }
}

static void conn_read(dlcp_rdzv_server *srv, conn *c) {
  for (;;) {
    ssize_t n;
    if (c->in_len == c->in_cap) {
      /* Full: a parked WAIT holds requests back, or the header asked for
       * a size conn_process already granted.  Read again later. */
      break;
    }
    n = recv(c->fd, c->in + c->in_len, c->in_cap - c->in_len, MSG_DONTWAIT);
    if (n > 0) {
      if (c->in_len == 0) {
        c->request_since = srv->now;
      }
      c->in_len += (size_t)n;
      conn_process(srv, c);
      continue;
    }
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      return;
    }
    /* End of stream or reset: a request cut short is simply dropped. */
    c->dead = 1;
    return;
  }
}

/* ---- connections ----------------------------------------------------- */

static void conn_free(conn *c) {
  close(c->fd);
  free(c->in);
  free(c->out);
  free(c->wait_key);
  free(c->gather_name);
}

/* sweep removes dead connections, keeping the array dense. */
static void sweep(dlcp_rdzv_server *srv) {
  size_t i = 0;
  while (i < srv->nconns) {
    if (srv->conns[i].dead) {
      conn_free(&srv->conns[i]);
      srv->conns[i] = srv->conns[--srv->nconns];
    } else {
      i++;
    }
  }
}

/* make_room closes the oldest connection without HELLO if there are
 * max_strays of them, so a new one can be admitted. */
static void make_room(dlcp_rdzv_server *srv) {
  conn *oldest = NULL;
  size_t i;
  size_t strays = 0;
  for (i = 0; i < srv->nconns; i++) {
    conn *c = &srv->conns[i];
    if (c->rank < 0 && !c->dead) {
      strays++;
      if (oldest == NULL || c->serial < oldest->serial) {
        oldest = c;
      }
    }
  }
  if (strays < srv->cfg.max_strays) {
    return;
  }
  drop(srv, oldest,
       "%zu connections without HELLO (limit %" PRIu32 "); the oldest, "
       "%" PRIu64 " ms old, makes room for a new one",
       strays, srv->cfg.max_strays,
       (srv->now - oldest->accepted) / DLCP_NS_PER_MS);
  sweep(srv);
}

/* conn_add admits the connection |fd| from |peer| (taking the fd),
 * evicting the oldest stray if there are max_strays of them. */
static void conn_add(dlcp_rdzv_server *srv, int fd, const char *peer) {
  conn *c;
  make_room(srv);
  if (srv->nconns >= srv->max_conns) {
    /* Cannot happen (ranks <= world, strays <= max_strays after
     * make_room); guards the fixed array all the same. */
    atomic_fetch_add(&srv->rejected, 1);
    close(fd);
    return;
  }
  c = &srv->conns[srv->nconns];
  memset(c, 0, sizeof(*c));
  c->fd = fd;
  c->rank = -1;
  c->accepted = srv->now;
  c->serial = srv->accepted++;
  c->in = malloc(INITIAL_IN_CAP);
  if (c->in == NULL) {
    close(fd);
    return;
  }
  c->in_cap = INITIAL_IN_CAP;
  snprintf(c->peer, sizeof(c->peer), "%s", peer);
  srv->nconns++;
}

static void accept_all(dlcp_rdzv_server *srv) {
  for (;;) {
    struct sockaddr_storage ss;
    socklen_t sslen = sizeof(ss);
    char peer[DLCP_NET_ADDRSTR_LEN];
    int fd = accept4(srv->listen_fd, (struct sockaddr *)&ss, &sslen,
                     SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
          errno == ENOMEM) {
        srv_log(srv, "cannot accept connections: %s; pausing %u ms",
                strerror(errno), ACCEPT_PAUSE_MS);
        srv->accept_resume =
            srv->now + (dlcp_tstamp)ACCEPT_PAUSE_MS * DLCP_NS_PER_MS;
      }
      return; /* EAGAIN, or a transient error: retried on the next wake */
    }
    dlcp_tcp_tune(fd);
    dlcp_net_addr_format(peer, sizeof(peer), (struct sockaddr *)&ss);
    conn_add(srv, fd, peer);
  }
}

/* conn_deadline is when |c| is closed unless the client does its part:
 * say HELLO, finish its request, read its answer.  A rank idle after
 * HELLO, or parked in a WAIT or GATHER, has none. */
static dlcp_tstamp conn_deadline(const dlcp_rdzv_server *srv, const conn *c) {
  dlcp_tstamp since;
  if (c->dead) {
    return DLCP_TSTAMP_NEVER;
  }
  if (c->rank < 0) {
    since = c->accepted;
  } else if (c->out_len > c->out_off) {
    since = c->answer_since;
  } else if (c->in_len > 0 && c->wait_key == NULL) {
    since = c->request_since;
  } else {
    return DLCP_TSTAMP_NEVER;
  }
  return since + (dlcp_tstamp)srv->cfg.io_timeout_ms * DLCP_NS_PER_MS;
}

/* expire_conns closes every connection past its deadline, saying why. */
static void expire_conns(dlcp_rdzv_server *srv, dlcp_tstamp now) {
  uint32_t ms = srv->cfg.io_timeout_ms;
  size_t i;
  for (i = 0; i < srv->nconns; i++) {
    conn *c = &srv->conns[i];
    if (now < conn_deadline(srv, c)) {
      continue;
    }
    if (c->out_len > c->out_off) {
      drop(srv, c, "did not read its answer within %" PRIu32 " ms (%zu of "
           "%zu bytes unread)", ms, c->out_len - c->out_off, c->out_len);
    } else if (c->rank < 0 && c->in_len == 0) {
      drop(srv, c, "sent nothing within %" PRIu32 " ms (silent client)", ms);
    } else if (c->rank < 0) {
      drop(srv, c, "no complete HELLO within %" PRIu32 " ms (%zu bytes "
           "received; slow client)", ms, c->in_len);
    } else {
      drop(srv, c, "request still incomplete %" PRIu32 " ms after it "
           "began (%zu bytes received; slow client)", ms, c->in_len);
    }
  }
}

static void expire_waits(dlcp_rdzv_server *srv, dlcp_tstamp now) {
  size_t i;
  for (i = 0; i < srv->nconns; i++) {
    conn *c = &srv->conns[i];
    if (c->wait_key != NULL && now >= c->wait_deadline) {
      free(c->wait_key);
      c->wait_key = NULL;
      gather_done(c);
      respond(srv, c, DLCP_RDZV_NOT_FOUND, NULL, 0);
    }
  }
}

static int ranks_connected(const dlcp_rdzv_server *srv) {
  size_t i;
  for (i = 0; i < srv->nconns; i++) {
    if (srv->conns[i].rank >= 0) {
      return 1;
    }
  }
  return 0;
}

/* conn_on_events handles what poll reported for |c|. */
static void conn_on_events(dlcp_rdzv_server *srv, conn *c, short revents) {
  if (revents & POLLOUT) {
    conn_flush(c);
  }
  if (revents & POLLIN) {
    conn_read(srv, c);
  } else if (revents & (POLLHUP | POLLERR | POLLRDHUP)) {
    c->dead = 1; /* ended or reset while its input was full */
  }
}

/* round_end closes a round of the loop at |now|: deadlines, the requests
 * that became processable (a WAIT answered, an answer sent), and the
 * removal of the dead. */
static void round_end(dlcp_rdzv_server *srv, dlcp_tstamp now) {
  size_t i;
  srv->now = now;
  expire_waits(srv, now);
  expire_conns(srv, now);
  for (i = 0; i < srv->nconns; i++) {
    conn_process(srv, &srv->conns[i]);
  }
  sweep(srv);
}

static void *server_main(void *arg) {
  dlcp_rdzv_server *srv = arg;
  for (;;) {
    dlcp_tstamp now = dlcp_rt_now();
    dlcp_tstamp wake = DLCP_TSTAMP_NEVER;
    nfds_t n = 0;
    size_t i;

    if (atomic_load(&srv->stopping)) {
      if (srv->listen_fd >= 0) {
        close(srv->listen_fd);
        srv->listen_fd = -1;
      }
      wake = atomic_load(&srv->drain_deadline);
      if (!ranks_connected(srv) || now >= wake) {
        break;
      }
    }
    for (i = 0; i < srv->nconns; i++) {
      dlcp_tstamp d = conn_deadline(srv, &srv->conns[i]);
      if (srv->conns[i].wait_key != NULL &&
          srv->conns[i].wait_deadline < wake) {
        wake = srv->conns[i].wait_deadline;
      }
      if (d < wake) {
        wake = d;
      }
    }
    if (now < srv->accept_resume && srv->accept_resume < wake) {
      wake = srv->accept_resume;
    }

    srv->pfds[n].fd = srv->wake_fd;
    srv->pfds[n++].events = POLLIN;
    /* -1 (stopped, or accepting paused) is ignored by poll */
    srv->pfds[n].fd = now >= srv->accept_resume ? srv->listen_fd : -1;
    srv->pfds[n++].events = POLLIN;
    for (i = 0; i < srv->nconns; i++) {
      conn *c = &srv->conns[i];
      srv->pfds[n].fd = c->fd;
      /* POLLRDHUP: a client that ends its stream while its input is not
       * being read (full behind a parked WAIT) is gone all the same. */
      srv->pfds[n].events = (short)((c->in_len < c->in_cap ? POLLIN : 0) |
                                    (c->out_len > c->out_off ? POLLOUT : 0) |
                                    POLLRDHUP);
      n++;
    }
    for (i = 0; i < n; i++) {
      srv->pfds[i].revents = 0;
    }
    if (poll(srv->pfds, n, dlcp_rt_poll_timeout(wake)) < 0 && errno != EINTR) {
      break; /* cannot wait any more: clients see the connection close */
    }

    if (srv->pfds[0].revents != 0) {
      uint64_t v;
      (void)!read(srv->wake_fd, &v, sizeof(v));
    }
    srv->now = dlcp_rt_now();
    /* Connections first: accept_all appends to the array the pollfds
     * were built from. */
    for (i = 0; i < srv->nconns; i++) {
      conn_on_events(srv, &srv->conns[i], srv->pfds[2 + i].revents);
    }
    if (srv->pfds[1].revents != 0 && srv->listen_fd >= 0) {
      accept_all(srv);
    }
    round_end(srv, srv->now);
  }
  if (srv->log_suppressed > 0) {
    srv->log_lines = 0;
    srv->log_window = srv->now;
    srv_log(srv, "stopped");
  }
  return NULL;
}

/* ---- lifecycle ------------------------------------------------------- */

static void server_free(dlcp_rdzv_server *srv) {
  size_t i;
  for (i = 0; i < srv->nconns; i++) {
    conn_free(&srv->conns[i]);
  }
  for (i = 0; i < srv->nkvs; i++) {
    free(srv->kvs[i].key);
    free(srv->kvs[i].value);
  }
  if (srv->listen_fd >= 0) {
    close(srv->listen_fd);
  }
  if (srv->wake_fd >= 0) {
    close(srv->wake_fd);
  }
  free(srv->kvs);
  free(srv->kv_index);
  free(srv->conns);
  free(srv->pfds);
  free(srv);
}

static int server_listen(dlcp_rdzv_server *srv, const char *host, uint16_t port,
                         dlcp_errbuf *eb) {
  dlcp_sockaddr addr;
  struct sockaddr_storage bound;
  socklen_t boundlen = sizeof(bound);
  char where[DLCP_NET_ADDRSTR_LEN];
  int one = 1;
  int rv;
  const int type = SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC;
  if (host != NULL) {
    rv = dlcp_net_resolve(&addr, host, port, SOCK_STREAM, eb);
    if (rv != 0) {
      return rv;
    }
    srv->listen_fd = socket(addr.sa.sa_family, type, 0);
  } else {
    /* Every address of either version: IPv6's any, open to IPv4 too, or
     * IPv4's on a kernel without IPv6. */
    (void)dlcp_sockaddr_parse(&addr, "::", port);
    srv->listen_fd = socket(AF_INET6, type, 0);
    if (srv->listen_fd >= 0) {
      int v6only = 0;
      (void)setsockopt(srv->listen_fd, IPPROTO_IPV6, IPV6_V6ONLY, &v6only,
                       sizeof(v6only));
    } else {
      (void)dlcp_sockaddr_parse(&addr, "0.0.0.0", port);
      srv->listen_fd = socket(AF_INET, type, 0);
    }
  }
  if (srv->listen_fd < 0) {
    return dlcp_errbuf_set(eb, -errno, "rendezvous server: socket: %s",
                           strerror(errno));
  }
  dlcp_net_addr_format(where, sizeof(where), &addr.sa);
  /* A restarted job must be able to reuse a port still in TIME_WAIT. */
  (void)setsockopt(srv->listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  dlcp_tcp_tune(srv->listen_fd);
  if (bind(srv->listen_fd, &addr.sa, dlcp_sockaddr_len(&addr)) != 0 ||
      listen(srv->listen_fd, 1024) != 0 ||
      getsockname(srv->listen_fd, (struct sockaddr *)&bound, &boundlen) != 0) {
    rv = -errno;
    return dlcp_errbuf_set(eb, rv, "rendezvous server: cannot listen on %s: %s",
                           where, strerror(-rv));
  }
  srv->port = dlcp_net_addr_port((struct sockaddr *)&bound);
  return 0;
}

void dlcp_rdzv_server_config_default(dlcp_rdzv_server_config *cfg,
                                     uint32_t world_size, uint32_t job) {
  memset(cfg, 0, sizeof(*cfg));
  cfg->world_size = world_size;
  cfg->job = job;
  cfg->io_timeout_ms = DEFAULT_IO_TIMEOUT_MS;
  /* Every rank may be between its connect and its HELLO at once (a job
   * starting, or reconnecting after a stall), and then some: the eviction
   * is for floods, not for a job's own burst. */
  cfg->max_strays = DEFAULT_MAX_STRAYS + world_size;
}

/* server_new makes the server's state for |cfg|: no socket, no thread
 * yet (tests/fuzz/fuzz_rdzv.c drives it from there without either). */
static int server_new(dlcp_rdzv_server **psrv,
                      const dlcp_rdzv_server_config *cfg, dlcp_errbuf *eb) {
  uint32_t world_size = cfg->world_size;
  dlcp_rdzv_server *srv;
  *psrv = NULL;
  if (world_size == 0 || world_size > DLCP_ENV_MAX_WORLD) {
    return dlcp_errbuf_set(eb, DLCP_ERR_INVALID_ARGUMENT,
                           "rendezvous server: world size %" PRIu32
                           " out of range 1..%u",
                           world_size, DLCP_ENV_MAX_WORLD);
  }
  if (cfg->io_timeout_ms == 0 || cfg->max_strays == 0) {
    return dlcp_errbuf_set(eb, DLCP_ERR_INVALID_ARGUMENT,
                           "rendezvous server: io_timeout_ms and max_strays "
                           "must be positive");
  }
  srv = calloc(1, sizeof(*srv));
  if (srv == NULL) {
    return dlcp_errbuf_set(eb, DLCP_ERR_NOMEM, "rendezvous server: no memory");
  }
  srv->listen_fd = -1;
  srv->wake_fd = -1;
  srv->world = world_size;
  srv->cfg = *cfg;
  if (cfg->auth) {
    srv->auth = *cfg->auth;
    srv->cfg.auth = &srv->auth;
    dlcp_auth_salt(srv->salt);
  }
  /* Every rank once (a second connection for a rank is refused at its
   * HELLO), plus the strays. */
  srv->max_conns = (size_t)world_size + cfg->max_strays;
  srv->max_keys = (size_t)world_size * MAX_KEYS_PER_RANK + MAX_KEYS_EXTRA;
  atomic_init(&srv->stopping, 0);
  atomic_init(&srv->drain_deadline, 0);
  atomic_init(&srv->rejected, 0);
  atomic_init(&srv->requests, 0);
  srv->conns = calloc(srv->max_conns, sizeof(*srv->conns));
  srv->pfds = calloc(srv->max_conns + 2, sizeof(*srv->pfds));
  size_t slots = 64;
  while (slots < 2 * srv->max_keys) {
    slots *= 2;
  }
  srv->kv_index = calloc(slots, sizeof(*srv->kv_index));
  srv->kv_index_mask = slots - 1;
  if (srv->conns == NULL || srv->pfds == NULL || srv->kv_index == NULL) {
    server_free(srv);
    return dlcp_errbuf_set(eb, DLCP_ERR_NOMEM, "rendezvous server: no memory");
  }
  *psrv = srv;
  return 0;
}

int dlcp_rdzv_server_start(dlcp_rdzv_server **psrv, const char *host,
                           uint16_t port, const dlcp_rdzv_server_config *cfg,
                           dlcp_errbuf *eb) {
  dlcp_rdzv_server *srv;
  int rv = server_new(&srv, cfg, eb);
  *psrv = NULL;
  if (rv != 0) {
    return rv;
  }
  srv->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (srv->wake_fd < 0) {
    rv = dlcp_errbuf_set(eb, -errno, "rendezvous server: eventfd: %s",
                         strerror(errno));
    server_free(srv);
    return rv;
  }
  rv = server_listen(srv, host, port, eb);
  if (rv != 0) {
    server_free(srv);
    return rv;
  }
  rv = pthread_create(&srv->thread, NULL, server_main, srv);
  if (rv != 0) {
    server_free(srv);
    return dlcp_errbuf_set(eb, -rv, "rendezvous server: pthread_create: %s",
                           strerror(rv));
  }
  *psrv = srv;
  return 0;
}

uint16_t dlcp_rdzv_server_port(const dlcp_rdzv_server *srv) {
  return srv->port;
}

uint64_t dlcp_rdzv_server_rejected(const dlcp_rdzv_server *srv) {
  return atomic_load(&((dlcp_rdzv_server *)(uintptr_t)srv)->rejected);
}

uint64_t dlcp_rdzv_server_requests(const dlcp_rdzv_server *srv) {
  return atomic_load(&((dlcp_rdzv_server *)(uintptr_t)srv)->requests);
}

void dlcp_rdzv_server_stop(dlcp_rdzv_server *srv, dlcp_tstamp drain_deadline) {
  uint64_t one = 1;
  if (srv == NULL) {
    return;
  }
  atomic_store(&srv->drain_deadline, drain_deadline);
  atomic_store(&srv->stopping, 1);
  (void)!write(srv->wake_fd, &one, sizeof(one));
  pthread_join(srv->thread, NULL);
  server_free(srv);
}
