/*
 * errors.c: the text and the severity of dlcp's error codes.
 *
 * Both come from DLCP_ERRNO_MAP in dlcp_types.h, the same list that defines
 * the enum, so a new code gets its message without a second edit.  The
 * runtime reports failed system calls as negated errno values, which lie
 * in (-200, 0) below every DLCP_ERR_* code; those are described by libc.
 *
 * The strings must be static.  glibc's strerror() is not for unknown
 * values: it formats "Unknown error N" into a buffer it frees on the next
 * call, so on glibc we ask strerrordesc_np(), which returns a static string
 * or NULL, and fall back to strerror() elsewhere.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* strerrordesc_np */
#endif
#include <string.h>

#include "dlcp/dlcp_types.h"

/* errno values are small positive numbers; dlcp's own codes start at -201,
 * so everything above this bound and below zero is a negated errno. */
#define ERRNO_BOUND (-200)

const char *dlcp_strerror(int code) {
  switch (code) {
  case DLCP_OK:
    return "success";
#define DLCP_STRERROR_CASE_(name, value, msg)                                  \
  case DLCP_ERR_##name:                                                        \
    return msg;
    DLCP_ERRNO_MAP(DLCP_STRERROR_CASE_)
#undef DLCP_STRERROR_CASE_
  default:
    break;
  }
  if (code < 0 && code > ERRNO_BOUND) {
#if defined(__GLIBC__) &&                                                      \
    (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 32))
    const char *s = strerrordesc_np(-code);

    if (s != NULL) {
      return s;
    }
#else
    return strerror(-code);
#endif
  }
  return "unknown error";
}

int dlcp_err_is_fatal(int code) {
  return code <= DLCP_ERR_FATAL_BELOW;
}
