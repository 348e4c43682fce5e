/*
 * Every block carries a 16-byte header with its size (dlcp_mem's free
 * does not pass one).  Blocks of at least SCRATCH_KEEP_MIN bytes go back
 * to a four-slot cache on free, evicting the oldest; an allocation of
 * exactly a cached size takes it back.  Collectives allocate the same
 * sizes operation after operation, so exact matching is enough.
 */
#include "rt/scratch.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define HDR 16u
/* Small blocks come and go through malloc cheaply, but one freed block of
 * ~128 KiB at the top of the heap makes glibc trim it (brk) and the next
 * operation fault it back in: a 4-rank 128 KiB PS all-reduce, whose
 * scratch is 96 KiB, took 80-90 us instead of 50-60. */
#define SCRATCH_KEEP_MIN (64u << 10)

static void *hdr_alloc(size_t size) {
  uint8_t *p = malloc(size + HDR);
  if (!p) {
    return NULL;
  }
  memcpy(p, &size, sizeof(size));
  return p + HDR;
}

static size_t size_of(const void *ptr) {
  size_t size;
  memcpy(&size, (const uint8_t *)ptr - HDR, sizeof(size));
  return size;
}

static void *scratch_malloc(size_t size, void *user) {
  dlcp_scratch *s = user;
  if (size >= SCRATCH_KEEP_MIN) {
    for (int i = 0; i < DLCP_SCRATCH_SLOTS; i++) {
      if (s->block[i] && s->size[i] == size) {
        void *p = s->block[i];
        s->block[i] = NULL;
        s->hits++;
        return p;
      }
    }
    s->misses++;
  }
  return hdr_alloc(size);
}

static void scratch_free(void *ptr, void *user) {
  dlcp_scratch *s = user;
  if (!ptr) {
    return;
  }
  size_t size = size_of(ptr);
  if (size >= SCRATCH_KEEP_MIN) {
    int slot = -1;
    for (int i = 0; i < DLCP_SCRATCH_SLOTS && slot < 0; i++) {
      if (!s->block[i]) {
        slot = i;
      }
    }
    if (slot < 0) {
      /* Full: the oldest (slot 0) goes, the rest move up. */
      free((uint8_t *)s->block[0] - HDR);
      memmove(&s->block[0], &s->block[1],
              (DLCP_SCRATCH_SLOTS - 1) * sizeof(s->block[0]));
      memmove(&s->size[0], &s->size[1],
              (DLCP_SCRATCH_SLOTS - 1) * sizeof(s->size[0]));
      slot = DLCP_SCRATCH_SLOTS - 1;
    }
    s->block[slot] = ptr;
    s->size[slot] = size;
    return;
  }
  free((uint8_t *)ptr - HDR);
}

static void *scratch_calloc(size_t nmemb, size_t size, void *user) {
  if (size != 0 && nmemb > SIZE_MAX / size) {
    return NULL;
  }
  void *p = scratch_malloc(nmemb * size, user);
  if (p) {
    memset(p, 0, nmemb * size);
  }
  return p;
}

static void *scratch_realloc(void *ptr, size_t size, void *user) {
  if (!ptr) {
    return scratch_malloc(size, user);
  }
  void *n = scratch_malloc(size, user);
  if (!n) {
    return NULL;
  }
  size_t old = size_of(ptr);
  memcpy(n, ptr, old < size ? old : size);
  scratch_free(ptr, user);
  return n;
}

void dlcp_scratch_init(dlcp_scratch *s) {
  memset(s, 0, sizeof(*s));
  s->mem.user = s;
  s->mem.malloc = scratch_malloc;
  s->mem.free = scratch_free;
  s->mem.calloc = scratch_calloc;
  s->mem.realloc = scratch_realloc;
}

void dlcp_scratch_release(dlcp_scratch *s) {
  for (int i = 0; i < DLCP_SCRATCH_SLOTS; i++) {
    if (s->block[i]) {
      free((uint8_t *)s->block[i] - HDR);
      s->block[i] = NULL;
    }
  }
}
