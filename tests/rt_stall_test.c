/*
 * rt_stall_test: a rank frozen with SIGSTOP in the middle of a run of
 * all-reduces, between real processes on loopback.  Every other rank
 * must fail within the operation timeout + 1 s of the job's last progress
 * (the freeze, or an operation that still completed after it), all naming
 * the frozen rank with the same address and the same operation, and exit
 * (dlcp_comm_destroy returns promptly after the failure).  10 runs in a
 * world of 4 (ring) and 10 in a world of 8 (halving-doubling, a tree), the
 * frozen rank moving from run to run (rank 0, which also serves the
 * rendezvous store, included); 5 in a world of 5 running barriers, where
 * every survivor waits on a control note rather than a transfer; 3 each
 * in worlds of 3 (ring), 6 and 7 (halving-doubling).
 *
 * Each rank is a forked child that loops over all-reduces until one
 * fails and then reports the error through shared memory.  The freeze
 * comes once every rank has finished a few operations.
 *
 * Last, the same under dlcp-run (dlcp-bench in a loop, rank 2 frozen):
 * the launcher's flight-recorder report and last line name rank 2.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dlcp/dlcp.h"
#include "rt/clock.h"
#include "rt/net.h"

#define MAX_RANKS 8
#define RUNS 10
#define TIMEOUT_MS 1500u
#define GRACE_MS 1000u /* the issue's "within the timeout + 1 s" */
#define COUNT (64u * 1024u)
#define WARM_OPS 3

typedef struct rank_state {
  volatile int ops;       /* all-reduces completed */
  volatile dlcp_tstamp last_ok; /* when the last one completed */
  volatile int failed;    /* 1 once an all-reduce failed */
  char error[512];
} rank_state;

static uint16_t free_port(void) {
  uint16_t port = 0;
  assert_int_equal(dlcp_net_free_port("127.0.0.1", &port, NULL), 0);
  return port;
}

/* What the ranks run in a loop: all-reduces with an algorithm, or
 * barriers (notes on the control connections, no transfers). */
typedef struct workload {
  bool barrier;
  dlcp_algo algo;
  uint32_t count; /* elements per all-reduce; 0: COUNT */
} workload;

static void run_rank(uint32_t rank, uint32_t world, uint16_t port,
                     workload w, rank_state *st) {
  dlcp_comm_config cfg;
  dlcp_comm *comm = NULL;
  float *buf = malloc(COUNT * sizeof(float));
  char err[256];
  dlcp_comm_config_default(&cfg);
  cfg.rank = rank;
  cfg.world_size = world;
  cfg.master_addr = "127.0.0.1";
  cfg.master_port = port;
  cfg.timeout_ms = TIMEOUT_MS;
  cfg.rdzv_timeout_ms = 20000;
  if (buf == NULL || dlcp_comm_create(&comm, &cfg, err, sizeof(err)) != 0) {
    snprintf(st->error, sizeof(st->error), "join: %s", err);
    st->failed = 1;
    _exit(2);
  }
  for (;;) {
    dlcp_coll_opts opts;
    dlcp_coll_info info;
    dlcp_request *req = NULL;
    int rv;
    for (uint32_t i = 0; i < COUNT; i++) {
      buf[i] = (float)(rank + 1);
    }
    dlcp_coll_opts_default(&opts);
    opts.algo = w.algo;
    rv = w.barrier ? dlcp_barrier(comm, &req)
                   : dlcp_allreduce(comm, buf, buf, w.count ? w.count : COUNT,
                                    DLCP_FLOAT32,
                                    DLCP_SUM, &opts, &req);
    if (rv == 0) {
      rv = dlcp_wait(req, -1, &info);
    }
    if (rv != 0) {
      snprintf(st->error, sizeof(st->error), "%s",
               req != NULL ? info.error : dlcp_strerror(rv));
      __sync_synchronize();
      st->failed = 1;
      dlcp_request_free(req);
      dlcp_comm_destroy(comm); /* must not wait for the frozen rank */
      _exit(1);
    }
    dlcp_request_free(req);
    st->last_ok = dlcp_rt_now();
    __sync_synchronize();
    st->ops++;
  }
}

