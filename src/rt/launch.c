/*
 * launch.c: the local launcher's supervision loop.
 *
 * Model: one thread, one poll() over a signalfd and the 2N output pipes.
 * SIGCHLD, SIGINT, SIGTERM and SIGHUP are blocked and read from the
 * signalfd, so there is no signal handler and no global state, and a
 * signal can never be lost between checking a flag and going to sleep.
 * The loop has three phases:
 *   running      ranks are up; output is copied line by line;
 *   settling     a rank failed: the others get SETTLE_MS to end on their
 *                own (a collective's failure reaches every rank, and each
 *                says why and writes its flight record as it fails);
 *   terminating  they did not, or we were signalled: every rank's process
 *                group got SIGTERM and gets SIGKILL when grace_ms is up;
 *   draining     every rank has been reaped; remaining output is copied
 *                until the pipes close or grace_ms passes (a background
 *                grandchild may hold a pipe open forever).
 * Each rank leads its own process group so that a rank started through a
 * shell is terminated together with the processes the shell started.
 */
#include "rt/launch.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dlcp/dlcp_types.h"
#include "rt/clock.h"
#include "rt/flight.h"
#include "rt/lineprefix.h"
#include "rt/net.h"
#include "rt/proc.h"

/* Environment variables every rank receives, in torchrun's spelling. */
enum {
  ENV_MASTER_ADDR,
  ENV_MASTER_PORT,
  ENV_RANK,
  ENV_LOCAL_RANK,
  ENV_WORLD_SIZE,
  ENV_LOCAL_WORLD_SIZE,
  ENV_GROUP_RANK,
  ENV_ROLE_RANK,
  ENV_ROLE_WORLD_SIZE,
  ENV_FLIGHT_DIR,
  ENV_COUNT
};

static const char *const rank_env_names[ENV_COUNT] = {
    "MASTER_ADDR", "MASTER_PORT", "RANK",
    "LOCAL_RANK",  "WORLD_SIZE",  "LOCAL_WORLD_SIZE",
    "GROUP_RANK",  "ROLE_RANK",   "ROLE_WORLD_SIZE", "DLCP_FLIGHT_DIR"};

/* After a rank failed, how long the others may take to end on their own
 * before SIGTERM.  A SIGTERM that came sooner killed a rank that was
 * writing its flight record, and the report lost the rank everyone waited
 * on (rt_stall_test, dlcp-run naming a frozen rank). */
#define SETTLE_MS 1000u

typedef struct rank_slot {
  dlcp_proc proc;
  dlcp_lineprefix out;
  dlcp_lineprefix err;
  int running; /* started and not yet reaped */
  int wstatus;
} rank_slot;

typedef struct launcher {
  const dlcp_launch_opts *opts;
  dlcp_launch_result *res;
  rank_slot *ranks;
  uint32_t nstarted;
  uint32_t nrunning;
  int sigfd;
  sigset_t oldmask;
  int terminating;     /* term_sig sent to every group */
  int term_sig;        /* SIGTERM, or the signal we were asked to forward */
  int killed;          /* SIGKILL sent to every group */
  dlcp_tstamp kill_at; /* when to escalate to SIGKILL */
  dlcp_tstamp term_at; /* a rank failed: SIGTERM the others then */
  dlcp_tstamp drain_until;
  int cpus[CPU_SETSIZE]; /* with bind_core: the CPUs, in order */
  int ncpus;
  struct pollfd *pfds; /* 1 + 2 * nranks */
  uint32_t *pfd_rank;  /* rank of pfds[i] for i >= 1 */
  /* Where the ranks' flight recorders write (DLCP_FLIGHT_DIR): the
   * caller's if set, else a directory of ours, removed at the end. */
  char flight_dir[256];
  int own_flight_dir;
} launcher;

/* note prints a launcher message on err_fd.  Writing whole lines with one
 * dprintf keeps them from splitting ranks' lines. */
