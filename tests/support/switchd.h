/*
 * switchd.h: runs the built dlcp-switch daemon for a test (it lives in
 * build/bin/, next to the test's build/tests/): start it on a free
 * loopback port, stop it with SIGTERM and collect its counters.
 */
#ifndef DLCP_TEST_SWITCHD_H
#define DLCP_TEST_SWITCHD_H

#include <stdint.h>
#include <sys/types.h>

typedef struct switchd {
  pid_t pid;
  int err_fd; /* its stderr */
  uint16_t port;
} switchd;

/* Starts dlcp-switch --bind 127.0.0.1 --port 0 with the NULL-terminated
 * extra arguments |args| and waits (10 s at most) for its "listening"
 * line.  Returns 0, or -1 with a message on stderr. */
int switchd_start(switchd *d, const char *const *args);

/* The same bound to address |bind| (e.g. "::1"). */
int switchd_start_at(switchd *d, const char *bind, const char *const *args);

/* Sends SIGTERM and waits for the exit.  Returns its stderr (a static
 * buffer, valid until the next call), or NULL if it did not exit 0 (the
 * output is printed then). */
const char *switchd_stop(switchd *d);

/* The counter |name| of the daemon's "exit:" line in |err|, or
 * UINT64_MAX if absent. */
uint64_t switchd_stat(const char *err, const char *name);

#endif /* DLCP_TEST_SWITCHD_H */
