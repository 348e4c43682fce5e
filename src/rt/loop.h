/*
 * loop.h: the runtime's event loop: file descriptor readiness on epoll
 * (after libuv's uv_run and picoquic's sockloop).  One iteration sleeps in
 * epoll until a descriptor is ready or the caller's deadline passes, with
 * nanosecond resolution where the kernel offers epoll_pwait2 (pacing needs
 * better than 1 ms), then dispatches the ready descriptors.  Timers are
 * the caller's: the communicator keeps its one deadline in a timerfd,
 * which it watches like any descriptor.
 *
 * Not thread-safe: one thread drives a loop at a time.
 */
#ifndef DLCP_RT_LOOP_H
#define DLCP_RT_LOOP_H

#include <stdbool.h>
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
 * included.
 */
typedef void (*dlcp_loop_io_cb)(dlcp_loop *loop, int fd, uint32_t events,
                                void *user);

/* dlcp_loop_new creates a loop.  Returns 0, DLCP_ERR_NOMEM or -errno. */
int dlcp_loop_new(dlcp_loop **ploop);

/* dlcp_loop_del frees |loop| (NULL ok).  Descriptors are not closed:
 * they belong to whoever added them. */
void dlcp_loop_del(dlcp_loop *loop);

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

/*
 * dlcp_loop_run_once runs one iteration, sleeping at most until |until|
 * (DLCP_TSTAMP_NEVER: until an event; 0: do not sleep).
 * Returns 0 or -errno from epoll.
 */
int dlcp_loop_run_once(dlcp_loop *loop, dlcp_tstamp until);

typedef void (*dlcp_loop_wake_cb)(dlcp_loop *loop, void *user);

/*
 * dlcp_loop_set_wake_cb makes |cb| run each time a wait in epoll ends
 * (woken by an event, the deadline, a signal or an error), before that
 * iteration's callbacks: a driver that tracks whether a thread is asleep
 * in the loop learns that it no longer is.  NULL removes it.
 */
void dlcp_loop_set_wake_cb(dlcp_loop *loop, dlcp_loop_wake_cb cb, void *user);

#endif /* DLCP_RT_LOOP_H */
