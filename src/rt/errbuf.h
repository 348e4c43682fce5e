/*
 * errbuf.h: an error code together with the sentence that explains it.
 *
 * The runtime's failures are about a particular peer, address, variable or
 * file, and a bare DLCP_ERR_TIMEOUT cannot say which.  Functions in src/rt
 * that can fail for such a reason take an optional dlcp_errbuf and fill it
 * with the code they return and a message naming the culprit, e.g.
 * "rendezvous: rank 3 (127.0.0.1:29500): no reply within 5000 ms".
 */
#ifndef DLCP_RT_ERRBUF_H
#define DLCP_RT_ERRBUF_H

#include <stddef.h>
#include <stdint.h>

/* Long enough for an address, a variable's value and a sentence. */
#define DLCP_ERRBUF_MSG_LEN 512

typedef struct dlcp_errbuf {
  int code;                      /* 0 or a negative DLCP_ERR_* / -errno */
  char msg[DLCP_ERRBUF_MSG_LEN]; /* NUL-terminated, "" when code == 0 */
} dlcp_errbuf;

/* dlcp_errbuf_clear resets |eb| (which may be NULL) to "no error". */
void dlcp_errbuf_clear(dlcp_errbuf *eb);

/*
 * dlcp_errbuf_set records |code| and the printf-style message in |eb| and
 * returns |code|, so a caller can write `return dlcp_errbuf_set(eb, ...)`.
 * |eb| may be NULL, in which case only |code| is returned.  A message
 * longer than the buffer is truncated, never overflowed.
 */
int dlcp_errbuf_set(dlcp_errbuf *eb, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/*
 * dlcp_errbuf_prefix prepends the printf-style text and ": " to the
 * message already in |eb| (which may be NULL) and returns eb->code (or
 * |fallback_code| for a NULL |eb|).  Used by a caller to add context such
 * as the rank it was talking to.
 */
int dlcp_errbuf_prefix(dlcp_errbuf *eb, int fallback_code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/*
 * dlcp_fmt is snprintf for messages that are cut to their buffer on
 * purpose (through vsnprintf, so gcc's truncation warning for fixed
 * buffers stays quiet where cutting is the point).
 */
void dlcp_fmt(char *buf, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/*
 * dlcp_copy_str copies |s| into |buf| of |len| bytes (len > 0), cut to
 * len - 1 bytes and always terminated: dlcp_fmt(buf, len, "%s", s) without
 * vsnprintf's cost (some 500 instructions), for the copies made on every
 * operation.
 */
void dlcp_copy_str(char *buf, size_t len, const char *s);

/*
 * dlcp_ranklist writes the ranks of a message ("waiting for ranks 2, 3,
 * 7 and 40 more"): the first 32 added, then how many more.  Init it on a
 * buffer, add ranks in order, end it; |count| is every rank added.
 */
typedef struct dlcp_ranklist {
  char *buf;
  size_t len, used;
  uint32_t listed, count;
} dlcp_ranklist;

void dlcp_ranklist_init(dlcp_ranklist *l, char *buf, size_t len);
void dlcp_ranklist_add(dlcp_ranklist *l, uint32_t rank);
void dlcp_ranklist_end(dlcp_ranklist *l);

#endif /* DLCP_RT_ERRBUF_H */
