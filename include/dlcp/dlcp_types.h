/*
 * dlcp_types.h: the vocabulary shared by every layer of dlcp: time stamps,
 * error codes and the pluggable allocator.
 *
 * This header depends on libc headers only, so the sans-I/O protocol core
 * (src/wire, src/proto, src/coll) can include it without pulling in the
 * runtime.
 */
#ifndef DLCP_TYPES_H
#define DLCP_TYPES_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Nanoseconds on the caller's monotonic clock. */
typedef uint64_t dlcp_tstamp;
/* A length of time in nanoseconds. */
typedef uint64_t dlcp_duration;
/* "No deadline": a time stamp later than any real one. */
#define DLCP_TSTAMP_NEVER UINT64_MAX

/* Signed byte count or negative DLCP_ERR_* code. */
typedef ptrdiff_t dlcp_ssize;

/*
 * The error list.  X(NAME, value, message).  Codes are negative; 0 is
 * success.  Codes at or below DLCP_ERR_FATAL_BELOW are fatal: the object that
 * returned them must be destroyed.  The enum and dlcp_strerror() are both
 * generated from this one list so they cannot drift apart (libuv's
 * UV_ERRNO_MAP).
 */
#define DLCP_ERRNO_MAP(X)                                                      \
  X(INVALID_ARGUMENT, -201, "invalid argument")                                \
  X(BUFFER_TOO_SMALL, -202, "buffer too small")                                \
  X(TRUNCATED, -203, "message truncated")                                      \
  X(BAD_MAGIC, -204, "not a dlcp message (bad magic)")                         \
  X(BAD_VERSION, -205, "unsupported protocol version")                         \
  X(BAD_TYPE, -206, "unknown message type")                                    \
  X(BAD_LENGTH, -207, "impossible length field")                               \
  X(BAD_OFFSET, -208, "offset outside the tensor")                             \
  X(FOREIGN_JOB, -209, "message belongs to another job")                       \
  X(UNKNOWN_TRANSFER, -210, "no such transfer")                                \
  X(SIZE_MISMATCH, -211, "sender and receiver disagree on tensor size")        \
  X(DUPLICATE, -212, "duplicate request")                                      \
  X(LIMIT, -213, "too many outstanding operations")                            \
  X(CANCELED, -214, "operation canceled")                                      \
  X(PEER_ABORTED, -215, "peer aborted the transfer")                           \
  X(TIMEOUT, -216, "no progress within the timeout")                           \
  X(NO_PROGRESS, -217, "retransmission rounds make no progress")              \
  X(PEER_CLOSED, -218, "peer closed the connection")                           \
  X(CONFIG, -219, "invalid configuration")                                     \
  X(SYSTEM, -220, "operating system call failed")                              \
  X(PENDING, -221, "not finished yet: wait again (not a failure)")             \
  X(NOMEM, -501, "out of memory")                                              \
  X(INTERNAL, -502, "internal error")

enum dlcp_error {
  DLCP_OK = 0,
#define DLCP_ERR_ENUM_(name, value, msg) DLCP_ERR_##name = (value),
  DLCP_ERRNO_MAP(DLCP_ERR_ENUM_)
#undef DLCP_ERR_ENUM_
};

/* Codes at or below this are fatal for the object that returned them. */
#define DLCP_ERR_FATAL_BELOW (-500)

/*
 * dlcp_strerror returns a static, human-readable description of |code|
 * (one of DLCP_ERR_*, 0, or a negated errno value from the runtime).  The
 * string is owned by the library and never freed.
 */
const char *dlcp_strerror(int code);

/*
 * dlcp_err_is_fatal returns nonzero if |code| means the object that
 * returned it can no longer be used.
 */
int dlcp_err_is_fatal(int code);

/*
 * dlcp_mem is the allocator every dlcp object allocates through
 * (ngtcp2_mem).  |user| is passed back to each function.  A NULL dlcp_mem
 * pointer anywhere in the API means dlcp_mem_default().
 */
typedef struct dlcp_mem {
  void *user;
  void *(*malloc)(size_t size, void *user);
  void (*free)(void *ptr, void *user);
  void *(*calloc)(size_t nmemb, size_t size, void *user);
  void *(*realloc)(void *ptr, size_t size, void *user);
} dlcp_mem;

/* dlcp_mem_default returns a static allocator backed by libc. */
const dlcp_mem *dlcp_mem_default(void);

/*
 * dlcp_dtype names the element type of a tensor handed to a collective.
 * FLOAT16 is IEEE 754 binary16 and BFLOAT16 is the upper half of a
 * binary32; both are reduced through float32 and rounded back to nearest,
 * ties to even.  Element sizes: 4, 2, 2, 4 and 8 bytes.
 */
typedef enum dlcp_dtype {
  DLCP_FLOAT32,
  DLCP_FLOAT16,
  DLCP_BFLOAT16,
  DLCP_INT32,
  DLCP_INT64
} dlcp_dtype;

/*
 * dlcp_redop names the reduction of a collective.  AVG sums and then
 * divides by the number of ranks once, at the end; for the integer types
 * the division truncates toward zero.  Integer SUM wraps modulo 2^bits.
 */
typedef enum dlcp_redop { DLCP_SUM, DLCP_AVG, DLCP_MIN, DLCP_MAX } dlcp_redop;

/*
 * dlcp_algo names a collective algorithm (docs/collectives.md).  AUTO
 * picks by collective, size, world size and topology.
 */
typedef enum dlcp_algo {
  DLCP_ALGO_AUTO,
  DLCP_ALGO_RING,
  DLCP_ALGO_RING_BYPASS,
  DLCP_ALGO_PS,
  DLCP_ALGO_HALVING_DOUBLING,
  DLCP_ALGO_RAT,
  DLCP_ALGO_DIRECT, /* all-reduce in one step: every rank sends its vector
                       to every other (small vectors) */
  DLCP_ALGO_RECURSIVE_DOUBLING, /* all-reduce in log2 n steps of whole-
                                   vector exchanges (small vectors) */
  DLCP_ALGO_INA,   /* all-reduce through the aggregation switch named by
                      DLCP_SWITCH (dlcp-switch; docs/ina.md); FLOAT32 or
                      INT32, SUM or AVG; never chosen by AUTO */
  DLCP_ALGO_RA_INA /* RA-INA: groups the switch has aggregators for go
                      through it, the others through the ring */
} dlcp_algo;

#ifdef __cplusplus
}
#endif

#endif /* DLCP_TYPES_H */