static void note(const launcher *l, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void note(const launcher *l, const char *fmt, ...) {
  char line[DLCP_ERRBUF_MSG_LEN + 64];
  va_list ap;
  int n;
  va_start(ap, fmt);
  n = vsnprintf(line, sizeof(line), fmt, ap);
  va_end(ap);
  if (n < 0) {
    return;
  }
  dprintf(l->opts->err_fd, "dlcp-run: %s\n", line);
}

/* signal_all sends |sig| to the process group of every rank that is
 * still running or whose output is still open (a background child of a
 * rank that already exited). */
static void signal_all(launcher *l, int sig) {
  uint32_t r;
  for (r = 0; r < l->nstarted; r++) {
    rank_slot *s = &l->ranks[r];
    if (s->running || s->proc.out_fd >= 0 || s->proc.err_fd >= 0) {
      (void)dlcp_proc_signal(&s->proc, sig);
    }
  }
}

static void start_terminating(launcher *l, int sig) {
  signal_all(l, sig);
  /* A stopped rank (SIGSTOP, a debugger's breakpoint) acts on nothing but
   * SIGKILL until it is continued: continue it, so it can end cleanly. */
  signal_all(l, SIGCONT);
  if (!l->terminating) {
    l->terminating = 1;
    l->term_sig = sig;
    l->kill_at = dlcp_rt_deadline_after(l->opts->grace_ms);
  }
}

static void kill_all(launcher *l) {
  signal_all(l, SIGKILL);
  l->killed = 1;
}

/* on_rank_exit records how rank |r| ended and reacts to a failure. */
static void on_rank_exit(launcher *l, uint32_t r, int wstatus) {
  rank_slot *s = &l->ranks[r];
  char how[96];
  s->running = 0;
  s->wstatus = wstatus;
  l->nrunning--;
  if (WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0) {
    return;
  }
  /* A rank dying from our own SIGTERM is not a failure of its own.  But
   * it may have started a process after the signal went out (a shell
   * forking its next command), which would keep the output pipe open:
   * signal its group once more. */
  if (l->terminating) {
    (void)dlcp_proc_signal(&s->proc, l->killed ? SIGKILL : l->term_sig);
    return;
  }
  if (l->term_at != DLCP_TSTAMP_NEVER) {
    return; /* failing too, after the first: that one is reported */
  }
  l->res->failed_rank = (int64_t)r;
  l->res->failed_status = wstatus;
  dlcp_proc_status_format(how, sizeof(how), wstatus);
  if (l->nrunning > 0) {
    note(l,
         "rank %" PRIu32 " (pid %ld) %s; terminating the other %" PRIu32
         " running rank%s (SIGTERM in %u ms unless they end first)",
         r, (long)s->proc.pid, how, l->nrunning, l->nrunning == 1 ? "" : "s",
         SETTLE_MS);
  } else {
    note(l, "rank %" PRIu32 " (pid %ld) %s", r, (long)s->proc.pid, how);
  }
  l->term_at = dlcp_rt_deadline_after(SETTLE_MS);
}

/* reap collects every exited child.  The launcher is a child subreaper,
 * so processes a rank left behind are re-parented to it when the rank
 * dies and are collected here too, instead of lingering as zombies. */
static void reap(launcher *l) {
  for (;;) {
    int wstatus;
    uint32_t r;
    pid_t pid = waitpid(-1, &wstatus, WNOHANG);
    if (pid < 0 && errno == EINTR) {
      continue;
    }
    if (pid <= 0) {
      return; /* none exited (0) or no children left (ECHILD) */
    }
    for (r = 0; r < l->nstarted; r++) {
      if (l->ranks[r].running && l->ranks[r].proc.pid == pid) {
        on_rank_exit(l, r, wstatus);
        break;
      }
    }
  }
}

static void on_signals(launcher *l) {
  struct signalfd_siginfo si;
  for (;;) {
    ssize_t n = read(l->sigfd, &si, sizeof(si));
    int sig;
    if (n != (ssize_t)sizeof(si)) {
      return; /* EAGAIN: drained */
    }
    sig = (int)si.ssi_signo;
    if (sig == SIGCHLD) {
      continue; /* reap() runs after every wake-up */
    }
    if (l->res->signal != 0) {
      /* Asked twice: stop waiting politely. */
      note(l, "received %s again; killing the ranks", sigabbrev_np(sig));
      kill_all(l);
      continue;
    }
    l->res->signal = sig;
    note(l, "received SIG%s; forwarding it to %" PRIu32 " running rank%s",
         sigabbrev_np(sig), l->nrunning, l->nrunning == 1 ? "" : "s");
    start_terminating(l, sig);
  }
}

/* drain_fd copies what is available on one output pipe; closes it at EOF.
 * Reads at most a few buffers per wake-up so one chatty rank cannot
 * starve the others. */
static void drain_fd(int *fd, dlcp_lineprefix *lp) {
  char buf[65536];
  int round;
  for (round = 0; round < 4 && *fd >= 0; round++) {
    ssize_t n = read(*fd, buf, sizeof(buf));
    if (n > 0) {
      if (dlcp_lineprefix_feed(lp, buf, (size_t)n) != 0) {
        /* Out of memory: flush what we have rather than lose the stream. */
        dlcp_lineprefix_finish(lp);
      }
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
      return;
    }
    /* EOF or a read error: the stream is over. */
    dlcp_lineprefix_finish(lp);
    close(*fd);
    *fd = -1;
  }
}

/* build_pollfds lists the signalfd and every open pipe; returns the
 * count. */
static nfds_t build_pollfds(launcher *l) {
  nfds_t n = 0;
  uint32_t r;
  l->pfds[n].fd = l->sigfd;
  l->pfds[n].events = POLLIN;
  l->pfds[n].revents = 0;
  n++;
  for (r = 0; r < l->nstarted; r++) {
    int fds[2] = {l->ranks[r].proc.out_fd, l->ranks[r].proc.err_fd};
    int i;
    for (i = 0; i < 2; i++) {
      if (fds[i] >= 0) {
        l->pfds[n].fd = fds[i];
        l->pfds[n].events = POLLIN;
        l->pfds[n].revents = 0;
        l->pfd_rank[n] = r;
        n++;
      }
    }
  }
  return n;
}

static int pipes_open(const launcher *l) {
  uint32_t r;
  for (r = 0; r < l->nstarted; r++) {
    if (l->ranks[r].proc.out_fd >= 0 || l->ranks[r].proc.err_fd >= 0) {
      return 1;
    }
  }
  return 0;
}

static void supervise(launcher *l) {
  for (;;) {
    dlcp_tstamp now = dlcp_rt_now();
    dlcp_tstamp wake = DLCP_TSTAMP_NEVER;
    nfds_t n;
    nfds_t i;

    if (!l->terminating && l->term_at != DLCP_TSTAMP_NEVER &&
        l->nrunning > 0) {
      if (now >= l->term_at) {
        start_terminating(l, SIGTERM);
      } else {
        wake = l->term_at;
      }
    }
    if (l->terminating && !l->killed) {
      if (now >= l->kill_at) {
        if (l->nrunning > 0) {
          note(l,
               "%" PRIu32 " rank%s still running %" PRIu32 " ms after "
               "SIG%s; sending SIGKILL",
               l->nrunning, l->nrunning == 1 ? "" : "s", l->opts->grace_ms,
               sigabbrev_np(l->term_sig));
        } else {
          note(l,
               "processes started by the ranks still hold their output "
               "open %" PRIu32 " ms after SIG%s; sending SIGKILL",
               l->opts->grace_ms, sigabbrev_np(l->term_sig));
        }
        kill_all(l);
      } else {
        wake = l->kill_at;
      }
    }
    if (l->nrunning == 0) {
      if (l->drain_until == DLCP_TSTAMP_NEVER) {
        l->drain_until = now + (dlcp_tstamp)l->opts->grace_ms * DLCP_NS_PER_MS;
      }
      if (!pipes_open(l) || now >= l->drain_until) {
        return;
      }
      if (l->drain_until < wake) {
        wake = l->drain_until;
      }
    }

    n = build_pollfds(l);
    if (poll(l->pfds, n, dlcp_rt_poll_timeout(wake)) < 0 && errno != EINTR) {
      note(l, "poll: %s", strerror(errno));
      return;
    }
    if (l->pfds[0].revents != 0) {
      on_signals(l);
    }
    for (i = 1; i < n; i++) {
      rank_slot *s = &l->ranks[l->pfd_rank[i]];
      if (l->pfds[i].revents == 0) {
        continue;
      }
      if (l->pfds[i].fd == s->proc.out_fd) {
        drain_fd(&s->proc.out_fd, &s->out);
      } else if (l->pfds[i].fd == s->proc.err_fd) {
        drain_fd(&s->proc.err_fd, &s->err);
      }
    }
    reap(l);
  }
}

/* start_rank spawns rank |r| with its environment. */
static int start_rank(launcher *l, uint32_t r, dlcp_errbuf *eb) {
  const dlcp_launch_opts *o = l->opts;
  rank_slot *s = &l->ranks[r];
  char values[ENV_COUNT][24];
  const char *vals[ENV_COUNT];
  char prefix[32];
  dlcp_proc_opts po;
  int i;
  int rv;

  /* cleanup() must see a slot that never started as having no fds. */
  s->proc.pid = -1;
  s->proc.out_fd = -1;
  s->proc.err_fd = -1;
  snprintf(values[ENV_MASTER_PORT], sizeof(values[0]), "%u",
           (unsigned)l->res->master_port);
  snprintf(values[ENV_RANK], sizeof(values[0]), "%" PRIu32, r);
  snprintf(values[ENV_LOCAL_RANK], sizeof(values[0]), "%" PRIu32, r);
  snprintf(values[ENV_WORLD_SIZE], sizeof(values[0]), "%" PRIu32, o->nranks);
  snprintf(values[ENV_LOCAL_WORLD_SIZE], sizeof(values[0]), "%" PRIu32,
           o->nranks);
  snprintf(values[ENV_GROUP_RANK], sizeof(values[0]), "0");
  snprintf(values[ENV_ROLE_RANK], sizeof(values[0]), "%" PRIu32, r);
  snprintf(values[ENV_ROLE_WORLD_SIZE], sizeof(values[0]), "%" PRIu32,
           o->nranks);
  for (i = 0; i < ENV_COUNT; i++) {
    vals[i] = values[i];
  }
  vals[ENV_MASTER_ADDR] = o->master_addr;
  vals[ENV_FLIGHT_DIR] = l->flight_dir;

  snprintf(prefix, sizeof(prefix), "[rank %" PRIu32 "] ", r);
  rv = dlcp_lineprefix_init(&s->out, o->out_fd, prefix);
  if (rv == 0) {
    rv = dlcp_lineprefix_init(&s->err, o->err_fd, prefix);
  }
  if (rv != 0) {
    return dlcp_errbuf_set(eb, rv, "rank %" PRIu32 ": out of memory", r);
  }

  memset(&po, 0, sizeof(po));
  po.argv = o->argv;
  po.env_names = rank_env_names;
  po.env_values = vals;
  po.nenv = ENV_COUNT;
  po.own_process_group = 1;
  po.stdin_null = 1;
  po.die_with_parent = 1;
  po.child_sigmask = &l->oldmask;
  if (l->ncpus > 0) {
    po.pin_cpu = 1;
    po.cpu = l->cpus[r % (uint32_t)l->ncpus];
  }
  rv = dlcp_proc_spawn(&s->proc, &po, eb);
  if (rv != 0) {
    return dlcp_errbuf_prefix(eb, rv, "rank %" PRIu32, r);
  }
  s->running = 1;
  l->nrunning++;
  return 0;
}

/* cleanup kills and reaps whatever still runs and releases everything. */
static void cleanup(launcher *l) {
  uint32_t r;
  if (l->ranks != NULL) {
    for (r = 0; r < l->nstarted; r++) {
      rank_slot *s = &l->ranks[r];
      if (s->running) {
        (void)dlcp_proc_signal(&s->proc, SIGKILL);
        while (waitpid(s->proc.pid, &s->wstatus, 0) < 0 && errno == EINTR) {
        }
        s->running = 0;
      }
      dlcp_lineprefix_finish(&s->out);
      dlcp_lineprefix_finish(&s->err);
      dlcp_proc_close_fds(&s->proc);
      dlcp_lineprefix_free(&s->out);
      dlcp_lineprefix_free(&s->err);
    }
  }
  free(l->ranks);
  free(l->pfds);
  free(l->pfd_rank);
  if (l->sigfd >= 0) {
    close(l->sigfd);
  }
}

/* flight_dir_open picks the directory of the flight records: the
 * caller's DLCP_FLIGHT_DIR, or a fresh one under TMPDIR. */
static int flight_dir_open(launcher *l, dlcp_errbuf *eb) {
  const char *given = getenv("DLCP_FLIGHT_DIR");
  const char *tmp = getenv("TMPDIR");
  if (given != NULL && given[0] != '\0') {
    if (strlen(given) >= sizeof(l->flight_dir)) {
      return dlcp_errbuf_set(eb, DLCP_ERR_CONFIG,
                             "DLCP_FLIGHT_DIR='%s': longer than %zu bytes",
                             given, sizeof(l->flight_dir) - 1);
    }
    snprintf(l->flight_dir, sizeof(l->flight_dir), "%s", given);
    return 0;
  }
  dlcp_fmt(l->flight_dir, sizeof(l->flight_dir), "%s/dlcp-run-XXXXXX",
           tmp != NULL && tmp[0] != '\0' ? tmp : "/tmp");
  if (mkdtemp(l->flight_dir) == NULL) {
    return dlcp_errbuf_set(eb, -errno, "cannot create %s: %s",
                           l->flight_dir, strerror(errno));
  }
  l->own_flight_dir = 1;
  return 0;
}

/* flight_dir_remove removes our own directory and what is in it. */
static void flight_dir_remove(launcher *l) {
  if (!l->own_flight_dir) {
    return;
  }
  for (uint32_t r = 0; r < l->opts->nranks; r++) {
    char path[512];
    dlcp_flight_path(path, sizeof(path), l->flight_dir, r);
    (void)unlink(path);
  }
  (void)rmdir(l->flight_dir);
  l->own_flight_dir = 0;
}

/* flight_report: after a failure, whom the ranks' records say everyone
 * waited for (res->culprit); our own directory is removed afterwards
 * unless it holds records, which stay for a closer look. */
static void flight_report(launcher *l) {
  uint32_t r;
  int any = 0;
  l->res->culprit = -1;
  for (r = 0; r < l->opts->nranks; r++) {
    char path[512];
    dlcp_flight_path(path, sizeof(path), l->flight_dir, r);
    any |= access(path, F_OK) == 0;
  }
  if (any && (l->res->failed_rank >= 0 || l->res->signal != 0)) {
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    uint32_t culprit = DLCP_FLIGHT_NONE;
    if (f != NULL) {
      culprit = dlcp_flight_report(l->flight_dir, l->opts->nranks, f);
      fclose(f);
      (void)!write(l->opts->err_fd, text, len);
      free(text);
    }
    /* The switch is no rank: the report has named it. */
    l->res->culprit = culprit >= l->opts->nranks ? -1 : (int64_t)culprit;
    note(l, "flight records kept in %s", l->flight_dir);
    return;
  }
  flight_dir_remove(l);
}

static int validate(const dlcp_launch_opts *o, dlcp_errbuf *eb) {
  if (o->nranks == 0 || o->nranks > DLCP_LAUNCH_MAX_RANKS) {
    return dlcp_errbuf_set(eb, DLCP_ERR_INVALID_ARGUMENT,
                           "number of ranks %" PRIu32
                           " is out of range: expected 1..%u",
                           o->nranks, DLCP_LAUNCH_MAX_RANKS);
  }
  if (o->argv == NULL || o->argv[0] == NULL || o->argv[0][0] == '\0') {
    return dlcp_errbuf_set(eb, DLCP_ERR_INVALID_ARGUMENT, "no command to run");
  }
  if (o->master_addr == NULL || o->master_addr[0] == '\0') {
    return dlcp_errbuf_set(eb, DLCP_ERR_INVALID_ARGUMENT,
                           "empty master address");
  }
  return 0;
}

/* The CPUs this process may run on, in order.  Ranks spread over them
 * round-robin, so ranks that outnumber the cores share them evenly; left
 * to the scheduler, ranks that poll while they wait were sometimes three
 * to a core (a 4-rank 4 KiB all-reduce on 2 cores took 21 instead of
 * 13 us in about one run in three).  No mask, no binding. */
static void list_cpus(launcher *l) {
  cpu_set_t set;
  l->ncpus = 0;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) {
    return;
  }
  for (size_t c = 0; c < CPU_SETSIZE; c++) {
    if (CPU_ISSET(c, &set)) {
      l->cpus[l->ncpus++] = (int)c;
    }
  }
}

