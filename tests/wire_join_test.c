/*
 * wire_join_test: the byte layouts of the rendezvous messages, the mesh
 * hello and the loss agreement's range list (wire/rdzv_wire.h,
 * wire/ranges.h), byte for byte, and their checks.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "wire/ranges.h"
#include "wire/rdzv_wire.h"
#include "wire/wire.h"

static void test_rdzv_request_layout(void **state) {
  (void)state;
  uint8_t b[DLCP_RDZV_HDR_LEN];
  dlcp_rdzv_put_request(b, DLCP_RDZV_WAIT, 0x0102, 0x03040506);
  const uint8_t want[DLCP_RDZV_HDR_LEN] = {0x5A, 0xD1, 4,    4,    0x02, 0x01,
                                           0,    0,    0x06, 0x05, 0x04, 0x03};
  assert_memory_equal(b, want, sizeof(want));
  dlcp_rdzv_request_hdr h;
  dlcp_rdzv_get_request(b, &h);
  assert_int_equal(h.magic, DLCP_RDZV_MAGIC);
  assert_int_equal(h.version, DLCP_RDZV_VERSION);
  assert_int_equal(h.op, DLCP_RDZV_WAIT);
  assert_int_equal(h.key_len, 0x0102);
  assert_int_equal(h.reserved, 0);
  assert_int_equal(h.value_len, 0x03040506);
}

static void test_rdzv_response_checks(void **state) {
  (void)state;
  uint8_t b[DLCP_RDZV_HDR_LEN];
  dlcp_rdzv_status st;
  uint32_t len;
  dlcp_rdzv_put_response(b, DLCP_RDZV_NOT_FOUND, 7);
  const uint8_t want[DLCP_RDZV_HDR_LEN] = {0x5A, 0xD1, 4, 1, 0, 0,
                                           0,    0,    7, 0, 0, 0};
  assert_memory_equal(b, want, sizeof(want));
  assert_int_equal(dlcp_rdzv_get_response(b, &st, &len), 0);
  assert_int_equal(st, DLCP_RDZV_NOT_FOUND);
  assert_int_equal(len, 7);
  /* The longest answer is a GATHER of one value of the longest. */
  dlcp_rdzv_put_response(b, DLCP_RDZV_OK, DLCP_RDZV_MAX_VALUE + 8);
  assert_int_equal(dlcp_rdzv_get_response(b, &st, &len), 0);
  assert_int_equal(len, DLCP_RDZV_MAX_VALUE + 8);
  dlcp_rdzv_put_response(b, DLCP_RDZV_OK, DLCP_RDZV_MAX_ANSWER + 1);
  assert_int_equal(dlcp_rdzv_get_response(b, &st, &len), DLCP_ERR_BAD_MAGIC);
  dlcp_rdzv_put_response(b, DLCP_RDZV_OK, 0);
  b[3] = DLCP_RDZV_REJECTED + 1;
  assert_int_equal(dlcp_rdzv_get_response(b, &st, &len), DLCP_ERR_BAD_MAGIC);
  dlcp_rdzv_put_response(b, DLCP_RDZV_OK, 0);
  b[2] = DLCP_RDZV_VERSION + 1;
  assert_int_equal(dlcp_rdzv_get_response(b, &st, &len), DLCP_ERR_BAD_MAGIC);
  dlcp_rdzv_put_response(b, DLCP_RDZV_OK, 0);
  b[0] ^= 1;
  assert_int_equal(dlcp_rdzv_get_response(b, &st, &len), DLCP_ERR_BAD_MAGIC);
}

static void test_rdzv_values(void **state) {
  (void)state;
  uint8_t b[DLCP_RDZV_HELLO_LEN];
  const dlcp_rdzv_hello h = {.rank = 3,
                             .world = 8,
                             .job = 0x01020304u,
                             .incarnation = 0x1112131415161718u};
  dlcp_rdzv_hello got;
  dlcp_rdzv_put_hello(b, &h);
  const uint8_t want[DLCP_RDZV_HELLO_LEN] = {
      3, 0, 0,    0,    8,    0,    0,    0,    4,    3,
      2, 1, 0x18, 0x17, 0x16, 0x15, 0x14, 0x13, 0x12, 0x11};
  assert_memory_equal(b, want, sizeof(want));
  dlcp_rdzv_get_hello(b, &got);
  assert_int_equal(got.rank, 3);
  assert_int_equal(got.world, 8);
  assert_int_equal(got.job, 0x01020304u);
  assert_true(got.incarnation == h.incarnation);
  uint8_t w[DLCP_RDZV_WAIT_LEN];
  dlcp_rdzv_put_wait(w, UINT32_MAX);
  assert_int_equal(dlcp_rdzv_get_wait(w), UINT32_MAX);
}

static void test_rdzv_gather(void **state) {
  (void)state;
  uint8_t b[DLCP_RDZV_GATHER_LEN];
  const dlcp_rdzv_gather g = {.timeout_ms = 1000, .first = 2, .count = 0x0102};
  dlcp_rdzv_gather got;
  dlcp_rdzv_put_gather(b, &g);
  const uint8_t want[DLCP_RDZV_GATHER_LEN] = {0xE8, 3, 0, 0, 2, 0,
                                              0,    0, 2, 1, 0, 0};
  assert_memory_equal(b, want, sizeof(want));
  dlcp_rdzv_get_gather(b, &got);
  assert_int_equal(got.timeout_ms, 1000);
  assert_int_equal(got.first, 2);
  assert_int_equal(got.count, 0x0102);
}

