/*
 * rt_flight_test.c: the flight recorder: the ring keeps the last
 * DLCP_FLIGHT_OPS operations, the dump says what each did and whom the
 * running one waits on (exact text at a fixed clock), and the report
 * reads every rank's dump back and follows the waits to the rank at the
 * end (a frozen rank without a record, a cycle, disagreeing chains).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rt/flight.h"

#define MS 1000000ull

/* dump_to_string runs dlcp_flight_dump into a memory stream. */
static char *dump_to_string(const dlcp_flight *fr, const char *reason,
                            dlcp_tstamp now) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  assert_non_null(f);
  dlcp_flight_dump(fr, f, reason, now);
  fclose(f);
  return buf;
}

static void test_dump_names_the_wait(void **state) {
  dlcp_flight *fr = dlcp_flight_new(1, 4, "127.0.0.1:5001");
  char *text;
  dlcp_tstamp since = 0;
  (void)state;
  assert_non_null(fr);
  dlcp_flight_begin(fr, 6, "all-reduce", "ring", 4096, 100 * MS);
  dlcp_flight_transfer(fr, 6, 0, true, true, 0, 1024);
  dlcp_flight_transfer(fr, 6, 2, false, true, 0, 1024);
  dlcp_flight_transfer(fr, 6, 0, true, false, 1024, 1024);
  dlcp_flight_transfer(fr, 6, 2, false, false, 1024, 1024);
  dlcp_flight_end(fr, 6, 0, NULL, 130 * MS);
  dlcp_flight_begin(fr, 7, "all-reduce", "ring", 4096, 200 * MS);
  dlcp_flight_transfer(fr, 7, 0, true, true, 0, 1024);
  dlcp_flight_transfer(fr, 7, 2, false, true, 0, 1024);
  dlcp_flight_transfer(fr, 7, 0, true, false, 1024, 1024);
  dlcp_flight_waiting(fr, 7, 2, 210 * MS);
  assert_int_equal(dlcp_flight_blocked_on(fr, &since), 2);
  assert_int_equal(since, 210 * MS);
  {
    const char *kind = NULL, *algo = NULL;
    assert_true(dlcp_flight_lookup(fr, 6, &kind, &algo));
    assert_string_equal(kind, "all-reduce");
    assert_string_equal(algo, "ring");
    assert_false(dlcp_flight_lookup(fr, 6 + DLCP_FLIGHT_OPS, &kind, &algo));
  }
  text = dump_to_string(fr, "stall: no progress within 2000 ms", 2210 * MS);
  assert_string_equal(
      text,
      "dlcp flight recorder: rank 1 of 4 (127.0.0.1:5001): stall: no "
      "progress within 2000 ms\n"
      "waiting: rank 1 on 2 since 2000 ms, op 7\n"
      "  op 7 all-reduce ring 4096 B: running for 2010 ms, 1 of 2 transfers "
      "done, waiting on rank 2 for 2000 ms; rank 0: send 1024/1024, rank 2: "
      "recv 0/1024\n"
      "  op 6 all-reduce ring 4096 B: ok in 30 ms, 2 of 2 transfers done; "
      "rank 0: send 1024/1024, rank 2: recv 1024/1024\n");
  free(text);
  dlcp_flight_end(fr, 7, -216, "rank 2 (127.0.0.1:5002): stalled", 2300 * MS);
  assert_int_equal(dlcp_flight_blocked_on(fr, &since), DLCP_FLIGHT_NONE);
  text = dump_to_string(fr, "failure", 2400 * MS);
  assert_non_null(strstr(text, "  op 7 all-reduce ring 4096 B: failed after "
                               "2100 ms (rank 2 (127.0.0.1:5002): stalled)"));
  assert_null(strstr(text, "waiting:"));
  free(text);
  dlcp_flight_free(fr);
}

/* The ring keeps the last DLCP_FLIGHT_OPS; later updates of an operation
 * already overwritten are ignored; peers beyond DLCP_FLIGHT_PEERS are
 * counted, not listed. */