int dlcp_launch_run(const dlcp_launch_opts *opts, dlcp_launch_result *res,
                    dlcp_errbuf *eb) {
  launcher l;
  sigset_t block;
  uint32_t r;
  int rv;

  memset(res, 0, sizeof(*res));
  res->failed_rank = -1;
  res->culprit = -1;
  rv = validate(opts, eb);
  if (rv != 0) {
    return rv;
  }
  memset(&l, 0, sizeof(l));
  l.opts = opts;
  l.res = res;
  l.sigfd = -1;
  l.drain_until = DLCP_TSTAMP_NEVER;
  l.kill_at = DLCP_TSTAMP_NEVER;
  l.term_at = DLCP_TSTAMP_NEVER;
  if (opts->bind_core) {
    list_cpus(&l);
  }

  res->master_port = opts->master_port;
  if (res->master_port == 0) {
    rv = dlcp_net_free_port(opts->master_addr, &res->master_port, eb);
    if (rv != 0) {
      return rv;
    }
  }

  l.ranks = calloc(opts->nranks, sizeof(*l.ranks));
  l.pfds = calloc(1 + 2 * (size_t)opts->nranks, sizeof(*l.pfds));
  l.pfd_rank = calloc(1 + 2 * (size_t)opts->nranks, sizeof(*l.pfd_rank));
  if (l.ranks == NULL || l.pfds == NULL || l.pfd_rank == NULL) {
    cleanup(&l);
    return dlcp_errbuf_set(eb, DLCP_ERR_NOMEM, "out of memory");
  }

  /* Block before the first fork so no SIGCHLD can slip past the
   * signalfd. */
  sigemptyset(&block);
  sigaddset(&block, SIGCHLD);
  sigaddset(&block, SIGINT);
  sigaddset(&block, SIGTERM);
  sigaddset(&block, SIGHUP);
  if (sigprocmask(SIG_BLOCK, &block, &l.oldmask) != 0) {
    rv = -errno;
    cleanup(&l);
    return dlcp_errbuf_set(eb, rv, "sigprocmask: %s", strerror(-rv));
  }
  /* Orphans of a rank come to us to be reaped (see reap()). */
  (void)prctl(PR_SET_CHILD_SUBREAPER, 1);
  l.sigfd = signalfd(-1, &block, SFD_NONBLOCK | SFD_CLOEXEC);
  if (l.sigfd < 0) {
    rv = dlcp_errbuf_set(eb, -errno, "signalfd: %s", strerror(errno));
    goto fail;
  }

  rv = flight_dir_open(&l, eb);
  if (rv != 0) {
    goto fail;
  }
  for (r = 0; r < opts->nranks; r++) {
    rv = start_rank(&l, r, eb);
    if (rv != 0) {
      goto fail;
    }
    l.nstarted++;
  }

  supervise(&l);
  flight_report(&l);

  if (res->signal != 0) {
    res->exit_code = 128 + res->signal;
  } else if (res->failed_rank >= 0) {
    res->exit_code = dlcp_proc_status_code(res->failed_status);
  } else {
    res->exit_code = 0;
  }
  rv = 0;

fail:
  /* start_rank may have set up the line buffers of the rank that failed
   * to start; count it so cleanup releases them. */
  if (rv != 0 && l.nstarted < opts->nranks) {
    l.nstarted++;
  }
  cleanup(&l);
  if (rv != 0) {
    flight_dir_remove(&l); /* the ranks never ran */
  }
  sigprocmask(SIG_SETMASK, &l.oldmask, NULL);
  return rv;
}
