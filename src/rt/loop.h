/*
 * loop.h: the runtime's event loop: file descriptor readiness on epoll and
 * one-shot timers on a min-heap, driven by one thread (after libuv's
 * uv_run and picoquic's sockloop).
 *
 * One iteration follows STYLE.md section 5: read the clock once (every
 * callback of the iteration sees the same dlcp_loop_now()), dispatch the
 * ready descriptors, fire the timers whose deadline has passed, then sleep
 * in epoll until the earliest deadline, with nanosecond resolution where
 * the kernel offers epoll_pwait2 (pacing needs better than 1 ms).
 *
 * Not thread-safe, except dlcp_loop_stop(), which any thread may call.
 */
#ifndef DLCP_RT_LOOP_H
#define DLCP_RT_LOOP_H

#include <stddef.h>
#include <stdint.h>

#include "dlcp/dlcp_types.h"

typedef struct dlcp_loop dlcp_loop;

/* Readiness interest and results (a subset of epoll's, so they can be
 * passed through unchanged). */
#define DLCP_LOOP_READ 0x001u  /* EPOLLIN */
#define DLCP_LOOP_WRITE 0x004u /* EPOLLOUT */
#define DLCP_LOOP_ERROR 0x008u /* EPOLLERR, reported without asking */
#define DLCP_LOOP_HUP 0x010u   /* EPOLLHUP, reported without asking */

/*
 * dlcp_loop_io_cb is called when |fd| is ready; |events| is a mask of
 * DLCP_LOOP_*.  It may add, modify or remove any descriptor, |fd|
 * included, and arm or cancel timers.
 */
typedef void (*dlcp_loop_io_cb)(dlcp_loop *loop, int fd, uint32_t events,
                                void *user);

typedef struct dlcp_loop_timer dlcp_loop_timer;

/* dlcp_loop_timer_cb is called once when |t| expires; it may re-arm it. */
typedef void (*dlcp_loop_timer_cb)(dlcp_loop *loop, dlcp_loop_timer *t);

/* A one-shot timer, owned and placed by the caller; the loop only links
 * it into its heap while armed. */
struct dlcp_loop_timer {
  dlcp_tstamp deadline; /* valid while armed */
  size_t heap_index;    /* position in the heap; SIZE_MAX when not armed */
  uint64_t seq;         /* arming order: equal deadlines fire FIFO */
  dlcp_loop_timer_cb cb;
  void *user;
};

/* dlcp_loop_new creates a loop.  Returns 0, DLCP_ERR_NOMEM or -errno. */
int dlcp_loop_new(dlcp_loop **ploop);

/* dlcp_loop_del frees |loop| (NULL ok).  Descriptors are not closed:
 * they belong to whoever added them. */
void dlcp_loop_del(dlcp_loop *loop);

/* dlcp_loop_now returns the time read at the start of the current (or
 * last) iteration. */
dlcp_tstamp dlcp_loop_now(const dlcp_loop *loop);

/*
 * dlcp_loop_add_fd watches |fd| for |events| (DLCP_LOOP_READ/WRITE),
 * level-triggered.  Returns 0, DLCP_ERR_DUPLICATE (already watched),
 * DLCP_ERR_INVALID_ARGUMENT, DLCP_ERR_NOMEM or -errno.
 */
int dlcp_loop_add_fd(dlcp_loop *loop, int fd, uint32_t events,
                     dlcp_loop_io_cb cb, void *user);

/* dlcp_loop_mod_fd changes the interest of a watched |fd|. */
int dlcp_loop_mod_fd(dlcp_loop *loop, int fd, uint32_t events);

/*
 * dlcp_loop_del_fd stops watching |fd|; no callback for it runs after
 * this returns, even for events already collected in this iteration.
 * Call it before closing |fd|.  Returns 0 or DLCP_ERR_INVALID_ARGUMENT if
 * |fd| was not watched.
 */
int dlcp_loop_del_fd(dlcp_loop *loop, int fd);

/* dlcp_loop_timer_init prepares |t| (not armed). */
void dlcp_loop_timer_init(dlcp_loop_timer *t, dlcp_loop_timer_cb cb,
                          void *user);

/* dlcp_loop_timer_arm (re)arms |t| to fire at |deadline|; a deadline in
 * the past fires in the next iteration.  Returns 0 or DLCP_ERR_NOMEM. */
int dlcp_loop_timer_arm(dlcp_loop *loop, dlcp_loop_timer *t,
                        dlcp_tstamp deadline);

/* dlcp_loop_timer_cancel disarms |t| (no-op if not armed). */
void dlcp_loop_timer_cancel(dlcp_loop *loop, dlcp_loop_timer *t);

/* dlcp_loop_timer_armed returns nonzero if |t| is armed. */
int dlcp_loop_timer_armed(const dlcp_loop_timer *t);

/*
 * dlcp_loop_run_once runs one iteration, sleeping at most until |until|
 * (DLCP_TSTAMP_NEVER: until an event or timer; 0: do not sleep).
 * Returns 0 or -errno from epoll.
 */
int dlcp_loop_run_once(dlcp_loop *loop, dlcp_tstamp until);

/*
 * dlcp_loop_run iterates until dlcp_loop_stop() is called.  Returns 0
 * after a stop, or -errno if waiting failed.
 */
int dlcp_loop_run(dlcp_loop *loop);

/* dlcp_loop_stop makes dlcp_loop_run return after the current iteration
 * and wakes the loop if it sleeps.  Safe from any thread and from
 * callbacks. */
void dlcp_loop_stop(dlcp_loop *loop);

#endif /* DLCP_RT_LOOP_H */
