/*
 * mesh.c: the job's mesh of control connections (mesh.h), in three steps
 * that wait on nobody's later step, so no rank waits on a chain of
 * others: dial every lower rank and send the hello; accept every higher
 * rank and answer its hello (it waits only for their first step); read
 * the lower ranks' answers (they come from their second step).  A lower
 * rank cannot leave its second step before it has this rank's
 * connection, so a connection it never had can be dialed again in the
 * third.
 */
#include "rt/mesh.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "rt/clock.h"
#include "rt/tcp.h"
#include "wire/rdzv_wire.h"

/* Accepted connections read at once: every higher rank's, and as many
 * strays besides (a connection given up by the side that opened it,
 * whose close is still on its way), the oldest closed when full. */
#define MESH_STRAYS 16u

/* A lower rank's connection closed before its answer is dialed again
 * this long after, doubling to the ceiling, so that a rank whose
 * listener keeps closing connections is not dialed in a busy loop. */
#define REDIAL_FIRST_MS 10u
#define REDIAL_MAX_MS 1000u

/* A connection whose hello has not all come yet. */
typedef struct half {
  int fd;
  bool reset; /* DLCP_FAULT_CTL_RESET: reset once its hello is here */
  size_t got;
  uint8_t hello[DLCP_MESH_HELLO_LEN + DLCP_AUTH_TRAILER_LEN];
} half;

typedef struct mesh {
  dlcp_comm *c;
  const dlcp_sockaddr *addr; /* [lower rank] */
  half *acc;                 /* accepted, their hello not yet whole */
  size_t nacc, cap;
  uint32_t named;  /* higher ranks whose hello came */
  uint32_t resets; /* DLCP_FAULT_CTL_RESET: accepted connections to reset */
  size_t hello_len;
} mesh;

/* send_hello writes this rank's hello on its connection to |r|: the first
 * message of its control stream to |r| (counter 1 in a job with a
 * secret). */
static int send_hello(dlcp_comm *c, uint32_t r, dlcp_tstamp deadline) {
  uint8_t hello[DLCP_MESH_HELLO_LEN + DLCP_AUTH_TRAILER_LEN];
  size_t len = DLCP_MESH_HELLO_LEN;
  peer *p = &c->peers[r];
  dlcp_mesh_put_hello(hello, c->env.job, c->env.rank);
  p->ctl_tx = 0;
  if (c->rdzv.authenticated) {
    struct iovec m = {hello, DLCP_MESH_HELLO_LEN};
    dlcp_auth_seal(&c->rdzv.session,
                   dlcp_auth_stream(DLCP_AUTH_CONTROL, c->env.rank, r),
                   ++p->ctl_tx, &m, 1, hello + DLCP_MESH_HELLO_LEN);
    len += DLCP_AUTH_TRAILER_LEN;
  }
  return dlcp_net_write_all(p->tcp_fd, hello, len, deadline);
}

/* hand_hello sends the hello on this rank's new connection to lower rank
 * |r|.  A connection that cannot take it (reset before it was written)
 * is shut down rather than failing the join: the answer step then finds
 * it closed and dials again, as for one reset after its hello. */
static void hand_hello(dlcp_comm *c, uint32_t r, dlcp_tstamp deadline) {
  if (send_hello(c, r, deadline) != 0) {
    (void)shutdown(c->peers[r].tcp_fd, SHUT_RDWR);
  }
}

/* In a job with a secret, whether |hello| (with its trailer) comes from
 * rank |r| of this run: counter 1 of its control stream to this rank. */
static bool hello_authentic(dlcp_comm *c, const uint8_t *hello, uint32_t r) {
  if (!c->rdzv.authenticated) {
    return true;
  }
  struct iovec m = {(void *)(uintptr_t)hello, DLCP_MESH_HELLO_LEN};
  if (r >= c->env.world_size ||
      dlcp_auth_check(&c->rdzv.session,
                      dlcp_auth_stream(DLCP_AUTH_CONTROL, r, c->env.rank), &m,
                      1, hello + DLCP_MESH_HELLO_LEN) != 1) {
    c->stats.auth_forged++;
    return false;
  }
  c->peers[r].ctl_rx = 1;
  return true;
}

