/*
 * rendezvous.c: the client side of the rendezvous store and the join /
 * leave sequence built on it (server in rendezvous_server.c, protocol in
 * rendezvous.h).
 *
 * Model: one blocking request/response at a time on one TCP connection,
 * every read and write bounded by the caller's absolute deadline.  A
 * request that times out or fails mid-way leaves the byte stream in an
 * unknown state, so the client then closes the connection and refuses
 * further requests instead of misreading a late answer.  Waiting for a
 * key is done by the server (WAIT carries the remaining time), so that on
 * timeout the connection is still in step and the client can ask which
 * ranks are missing before it reports the error.
 */
#include "rt/rendezvous.h"

#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "rt/clock.h"
#include "rt/net.h"
#include "wire/bytes.h"

_Static_assert(DLCP_RDZV_TRAILER_LEN == DLCP_AUTH_TRAILER_LEN &&
                   DLCP_RDZV_SALT_LEN == DLCP_AUTH_SALT_LEN,
               "the rendezvous wire format holds auth.h's trailer and salt");

#define BACKOFF_FIRST_MS 10u
#define BACKOFF_MAX_MS 1000u
/* A WAIT's answer comes from the server at the deadline; allow this much
 * for it to cross the network before declaring the server unresponsive. */
#define WAIT_ANSWER_SLACK_MS 2000u
/* After a timed-out exchange: time allowed to ask who is missing. */
#define DIAGNOSE_MS 1000u
#define MAX_KEY_TEXT (DLCP_RDZV_MAX_KEY + 1)

struct dlcp_rdzv_client {
  int fd; /* -1 once unusable */
  uint32_t rank;
  uint32_t world;
  char server[DLCP_NET_ADDRSTR_LEN]; /* "host:port" of rank 0's store */
};

/* A response: status and a malloc'ed, NUL-terminated value. */
typedef struct response {
  dlcp_rdzv_status status;
  uint8_t *value;
  size_t len;
} response;

