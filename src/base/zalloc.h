/*
 * zalloc.h: a zeroed allocation through malloc, for the objects made and
 * freed on every operation (a request, a run, a transfer).
 *
 * glibc's calloc (2.36, Debian 12) skips the per-thread cache that makes
 * such allocations cheap: each call went to _int_malloc (169 instructions
 * on average), about a tenth of the instructions of an 8-byte all-reduce
 * between two ranks (callgrind).  malloc and a memset use the cache; but
 * GCC folds that pair back into calloc at -O2, so an empty asm that may
 * read the new object stands between them.
 */
#ifndef DLCP_BASE_ZALLOC_H
#define DLCP_BASE_ZALLOC_H

#include <stdlib.h>
#include <string.h>

/* dlcp_zalloc returns |size| zeroed bytes the caller frees with free(),
 * or NULL if there is no memory. */
static inline void *dlcp_zalloc(size_t size) {
  void *p = malloc(size);
  if (p) {
    __asm__ volatile("" : : "r"(p) : "memory");
    memset(p, 0, size);
  }
  return p;
}

#endif
