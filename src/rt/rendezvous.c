/*
 * rendezvous.c: the client side of the rendezvous store and the join /
 * leave sequence built on it (server in rendezvous_server.c, protocol in
 * rendezvous.h).
 *
 * Model: one blocking request/response at a time on one TCP connection,
 * every read and write bounded by the caller's absolute deadline.  Every
 * request is idempotent (HELLO, SET, GET, WAIT), so a connection that
 * stalls -- its answer late by more than a grace, as when TCP retransmits
 * into a lossy link, which an ECMP fabric keeps it on for its whole life
 * -- is closed and the request sent again on a new one (another source
 * port, another hash), which the server takes as this client's by the
 * HELLO's incarnation.  A request that fails otherwise leaves the byte
 * stream in an unknown state, so its connection is closed before the
 * next request opens another, never misreading a late answer.  Waiting
 * for a key is done by the server in slices (WAIT and GATHER carry at
 * most WAIT_SLICE_MS), so that an answer is always due soon and, on
 * timeout, the connection is still in step and the client can ask which
 * ranks are missing before it reports the error.  An exchange gathers
 * the others' values a whole answer at a time (GATHER), so that a world
 * of n ranks costs the server some 2n requests, not n^2.
 */
#include "rt/rendezvous.h"

#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/uio.h>
#include <unistd.h>

#include "rt/clock.h"
#include "rt/net.h"
#include "rt/tcp.h"
#include "wire/bytes.h"

_Static_assert(DLCP_RDZV_TRAILER_LEN == DLCP_AUTH_TRAILER_LEN &&
                   DLCP_RDZV_SALT_LEN == DLCP_AUTH_SALT_LEN,
               "the rendezvous wire format holds auth.h's trailer and salt");

/* An answer not all here this long after its request (and a WAIT's own
 * time): the connection is taken for stalled -- TCP retransmitting into a
 * lossy link it stays hashed onto (tcp.h) -- and the request goes again
 * on a new one.  The grace doubles at each reconnection, so a server
 * that is slow rather than unreachable gets its time, and halves back
 * towards the first at each answer. */
#define ANSWER_GRACE_FIRST_MS 500u
#define ANSWER_GRACE_MAX_MS 8000u
/* The longest a WAIT asks the server to hold it, so that some answer is
 * always due soon: a WAIT lost on a stalled connection costs at most this
 * plus the grace. */
#define WAIT_SLICE_MS 1000u
/* After a timed-out exchange: time allowed to ask who is missing. */
#define DIAGNOSE_MS 1000u
#define MAX_KEY_TEXT (DLCP_RDZV_MAX_KEY + 1)

struct dlcp_rdzv_client {
  int fd;        /* -1: none open; the next request opens one */
  bool gone;     /* the server refused to be reached again: no more requests */
  bool welcomed; /* a HELLO was answered: |salt| holds the run's */
  dlcp_rdzv_hello hello; /* the same on every connection */
  bool authenticated;
  dlcp_auth job_key; /* tags each connection's HELLO */
  uint8_t salt[DLCP_AUTH_SALT_LEN];
  dlcp_sockaddr addr;
  uint64_t grace_ms;
  uint32_t connections;              /* opened so far */
  char server[DLCP_NET_ADDRSTR_LEN]; /* "host:port" of rank 0's store */
};

/* A response: status and a malloc'ed, NUL-terminated value. */
typedef struct response {
  dlcp_rdzv_status status;
  uint8_t *value;
  size_t len;
} response;

static uint64_t ms_since(dlcp_tstamp start) {
  return (dlcp_rt_now() - start) / DLCP_NS_PER_MS;
}

/* close_conn closes the connection after an exchange that failed or was
 * abandoned: its byte stream is in an unknown state. */
static void close_conn(dlcp_rdzv_client *cli) {
  if (cli->fd >= 0) {
    close(cli->fd);
    cli->fd = -1;
  }
}

/* in_transit: an exchange's failure that a new connection may not meet
 * (the connection stalled, reset or closed), as opposed to an answer that
 * is wrong. */
