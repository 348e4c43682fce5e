/*
 * mem.c: the default allocator, libc's malloc family behind the dlcp_mem
 * interface.  The table is a static const object, so it is shared by every
 * caller without any mutable global state; |user| is unused.
 */
#include <stdint.h>
#include <stdlib.h>

#include "base/zalloc.h"
#include "dlcp/dlcp_types.h"

static void *mem_malloc(size_t size, void *user) {
  (void)user;
  return malloc(size);
}

static void mem_free(void *ptr, void *user) {
  (void)user;
  free(ptr);
}

static void *mem_calloc(size_t nmemb, size_t size, void *user) {
  (void)user;
  if (size != 0 && nmemb > SIZE_MAX / size) {
    return NULL;
  }
  return dlcp_zalloc(nmemb * size);
}

static void *mem_realloc(void *ptr, size_t size, void *user) {
  (void)user;
  return realloc(ptr, size);
}

static const dlcp_mem mem_default = {
    NULL, mem_malloc, mem_free, mem_calloc, mem_realloc,
};

const dlcp_mem *dlcp_mem_default(void) {
  return &mem_default;
}
