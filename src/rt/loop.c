/*
 * loop.c: epoll + timer heap.
 *
 * Model: a descriptor is watched through a small heap-allocated "watch"
 * whose address is the epoll user data; the loop also indexes watches by
 * fd for mod/del.  Removing a descriptor marks its watch dead and parks it
 * on a graveyard list freed at the end of the iteration, because epoll may
 * already have returned an event that points at it.  Timers are
 * caller-owned structs in a binary min-heap ordered by (deadline, arming
 * sequence); a timer armed or re-armed while timers are firing waits for
 * the next iteration, so a callback re-arming "now" cannot spin the loop.
 * An eventfd, registered with NULL user data, lets another thread wake the
 * loop for dlcp_loop_stop().
 */
#include "rt/loop.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
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
  int wakefd;
  atomic_int stop;
  int no_pwait2; /* the kernel lacks epoll_pwait2: ms timeouts only */
  dlcp_tstamp now;
  watch **by_fd; /* indexed by fd */
  size_t by_fd_cap;
  watch *graveyard;
  dlcp_loop_timer **heap;
  size_t nheap;
  size_t heap_cap;
  uint64_t timer_seq;
};

/* ---- timers ---------------------------------------------------------- */

static int timer_before(const dlcp_loop_timer *a, const dlcp_loop_timer *b) {
  return a->deadline < b->deadline ||
         (a->deadline == b->deadline && a->seq < b->seq);
}

static void heap_place(dlcp_loop *loop, size_t i, dlcp_loop_timer *t) {
  loop->heap[i] = t;
  t->heap_index = i;
}

static void sift_up(dlcp_loop *loop, size_t i) {
  dlcp_loop_timer *t = loop->heap[i];
  while (i > 0) {
    size_t parent = (i - 1) / 2;
    if (!timer_before(t, loop->heap[parent])) {
      break;
    }
    heap_place(loop, i, loop->heap[parent]);
    i = parent;
  }
  heap_place(loop, i, t);
}

static void sift_down(dlcp_loop *loop, size_t i) {
  dlcp_loop_timer *t = loop->heap[i];
  for (;;) {
    size_t child = 2 * i + 1;
    if (child >= loop->nheap) {
      break;
    }
    if (child + 1 < loop->nheap &&
        timer_before(loop->heap[child + 1], loop->heap[child])) {
      child++;
    }
    if (!timer_before(loop->heap[child], t)) {
      break;
    }
    heap_place(loop, i, loop->heap[child]);
    i = child;
  }
  heap_place(loop, i, t);
}

void dlcp_loop_timer_init(dlcp_loop_timer *t, dlcp_loop_timer_cb cb,
                          void *user) {
  memset(t, 0, sizeof(*t));
  t->heap_index = SIZE_MAX;
  t->cb = cb;
  t->user = user;
}

int dlcp_loop_timer_armed(const dlcp_loop_timer *t) {
  return t->heap_index != SIZE_MAX;
}

void dlcp_loop_timer_cancel(dlcp_loop *loop, dlcp_loop_timer *t) {
  size_t i = t->heap_index;
  dlcp_loop_timer *last;
  if (i == SIZE_MAX) {
    return;
  }
  t->heap_index = SIZE_MAX;
  last = loop->heap[--loop->nheap];
  if (i == loop->nheap) {
    return; /* it was the last element */
  }
  heap_place(loop, i, last);
  /* The moved element may belong above or below its new slot. */
  sift_up(loop, i);
  sift_down(loop, last->heap_index);
}

int dlcp_loop_timer_arm(dlcp_loop *loop, dlcp_loop_timer *t,
                        dlcp_tstamp deadline) {
  dlcp_loop_timer_cancel(loop, t);
  if (loop->nheap == loop->heap_cap) {
    size_t cap = loop->heap_cap != 0 ? loop->heap_cap * 2 : 16;
    dlcp_loop_timer **nheap = realloc(loop->heap, cap * sizeof(*nheap));
    if (nheap == NULL) {
      return DLCP_ERR_NOMEM;
    }
    loop->heap = nheap;
    loop->heap_cap = cap;
  }
  t->deadline = deadline;
  t->seq = loop->timer_seq++;
  heap_place(loop, loop->nheap++, t);
  sift_up(loop, t->heap_index);
  return 0;
}