static bool in_transit(int rv) {
  return rv == DLCP_ERR_TIMEOUT || rv == DLCP_ERR_PEER_CLOSED ||
         (rv < 0 && rv > -200); /* a negated errno */
}

/* exchange sends one request on the open connection and reads its
 * answer, both by |due|.  Returns 0 with |resp| filled (its value is the
 * caller's to free), an in_transit() failure, DLCP_ERR_BAD_MAGIC or
 * DLCP_ERR_NOMEM.  The connection is closed on any failure. */
static int exchange(dlcp_rdzv_client *cli, dlcp_rdzv_op op, const char *key,
                    const void *val, size_t val_len, dlcp_tstamp due,
                    response *resp) {
  uint8_t hdr[DLCP_RDZV_HDR_LEN];
  size_t key_len = key != NULL ? strlen(key) : 0;
  uint32_t len;
  dlcp_rdzv_status status;
  int rv;

  resp->value = NULL;
  resp->len = 0;
  dlcp_rdzv_put_request(hdr, op, (uint16_t)key_len, (uint32_t)val_len);
  if ((rv = dlcp_net_write_all(cli->fd, hdr, sizeof(hdr), due)) != 0 ||
      (rv = dlcp_net_write_all(cli->fd, key, key_len, due)) != 0 ||
      (rv = dlcp_net_write_all(cli->fd, val, val_len, due)) != 0 ||
      (rv = dlcp_net_read_all(cli->fd, hdr, sizeof(hdr), due)) != 0) {
    close_conn(cli);
    return rv;
  }
  if (dlcp_rdzv_get_response(hdr, &status, &len) != 0) {
    close_conn(cli);
    return DLCP_ERR_BAD_MAGIC;
  }
  resp->status = status;
  resp->value = malloc((size_t)len + 1);
  if (resp->value == NULL) {
    close_conn(cli);
    return DLCP_ERR_NOMEM;
  }
  rv = dlcp_net_read_all(cli->fd, resp->value, len, due);
  if (rv != 0) {
    free(resp->value);
    resp->value = NULL;
    close_conn(cli);
    return rv;
  }
  resp->value[len] = '\0';
  resp->len = len;
  return 0;
}

/* answer_due is when the answer to a request sent now, held by the
 * server up to |hold_ms|, must be here: the grace later, and not past
 * |deadline| unless the server holds it until then. */
static dlcp_tstamp answer_due(const dlcp_rdzv_client *cli, uint32_t hold_ms,
                              dlcp_tstamp deadline) {
  dlcp_tstamp due = dlcp_rt_deadline_after(hold_ms + cli->grace_ms);
  return hold_ms == 0 && due > deadline ? deadline : due;
}

/* stalled notes a connection given up for a late answer: the next gets
 * twice the grace. */
static void stalled(dlcp_rdzv_client *cli) {
  cli->grace_ms = cli->grace_ms * 2 > ANSWER_GRACE_MAX_MS ? ANSWER_GRACE_MAX_MS
                                                          : cli->grace_ms * 2;
}

/* failed_answer turns a failed exchange into a message naming the
 * server. */
static int failed_answer(dlcp_rdzv_client *cli, int rv, const char *what,
                         dlcp_errbuf *eb) {
  if (rv == DLCP_ERR_BAD_MAGIC) {
    return dlcp_errbuf_set(eb, rv,
                           "%s does not answer like a dlcp rendezvous server "
                           "(is MASTER_PORT used by another program?)",
                           cli->server);
  }
  if (rv == DLCP_ERR_NOMEM) {
    return dlcp_errbuf_set(eb, rv, "rendezvous: no memory");
  }
  if (rv == DLCP_ERR_TIMEOUT) {
    return dlcp_errbuf_set(eb, rv,
                           "rendezvous server (rank 0) at %s: no answer to %s "
                           "before the deadline (%" PRIu32 " connection%s "
                           "tried)",
                           cli->server, what, cli->connections,
                           cli->connections == 1 ? "" : "s");
  }
  if (rv == DLCP_ERR_PEER_CLOSED) {
    return dlcp_errbuf_set(eb, rv,
                           "rendezvous server (rank 0) at %s closed the "
                           "connection during %s (did rank 0 exit?)",
                           cli->server, what);
  }
  return dlcp_errbuf_set(eb, rv, "rendezvous server (rank 0) at %s: %s: %s",
                         cli->server, what, strerror(-rv));
}

