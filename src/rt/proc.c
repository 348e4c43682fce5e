/*
 * proc.c: fork/exec with pipes.  Everything the child needs (argv, the
 * merged environment) is prepared in the parent before fork(), so that the
 * child only makes async-signal-safe calls between fork() and execvpe():
 * that keeps spawning safe even from a multi-threaded process such as a
 * test.  An exec failure is reported through a close-on-exec "status
 * pipe": if exec succeeds the kernel closes it and the parent reads
 * end-of-file; if it fails the child writes its errno there first.
 */
#include "rt/proc.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dlcp/dlcp_types.h"
#include "rt/net.h"

extern char **environ;

/* env_free releases what env_build allocated: the override strings sit at
 * the end of the array, after the inherited entries, from index |first|. */
static void env_free(char **envp, size_t first) {
  size_t i;
  if (envp == NULL) {
    return;
  }
  for (i = first; envp[i] != NULL; i++) {
    free(envp[i]);
  }
  free(envp);
}

/* env_overridden reports whether the inherited "NAME=..." entry |entry| is
 * replaced by one of the overrides. */
static int env_overridden(const char *entry, const dlcp_proc_opts *opts) {
  size_t i;
  for (i = 0; i < opts->nenv; i++) {
    size_t n = strlen(opts->env_names[i]);
    if (strncmp(entry, opts->env_names[i], n) == 0 && entry[n] == '=') {
      return 1;
    }
  }
  return 0;
}

/* env_build returns a NULL-terminated environment: the inherited entries
 * not overridden, then the overrides; |*first| is the index of the first
 * override (the only allocated strings). */
static char **env_build(const dlcp_proc_opts *opts, size_t *first) {
  size_t ninherit = 0;
  size_t i;
  size_t k = 0;
  char **envp;
  while (environ != NULL && environ[ninherit] != NULL) {
    ninherit++;
  }
  envp = calloc(ninherit + opts->nenv + 1, sizeof(*envp));
  if (envp == NULL) {
    return NULL;
  }
  for (i = 0; i < ninherit; i++) {
    if (!env_overridden(environ[i], opts)) {
      envp[k++] = environ[i];
    }
  }
  *first = k;
  for (i = 0; i < opts->nenv; i++) {
    size_t len = strlen(opts->env_names[i]) + strlen(opts->env_values[i]) + 2;
    char *s = malloc(len);
    if (s == NULL) {
      env_free(envp, *first);
      return NULL;
    }
    snprintf(s, len, "%s=%s", opts->env_names[i], opts->env_values[i]);
    envp[k++] = s;
  }
  return envp;
}

/* child_dup moves |fd| onto |target| so that it survives exec. */
static int child_dup(int fd, int target) {
  if (fd == target) {
    /* dup2 onto itself would keep FD_CLOEXEC set. */
    return fcntl(fd, F_SETFD, 0);
  }
  return dup2(fd, target) < 0 ? -1 : 0;
}

/* child_exec runs in the forked child and never returns.  Only
 * async-signal-safe calls are allowed here. */
static void child_exec(const dlcp_proc_opts *opts, char **envp, int out_w,
                       int err_w, int status_w, pid_t parent) {
  sigset_t empty;
  struct sigaction dfl;
  int err;

  if (opts->own_process_group && setpgid(0, 0) != 0) {
    goto fail;
  }
  if (opts->die_with_parent) {
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) {
      goto fail;
    }
    /* The parent may have died between fork() and prctl(). */
    if (getppid() != parent) {
      _exit(127);
    }
  }
  /* SIGPIPE ignored in the launcher must not stay ignored in the rank. */
  memset(&dfl, 0, sizeof(dfl));
  dfl.sa_handler = SIG_DFL;
  sigaction(SIGPIPE, &dfl, NULL);
  if (opts->child_sigmask != NULL) {
    sigprocmask(SIG_SETMASK, opts->child_sigmask, NULL);
  } else {
    sigemptyset(&empty);
    sigprocmask(SIG_SETMASK, &empty, NULL);
  }
  if (opts->stdin_null) {
    int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (devnull < 0 || child_dup(devnull, STDIN_FILENO) != 0) {
      goto fail;
    }
  }
  if (child_dup(out_w, STDOUT_FILENO) != 0 ||
      child_dup(err_w, STDERR_FILENO) != 0) {
    goto fail;
  }
  if (opts->pin_cpu && opts->cpu >= 0) {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET((size_t)opts->cpu, &one);
    if (sched_setaffinity(0, sizeof(one), &one) != 0) {
      goto fail;
    }
  }
  execvpe(opts->argv[0], opts->argv, envp);
fail:
  err = errno;
  /* Best effort: if even this write fails the parent sees status 127. */
  if (write(status_w, &err, sizeof(err)) < 0) {
    _exit(127);
  }
  _exit(127);
}

