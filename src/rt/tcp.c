/*
 * tcp.c: control-plane TCP connections that get through a lossy fabric
 * (tcp.h).
 */
#include "rt/tcp.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "rt/clock.h"

/* Linux 6.11's and 6.13's option numbers, for headers older than them. */
#ifndef TCP_RTO_MAX_MS
#define TCP_RTO_MAX_MS 44
#endif
#ifndef TCP_RTO_MIN_US
#define TCP_RTO_MIN_US 45
#endif

#define BACKOFF_FIRST_MS 10u
#define BACKOFF_MAX_MS 1000u
#define MAX_PENDING (DLCP_TCP_ATTEMPT_MS / DLCP_TCP_STAGGER_MS)

void dlcp_tcp_tune(int fd) {
  const int one = 1;
  const int rto_min_us = DLCP_TCP_RTO_MIN_US;
  const int rto_max_ms = DLCP_TCP_RTO_MAX_MS;
  const unsigned user_timeout_ms = DLCP_TCP_USER_TIMEOUT_MS;
  /* Best effort: a kernel without an option keeps its default. */
  (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  (void)setsockopt(fd, IPPROTO_TCP, TCP_RTO_MIN_US, &rto_min_us,
                   sizeof(rto_min_us));
  (void)setsockopt(fd, IPPROTO_TCP, TCP_RTO_MAX_MS, &rto_max_ms,
                   sizeof(rto_max_ms));
  (void)setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout_ms,
                   sizeof(user_timeout_ms));
}

bool dlcp_tcp_retryable(int err) {
  return err == ECONNREFUSED || err == ETIMEDOUT || err == EHOSTUNREACH ||
         err == ENETUNREACH || err == ECONNRESET || err == ECONNABORTED ||
         err == EAGAIN;
}

/* One destination's attempts in flight and its schedule. */
typedef struct dialing {
  int fd[MAX_PENDING];
  dlcp_tstamp started[MAX_PENDING];
  unsigned n;
  dlcp_tstamp next;    /* when the next attempt may start */
  uint64_t backoff_ms; /* after the next refusal */
  int last;            /* the last error (an errno) */
  bool done;
} dialing;

/* start begins a non-blocking connection to |addr|: returns its
 * descriptor, with |*pending| telling whether it is still being made, or
 * -errno. */
