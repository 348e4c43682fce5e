/*
 * wire_test.c: unit tests for src/wire (message formats, error strings and
 * the default allocator).
 *
 * Besides hand-picked cases, the tests sweep every message type through the
 * same adversarial treatments: every truncation length, every single-byte
 * corruption of the header, garbage input.  A decoder may reject such
 * input or accept it, but if it accepts, re-encoding the decoded values
 * must give back exactly the bytes it was fed (decoders are canonical).
 * Truncated inputs are copied into exactly-sized heap blocks so that a
 * sanitizer build catches any read past the end.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "wire/bytes.h"
#include "wire/wire.h"

/* ---- helpers ---- */

/* splitmix64: a seeded generator so every run sees the same "random"
 * losses and garbage. */
static uint64_t rng_next(uint64_t *s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);

  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static size_t nwords(uint32_t nsegs) {
  return (size_t)(((uint64_t)nsegs + 63) / 64);
}

static int bit_get(const uint64_t *w, uint32_t i) {
  return (int)((w[i / 64] >> (i % 64)) & 1u);
}

static void bit_clear(uint64_t *w, uint32_t i) {
  w[i / 64] &= ~((uint64_t)1 << (i % 64));
}

static void bit_set(uint64_t *w, uint32_t i) {
  w[i / 64] |= (uint64_t)1 << (i % 64);
}

/* A holdings array with every segment held (padding bits set as well, to
 * check that the encoder ignores them). */
static uint64_t *words_all_held(uint32_t nsegs) {
  size_t n = nwords(nsegs);
  uint64_t *w = malloc((n ? n : 1) * sizeof(*w));

  assert_non_null(w);
  memset(w, 0xFF, (n ? n : 1) * sizeof(*w));
  return w;
}

static uint32_t count_held(const uint64_t *w, uint32_t nsegs) {
  uint32_t i, c = 0;

  for (i = 0; i < nsegs; ++i) {
    c += (uint32_t)bit_get(w, i);
  }
  return c;
}

/* Rebuilds a holdings array that encode_words turns back into |b|: held
 * everywhere except the listed ranges and, for a cut window, segment end
 * (where the first unlisted range starts).  Returns NULL if nsegs is too
 * large to materialise. */
static uint64_t *words_from_bitmap(const dlcp_wire_bitmap *b) {
  uint64_t *w;
  size_t cursor = 0;
  uint32_t prev = b->first;
  dlcp_wire_range r;

  if (b->nsegs > (1u << 24)) {
    return NULL;
  }
  w = words_all_held(b->nsegs);
  while (dlcp_wire_bitmap_next(b, &cursor, &prev, &r)) {
    uint32_t i;

    for (i = 0; i < r.count; ++i) {
      bit_clear(w, r.start + i);
    }
  }
  if (b->end < b->nsegs) {
    bit_clear(w, b->end);
  }
  return w;
}

/* Exactly-sized heap copy of |len| bytes of |src|. */
static uint8_t *dup_exact(const uint8_t *src, size_t len) {
  uint8_t *p = malloc(len ? len : 1);

  assert_non_null(p);
  if (len) {
    memcpy(p, src, len);
  }
  return p;
}

/*
 * Decodes |buf| as a message of |type| with that type's decoder.  Returns
 * the decoder's result; on success it re-encodes the decoded values and
 * asserts that the bytes come back unchanged.
 */
static int decode_check(uint8_t type, const uint8_t *buf, size_t len) {
  /* Room for the message and a little more, to see the encoders stop at
   * the message length. */
  const size_t cap = len + 64;
  uint8_t *out = malloc(cap);
  dlcp_ssize n = -1;
  int rv;

  assert_non_null(out);
  switch (type) {
  case DLCP_WIRE_DATA: {
    dlcp_wire_data d;
    const uint8_t *payload = NULL;

    rv = dlcp_wire_data_decode(&d, &payload, buf, len);
    if (rv == 0) {
      assert_ptr_equal(payload, buf + DLCP_WIRE_DATA_HDR_LEN);
      assert_int_equal(len, DLCP_WIRE_DATA_HDR_LEN + d.payload_len);
      n = dlcp_wire_data_encode(out, cap, &d);
      assert_int_equal(n, DLCP_WIRE_DATA_HDR_LEN);
      memcpy(out + n, payload, d.payload_len);
      n += d.payload_len;
    }
    break;
  }
  case DLCP_WIRE_ACK: {
    dlcp_wire_ack a;

    rv = dlcp_wire_ack_decode(&a, buf, len);
    if (rv == 0) {
      n = dlcp_wire_ack_encode(out, cap, &a);
    }
    break;
  }
  case DLCP_WIRE_START: {
    uint32_t job, cnt, i;

    rv = dlcp_wire_start_decode(&job, &cnt, buf, len);
    if (rv == 0) {
      dlcp_wire_start_entry *e = calloc(cnt, sizeof(*e));

      assert_non_null(e);
      for (i = 0; i < cnt; ++i) {
        dlcp_wire_start_entry_get(&e[i], buf, i);
      }
      n = dlcp_wire_start_encode(out, cap, job, e, cnt);
      free(e);
    }
    break;
  }
  case DLCP_WIRE_PROBE: {
    dlcp_wire_probe p;

    rv = dlcp_wire_probe_decode(&p, buf, len);
    if (rv == 0) {
      n = dlcp_wire_probe_encode(out, cap, &p);
    }
    break;
  }
  case DLCP_WIRE_BITMAP: {
    dlcp_wire_bitmap b;

    rv = dlcp_wire_bitmap_decode(&b, buf, len);
    if (rv == 0) {
      uint64_t *w = words_from_bitmap(&b);

      if (w == NULL) {
        free(out);
        return rv;
      }
      /* The same buffer size reproduces the same window cut. */
      n = dlcp_wire_bitmap_encode_words(out, len, &b, w);
      free(w);
    }
    break;
  }
  case DLCP_WIRE_STOP: {
    dlcp_wire_stop s;

    rv = dlcp_wire_stop_decode(&s, buf, len);
    if (rv == 0) {
      n = dlcp_wire_stop_encode(out, cap, &s);
    }
    break;
  }
  case DLCP_WIRE_FINISH: {
    dlcp_wire_finish f;

    rv = dlcp_wire_finish_decode(&f, buf, len);
    if (rv == 0) {
      n = dlcp_wire_finish_encode(out, cap, &f);
    }
    break;
  }
  case DLCP_WIRE_CDATA: {
    dlcp_wire_cdata h;

    rv = dlcp_wire_cdata_decode(&h, buf, len);
    if (rv == 0) {
      assert_ptr_equal(h.inner, buf + DLCP_WIRE_CDATA_HDR_LEN);
      n = dlcp_wire_cdata_encode_header(out, cap, &h);
      memcpy(out + n, h.inner, h.inner_len);
      n += (dlcp_ssize)h.inner_len;
    }
    break;
  }
  case DLCP_WIRE_CACK: {
    dlcp_wire_cack c;

    rv = dlcp_wire_cack_decode(&c, buf, len);
    if (rv == 0) {
      n = dlcp_wire_cack_encode(out, cap, &c);
    }
    break;
  }
  default:
    fail_msg("bad type %u", type);
    rv = -1;
  }
  if (rv == 0) {
    assert_int_equal(n, (dlcp_ssize)len);
    assert_memory_equal(out, buf, len);
  } else {
    assert_true(rv < 0);
  }
  free(out);
  return rv;
}

/* A catalogue of valid messages, one or more per type. */
typedef struct sample {
  uint8_t type;
  size_t len;
  uint8_t buf[4096];
} sample;

static size_t make_samples(sample *s) {
  size_t k = 0;
  dlcp_ssize n;

  {
    dlcp_wire_data d = {7, 9, 0x1B, 3, 12, 44, 1000, 2912, 123456789, 100};

    n = dlcp_wire_data_encode(s[k].buf, sizeof(s[k].buf), &d);
    assert_int_equal(n, 44);
    memset(s[k].buf + 44, 0xAB, 100);
    s[k].type = DLCP_WIRE_DATA;
    s[k++].len = 144;
  }
  {
    /* A CDATA carrying a PROBE, and a CACK. */
    dlcp_wire_probe pr = {3, 4, 5, 6};
    dlcp_wire_cack c = {3,           0xFFFFFFF0u,         0x80000001u, 2,
                        0xFFFFFFEEu, 0x0123456789ABCDEFu, 0xFFFFFFFEu};
    dlcp_wire_cdata h = {.job = 3,
                         .cseq = UINT32_MAX,
                         .ack = 0x80000007u,
                         .rest = 0,
                         .tx_ts = 0xFEDCBA9876543210u,
                         .inner_len = DLCP_WIRE_PROBE_LEN};

    n = dlcp_wire_cdata_encode_header(s[k].buf, sizeof(s[k].buf), &h);
    assert_int_equal(n, DLCP_WIRE_CDATA_HDR_LEN);
    assert_int_equal(dlcp_wire_probe_encode(s[k].buf + n, 64, &pr),
                     DLCP_WIRE_PROBE_LEN);
    s[k].type = DLCP_WIRE_CDATA;
    s[k++].len = DLCP_WIRE_CDATA_HDR_LEN + DLCP_WIRE_PROBE_LEN;
    n = dlcp_wire_cack_encode(s[k].buf, sizeof(s[k].buf), &c);
    assert_int_equal(n, DLCP_WIRE_CACK_LEN);
    s[k].type = DLCP_WIRE_CACK;
    s[k++].len = DLCP_WIRE_CACK_LEN;
  }
  {
    dlcp_wire_data d = {0, 1, 0, 0, 0, 0, 0, 0, 0, 1};

    n = dlcp_wire_data_encode(s[k].buf, sizeof(s[k].buf), &d);
    assert_int_equal(n, 44);
    s[k].buf[44] = 0;
    s[k].type = DLCP_WIRE_DATA;
    s[k++].len = 45;
  }
  {
    dlcp_wire_ack a = {1, 2, 0x0102030405060708ull, 10, 9, 10, 3, 4096, 2500};

    n = dlcp_wire_ack_encode(s[k].buf, sizeof(s[k].buf), &a);
    assert_int_equal(n, DLCP_WIRE_ACK_LEN);
    s[k].type = DLCP_WIRE_ACK;
    s[k++].len = (size_t)n;
  }
  {
    dlcp_wire_start_entry e[3] = {
        {1, 11, 4096, 0, 1456, 0},
        {2, 12, 1, 999999, DLCP_WIRE_MIN_SEG, 65536},
        {3, UINT32_MAX, 1ull << 30, 10000, DLCP_WIRE_MAX_SEG, UINT32_MAX},
    };

    n = dlcp_wire_start_encode(s[k].buf, sizeof(s[k].buf), 77, e, 3);
    assert_int_equal(n, 20 + 3 * 32);
    s[k].type = DLCP_WIRE_START;
    s[k++].len = (size_t)n;
  }
  {
    dlcp_wire_probe p = {5, 6, 1, 1000};

    n = dlcp_wire_probe_encode(s[k].buf, sizeof(s[k].buf), &p);
    assert_int_equal(n, DLCP_WIRE_PROBE_LEN);
    s[k].type = DLCP_WIRE_PROBE;
    s[k++].len = (size_t)n;
  }
  {
    /* 300 segments; missing 0-2, 10, 200-299 (the last range reaches the
     * end), and a gap large enough to need a two-byte varint. */
    uint64_t w[5];
    dlcp_wire_bitmap h = {1, 2, 3, 300, 0, 0, 196, 0, NULL, 0};
    uint32_t i;

    memset(w, 0xFF, sizeof(w));
    for (i = 0; i < 3; ++i) {
      bit_clear(w, i);
    }
    bit_clear(w, 10);
    for (i = 200; i < 300; ++i) {
      bit_clear(w, i);
    }
    n = dlcp_wire_bitmap_encode_words(s[k].buf, sizeof(s[k].buf), &h, w);
    assert_true(n > 40);
    s[k].type = DLCP_WIRE_BITMAP;
    s[k++].len = (size_t)n;
    /* The same state cut after the first two ranges. */
    n = dlcp_wire_bitmap_encode_words(s[k].buf, 44, &h, w);
    assert_int_equal(n, 44);
    s[k].type = DLCP_WIRE_BITMAP;
    s[k++].len = (size_t)n;
  }
  {
    dlcp_wire_stop st = {1, 2, DLCP_ERR_TIMEOUT, 10, 14560};

    n = dlcp_wire_stop_encode(s[k].buf, sizeof(s[k].buf), &st);
    assert_int_equal(n, DLCP_WIRE_STOP_LEN);
    s[k].type = DLCP_WIRE_STOP;
    s[k++].len = (size_t)n;
  }
  {
    dlcp_wire_finish f = {1, 2, 0, 99};

    n = dlcp_wire_finish_encode(s[k].buf, sizeof(s[k].buf), &f);
    assert_int_equal(n, DLCP_WIRE_FINISH_LEN);
    s[k].type = DLCP_WIRE_FINISH;
    s[k++].len = (size_t)n;
  }
  return k;
}