/* fire_timers runs every timer due at loop->now that was armed before
 * this call. */
static void fire_timers(dlcp_loop *loop) {
  uint64_t armed_before = loop->timer_seq;
  while (loop->nheap > 0) {
    dlcp_loop_timer *t = loop->heap[0];
    if (t->deadline > loop->now || t->seq >= armed_before) {
      break;
    }
    dlcp_loop_timer_cancel(loop, t);
    t->cb(loop, t);
  }
}

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
  dlcp_tstamp deadline = until;
  int n;
  int i;

  if (loop->nheap > 0 && loop->heap[0]->deadline < deadline) {
    deadline = loop->heap[0]->deadline;
  }
  if (atomic_load(&loop->stop)) {
    deadline = 0;
  }
  n = wait_events(loop, events, deadline);
  if (n < 0) {
    if (errno != EINTR) {
      return -errno;
    }
    n = 0;
  }
  /* One clock read per iteration: every callback sees the same now. */
  loop->now = dlcp_rt_now();
  for (i = 0; i < n; i++) {
    watch *w = events[i].data.ptr;
    if (w == NULL) {
      uint64_t v;
      (void)!read(loop->wakefd, &v, sizeof(v));
      continue;
    }
    if (!w->dead) {
      w->cb(loop, w->fd, events[i].events, w->user);
    }
  }
  fire_timers(loop);
  bury(loop);
  return 0;
}

int dlcp_loop_run(dlcp_loop *loop) {
  while (!atomic_load(&loop->stop)) {
    int rv = dlcp_loop_run_once(loop, DLCP_TSTAMP_NEVER);
    if (rv != 0) {
      return rv;
    }
  }
  atomic_store(&loop->stop, 0);
  return 0;
}

void dlcp_loop_stop(dlcp_loop *loop) {
  uint64_t one = 1;
  atomic_store(&loop->stop, 1);
  (void)!write(loop->wakefd, &one, sizeof(one));
}

dlcp_tstamp dlcp_loop_now(const dlcp_loop *loop) {
  return loop->now;
}

int dlcp_loop_new(dlcp_loop **ploop) {
  struct epoll_event ev;
  dlcp_loop *loop = calloc(1, sizeof(*loop));
  int rv;
  *ploop = NULL;
  if (loop == NULL) {
    return DLCP_ERR_NOMEM;
  }
  loop->wakefd = -1;
  atomic_init(&loop->stop, 0);
  loop->now = dlcp_rt_now();
  loop->epfd = epoll_create1(EPOLL_CLOEXEC);
  if (loop->epfd < 0) {
    rv = -errno;
    free(loop);
    return rv;
  }
  loop->wakefd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (loop->wakefd < 0) {
    rv = -errno;
    dlcp_loop_del(loop);
    return rv;
  }
  memset(&ev, 0, sizeof(ev));
  ev.events = EPOLLIN;
  ev.data.ptr = NULL;
  if (epoll_ctl(loop->epfd, EPOLL_CTL_ADD, loop->wakefd, &ev) != 0) {
    rv = -errno;
    dlcp_loop_del(loop);
    return rv;
  }
  *ploop = loop;
  return 0;
}

void dlcp_loop_del(dlcp_loop *loop) {
  size_t i;
  if (loop == NULL) {
    return;
  }
  for (i = 0; i < loop->by_fd_cap; i++) {
    free(loop->by_fd[i]);
  }
  for (i = 0; i < loop->nheap; i++) {
    loop->heap[i]->heap_index = SIZE_MAX;
  }
  bury(loop);
  if (loop->wakefd >= 0) {
    close(loop->wakefd);
  }
  if (loop->epfd >= 0) {
    close(loop->epfd);
  }
  free(loop->by_fd);
  free(loop->heap);
  free(loop);
}