/* An answer of two values, "ab" and "", and what is wrong with the ways
 * it can be cut or padded. */
static void test_rdzv_gathered(void **state) {
  (void)state;
  const uint8_t answer[] = {2, 0, 0, 0, 2, 0, 0, 0, 'a', 'b', 0, 0, 0, 0};
  uint8_t padded[sizeof(answer) + 1];
  dlcp_rdzv_gathered g;
  const uint8_t *v = NULL;
  uint32_t len = 9;
  assert_int_equal(dlcp_rdzv_gathered_open(&g, answer, sizeof(answer)), 0);
  assert_int_equal(dlcp_rdzv_gathered_next(&g, &v, &len), 1);
  assert_int_equal(len, 2);
  assert_memory_equal(v, "ab", 2);
  assert_int_equal(dlcp_rdzv_gathered_next(&g, &v, &len), 1);
  assert_int_equal(len, 0);
  assert_int_equal(dlcp_rdzv_gathered_next(&g, &v, &len), 0);
  /* Every cut short of the whole: an entry runs past the end. */
  for (size_t cut = 4; cut < sizeof(answer); cut++) {
    int rv;
    assert_int_equal(dlcp_rdzv_gathered_open(&g, answer, cut), 0);
    while ((rv = dlcp_rdzv_gathered_next(&g, &v, &len)) == 1) {
    }
    assert_int_equal(rv, DLCP_ERR_BAD_LENGTH);
  }
  /* A byte after the last value. */
  memcpy(padded, answer, sizeof(answer));
  padded[sizeof(answer)] = 0;
  assert_int_equal(dlcp_rdzv_gathered_open(&g, padded, sizeof(padded)), 0);
  assert_int_equal(dlcp_rdzv_gathered_next(&g, &v, &len), 1);
  assert_int_equal(dlcp_rdzv_gathered_next(&g, &v, &len), 1);
  assert_int_equal(dlcp_rdzv_gathered_next(&g, &v, &len), DLCP_ERR_BAD_LENGTH);
  /* No count, or a count of none. */
  assert_int_equal(dlcp_rdzv_gathered_open(&g, answer, 3), DLCP_ERR_BAD_LENGTH);
  const uint8_t none[] = {0, 0, 0, 0};
  assert_int_equal(dlcp_rdzv_gathered_open(&g, none, sizeof(none)),
                   DLCP_ERR_BAD_LENGTH);
  /* A length that would wrap a 32-bit sum. */
  const uint8_t huge[] = {1, 0, 0, 0, 0xFF, 0xFF, 0xFF, 0xFF, 'x'};
  assert_int_equal(dlcp_rdzv_gathered_open(&g, huge, sizeof(huge)), 0);
  assert_int_equal(dlcp_rdzv_gathered_next(&g, &v, &len), DLCP_ERR_BAD_LENGTH);
}

static void test_mesh_hello(void **state) {
  (void)state;
  uint8_t b[DLCP_MESH_HELLO_LEN];
  uint32_t rank = 0;
  dlcp_mesh_put_hello(b, 0xAABBCCDDu, 5);
  const uint8_t want[DLCP_MESH_HELLO_LEN] = {
      'D', 'L', 'C', 'P', DLCP_WIRE_VERSION, 0, 0, 0,
      0xDD, 0xCC, 0xBB, 0xAA, 5, 0, 0, 0};
  assert_memory_equal(b, want, sizeof(want));
  assert_int_equal(dlcp_mesh_get_hello(b, 0xAABBCCDDu, &rank), 0);
  assert_int_equal(rank, 5);
  assert_int_equal(dlcp_mesh_get_hello(b, 1, &rank), DLCP_ERR_FOREIGN_JOB);
  b[4]++;
  assert_int_equal(dlcp_mesh_get_hello(b, 0xAABBCCDDu, &rank),
                   DLCP_ERR_BAD_VERSION);
  b[0]++;
  assert_int_equal(dlcp_mesh_get_hello(b, 0xAABBCCDDu, &rank),
                   DLCP_ERR_BAD_MAGIC);
}

static void test_range_list(void **state) {
  (void)state;
  uint8_t b[2 * DLCP_WIRE_RANGE_LEN];
  dlcp_wire_put_range(b, 0, 1, 2);
  dlcp_wire_put_range(b, 1, 0x0102030405060708ull, UINT64_MAX);
  const uint8_t want[2 * DLCP_WIRE_RANGE_LEN] = {
      1, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0,
      8, 7, 6, 5, 4, 3, 2, 1, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF};
  assert_memory_equal(b, want, sizeof(want));
  uint64_t off, len;
  dlcp_wire_get_range(b, 1, &off, &len);
  assert_true(off == 0x0102030405060708ull);
  assert_true(len == UINT64_MAX);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_rdzv_request_layout),
      cmocka_unit_test(test_rdzv_response_checks),
      cmocka_unit_test(test_rdzv_values),
      cmocka_unit_test(test_rdzv_gather),
      cmocka_unit_test(test_rdzv_gathered),
      cmocka_unit_test(test_mesh_hello),
      cmocka_unit_test(test_range_list),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