#define MAX_SAMPLES 16

/* Bytes of the header (fixed part) of a message of |type|. */
static size_t header_len(uint8_t type) {
  switch (type) {
  case DLCP_WIRE_DATA:
    return DLCP_WIRE_DATA_HDR_LEN;
  case DLCP_WIRE_START:
    return DLCP_WIRE_START_HDR_LEN + DLCP_WIRE_START_ENTRY_LEN;
  case DLCP_WIRE_BITMAP:
    return DLCP_WIRE_BITMAP_HDR_LEN;
  default:
    return 32;
  }
}

/* ---- round trips ---- */

static void test_data_roundtrip(void **state) {
  static const uint16_t plens[] = {1, 2, 1456, DLCP_WIRE_MAX_SEG};
  static const uint8_t flags[] = {0, 0x07, 0x08, 0x10, 0x1F};
  uint8_t *buf = malloc(DLCP_WIRE_DGRAM_MAX);
  size_t i, j;

  (void)state;
  assert_non_null(buf);
  for (i = 0; i < sizeof(plens) / sizeof(plens[0]); ++i) {
    for (j = 0; j < sizeof(flags) / sizeof(flags[0]); ++j) {
      dlcp_wire_data d = {
          UINT32_MAX, (uint32_t)(j + 1), flags[j],   UINT8_MAX,
          UINT16_MAX, UINT32_MAX,        UINT32_MAX, UINT64_MAX - plens[i],
          UINT64_MAX, plens[i]};
      dlcp_wire_data out;
      const uint8_t *payload;
      size_t len = DLCP_WIRE_DATA_HDR_LEN + plens[i];

      assert_int_equal(dlcp_wire_data_encode(buf, len, &d), 44);
      memset(buf + 44, (int)i, plens[i]);
      assert_int_equal(dlcp_wire_data_decode(&out, &payload, buf, len), 0);
      assert_int_equal(out.job, d.job);
      assert_int_equal(out.xfer, d.xfer);
      assert_int_equal(out.flags, d.flags);
      assert_int_equal(out.path, d.path);
      assert_int_equal(out.layer, d.layer);
      assert_int_equal(out.tensor, d.tensor);
      assert_int_equal(out.seq, d.seq);
      assert_true(out.offset == d.offset);
      assert_true(out.tx_ts == d.tx_ts);
      assert_int_equal(out.payload_len, d.payload_len);
      assert_ptr_equal(payload, buf + 44);
      assert_int_equal(decode_check(DLCP_WIRE_DATA, buf, len), 0);
    }
  }
  /* Layout spot checks against wire.h. */
  {
    dlcp_wire_data d = {0x11223344, 0x55667788, 0x1A, 0x42,
                        0x0102,     0xA0B0C0D0, 7,    0x0807060504030201ull,
                        9,          3};

    assert_int_equal(dlcp_wire_data_encode(buf, 44, &d), 44);
    assert_int_equal(buf[0], 0xC9);
    assert_int_equal(buf[1], 0xD1);
    assert_int_equal(buf[2], DLCP_WIRE_VERSION);
    assert_int_equal(buf[3], DLCP_WIRE_DATA);
    assert_int_equal(dlcp_get_u32(buf + 4), 0x11223344);
    assert_int_equal(dlcp_get_u32(buf + 8), 0x55667788);
    assert_int_equal(dlcp_get_u32(buf + 12), 47);
    assert_int_equal(buf[16], 0x1A);
    assert_int_equal(buf[17], 0x42);
    assert_int_equal(buf[18], 0x02);
    assert_int_equal(buf[19], 0x01);
    assert_int_equal(dlcp_get_u32(buf + 20), 0xA0B0C0D0);
    assert_int_equal(dlcp_get_u32(buf + 24), 7);
    assert_int_equal(buf[28], 0x01);
    assert_int_equal(buf[35], 0x08);
    assert_int_equal(dlcp_get_u64(buf + 36), 9);
  }
  free(buf);
}

static void test_data_encode_errors(void **state) {
  uint8_t buf[64];
  dlcp_wire_data d = {1, 1, 0, 0, 0, 0, 0, 0, 0, 10};

  (void)state;
  assert_int_equal(dlcp_wire_data_encode(buf, 43, &d),
                   DLCP_ERR_BUFFER_TOO_SMALL);
  assert_int_equal(dlcp_wire_data_encode(NULL, 0, &d),
                   DLCP_ERR_BUFFER_TOO_SMALL);
  assert_int_equal(dlcp_wire_data_encode(buf, sizeof(buf), NULL),
                   DLCP_ERR_INVALID_ARGUMENT);
  d.flags = 0x80;
  assert_int_equal(dlcp_wire_data_encode(buf, sizeof(buf), &d),
                   DLCP_ERR_INVALID_ARGUMENT);
  d.flags = 0;
  d.payload_len = 0;
  assert_int_equal(dlcp_wire_data_encode(buf, sizeof(buf), &d),
                   DLCP_ERR_INVALID_ARGUMENT);
  d.payload_len = DLCP_WIRE_MAX_SEG + 1;
  assert_int_equal(dlcp_wire_data_encode(buf, sizeof(buf), &d),
                   DLCP_ERR_INVALID_ARGUMENT);
  d.payload_len = 10;
  d.xfer = 0;
  assert_int_equal(dlcp_wire_data_encode(buf, sizeof(buf), &d),
                   DLCP_ERR_INVALID_ARGUMENT);
  d.xfer = 1;
  d.offset = UINT64_MAX - 9;
  assert_int_equal(dlcp_wire_data_encode(buf, sizeof(buf), &d),
                   DLCP_ERR_INVALID_ARGUMENT);
  d.offset = UINT64_MAX - 10;
  assert_int_equal(dlcp_wire_data_encode(buf, sizeof(buf), &d), 44);
}

static void test_data_decode_errors(void **state) {
  uint8_t buf[64];
  dlcp_wire_data d = {1, 1, 0, 0, 0, 0, 0, 0, 0, 10};
  dlcp_wire_data out;
  const uint8_t *payload;

  (void)state;
  memset(buf, 0, sizeof(buf));
  assert_int_equal(dlcp_wire_data_encode(buf, sizeof(buf), &d), 44);
  assert_int_equal(dlcp_wire_data_decode(&out, &payload, buf, 54), 0);
  /* Datagram longer or shorter than its preamble says. */
  assert_int_equal(dlcp_wire_data_decode(&out, &payload, buf, 55),
                   DLCP_ERR_BAD_LENGTH);
  assert_int_equal(dlcp_wire_data_decode(&out, &payload, buf, 53),
                   DLCP_ERR_TRUNCATED);
  /* Empty payload. */
  dlcp_put_u32(buf + 12, 44);
  assert_int_equal(dlcp_wire_data_decode(&out, &payload, buf, 44),
                   DLCP_ERR_BAD_LENGTH);
  dlcp_put_u32(buf + 12, 54);
  /* Unknown flag bits. */
  buf[16] = 0x80;
  assert_int_equal(dlcp_wire_data_decode(&out, &payload, buf, 54),
                   DLCP_ERR_INVALID_ARGUMENT);
  buf[16] = 0x80;
  assert_int_equal(dlcp_wire_data_decode(&out, &payload, buf, 54),
                   DLCP_ERR_INVALID_ARGUMENT);
  buf[16] = 0;
  /* xfer 0. */
  dlcp_put_u32(buf + 8, 0);
  assert_int_equal(dlcp_wire_data_decode(&out, &payload, buf, 54),
                   DLCP_ERR_INVALID_ARGUMENT);
  dlcp_put_u32(buf + 8, 1);
  /* offset + len wraps. */
  dlcp_put_u64(buf + 28, UINT64_MAX - 9);
  assert_int_equal(dlcp_wire_data_decode(&out, &payload, buf, 54),
                   DLCP_ERR_BAD_OFFSET);
  dlcp_put_u64(buf + 28, UINT64_MAX - 10);
  assert_int_equal(dlcp_wire_data_decode(&out, &payload, buf, 54), 0);
  /* An ACK is not DATA. */
  buf[3] = DLCP_WIRE_ACK;
  dlcp_put_u32(buf + 12, DLCP_WIRE_ACK_LEN);
  assert_int_equal(
      dlcp_wire_data_decode(&out, &payload, buf, DLCP_WIRE_ACK_LEN),
      DLCP_ERR_BAD_TYPE);
}

