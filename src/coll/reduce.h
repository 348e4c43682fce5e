/*
 * reduce.h: element-wise reductions for the collectives.
 *
 * dlcp_reduce_into combines a source buffer into a destination buffer
 * (dst[i] = dst[i] op src[i]); dlcp_reduce_finish applies the one
 * post-processing step an operation needs (AVG's division).  The
 * collectives call them on byte ranges of the user's tensors and of
 * received data, so neither function assumes any alignment: every element
 * is read and written through memcpy, which compilers turn into plain
 * (unaligned) vector loads.
 *
 * Semantics, per type:
 *   FLOAT32   IEEE arithmetic in float.  SUM/AVG follow IEEE (inf + -inf
 *             is NaN, NaN propagates).  MIN/MAX propagate NaN: if either
 *             operand is NaN the result is NaN (which NaN payload is not
 *             specified).  Between -0.0 and +0.0 MIN/MAX keep |dst|.
 *   FLOAT16,  converted to float exactly, combined in float, rounded back
 *   BFLOAT16  to nearest, ties to even, once per dlcp_reduce_into call (so a
 * sum of n inputs is rounded n - 1 times, like any pairwise reduction in the
 * half type).  Overflow gives inf; NaN stays a quiet NaN. INT32,    SUM wraps
 * modulo 2^32 / 2^64 (computed in unsigned INT64     arithmetic, so there is no
 * undefined behaviour); AVG is the wrapped sum divided by nranks, truncated
 * toward zero.
 */
#ifndef DLCP_COLL_REDUCE_H
#define DLCP_COLL_REDUCE_H

#include <stddef.h>
#include <stdint.h>

#include "dlcp/dlcp_types.h"

/* dlcp_dtype_size returns the size in bytes of one element of |dtype|, or 0
 * if |dtype| is not a dlcp_dtype. */
size_t dlcp_dtype_size(dlcp_dtype dtype);

/* dlcp_dtype_name and dlcp_redop_name return static lower-case names
 * ("float32", "sum"), or "?" for an unknown value. */
const char *dlcp_dtype_name(dlcp_dtype dtype);
const char *dlcp_redop_name(dlcp_redop op);

/*
 * dlcp_reduce_into sets dst[i] = dst[i] op src[i] for |count| elements of
 * |dtype|.  AVG accumulates like SUM; call dlcp_reduce_finish once on the
 * final sum.  |dst| and |src| must not overlap (they are restrict); either
 * may be unaligned.  Both are borrowed for the call only.
 *
 * Returns 0, or DLCP_ERR_INVALID_ARGUMENT for an unknown |dtype| or |op|
 * (nothing is written then).
 */
int dlcp_reduce_into(void *restrict dst, const void *restrict src, size_t count,
                     dlcp_dtype dtype, dlcp_redop op);

/*
 * dlcp_reduce_finish completes a reduction of |nranks| contributions held
 * in |buf| (|count| elements): for AVG it divides every element by
 * |nranks| (floats: IEEE division, rounded once; integers: truncation
 * toward zero); for SUM, MIN and MAX it does nothing.
 *
 * Returns 0, or DLCP_ERR_INVALID_ARGUMENT for an unknown |dtype| or |op| or
 * |nranks| == 0.
 */
int dlcp_reduce_finish(void *buf, size_t count, dlcp_dtype dtype,
                       dlcp_redop op, uint32_t nranks);

/* Scalar conversions, exposed for the tests and for drivers that present
 * half-precision results.  The to-half directions round to nearest, ties
 * to even; NaN stays a quiet NaN of the same sign. */
float dlcp_f16_to_f32(uint16_t h);
uint16_t dlcp_f32_to_f16(float f);
float dlcp_bf16_to_f32(uint16_t h);
uint16_t dlcp_f32_to_bf16(float f);

#endif /* DLCP_COLL_REDUCE_H */