/* culprit_of extracts "rank V (ADDR)" from an error; false if the error
 * does not name rank |victim|. */
static bool culprit_of(const char *error, uint32_t victim, char *out,
                       size_t len) {
  char want[32];
  const char *p;
  const char *close;
  snprintf(want, sizeof(want), "rank %u (", victim);
  p = strstr(error, want);
  close = p != NULL ? strchr(p, ')') : NULL;
  if (close == NULL) {
    return false;
  }
  snprintf(out, len, "%.*s", (int)(close - p + 1), p);
  return true;
}

/* operation_of extracts the operation that stalled, "stalled in
 * allreduce #N" or "stalled in barrier #N", from an error; false if there
 * is none. */
static bool operation_of(const char *error, char *out, size_t len) {
  const char *p = strstr(error, "stalled in ");
  size_t n = 11;
  if (p == NULL) {
    return false;
  }
  while (p[n] >= 'a' && p[n] <= 'z') {
    n++;
  }
  if (strncmp(p + n, " #", 2) != 0) {
    return false;
  }
  n += 2;
  while (p[n] >= '0' && p[n] <= '9') {
    n++;
  }
  snprintf(out, len, "%.*s", (int)n, p);
  return true;
}

/* The ranks of the run under way, killed when it fails. */
static pid_t run_pids[MAX_RANKS];
static uint32_t run_world;

/* run_failed kills the run's ranks and fails the test with the message
 * first and then what the ranks wrote to stderr (their flight records),
 * which is kept out of the output of runs that pass. */
static void run_failed(FILE *ranks_stderr, const char *fmt, ...) {
  char msg[1024];
  char line[512];
  int lines = 0;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  for (uint32_t k = 0; k < run_world; k++) {
    if (run_pids[k] > 0) { /* 0: already reaped */
      kill(run_pids[k], SIGKILL);
      waitpid(run_pids[k], NULL, 0);
    }
  }
  run_world = 0;
  printf("FAILED: %s\nwhat the ranks wrote to stderr:\n", msg);
  rewind(ranks_stderr);
  while (lines++ < 200 && fgets(line, sizeof(line), ranks_stderr)) {
    fputs(line, stdout);
  }
  fail_msg("%s", msg);
}

