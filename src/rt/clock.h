/*
 * clock.h: the runtime's one clock.  Everything in src/rt measures time on
 * CLOCK_MONOTONIC in nanoseconds (dlcp_tstamp), the same unit the protocol
 * core takes as |now|, so deadlines computed here can be handed to the core
 * unchanged and are immune to wall-clock steps.
 */
#ifndef DLCP_RT_CLOCK_H
#define DLCP_RT_CLOCK_H

#include <stdint.h>
#include <time.h>

#include "dlcp/dlcp_types.h"

#define DLCP_NS_PER_MS UINT64_C(1000000)

/* dlcp_rt_now returns the current CLOCK_MONOTONIC time in nanoseconds. */
static inline dlcp_tstamp dlcp_rt_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (dlcp_tstamp)ts.tv_sec * UINT64_C(1000000000) +
         (dlcp_tstamp)ts.tv_nsec;
}

/* dlcp_rt_deadline_after returns now + |ms| milliseconds, saturating. */
static inline dlcp_tstamp dlcp_rt_deadline_after(uint64_t ms) {
  dlcp_tstamp now = dlcp_rt_now();
  if (ms > (DLCP_TSTAMP_NEVER - now) / DLCP_NS_PER_MS) {
    return DLCP_TSTAMP_NEVER;
  }
  return now + ms * DLCP_NS_PER_MS;
}

/*
 * dlcp_rt_poll_timeout converts the absolute |deadline| into the
 * millisecond timeout poll()/epoll_wait() expect: -1 for
 * DLCP_TSTAMP_NEVER, 0 if it has passed, and otherwise the remaining time
 * rounded up so a sleep never ends just before the deadline.
 */
static inline int dlcp_rt_poll_timeout(dlcp_tstamp deadline) {
  dlcp_tstamp now;
  uint64_t ms;
  if (deadline == DLCP_TSTAMP_NEVER) {
    return -1;
  }
  now = dlcp_rt_now();
  if (deadline <= now) {
    return 0;
  }
  ms = (deadline - now + DLCP_NS_PER_MS - 1) / DLCP_NS_PER_MS;
  return ms > INT32_MAX ? INT32_MAX : (int)ms;
}

/*
 * dlcp_rt_realtime_offset returns CLOCK_REALTIME minus the runtime's clock
 * now, in nanoseconds: what converts the kernel's receive time stamps
 * (wall clock) to the runtime's clock (dlcp_rt_from_realtime).  One read
 * serves a batch of datagrams.
 */
static inline int64_t dlcp_rt_realtime_offset(void) {
  struct timespec real;
  clock_gettime(CLOCK_REALTIME, &real);
  return (int64_t)real.tv_sec * 1000000000 + (int64_t)real.tv_nsec -
         (int64_t)dlcp_rt_now();
}

/* dlcp_rt_from_realtime converts the CLOCK_REALTIME time stamp |ts| with
 * |offset| (dlcp_rt_realtime_offset); 0 if it would precede the runtime
 * clock's origin. */
static inline dlcp_tstamp dlcp_rt_from_realtime(const struct timespec *ts,
                                                int64_t offset) {
  int64_t t = (int64_t)ts->tv_sec * 1000000000 + (int64_t)ts->tv_nsec - offset;
  return t > 0 ? (dlcp_tstamp)t : 0;
}

#endif /* DLCP_RT_CLOCK_H */
