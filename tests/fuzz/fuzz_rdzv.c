/*
 * fuzz_rdzv.c: libFuzzer target for the rendezvous protocol as rank 0's
 * server speaks it (src/rt/rendezvous_server.c): HELLO, SET, GET, WAIT,
 * GATHER, framing, limits, deadlines and eviction, from up to four
 * clients at once.
 *
 * The server's own code is compiled into this target (the #include
 * below) so that its loop can be driven one round at a time from this
 * thread: each client is a socketpair whose far end the server owns, and
 * where the server's thread would poll, the program below reports events
 * to conn_on_events() and ends the round with round_end() at a clock it
 * chooses.  One input then costs microseconds instead of a thread and
 * TCP handshakes, and replays exactly.  The program is a sequence of
 *
 *   op byte: bits 0-1 client k; bits 2-4 what:
 *     0 connect k (if not connected)      1 write L bytes (L = next byte)
 *     2 read k's answers, then POLLOUT    3 end k's stream (shutdown)
 *     4 close k (reset)                   5 advance the clock by
 *                                           (next byte) * 50 ms
 *     6,7 write L bytes, as 1
 *   bit 5 of the first op byte: the job has a secret (HELLO must carry a
 *   tag the fuzzer cannot make: the refusals of an authenticated job)
 *
 * Invariants (abort on violation): every byte the server sends parses as
 * well-formed responses (magic, version, known status, zero reserved
 * field, value within the limit); nothing is answered before HELLO except
 * a refusal; at most world + max_strays connections are held; a client
 * whose stream ended is let go by the next round, or within 100 ms of
 * real time if the kernel releases its socket late (no connection
 * outlives its client); the server never closes a client's own end nor
 * keeps a connection whose descriptor it closed; everything is freed
 * (LeakSanitizer).
 *
 * Descriptor identity is checked where the kernel hands numbers out, not
 * by fstat on every round (which was most of the target's system time):
 * within an input only this target's socketpair() creates descriptors, and
 * the kernel gives a number again only once it is closed.  So a new pair
 * that reuses a client's own number, or a number the server still holds a
 * connection for, proves a close the server should not have made; our
 * final close() of our own ends says EBADF for one it closed unseen.
 */
#include "../../src/rt/rendezvous_server.c"

#include "wire/bytes.h"

#define NCLIENT 4
#define WORLD 4u
#define JOB 7u

typedef struct client {
  int fd;      /* our end, -1 if not connected */
  int srv_fd;  /* the end the server owns, -1 once it let go */
  int ended;   /* we shut down our side */
  int helloed; /* answered OK to a HELLO at least once */
  uint8_t hdr[DLCP_RDZV_HDR_LEN];
  size_t have;   /* header bytes collected */
  uint64_t skip; /* value bytes still to skip */
  /* the last round that reported events for this client, for kept():
   * the events, whether the server's connection was found, and its state
   * right after conn_on_events */
  short last_ev;
  int last_found, last_dead, last_closing;
  size_t last_in;
} client;

static void discard(void *arg, const char *line) {
  (void)arg;
  (void)line;
}

static conn *find_conn(dlcp_rdzv_server *srv, int fd) {
  for (size_t i = 0; i < srv->nconns; i++) {
    if (srv->conns[i].fd == fd) {
      return &srv->conns[i];
    }
  }
  return NULL;
}

/* client_conn returns the server's connection of client |cl|: the one
 * under its end's number (claim_numbers keeps that number its own). */
static conn *client_conn(dlcp_rdzv_server *srv, const client *cl) {
  return cl->srv_fd >= 0 ? find_conn(srv, cl->srv_fd) : NULL;
}

/* claim_numbers: the kernel has just given out |fd|, so whatever held that
 * number before was closed.  A client's own end closed by the server, or a
 * connection the server still holds on a closed descriptor, is a finding;
 * a server end it let go is recorded as swept. */
static void claim_numbers(dlcp_rdzv_server *srv, client *cl, int fd) {
  if (find_conn(srv, fd) != NULL) {
    fprintf(stderr, "fuzz_rdzv: the server holds a connection on fd %d, "
            "which it closed\n", fd);
    abort();
  }
  for (int i = 0; i < NCLIENT; i++) {
    if (cl[i].fd == fd) {
      fprintf(stderr, "fuzz_rdzv: client %d's own fd %d was closed under "
              "it\n", i, fd);
      abort();
    }
    if (cl[i].srv_fd == fd) {
      cl[i].srv_fd = -1;
    }
  }
}