static void one_run(uint32_t world, workload w, uint32_t victim, int run) {
  rank_state *st = mmap(NULL, sizeof(rank_state) * MAX_RANKS,
                        PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                        -1, 0);
  uint16_t port = free_port();
  FILE *ranks_stderr = tmpfile();
  pid_t *pids = run_pids;
  dlcp_tstamp exit_at[MAX_RANKS];
  dlcp_tstamp stalled;
  char first_culprit[96] = "";
  char first_op[48] = "";
  dlcp_tstamp deadline;
  dlcp_tstamp frozen;
  uint32_t r;
  assert_true(st != MAP_FAILED);
  assert_non_null(ranks_stderr);
  memset(st, 0, sizeof(rank_state) * MAX_RANKS);
  run_world = 0;
  for (r = 0; r < world; r++) {
    pids[r] = fork();
    assert_true(pids[r] >= 0);
    if (pids[r] == 0) {
      /* A rank that crashes must die, not resume cmocka's test runner
       * through its signal handlers. */
      static const int fatal[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};
      for (size_t k = 0; k < sizeof(fatal) / sizeof(fatal[0]); k++) {
        signal(fatal[k], SIG_DFL);
      }
      dup2(fileno(ranks_stderr), STDERR_FILENO);
      run_rank(r, world, port, w, &st[r]);
    }
    run_world = r + 1;
  }
  /* Every rank has done a few operations: the job runs. */
  deadline = dlcp_rt_deadline_after(30000);
  for (r = 0; r < world; r++) {
    while (st[r].ops < WARM_OPS) {
      if (st[r].failed || dlcp_rt_now() > deadline) {
        run_failed(ranks_stderr, "run %d: rank %u did not get going: %s",
                   run, r, st[r].error);
      }
      usleep(1000);
    }
  }
  assert_int_equal(kill(pids[victim], SIGSTOP), 0);
  frozen = dlcp_rt_now();

  /* Every survivor exits on its own, in time: within the timeout + 1 s
   * of the job's last progress, which is the freeze unless an operation
   * still completed after it (data the frozen rank had written before it
   * stopped, found when a survivor's timer woke it). */
  deadline = frozen + (TIMEOUT_MS + GRACE_MS + 5000) * DLCP_NS_PER_MS;
  for (r = 0; r < world; r++) {
    int status = 0;
    if (r == victim) {
      continue;
    }
    while (waitpid(pids[r], &status, WNOHANG) == 0) {
      if (dlcp_rt_now() > deadline) {
        run_failed(ranks_stderr,
                   "run %d: rank %u still running %u ms after rank %u froze "
                   "(its operation %s: %s)", run, r,
                   TIMEOUT_MS + GRACE_MS + 5000, victim,
                   st[r].failed ? "failed" : "had not failed", st[r].error);
      }
      usleep(2000);
    }
    exit_at[r] = dlcp_rt_now();
    pids[r] = 0;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 1) {
      run_failed(ranks_stderr, "run %d: rank %u ended with status %#x, not "
                 "exit(1) after a failed operation: %s", run, r, status,
                 st[r].error);
    }
  }
  kill(pids[victim], SIGKILL);
  waitpid(pids[victim], NULL, 0);
  run_world = 0;
  stalled = frozen;
  for (r = 0; r < world; r++) {
    if (r != victim && st[r].last_ok > stalled) {
      stalled = st[r].last_ok;
    }
  }

  for (r = 0; r < world; r++) {
    char culprit[96];
    char op[48];
    if (r == victim) {
      continue;
    }
    if (!culprit_of(st[r].error, victim, culprit, sizeof(culprit))) {
      run_failed(ranks_stderr, "run %d: rank %u's error does not name the "
                 "frozen rank %u: %s", run, r, victim, st[r].error);
    }
    if (!operation_of(st[r].error, op, sizeof(op))) {
      run_failed(ranks_stderr, "run %d: rank %u's error does not name the "
                 "operation that stalled: %s", run, r, st[r].error);
    }
    if (first_culprit[0] == '\0') {
      snprintf(first_culprit, sizeof(first_culprit), "%s", culprit);
      snprintf(first_op, sizeof(first_op), "%s", op);
    }
    if (strcmp(culprit, first_culprit) != 0 || strcmp(op, first_op) != 0) {
      run_failed(ranks_stderr, "run %d: survivors disagree: '%s' in '%s' "
                 "against '%s' in '%s'", run, culprit, op, first_culprit,
                 first_op);
    }
    if (exit_at[r] - stalled > (TIMEOUT_MS + GRACE_MS) * DLCP_NS_PER_MS) {
      run_failed(ranks_stderr, "run %d: rank %u exited %llu ms after the "
                 "job's last progress (rank %u froze %llu ms before it; "
                 "limit %u): %s", run, r,
                 (unsigned long long)((exit_at[r] - stalled) /
                                      DLCP_NS_PER_MS),
                 victim,
                 (unsigned long long)((stalled - frozen) / DLCP_NS_PER_MS),
                 TIMEOUT_MS + GRACE_MS, st[r].error);
    }
  }
  printf("run %d: world %u, rank %u frozen: survivors exited after", run,
         world, victim);
  for (r = 0; r < world; r++) {
    if (r != victim) {
      printf(" %llu",
             (unsigned long long)((exit_at[r] - frozen) / DLCP_NS_PER_MS));
    }
  }
  printf(" ms");
  if (stalled > frozen) {
    printf(" (an operation completed %llu ms after it)",
           (unsigned long long)((stalled - frozen) / DLCP_NS_PER_MS));
  }
  printf(", all naming %s in %s\n", first_culprit, first_op);
  fclose(ranks_stderr);
  munmap(st, sizeof(rank_state) * MAX_RANKS);
}

