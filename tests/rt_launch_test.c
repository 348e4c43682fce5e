/*
 * rt_launch_test.c: dlcp-run end to end.  Runs the built launcher
 * (build/bin/dlcp-run, found next to this test binary's build/tests/) on
 * small shell commands and checks the environment each rank sees, the
 * "[rank R] " labels, failure propagation and signal forwarding.  Every
 * run has a hard time limit, so a launcher that hangs fails the test.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rt/clock.h"
#include "rt/proc.h"

#define RUN_LIMIT_MS 20000u

typedef struct run_result {
  char *out; /* everything the launcher wrote to stdout, NUL-terminated */
  size_t out_len;
  char *err;
  size_t err_len;
  int wstatus;
  uint64_t elapsed_ms;
} run_result;

static char launcher_path[PATH_MAX];

static int find_launcher(void **state) {
  /* Shorter than launcher_path by more than the suffix we append. */
  char self[PATH_MAX - 64];
  ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  char *slash;
  (void)state;
  if (n <= 0) {
    return -1;
  }
  self[n] = '\0';
  slash = strrchr(self, '/');
  if (slash == NULL) {
    return -1;
  }
  *slash = '\0';
  /* ctest runs build/tests/<test>; the tools are in build/bin/. */
  snprintf(launcher_path, sizeof(launcher_path), "%s/../bin/dlcp-run", self);
  if (access(launcher_path, X_OK) != 0) {
    fprintf(stderr, "dlcp-run not found at %s\n", launcher_path);
    return -1;
  }
  return 0;
}

static void append(char **buf, size_t *len, const char *data, size_t n) {
  char *nbuf = realloc(*buf, *len + n + 1);
  assert_non_null(nbuf);
  memcpy(nbuf + *len, data, n);
  *len += n;
  nbuf[*len] = '\0';
  *buf = nbuf;
}

/* count_newlines counts the complete lines in |text|. */
static size_t count_newlines(const char *text) {
  size_t n = 0;
  for (; *text != '\0'; text++) {
    n += *text == '\n';
  }
  return n;
}

/* run_launcher runs dlcp-run with |args| (NULL-terminated, without
 * argv[0]); if |signal_after_lines| > 0 it sends |sig| to the launcher
 * once that many lines have appeared on its stdout (so the ranks are known
 * to be up).  Output is collected until both pipes close. */
static void run_launcher(run_result *res, const char *const *args,
                         size_t signal_after_lines, int sig) {
  char *argv[32];
  dlcp_proc proc;
  dlcp_proc_opts opts;
  dlcp_errbuf eb;
  dlcp_tstamp start = dlcp_rt_now();
  dlcp_tstamp limit = dlcp_rt_deadline_after(RUN_LIMIT_MS);
  int signalled = signal_after_lines == 0;
  size_t i;

  memset(res, 0, sizeof(*res));
  argv[0] = launcher_path;
  for (i = 0; args[i] != NULL; i++) {
    assert_true(i + 2 < sizeof(argv) / sizeof(argv[0]));
    argv[i + 1] = (char *)(uintptr_t)args[i];
  }
  argv[i + 1] = NULL;
  memset(&opts, 0, sizeof(opts));
  opts.argv = argv;
  opts.stdin_null = 1;
  opts.die_with_parent = 1;
  if (dlcp_proc_spawn(&proc, &opts, &eb) != 0) {
    fail_msg("cannot start %s: %s", launcher_path, eb.msg);
  }
  append(&res->out, &res->out_len, "", 0);
  append(&res->err, &res->err_len, "", 0);
  while (proc.out_fd >= 0 || proc.err_fd >= 0) {
    struct pollfd pfd[2];
    dlcp_tstamp wake = limit;
    char buf[4096];
    int k;
    pfd[0].fd = proc.out_fd;
    pfd[0].events = POLLIN;
    pfd[1].fd = proc.err_fd;
    pfd[1].events = POLLIN;
    if (poll(pfd, 2, dlcp_rt_poll_timeout(wake)) < 0 && errno != EINTR) {
      fail_msg("poll: %s", strerror(errno));
    }
    if (dlcp_rt_now() >= limit) {
      kill(proc.pid, SIGKILL);
      waitpid(proc.pid, &res->wstatus, 0);
      fail_msg("dlcp-run did not finish within %u ms; output so far:\n%s%s",
               RUN_LIMIT_MS, res->out, res->err);
    }
    for (k = 0; k < 2; k++) {
      int *fd = k == 0 ? &proc.out_fd : &proc.err_fd;
      ssize_t n;
      if (*fd < 0 || pfd[k].revents == 0) {
        continue;
      }
      n = read(*fd, buf, sizeof(buf));
      if (n > 0) {
        if (k == 0) {
          append(&res->out, &res->out_len, buf, (size_t)n);
        } else {
          append(&res->err, &res->err_len, buf, (size_t)n);
        }
      } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
        close(*fd);
        *fd = -1;
      }
    }
    if (!signalled && count_newlines(res->out) >= signal_after_lines) {
      kill(proc.pid, sig);
      signalled = 1;
    }
  }
  while (waitpid(proc.pid, &res->wstatus, 0) < 0 && errno == EINTR) {
  }
  res->elapsed_ms = (dlcp_rt_now() - start) / DLCP_NS_PER_MS;
}