static void close_if_open(int *fd) {
  if (*fd >= 0) {
    close(*fd);
    *fd = -1;
  }
}

int dlcp_proc_spawn(dlcp_proc *p, const dlcp_proc_opts *opts, dlcp_errbuf *eb) {
  int out_pipe[2] = {-1, -1};
  int err_pipe[2] = {-1, -1};
  int status_pipe[2] = {-1, -1};
  char **envp = NULL;
  size_t env_first = 0;
  pid_t pid;
  pid_t parent = getpid();
  int child_errno = 0;
  ssize_t n;
  int rv;

  p->pid = -1;
  p->pgid = 0;
  p->out_fd = -1;
  p->err_fd = -1;
  if (opts->argv == NULL || opts->argv[0] == NULL || opts->argv[0][0] == 0) {
    return dlcp_errbuf_set(eb, DLCP_ERR_INVALID_ARGUMENT, "empty command");
  }
  envp = env_build(opts, &env_first);
  if (envp == NULL) {
    return dlcp_errbuf_set(eb, DLCP_ERR_NOMEM,
                           "out of memory building the environment");
  }
  if (pipe2(out_pipe, O_CLOEXEC) != 0 || pipe2(err_pipe, O_CLOEXEC) != 0 ||
      pipe2(status_pipe, O_CLOEXEC) != 0) {
    rv = dlcp_errbuf_set(eb, -errno, "pipe: %s", strerror(errno));
    goto fail;
  }
  pid = fork();
  if (pid < 0) {
    rv = dlcp_errbuf_set(eb, -errno, "fork: %s", strerror(errno));
    goto fail;
  }
  if (pid == 0) {
    child_exec(opts, envp, out_pipe[1], err_pipe[1], status_pipe[1], parent);
  }
  /* Also set the group from the parent: whichever of the two runs first,
   * the group exists before anyone signals it. */
  if (opts->own_process_group) {
    setpgid(pid, pid);
    p->pgid = pid;
  }
  close_if_open(&out_pipe[1]);
  close_if_open(&err_pipe[1]);
  close_if_open(&status_pipe[1]);
  env_free(envp, env_first);
  envp = NULL;

  do {
    n = read(status_pipe[0], &child_errno, sizeof(child_errno));
  } while (n < 0 && errno == EINTR);
  close_if_open(&status_pipe[0]);
  if (n == (ssize_t)sizeof(child_errno)) {
    int wstatus;
    while (waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
    }
    rv = dlcp_errbuf_set(eb, -child_errno, "cannot execute '%s': %s",
                         opts->argv[0], strerror(child_errno));
    goto fail;
  }

  /* The launcher polls many pipes; a blocking read would stall them all.
   * F_SETFL cannot fail on a pipe we just created. */
  (void)dlcp_net_set_nonblock(out_pipe[0]);
  (void)dlcp_net_set_nonblock(err_pipe[0]);
  p->pid = pid;
  p->out_fd = out_pipe[0];
  p->err_fd = err_pipe[0];
  return 0;

fail:
  env_free(envp, env_first);
  close_if_open(&out_pipe[0]);
  close_if_open(&out_pipe[1]);
  close_if_open(&err_pipe[0]);
  close_if_open(&err_pipe[1]);
  close_if_open(&status_pipe[0]);
  close_if_open(&status_pipe[1]);
  return rv;
}

int dlcp_proc_signal(const dlcp_proc *p, int sig) {
  pid_t target = p->pgid > 0 ? -p->pgid : p->pid;
  if (p->pid <= 0) {
    return 0;
  }
  if (kill(target, sig) != 0 && errno != ESRCH) {
    return -errno;
  }
  return 0;
}

void dlcp_proc_close_fds(dlcp_proc *p) {
  close_if_open(&p->out_fd);
  close_if_open(&p->err_fd);
}

const char *dlcp_proc_status_format(char *buf, size_t buflen, int wstatus) {
  if (WIFEXITED(wstatus)) {
    snprintf(buf, buflen, "exited with status %d", WEXITSTATUS(wstatus));
  } else if (WIFSIGNALED(wstatus)) {
    int sig = WTERMSIG(wstatus);
    const char *name = sigdescr_np(sig);
    snprintf(buf, buflen, "was killed by signal %d (%s)%s", sig,
             name != NULL ? name : "unknown signal",
             WCOREDUMP(wstatus) ? ", core dumped" : "");
  } else {
    snprintf(buf, buflen, "ended with wait status 0x%x", (unsigned)wstatus);
  }
  return buf;
}

int dlcp_proc_status_code(int wstatus) {
  if (WIFEXITED(wstatus)) {
    return WEXITSTATUS(wstatus);
  }
  if (WIFSIGNALED(wstatus)) {
    return 128 + WTERMSIG(wstatus);
  }
  return 1;
}
