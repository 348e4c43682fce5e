/*
 * loop.c: descriptor readiness on epoll.
 *
 * Model: a descriptor is watched through a small heap-allocated "watch"
 * whose address is the epoll user data; the loop also indexes watches by
 * fd for mod/del.  Removing a descriptor marks its watch dead and parks it
 * on a graveyard list freed at the end of the iteration, because epoll may
 * already have returned an event that points at it.
 */
#include "rt/loop.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "rt/clock.h"

#define EVENTS_PER_WAIT 64

typedef struct watch {
  int fd;
  int dead;
  dlcp_loop_io_cb cb;
  void *user;
  struct watch *next_dead;
} watch;

struct dlcp_loop {
  int epfd;
  int no_pwait2; /* the kernel lacks epoll_pwait2: ms timeouts only */
  watch **by_fd; /* indexed by fd */
  size_t by_fd_cap;
  watch *graveyard;
  dlcp_loop_wake_cb wake_cb;
  void *wake_user;
};

/* ---- descriptors ----------------------------------------------------- */

static watch *find_watch(const dlcp_loop *loop, int fd) {
  if (fd < 0 || (size_t)fd >= loop->by_fd_cap) {
    return NULL;
  }
  return loop->by_fd[fd];
}

int dlcp_loop_add_fd(dlcp_loop *loop, int fd, uint32_t events,
                     dlcp_loop_io_cb cb, void *user) {
  struct epoll_event ev;
  watch *w;
  if (fd < 0 || cb == NULL) {
    return DLCP_ERR_INVALID_ARGUMENT;
  }
  if (find_watch(loop, fd) != NULL) {
    return DLCP_ERR_DUPLICATE;
  }
  if ((size_t)fd >= loop->by_fd_cap) {
    size_t cap = loop->by_fd_cap != 0 ? loop->by_fd_cap : 64;
    watch **nmap;
    while (cap <= (size_t)fd) {
      cap *= 2;
    }
    nmap = realloc(loop->by_fd, cap * sizeof(*nmap));
    if (nmap == NULL) {
      return DLCP_ERR_NOMEM;
    }
    memset(nmap + loop->by_fd_cap, 0, (cap - loop->by_fd_cap) * sizeof(*nmap));
    loop->by_fd = nmap;
    loop->by_fd_cap = cap;
  }
  w = calloc(1, sizeof(*w));
  if (w == NULL) {
    return DLCP_ERR_NOMEM;
  }
  w->fd = fd;
  w->cb = cb;
  w->user = user;
  memset(&ev, 0, sizeof(ev));
  ev.events = events & (DLCP_LOOP_READ | DLCP_LOOP_WRITE);
  ev.data.ptr = w;
  if (epoll_ctl(loop->epfd, EPOLL_CTL_ADD, fd, &ev) != 0) {
    int rv = -errno;
    free(w);
    return rv;
  }
  loop->by_fd[fd] = w;
  return 0;
}

int dlcp_loop_mod_fd(dlcp_loop *loop, int fd, uint32_t events) {
  struct epoll_event ev;
  watch *w = find_watch(loop, fd);
  if (w == NULL) {
    return DLCP_ERR_INVALID_ARGUMENT;
  }
  memset(&ev, 0, sizeof(ev));
  ev.events = events & (DLCP_LOOP_READ | DLCP_LOOP_WRITE);
  ev.data.ptr = w;
  if (epoll_ctl(loop->epfd, EPOLL_CTL_MOD, fd, &ev) != 0) {
    return -errno;
  }
  return 0;
}

int dlcp_loop_del_fd(dlcp_loop *loop, int fd) {
  watch *w = find_watch(loop, fd);
  if (w == NULL) {
    return DLCP_ERR_INVALID_ARGUMENT;
  }
  /* Fails only if fd is already closed, which removed it from epoll. */
  (void)epoll_ctl(loop->epfd, EPOLL_CTL_DEL, fd, NULL);
  loop->by_fd[fd] = NULL;
  w->dead = 1;
  w->next_dead = loop->graveyard;
  loop->graveyard = w;
  return 0;
}

static void bury(dlcp_loop *loop) {
  while (loop->graveyard != NULL) {
    watch *w = loop->graveyard;
    loop->graveyard = w->next_dead;
    free(w);
  }
}

/* ---- running --------------------------------------------------------- */

/* wait_events sleeps in epoll until |deadline| at most. */
static int wait_events(dlcp_loop *loop, struct epoll_event *events,
                       dlcp_tstamp deadline) {
  int n;
  if (!loop->no_pwait2) {
    struct timespec ts;
    struct timespec *tsp = NULL;
    if (deadline != DLCP_TSTAMP_NEVER) {
      dlcp_tstamp now = dlcp_rt_now();
      dlcp_duration left = deadline > now ? deadline - now : 0;
      ts.tv_sec = (time_t)(left / UINT64_C(1000000000));
      ts.tv_nsec = (long)(left % UINT64_C(1000000000));
      tsp = &ts;
    }
    n = epoll_pwait2(loop->epfd, events, EVENTS_PER_WAIT, tsp, NULL);
    if (n >= 0 || errno != ENOSYS) {
      return n;
    }
    loop->no_pwait2 = 1;
  }
  /* Millisecond fallback, rounded up so a timer never fires early. */
  return epoll_wait(loop->epfd, events, EVENTS_PER_WAIT,
                    dlcp_rt_poll_timeout(deadline));
}

int dlcp_loop_run_once(dlcp_loop *loop, dlcp_tstamp until) {
  struct epoll_event events[EVENTS_PER_WAIT];
  int n = wait_events(loop, events, until);
  if (loop->wake_cb != NULL) {
    loop->wake_cb(loop, loop->wake_user);
  }
  if (n < 0) {
    if (errno != EINTR) {
      return -errno;
    }
    n = 0;
  }
  for (int i = 0; i < n; i++) {
    watch *w = events[i].data.ptr;
    if (!w->dead) {
      w->cb(loop, w->fd, events[i].events, w->user);
    }
  }
  bury(loop);
  return 0;
}

void dlcp_loop_set_wake_cb(dlcp_loop *loop, dlcp_loop_wake_cb cb,
                           void *user) {
  loop->wake_cb = cb;
  loop->wake_user = user;
}

int dlcp_loop_new(dlcp_loop **ploop) {
  dlcp_loop *loop = calloc(1, sizeof(*loop));
  *ploop = NULL;
  if (loop == NULL) {
    return DLCP_ERR_NOMEM;
  }
  loop->epfd = epoll_create1(EPOLL_CLOEXEC);
  if (loop->epfd < 0) {
    int rv = -errno;
    free(loop);
    return rv;
  }
  *ploop = loop;
  return 0;
}

void dlcp_loop_del(dlcp_loop *loop) {
  if (loop == NULL) {
    return;
  }
  for (size_t i = 0; i < loop->by_fd_cap; i++) {
    free(loop->by_fd[i]);
  }
  bury(loop);
  if (loop->epfd >= 0) {
    close(loop->epfd);
  }
  free(loop->by_fd);
  free(loop);
}