/* refused turns an answer that refuses the request into an error; the
 * server closes the connection after it. */
static int refused(dlcp_rdzv_client *cli, const char *what,
                   const response *resp, dlcp_errbuf *eb) {
  close_conn(cli);
  return dlcp_errbuf_set(
      eb,
      resp->status == DLCP_RDZV_REJECTED ? DLCP_ERR_CONFIG : DLCP_ERR_INTERNAL,
      "rendezvous server (rank 0) at %s refused %s from "
      "rank %" PRIu32 ": %s",
      cli->server, what, cli->hello.rank, (char *)resp->value);
}

/* check_welcome checks the server's answer to a tagged HELLO: the salt,
 * tagged with the nonce this HELLO carried (so not an answer recorded
 * from another run), and the same salt as on the first connection (not
 * a rank 0 of another run since). */
static int check_welcome(dlcp_rdzv_client *cli, uint64_t nonce,
                         const response *resp, dlcp_errbuf *eb) {
  uint8_t echo[8];
  dlcp_put_u64(echo, nonce);
  if (resp->len == DLCP_RDZV_WELCOME_LEN) {
    struct iovec msg[2] = {{resp->value, DLCP_RDZV_SALT_LEN},
                           {echo, sizeof(echo)}};
    if (dlcp_auth_check(&cli->job_key,
                        dlcp_auth_stream(DLCP_AUTH_RENDEZVOUS, DLCP_AUTH_SERVER,
                                         cli->hello.rank),
                        msg, 2, resp->value + DLCP_RDZV_SALT_LEN) != 0) {
      if (!cli->welcomed) {
        memcpy(cli->salt, resp->value, DLCP_AUTH_SALT_LEN);
        return 0;
      }
      if (memcmp(cli->salt, resp->value, DLCP_AUTH_SALT_LEN) == 0) {
        return 0;
      }
      close_conn(cli);
      return dlcp_errbuf_set(eb, DLCP_ERR_PEER_CLOSED,
                             "rendezvous server (rank 0) at %s was restarted "
                             "(another run's salt after a reconnection)",
                             cli->server);
    }
  }
  close_conn(cli);
  return dlcp_errbuf_set(eb, DLCP_ERR_CONFIG,
                         "rendezvous server at %s did not prove it knows the "
                         "job secret (%zu-byte answer to HELLO: rank 0 has "
                         "no or another DLCP_JOB_SECRET, or something else "
                         "answers there)",
                         cli->server, resp->len);
}

/* say_hello sends HELLO on the new connection.  Returns 0; 1 if it
 * failed in transit (the connection is closed: open another); or an
 * error, with |eb| set. */
static int say_hello(dlcp_rdzv_client *cli, dlcp_tstamp deadline,
                     dlcp_errbuf *eb) {
  uint8_t hello[DLCP_RDZV_HELLO_AUTH_LEN];
  uint64_t nonce = 0;
  response resp;
  int rv;
  dlcp_rdzv_put_hello(hello, &cli->hello);
  if (cli->authenticated) {
    struct iovec msg = {hello, DLCP_RDZV_HELLO_LEN};
    nonce = dlcp_auth_nonce();
    dlcp_auth_seal(&cli->job_key,
                   dlcp_auth_stream(DLCP_AUTH_RENDEZVOUS, cli->hello.rank,
                                    DLCP_AUTH_SERVER),
                   nonce, &msg, 1, hello + DLCP_RDZV_HELLO_LEN);
  }
  rv = exchange(cli, DLCP_RDZV_HELLO, NULL, hello,
                cli->authenticated ? DLCP_RDZV_HELLO_AUTH_LEN
                                   : DLCP_RDZV_HELLO_LEN,
                answer_due(cli, 0, deadline), &resp);
  if (rv != 0) {
    return in_transit(rv) && dlcp_rt_now() < deadline
               ? 1
               : failed_answer(cli, rv, "HELLO", eb);
  }
  if (resp.status != DLCP_RDZV_OK) {
    rv = refused(cli, "HELLO", &resp, eb);
  } else if (cli->authenticated) {
    rv = check_welcome(cli, nonce, &resp, eb);
  }
  free(resp.value);
  if (rv == 0) {
    cli->welcomed = true;
  }
  return rv;
}