static void run_result_free(run_result *res) {
  free(res->out);
  free(res->err);
}

static int exit_code(const run_result *res) {
  return WIFEXITED(res->wstatus) ? WEXITSTATUS(res->wstatus) : -1;
}

/* expect_quick fails, showing the output, if the run took |ms| or more. */
static void expect_quick(const run_result *res, uint64_t ms) {
  if (res->elapsed_ms >= ms) {
    fail_msg("dlcp-run took %llu ms (limit %llu); stdout:\n%s\nstderr:\n%s",
             (unsigned long long)res->elapsed_ms, (unsigned long long)ms,
             res->out, res->err);
  }
}

static void expect_contains(const char *haystack, const char *needle) {
  if (strstr(haystack, needle) == NULL) {
    fail_msg("expected \"%s\" in:\n%s", needle, haystack);
  }
}

/* count_lines counts lines of |text| and checks each has the prefix of
 * one of the ranks. */
static size_t check_prefixed_lines(const char *text) {
  size_t lines = 0;
  const char *p = text;
  while (*p != '\0') {
    const char *nl = strchr(p, '\n');
    if (nl == NULL) {
      fail_msg("unterminated last line: %s", p);
    }
    if (strncmp(p, "[rank ", 6) != 0) {
      fail_msg("line without a rank prefix: %.*s", (int)(nl - p), p);
    }
    lines++;
    p = nl + 1;
  }
  return lines;
}

static void test_env_per_rank(void **state) {
  const char *args[] = {
      "-n",
      "3",
      "--",
      "sh",
      "-c",
      "echo \"R=$RANK L=$LOCAL_RANK W=$WORLD_SIZE LW=$LOCAL_WORLD_SIZE "
      "A=$MASTER_ADDR P=$MASTER_PORT\"",
      NULL};
  const char *fixed[] = {
      "-n", "2", "--port", "29123", "sh", "-c", "echo port=$MASTER_PORT", NULL};
  run_result res;
  char want[128];
  char port[16] = "";
  const char *p;
  int r;
  (void)state;
  run_launcher(&res, args, 0, 0);
  assert_int_equal(exit_code(&res), 0);
  assert_int_equal(check_prefixed_lines(res.out), 3);
  /* Every rank got the same, real port. */
  p = strstr(res.out, "P=");
  assert_non_null(p);
  sscanf(p + 2, "%15[0-9]", port);
  assert_true(atoi(port) > 0 && atoi(port) < 65536);
  for (r = 0; r < 3; r++) {
    snprintf(want, sizeof(want),
             "[rank %d] R=%d L=%d W=3 LW=3 A=127.0.0.1 P=%s\n", r, r, r, port);
    expect_contains(res.out, want);
  }
  run_result_free(&res);

  run_launcher(&res, fixed, 0, 0);
  assert_int_equal(exit_code(&res), 0);
  expect_contains(res.out, "[rank 0] port=29123\n");
  expect_contains(res.out, "[rank 1] port=29123\n");
  run_result_free(&res);
}

/* --bind core (the default): rank r on the (r mod m)-th allowed CPU, one
 * CPU each, also with more ranks than CPUs; --bind none: the launcher's
 * whole mask. */