static void test_ring_and_bounds(void **state) {
  dlcp_flight *fr = dlcp_flight_new(0, 64, "a");
  char *text;
  int lines = 0;
  (void)state;
  for (uint64_t s = 0; s < DLCP_FLIGHT_OPS + 5; s++) {
    dlcp_flight_begin(fr, s, "barrier", "direct", 0, s * MS);
    dlcp_flight_end(fr, s, 0, NULL, s * MS + MS);
  }
  dlcp_flight_transfer(fr, 2, 1, true, true, 0, 10); /* overwritten op */
  dlcp_flight_begin(fr, 100, "all-reduce", "ps", 80, 200 * MS);
  for (uint32_t p = 1; p <= DLCP_FLIGHT_PEERS + 3; p++) {
    dlcp_flight_transfer(fr, 100, p, false, true, 0, 8);
  }
  text = dump_to_string(fr, "SIGUSR1", 300 * MS);
  for (char *c = text; *c; c++) {
    lines += *c == '\n';
  }
  /* header + the newest DLCP_FLIGHT_OPS records, 100 and 85..99's
   * survivors: seq 100 took slot 100 % 16 = 4, i.e. op 20's. */
  assert_int_equal(lines, 1 + DLCP_FLIGHT_OPS);
  assert_non_null(strstr(text, "  op 100 all-reduce ps 80 B: running for "
                               "100 ms, 0 of 11 transfers done; rank 1: "
                               "recv 0/8"));
  assert_non_null(strstr(text, "; 3 transfers with further peers\n"));
  assert_null(strstr(text, "  op 20 "));
  assert_non_null(strstr(text, "  op 19 barrier direct 0 B: ok in 1 ms"));
  assert_null(strstr(text, "  op 4 "));
  free(text);
  dlcp_flight_free(fr);
}

static void test_follow(void **state) {
  const uint32_t N = DLCP_FLIGHT_NONE;
  uint32_t chain[4] = {3, 2, N, 2};  /* 0 -> 3 -> 2, 1 -> 2 */
  uint32_t cycle[3] = {1, 2, 0};
  (void)state;
  assert_int_equal(dlcp_flight_follow(chain, 4, 0), 2);
  assert_int_equal(dlcp_flight_follow(chain, 4, 1), 2);
  assert_int_equal(dlcp_flight_follow(chain, 4, 2), 2);
  assert_int_equal(dlcp_flight_follow(cycle, 3, 0), N);
}

/* write_dump writes rank |r|'s recorder, waiting on |on| (or not). */
static void write_dump(const char *dir, uint32_t r, uint32_t world,
                       uint32_t on) {
  char path[256];
  dlcp_flight *fr = dlcp_flight_new(r, world, "x");
  FILE *f;
  dlcp_flight_path(path, sizeof(path), dir, r);
  f = fopen(path, "w");
  assert_non_null(f);
  dlcp_flight_begin(fr, 9, "all-reduce", "ring", 64, 0);
  if (on != DLCP_FLIGHT_NONE) {
    dlcp_flight_waiting(fr, 9, on, 5 * MS);
  }
  dlcp_flight_dump(fr, f, "stall", 1005 * MS);
  fclose(f);
  dlcp_flight_free(fr);
}

static char *report(const char *dir, uint32_t world, uint32_t *culprit) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  *culprit = dlcp_flight_report(dir, world, f);
  fclose(f);
  return buf;
}

static void clean(const char *dir, uint32_t world) {
  char path[256];
  for (uint32_t r = 0; r < world; r++) {
    dlcp_flight_path(path, sizeof(path), dir, r);
    unlink(path);
  }
}