static void test_data_check_bounds(void **state) {
  /* A 10000-byte tensor in 1456-byte segments: 6 full, then 1264 bytes. */
  dlcp_wire_data d = {1, 1, 0, 0, 0, 0, 0, 0, 0, 1456};

  (void)state;
  assert_int_equal(dlcp_wire_data_check_bounds(&d, 10000, 1456), 0);
  d.offset = 5 * 1456;
  assert_int_equal(dlcp_wire_data_check_bounds(&d, 10000, 1456), 0);
  /* Last segment is shorter. */
  d.offset = 6 * 1456;
  assert_int_equal(dlcp_wire_data_check_bounds(&d, 10000, 1456),
                   DLCP_ERR_BAD_OFFSET);
  d.payload_len = 10000 - 6 * 1456;
  assert_int_equal(dlcp_wire_data_check_bounds(&d, 10000, 1456), 0);
  /* A short payload in the middle. */
  d.offset = 1456;
  assert_int_equal(dlcp_wire_data_check_bounds(&d, 10000, 1456),
                   DLCP_ERR_BAD_OFFSET);
  /* Unaligned. */
  d.payload_len = 1456;
  d.offset = 1;
  assert_int_equal(dlcp_wire_data_check_bounds(&d, 10000, 1456),
                   DLCP_ERR_BAD_OFFSET);
  d.offset = 1455;
  assert_int_equal(dlcp_wire_data_check_bounds(&d, 10000, 1456),
                   DLCP_ERR_BAD_OFFSET);
  /* Beyond the size. */
  d.offset = 7 * 1456;
  assert_int_equal(dlcp_wire_data_check_bounds(&d, 10000, 1456),
                   DLCP_ERR_BAD_OFFSET);
  d.offset = UINT64_MAX - 1456 - (UINT64_MAX - 1456) % 1456;
  assert_int_equal(dlcp_wire_data_check_bounds(&d, 10000, 1456),
                   DLCP_ERR_BAD_OFFSET);
  /* Size 0 has no segments. */
  d.offset = 0;
  assert_int_equal(dlcp_wire_data_check_bounds(&d, 0, 1456),
                   DLCP_ERR_BAD_OFFSET);
  /* Size exactly one segment; a smaller tensor. */
  assert_int_equal(dlcp_wire_data_check_bounds(&d, 1456, 1456), 0);
  assert_int_equal(dlcp_wire_data_check_bounds(&d, 1455, 1456),
                   DLCP_ERR_BAD_OFFSET);
  d.payload_len = 1;
  assert_int_equal(dlcp_wire_data_check_bounds(&d, 1, 1456), 0);
  /* seg_size 0 must not divide by zero. */
  assert_int_equal(dlcp_wire_data_check_bounds(&d, 1, 0), DLCP_ERR_BAD_OFFSET);
}

static void test_ack_roundtrip(void **state) {
  uint8_t buf[DLCP_WIRE_ACK_LEN];
  dlcp_wire_ack a = {UINT32_MAX, UINT32_MAX, UINT64_MAX, UINT32_MAX,
                     UINT32_MAX - 1, UINT16_MAX, UINT16_MAX - 1,
                     UINT32_MAX - 2, UINT32_MAX - 3};
  dlcp_wire_ack out;

  (void)state;
  assert_int_equal(dlcp_wire_ack_encode(buf, sizeof(buf), &a), 48);
  assert_int_equal(dlcp_wire_ack_decode(&out, buf, sizeof(buf)), 0);
  assert_int_equal(out.job, a.job);
  assert_int_equal(out.xfer, a.xfer);
  assert_true(out.echo_ts == a.echo_ts);
  assert_int_equal(out.rx_pkts, a.rx_pkts);
  assert_int_equal(out.seq, a.seq);
  assert_int_equal(out.covered, a.covered);
  assert_int_equal(out.ce, a.ce);
  assert_int_equal(dlcp_wire_ack_encode(buf, sizeof(buf) - 1, &a),
                   DLCP_ERR_BUFFER_TOO_SMALL);
  assert_int_equal(out.grant, a.grant);
  assert_int_equal(out.hold_ns, a.hold_ns);
  /* More marks than packets: rejected. */
  dlcp_put_u16(buf + 34, UINT16_MAX);
  dlcp_put_u16(buf + 32, UINT16_MAX - 1);
  assert_int_equal(dlcp_wire_ack_decode(&out, buf, sizeof(buf)),
                   DLCP_ERR_INVALID_ARGUMENT);
  dlcp_put_u16(buf + 32, UINT16_MAX);
  assert_int_equal(dlcp_wire_ack_decode(&out, buf, sizeof(buf)), 0);
  /* The reserved word must be zero. */
  buf[44] = 1;
  assert_int_equal(dlcp_wire_ack_decode(&out, buf, sizeof(buf)),
                   DLCP_ERR_INVALID_ARGUMENT);
  buf[44] = 0;
  a.ce = 3;
  a.covered = 2;
  assert_int_equal(dlcp_wire_ack_encode(buf, sizeof(buf), &a),
                   DLCP_ERR_INVALID_ARGUMENT);
  a.ce = 0;
  a.xfer = 0;
  assert_int_equal(dlcp_wire_ack_encode(buf, sizeof(buf), &a),
                   DLCP_ERR_INVALID_ARGUMENT);
  dlcp_put_u32(buf + 8, 0);
  assert_int_equal(dlcp_wire_ack_decode(&out, buf, sizeof(buf)),
                   DLCP_ERR_INVALID_ARGUMENT);
}

static void test_start_roundtrip(void **state) {
  /* The most entries a START can carry within DLCP_WIRE_CTRL_MAX. */
  const uint32_t maxn = (DLCP_WIRE_CTRL_MAX - DLCP_WIRE_START_HDR_LEN) /
                        DLCP_WIRE_START_ENTRY_LEN;
  dlcp_wire_start_entry *e = calloc(maxn + 1, sizeof(*e));
  uint8_t *buf = malloc(DLCP_WIRE_CTRL_MAX + 64);
  uint32_t i, job, n;
  dlcp_ssize len;

  (void)state;
  assert_non_null(e);
  assert_non_null(buf);
  for (i = 0; i <= maxn; ++i) {
    e[i].tensor = i;
    e[i].xfer = i + 1;
    e[i].size = (uint64_t)i * 1000;
    e[i].loss_ppm = i % DLCP_WIRE_PPM;
    e[i].seg_size = DLCP_WIRE_MIN_SEG + i % 1000;
    e[i].grant = i * 4099u;
  }
  e[0].size = 0;
  e[1].loss_ppm = DLCP_WIRE_PPM - 1;
  e[2].seg_size = DLCP_WIRE_MAX_SEG;
  e[3].tensor = UINT32_MAX;
  e[3].xfer = UINT32_MAX;
  /* Largest tensor with 2^32 - 1 segments. */
  e[4].seg_size = DLCP_WIRE_MIN_SEG;
  e[4].size = (uint64_t)UINT32_MAX * DLCP_WIRE_MIN_SEG;

  len = dlcp_wire_start_encode(buf, DLCP_WIRE_CTRL_MAX, UINT32_MAX, e, maxn);
  assert_int_equal(len, 20 + 32 * (dlcp_ssize)maxn);
  assert_int_equal(dlcp_wire_start_decode(&job, &n, buf, (size_t)len), 0);
  assert_int_equal(job, UINT32_MAX);
  assert_int_equal(n, maxn);
  for (i = 0; i < n; ++i) {
    dlcp_wire_start_entry g;

    dlcp_wire_start_entry_get(&g, buf, i);
    assert_int_equal(g.tensor, e[i].tensor);
    assert_int_equal(g.xfer, e[i].xfer);
    assert_true(g.size == e[i].size);
    assert_int_equal(g.loss_ppm, e[i].loss_ppm);
    assert_int_equal(g.seg_size, e[i].seg_size);
    assert_int_equal(g.grant, e[i].grant);
  }
  assert_int_equal(decode_check(DLCP_WIRE_START, buf, (size_t)len), 0);

  /* One more entry would exceed DLCP_WIRE_CTRL_MAX. */
  assert_int_equal(
      dlcp_wire_start_encode(buf, DLCP_WIRE_CTRL_MAX + 64, 1, e, maxn + 1),
      DLCP_ERR_INVALID_ARGUMENT);
  assert_int_equal(dlcp_wire_start_encode(buf, 1 << 20, 1, e, 70000),
                   DLCP_ERR_INVALID_ARGUMENT);
  assert_int_equal(dlcp_wire_start_encode(buf, 1 << 20, 1, e, 0),
                   DLCP_ERR_INVALID_ARGUMENT);
  assert_int_equal(dlcp_wire_start_encode(buf, 1 << 20, 1, NULL, 1),
                   DLCP_ERR_INVALID_ARGUMENT);
  assert_int_equal(dlcp_wire_start_encode(buf, 51, 1, e, 1),
                   DLCP_ERR_BUFFER_TOO_SMALL);
  assert_int_equal(dlcp_wire_start_encode(buf, 52, 1, e, 1), 52);

  /* Bad entries, each rejected by the encoder. */
  {
    dlcp_wire_start_entry bad[6];

    for (i = 0; i < 6; ++i) {
      bad[i] = e[10];
    }
    bad[0].xfer = 0;
    bad[1].loss_ppm = DLCP_WIRE_PPM;
    bad[2].seg_size = DLCP_WIRE_MIN_SEG - 1;
    bad[3].seg_size = DLCP_WIRE_MAX_SEG + 1;
    bad[4].seg_size = DLCP_WIRE_MIN_SEG;
    bad[4].size = (uint64_t)UINT32_MAX * DLCP_WIRE_MIN_SEG + 1;
    bad[5].seg_size = 0;
    for (i = 0; i < 6; ++i) {
      assert_int_equal(dlcp_wire_start_encode(buf, 1 << 20, 1, &bad[i], 1),
                       DLCP_ERR_INVALID_ARGUMENT);
    }
  }
  free(e);
  free(buf);
}

static void test_start_decode_errors(void **state) {
  dlcp_wire_start_entry e[2] = {{1, 2, 3000, 0, 1456, 0}, {2, 3, 10, 5, 64, 7}};
  uint8_t good[84];
  uint8_t buf[84];
  uint32_t job, n;

  (void)state;
  assert_int_equal(dlcp_wire_start_encode(good, sizeof(good), 5, e, 2), 84);
#define RESET() memcpy(buf, good, sizeof(buf))
  RESET();
  assert_int_equal(dlcp_wire_start_decode(&job, &n, buf, 84), 0);
  /* xfer in the preamble must be 0. */
  dlcp_put_u32(buf + 8, 1);
  assert_int_equal(dlcp_wire_start_decode(&job, &n, buf, 84),
                   DLCP_ERR_INVALID_ARGUMENT);
  RESET();
  /* count 0, and count not matching len. */
  dlcp_put_u16(buf + 16, 0);
  assert_int_equal(dlcp_wire_start_decode(&job, &n, buf, 84),
                   DLCP_ERR_BAD_LENGTH);
  dlcp_put_u16(buf + 16, 1);
  assert_int_equal(dlcp_wire_start_decode(&job, &n, buf, 84),
                   DLCP_ERR_BAD_LENGTH);
  dlcp_put_u16(buf + 16, 3);
  assert_int_equal(dlcp_wire_start_decode(&job, &n, buf, 84),
                   DLCP_ERR_BAD_LENGTH);
  RESET();
  /* len not 20 + 32k. */
  dlcp_put_u32(buf + 12, 83);
  assert_int_equal(dlcp_wire_start_decode(&job, &n, buf, 83),
                   DLCP_ERR_BAD_LENGTH);
  RESET();
  buf[18] = 1;
  assert_int_equal(dlcp_wire_start_decode(&job, &n, buf, 84),
                   DLCP_ERR_INVALID_ARGUMENT);
  RESET();
  /* Second entry: xfer 0, loss, seg size, reserved. */
  dlcp_put_u32(buf + 52 + 4, 0);
  assert_int_equal(dlcp_wire_start_decode(&job, &n, buf, 84),
                   DLCP_ERR_INVALID_ARGUMENT);
  RESET();
  dlcp_put_u32(buf + 52 + 16, DLCP_WIRE_PPM);
  assert_int_equal(dlcp_wire_start_decode(&job, &n, buf, 84),
                   DLCP_ERR_INVALID_ARGUMENT);
  RESET();
  dlcp_put_u32(buf + 52 + 20, 63);
  assert_int_equal(dlcp_wire_start_decode(&job, &n, buf, 84),
                   DLCP_ERR_INVALID_ARGUMENT);
  RESET();
  dlcp_put_u32(buf + 52 + 20, DLCP_WIRE_MAX_SEG + 1);
  assert_int_equal(dlcp_wire_start_decode(&job, &n, buf, 84),
                   DLCP_ERR_INVALID_ARGUMENT);
  RESET();
  dlcp_put_u64(buf + 52 + 8, UINT64_MAX);
  assert_int_equal(dlcp_wire_start_decode(&job, &n, buf, 84),
                   DLCP_ERR_INVALID_ARGUMENT);
  RESET();
  buf[83] = 0x80;
  assert_int_equal(dlcp_wire_start_decode(&job, &n, buf, 84),
                   DLCP_ERR_INVALID_ARGUMENT);
#undef RESET
}

