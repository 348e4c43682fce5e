/*
 * proc.h: starting a child process whose standard output and error come
 * back through pipes, with environment overrides, and describing how it
 * ended.  Used by the local launcher (dlcp-run) and by tests.
 */
#ifndef DLCP_RT_PROC_H
#define DLCP_RT_PROC_H

#include <signal.h>
#include <stddef.h>
#include <sys/types.h>

#include "rt/errbuf.h"

typedef struct dlcp_proc_opts {
  /* The command: argv[0] is looked up in PATH; NULL-terminated. */
  char *const *argv;
  /* |nenv| variables NAME=VALUE set in the child on top of the parent's
   * environment (a name already present is replaced, not duplicated). */
  const char *const *env_names;
  const char *const *env_values;
  size_t nenv;
  /* Nonzero: the child leads a new process group, so dlcp_proc_signal()
   * reaches everything it started (a shell's children included) and a
   * terminal's ^C reaches only the parent, which forwards it once. */
  int own_process_group;
  /* Nonzero: the child's standard input is /dev/null rather than the
   * parent's (several ranks cannot share a terminal). */
  int stdin_null;
  /* Nonzero: the kernel kills the child if the parent dies, so a crashed
   * or SIGKILLed launcher leaves no orphaned ranks behind. */
  int die_with_parent;
  /* Signal mask the child starts with; NULL means "nothing blocked".  A
   * parent that blocks signals to read them through signalfd must not let
   * its children inherit that mask. */
  const sigset_t *child_sigmask;
  /* Nonzero: the child runs only on CPU |cpu| (sched_setaffinity before
   * exec); zero: it inherits the parent's affinity. */
  int pin_cpu;
  int cpu;
} dlcp_proc_opts;

typedef struct dlcp_proc {
  pid_t pid;
  pid_t pgid; /* == pid with own_process_group, else 0 */
  int out_fd; /* read end of the child's stdout, non-blocking; -1 closed */
  int err_fd; /* read end of the child's stderr, non-blocking; -1 closed */
} dlcp_proc;

/*
 * dlcp_proc_spawn starts the command of |opts| and fills |p|.  All pipe
 * ends are close-on-exec, so siblings started later do not inherit them
 * (which would keep the pipes from ever reaching end-of-file).  A command
 * that cannot be executed (not found, not executable) is reported here,
 * not as a mysterious exit status 127: the child passes its execvpe errno
 * back through a close-on-exec pipe.
 *
 * Returns 0, or a negative code (-errno) with |eb| naming the command and
 * the reason; on failure no child is left running and no fd is leaked.
 */
int dlcp_proc_spawn(dlcp_proc *p, const dlcp_proc_opts *opts, dlcp_errbuf *eb);

/*
 * dlcp_proc_signal sends |sig| to the child's process group (or the child
 * alone without own_process_group).  Returns 0 or -errno; a group that has
 * already vanished (ESRCH) counts as success.
 */
int dlcp_proc_signal(const dlcp_proc *p, int sig);

/* dlcp_proc_close_fds closes whichever pipe read ends are still open. */
void dlcp_proc_close_fds(dlcp_proc *p);

/*
 * dlcp_proc_status_format describes the waitpid() status |wstatus| as
 * "exited with status 3" or "was killed by signal 9 (Killed)" in |buf| and
 * returns |buf|.
 */
const char *dlcp_proc_status_format(char *buf, size_t buflen, int wstatus);

/*
 * dlcp_proc_status_code maps |wstatus| to a shell-style exit code: the
 * exit status, or 128 + the signal number.
 */
int dlcp_proc_status_code(int wstatus);

#endif /* DLCP_RT_PROC_H */