/* open_conn connects to the server and says HELLO, by |deadline|, on
 * behalf of |what| (for the message).  Returns 0 or an error with |eb|
 * set. */
static int open_conn(dlcp_rdzv_client *cli, const char *what,
                     dlcp_tstamp deadline, dlcp_errbuf *eb) {
  dlcp_tstamp start = dlcp_rt_now();
  for (;;) {
    unsigned count;
    int rv;
    /* Once connected, a refusal means rank 0 stopped listening. */
    cli->fd = dlcp_tcp_connect(&cli->addr, cli->welcomed, deadline, &count);
    if (cli->fd == -ECONNREFUSED && cli->welcomed) {
      cli->fd = -1;
      cli->gone = true;
      return dlcp_errbuf_set(eb, DLCP_ERR_PEER_CLOSED,
                             "rendezvous server (rank 0) at %s closed the "
                             "connection during %s and refuses a new one "
                             "(did rank 0 exit?)",
                             cli->server, what);
    }
    if (cli->fd < 0) {
      int err = -cli->fd;
      cli->fd = -1;
      return dlcp_errbuf_set(eb,
                             dlcp_tcp_retryable(err) ? DLCP_ERR_TIMEOUT : -err,
                             "rendezvous: cannot reach rank 0 at %s within "
                             "%" PRIu64 " ms (%u attempt%s, last error: %s)",
                             cli->server, ms_since(start), count,
                             count == 1 ? "" : "s", strerror(err));
    }
    cli->connections++;
    rv = say_hello(cli, deadline, eb);
    if (rv != 1) {
      return rv;
    }
    stalled(cli);
  }
}

/* request sends one request, which the server may hold up to |hold_ms|,
 * and reads its answer by |deadline|, on a new connection each time one
 * stalls (see ANSWER_GRACE_FIRST_MS): every request is idempotent. */
static int request(dlcp_rdzv_client *cli, dlcp_rdzv_op op, const char *what,
                   const char *key, const void *val, size_t val_len,
                   uint32_t hold_ms, dlcp_tstamp deadline, response *resp,
                   dlcp_errbuf *eb) {
  size_t key_len = key != NULL ? strlen(key) : 0;
  resp->value = NULL;
  resp->len = 0;
  if (cli->gone) {
    return dlcp_errbuf_set(eb, DLCP_ERR_PEER_CLOSED,
                           "rendezvous server (rank 0) at %s is gone "
                           "(closed the connection, refuses new ones)",
                           cli->server);
  }
  if (key_len > DLCP_RDZV_MAX_KEY || val_len > DLCP_RDZV_MAX_VALUE) {
    return dlcp_errbuf_set(eb, DLCP_ERR_INVALID_ARGUMENT,
                           "rendezvous: key of %zu bytes or value of %zu "
                           "bytes over the limit (%u, %u)",
                           key_len, val_len, DLCP_RDZV_MAX_KEY,
                           DLCP_RDZV_MAX_VALUE);
  }
  for (;;) {
    int rv = 0;
    if (cli->fd < 0) {
      rv = open_conn(cli, what, deadline, eb);
      if (rv != 0) {
        return rv;
      }
    }
    rv = exchange(cli, op, key, val, val_len,
                  answer_due(cli, hold_ms, deadline), resp);
    if (rv == 0) {
      /* Back towards the first by halves: a server slow enough to have
       * needed more is likely still slow, and every reconnection adds to
       * its load. */
      cli->grace_ms = cli->grace_ms / 2 > ANSWER_GRACE_FIRST_MS
                          ? cli->grace_ms / 2
                          : ANSWER_GRACE_FIRST_MS;
      if (resp->status == DLCP_RDZV_BAD_REQUEST ||
          resp->status == DLCP_RDZV_REJECTED) {
        rv = refused(cli, what, resp, eb);
        free(resp->value);
        resp->value = NULL;
      }
      return rv;
    }
    if (!in_transit(rv) || dlcp_rt_now() >= deadline) {
      return failed_answer(cli, rv, what, eb);
    }
    stalled(cli);
  }
}

