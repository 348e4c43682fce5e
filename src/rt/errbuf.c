/*
 * errbuf.c: formatting of runtime error messages.  Messages are built with
 * vsnprintf into a fixed buffer so that reporting an error never allocates
 * and therefore cannot itself fail on the error path.
 */
#include "rt/errbuf.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void dlcp_errbuf_clear(dlcp_errbuf *eb) {
  if (eb == NULL) {
    return;
  }
  eb->code = 0;
  eb->msg[0] = '\0';
}

int dlcp_errbuf_set(dlcp_errbuf *eb, int code, const char *fmt, ...) {
  va_list ap;
  if (eb == NULL) {
    return code;
  }
  eb->code = code;
  va_start(ap, fmt);
  vsnprintf(eb->msg, sizeof(eb->msg), fmt, ap);
  va_end(ap);
  return code;
}

int dlcp_errbuf_prefix(dlcp_errbuf *eb, int fallback_code, const char *fmt,
                       ...) {
  char head[DLCP_ERRBUF_MSG_LEN];
  size_t cap = sizeof(eb->msg) - 1; /* room for text, NUL excluded */
  size_t head_len;
  size_t old_len;
  va_list ap;
  if (eb == NULL) {
    return fallback_code;
  }
  if (eb->code == 0) {
    eb->code = fallback_code;
  }
  va_start(ap, fmt);
  vsnprintf(head, sizeof(head), fmt, ap);
  va_end(ap);
  /* Keep "head: " whole and cut the old message's tail if it must go. */
  head_len = strlen(head);
  if (head_len + 2 > cap) {
    head_len = cap - 2;
  }
  old_len = strlen(eb->msg);
  if (old_len > cap - head_len - 2) {
    old_len = cap - head_len - 2;
  }
  memmove(eb->msg + head_len + 2, eb->msg, old_len);
  memcpy(eb->msg, head, head_len);
  eb->msg[head_len] = ':';
  eb->msg[head_len + 1] = ' ';
  eb->msg[head_len + 2 + old_len] = '\0';
  return eb->code;
}

void dlcp_fmt(char *buf, size_t len, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, len, fmt, ap);
  va_end(ap);
}

void dlcp_copy_str(char *buf, size_t len, const char *s) {
  size_t n = strnlen(s, len - 1);
  memcpy(buf, s, n);
  buf[n] = '\0';
}

void dlcp_ranklist_init(dlcp_ranklist *l, char *buf, size_t len) {
  *l = (dlcp_ranklist){
      .buf = buf, .len = len, .used = 0, .listed = 0, .count = 0};
  if (len > 0) {
    buf[0] = '\0';
  }
}

void dlcp_ranklist_add(dlcp_ranklist *l, uint32_t rank) {
  l->count++;
  if (l->listed < 32 && l->used + 16 < l->len) {
    int n = snprintf(l->buf + l->used, l->len - l->used, "%s%" PRIu32,
                     l->listed > 0 ? ", " : "", rank);
    l->used += n > 0 ? (size_t)n : 0;
    l->listed++;
  }
}

void dlcp_ranklist_end(dlcp_ranklist *l) {
  if (l->count > l->listed && l->used + 24 < l->len) {
    snprintf(l->buf + l->used, l->len - l->used, " and %" PRIu32 " more",
             l->count - l->listed);
  }
}
