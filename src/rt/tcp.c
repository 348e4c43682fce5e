/*
 * tcp.c: control-plane TCP connections that get through a lossy fabric
 * (tcp.h).
 */
#include "rt/tcp.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
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

/* A set of connection attempts in flight. */
typedef struct attempts {
  struct pollfd pfd[MAX_PENDING];
  dlcp_tstamp started[MAX_PENDING];
  nfds_t n;
} attempts;

/* take removes attempt |i| from |at| and returns its descriptor. */
static int take(attempts *at, nfds_t i) {
  int fd = at->pfd[i].fd;
  at->n--;
  at->pfd[i] = at->pfd[at->n];
  at->started[i] = at->started[at->n];
  return fd;
}

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

/* poll_attempts waits until |wake| for an attempt to finish.  Returns the
 * descriptor of one that connected, or -1 with |*err| set to the error
 * of one that failed (0 if none did). */
static int poll_attempts(attempts *at, dlcp_tstamp wake, int *err) {
  *err = 0;
  if (poll(at->pfd, at->n, dlcp_rt_poll_timeout(wake)) < 0) {
    *err = errno == EINTR ? 0 : errno;
    return -1;
  }
  for (nfds_t i = 0; i < at->n;) {
    int e = 0;
    socklen_t elen = sizeof(e);
    if (at->pfd[i].revents == 0) {
      i++;
      continue;
    }
    if (getsockopt(at->pfd[i].fd, SOL_SOCKET, SO_ERROR, &e, &elen) != 0) {
      e = errno;
    }
    if (e == 0) {
      return take(at, i);
    }
    close(take(at, i));
    *err = e;
  }
  return -1;
}

int dlcp_tcp_connect(const dlcp_sockaddr *addr, bool refusal_final,
                     dlcp_tstamp deadline, unsigned *count) {
  attempts at = {.n = 0};
  const dlcp_duration life = DLCP_TCP_ATTEMPT_MS * DLCP_NS_PER_MS;
  dlcp_tstamp next = dlcp_rt_now();
  uint64_t backoff_ms = BACKOFF_FIRST_MS;
  int last = ETIMEDOUT;
  int fd = -1;
  *count = 0;
  for (;;) {
    dlcp_tstamp now = dlcp_rt_now();
    dlcp_tstamp wake = deadline;
    int err = 0;
    for (nfds_t i = 0; i < at.n;) {
      if (now - at.started[i] >= life) {
        close(take(&at, i));
        last = ETIMEDOUT;
      } else {
        i++;
      }
    }
    if (now >= deadline) {
      break;
    }
    if (now >= next && at.n < MAX_PENDING) {
      bool pending;
      int rv = start(addr, &pending);
      ++*count;
      next = now + DLCP_TCP_STAGGER_MS * DLCP_NS_PER_MS;
      if (rv >= 0 && !pending) {
        fd = rv;
        break;
      }
      if (rv >= 0) {
        at.pfd[at.n] = (struct pollfd){.fd = rv, .events = POLLOUT};
        at.started[at.n++] = now;
      } else {
        err = -rv;
      }
    }
    if (err == 0) {
      if (at.n < MAX_PENDING && next < wake) {
        wake = next;
      }
      for (nfds_t i = 0; i < at.n; i++) {
        if (at.started[i] + life < wake) {
          wake = at.started[i] + life;
        }
      }
      fd = poll_attempts(&at, wake, &err);
      if (fd >= 0) {
        break;
      }
    }
    if (err != 0) {
      last = err;
      if (!dlcp_tcp_retryable(err) || (refusal_final && err == ECONNREFUSED)) {
        break;
      }
      /* Refused (not listening yet) or unreachable: back off; the next
       * round's poll sleeps until then, never past the deadline. */
      next = dlcp_rt_now() + backoff_ms * DLCP_NS_PER_MS;
      backoff_ms =
          backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : backoff_ms * 2;
    }
  }
  while (at.n > 0) {
    close(take(&at, 0));
  }
  return fd >= 0 ? fd : -last;
}