int dlcp_rdzv_client_connect(dlcp_rdzv_client **pcli, const char *host,
                             uint16_t port, uint32_t rank, uint32_t world_size,
                             uint32_t job, const dlcp_auth *auth,
                             uint8_t salt[DLCP_AUTH_SALT_LEN],
                             dlcp_tstamp deadline, dlcp_errbuf *eb) {
  dlcp_rdzv_client *cli;
  int rv;

  *pcli = NULL;
  if (world_size == 0 || rank >= world_size) {
    return dlcp_errbuf_set(eb, DLCP_ERR_INVALID_ARGUMENT,
                           "rendezvous: rank %" PRIu32
                           " is not below world size %" PRIu32,
                           rank, world_size);
  }
  cli = calloc(1, sizeof(*cli));
  if (cli == NULL) {
    return dlcp_errbuf_set(eb, DLCP_ERR_NOMEM, "rendezvous: no memory");
  }
  rv = dlcp_net_resolve(&cli->addr, host, port, SOCK_STREAM, eb);
  if (rv != 0) {
    free(cli);
    return dlcp_errbuf_prefix(eb, rv, "rendezvous: MASTER_ADDR");
  }
  cli->fd = -1;
  cli->grace_ms = ANSWER_GRACE_FIRST_MS;
  cli->hello = (dlcp_rdzv_hello){
      .rank = rank, .world = world_size, .job = job, .incarnation = 0};
  while (getrandom(&cli->hello.incarnation, sizeof(cli->hello.incarnation), 0) <
             0 &&
         errno == EINTR) {
  }
  if (auth != NULL) {
    cli->authenticated = true;
    cli->job_key = *auth;
  }
  dlcp_net_addr_format(cli->server, sizeof(cli->server), &cli->addr.sa);
  rv = open_conn(cli, "HELLO", deadline, eb);
  if (rv != 0) {
    dlcp_rdzv_client_close(cli);
    return rv;
  }
  if (auth != NULL) {
    memcpy(salt, cli->salt, DLCP_AUTH_SALT_LEN);
  }
  *pcli = cli;
  return 0;
}

void dlcp_rdzv_client_close(dlcp_rdzv_client *cli) {
  if (cli == NULL) {
    return;
  }
  close_conn(cli);
  dlcp_auth_forget(&cli->job_key);
  free(cli);
}

uint32_t dlcp_rdzv_client_reconnects(const dlcp_rdzv_client *cli) {
  return cli->connections > 0 ? cli->connections - 1 : 0;
}

int dlcp_rdzv_set(dlcp_rdzv_client *cli, const char *key, const void *value,
                  size_t len, dlcp_tstamp deadline, dlcp_errbuf *eb) {
  response resp;
  char what[MAX_KEY_TEXT + 16];
  int rv;
  snprintf(what, sizeof(what), "SET '%s'", key);
  rv = request(cli, DLCP_RDZV_SET, what, key, value, len, 0, deadline, &resp,
               eb);
  if (rv == 0) {
    free(resp.value);
  }
  return rv;
}

