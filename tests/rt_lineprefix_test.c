/*
 * rt_lineprefix_test.c: line labelling, fed byte chunks by hand and read
 * back from a pipe.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dlcp/dlcp_types.h"
#include "rt/lineprefix.h"

/* drain reads everything currently in the pipe (non-blocking). */
static size_t drain(int fd, char *buf, size_t cap) {
  size_t len = 0;
  ssize_t n;
  while (len < cap - 1 && (n = read(fd, buf + len, cap - 1 - len)) > 0) {
    len += (size_t)n;
  }
  buf[len] = '\0';
  return len;
}

static void test_lines_in_pieces(void **state) {
  dlcp_lineprefix lp;
  int fds[2];
  char out[256];
  (void)state;
  assert_int_equal(pipe2(fds, O_NONBLOCK), 0);
  assert_int_equal(dlcp_lineprefix_init(&lp, fds[1], "[rank 3] "), 0);
  assert_int_equal(dlcp_lineprefix_feed(&lp, "he", 2), 0);
  drain(fds[0], out, sizeof(out));
  assert_string_equal(out, ""); /* nothing until the line is complete */
  assert_int_equal(dlcp_lineprefix_feed(&lp, "llo\nwor", 7), 0);
  drain(fds[0], out, sizeof(out));
  assert_string_equal(out, "[rank 3] hello\n");
  assert_int_equal(dlcp_lineprefix_feed(&lp, "ld\n\nx", 5), 0);
  drain(fds[0], out, sizeof(out));
  assert_string_equal(out, "[rank 3] world\n[rank 3] \n");
  dlcp_lineprefix_finish(&lp);
  drain(fds[0], out, sizeof(out));
  assert_string_equal(out, "[rank 3] x\n");
  dlcp_lineprefix_finish(&lp); /* nothing pending: writes nothing */
  drain(fds[0], out, sizeof(out));
  assert_string_equal(out, "");
  dlcp_lineprefix_free(&lp);
  close(fds[0]);
  close(fds[1]);
}

static void test_overlong_line_split(void **state) {
  dlcp_lineprefix lp;
  int fds[2];
  size_t total = DLCP_LINEPREFIX_MAX_LINE + 10;
  char *data = malloc(total);
  char *out = malloc(2 * total);
  size_t len;
  (void)state;
  assert_non_null(data);
  assert_non_null(out);
  memset(data, 'a', total);
  assert_int_equal(pipe2(fds, O_NONBLOCK), 0);
  /* Make the pipe big enough to hold everything without a reader. */
  (void)fcntl(fds[1], F_SETPIPE_SZ, 1 << 20);
  assert_int_equal(dlcp_lineprefix_init(&lp, fds[1], "P "), 0);
  assert_int_equal(dlcp_lineprefix_feed(&lp, data, total), 0);
  dlcp_lineprefix_finish(&lp);
  len = drain(fds[0], out, 2 * total);
  /* Two labelled lines: the first full-length, the rest after it. */
  assert_int_equal(len, 2 + DLCP_LINEPREFIX_MAX_LINE + 1 + 2 + 10 + 1);
  assert_memory_equal(out, "P a", 3);
  assert_int_equal(out[2 + DLCP_LINEPREFIX_MAX_LINE], '\n');
  assert_memory_equal(out + 3 + DLCP_LINEPREFIX_MAX_LINE, "P aaaaaaaaaa\n", 13);
  dlcp_lineprefix_free(&lp);
  close(fds[0]);
  close(fds[1]);
  free(data);
  free(out);
}

/* A reader that went away: output is dropped, the error remembered. */
static void test_closed_output(void **state) {
  dlcp_lineprefix lp;
  int fds[2];
  (void)state;
  assert_int_equal(pipe2(fds, 0), 0);
  close(fds[0]);
  signal(SIGPIPE, SIG_IGN);
  assert_int_equal(dlcp_lineprefix_init(&lp, fds[1], "x "), 0);
  assert_int_equal(dlcp_lineprefix_feed(&lp, "a\nb\n", 4), 0);
  assert_true(lp.write_error < 0);
  dlcp_lineprefix_free(&lp);
  close(fds[1]);
}

static void test_prefix_too_long(void **state) {
  dlcp_lineprefix lp;
  char prefix[DLCP_LINEPREFIX_MAX_PREFIX + 2];
  (void)state;
  memset(prefix, 'p', sizeof(prefix) - 1);
  prefix[sizeof(prefix) - 1] = '\0';
  assert_int_equal(dlcp_lineprefix_init(&lp, 1, prefix),
                   DLCP_ERR_INVALID_ARGUMENT);
  dlcp_lineprefix_free(&lp);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_lines_in_pieces),
      cmocka_unit_test(test_overlong_line_split),
      cmocka_unit_test(test_closed_output),
      cmocka_unit_test(test_prefix_too_long),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