/* read_hello reads what has come of |h|'s hello: 1 once it is whole, 0
 * while more is to come, -1 when the connection closed first. */
static int read_hello(half *h, size_t len) {
  ssize_t got = recv(h->fd, h->hello + h->got, len - h->got, MSG_DONTWAIT);
  if (got < 0 && (errno == EAGAIN || errno == EINTR)) {
    return 0;
  }
  if (got <= 0) {
    return -1;
  }
  h->got += (size_t)got;
  return h->got == len;
}

/* dial_all connects to every lower rank at once and sends each its
 * hello. */
static int dial_all(mesh *m, dlcp_tstamp deadline, dlcp_errbuf *eb) {
  dlcp_comm *c = m->c;
  uint32_t me = c->env.rank;
  dlcp_tstamp start = dlcp_rt_now();
  dlcp_tcp_dial *d = calloc(me > 0 ? me : 1, sizeof(*d));
  int rv = 0;
  if (d == NULL) {
    return dlcp_errbuf_set(eb, DLCP_ERR_NOMEM, "out of memory");
  }
  for (uint32_t r = 0; r < me; r++) {
    d[r] = (dlcp_tcp_dial){.addr = m->addr[r], .fd = -1};
  }
  /* They listened before they published their ports: a refusal means the
   * rank is gone. */
  if (dlcp_tcp_connect_all(d, me, true, deadline) != 0) {
    rv = dlcp_errbuf_set(eb, DLCP_ERR_NOMEM, "out of memory");
  }
  for (uint32_t r = 0; rv == 0 && r < me; r++) {
    peer *p = &c->peers[r];
    if (d[r].fd < 0) {
      rv = dlcp_errbuf_set(
          eb, DLCP_ERR_PEER_CLOSED,
          "%s: cannot connect the control channel (%u attempt%s in %" PRIu64
          " ms): %s",
          p->name, d[r].attempts, d[r].attempts == 1 ? "" : "s",
          (dlcp_rt_now() - start) / DLCP_NS_PER_MS, strerror(-d[r].fd));
      break;
    }
    p->tcp_fd = d[r].fd;
    d[r].fd = -1;
    hand_hello(c, r, deadline);
  }
  for (uint32_t r = 0; r < me; r++) {
    if (d[r].fd >= 0) {
      close(d[r].fd); /* not handed over: an earlier rank failed */
    }
  }
  free(d);
  return rv;
}

/* redial connects to lower rank |r| again, its last connection closed
 * before it answered (|closed|: how), and sends the hello anew. */
static int redial(mesh *m, uint32_t r, const char *closed, dlcp_tstamp deadline,
                  dlcp_errbuf *eb) {
  dlcp_comm *c = m->c;
  peer *p = &c->peers[r];
  unsigned attempts;
  int fd = dlcp_tcp_connect(&m->addr[r], true, deadline, &attempts);
  if (fd < 0) {
    return dlcp_errbuf_set(
        eb, DLCP_ERR_PEER_CLOSED,
        "%s: closed the control connection before answering (%s), and "
        "connecting again failed after %u attempt%s: %s",
        p->name, closed, attempts, attempts == 1 ? "" : "s", strerror(-fd));
  }
  p->tcp_fd = fd;
  c->stats.control_redials++;
  hand_hello(c, r, deadline);
  return 0;
}

/* await_answer reads lower rank |r|'s answer and checks it; a connection
 * that closes first is dialed again after a wait that doubles while it
 * keeps happening. */