int dlcp_rdzv_get(dlcp_rdzv_client *cli, const char *key, int *found,
                  void **value, size_t *len, dlcp_tstamp deadline,
                  dlcp_errbuf *eb) {
  response resp;
  char what[MAX_KEY_TEXT + 16];
  int rv;
  *found = 0;
  *value = NULL;
  *len = 0;
  snprintf(what, sizeof(what), "GET '%s'", key);
  rv = request(cli, DLCP_RDZV_GET, what, key, NULL, 0, 0, deadline, &resp, eb);
  if (rv != 0) {
    return rv;
  }
  if (resp.status == DLCP_RDZV_OK) {
    *found = 1;
    *value = resp.value;
    *len = resp.len;
  } else {
    free(resp.value);
  }
  return 0;
}

int dlcp_rdzv_wait(dlcp_rdzv_client *cli, const char *key, void **value,
                   size_t *len, dlcp_tstamp deadline, dlcp_errbuf *eb) {
  response resp;
  char what[MAX_KEY_TEXT + 16];
  *value = NULL;
  *len = 0;
  snprintf(what, sizeof(what), "WAIT '%s'", key);
  for (;;) {
    int left = dlcp_rt_poll_timeout(deadline);
    uint32_t hold = left < 0 || (uint32_t)left > WAIT_SLICE_MS ? WAIT_SLICE_MS
                                                               : (uint32_t)left;
    uint8_t timeout[DLCP_RDZV_WAIT_LEN];
    int rv;
    dlcp_rdzv_put_wait(timeout, hold);
    rv = request(cli, DLCP_RDZV_WAIT, what, key, timeout, sizeof(timeout), hold,
                 deadline, &resp, eb);
    if (rv != 0) {
      return rv;
    }
    if (resp.status == DLCP_RDZV_OK) {
      *value = resp.value;
      *len = resp.len;
      return 0;
    }
    free(resp.value);
    if (dlcp_rt_now() >= deadline) {
      return dlcp_errbuf_set(eb, DLCP_ERR_TIMEOUT,
                             "rendezvous: key '%s' did not appear on rank 0's "
                             "store at %s before the deadline",
                             key, cli->server);
    }
  }
}

void dlcp_rdzv_free_values(void **values, size_t n) {
  size_t i;
  for (i = 0; i < n; i++) {
    free(values[i]);
    values[i] = NULL;
  }
}

/* missing_ranks lists, after a timed-out gather from rank |first|, which
 * ranks from |first| on have not published "<name>/<r>" (dlcp_ranklist).
 * Best effort: a rank that cannot be asked about is listed. */
static void missing_ranks(dlcp_rdzv_client *cli, const char *name,
                          uint32_t first, dlcp_ranklist *missing) {
  dlcp_tstamp deadline = dlcp_rt_deadline_after(DIAGNOSE_MS);
  for (uint32_t r = first; r < cli->hello.world; r++) {
    char key[MAX_KEY_TEXT];
    int found = 0;
    void *v = NULL;
    size_t vlen;
    if (!cli->gone) {
      snprintf(key, sizeof(key), "%s/%" PRIu32, name, r);
      if (dlcp_rdzv_get(cli, key, &found, &v, &vlen, deadline, NULL) != 0) {
        found = 0;
      }
      free(v);
    }
    if (!found) {
      dlcp_ranklist_add(missing, r);
    }
  }
  dlcp_ranklist_end(missing);
}

/* take_gathered copies the values of a GATHER's answer into |values| and
 * |lens| from rank |*next| on, advancing it.  An answer that does not
 * parse, or holds more values than were asked for, is not a dlcp
 * server's. */