static void test_frozen_rank_world4_ring(void **state) {
  workload w = {.barrier = false, .algo = DLCP_ALGO_RING};
  (void)state;
  for (int run = 0; run < RUNS; run++) {
    one_run(4, w, (uint32_t)(run * 3 + 1) % 4, run);
  }
}

static void test_frozen_rank_world8_tree(void **state) {
  workload w = {.barrier = false, .algo = DLCP_ALGO_HALVING_DOUBLING};
  (void)state;
  for (int run = 0; run < RUNS; run++) {
    one_run(8, w, (uint32_t)(run * 5 + 2) % 8, run);
  }
}

/* The other world sizes the issue names, fewer runs each: 3 (a ring of
 * two survivors), 6 and 7 (halving-doubling folding the ranks beyond a
 * power of two). */
static void test_frozen_rank_worlds_3_6_7(void **state) {
  workload ring = {.barrier = false, .algo = DLCP_ALGO_RING};
  workload tree = {.barrier = false, .algo = DLCP_ALGO_HALVING_DOUBLING};
  (void)state;
  for (int run = 0; run < 3; run++) {
    one_run(3, ring, (uint32_t)run % 3, run);
    one_run(6, tree, (uint32_t)(run * 2 + 1) % 6, run);
    one_run(7, tree, (uint32_t)(run * 3 + 4) % 7, run);
  }
}

/* A rank frozen between transfers: in a barrier every survivor waits on
 * a note, which has no transfer timer; they must not hang. */
static void test_frozen_rank_world5_barrier(void **state) {
  workload w = {.barrier = true, .algo = DLCP_ALGO_AUTO};
  (void)state;
  for (int run = 0; run < RUNS / 2; run++) {
    one_run(5, w, (uint32_t)(run * 2 + 1) % 5, run);
  }
}

/* Recursive doubling on one element: every receive of the operation is
 * posted at once, so a survivor waits on the frozen rank (its first
 * step) and on a survivor (a later step) alike.  It must name the first:
 * following the later one led two survivors to name each other (a cycle)
 * when a testbed host was cut. */
static void test_frozen_rank_world4_rd(void **state) {
  workload w = {.barrier = false, .algo = DLCP_ALGO_RECURSIVE_DOUBLING,
                .count = 1};
  (void)state;
  for (int run = 0; run < RUNS / 2; run++) {
    one_run(4, w, (uint32_t)run % 4, run);
  }
}

/* World 2: no third rank answers the survivor's inquiry, which its
 * barrier starts on its own (a rank cut off during a barrier, as in
 * testbed_cut, is in the same position with its retransmissions
 * settled). */
static void test_frozen_rank_world2_barrier(void **state) {
  workload w = {.barrier = true, .algo = DLCP_ALGO_AUTO};
  (void)state;
  for (int run = 0; run < RUNS / 2; run++) {
    one_run(2, w, (uint32_t)run % 2, run);
  }
}

/* ---- under dlcp-run: the launcher's report names the frozen rank -------- */

static char tool_dir[PATH_MAX - 64];

static void find_tools(void) {
  ssize_t n = readlink("/proc/self/exe", tool_dir, sizeof(tool_dir) - 1);
  char *slash;
  assert_true(n > 0);
  tool_dir[n] = '\0';
  slash = strrchr(tool_dir, '/');
  assert_non_null(slash);
  *slash = '\0';
  strcat(tool_dir, "/../bin");
}

/* rank_pid finds the pid of rank |rank| among the children of |parent|
 * (RANK in its environment). */
static pid_t rank_pid(pid_t parent, uint32_t rank) {
  char path[128];
  char buf[8192];
  char want[32];
  FILE *f;
  pid_t child;
  snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)parent,
           (int)parent);
  f = fopen(path, "r");
  if (f == NULL) {
    return -1;
  }
  snprintf(want, sizeof(want), "RANK=%u", rank);
  while (fscanf(f, "%d", &child) == 1) {
    int fd;
    ssize_t len;
    snprintf(path, sizeof(path), "/proc/%d/environ", (int)child);
    fd = open(path, O_RDONLY);
    if (fd < 0) {
      continue;
    }
    len = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    for (ssize_t i = 0; i < len;) {
      if (strcmp(buf + i, want) == 0) {
        fclose(f);
        return child;
      }
      i += (ssize_t)strlen(buf + i) + 1;
    }
  }
  fclose(f);
  return -1;
}

