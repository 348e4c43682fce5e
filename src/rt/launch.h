/*
 * launch.h: the supervisor behind dlcp-run: start N local ranks with
 * torchrun's environment, label their output, and stop them all when one
 * fails or the launcher is asked to stop.
 */
#ifndef DLCP_RT_LAUNCH_H
#define DLCP_RT_LAUNCH_H

#include <stdint.h>

#include "rt/errbuf.h"

/* Upper bound on local ranks: each costs a process and two pipes. */
#define DLCP_LAUNCH_MAX_RANKS 1024u

typedef struct dlcp_launch_opts {
  uint32_t nranks;         /* 1..DLCP_LAUNCH_MAX_RANKS */
  char *const *argv;       /* command run by every rank, NULL-terminated */
  const char *master_addr; /* MASTER_ADDR given to the ranks */
  uint16_t master_port;    /* MASTER_PORT; 0 picks a free port */
  /* After SIGTERM, how long ranks get to exit before SIGKILL; also how
   * long output is still drained after the last rank exited, in case a
   * background grandchild holds a pipe open. */
  uint32_t grace_ms;
  /* Nonzero: rank r runs only on the r % m-th of the m CPUs the launcher
   * may run on (mpirun's --bind-to core, kept when ranks outnumber the
   * CPUs); zero: the scheduler places and moves the ranks. */
  int bind_core;
  int out_fd; /* where the ranks' prefixed stdout goes */
  int err_fd; /* where their stderr and the launcher's notes go */
} dlcp_launch_opts;

typedef struct dlcp_launch_result {
  int exit_code;        /* what the launcher should exit with */
  int64_t failed_rank;  /* first rank that failed, -1 if none */
  int failed_status;    /* its waitpid() status */
  int signal;           /* SIGINT/SIGTERM/SIGHUP received, 0 if none */
  int64_t culprit;      /* the rank the flight records say everyone
                           waited for, -1 if none or no records */
  uint16_t master_port; /* the port the ranks were given */
} dlcp_launch_result;

/*
 * dlcp_launch_run starts |opts->nranks| copies of the command, each with
 * MASTER_ADDR, MASTER_PORT, RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE
 * (and torchrun's GROUP_RANK=0, ROLE_RANK, ROLE_WORLD_SIZE) set, stdin from
 * /dev/null, each in its own process group.  Every line a rank writes is
 * copied to out_fd/err_fd prefixed with "[rank R] ".
 *
 * The first rank to exit non-zero or by a signal makes the launcher report
 * it on err_fd and, unless the other ranks end on their own within a
 * second, send SIGTERM (and SIGCONT, for stopped ranks) to their process
 * groups, and SIGKILL after grace_ms.
 *
 * Flight records: every rank gets DLCP_FLIGHT_DIR (the caller's, or a
 * temporary directory the launcher removes when the run succeeds), where
 * the communicator writes its flight recorder on a stall or failure
 * (rt/flight.h).  After a failed run the launcher reads them back, writes
 * the report to err_fd and sets res->culprit.  SIGINT, SIGTERM and SIGHUP received by the
 * launcher are forwarded to every rank's group, with the same escalation.
 *
 * Processes: the caller becomes a child subreaper (PR_SET_CHILD_SUBREAPER)
 * and reaps every child that exits while this runs, orphans of the ranks
 * included.
 *
 * Signals: this function blocks SIGINT, SIGTERM, SIGHUP and SIGCHLD and
 * reads them through a signalfd while it runs, restoring the mask before
 * returning; call it from a single-threaded program (the launcher).
 *
 * Returns 0 when the ranks ran (whatever their outcome, which is in
 * |res|), or a negative code with |eb| filled if they could not be
 * started; ranks already started are then killed and reaped.
 */
int dlcp_launch_run(const dlcp_launch_opts *opts, dlcp_launch_result *res,
                    dlcp_errbuf *eb);

#endif /* DLCP_RT_LAUNCH_H */