static void test_bind(void **state) {
  const char *bound[] = {"-n", "5", "sh", "-c",
                         "grep Cpus_allowed_list /proc/self/status", NULL};
  const char *free_[] = {"--bind", "none", "-n", "2", "sh", "-c",
                         "grep Cpus_allowed_list /proc/self/status", NULL};
  cpu_set_t set;
  int cpus[CPU_SETSIZE], m = 0;
  char want[96];
  run_result res;
  (void)state;
  assert_int_equal(sched_getaffinity(0, sizeof(set), &set), 0);
  for (size_t c = 0; c < CPU_SETSIZE; c++) {
    if (CPU_ISSET(c, &set)) {
      cpus[m++] = (int)c;
    }
  }
  run_launcher(&res, bound, 0, 0);
  assert_int_equal(exit_code(&res), 0);
  for (int r = 0; r < 5; r++) {
    snprintf(want, sizeof(want), "[rank %d] Cpus_allowed_list:\t%d\n", r,
             cpus[r % m]);
    expect_contains(res.out, want);
  }
  run_result_free(&res);
  /* Unbound, a rank has the launcher's (this test's) mask. */
  char mine[80] = "", line[80];
  FILE *f = fopen("/proc/self/status", "r");
  assert_non_null(f);
  while (fgets(line, sizeof(line), f)) {
    if (strncmp(line, "Cpus_allowed_list:", 18) == 0) {
      snprintf(mine, sizeof(mine), "%s", line);
    }
  }
  fclose(f);
  assert_true(mine[0] != '\0');
  run_launcher(&res, free_, 0, 0);
  assert_int_equal(exit_code(&res), 0);
  snprintf(want, sizeof(want), "[rank 1] %s", mine);
  expect_contains(res.out, want);
  run_result_free(&res);
}

static void test_output_prefixed(void **state) {
  /* A line written in pieces, a last line without newline, stderr. */
  const char *pieces[] = {
      "-n",
      "2",
      "sh",
      "-c",
      "printf a; sleep 0.05; printf 'b\\nc\\n'; echo oops >&2; printf tail",
      NULL};
  /* Two ranks racing long lines: lines must never mix. */
  const char *race[] = {
      "-n",
      "2",
      "sh",
      "-c",
      "i=0; line=$(printf \"%0300d\" 0 | tr 0 $RANK); "
      "while [ $i -lt 200 ]; do echo $line$line$line; i=$((i+1)); done",
      NULL};
  run_result res;
  const char *p;
  size_t lines;
  (void)state;
  run_launcher(&res, pieces, 0, 0);
  assert_int_equal(exit_code(&res), 0);
  assert_int_equal(check_prefixed_lines(res.out), 6);
  expect_contains(res.out, "[rank 0] ab\n");
  expect_contains(res.out, "[rank 1] c\n");
  expect_contains(res.out, "[rank 1] tail\n");
  expect_contains(res.err, "[rank 0] oops\n");
  run_result_free(&res);

  run_launcher(&res, race, 0, 0);
  assert_int_equal(exit_code(&res), 0);
  lines = check_prefixed_lines(res.out);
  assert_int_equal(lines, 400);
  for (p = res.out; *p != '\0'; p = strchr(p, '\n') + 1) {
    char rank = p[6];
    const char *text = p + 9; /* after "[rank R] " */
    size_t k;
    for (k = 0; k < 900; k++) {
      if (text[k] != rank) {
        fail_msg("rank %c's line is mixed: %.60s", rank, p);
      }
    }
    assert_int_equal(text[900], '\n');
  }
  run_result_free(&res);
}