/* parse checks the server's bytes as a sequence of responses. */
static void parse(client *cl, const uint8_t *p, size_t n) {
  while (n > 0) {
    if (cl->skip > 0) {
      size_t k = cl->skip < n ? (size_t)cl->skip : n;
      cl->skip -= k;
      p += k;
      n -= k;
      continue;
    }
    cl->hdr[cl->have++] = *p++;
    n--;
    if (cl->have == DLCP_RDZV_HDR_LEN) {
      uint8_t status = dlcp_get_u8(cl->hdr + 3);
      if (dlcp_get_u16(cl->hdr) != DLCP_RDZV_MAGIC ||
          dlcp_get_u8(cl->hdr + 2) != DLCP_RDZV_VERSION ||
          status > DLCP_RDZV_REJECTED || dlcp_get_u32(cl->hdr + 4) != 0 ||
          dlcp_get_u32(cl->hdr + 8) > DLCP_RDZV_MAX_ANSWER) {
        abort();
      }
      /* Before a HELLO was accepted only a HELLO's OK or a refusal. */
      if (!cl->helloed && status == DLCP_RDZV_NOT_FOUND) {
        abort();
      }
      if (status == DLCP_RDZV_OK) {
        cl->helloed = 1; /* the first OK a client gets is its HELLO's */
      }
      cl->skip = dlcp_get_u32(cl->hdr + 8);
      cl->have = 0;
    }
  }
}

static void read_answers(client *cl) {
  uint8_t b[8192];
  ssize_t n;
  while ((n = recv(cl->fd, b, sizeof(b), MSG_DONTWAIT)) > 0) {
    parse(cl, b, (size_t)n);
  }
}

/* run_round reports |ev| for client |k| (0: none) and ends the round at
 * |now|, as one turn of server_main would; then notes which clients the
 * server let go and checks the bounds. */
static void run_round(dlcp_rdzv_server *srv, client *cl, int k, short ev,
                  dlcp_tstamp now) {
  srv->now = now; /* what server_main reads after its poll */
  if (k >= 0 && cl[k].srv_fd >= 0) {
    conn *c = client_conn(srv, &cl[k]);
    cl[k].last_found = c != NULL;
    if (c != NULL) {
      short want = (short)((c->in_len < c->in_cap ? POLLIN : 0) |
                           (c->out_len > c->out_off ? POLLOUT : 0) |
                           POLLRDHUP);
      /* poll reports POLLHUP/POLLERR whether asked or not */
      cl[k].last_ev = (short)(ev & (want | POLLHUP | POLLERR));
      conn_on_events(srv, c, cl[k].last_ev);
      cl[k].last_dead = c->dead;
      cl[k].last_closing = c->closing;
      cl[k].last_in = c->in_len;
    }
  }
  round_end(srv, now);
  if (srv->nconns > srv->max_conns) {
    abort();
  }
  for (int i = 0; i < NCLIENT; i++) {
    if (cl[i].srv_fd >= 0 && client_conn(srv, &cl[i]) == NULL) {
      cl[i].srv_fd = -1; /* swept: the server closed its end */
    }
  }
}

/* kept reports the connection the server still holds for client |k|
 * before the abort, so that a finding that does not replay alone (the
 * kernel's socket buffers are the one state an input does not fully
 * control) still says what state the server was in. */
static void kept(dlcp_rdzv_server *srv, const client *cl, int k) {
  const conn *c = client_conn(srv, &cl[k]);
  if (c != NULL) {
    fprintf(stderr,
            "fuzz_rdzv: client %d's connection kept: rank %lld, in %zu/%zu, "
            "out %zu..%zu, wait %s, closing %d, dead %d; the last events "
            "0x%x %s it (then dead %d, closing %d, in %zu); fd %d, %zu "
            "connections\n",
            k, (long long)c->rank, c->in_len, c->in_cap, c->out_off,
            c->out_len, c->wait_key ? "parked" : "none", c->closing,
            c->dead, (unsigned)cl[k].last_ev,
            cl[k].last_found ? "reached" : "did not reach",
            cl[k].last_dead, cl[k].last_closing, cl[k].last_in, c->fd,
            srv->nconns);
  }
  abort();
}

/* end_rounds: a client's end is seen within two rounds (the first may
 * stop reading at a full input buffer; the next then sees the hang-up). */
static void end_rounds(dlcp_rdzv_server *srv, client *cl, int k, short ev,
                       dlcp_tstamp now) {
  for (int r = 0; r < 2 && cl[k].srv_fd >= 0; r++) {
    run_round(srv, cl, k, ev, now);
  }
}

/* late_end: the two rounds did not see client |k|'s end.  The events
 * reached its connection and the server's receive said EAGAIN (the
 * recorded state of four such aborts): the kernel had not released the
 * client's socket yet, as happens when something else holds a reference
 * to its file for a moment (a reader of /proc/PID/fd does).  The server's
 * own loop polls again and sees the end then; so does this, for up to
 * 100 ms of real time, and only a connection still kept after that is a
 * finding.  Returns whether the end was seen. */