static void test_probe_stop_finish_roundtrip(void **state) {
  static const int32_t statuses[] = {0, -1, DLCP_ERR_TIMEOUT, DLCP_ERR_NOMEM,
                                     INT32_MIN};
  uint8_t buf[32];
  size_t i;

  (void)state;
  {
    dlcp_wire_probe p = {UINT32_MAX, 1, UINT32_MAX, UINT32_MAX}, out;

    assert_int_equal(dlcp_wire_probe_encode(buf, 24, &p), 24);
    assert_int_equal(dlcp_wire_probe_decode(&out, buf, 24), 0);
    assert_memory_equal(&out, &p, sizeof(p));
    assert_int_equal(dlcp_wire_probe_encode(buf, 23, &p),
                     DLCP_ERR_BUFFER_TOO_SMALL);
    p.xfer = 0;
    assert_int_equal(dlcp_wire_probe_encode(buf, 24, &p),
                     DLCP_ERR_INVALID_ARGUMENT);
  }
  for (i = 0; i < sizeof(statuses) / sizeof(statuses[0]); ++i) {
    dlcp_wire_stop s = {0, UINT32_MAX, statuses[i], UINT32_MAX, UINT64_MAX};
    dlcp_wire_stop so;
    dlcp_wire_finish f = {UINT32_MAX, 1, statuses[i], 0};
    dlcp_wire_finish fo;

    assert_int_equal(dlcp_wire_stop_encode(buf, 32, &s), 32);
    assert_int_equal(dlcp_wire_stop_decode(&so, buf, 32), 0);
    assert_int_equal(so.job, s.job);
    assert_int_equal(so.xfer, s.xfer);
    assert_int_equal(so.status, s.status);
    assert_int_equal(so.have, s.have);
    assert_true(so.bytes == s.bytes);
    assert_int_equal(dlcp_wire_finish_encode(buf, 24, &f), 24);
    assert_int_equal(dlcp_wire_finish_decode(&fo, buf, 24), 0);
    assert_int_equal(fo.job, f.job);
    assert_int_equal(fo.xfer, f.xfer);
    assert_int_equal(fo.status, f.status);
    assert_int_equal(fo.sent, f.sent);
  }
  {
    dlcp_wire_stop s = {1, 1, 1, 0, 0}, so;
    dlcp_wire_finish f = {1, 1, INT32_MAX, 0}, fo;

    /* Positive statuses are not error codes. */
    assert_int_equal(dlcp_wire_stop_encode(buf, 32, &s),
                     DLCP_ERR_INVALID_ARGUMENT);
    assert_int_equal(dlcp_wire_finish_encode(buf, 32, &f),
                     DLCP_ERR_INVALID_ARGUMENT);
    s.status = 0;
    assert_int_equal(dlcp_wire_stop_encode(buf, 32, &s), 32);
    dlcp_put_u32(buf + 16, 5);
    assert_int_equal(dlcp_wire_stop_decode(&so, buf, 32),
                     DLCP_ERR_INVALID_ARGUMENT);
    f.status = 0;
    assert_int_equal(dlcp_wire_finish_encode(buf, 32, &f), 24);
    dlcp_put_u32(buf + 16, 0x7FFFFFFF);
    assert_int_equal(dlcp_wire_finish_decode(&fo, buf, 24),
                     DLCP_ERR_INVALID_ARGUMENT);
    dlcp_put_u32(buf + 16, 0);
    dlcp_put_u32(buf + 8, 0);
    assert_int_equal(dlcp_wire_finish_decode(&fo, buf, 24),
                     DLCP_ERR_INVALID_ARGUMENT);
    assert_int_equal(dlcp_wire_stop_encode(buf, 31, &s),
                     DLCP_ERR_BUFFER_TOO_SMALL);
    assert_int_equal(dlcp_wire_finish_encode(buf, 23, &f),
                     DLCP_ERR_BUFFER_TOO_SMALL);
  }
}

/* ---- the adversarial sweeps ---- */

static void test_every_truncation(void **state) {
  sample *s = calloc(MAX_SAMPLES, sizeof(*s));
  size_t ns, i, l;

  (void)state;
  assert_non_null(s);
  ns = make_samples(s);
  for (i = 0; i < ns; ++i) {
    assert_int_equal(decode_check(s[i].type, s[i].buf, s[i].len), 0);
    for (l = 0; l < s[i].len; ++l) {
      uint8_t *p = dup_exact(s[i].buf, l);
      dlcp_wire_preamble pre;
      int rv = dlcp_wire_peek(&pre, p, l);

      /* peek needs only the preamble; a stream reader waits for the rest */
      if (l < DLCP_WIRE_PREAMBLE_LEN) {
        assert_int_equal(rv, DLCP_ERR_TRUNCATED);
      } else {
        assert_int_equal(rv, 0);
        assert_int_equal(pre.len, s[i].len);
      }
      assert_int_equal(decode_check(s[i].type, p, l), DLCP_ERR_TRUNCATED);
      free(p);
    }
    assert_int_equal(decode_check(s[i].type, NULL, 0), DLCP_ERR_TRUNCATED);
  }
  free(s);
}

static void test_every_header_corruption(void **state) {
  sample *s = calloc(MAX_SAMPLES, sizeof(*s));
  size_t ns, i, pos;
  unsigned x;

  (void)state;
  assert_non_null(s);
  ns = make_samples(s);
  for (i = 0; i < ns; ++i) {
    size_t hl = header_len(s[i].type);

    if (hl > s[i].len) {
      hl = s[i].len;
    }
    for (pos = 0; pos < hl; ++pos) {
      for (x = 1; x < 256; ++x) {
        uint8_t *p = dup_exact(s[i].buf, s[i].len);
        int rv;

        p[pos] = (uint8_t)(p[pos] ^ x);
        /* decode_check asserts the canonical re-encoding on success. */
        rv = decode_check(s[i].type, p, s[i].len);
        /* Magic, version, type and length can never be corrupted
         * unnoticed: with the input size fixed, a changed len mismatches
         * it. */
        if (pos < 4 || (pos >= 12 && pos < 16)) {
          assert_true(rv < 0);
        }
        free(p);
      }
    }
  }
  free(s);
}

static void test_garbage(void **state) {
  uint64_t seed = 42;
  uint8_t *buf = malloc(2 * DLCP_WIRE_CTRL_MAX);
  int iter;
  uint8_t type;
  dlcp_wire_preamble pre;

  (void)state;
  assert_non_null(buf);
  /* Pure noise, and noise behind a valid-looking preamble. */
  for (iter = 0; iter < 20000; ++iter) {
    size_t len = (size_t)(rng_next(&seed) % 300);
    size_t j;
    uint8_t *p;

    for (j = 0; j < len; ++j) {
      buf[j] = (uint8_t)rng_next(&seed);
    }
    if (len >= 16 && (iter & 1)) {
      buf[0] = 0xC9;
      buf[1] = 0xD1;
      buf[2] = DLCP_WIRE_VERSION;
      buf[3] = (uint8_t)(1 + iter / 2 % 7);
      dlcp_put_u32(buf + 12, (uint32_t)len);
      if (iter % 3 == 0) {
        memset(buf + 16, 0, len - 16);
      }
    }
    p = dup_exact(buf, len);
    (void)dlcp_wire_peek(&pre, p, len);
    for (type = DLCP_WIRE_DATA; type <= DLCP_WIRE_FINISH; ++type) {
      (void)decode_check(type, p, len);
    }
    free(p);
  }
  /* Oversized: inputs beyond both channel limits. */
  memset(buf, 0, 2 * DLCP_WIRE_CTRL_MAX);
  buf[0] = 0xC9;
  buf[1] = 0xD1;
  buf[2] = DLCP_WIRE_VERSION;
  dlcp_put_u32(buf + 8, 1);
  for (type = DLCP_WIRE_DATA; type <= DLCP_WIRE_FINISH; ++type) {
    buf[3] = type;
    dlcp_put_u32(buf + 12, DLCP_WIRE_CTRL_MAX + 32);
    assert_int_equal(dlcp_wire_peek(&pre, buf, 16), DLCP_ERR_BAD_LENGTH);
    assert_int_equal(decode_check(type, buf, DLCP_WIRE_CTRL_MAX + 32),
                     DLCP_ERR_BAD_LENGTH);
    dlcp_put_u32(buf + 12, UINT32_MAX);
    assert_int_equal(dlcp_wire_peek(&pre, buf, 16), DLCP_ERR_BAD_LENGTH);
    assert_int_equal(decode_check(type, buf, 2 * DLCP_WIRE_CTRL_MAX),
                     DLCP_ERR_BAD_LENGTH);
    dlcp_put_u32(buf + 12, 0);
    assert_int_equal(dlcp_wire_peek(&pre, buf, 16), DLCP_ERR_BAD_LENGTH);
  }
  /* A DATA datagram one byte above the UDP limit. */
  buf[3] = DLCP_WIRE_DATA;
  dlcp_put_u32(buf + 12, DLCP_WIRE_DGRAM_MAX + 1);
  assert_int_equal(dlcp_wire_peek(&pre, buf, DLCP_WIRE_DGRAM_MAX + 1),
                   DLCP_ERR_BAD_LENGTH);
  dlcp_put_u32(buf + 12, DLCP_WIRE_DGRAM_MAX);
  assert_int_equal(dlcp_wire_peek(&pre, buf, DLCP_WIRE_DGRAM_MAX), 0);
  assert_int_equal(decode_check(DLCP_WIRE_DATA, buf, DLCP_WIRE_DGRAM_MAX), 0);
  /* The largest control message is accepted. */
  buf[3] = DLCP_WIRE_BITMAP;
  dlcp_put_u32(buf + 12, DLCP_WIRE_CTRL_MAX);
  assert_int_equal(dlcp_wire_peek(&pre, buf, 16), 0);
  assert_int_equal(pre.len, DLCP_WIRE_CTRL_MAX);
  free(buf);
}