static void sleep_ms(uint64_t ms) {
  struct timespec ts;
  ts.tv_sec = (time_t)(ms / 1000);
  ts.tv_nsec = (long)(ms % 1000) * 1000000L;
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

static uint64_t ms_since(dlcp_tstamp start) {
  return (dlcp_rt_now() - start) / DLCP_NS_PER_MS;
}

/* broken marks the connection unusable after a failed exchange. */
static void broken(dlcp_rdzv_client *cli) {
  if (cli->fd >= 0) {
    close(cli->fd);
    cli->fd = -1;
  }
}

/* io_error turns a failed read/write into a message naming the server. */
static int io_error(dlcp_rdzv_client *cli, int rv, const char *what,
                    dlcp_errbuf *eb) {
  broken(cli);
  if (rv == DLCP_ERR_TIMEOUT) {
    return dlcp_errbuf_set(eb, rv,
                           "rendezvous server (rank 0) at %s: no answer to %s "
                           "before the deadline",
                           cli->server, what);
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

/* request sends one request and reads its response, both by |deadline|. */
static int request(dlcp_rdzv_client *cli, dlcp_rdzv_op op, const char *what,
                   const char *key, const void *val, size_t val_len,
                   dlcp_tstamp deadline, response *resp, dlcp_errbuf *eb) {
  uint8_t hdr[DLCP_RDZV_HDR_LEN];
  size_t key_len = key != NULL ? strlen(key) : 0;
  uint32_t len;
  dlcp_rdzv_status status;
  int rv;

  resp->value = NULL;
  resp->len = 0;
  if (cli->fd < 0) {
    return dlcp_errbuf_set(eb, DLCP_ERR_PEER_CLOSED,
                           "rendezvous server (rank 0) at %s: connection "
                           "unusable after an earlier error",
                           cli->server);
  }
  if (key_len > DLCP_RDZV_MAX_KEY || val_len > DLCP_RDZV_MAX_VALUE) {
    return dlcp_errbuf_set(eb, DLCP_ERR_INVALID_ARGUMENT,
                           "rendezvous: key of %zu bytes or value of %zu "
                           "bytes over the limit (%u, %u)",
                           key_len, val_len, DLCP_RDZV_MAX_KEY,
                           DLCP_RDZV_MAX_VALUE);
  }
  dlcp_rdzv_put_request(hdr, op, (uint16_t)key_len, (uint32_t)val_len);
  if ((rv = dlcp_net_write_all(cli->fd, hdr, sizeof(hdr), deadline)) != 0 ||
      (rv = dlcp_net_write_all(cli->fd, key, key_len, deadline)) != 0 ||
      (rv = dlcp_net_write_all(cli->fd, val, val_len, deadline)) != 0) {
    return io_error(cli, rv, what, eb);
  }

  rv = dlcp_net_read_all(cli->fd, hdr, sizeof(hdr), deadline);
  if (rv != 0) {
    return io_error(cli, rv, what, eb);
  }
  if (dlcp_rdzv_get_response(hdr, &status, &len) != 0) {
    broken(cli);
    return dlcp_errbuf_set(eb, DLCP_ERR_BAD_MAGIC,
                           "%s does not answer like a dlcp rendezvous server "
                           "(is MASTER_PORT used by another program?)",
                           cli->server);
  }
  resp->status = status;
  resp->value = malloc((size_t)len + 1);
  if (resp->value == NULL) {
    broken(cli);
    return dlcp_errbuf_set(eb, DLCP_ERR_NOMEM, "rendezvous: no memory");
  }
  rv = dlcp_net_read_all(cli->fd, resp->value, len, deadline);
  if (rv != 0) {
    free(resp->value);
    resp->value = NULL;
    return io_error(cli, rv, what, eb);
  }
  resp->value[len] = '\0';
  resp->len = len;
  if (resp->status == DLCP_RDZV_BAD_REQUEST ||
      resp->status == DLCP_RDZV_REJECTED) {
    /* The server closes the connection after these. */
    rv = dlcp_errbuf_set(eb,
                         resp->status == DLCP_RDZV_REJECTED ? DLCP_ERR_CONFIG
                                                            : DLCP_ERR_INTERNAL,
                         "rendezvous server (rank 0) at %s refused %s from "
                         "rank %" PRIu32 ": %s",
                         cli->server, what, cli->rank, (char *)resp->value);
    free(resp->value);
    resp->value = NULL;
    broken(cli);
    return rv;
  }
  return 0;
}

/* connect_once makes one connection attempt; returns the fd or -errno. */
static int connect_once(const dlcp_sockaddr *addr, dlcp_tstamp deadline) {
  int fd =
      socket(addr->sa.sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  int err = 0;
  socklen_t errlen = sizeof(err);
  int one = 1;
  if (fd < 0) {
    return -errno;
  }
  if (connect(fd, &addr->sa, dlcp_sockaddr_len(addr)) != 0) {
    if (errno != EINPROGRESS) {
      err = errno;
      close(fd);
      return -err;
    }
    for (;;) {
      struct pollfd pfd = {.fd = fd, .events = POLLOUT, .revents = 0};
      int n = poll(&pfd, 1, dlcp_rt_poll_timeout(deadline));
      if (n > 0) {
        break;
      }
      if (n == 0) {
        close(fd);
        return -ETIMEDOUT;
      }
      if (errno != EINTR) {
        err = errno;
        close(fd);
        return -err;
      }
    }
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &errlen) != 0) {
      err = errno;
    }
    if (err != 0) {
      close(fd);
      return -err;
    }
  }
  /* Requests are small and answered one at a time: no Nagle delay. */
  (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return fd;
}

/* retryable: errors that mean "rank 0 is not listening yet". */
static int retryable(int err) {
  return err == ECONNREFUSED || err == ETIMEDOUT || err == EHOSTUNREACH ||
         err == ENETUNREACH || err == ECONNRESET || err == ECONNABORTED ||
         err == EAGAIN;
}

/* check_welcome checks the server's answer to a tagged HELLO: the salt,
 * tagged with the nonce this HELLO carried (so not an answer recorded
 * from another run), which it copies to |salt|. */
static int check_welcome(dlcp_rdzv_client *cli, const dlcp_auth *auth,
                         uint64_t nonce, const response *resp,
                         uint8_t salt[DLCP_AUTH_SALT_LEN], dlcp_errbuf *eb) {
  uint8_t echo[8];
  dlcp_put_u64(echo, nonce);
  if (resp->len == DLCP_RDZV_WELCOME_LEN) {
    struct iovec msg[2] = {{resp->value, DLCP_RDZV_SALT_LEN},
                           {echo, sizeof(echo)}};
    if (dlcp_auth_check(
            auth,
            dlcp_auth_stream(DLCP_AUTH_RENDEZVOUS, DLCP_AUTH_SERVER, cli->rank),
            msg, 2, resp->value + DLCP_RDZV_SALT_LEN) != 0) {
      memcpy(salt, resp->value, DLCP_AUTH_SALT_LEN);
      return 0;
    }
  }
  return dlcp_errbuf_set(eb, DLCP_ERR_CONFIG,
                         "rendezvous server at %s did not prove it knows the "
                         "job secret (%zu-byte answer to HELLO: rank 0 has "
                         "no or another DLCP_JOB_SECRET, or something else "
                         "answers there)",
                         cli->server, resp->len);
}

int dlcp_rdzv_client_connect(dlcp_rdzv_client **pcli, const char *host,
                             uint16_t port, uint32_t rank, uint32_t world_size,
                             uint32_t job, const dlcp_auth *auth,
                             uint8_t salt[DLCP_AUTH_SALT_LEN],
                             dlcp_tstamp deadline, dlcp_errbuf *eb) {
  dlcp_rdzv_client *cli;
  dlcp_sockaddr addr;
  dlcp_tstamp start = dlcp_rt_now();
  uint64_t backoff_ms = BACKOFF_FIRST_MS;
  unsigned attempts = 0;
  int last_err = 0;
  uint8_t hello[DLCP_RDZV_HELLO_AUTH_LEN];
  uint64_t nonce = 0;
  response resp;
  int rv;

  *pcli = NULL;
  if (world_size == 0 || rank >= world_size) {
    return dlcp_errbuf_set(eb, DLCP_ERR_INVALID_ARGUMENT,
                           "rendezvous: rank %" PRIu32
                           " is not below world size %" PRIu32,
                           rank, world_size);
  }
  rv = dlcp_net_resolve(&addr, host, port, SOCK_STREAM, eb);
  if (rv != 0) {
    return dlcp_errbuf_prefix(eb, rv, "rendezvous: MASTER_ADDR");
  }
  cli = calloc(1, sizeof(*cli));
  if (cli == NULL) {
    return dlcp_errbuf_set(eb, DLCP_ERR_NOMEM, "rendezvous: no memory");
  }
  cli->fd = -1;
  cli->rank = rank;
  cli->world = world_size;
  dlcp_net_addr_format(cli->server, sizeof(cli->server), &addr.sa);

  for (;;) {
    int fd;
    attempts++;
    fd = connect_once(&addr, deadline);
    if (fd >= 0) {
      cli->fd = fd;
      break;
    }
    last_err = -fd;
    if (!retryable(last_err) || dlcp_rt_now() >= deadline) {
      rv = dlcp_errbuf_set(eb, retryable(last_err) ? DLCP_ERR_TIMEOUT : fd,
                           "rendezvous: cannot reach rank 0 at %s within "
                           "%" PRIu64 " ms (%u attempt%s, last error: %s)",
                           cli->server, ms_since(start), attempts,
                           attempts == 1 ? "" : "s", strerror(last_err));
      free(cli);
      return rv;
    }
    /* Rank 0 may simply not be up yet: back off exponentially, but never
     * sleep past the deadline. */
    {
      int left = dlcp_rt_poll_timeout(deadline);
      sleep_ms(backoff_ms < (uint64_t)left ? backoff_ms : (uint64_t)left);
    }
    backoff_ms =
        backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : backoff_ms * 2;
  }

  dlcp_rdzv_put_hello(hello, rank, world_size, job);
  if (auth) {
    struct iovec msg = {hello, DLCP_RDZV_HELLO_LEN};
    nonce = dlcp_auth_nonce();
    dlcp_auth_seal(
        auth, dlcp_auth_stream(DLCP_AUTH_RENDEZVOUS, rank, DLCP_AUTH_SERVER),
        nonce, &msg, 1, hello + DLCP_RDZV_HELLO_LEN);
  }
  rv = request(cli, DLCP_RDZV_HELLO, "HELLO", NULL, hello,
               auth ? DLCP_RDZV_HELLO_AUTH_LEN : DLCP_RDZV_HELLO_LEN, deadline,
               &resp, eb);
  if (rv == 0 && auth) {
    rv = check_welcome(cli, auth, nonce, &resp, salt, eb);
  }
  free(resp.value);
  if (rv != 0) {
    dlcp_rdzv_client_close(cli);
    return rv;
  }
  *pcli = cli;
  return 0;
}

void dlcp_rdzv_client_close(dlcp_rdzv_client *cli) {
  if (cli == NULL) {
    return;
  }
  broken(cli);
  free(cli);
}

int dlcp_rdzv_set(dlcp_rdzv_client *cli, const char *key, const void *value,
                  size_t len, dlcp_tstamp deadline, dlcp_errbuf *eb) {
  response resp;
  char what[MAX_KEY_TEXT + 16];
  int rv;
  snprintf(what, sizeof(what), "SET '%s'", key);
  rv = request(cli, DLCP_RDZV_SET, what, key, value, len, deadline, &resp, eb);
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
  rv = request(cli, DLCP_RDZV_GET, what, key, NULL, 0, deadline, &resp, eb);
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
  uint8_t timeout[DLCP_RDZV_WAIT_LEN];
  int left = dlcp_rt_poll_timeout(deadline);
  int rv;
  *value = NULL;
  *len = 0;
  snprintf(what, sizeof(what), "WAIT '%s'", key);
  dlcp_rdzv_put_wait(timeout, left < 0 ? UINT32_MAX : (uint32_t)left);
  rv = request(cli, DLCP_RDZV_WAIT, what, key, timeout, sizeof(timeout),
               deadline == DLCP_TSTAMP_NEVER
                   ? deadline
                   : deadline + WAIT_ANSWER_SLACK_MS * DLCP_NS_PER_MS,
               &resp, eb);
  if (rv != 0) {
    return rv;
  }
  if (resp.status != DLCP_RDZV_OK) {
    free(resp.value);
    return dlcp_errbuf_set(eb, DLCP_ERR_TIMEOUT,
                           "rendezvous: key '%s' did not appear on rank 0's "
                           "store at %s before the deadline",
                           key, cli->server);
  }
  *value = resp.value;
  *len = resp.len;
  return 0;
}

void dlcp_rdzv_free_values(void **values, size_t n) {
  size_t i;
  for (i = 0; i < n; i++) {
    free(values[i]);
    values[i] = NULL;
  }
}

/* missing_ranks lists, after a timed-out wait for rank |first|, which
 * ranks from |first| on have not published "<name>/<r>", as "2, 3, 7"
 * (shortened past a few dozen).  Best effort: if asking fails, the list
 * simply starts at |first|. */
static void missing_ranks(dlcp_rdzv_client *cli, const char *name,
                          uint32_t first, char *out, size_t outlen,
                          uint32_t *count) {
  dlcp_tstamp deadline = dlcp_rt_deadline_after(DIAGNOSE_MS);
  size_t used = 0;
  uint32_t listed = 0;
  uint32_t r;
  out[0] = '\0';
  *count = 0;
  for (r = first; r < cli->world; r++) {
    char key[MAX_KEY_TEXT];
    int found = 0;
    void *v = NULL;
    size_t vlen;
    if (r != first && cli->fd >= 0) {
      snprintf(key, sizeof(key), "%s/%" PRIu32, name, r);
      if (dlcp_rdzv_get(cli, key, &found, &v, &vlen, deadline, NULL) != 0) {
        found = 0;
      }
      free(v);
      if (found) {
        continue;
      }
    }
    (*count)++;
    if (listed < 32 && used + 16 < outlen) {
      int n = snprintf(out + used, outlen - used, "%s%" PRIu32,
                       listed > 0 ? ", " : "", r);
      used += n > 0 ? (size_t)n : 0;
      listed++;
    }
  }
  if (*count > listed && used + 24 < outlen) {
    snprintf(out + used, outlen - used, " and %" PRIu32 " more",
             *count - listed);
  }
}

int dlcp_rdzv_exchange(dlcp_rdzv_client *cli, const char *name,
                       const void *mine, size_t len, void **values,
                       size_t *lens, dlcp_tstamp deadline, dlcp_errbuf *eb) {
  dlcp_tstamp start = dlcp_rt_now();
  char key[MAX_KEY_TEXT];
  uint32_t r;
  int rv;

  for (r = 0; r < cli->world; r++) {
    values[r] = NULL;
    lens[r] = 0;
  }
  if (strlen(name) + 12 > DLCP_RDZV_MAX_KEY) {
    return dlcp_errbuf_set(eb, DLCP_ERR_INVALID_ARGUMENT,
                           "rendezvous: exchange name too long");
  }
  snprintf(key, sizeof(key), "%s/%" PRIu32, name, cli->rank);
  rv = dlcp_rdzv_set(cli, key, mine, len, deadline, eb);
  if (rv != 0) {
    return rv;
  }
  for (r = 0; r < cli->world; r++) {
    snprintf(key, sizeof(key), "%s/%" PRIu32, name, r);
    rv = dlcp_rdzv_wait(cli, key, &values[r], &lens[r], deadline, eb);
    if (rv == DLCP_ERR_TIMEOUT && cli->fd >= 0) {
      char list[256];
      uint32_t nmissing;
      missing_ranks(cli, name, r, list, sizeof(list), &nmissing);
      dlcp_errbuf_set(eb, DLCP_ERR_TIMEOUT,
                      "rendezvous: timed out after %" PRIu64
                      " ms waiting for rank%s %s of %" PRIu32
                      " to publish '%s' on rank 0's store at %s",
                      ms_since(start), nmissing == 1 ? "" : "s", list,
                      cli->world, name, cli->server);
    }
    if (rv != 0) {
      dlcp_rdzv_free_values(values, cli->world);
      return rv;
    }
  }
  return 0;
}

int dlcp_rdzv_barrier(dlcp_rdzv_client *cli, const char *name,
                      dlcp_tstamp deadline, dlcp_errbuf *eb) {
  void **values = calloc(cli->world, sizeof(*values));
  size_t *lens = calloc(cli->world, sizeof(*lens));
  int rv;
  if (values == NULL || lens == NULL) {
    free(values);
    free(lens);
    return dlcp_errbuf_set(eb, DLCP_ERR_NOMEM, "rendezvous: no memory");
  }
  rv = dlcp_rdzv_exchange(cli, name, "", 0, values, lens, deadline, eb);
  if (rv == 0) {
    dlcp_rdzv_free_values(values, cli->world);
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