static void test_dlcp_run_names_the_frozen_rank(void **state) {
  char run[PATH_MAX];
  char bench[PATH_MAX];
  int errpipe[2];
  pid_t launcher;
  pid_t victim = -1;
  char *err = NULL;
  size_t len = 0;
  int status = 0;
  dlcp_tstamp deadline;
  (void)state;
  find_tools();
  snprintf(run, sizeof(run), "%s/dlcp-run", tool_dir);
  snprintf(bench, sizeof(bench), "%s/dlcp-bench", tool_dir);
  assert_int_equal(pipe(errpipe), 0);
  launcher = fork();
  assert_true(launcher >= 0);
  if (launcher == 0) {
    dup2(errpipe[1], STDERR_FILENO);
    int devnull = open("/dev/null", O_WRONLY);
    dup2(devnull, STDOUT_FILENO);
    close(errpipe[0]);
    setenv("DLCP_TIMEOUT_MS", "1500", 1);
    unsetenv("DLCP_FLIGHT_DIR");
    execl(run, run, "-n", "4", "--", bench, "-b", "1M", "-e", "1M", "-n",
          "100000", "-w", "0", "-c", "0", (char *)NULL);
    _exit(127);
  }
  close(errpipe[1]);
  /* Let the job get going, then freeze rank 2. */
  deadline = dlcp_rt_deadline_after(20000);
  while (victim < 0 && dlcp_rt_now() < deadline) {
    usleep(100 * 1000);
    victim = rank_pid(launcher, 2);
  }
  assert_true(victim > 0);
  usleep(1500 * 1000);
  assert_int_equal(kill(victim, SIGSTOP), 0);
  {
    char buf[4096];
    ssize_t n;
    while ((n = read(errpipe[0], buf, sizeof(buf))) > 0) {
      char *nerr = realloc(err, len + (size_t)n + 1);
      assert_non_null(nerr);
      err = nerr;
      memcpy(err + len, buf, (size_t)n);
      len += (size_t)n;
      err[len] = '\0';
    }
  }
  close(errpipe[0]);
  assert_int_equal(waitpid(launcher, &status, 0), launcher);
  assert_true(WIFEXITED(status) && WEXITSTATUS(status) != 0);
  if (err == NULL ||
      strstr(err, "on rank 2, which left no record") == NULL ||
      strstr(err, "every waiting rank was waiting on rank 2") == NULL) {
    fail_msg("dlcp-run's report does not name rank 2:\n%s",
             err ? err : "(nothing)");
  }
  {
    /* Remove the records it kept. */
    const char *kept = strstr(err, "flight records kept in ");
    char dir[256];
    if (kept != NULL && sscanf(kept, "flight records kept in %255s", dir) ==
                            1) {
      for (int r = 0; r < 4; r++) {
        char path[320];
        snprintf(path, sizeof(path), "%s/flight.rank%d.txt", dir, r);
        unlink(path);
      }
      rmdir(dir);
    }
  }
  free(err);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_frozen_rank_world4_ring),
      cmocka_unit_test(test_frozen_rank_world8_tree),
      cmocka_unit_test(test_frozen_rank_world5_barrier),
      cmocka_unit_test(test_frozen_rank_world2_barrier),
      cmocka_unit_test(test_frozen_rank_world4_rd),
      cmocka_unit_test(test_frozen_rank_worlds_3_6_7),
      cmocka_unit_test(test_dlcp_run_names_the_frozen_rank),
  };
  setvbuf(stdout, NULL, _IOLBF, 0);
  /* A hang anywhere becomes a failure before ctest's own limit. */
  alarm(280);
  return cmocka_run_group_tests(tests, NULL, NULL);
}