static void test_bad_preamble(void **state) {
  uint8_t buf[24];
  dlcp_wire_probe p = {1, 2, 3, 4};
  dlcp_wire_probe out;
  dlcp_wire_preamble pre;
  unsigned v;

  (void)state;
  assert_int_equal(dlcp_wire_probe_encode(buf, 24, &p), 24);
  assert_int_equal(dlcp_wire_peek(&pre, buf, 24), 0);
  assert_int_equal(pre.type, DLCP_WIRE_PROBE);
  assert_int_equal(pre.job, 1);
  assert_int_equal(pre.xfer, 2);
  assert_int_equal(pre.len, 24);
  for (v = 0; v < 256; ++v) {
    buf[2] = (uint8_t)v;
    assert_int_equal(dlcp_wire_peek(&pre, buf, 24),
                     v == DLCP_WIRE_VERSION ? 0 : DLCP_ERR_BAD_VERSION);
    assert_int_equal(dlcp_wire_probe_decode(&out, buf, 24),
                     v == DLCP_WIRE_VERSION ? 0 : DLCP_ERR_BAD_VERSION);
  }
  buf[2] = DLCP_WIRE_VERSION;
  buf[0] = 0xD1;
  buf[1] = 0xC9;
  assert_int_equal(dlcp_wire_peek(&pre, buf, 24), DLCP_ERR_BAD_MAGIC);
  buf[0] = 0xC9;
  buf[1] = 0xD1;
  for (v = 0; v < 256; ++v) {
    buf[3] = (uint8_t)v;
    if (v == 0 || v > DLCP_WIRE_OFFER) {
      assert_int_equal(dlcp_wire_peek(&pre, buf, 24), DLCP_ERR_BAD_TYPE);
    }
  }
  /* A FINISH has the PROBE length: decodable as FINISH, not as PROBE. */
  buf[3] = DLCP_WIRE_FINISH;
  assert_int_equal(dlcp_wire_probe_decode(&out, buf, 24), DLCP_ERR_BAD_TYPE);
  /* Fixed-size messages must have exactly their length. */
  buf[3] = DLCP_WIRE_PROBE;
  dlcp_put_u32(buf + 12, 25);
  assert_int_equal(dlcp_wire_peek(&pre, buf, 24), DLCP_ERR_BAD_LENGTH);
  /* Stream prefix: a 16-byte prefix is enough to learn the length. */
  dlcp_put_u32(buf + 12, 24);
  assert_int_equal(dlcp_wire_peek(&pre, buf, 16), 0);
  assert_int_equal(dlcp_wire_peek(NULL, buf, 16), 0);
  assert_int_equal(dlcp_wire_peek(&pre, buf, 15), DLCP_ERR_TRUNCATED);
}

/* ---- BITMAP ---- */

/* Encodes |w| from |first| with a |buflen| buffer, decodes the result, and
 * checks that the window is described exactly: inside [first, end) a
 * segment is listed iff it is missing, and a cut window ends at a missing
 * segment.  Returns the window end. */
static uint32_t bitmap_check(const uint64_t *w, uint32_t nsegs, uint32_t first,
                             size_t buflen, uint8_t *buf, size_t *msglen) {
  dlcp_wire_bitmap h = {3, 4, 5, nsegs, first, 0, 0, 0, NULL, 0};
  dlcp_wire_bitmap b;
  dlcp_wire_range r;
  size_t cursor = 0;
  uint32_t prev, seg, nr = 0;
  dlcp_ssize n;

  h.have = count_held(w, nsegs);
  n = dlcp_wire_bitmap_encode_words(buf, buflen, &h, w);
  assert_true(n >= 40);
  assert_true((size_t)n <= buflen);
  assert_true((size_t)n <= DLCP_WIRE_CTRL_MAX);
  assert_int_equal(dlcp_wire_bitmap_decode(&b, buf, (size_t)n), 0);
  assert_int_equal(b.job, 3);
  assert_int_equal(b.xfer, 4);
  assert_int_equal(b.round, 5);
  assert_int_equal(b.nsegs, nsegs);
  assert_int_equal(b.first, first);
  assert_int_equal(b.have, h.have);
  assert_true(b.end >= first && b.end <= nsegs);
  prev = b.first;
  seg = first;
  while (dlcp_wire_bitmap_next(&b, &cursor, &prev, &r)) {
    assert_true(r.count >= 1);
    assert_true(r.start >= seg);
    for (; seg < r.start; ++seg) {
      assert_int_equal(bit_get(w, seg), 1);
    }
    for (; seg < r.start + r.count; ++seg) {
      assert_int_equal(bit_get(w, seg), 0);
    }
    ++nr;
  }
  assert_int_equal(nr, b.nranges);
  assert_true(seg <= b.end);
  for (; seg < b.end; ++seg) {
    assert_int_equal(bit_get(w, seg), 1);
  }
  if (b.end < nsegs) {
    assert_int_equal(bit_get(w, b.end), 0);
  }
  /* Walking past the end stays at the end. */
  assert_int_equal(dlcp_wire_bitmap_next(&b, &cursor, &prev, &r), 0);
  if (msglen != NULL) {
    *msglen = (size_t)n;
  }
  return b.end;
}

static void test_bitmap_patterns(void **state) {
  static const uint32_t sizes[] = {0, 1, 63, 64, 65, 127, 128, 1000, 4097};
  uint8_t *buf = malloc(DLCP_WIRE_CTRL_MAX);
  size_t i, len;
  uint64_t seed = 7;

  (void)state;
  assert_non_null(buf);
  for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); ++i) {
    uint32_t n = sizes[i];
    uint64_t *w = words_all_held(n);
    uint32_t j, first;

    /* Nothing missing: an empty list covering everything. */
    assert_int_equal(bitmap_check(w, n, 0, DLCP_WIRE_CTRL_MAX, buf, &len), n);
    assert_int_equal(len, 40);
    assert_int_equal(dlcp_get_u32(buf + 36), 0);
    /* All missing: one range. */
    for (j = 0; j < n; ++j) {
      bit_clear(w, j);
    }
    assert_int_equal(bitmap_check(w, n, 0, DLCP_WIRE_CTRL_MAX, buf, &len), n);
    assert_int_equal(dlcp_get_u32(buf + 36), n ? 1 : 0);
    /* Alternating, starting with a missing or with a held segment. */
    for (j = 0; j < n; ++j) {
      if (j % 2) {
        bit_set(w, j);
      }
    }
    assert_int_equal(bitmap_check(w, n, 0, DLCP_WIRE_CTRL_MAX, buf, &len), n);
    assert_int_equal(dlcp_get_u32(buf + 36), (n + 1) / 2);
    for (first = 0; first <= n && first < 130; ++first) {
      assert_int_equal(bitmap_check(w, n, first, DLCP_WIRE_CTRL_MAX, buf, NULL),
                       n);
    }
    for (j = 0; j < n; ++j) {
      if (j % 2) {
        bit_clear(w, j);
      } else {
        bit_set(w, j);
      }
    }
    assert_int_equal(bitmap_check(w, n, 0, DLCP_WIRE_CTRL_MAX, buf, &len), n);
    assert_int_equal(dlcp_get_u32(buf + 36), n / 2);
    /* Random 10% loss, with padding bits cleared this time. */
    for (j = 0; j < n; ++j) {
      if (rng_next(&seed) % 10 == 0) {
        bit_clear(w, j);
      } else {
        bit_set(w, j);
      }
    }
    for (j = n; j < nwords(n) * 64; ++j) {
      bit_clear(w, j);
    }
    assert_int_equal(bitmap_check(w, n, 0, DLCP_WIRE_CTRL_MAX, buf, NULL), n);
    free(w);
  }
  /* A gap over 127 needs a two-byte varint; runs too. */
  {
    uint64_t *w = words_all_held(100000);
    uint32_t j;

    bit_clear(w, 99999);
    for (j = 50; j < 20050; ++j) {
      bit_clear(w, j);
    }
    assert_int_equal(bitmap_check(w, 100000, 0, 4096, buf, &len), 100000);
    /* 40 + (1 + 3) + (3 + 1) */
    assert_int_equal(len, 48);
    free(w);
  }
  free(buf);
}

static void test_bitmap_gib_fits(void **state) {
  /* A 1 GiB tensor in 1456-byte segments. */
  const uint32_t nsegs = (uint32_t)(((1ull << 30) + 1455) / 1456);
  uint64_t *w = words_all_held(nsegs);
  uint8_t *buf = malloc(DLCP_WIRE_CTRL_MAX);
  uint64_t seed = 1;
  uint32_t j;
  size_t len;

  (void)state;
  assert_non_null(buf);
  assert_true(nsegs > 737000);
  /* Worst case: every other segment missing. */
  for (j = 0; j < nsegs; j += 2) {
    bit_clear(w, j);
  }
  assert_int_equal(bitmap_check(w, nsegs, 0, DLCP_WIRE_CTRL_MAX, buf, &len),
                   nsegs);
  assert_true(len <= DLCP_WIRE_CTRL_MAX);
  assert_int_equal(dlcp_get_u32(buf + 36), (nsegs + 1) / 2);
  /* Shifted by one: the first range has a gap of one. */
  for (j = 0; j < nsegs; ++j) {
    if (j % 2) {
      bit_clear(w, j);
    } else {
      bit_set(w, j);
    }
  }
  assert_int_equal(bitmap_check(w, nsegs, 0, DLCP_WIRE_CTRL_MAX, buf, &len),
                   nsegs);
  /* 10% random loss. */
  for (j = 0; j < nsegs; ++j) {
    if (rng_next(&seed) % 10 == 0) {
      bit_clear(w, j);
    } else {
      bit_set(w, j);
    }
  }
  assert_int_equal(bitmap_check(w, nsegs, 0, DLCP_WIRE_CTRL_MAX, buf, &len),
                   nsegs);
  assert_true(len < DLCP_WIRE_CTRL_MAX / 4);
  /* A buffer larger than CTRL_MAX never yields a longer message. */
  {
    uint8_t *big = malloc(2 * DLCP_WIRE_CTRL_MAX);
    uint64_t *w2 = words_all_held(4000000);

    assert_non_null(big);
    for (j = 0; j < 4000000; j += 2) {
      bit_clear(w2, j);
    }
    assert_true(bitmap_check(w2, 4000000, 0, 2 * DLCP_WIRE_CTRL_MAX, big,
                             &len) < 4000000);
    assert_true(len <= DLCP_WIRE_CTRL_MAX);
    free(w2);
    free(big);
  }
  free(buf);
  free(w);
}

