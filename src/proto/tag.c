/*
 * Tagging runs once per tensor when its transfer starts, not per packet:
 * the median is estimated from a random sample with a quickselect over the
 * sampled magnitudes, then each segment's mean magnitude is compared with
 * it.  Gradients are read with memcpy because a segment of a byte buffer
 * need not be float-aligned.
 */
#include "proto/tag.h"

#include <math.h>
#include <stddef.h>
#include <string.h>

uint8_t dlcp_tag_priority(uint32_t layer, uint32_t nlayers, uint32_t nprio) {
  if (nlayers == 0 || nprio == 0) {
    return 0;
  }
  uint64_t p = (uint64_t)layer * nprio / nlayers;
  if (p >= nprio) {
    p = nprio - 1;
  }
  return (uint8_t)p;
}

size_t dlcp_tag_sample_size(size_t count, uint32_t permille) {
  if (count == 0) {
    return 0;
  }
  size_t n = (size_t)(((uint64_t)count * permille) / 1000);
  if (n == 0) {
    n = 1;
  }
  return n > count ? count : n;
}

static float magnitude(float v) {
  return isnan(v) ? INFINITY : fabsf(v);
}

static void swap_floats(float *a, float *b) {
  float t = *a;
  *a = *b;
  *b = t;
}

/* Wirth's quickselect for the k-th smallest of v[0..n).  Magnitudes hold
 * no NaN (see magnitude()), so the comparisons form a total order and the
 * scans cannot run off either end: the pivot stops them. */
static float select_kth(float *v, ptrdiff_t n, ptrdiff_t k) {
  ptrdiff_t lo = 0, hi = n - 1;
  while (lo < hi) {
    float pivot = v[lo + (hi - lo) / 2];
    ptrdiff_t i = lo, j = hi;
    do {
      while (v[i] < pivot) {
        i++;
      }
      while (pivot < v[j]) {
        j--;
      }
      if (i <= j) {
        swap_floats(&v[i], &v[j]);
        i++;
        j--;
      }
    } while (i <= j);
    if (k <= j) {
      hi = j;
    } else if (k >= i) {
      lo = i;
    } else {
      return v[k];
    }
  }
  return v[k];
}

float dlcp_tag_median_abs_f32(const float *g, size_t count, uint32_t permille,
                              dlcp_rng *rng, float *scratch) {
  size_t n = dlcp_tag_sample_size(count, permille);
  if (n == 0) {
    return 0.0f;
  }
  for (size_t i = 0; i < n; i++) {
    size_t idx = n == count ? i : (size_t)dlcp_rng_below(rng, count);
    float v;
    memcpy(&v, &g[idx], sizeof(v));
    scratch[i] = magnitude(v);
  }
  return select_kth(scratch, (ptrdiff_t)n, (ptrdiff_t)(n / 2));
}

int dlcp_tag_mean_abs_above(const float *g, size_t count, float median) {
  if (count == 0) {
    return 0;
  }
  double sum = 0.0;
  for (size_t i = 0; i < count; i++) {
    float v;
    memcpy(&v, &g[i], sizeof(v));
    sum += (double)magnitude(v);
  }
  return sum / (double)count > (double)median;
}