static int start(const dlcp_sockaddr *addr, bool *pending) {
  int fd =
      socket(addr->sa.sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  *pending = false;
  if (fd < 0) {
    return -errno;
  }
  /* Before connect(): the SYN's retries keep to the ceiling too. */
  dlcp_tcp_tune(fd);
  if (connect(fd, &addr->sa, dlcp_sockaddr_len(addr)) != 0) {
    int err = errno;
    if (err != EINPROGRESS) {
      close(fd);
      return -err;
    }
    *pending = true;
  }
  return fd;
}

/* drop removes attempt |k| of |g| and returns its descriptor. */
static int drop(dialing *g, unsigned k) {
  int fd = g->fd[k];
  g->n--;
  g->fd[k] = g->fd[g->n];
  g->started[k] = g->started[g->n];
  return fd;
}

/* finish ends |d|'s dialing with |fd| (a connection, or -errno), closing
 * the attempts still in flight. */
static void finish(dlcp_tcp_dial *d, dialing *g, int fd) {
  while (g->n > 0) {
    close(drop(g, 0));
  }
  d->fd = fd;
  g->done = true;
}

/* failed records that an attempt of |d| failed with |err| at |now|: the
 * end of it if the error is final, else a backoff before the next. */
static void failed(dlcp_tcp_dial *d, dialing *g, int err, bool refusal_final,
                   dlcp_tstamp now) {
  g->last = err;
  if (!dlcp_tcp_retryable(err) || (refusal_final && err == ECONNREFUSED)) {
    finish(d, g, -err);
    return;
  }
  /* Refused (not listening yet) or unreachable: back off. */
  g->next = now + g->backoff_ms * DLCP_NS_PER_MS;
  g->backoff_ms =
      g->backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : g->backoff_ms * 2;
}

/* step expires |d|'s old attempts and starts a new one when it is time;
 * returns when it next needs attention (DLCP_TSTAMP_NEVER once done). */
static dlcp_tstamp step(dlcp_tcp_dial *d, dialing *g, bool refusal_final,
                        dlcp_tstamp now) {
  const dlcp_duration life = DLCP_TCP_ATTEMPT_MS * DLCP_NS_PER_MS;
  dlcp_tstamp wake = DLCP_TSTAMP_NEVER;
  for (unsigned k = 0; k < g->n;) {
    if (now - g->started[k] >= life) {
      close(drop(g, k));
      g->last = ETIMEDOUT;
    } else {
      k++;
    }
  }
  if (now >= g->next && g->n < MAX_PENDING) {
    bool pending;
    int fd = start(&d->addr, &pending);
    d->attempts++;
    g->next = now + DLCP_TCP_STAGGER_MS * DLCP_NS_PER_MS;
    if (fd >= 0 && !pending) {
      finish(d, g, fd);
    } else if (fd >= 0) {
      g->fd[g->n] = fd;
      g->started[g->n++] = now;
    } else {
      failed(d, g, -fd, refusal_final, now);
    }
  }
  if (g->done) {
    return DLCP_TSTAMP_NEVER;
  }
  if (g->n < MAX_PENDING) {
    wake = g->next;
  }
  for (unsigned k = 0; k < g->n; k++) {
    if (g->started[k] + life < wake) {
      wake = g->started[k] + life;
    }
  }
  return wake;
}

/* settle handles what poll said of |d|'s attempts, |pfd[0..n)|. */
static void settle(dlcp_tcp_dial *d, dialing *g, const struct pollfd *pfd,
                   size_t n, bool refusal_final, dlcp_tstamp now) {
  for (size_t j = 0; j < n && !g->done; j++) {
    int e = 0;
    socklen_t elen = sizeof(e);
    unsigned k = 0;
    if (pfd[j].revents == 0) {
      continue;
    }
    while (k < g->n && g->fd[k] != pfd[j].fd) {
      k++;
    }
    if (k == g->n) {
      continue; /* not in flight any more */
    }
    if (getsockopt(pfd[j].fd, SOL_SOCKET, SO_ERROR, &e, &elen) != 0) {
      e = errno;
    }
    (void)drop(g, k);
    if (e == 0) {
      finish(d, g, pfd[j].fd);
    } else {
      close(pfd[j].fd);
      failed(d, g, e, refusal_final, now);
    }
  }
}

int dlcp_tcp_connect_all(dlcp_tcp_dial *d, size_t n, bool refusal_final,
                         dlcp_tstamp deadline) {
  dialing *g = calloc(n, sizeof(*g));
  struct pollfd *pfd = calloc(n * MAX_PENDING + 1, sizeof(*pfd));
  size_t *first = calloc(n + 1, sizeof(*first));
  dlcp_tstamp now = dlcp_rt_now();
  if (g == NULL || pfd == NULL || first == NULL) {
    free(g);
    free(pfd);
    free(first);
    return DLCP_ERR_NOMEM;
  }
  for (size_t i = 0; i < n; i++) {
    d[i].fd = -ETIMEDOUT;
    d[i].attempts = 0;
    g[i] = (dialing){.n = 0,
                     .next = now,
                     .backoff_ms = BACKOFF_FIRST_MS,
                     .last = ETIMEDOUT,
                     .done = false};
  }
  for (;;) {
    dlcp_tstamp wake = deadline;
    size_t npfd = 0;
    bool open = false;
    for (size_t i = 0; i < n; i++) {
      first[i] = npfd;
      if (g[i].done) {
        continue;
      }
      if (now >= deadline) {
        finish(&d[i], &g[i], -g[i].last);
        continue;
      }
      dlcp_tstamp w = step(&d[i], &g[i], refusal_final, now);
      wake = w < wake ? w : wake;
      for (unsigned k = 0; k < g[i].n; k++) {
        pfd[npfd++] = (struct pollfd){.fd = g[i].fd[k], .events = POLLOUT};
      }
      open = open || !g[i].done;
    }
    first[n] = npfd;
    if (!open) {
      break;
    }
    if (poll(pfd, (nfds_t)npfd, dlcp_rt_poll_timeout(wake)) < 0 &&
        errno != EINTR) {
      int err = errno;
      for (size_t i = 0; i < n; i++) {
        if (!g[i].done) {
          finish(&d[i], &g[i], -err);
        }
      }
      break;
    }
    now = dlcp_rt_now();
    for (size_t i = 0; i < n; i++) {
      if (!g[i].done) {
        settle(&d[i], &g[i], pfd + first[i], first[i + 1] - first[i],
               refusal_final, now);
      }
    }
  }
  free(g);
  free(pfd);
  free(first);
  return 0;
}

int dlcp_tcp_connect(const dlcp_sockaddr *addr, bool refusal_final,
                     dlcp_tstamp deadline, unsigned *attempts) {
  dlcp_tcp_dial d = {.addr = *addr, .fd = -1, .attempts = 0};
  int rv = dlcp_tcp_connect_all(&d, 1, refusal_final, deadline);
  *attempts = d.attempts;
  return rv != 0 ? -ENOMEM : d.fd;
}