static void test_bitmap_windowing(void **state) {
  const uint32_t nsegs = 100000;
  uint64_t *w = words_all_held(nsegs);
  uint8_t buf[256];
  uint64_t seed = 99;
  uint32_t j, first = 0, end, msgs = 0;
  dlcp_wire_bitmap h = {1, 1, 1, nsegs, 0, 0, 0, 0, NULL, 0};

  (void)state;
  for (j = 0; j < nsegs; ++j) {
    if (rng_next(&seed) % 10 == 0) {
      bit_clear(w, j);
    }
  }
  /* Small buffers: each message describes an exact prefix of what is left
   * and the windows tile [0, nsegs). */
  while (first < nsegs) {
    end = bitmap_check(w, nsegs, first, sizeof(buf), buf, NULL);
    assert_true(end > first);
    first = end;
    ++msgs;
  }
  assert_true(msgs > 10);
  /* First range does not fit at all: BUFFER_TOO_SMALL, never an empty cut
   * window.  A 41-byte buffer has room for no range. */
  assert_int_equal(dlcp_wire_bitmap_encode_words(buf, 39, &h, w),
                   DLCP_ERR_BUFFER_TOO_SMALL);
  bit_clear(w, 0);
  assert_int_equal(dlcp_wire_bitmap_encode_words(buf, 41, &h, w),
                   DLCP_ERR_BUFFER_TOO_SMALL);
  assert_int_equal(dlcp_wire_bitmap_encode_words(buf, 42, &h, w), 42);
  /* Fully held tensor: 40 bytes are enough. */
  {
    uint64_t *full = words_all_held(nsegs);

    assert_int_equal(dlcp_wire_bitmap_encode_words(buf, 40, &h, full), 40);
    free(full);
  }
  /* Argument checks. */
  h.xfer = 0;
  assert_int_equal(dlcp_wire_bitmap_encode_words(buf, sizeof(buf), &h, w),
                   DLCP_ERR_INVALID_ARGUMENT);
  h.xfer = 1;
  h.first = nsegs + 1;
  assert_int_equal(dlcp_wire_bitmap_encode_words(buf, sizeof(buf), &h, w),
                   DLCP_ERR_INVALID_ARGUMENT);
  h.first = 0;
  h.have = nsegs + 1;
  assert_int_equal(dlcp_wire_bitmap_encode_words(buf, sizeof(buf), &h, w),
                   DLCP_ERR_INVALID_ARGUMENT);
  h.have = 0;
  assert_int_equal(dlcp_wire_bitmap_encode_words(buf, sizeof(buf), &h, NULL),
                   DLCP_ERR_INVALID_ARGUMENT);
  h.first = nsegs;
  assert_int_equal(dlcp_wire_bitmap_encode_words(buf, sizeof(buf), &h, NULL),
                   40);
  free(w);
}

/* A window bounded by the caller (an early BITMAP: the holes below the
 * segments every path has passed) lists exactly the missing segments in
 * [first, end) and ends there, whatever lies beyond. */
static void test_bitmap_bounded_window(void **state) {
  (void)state;
  uint32_t nsegs = 200;
  uint64_t *w = words_all_held(nsegs);
  uint8_t buf[256];
  bit_clear(w, 3);
  bit_clear(w, 40);
  bit_clear(w, 41);
  bit_clear(w, 150);
  dlcp_wire_bitmap h = {.job = 1, .xfer = 2, .round = 0, .nsegs = nsegs,
                        .first = 10, .end = 100, .have = nsegs - 4};
  dlcp_ssize n = dlcp_wire_bitmap_encode_words(buf, sizeof(buf), &h, w);
  assert_true(n > 0);
  dlcp_wire_bitmap b;
  assert_int_equal(dlcp_wire_bitmap_decode(&b, buf, (size_t)n), 0);
  assert_int_equal(b.first, 10);
  assert_int_equal(b.end, 100);
  assert_int_equal(b.nranges, 1);
  size_t cursor = 0;
  uint32_t prev = b.first;
  dlcp_wire_range r;
  assert_int_equal(dlcp_wire_bitmap_next(&b, &cursor, &prev, &r), 1);
  assert_int_equal(r.start, 40);
  assert_int_equal(r.count, 2);
  assert_int_equal(dlcp_wire_bitmap_next(&b, &cursor, &prev, &r), 0);
  /* The decoder's rule for a window short of nsegs holds: nothing missing
   * in it, or a missing segment at its end, is refused. */
  h.first = 50;
  assert_int_equal(dlcp_wire_bitmap_encode_words(buf, sizeof(buf), &h, w),
                   DLCP_ERR_INVALID_ARGUMENT);
  h.first = 10;
  h.end = 41;
  assert_int_equal(dlcp_wire_bitmap_encode_words(buf, sizeof(buf), &h, w),
                   DLCP_ERR_INVALID_ARGUMENT);
  /* A bound below first, or past nsegs, is refused. */
  h.end = 40;
  assert_int_equal(dlcp_wire_bitmap_encode_words(buf, sizeof(buf), &h, w),
                   DLCP_ERR_INVALID_ARGUMENT);
  h.end = nsegs + 1;
  assert_int_equal(dlcp_wire_bitmap_encode_words(buf, sizeof(buf), &h, w),
                   DLCP_ERR_INVALID_ARGUMENT);
  free(w);
}

/* Builds a BITMAP by hand: header fields plus raw range bytes. */
static size_t bitmap_raw(uint8_t *buf, uint32_t nsegs, uint32_t first,
                         uint32_t end, uint32_t have, uint32_t nranges,
                         const uint8_t *ranges, size_t rlen) {
  size_t len = 40 + rlen;

  dlcp_put_u16(buf, DLCP_WIRE_MAGIC);
  buf[2] = DLCP_WIRE_VERSION;
  buf[3] = DLCP_WIRE_BITMAP;
  dlcp_put_u32(buf + 4, 1);
  dlcp_put_u32(buf + 8, 1);
  dlcp_put_u32(buf + 12, (uint32_t)len);
  dlcp_put_u32(buf + 16, 1);
  dlcp_put_u32(buf + 20, nsegs);
  dlcp_put_u32(buf + 24, first);
  dlcp_put_u32(buf + 28, end);
  dlcp_put_u32(buf + 32, have);
  dlcp_put_u32(buf + 36, nranges);
  if (rlen) {
    memcpy(buf + 40, ranges, rlen);
  }
  return len;
}

static void test_bitmap_decode_errors(void **state) {
  uint8_t buf[128];
  dlcp_wire_bitmap b;
  size_t len;

  (void)state;
#define BM(nsegs, first, end, have, nr, ...)                                   \
  do {                                                                         \
    static const uint8_t r_[] = {__VA_ARGS__};                                 \
    len = bitmap_raw(buf, nsegs, first, end, have, nr, r_, sizeof(r_));        \
  } while (0)
#define BM0(nsegs, first, end, have)                                           \
  len = bitmap_raw(buf, nsegs, first, end, have, 0, NULL, 0)

  /* Valid baselines. */
  BM(100, 0, 100, 90, 2, 0, 5, 10, 5);
  assert_int_equal(decode_check(DLCP_WIRE_BITMAP, buf, len), 0);
  BM0(100, 100, 100, 100);
  assert_int_equal(decode_check(DLCP_WIRE_BITMAP, buf, len), 0);
  BM0(0, 0, 0, 0);
  assert_int_equal(decode_check(DLCP_WIRE_BITMAP, buf, len), 0);
  BM(UINT32_MAX, 0, UINT32_MAX, 0, 1, 0, 0xFF, 0xFF, 0xFF, 0xFF, 0x0F);
  assert_int_equal(dlcp_wire_bitmap_decode(&b, buf, len), 0);
  /* A cut window ending after a held segment. */
  BM(100, 10, 50, 0, 1, 5, 5);
  assert_int_equal(decode_check(DLCP_WIRE_BITMAP, buf, len), 0);

  /* Window and counts. */
  BM0(100, 51, 50, 0);
  assert_int_equal(dlcp_wire_bitmap_decode(&b, buf, len),
                   DLCP_ERR_INVALID_ARGUMENT);
  BM0(100, 0, 101, 0);
  assert_int_equal(dlcp_wire_bitmap_decode(&b, buf, len),
                   DLCP_ERR_INVALID_ARGUMENT);
  BM0(100, 0, 100, 101);
  assert_int_equal(dlcp_wire_bitmap_decode(&b, buf, len),
                   DLCP_ERR_INVALID_ARGUMENT);
  /* Cut window without ranges, or whose last range touches end. */
  BM0(100, 0, 50, 0);
  assert_int_equal(dlcp_wire_bitmap_decode(&b, buf, len),
                   DLCP_ERR_INVALID_ARGUMENT);
  BM(100, 0, 50, 0, 1, 40, 10);
  assert_int_equal(dlcp_wire_bitmap_decode(&b, buf, len),
                   DLCP_ERR_INVALID_ARGUMENT);
  /* nranges not matching the bytes. */
  BM(100, 0, 100, 0, 1, 0, 5, 10, 5);
  assert_int_equal(dlcp_wire_bitmap_decode(&b, buf, len), DLCP_ERR_BAD_LENGTH);
  BM(100, 0, 100, 0, 3, 0, 5, 10, 5);
  assert_int_equal(dlcp_wire_bitmap_decode(&b, buf, len), DLCP_ERR_BAD_LENGTH);
  BM(100, 0, 100, 0, 2, 0, 5, 10, 5, 0);
  assert_int_equal(dlcp_wire_bitmap_decode(&b, buf, len), DLCP_ERR_BAD_LENGTH);
  BM(100, 0, 100, 0, UINT32_MAX, 0, 5, 10, 5);
  assert_int_equal(dlcp_wire_bitmap_decode(&b, buf, len), DLCP_ERR_BAD_LENGTH);
  /* Varints: truncated, non-minimal, too long, overflowing. */
  BM(100, 0, 100, 0, 1, 0, 0x85);
  assert_int_equal(dlcp_wire_bitmap_decode(&b, buf, len), DLCP_ERR_BAD_LENGTH);
  BM(100, 0, 100, 0, 1, 0x80, 0x00, 5);
  assert_int_equal(dlcp_wire_bitmap_decode(&b, buf, len), DLCP_ERR_BAD_LENGTH);
  BM(100, 0, 100, 0, 1, 0, 0x85, 0x80, 0x00);
  assert_int_equal(dlcp_wire_bitmap_decode(&b, buf, len), DLCP_ERR_BAD_LENGTH);
  BM(UINT32_MAX, 0, UINT32_MAX, 0, 1, 0, 0xFF, 0xFF, 0xFF, 0xFF, 0x10);
  assert_int_equal(dlcp_wire_bitmap_decode(&b, buf, len), DLCP_ERR_BAD_LENGTH);
  BM(UINT32_MAX, 0, UINT32_MAX, 0, 1, 0, 0x81, 0x80, 0x80, 0x80, 0x80, 0x00);
  assert_int_equal(dlcp_wire_bitmap_decode(&b, buf, len), DLCP_ERR_BAD_LENGTH);
  /* Ranges: empty, adjacent, overlapping the window end, wrapping. */
  BM(100, 0, 100, 0, 1, 0, 0);
  assert_int_equal(dlcp_wire_bitmap_decode(&b, buf, len),
                   DLCP_ERR_INVALID_ARGUMENT);
  BM(100, 0, 100, 0, 2, 0, 5, 0, 5);
  assert_int_equal(dlcp_wire_bitmap_decode(&b, buf, len),
                   DLCP_ERR_INVALID_ARGUMENT);
  BM(100, 0, 100, 0, 1, 95, 6);
  assert_int_equal(dlcp_wire_bitmap_decode(&b, buf, len),
                   DLCP_ERR_INVALID_ARGUMENT);
  BM(100, 0, 100, 0, 1, 101, 1);
  assert_int_equal(dlcp_wire_bitmap_decode(&b, buf, len),
                   DLCP_ERR_INVALID_ARGUMENT);
  BM(100, 0, 100, 0, 1, 100, 1);
  assert_int_equal(dlcp_wire_bitmap_decode(&b, buf, len),
                   DLCP_ERR_INVALID_ARGUMENT);
  BM(UINT32_MAX, 10, UINT32_MAX, 0, 2, 0, 1, 0xFF, 0xFF, 0xFF, 0xFF, 0x0F, 1);
  assert_int_equal(dlcp_wire_bitmap_decode(&b, buf, len),
                   DLCP_ERR_INVALID_ARGUMENT);
  BM(100, 90, 100, 0, 1, 0, 0xFF, 0xFF, 0xFF, 0xFF, 0x0F);
  assert_int_equal(dlcp_wire_bitmap_decode(&b, buf, len),
                   DLCP_ERR_INVALID_ARGUMENT);
  /* xfer 0. */
  BM0(100, 100, 100, 100);
  dlcp_put_u32(buf + 8, 0);
  assert_int_equal(dlcp_wire_bitmap_decode(&b, buf, len),
                   DLCP_ERR_INVALID_ARGUMENT);
#undef BM
#undef BM0
}