static int take_gathered(dlcp_rdzv_client *cli, const response *resp,
                         const char *what, void **values, size_t *lens,
                         uint32_t *next, dlcp_errbuf *eb) {
  dlcp_rdzv_gathered g;
  const uint8_t *v;
  uint32_t len;
  int rv = dlcp_rdzv_gathered_open(&g, resp->value, resp->len);
  while (rv == 0 && (rv = dlcp_rdzv_gathered_next(&g, &v, &len)) == 1) {
    uint8_t *copy;
    if (*next >= cli->hello.world) {
      rv = DLCP_ERR_BAD_LENGTH;
      break;
    }
    copy = malloc((size_t)len + 1);
    if (copy == NULL) {
      return dlcp_errbuf_set(eb, DLCP_ERR_NOMEM, "rendezvous: no memory");
    }
    memcpy(copy, v, len);
    copy[len] = '\0';
    values[*next] = copy;
    lens[*next] = len;
    (*next)++;
    rv = 0;
  }
  if (rv != 0) {
    close_conn(cli);
    return failed_answer(cli, DLCP_ERR_BAD_MAGIC, what, eb);
  }
  return 0;
}

/* gather collects the values of "<name>/<r>" for every rank r from
 * |*next| on, a GATHER answer at a time, advancing |*next|.  Returns 0,
 * DLCP_ERR_TIMEOUT at |deadline| (|*next| is then a rank not yet
 * collected) or another error with |eb| set. */
static int gather(dlcp_rdzv_client *cli, const char *name, void **values,
                  size_t *lens, uint32_t *next, dlcp_tstamp deadline,
                  dlcp_errbuf *eb) {
  char what[MAX_KEY_TEXT + 16];
  snprintf(what, sizeof(what), "GATHER '%s'", name);
  while (*next < cli->hello.world) {
    int left = dlcp_rt_poll_timeout(deadline);
    uint32_t hold = left < 0 || (uint32_t)left > WAIT_SLICE_MS ? WAIT_SLICE_MS
                                                               : (uint32_t)left;
    const dlcp_rdzv_gather g = {
        .timeout_ms = hold, .first = *next, .count = cli->hello.world - *next};
    uint8_t arg[DLCP_RDZV_GATHER_LEN];
    response resp;
    int rv;
    dlcp_rdzv_put_gather(arg, &g);
    rv = request(cli, DLCP_RDZV_GATHER, what, name, arg, sizeof(arg), hold,
                 deadline, &resp, eb);
    if (rv != 0) {
      return rv;
    }
    if (resp.status == DLCP_RDZV_OK) {
      rv = take_gathered(cli, &resp, what, values, lens, next, eb);
    } else if (dlcp_rt_now() >= deadline) {
      rv = DLCP_ERR_TIMEOUT;
    }
    free(resp.value);
    if (rv != 0) {
      return rv;
    }
  }
  return 0;
}

int dlcp_rdzv_exchange(dlcp_rdzv_client *cli, const char *name,
                       const void *mine, size_t len, void **values,
                       size_t *lens, dlcp_tstamp deadline, dlcp_errbuf *eb) {
  dlcp_tstamp start = dlcp_rt_now();
  char key[MAX_KEY_TEXT];
  uint32_t r;
  uint32_t next = 0;
  int rv;

  for (r = 0; r < cli->hello.world; r++) {
    values[r] = NULL;
    lens[r] = 0;
  }
  if (strlen(name) > DLCP_RDZV_GATHER_MAX_NAME) {
    return dlcp_errbuf_set(eb, DLCP_ERR_INVALID_ARGUMENT,
                           "rendezvous: exchange name too long");
  }
  snprintf(key, sizeof(key), "%s/%" PRIu32, name, cli->hello.rank);
  rv = dlcp_rdzv_set(cli, key, mine, len, deadline, eb);
  if (rv != 0) {
    return rv;
  }
  rv = gather(cli, name, values, lens, &next, deadline, eb);
  if (rv == DLCP_ERR_TIMEOUT && !cli->gone) {
    char list[256];
    dlcp_ranklist missing;
    dlcp_ranklist_init(&missing, list, sizeof(list));
    missing_ranks(cli, name, next, &missing);
    dlcp_errbuf_set(eb, DLCP_ERR_TIMEOUT,
                    "rendezvous: timed out after %" PRIu64
                    " ms waiting for rank%s %s of %" PRIu32
                    " to publish '%s' on rank 0's store at %s",
                    ms_since(start), missing.count == 1 ? "" : "s", list,
                    cli->hello.world, name, cli->server);
  }
  if (rv != 0) {
    dlcp_rdzv_free_values(values, cli->hello.world);
  }
  return rv;
}

