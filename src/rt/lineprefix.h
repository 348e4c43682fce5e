/*
 * lineprefix.h: copy a byte stream to a file descriptor with a prefix in
 * front of every line, e.g. "[rank 3] ".  Used by dlcp-run to label the
 * output of each rank.
 */
#ifndef DLCP_RT_LINEPREFIX_H
#define DLCP_RT_LINEPREFIX_H

#include <stddef.h>

/* A line longer than this is split into several prefixed lines rather than
 * buffered without bound (a rank printing a megabyte without a newline). */
#define DLCP_LINEPREFIX_MAX_LINE 65536u
/* Longest prefix accepted, NUL excluded. */
#define DLCP_LINEPREFIX_MAX_PREFIX 64u

typedef struct dlcp_lineprefix {
  int out_fd;
  /* buf holds the prefix followed by the pending (incomplete) line, so a
   * finished line goes out in one write() and lines from different
   * streams written to the same fd never mix. */
  char *buf;
  size_t prefix_len;
  size_t len; /* bytes used in buf, prefix included */
  size_t cap;
  int write_error; /* first -errno from writing out_fd, 0 if none */
} dlcp_lineprefix;

/*
 * dlcp_lineprefix_init prepares |lp| to write to |out_fd| (not owned) with
 * |prefix| in front of every line.  Returns 0, DLCP_ERR_INVALID_ARGUMENT
 * (prefix too long) or DLCP_ERR_NOMEM.
 */
int dlcp_lineprefix_init(dlcp_lineprefix *lp, int out_fd, const char *prefix);

/*
 * dlcp_lineprefix_feed consumes |n| bytes of the stream: every completed
 * line is written at once, prefixed; the incomplete tail is kept.  A write
 * error on out_fd (e.g. EPIPE when the reader went away) is remembered in
 * write_error and further output is discarded, so the caller can keep
 * draining its children.  Returns 0 or DLCP_ERR_NOMEM.
 */
int dlcp_lineprefix_feed(dlcp_lineprefix *lp, const char *data, size_t n);

/*
 * dlcp_lineprefix_finish writes the pending incomplete line, if any, with
 * a newline added; call it at end of stream.
 */
void dlcp_lineprefix_finish(dlcp_lineprefix *lp);

/* dlcp_lineprefix_free releases the buffer (pending bytes are dropped). */
void dlcp_lineprefix_free(dlcp_lineprefix *lp);

#endif /* DLCP_RT_LINEPREFIX_H */