static void test_bitmap_walk_matches_words(void **state) {
  uint64_t seed = 2024;
  uint8_t *buf = malloc(DLCP_WIRE_CTRL_MAX);
  int iter;

  (void)state;
  assert_non_null(buf);
  for (iter = 0; iter < 200; ++iter) {
    uint32_t nsegs = (uint32_t)(rng_next(&seed) % 5000);
    uint64_t *w = words_all_held(nsegs);
    size_t nw = nwords(nsegs), k;
    unsigned mode = (unsigned)(rng_next(&seed) % 4);
    uint32_t first = nsegs ? (uint32_t)(rng_next(&seed) % (nsegs + 1)) : 0;

    /* Random words, sparse loss, bursts, and dense loss. */
    for (k = 0; k < nw; ++k) {
      uint64_t a = rng_next(&seed), c = rng_next(&seed);

      switch (mode) {
      case 0:
        w[k] = a;
        break;
      case 1:
        w[k] = ~(a & c & rng_next(&seed));
        break;
      case 2:
        w[k] = (a % 3 == 0) ? 0 : ~(uint64_t)0;
        break;
      default:
        w[k] = a & c;
        break;
      }
    }
    (void)bitmap_check(w, nsegs, first, DLCP_WIRE_CTRL_MAX, buf, NULL);
    (void)bitmap_check(w, nsegs, first, 64, buf, NULL);
    free(w);
  }
  free(buf);
}

/* ---- errors and memory ---- */

static void test_strerror(void **state) {
  static const int codes[] = {
#define CODE_(name, value, msg) DLCP_ERR_##name,
      DLCP_ERRNO_MAP(CODE_)
#undef CODE_
  };
  static const char *const msgs[] = {
#define MSG_(name, value, msg) msg,
      DLCP_ERRNO_MAP(MSG_)
#undef MSG_
  };
  const size_t n = sizeof(codes) / sizeof(codes[0]);
  size_t i, j;

  (void)state;
  assert_string_equal(dlcp_strerror(0), "success");
  for (i = 0; i < n; ++i) {
    const char *s = dlcp_strerror(codes[i]);

    assert_non_null(s);
    assert_string_equal(s, msgs[i]);
    assert_true(strcmp(s, "success") != 0);
    assert_true(strcmp(s, "unknown error") != 0);
    for (j = 0; j < i; ++j) {
      assert_true(strcmp(s, dlcp_strerror(codes[j])) != 0);
    }
    assert_int_equal(dlcp_err_is_fatal(codes[i]) != 0,
                     codes[i] <= DLCP_ERR_FATAL_BELOW);
  }
  assert_string_equal(dlcp_strerror(-2), strerror(2));
  assert_string_equal(dlcp_strerror(-22), strerror(22));
  /* Strings are static: an earlier one survives later calls. */
  {
    const char *a = dlcp_strerror(-2);
    const char *u = dlcp_strerror(-199);

    (void)dlcp_strerror(-198);
    (void)dlcp_strerror(-3);
    assert_string_equal(a, strerror(2));
    assert_non_null(u);
    assert_true(strlen(u) > 0);
    assert_true(strlen(u) < 200);
  }
  assert_string_equal(dlcp_strerror(-200), "unknown error");
  assert_string_equal(dlcp_strerror(-300), "unknown error");
  assert_string_equal(dlcp_strerror(1), "unknown error");
  assert_string_equal(dlcp_strerror(INT32_MIN), "unknown error");
  assert_true(dlcp_err_is_fatal(DLCP_ERR_NOMEM));
  assert_true(dlcp_err_is_fatal(DLCP_ERR_INTERNAL));
  assert_false(dlcp_err_is_fatal(0));
  assert_false(dlcp_err_is_fatal(DLCP_ERR_TRUNCATED));
  assert_false(dlcp_err_is_fatal(-2));
}

static void test_note_round_trip_and_errors(void **state) {
  (void)state;
  uint8_t buf[DLCP_WIRE_NOTE_LEN + 4];
  dlcp_wire_note n = {.job = 0xA1B2C3D4u, .op = 77, .value = UINT64_MAX - 5};
  assert_int_equal(dlcp_wire_note_encode(buf, sizeof(buf), &n),
                   DLCP_WIRE_NOTE_LEN);
  dlcp_wire_preamble pre;
  assert_int_equal(dlcp_wire_peek(&pre, buf, DLCP_WIRE_NOTE_LEN), 0);
  assert_int_equal(pre.type, DLCP_WIRE_NOTE);
  dlcp_wire_note out;
  assert_int_equal(dlcp_wire_note_decode(&out, buf, DLCP_WIRE_NOTE_LEN), 0);
  assert_int_equal(out.job, n.job);
  assert_int_equal(out.op, 77);
  assert_true(out.value == n.value);
  for (size_t len = 0; len < DLCP_WIRE_NOTE_LEN; len++) {
    assert_true(dlcp_wire_note_decode(&out, buf, len) < 0);
  }
  assert_true(dlcp_wire_note_decode(&out, buf, DLCP_WIRE_NOTE_LEN + 1) < 0);
  assert_int_equal(dlcp_wire_note_encode(buf, DLCP_WIRE_NOTE_LEN - 1, &n),
                   DLCP_ERR_BUFFER_TOO_SMALL);
  dlcp_wire_note_encode(buf, sizeof(buf), &n);
  buf[20] = 1; /* reserved */
  assert_int_equal(dlcp_wire_note_decode(&out, buf, DLCP_WIRE_NOTE_LEN),
                   DLCP_ERR_INVALID_ARGUMENT);
  dlcp_wire_note_encode(buf, sizeof(buf), &n);
  buf[8] = 1; /* a transfer id on a note */
  assert_int_equal(dlcp_wire_note_decode(&out, buf, DLCP_WIRE_NOTE_LEN),
                   DLCP_ERR_INVALID_ARGUMENT);
}

static void test_offer_round_trip_and_errors(void **state) {
  (void)state;
  uint8_t buf[DLCP_WIRE_OFFER_LEN + 4];
  dlcp_wire_offer o = {.job = 0xA1B2C3D4u,
                       .tensor = 0x80000001u,
                       .size = (UINT64_C(1) << 40) + 3};
  assert_int_equal(dlcp_wire_offer_encode(buf, sizeof(buf), &o),
                   DLCP_WIRE_OFFER_LEN);
  dlcp_wire_preamble pre;
  assert_int_equal(dlcp_wire_peek(&pre, buf, DLCP_WIRE_OFFER_LEN), 0);
  assert_int_equal(pre.type, DLCP_WIRE_OFFER);
  assert_int_equal(pre.xfer, 0);
  dlcp_wire_offer out;
  assert_int_equal(dlcp_wire_offer_decode(&out, buf, DLCP_WIRE_OFFER_LEN), 0);
  assert_int_equal(out.job, o.job);
  assert_int_equal(out.tensor, o.tensor);
  assert_true(out.size == o.size);
  for (size_t len = 0; len < DLCP_WIRE_OFFER_LEN; len++) {
    assert_true(dlcp_wire_offer_decode(&out, buf, len) < 0);
  }
  assert_true(dlcp_wire_offer_decode(&out, buf, DLCP_WIRE_OFFER_LEN + 1) < 0);
  assert_int_equal(dlcp_wire_offer_encode(buf, DLCP_WIRE_OFFER_LEN - 1, &o),
                   DLCP_ERR_BUFFER_TOO_SMALL);
  assert_int_equal(dlcp_wire_offer_encode(buf, sizeof(buf), NULL),
                   DLCP_ERR_INVALID_ARGUMENT);
  /* A NOTE has its length: decodable as NOTE, not as OFFER, and back. */
  dlcp_wire_note n;
  assert_int_equal(dlcp_wire_note_decode(&n, buf, DLCP_WIRE_OFFER_LEN),
                   DLCP_ERR_BAD_TYPE);
  dlcp_wire_offer_encode(buf, sizeof(buf), &o);
  buf[20] = 1; /* reserved */
  assert_int_equal(dlcp_wire_offer_decode(&out, buf, DLCP_WIRE_OFFER_LEN),
                   DLCP_ERR_INVALID_ARGUMENT);
  dlcp_wire_offer_encode(buf, sizeof(buf), &o);
  buf[8] = 1; /* a transfer id: no START has named one */
  assert_int_equal(dlcp_wire_offer_decode(&out, buf, DLCP_WIRE_OFFER_LEN),
                   DLCP_ERR_INVALID_ARGUMENT);
  dlcp_wire_offer_encode(buf, sizeof(buf), &o);
  buf[12] = 31; /* the length field */
  assert_true(dlcp_wire_offer_decode(&out, buf, DLCP_WIRE_OFFER_LEN) < 0);
}

static void test_eager_round_trip_and_errors(void **state) {
  (void)state;
  uint8_t payload[100];
  for (size_t i = 0; i < sizeof(payload); i++) {
    payload[i] = (uint8_t)(i * 7 + 3);
  }
  uint8_t buf[DLCP_WIRE_EAGER_HDR_LEN + sizeof(payload)];
  dlcp_wire_eager e = {.job = 0x0BADF00Du, .tensor = 0x80012345u,
                       .layer = 513, .priority = 5};
  assert_int_equal(dlcp_wire_eager_encode(buf, sizeof(buf), &e, payload,
                                          sizeof(payload)),
                   (dlcp_ssize)sizeof(buf));
  dlcp_wire_preamble pre;
  assert_int_equal(dlcp_wire_peek(&pre, buf, 16), 0);
  assert_int_equal(pre.type, DLCP_WIRE_EAGER);
  assert_int_equal(pre.len, sizeof(buf));
  dlcp_wire_eager out;
  const uint8_t *pl;
  size_t pl_len;
  assert_int_equal(dlcp_wire_eager_decode(&out, &pl, &pl_len, buf,
                                          sizeof(buf)), 0);
  assert_int_equal(out.job, e.job);
  assert_int_equal(out.tensor, e.tensor);
  assert_int_equal(out.layer, 513);
  assert_int_equal(out.priority, 5);
  assert_int_equal(pl_len, sizeof(payload));
  assert_memory_equal(pl, payload, sizeof(payload));
  /* Truncated anywhere: never decodes. */
  for (size_t len = 0; len < sizeof(buf); len++) {
    assert_true(dlcp_wire_eager_decode(&out, &pl, &pl_len, buf, len) < 0);
  }
  /* An empty tensor is a header alone. */
  assert_int_equal(dlcp_wire_eager_encode(buf, DLCP_WIRE_EAGER_HDR_LEN, &e,
                                          NULL, 0),
                   DLCP_WIRE_EAGER_HDR_LEN);
  assert_int_equal(dlcp_wire_eager_decode(&out, &pl, &pl_len, buf,
                                          DLCP_WIRE_EAGER_HDR_LEN), 0);
  assert_int_equal(pl_len, 0);
  /* Encoder arguments. */
  assert_int_equal(dlcp_wire_eager_encode(buf, sizeof(buf) - 1, &e, payload,
                                          sizeof(payload)),
                   DLCP_ERR_BUFFER_TOO_SMALL);
  assert_int_equal(dlcp_wire_eager_encode(buf, sizeof(buf), &e, NULL, 4),
                   DLCP_ERR_INVALID_ARGUMENT);
  e.priority = 8;
  assert_int_equal(dlcp_wire_eager_encode(buf, sizeof(buf), &e, payload, 4),
                   DLCP_ERR_INVALID_ARGUMENT);
  e.priority = 0;
  assert_int_equal(dlcp_wire_eager_encode(buf, sizeof(buf), &e, payload,
                                          DLCP_WIRE_CTRL_MAX),
                   DLCP_ERR_INVALID_ARGUMENT);
  /* Reserved bits, a transfer id, unknown flags: rejected. */
  dlcp_wire_eager_encode(buf, sizeof(buf), &e, payload, sizeof(payload));
  buf[23] = 1;
  assert_int_equal(dlcp_wire_eager_decode(&out, &pl, &pl_len, buf,
                                          sizeof(buf)),
                   DLCP_ERR_INVALID_ARGUMENT);
  buf[23] = 0;
  buf[22] = 0x08;
  assert_int_equal(dlcp_wire_eager_decode(&out, &pl, &pl_len, buf,
                                          sizeof(buf)),
                   DLCP_ERR_INVALID_ARGUMENT);
  buf[22] = 0;
  buf[8] = 1;
  assert_int_equal(dlcp_wire_eager_decode(&out, &pl, &pl_len, buf,
                                          sizeof(buf)),
                   DLCP_ERR_INVALID_ARGUMENT);
  buf[8] = 0;
  /* A length past the control maximum is a framing error. */
  dlcp_put_u32(buf + 12, DLCP_WIRE_CTRL_MAX + 1);
  assert_int_equal(dlcp_wire_peek(&pre, buf, 16), DLCP_ERR_BAD_LENGTH);
}