int dlcp_rdzv_barrier(dlcp_rdzv_client *cli, const char *name,
                      dlcp_tstamp deadline, dlcp_errbuf *eb) {
  void **values = calloc(cli->hello.world, sizeof(*values));
  size_t *lens = calloc(cli->hello.world, sizeof(*lens));
  int rv;
  if (values == NULL || lens == NULL) {
    free(values);
    free(lens);
    return dlcp_errbuf_set(eb, DLCP_ERR_NOMEM, "rendezvous: no memory");
  }
  rv = dlcp_rdzv_exchange(cli, name, "", 0, values, lens, deadline, eb);
  if (rv == 0) {
    dlcp_rdzv_free_values(values, cli->hello.world);
  }
  free(values);
  free(lens);
  return rv;
}

int dlcp_rdzv_join(dlcp_rdzv *rdzv, const dlcp_rt_env *env, dlcp_errbuf *eb) {
  dlcp_tstamp deadline = dlcp_rt_deadline_after(env->rdzv_timeout_ms);
  int rv;
  memset(rdzv, 0, sizeof(*rdzv));
  rdzv->timeout_ms = env->rdzv_timeout_ms;
  if (env->world_size == 1) {
    return 0;
  }
  dlcp_auth job_key;
  uint8_t salt[DLCP_AUTH_SALT_LEN];
  if (env->job_secret_len > 0) {
    if (dlcp_auth_init(&job_key, env->job_secret, env->job_secret_len,
                       env->job) != 0) {
      return dlcp_errbuf_set(eb, DLCP_ERR_INTERNAL,
                             "DLCP_JOB_SECRET: libsodium cannot start");
    }
    rdzv->authenticated = true;
  }
  if (env->rank == 0) {
    dlcp_rdzv_server_config cfg;
    dlcp_rdzv_server_config_default(&cfg, env->world_size, env->job);
    cfg.auth = rdzv->authenticated ? &job_key : NULL;
    rv = dlcp_rdzv_server_start(&rdzv->server, env->master_addr,
                                env->master_port, &cfg, eb);
    if (rv == -EADDRNOTAVAIL) {
      /* MASTER_ADDR names this host by an address it cannot bind (NAT,
       * a load balancer): listen everywhere instead. */
      rv = dlcp_rdzv_server_start(&rdzv->server, NULL, env->master_port,
                                  &cfg, eb);
    }
    if (rv != 0) {
      return rv;
    }
  }
  rv = dlcp_rdzv_client_connect(&rdzv->client, env->master_addr,
                                env->master_port, env->rank, env->world_size,
                                env->job, rdzv->authenticated ? &job_key : NULL,
                                salt, deadline, eb);
  if (rv != 0) {
    dlcp_rdzv_server_stop(rdzv->server, dlcp_rt_now());
    rdzv->server = NULL;
  } else if (rdzv->authenticated) {
    dlcp_auth_session(&rdzv->session, &job_key, salt);
  }
  dlcp_auth_forget(&job_key);
  return rv;
}

int dlcp_rdzv_leave(dlcp_rdzv *rdzv, dlcp_errbuf *eb) {
  int rv = 0;
  if (rdzv->client != NULL) {
    rv = dlcp_rdzv_barrier(rdzv->client, "dlcp/leave",
                           dlcp_rt_deadline_after(rdzv->timeout_ms), eb);
    dlcp_rdzv_client_close(rdzv->client);
    rdzv->client = NULL;
  }
  /* The others may still be reading the barrier's last answer: serve them
   * until they hang up (bounded by the timeout). */
  dlcp_rdzv_server_stop(rdzv->server,
                        dlcp_rt_deadline_after(rv == 0 ? rdzv->timeout_ms : 0));
  rdzv->server = NULL;
  return rv;
}
