/*
 * fuzz_bitmap.c: libFuzzer target for dlcp_wire_bitmap_decode() and
 * dlcp_wire_bitmap_next().  For an accepted BITMAP it walks every range and
 * checks what the decoder promises (ranges non-empty, increasing, inside
 * the window, exactly nranges), then rebuilds a holdings bit array from the
 * ranges and re-encodes it with a buffer of the input's size: the bytes
 * must come back unchanged, window cut included.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "wire/wire.h"

/* Larger tensors are walked but not re-encoded: the bit array would cost
 * more memory and time per input than the extra coverage is worth. */
#define MAX_REENCODE_SEGS (1u << 20)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Clears bits [start, start + count) a word at a time where possible. */
static void clear_bits(uint64_t *w, uint64_t start, uint64_t count) {
  uint64_t i = start;
  uint64_t end = start + count;

  while (i < end && i % 64 != 0) {
    w[i / 64] &= ~((uint64_t)1 << (i % 64));
    ++i;
  }
  while (end - i >= 64) {
    w[i / 64] = 0;
    i += 64;
  }
  while (i < end) {
    w[i / 64] &= ~((uint64_t)1 << (i % 64));
    ++i;
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  dlcp_wire_bitmap b;
  dlcp_wire_range r;
  size_t cursor = 0;
  uint32_t prev;
  uint64_t last_end;
  uint32_t nr = 0;
  uint64_t missing = 0;
  uint64_t *w = NULL;
  size_t nw = 0;
  uint8_t *out;

  if (dlcp_wire_bitmap_decode(&b, data, size) != 0) {
    return 0;
  }
  if (b.first > b.end || b.end > b.nsegs || b.have > b.nsegs ||
      b.ranges != data + DLCP_WIRE_BITMAP_HDR_LEN ||
      b.ranges_len != size - DLCP_WIRE_BITMAP_HDR_LEN) {
    abort();
  }
  if (b.nsegs <= MAX_REENCODE_SEGS) {
    nw = ((size_t)b.nsegs + 63) / 64;
    w = malloc((nw ? nw : 1) * sizeof(*w));
    if (w == NULL) {
      abort();
    }
    memset(w, 0xFF, (nw ? nw : 1) * sizeof(*w));
  }
  prev = b.first;
  last_end = b.first;
  while (dlcp_wire_bitmap_next(&b, &cursor, &prev, &r)) {
    /* Non-empty, inside the window, after (and not touching) the previous
     * range except for a first range at the window start. */
    if (r.count == 0 || r.start < last_end || (nr > 0 && r.start == last_end) ||
        (uint64_t)r.start + r.count > b.end || prev != r.start + r.count) {
      abort();
    }
    if (w != NULL) {
      clear_bits(w, r.start, r.count);
    }
    last_end = (uint64_t)r.start + r.count;
    missing += r.count;
    ++nr;
  }
  if (nr != b.nranges || cursor != b.ranges_len ||
      missing > (uint64_t)b.end - b.first) {
    abort();
  }
  if (w == NULL) {
    return 0;
  }
  /* A cut window ends where the first unlisted missing range starts. */
  if (b.end < b.nsegs) {
    clear_bits(w, b.end, 1);
  }
  out = malloc(size);
  if (out == NULL) {
    abort();
  }
  if (dlcp_wire_bitmap_encode_words(out, size, &b, w) != (dlcp_ssize)size ||
      memcmp(out, data, size) != 0) {
    abort();
  }
  free(out);
  free(w);
  return 0;
}