static int await_answer(mesh *m, uint32_t r, dlcp_tstamp deadline,
                        dlcp_errbuf *eb) {
  dlcp_comm *c = m->c;
  peer *p = &c->peers[r];
  uint8_t hello[DLCP_MESH_HELLO_LEN + DLCP_AUTH_TRAILER_LEN];
  uint64_t wait_ms = REDIAL_FIRST_MS;
  for (;;) {
    int rv = dlcp_net_read_all(p->tcp_fd, hello, m->hello_len, deadline);
    if (rv == DLCP_ERR_TIMEOUT) {
      return dlcp_errbuf_set(eb, DLCP_ERR_TIMEOUT,
                             "%s: no answer on the control connection",
                             p->name);
    }
    if (rv == 0) {
      break;
    }
    /* Closed or reset before the answer: a connection the other end's
     * kernel never completed, or one that could not take the hello (or a
     * failed read: the same remedy). */
    const char *closed =
        rv == DLCP_ERR_PEER_CLOSED ? "closed or reset" : strerror(-rv);
    close(p->tcp_fd);
    p->tcp_fd = -1;
    struct timespec ts = {.tv_sec = (time_t)(wait_ms / 1000),
                          .tv_nsec = (long)(wait_ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
    wait_ms = wait_ms * 2 < REDIAL_MAX_MS ? wait_ms * 2 : REDIAL_MAX_MS;
    if ((rv = redial(m, r, closed, deadline, eb)) != 0) {
      return rv;
    }
  }
  uint32_t from;
  if (dlcp_mesh_get_hello(hello, c->env.job, &from) != 0 || from != r ||
      !hello_authentic(c, hello, r)) {
    return dlcp_errbuf_set(eb, DLCP_ERR_CONFIG,
                           "%s answered the control connection with a hello "
                           "that is not its own (another job's, or forged)",
                           p->name);
  }
  return 0;
}

/* name_one takes the hello accepted connection |h| completed: the
 * connection becomes its rank's and is answered, or is closed if it is
 * none of ours.  A rank that dials again (its connection closed before
 * it saw the answer) replaces its connection. */
static int name_one(mesh *m, half *h, dlcp_tstamp deadline, dlcp_errbuf *eb) {
  dlcp_comm *c = m->c;
  uint32_t me = c->env.rank;
  uint32_t r;
  if (dlcp_mesh_get_hello(h->hello, c->env.job, &r) != 0 ||
      !hello_authentic(c, h->hello, r)) {
    /* Not one of ours (a stray connection, another job, or a forgery):
     * ignore. */
    close(h->fd);
    return 0;
  }
  if (r <= me || r >= c->env.world_size) {
    close(h->fd);
    return dlcp_errbuf_set(eb, DLCP_ERR_CONFIG,
                           "a control connection claims rank %u, which "
                           "cannot connect to rank %u",
                           r, me);
  }
  peer *p = &c->peers[r];
  if (p->tcp_fd >= 0) {
    close(p->tcp_fd);
    m->named--;
  }
  p->tcp_fd = h->fd;
  if (send_hello(c, r, deadline) != 0) {
    /* It closed again: it dials once more. */
    close(p->tcp_fd);
    p->tcp_fd = -1;
    return 0;
  }
  m->named++;
  return 0;
}

/* take_accepted reads the hello of accepted connection |i|, which leaves
 * the array once it is whole (named or ignored) or closed. */
static int take_accepted(mesh *m, size_t i, dlcp_tstamp deadline,
                         dlcp_errbuf *eb) {
  int rv = 0;
  if (m->acc[i].reset) {
    /* The hello is here, unread: the dialing rank waits for the answer
     * and gets a reset, as from a kernel that never completed the
     * connection. */
    const struct linger now = {.l_onoff = 1, .l_linger = 0};
    (void)setsockopt(m->acc[i].fd, SOL_SOCKET, SO_LINGER, &now, sizeof(now));
    close(m->acc[i].fd);
    m->acc[i] = m->acc[--m->nacc];
    return 0;
  }
  int got = read_hello(&m->acc[i], m->hello_len);
  if (got == 0) {
    return 0;
  }
  if (got > 0) {
    rv = name_one(m, &m->acc[i], deadline, eb);
  } else {
    close(m->acc[i].fd); /* closed before its hello was whole */
  }
  m->acc[i] = m->acc[--m->nacc];
  return rv;
}

/* accept_one takes a connection from the listener. */
static void accept_one(mesh *m) {
  int fd = accept4(m->c->listen_fd, NULL, NULL, SOCK_CLOEXEC);
  if (fd < 0) {
    return;
  }
  if (m->nacc == m->cap) {
    close(m->acc[0].fd); /* the oldest stray makes room */
    memmove(m->acc, m->acc + 1, (m->nacc - 1) * sizeof(*m->acc));
    m->nacc--;
  }
  dlcp_tcp_tune(fd);
  m->acc[m->nacc++] = (half){.fd = fd, .reset = m->resets > 0, .got = 0};
  m->resets -= m->resets > 0;
}

/* accept_higher accepts the control connection of every higher rank and
 * answers its hello.  Hellos are read as they come, several connections
 * at once, so that one that stalls (its segments lost on a link its hash
 * chose) holds up no other. */
static int accept_higher(mesh *m, dlcp_tstamp deadline, dlcp_errbuf *eb) {
  dlcp_comm *c = m->c;
  uint32_t want = c->env.world_size - c->env.rank - 1;
  struct pollfd *pfd = calloc(m->cap + 1, sizeof(*pfd));
  int rv = 0;
  if (pfd == NULL) {
    return dlcp_errbuf_set(eb, DLCP_ERR_NOMEM, "out of memory");
  }
  while (rv == 0 && m->named < want) {
    pfd[0] = (struct pollfd){.fd = c->listen_fd, .events = POLLIN};
    for (size_t i = 0; i < m->nacc; i++) {
      pfd[i + 1] = (struct pollfd){.fd = m->acc[i].fd, .events = POLLIN};
    }
    int k = poll(pfd, m->nacc + 1, dlcp_rt_poll_timeout(deadline));
    if (k < 0 && errno == EINTR) {
      continue;
    }
    if (k <= 0) {
      char list[256];
      dlcp_ranklist missing;
      dlcp_ranklist_init(&missing, list, sizeof(list));
      for (uint32_t r = c->env.rank + 1; r < c->env.world_size; r++) {
        if (c->peers[r].tcp_fd < 0) {
          dlcp_ranklist_add(&missing, r);
        }
      }
      dlcp_ranklist_end(&missing);
      rv = dlcp_errbuf_set(eb, DLCP_ERR_TIMEOUT,
                           "timed out waiting for the control connections "
                           "of ranks above %u (%u of %u arrived; missing: "
                           "%s)",
                           c->env.rank, m->named, want, list);
      break;
    }
    /* Hellos first: accepting may move the array. */
    for (size_t i = m->nacc; i-- > 0 && rv == 0;) {
      if (pfd[i + 1].revents != 0) {
        rv = take_accepted(m, i, deadline, eb);
      }
    }
    if (rv == 0 && (pfd[0].revents & POLLIN)) {
      accept_one(m);
    }
  }
  free(pfd);
  return rv;
}

int dlcp_rt_build_mesh(dlcp_comm *c, const dlcp_sockaddr *lower,
                       dlcp_tstamp deadline, dlcp_errbuf *eb) {
  uint32_t me = c->env.rank;
  mesh m = {
      .c = c,
      .addr = lower,
      .cap = (size_t)(c->env.world_size - me - 1) + MESH_STRAYS,
      .resets = c->env.fault.ctl_resets,
      .hello_len = DLCP_MESH_HELLO_LEN +
                   (c->rdzv.authenticated ? DLCP_AUTH_TRAILER_LEN : 0),
  };
  m.acc = calloc(m.cap, sizeof(*m.acc));
  int rv = m.acc != NULL ? dial_all(&m, deadline, eb)
                         : dlcp_errbuf_set(eb, DLCP_ERR_NOMEM, "out of memory");
  if (rv == 0) {
    rv = accept_higher(&m, deadline, eb);
  }
  for (uint32_t r = 0; rv == 0 && r < me; r++) {
    rv = await_answer(&m, r, deadline, eb);
  }
  for (size_t i = 0; i < m.nacc; i++) {
    close(m.acc[i].fd);
  }
  for (uint32_t r = 0; rv == 0 && r < c->env.world_size; r++) {
    if (r != me) {
      dlcp_net_set_nonblock(c->peers[r].tcp_fd);
    }
  }
  free(m.acc);
  return rv;
}