static void test_failing_rank_stops_the_others(void **state) {
  const char *exits[] = {"-n",
                         "3",
                         "sh",
                         "-c",
                         "if [ $RANK = 2 ]; then sleep 0.1; exit 7; fi; "
                         "exec sleep 30",
                         NULL};
  const char *killed[] = {"-n",
                          "2",
                          "sh",
                          "-c",
                          "if [ $RANK = 1 ]; then kill -KILL $$; fi; "
                          "sleep 30",
                          NULL};
  /* The survivor ignores SIGTERM: SIGKILL must follow after the grace.
   * Rank 0 fails only once rank 1 has installed its trap (a marker
   * file), or SIGTERM could beat the trap. */
  char marker[64];
  char script[512];
  const char *stubborn[] = {"-n", "2",  "--grace-ms", "200",
                            "sh", "-c", script,       NULL};
  run_result res;
  (void)state;
  snprintf(marker, sizeof(marker), "/tmp/rt_launch_test.%ld", (long)getpid());
  snprintf(script, sizeof(script),
           "if [ $RANK = 0 ]; then i=0; while [ ! -e %s ] && "
           "[ $i -lt 500 ]; do sleep 0.01; i=$((i+1)); done; exit 1; fi; "
           "trap '' TERM; touch %s; sleep 30",
           marker, marker);
  run_launcher(&res, exits, 0, 0);
  assert_int_equal(exit_code(&res), 7);
  expect_contains(res.err, "rank 2");
  expect_contains(res.err, "exited with status 7");
  expect_quick(&res, 3000);
  run_result_free(&res);

  run_launcher(&res, killed, 0, 0);
  assert_int_equal(exit_code(&res), 128 + SIGKILL);
  expect_contains(res.err, "rank 1");
  expect_contains(res.err, "killed by signal 9");
  expect_quick(&res, 3000);
  run_result_free(&res);

  run_launcher(&res, stubborn, 0, 0);
  assert_int_equal(exit_code(&res), 1);
  expect_contains(res.err, "rank 0");
  expect_contains(res.err, "SIGKILL");
  expect_quick(&res, 8000);
  run_result_free(&res);
  unlink(marker);
}

static void test_signal_forwarded(void **state) {
  /* The sleep is started before "up", so nothing is forked after the
   * signal (a shell forking just then could miss it). */
  const char *args[] = {"-n",
                        "2",
                        "sh",
                        "-c",
                        "sleep 30 & trap 'echo term; exit 3' TERM; "
                        "echo up; wait",
                        NULL};
  run_result res;
  (void)state;
  run_launcher(&res, args, 2, SIGTERM);
  assert_int_equal(exit_code(&res), 128 + SIGTERM);
  expect_contains(res.out, "[rank 0] term\n");
  expect_contains(res.out, "[rank 1] term\n");
  expect_contains(res.err, "SIGTERM");
  expect_quick(&res, 3000);
  run_result_free(&res);
}

static void expect_usage_error(const char *const *args, int code,
                               const char *message) {
  run_result res;
  run_launcher(&res, args, 0, 0);
  assert_int_equal(exit_code(&res), code);
  expect_contains(res.err, message);
  assert_int_equal(res.out_len, 0);
  run_result_free(&res);
}

static void test_bad_arguments(void **state) {
  const char *no_n[] = {"true", NULL};
  const char *zero[] = {"-n", "0", "true", NULL};
  const char *word[] = {"-n", "four", "true", NULL};
  const char *big[] = {"-n", "100000", "true", NULL};
  const char *port[] = {"-n", "2", "--port", "70000", "true", NULL};
  const char *no_cmd[] = {"-n", "2", NULL};
  const char *no_val[] = {"-n", NULL};
  const char *unknown[] = {"-n", "2", "--frobnicate", "true", NULL};
  const char *missing[] = {"-n", "2", "/nonexistent/cmd", NULL};
  const char *bind[] = {"-n", "2", "--bind", "socket", "true", NULL};
  (void)state;
  expect_usage_error(no_n, 2, "missing -n N");
  expect_usage_error(zero, 2, "invalid value '0' for -n");
  expect_usage_error(word, 2, "invalid value 'four' for -n");
  expect_usage_error(big, 2, "expected an integer in 1..1024");
  expect_usage_error(port, 2, "invalid value '70000' for --port");
  expect_usage_error(no_cmd, 2, "missing the command");
  expect_usage_error(no_val, 2, "option -n needs a value");
  expect_usage_error(unknown, 2, "unknown option '--frobnicate'");
  expect_usage_error(missing, 127, "cannot execute '/nonexistent/cmd'");
  expect_usage_error(bind, 2, "invalid value 'socket' for --bind: expected "
                              "core or none");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_env_per_rank),
      cmocka_unit_test(test_bind),
      cmocka_unit_test(test_output_prefixed),
      cmocka_unit_test(test_failing_rank_stops_the_others),
      cmocka_unit_test(test_signal_forwarded),
      cmocka_unit_test(test_bad_arguments),
  };
  alarm(120);
  return cmocka_run_group_tests(tests, find_launcher, NULL);
}