static void test_report(void **state) {
  char dir[] = "/tmp/dlcp-flight-XXXXXX";
  uint32_t culprit;
  char *text;
  (void)state;
  assert_non_null(mkdtemp(dir));

  /* Rank 2 frozen (no record); 1 and 3 wait on it, 0 waits on 3. */
  write_dump(dir, 0, 4, 3);
  write_dump(dir, 1, 4, 2);
  write_dump(dir, 3, 4, 2);
  text = report(dir, 4, &culprit);
  assert_int_equal(culprit, 2);
  assert_non_null(strstr(text, ": rank 0 waited on 3 for 1000 ms; rank 1 "
                               "waited on 2 for 1000 ms; rank 2 left no "
                               "record; rank 3 waited on 2 for 1000 ms\n"));
  assert_non_null(strstr(text, "every waiting rank waits, directly or "
                               "through others, on rank 2, which left no "
                               "record"));
  free(text);

  /* Rank 2 wrote a record but waits on nobody: it is named all the same. */
  write_dump(dir, 2, 4, DLCP_FLIGHT_NONE);
  text = report(dir, 4, &culprit);
  assert_int_equal(culprit, 2);
  assert_non_null(strstr(text, "rank 2, which was not itself waiting"));
  free(text);

  /* A cycle among the living: no single culprit. */
  write_dump(dir, 2, 4, 1);
  text = report(dir, 4, &culprit);
  assert_int_equal(culprit, DLCP_FLIGHT_NONE);
  assert_non_null(strstr(text, "do not lead to one rank"));
  free(text);

  /* An INA all-reduce: ranks 0 and 3 wait on the aggregation switch,
   * 1 and 2 on rank 3 (its ring part): the switch is named. */
  write_dump(dir, 0, 4, DLCP_FLIGHT_SWITCH);
  write_dump(dir, 1, 4, 3);
  write_dump(dir, 2, 4, 3);
  write_dump(dir, 3, 4, DLCP_FLIGHT_SWITCH);
  text = report(dir, 4, &culprit);
  assert_int_equal(culprit, DLCP_FLIGHT_SWITCH);
  assert_non_null(strstr(text, "rank 0 waited on the aggregation switch for "
                               "1000 ms; rank 1 waited on 3 for 1000 ms"));
  assert_non_null(strstr(text, "through others, on the aggregation switch"));
  free(text);

  /* Nobody waiting. */
  clean(dir, 4);
  text = report(dir, 4, &culprit);
  assert_int_equal(culprit, DLCP_FLIGHT_NONE);
  assert_non_null(strstr(text, "no rank was waiting on another"));
  free(text);
  assert_int_equal(rmdir(dir), 0);
}

/* dlcp_flight_write puts the same dump in the rank's file. */
static void test_write_file(void **state) {
  char dir[] = "/tmp/dlcp-flight-w-XXXXXX";
  char path[256];
  char got[1024] = "";
  dlcp_flight *fr = dlcp_flight_new(3, 4, "h:1");
  char *want;
  FILE *f;
  size_t n;
  (void)state;
  assert_non_null(mkdtemp(dir));
  dlcp_flight_begin(fr, 1, "barrier", "direct", 0, 0);
  dlcp_flight_waiting(fr, 1, 0, 0);
  assert_int_equal(dlcp_flight_write(fr, dir, "SIGUSR1", 7 * MS), 0);
  dlcp_flight_path(path, sizeof(path), dir, 3);
  f = fopen(path, "r");
  assert_non_null(f);
  n = fread(got, 1, sizeof(got) - 1, f);
  got[n] = '\0';
  fclose(f);
  want = dump_to_string(fr, "SIGUSR1", 7 * MS);
  assert_string_equal(got, want);
  free(want);
  assert_int_equal(dlcp_flight_write(fr, "/nonexistent/dir", "x", 0),
                   -ENOENT);
  assert_int_equal(unlink(path), 0);
  assert_int_equal(rmdir(dir), 0);
  dlcp_flight_free(fr);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_write_file),
      cmocka_unit_test(test_dump_names_the_wait),
      cmocka_unit_test(test_ring_and_bounds),
      cmocka_unit_test(test_follow),
      cmocka_unit_test(test_report),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
