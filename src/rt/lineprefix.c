/*
 * lineprefix.c: line splitting.  The buffer always starts with the prefix;
 * bytes are appended up to the next newline, and a completed line (prefix,
 * text, newline) is emitted with a single write loop.  Because the
 * launcher is one thread writing whole lines, lines from different ranks
 * interleave only at line boundaries.
 */
#include "rt/lineprefix.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dlcp/dlcp_types.h"

int dlcp_lineprefix_init(dlcp_lineprefix *lp, int out_fd, const char *prefix) {
  size_t plen = strlen(prefix);
  memset(lp, 0, sizeof(*lp));
  lp->out_fd = out_fd;
  if (plen > DLCP_LINEPREFIX_MAX_PREFIX) {
    return DLCP_ERR_INVALID_ARGUMENT;
  }
  /* Start small; most lines are short. */
  lp->cap = plen + 256;
  lp->buf = malloc(lp->cap);
  if (lp->buf == NULL) {
    return DLCP_ERR_NOMEM;
  }
  memcpy(lp->buf, prefix, plen);
  lp->prefix_len = plen;
  lp->len = plen;
  return 0;
}

/* emit writes buf[0..len) followed by a newline (already in place), then
 * resets the buffer to the bare prefix. */
static void emit(dlcp_lineprefix *lp) {
  const char *p = lp->buf;
  size_t left = lp->len;
  while (left > 0 && lp->write_error == 0) {
    ssize_t n = write(lp->out_fd, p, left);
    if (n >= 0) {
      p += n;
      left -= (size_t)n;
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      /* A non-blocking stdout inherited from the caller: wait for room
       * rather than drop part of a line. */
      struct pollfd pfd = {.fd = lp->out_fd, .events = POLLOUT, .revents = 0};
      (void)poll(&pfd, 1, -1);
    } else if (errno != EINTR) {
      lp->write_error = -errno;
    }
  }
  lp->len = lp->prefix_len;
}

/* reserve makes room for |extra| more bytes, growing geometrically. */
static int reserve(dlcp_lineprefix *lp, size_t extra) {
  size_t want = lp->len + extra;
  size_t cap = lp->cap;
  char *nbuf;
  if (want <= cap) {
    return 0;
  }
  while (cap < want) {
    cap *= 2;
  }
  nbuf = realloc(lp->buf, cap);
  if (nbuf == NULL) {
    return DLCP_ERR_NOMEM;
  }
  lp->buf = nbuf;
  lp->cap = cap;
  return 0;
}

int dlcp_lineprefix_feed(dlcp_lineprefix *lp, const char *data, size_t n) {
  while (n > 0) {
    const char *nl = memchr(data, '\n', n);
    size_t room = DLCP_LINEPREFIX_MAX_LINE - (lp->len - lp->prefix_len);
    size_t take = nl != NULL ? (size_t)(nl - data) + 1 : n;
    int split = 0;
    int rv;
    if (take > room) {
      /* Over-long line: emit what fits as its own line. */
      take = room;
      split = 1;
    }
    /* +1 for the newline a split line gets. */
    rv = reserve(lp, take + 1);
    if (rv != 0) {
      return rv;
    }
    memcpy(lp->buf + lp->len, data, take);
    lp->len += take;
    data += take;
    n -= take;
    if (split) {
      lp->buf[lp->len++] = '\n';
      emit(lp);
    } else if (lp->buf[lp->len - 1] == '\n' && lp->len > lp->prefix_len) {
      emit(lp);
    }
  }
  return 0;
}

void dlcp_lineprefix_finish(dlcp_lineprefix *lp) {
  if (lp->buf == NULL || lp->len == lp->prefix_len) {
    return;
  }
  if (reserve(lp, 1) != 0) {
    /* Cannot append the newline: still emit the text. */
    emit(lp);
    return;
  }
  lp->buf[lp->len++] = '\n';
  emit(lp);
}

void dlcp_lineprefix_free(dlcp_lineprefix *lp) {
  free(lp->buf);
  lp->buf = NULL;
  lp->len = lp->prefix_len = lp->cap = 0;
}