/* A CDATA carries a whole control message (rest 0) or a piece of one with
 * the bytes of the message still to come; a piece can be one byte, and
 * no piece may announce a message over DLCP_WIRE_CTRL_MAX. */
static void test_cdata_pieces(void **state) {
  (void)state;
  uint8_t buf[64];
  dlcp_wire_cdata h = {.job = 7,
                       .cseq = 1,
                       .ack = 2,
                       .rest = 1000,
                       .tx_ts = 123456789012345u,
                       .inner_len = 1};
  dlcp_wire_cdata d;

  assert_int_equal(dlcp_wire_cdata_encode_header(buf, sizeof(buf), &h),
                   DLCP_WIRE_CDATA_HDR_LEN);
  buf[DLCP_WIRE_CDATA_HDR_LEN] = 0x5A;
  assert_int_equal(dlcp_wire_cdata_decode(&d, buf, DLCP_WIRE_CDATA_HDR_LEN + 1),
                   0);
  assert_int_equal(d.job, 7);
  assert_int_equal(d.cseq, 1);
  assert_int_equal(d.ack, 2);
  assert_int_equal(d.rest, 1000);
  assert_true(d.tx_ts == 123456789012345u);
  assert_int_equal(d.inner_len, 1);
  assert_int_equal(d.inner[0], 0x5A);
  /* The largest message: its first piece may announce the rest of it. */
  h.rest = DLCP_WIRE_CTRL_MAX - 1;
  assert_int_equal(dlcp_wire_cdata_encode_header(buf, sizeof(buf), &h),
                   DLCP_WIRE_CDATA_HDR_LEN);
  h.rest = DLCP_WIRE_CTRL_MAX;
  assert_int_equal(dlcp_wire_cdata_encode_header(buf, sizeof(buf), &h),
                   DLCP_ERR_INVALID_ARGUMENT);
  h.rest = 0;
  h.inner_len = 0;
  assert_int_equal(dlcp_wire_cdata_encode_header(buf, sizeof(buf), &h),
                   DLCP_ERR_INVALID_ARGUMENT);
  /* Decoded: one byte more than a message may have is refused. */
  h.inner_len = 1;
  assert_int_equal(dlcp_wire_cdata_encode_header(buf, sizeof(buf), &h),
                   DLCP_WIRE_CDATA_HDR_LEN);
  dlcp_put_u32(buf + 8, DLCP_WIRE_CTRL_MAX);
  assert_int_equal(dlcp_wire_cdata_decode(&d, buf, DLCP_WIRE_CDATA_HDR_LEN + 1),
                   DLCP_ERR_BAD_LENGTH);
  /* An empty CDATA is no piece at all. */
  assert_int_equal(dlcp_wire_cdata_encode_header(buf, sizeof(buf), &h),
                   DLCP_WIRE_CDATA_HDR_LEN);
  dlcp_put_u32(buf + 12, DLCP_WIRE_CDATA_HDR_LEN);
  assert_true(dlcp_wire_cdata_decode(&d, buf, DLCP_WIRE_CDATA_HDR_LEN) < 0);
}

/* A CACK reports needless copies as a count and the latest's cseq; a
 * cseq without a count is refused both ways.  Its hold rides in the
 * preamble's xfer word. */
static void test_cack_early_copies(void **state) {
  (void)state;
  uint8_t buf[DLCP_WIRE_CACK_LEN];
  dlcp_wire_cack c = {.job = 7,
                      .next = 5,
                      .sack = 1,
                      .early = 3,
                      .early_seq = 0,
                      .echo_ts = 42,
                      .hold_ns = 1000001};
  dlcp_wire_cack d;

  assert_int_equal(dlcp_wire_cack_encode(buf, sizeof(buf), &c),
                   DLCP_WIRE_CACK_LEN);
  assert_int_equal(dlcp_get_u32(buf + 8), 1000001);
  assert_int_equal(dlcp_wire_cack_decode(&d, buf, sizeof(buf)), 0);
  assert_int_equal(d.hold_ns, 1000001);
  assert_int_equal(d.early, 3);
  assert_int_equal(d.early_seq, 0);
  assert_int_equal(d.next, 5);
  assert_int_equal(d.sack, 1);
  assert_true(d.echo_ts == 42);
  c.early = 0;
  c.early_seq = 4;
  assert_int_equal(dlcp_wire_cack_encode(buf, sizeof(buf), &c),
                   DLCP_ERR_INVALID_ARGUMENT);
  dlcp_put_u32(buf + 24, 0);
  dlcp_put_u32(buf + 28, 4);
  assert_int_equal(dlcp_wire_cack_decode(&d, buf, sizeof(buf)),
                   DLCP_ERR_INVALID_ARGUMENT);
}

static void test_data_decode_header_matches_whole(void **state) {
  (void)state;
  uint8_t pkt[DLCP_WIRE_DATA_HDR_LEN + 300];
  memset(pkt, 0x5A, sizeof(pkt));
  dlcp_wire_data d = {.job = 3, .xfer = 9, .flags = 0x2B, .path = 2,
                      .layer = 7, .tensor = 11, .seq = 5, .offset = 600,
                      .tx_ts = 123456789, .payload_len = 300};
  assert_int_equal(dlcp_wire_data_encode(pkt, sizeof(pkt), &d),
                   DLCP_WIRE_DATA_HDR_LEN);
  dlcp_wire_data whole, head;
  memset(&whole, 0, sizeof(whole)); /* padding compared below */
  memset(&head, 0, sizeof(head));
  const uint8_t *payload;
  assert_int_equal(dlcp_wire_data_decode(&whole, &payload, pkt, sizeof(pkt)),
                   0);
  assert_int_equal(dlcp_wire_data_decode_header(&head, pkt,
                                                DLCP_WIRE_DATA_HDR_LEN,
                                                sizeof(pkt)),
                   0);
  assert_memory_equal(&whole, &head, sizeof(whole));
  /* The datagram length must be the preamble's; the header complete. */
  assert_int_equal(dlcp_wire_data_decode_header(&head, pkt,
                                                DLCP_WIRE_DATA_HDR_LEN,
                                                sizeof(pkt) - 1),
                   DLCP_ERR_TRUNCATED);
  assert_int_equal(dlcp_wire_data_decode_header(&head, pkt,
                                                DLCP_WIRE_DATA_HDR_LEN,
                                                sizeof(pkt) + 1),
                   DLCP_ERR_BAD_LENGTH);
  assert_int_equal(dlcp_wire_data_decode_header(&head, pkt,
                                                DLCP_WIRE_DATA_HDR_LEN - 1,
                                                sizeof(pkt)),
                   DLCP_ERR_TRUNCATED);
  pkt[16] = 0xFF; /* unknown flags: the same verdict as the whole decode */
  assert_int_equal(dlcp_wire_data_decode_header(&head, pkt,
                                                DLCP_WIRE_DATA_HDR_LEN,
                                                sizeof(pkt)),
                   dlcp_wire_data_decode(&whole, &payload, pkt, sizeof(pkt)));
}

static void test_mem_default(void **state) {
  const dlcp_mem *m = dlcp_mem_default();
  uint8_t *p;
  uint32_t *z;
  size_t i;

  (void)state;
  assert_non_null(m);
  assert_ptr_equal(m, dlcp_mem_default());
  p = m->malloc(16, m->user);
  assert_non_null(p);
  memset(p, 7, 16);
  p = m->realloc(p, 4096, m->user);
  assert_non_null(p);
  assert_int_equal(p[15], 7);
  m->free(p, m->user);
  z = m->calloc(100, sizeof(*z), m->user);
  assert_non_null(z);
  for (i = 0; i < 100; ++i) {
    assert_int_equal(z[i], 0);
  }
  m->free(z, m->user);
  m->free(NULL, m->user);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_data_roundtrip),
      cmocka_unit_test(test_data_encode_errors),
      cmocka_unit_test(test_data_decode_errors),
      cmocka_unit_test(test_data_check_bounds),
      cmocka_unit_test(test_ack_roundtrip),
      cmocka_unit_test(test_start_roundtrip),
      cmocka_unit_test(test_start_decode_errors),
      cmocka_unit_test(test_probe_stop_finish_roundtrip),
      cmocka_unit_test(test_every_truncation),
      cmocka_unit_test(test_every_header_corruption),
      cmocka_unit_test(test_garbage),
      cmocka_unit_test(test_bad_preamble),
      cmocka_unit_test(test_bitmap_patterns),
      cmocka_unit_test(test_bitmap_gib_fits),
      cmocka_unit_test(test_bitmap_windowing),
      cmocka_unit_test(test_bitmap_bounded_window),
      cmocka_unit_test(test_bitmap_decode_errors),
      cmocka_unit_test(test_bitmap_walk_matches_words),
      cmocka_unit_test(test_strerror),
      cmocka_unit_test(test_note_round_trip_and_errors),
      cmocka_unit_test(test_offer_round_trip_and_errors),
      cmocka_unit_test(test_eager_round_trip_and_errors),
      cmocka_unit_test(test_cdata_pieces),
      cmocka_unit_test(test_cack_early_copies),
      cmocka_unit_test(test_data_decode_header_matches_whole),
      cmocka_unit_test(test_mem_default),
  };

  return cmocka_run_group_tests(tests, NULL, NULL);
}