static int late_end(dlcp_rdzv_server *srv, client *cl, int k, short ev,
                    dlcp_tstamp now) {
  const struct timespec ms = {0, 1000000};
  for (int i = 1; i <= 100; i++) {
    nanosleep(&ms, NULL);
    run_round(srv, cl, k, ev, now);
    if (cl[k].srv_fd < 0) {
      fprintf(stderr, "fuzz_rdzv: client %d's end reached the server after "
              "%d ms (released late by the kernel)\n", k, i);
      return 1;
    }
  }
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  dlcp_rdzv_server_config cfg;
  dlcp_rdzv_server *srv = NULL;
  client cl[NCLIENT];
  /* The server reads no clock of its own (srv->now): a fixed start
   * makes every run of an input the same. */
  dlcp_tstamp now = 1000 * DLCP_NS_PER_MS;
  size_t i = 0;

  dlcp_rdzv_server_config_default(&cfg, WORLD, JOB);
  cfg.io_timeout_ms = 1000;
  cfg.max_strays = 2; /* so four clients can overflow it */
  cfg.log = discard;
  dlcp_auth key;
  if (size > 0 && (data[0] & 0x20)) {
    if (dlcp_auth_init(&key, "fuzz_rdzv job secret", 20, JOB) != 0) {
      abort();
    }
    cfg.auth = &key;
  }
  if (server_new(&srv, &cfg, NULL) != 0) {
    abort();
  }
  srv->now = now;
  memset(cl, 0, sizeof(cl));
  for (int k = 0; k < NCLIENT; k++) {
    cl[k].fd = cl[k].srv_fd = -1;
  }
  while (i < size) {
    uint8_t op = data[i++];
    int k = op & 3;
    client *c = &cl[k];
    size_t len;
    switch ((op >> 2) & 7) {
    case 0: {
      int sv[2];
      if (c->fd >= 0) {
        break;
      }
      if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0,
                     sv) != 0) {
        abort();
      }
      claim_numbers(srv, cl, sv[0]);
      claim_numbers(srv, cl, sv[1]);
      memset(c, 0, sizeof(*c));
      c->fd = sv[0];
      c->srv_fd = sv[1];
      conn_add(srv, sv[1], "fuzz");
      /* conn_add may have evicted another client and swept it. */
      if (find_conn(srv, sv[1]) == NULL) {
        abort(); /* a new connection is always admitted */
      }
      run_round(srv, cl, -1, 0, now);
      break;
    }
    case 1:
    case 6:
    case 7:
      len = i < size ? data[i++] : 0;
      if (len > size - i) {
        len = size - i;
      }
      if (c->fd >= 0 && !c->ended) {
        if (send(c->fd, data + i, len, MSG_NOSIGNAL) < 0 && errno == EBADF) {
          abort(); /* the server closed our end */
        }
        run_round(srv, cl, k, POLLIN, now);
      }
      i += len;
      break;
    case 2:
      if (c->fd >= 0) {
        read_answers(c);
        run_round(srv, cl, k, POLLOUT, now);
      }
      break;
    case 3:
      if (c->fd >= 0 && !c->ended) {
        (void)shutdown(c->fd, SHUT_WR);
        c->ended = 1;
        end_rounds(srv, cl, k, POLLIN | POLLRDHUP, now);
        if (c->srv_fd >= 0 &&
            !late_end(srv, cl, k, POLLIN | POLLRDHUP, now)) {
          kept(srv, cl, k); /* kept a connection whose client had ended */
        }
      }
      break;
    case 4:
      if (c->fd >= 0) {
        if (close(c->fd) != 0) {
          abort(); /* EBADF: the server closed our end */
        }
        c->fd = -1;
        end_rounds(srv, cl, k, POLLIN | POLLHUP | POLLERR, now);
        if (c->srv_fd >= 0 &&
            !late_end(srv, cl, k, POLLIN | POLLHUP | POLLERR, now)) {
          kept(srv, cl, k);
        }
      }
      break;
    case 5:
      now += (dlcp_tstamp)(i < size ? data[i++] : 0) * 50 * DLCP_NS_PER_MS;
      run_round(srv, cl, -1, 0, now);
      break;
    }
  }
  for (int k = 0; k < NCLIENT; k++) {
    if (cl[k].fd >= 0) {
      read_answers(&cl[k]);
      if (close(cl[k].fd) != 0) {
        abort(); /* EBADF: the server closed our end */
      }
    }
  }
  server_free(srv); /* closes the server's ends */
  return 0;
}
