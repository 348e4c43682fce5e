/*
 * rt_launch_flight_test.c: the launcher's side of the flight recorder.
 * Ranks get DLCP_FLIGHT_DIR; after a failed run the launcher reads the
 * records they left there and names the rank everyone waited for; a rank
 * that is stopped (SIGSTOP) is continued along with SIGTERM, so it ends
 * without waiting for SIGKILL; the launcher's own directory is removed
 * after a clean run.  Ranks are small shell commands that write records
 * in the dump's format.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rt/clock.h"
#include "rt/launch.h"

/* run launches |n| ranks of "sh -c SCRIPT" and returns their stderr. */
static char *run(uint32_t n, const char *script, uint32_t grace_ms,
                 dlcp_launch_result *res, uint64_t *elapsed_ms) {
  char *argv[] = {"sh", "-c", (char *)(uintptr_t)script, NULL};
  dlcp_launch_opts o;
  dlcp_errbuf eb;
  int out = memfd_create("out", 0);
  int err = memfd_create("err", 0);
  dlcp_tstamp t0 = dlcp_rt_now();
  char *text;
  off_t len;
  assert_true(out >= 0 && err >= 0);
  memset(&o, 0, sizeof(o));
  o.nranks = n;
  o.argv = argv;
  o.master_addr = "127.0.0.1";
  o.grace_ms = grace_ms;
  o.out_fd = out;
  o.err_fd = err;
  assert_int_equal(dlcp_launch_run(&o, res, &eb), 0);
  *elapsed_ms = (dlcp_rt_now() - t0) / DLCP_NS_PER_MS;
  len = lseek(err, 0, SEEK_END);
  text = calloc(1, (size_t)len + 1);
  assert_non_null(text);
  assert_int_equal(pread(err, text, (size_t)len, 0), len);
  close(out);
  close(err);
  return text;
}

/* Rank 2 stops itself; ranks 0 and 3 wait on it directly, rank 1 through
 * rank 0; 0, 1 and 3 write their records (as a communicator does the
 * moment it learns of the stall), then rank 0 fails first. */
static void test_report_names_the_stopped_rank(void **state) {
  static const char script[] =
      "f=\"$DLCP_FLIGHT_DIR/flight.rank$RANK.txt\"\n"
      "case $RANK in\n"
      "  0) on=2 ;; 1) on=0 ;; 3) on=2 ;;\n"
      "  2) kill -STOP $$; sleep 30; exit 0 ;;\n"
      "esac\n"
      "printf 'dlcp flight recorder: rank %s of 4 (x): stall\\n"
      "waiting: rank %s on %s since 1500 ms, op 7\\n' $RANK $RANK $on > $f\n"
      "sleep 0.5\n"
      "[ $RANK = 0 ] || sleep 5\n"
      "exit 1\n";
  dlcp_launch_result res;
  uint64_t ms;
  char dir[64];
  char *err = run(4, script, 15000, &res, &ms);
  const char *kept;
  (void)state;
  assert_true(res.failed_rank == 0 || res.failed_rank == 1 ||
              res.failed_rank == 3);
  assert_int_equal(res.culprit, 2);
  if (strstr(err, "rank 0 waited on 2 for 1500 ms; rank 1 waited on 0 for "
                  "1500 ms; rank 2 left no record; rank 3 waited on 2 for "
                  "1500 ms") == NULL ||
      strstr(err, "on rank 2, which left no record") == NULL) {
    fail_msg("no report naming rank 2:\n%s", err);
  }
  /* SIGCONT went with SIGTERM: the stopped rank did not need SIGKILL. */
  assert_null(strstr(err, "SIGKILL"));
  assert_true(ms < 15000);
  kept = strstr(err, "flight records kept in ");
  assert_non_null(kept);
  assert_int_equal(sscanf(kept, "flight records kept in %63s", dir), 1);
  for (int r = 0; r < 4; r++) {
    char path[128];
    snprintf(path, sizeof(path), "%s/flight.rank%d.txt", dir, r);
    (void)unlink(path);
  }
  assert_int_equal(rmdir(dir), 0);
  free(err);
}

/* A clean run leaves no directory behind. */
static void test_clean_run_leaves_nothing(void **state) {
  dlcp_launch_result res;
  uint64_t ms;
  struct stat st;
  char *err = run(2, "echo \"$DLCP_FLIGHT_DIR\" > /dev/stderr; "
                     "test -d \"$DLCP_FLIGHT_DIR\"", 5000, &res, &ms);
  char dir[128];
  (void)state;
  assert_int_equal(res.exit_code, 0);
  assert_int_equal(res.culprit, -1);
  assert_int_equal(sscanf(err, "[rank %*u] %127s", dir), 1);
  assert_int_not_equal(stat(dir, &st), 0);
  free(err);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_report_names_the_stopped_rank),
      cmocka_unit_test(test_clean_run_leaves_nothing),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
